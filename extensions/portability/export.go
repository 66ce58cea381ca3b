package portability

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

// issuePage is how many issues one owner call reads.
const issuePage = 200

// exported is the result of gathering a company.
type exported struct {
	pkg      *pkg
	manifest *Manifest
	counts   map[string]int
	warnings []string
}

// exporter gathers one company through the owners' methods.
type exporter struct {
	x         *Portability
	companyID string
	include   map[string]bool
	out       *exported
	// agentSlugs and projectSlugs map owner ids to the package's names.
	agentSlugs   map[string]string
	projectSlugs map[string]string
	assets       map[string]bool
}

// export gathers the groups of a company into a package.
func (x *Portability) export(ctx context.Context, companyID string, include map[string]bool) (*exported, error) {
	e := &exporter{x: x, companyID: companyID, include: include, agentSlugs: map[string]string{}, projectSlugs: map[string]string{},
		assets: map[string]bool{},
		out: &exported{pkg: newPkg(), counts: map[string]int{}, manifest: &Manifest{Kind: PackageKind, SchemaVersion: SchemaVersion,
			ExportedAt: time.Now().UTC().Truncate(time.Second), Agents: []string{}, Projects: []string{}, Issues: []string{},
			Routines: []string{}, Skills: []string{}, Assets: []Asset{}}}}
	for _, g := range allGroups {
		if include[g] {
			e.out.manifest.Include = append(e.out.manifest.Include, g)
		}
	}
	if err := e.company(ctx); err != nil {
		return nil, err
	}
	// Agents and projects are always read: issues and routines name them.
	if err := e.agents(ctx); err != nil {
		return nil, err
	}
	if err := e.projects(ctx); err != nil {
		return nil, err
	}
	if include[GroupSkills] {
		if err := e.skills(ctx); err != nil {
			return nil, err
		}
	}
	if include[GroupIssues] {
		if err := e.issues(ctx); err != nil {
			return nil, err
		}
		if err := e.routines(ctx); err != nil {
			return nil, err
		}
	}
	e.out.manifest.Counts = e.out.counts
	b, err := json.MarshalIndent(e.out.manifest, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("error encoding the manifest: %w", err)
	}
	e.out.pkg.put(ManifestFile, append(b, '\n'))
	return e.out, nil
}

// progress records and logs a group's count.
func (e *exporter) progress(group string, n int) {
	e.out.counts[group] = n
	e.x.log.Info("export progress", "companyId", e.companyID, "group", group, "count", n)
}

func (e *exporter) company(ctx context.Context) error {
	res, err := e.x.host.Companies.Get(ctx, &hostv1.GetCompanyRequest{CompanyId: e.companyID})
	if err != nil {
		return fmt.Errorf("error reading company %s: %w", e.companyID, err)
	}
	var c struct {
		ID                 string  `json:"id"`
		Name               string  `json:"name"`
		Description        *string `json:"description"`
		IssuePrefix        string  `json:"issuePrefix"`
		BudgetMonthlyCents int64   `json:"budgetMonthlyCents"`
		BrandColor         *string `json:"brandColor"`
	}
	if err := json.Unmarshal(res.CompanyJson, &c); err != nil {
		return fmt.Errorf("error decoding company %s: %w", e.companyID, err)
	}
	e.out.manifest.Source = ManifestSource{CompanyID: c.ID, CompanyName: c.Name}
	if !e.include[GroupCompany] {
		return nil
	}
	desc := ""
	if c.Description != nil {
		desc = *c.Description
	}
	b, err := markdown(CompanyFront{Name: c.Name, IssuePrefix: c.IssuePrefix, BudgetMonthlyCents: c.BudgetMonthlyCents, BrandColor: c.BrandColor}, desc)
	if err != nil {
		return err
	}
	e.out.pkg.put(CompanyFile, b)
	e.out.manifest.Company = CompanyFile
	e.progress(GroupCompany, 1)
	return nil
}

// agentRecord is an agent as the agents owner lists it.
type agentRecord struct {
	ID                 string          `json:"id"`
	Name               string          `json:"name"`
	Role               string          `json:"role"`
	Title              *string         `json:"title"`
	Icon               *string         `json:"icon"`
	Status             string          `json:"status"`
	ReportsTo          *string         `json:"reportsTo"`
	Capabilities       *string         `json:"capabilities"`
	AdapterType        string          `json:"adapterType"`
	AdapterConfig      json.RawMessage `json:"adapterConfig"`
	RuntimeConfig      json.RawMessage `json:"runtimeConfig"`
	BudgetMonthlyCents int64           `json:"budgetMonthlyCents"`
	Permissions        map[string]bool `json:"permissions"`
	DesiredSkills      []string        `json:"desiredSkills"`
	Metadata           json.RawMessage `json:"metadata"`
	URLKey             string          `json:"urlKey"`
}

func (e *exporter) agents(ctx context.Context) error {
	var list []*agentRecord
	if err := e.x.call(ctx, "agents.list", e.companyID, map[string]any{}, &list); err != nil {
		return err
	}
	taken := map[string]bool{}
	for _, a := range list {
		slug := a.URLKey
		if slug == "" {
			slug = slugify(a.Name)
		}
		e.agentSlugs[a.ID] = uniqueSlug(taken, slug)
	}
	if !e.include[GroupAgents] {
		return nil
	}
	for _, a := range list {
		meta := jsonObject(a.Metadata)
		// The built-in marker belongs to the built-in agent service of the exporting instance.
		delete(meta, "serviceBuiltInAgent")
		if len(meta) == 0 {
			meta = nil
		}
		f := AgentFront{Slug: e.agentSlugs[a.ID], Name: a.Name, Role: a.Role, Title: a.Title, Icon: a.Icon, AdapterType: a.AdapterType,
			AdapterConfig: jsonObject(a.AdapterConfig), RuntimeConfig: jsonObject(a.RuntimeConfig), BudgetMonthlyCents: a.BudgetMonthlyCents,
			Permissions: a.Permissions, DesiredSkills: a.DesiredSkills, Metadata: meta}
		if a.ReportsTo != nil {
			f.ReportsTo = e.agentSlugs[*a.ReportsTo]
		}
		body := ""
		if a.Capabilities != nil {
			body = *a.Capabilities
		}
		b, err := markdown(f, body)
		if err != nil {
			return err
		}
		p := "agents/" + f.Slug + "/AGENT.md"
		e.out.pkg.put(p, b)
		e.out.manifest.Agents = append(e.out.manifest.Agents, p)
	}
	e.progress(GroupAgents, len(list))
	return nil
}

// projectRecord is a project as the work owner lists it.
type projectRecord struct {
	ID          string  `json:"id"`
	Name        string  `json:"name"`
	Description *string `json:"description"`
	Status      string  `json:"status"`
	LeadAgentID *string `json:"leadAgentId"`
	TargetDate  *string `json:"targetDate"`
	Color       *string `json:"color"`
	Icon        *string `json:"icon"`
	URLKey      string  `json:"urlKey"`
	ArchivedAt  *string `json:"archivedAt"`
}

func (e *exporter) projects(ctx context.Context) error {
	var list []*projectRecord
	if err := e.x.call(ctx, "work.projects.list", e.companyID, map[string]any{}, &list); err != nil {
		return err
	}
	// Oldest first, so an import creates them in the same order.
	for i, j := 0, len(list)-1; i < j; i, j = i+1, j-1 {
		list[i], list[j] = list[j], list[i]
	}
	taken := map[string]bool{}
	for _, p := range list {
		slug := p.URLKey
		if slug == "" {
			slug = slugify(p.Name)
		}
		e.projectSlugs[p.ID] = uniqueSlug(taken, slugify(slug))
	}
	if !e.include[GroupProjects] {
		return nil
	}
	for _, p := range list {
		f := ProjectFront{Slug: e.projectSlugs[p.ID], Name: p.Name, Status: p.Status, TargetDate: p.TargetDate, Color: p.Color, Icon: p.Icon}
		if p.LeadAgentID != nil {
			f.LeadAgent = e.agentSlugs[*p.LeadAgentID]
		}
		body := ""
		if p.Description != nil {
			body = *p.Description
		}
		b, err := markdown(f, body)
		if err != nil {
			return err
		}
		path := "projects/" + f.Slug + "/PROJECT.md"
		e.out.pkg.put(path, b)
		e.out.manifest.Projects = append(e.out.manifest.Projects, path)
	}
	e.progress(GroupProjects, len(list))
	return nil
}

// issueRecord is an issue as the work owner lists it.
type issueRecord struct {
	ID              string  `json:"id"`
	Identifier      string  `json:"identifier"`
	Title           string  `json:"title"`
	Description     *string `json:"description"`
	Status          string  `json:"status"`
	Priority        string  `json:"priority"`
	WorkMode        string  `json:"workMode"`
	ProjectID       *string `json:"projectId"`
	ParentID        *string `json:"parentId"`
	AssigneeAgentID *string `json:"assigneeAgentId"`
	AssigneeUserID  *string `json:"assigneeUserId"`
	ReviewPolicy    string  `json:"reviewPolicy"`
	BillingCode     *string `json:"billingCode"`
	RequestDepth    int     `json:"requestDepth"`
	Labels          []struct {
		Name  string `json:"name"`
		Color string `json:"color"`
	} `json:"labels"`
}

// issueDetails is what the work owner adds to an issue for an export.
type issueDetails struct {
	IssueID   string   `json:"issueId"`
	BlockedBy []string `json:"blockedBy"`
	Comments  []struct {
		Body       string  `json:"body"`
		AuthorType string  `json:"authorType"`
		AgentID    *string `json:"authorAgentId"`
		UserID     *string `json:"authorUserId"`
		CreatedAt  string  `json:"createdAt"`
	} `json:"comments"`
	Documents []struct {
		Key    string  `json:"key"`
		Title  *string `json:"title"`
		Format string  `json:"format"`
		Body   string  `json:"body"`
	} `json:"documents"`
	WorkProducts []map[string]any `json:"workProducts"`
	Attachments  []struct {
		ID          string `json:"id"`
		FileName    string `json:"fileName"`
		ContentType string `json:"contentType"`
		SizeBytes   int64  `json:"sizeBytes"`
		SHA256      string `json:"sha256"`
	} `json:"attachments"`
}

// workProductFields are the work product fields an import can write back.
var workProductFields = []string{"type", "provider", "externalId", "title", "url", "status", "reviewState", "isPrimary",
	"healthStatus", "summary", "metadata"}

func (e *exporter) issues(ctx context.Context) error {
	idents := map[string]string{}
	var all []*issueRecord
	for offset := 0; ; offset += issuePage {
		var page []*issueRecord
		if err := e.x.call(ctx, "work.issues.list", e.companyID, map[string]any{"limit": issuePage, "offset": offset,
			"sortField": "createdAt", "sortDir": "asc"}, &page); err != nil {
			return err
		}
		for _, is := range page {
			idents[is.ID] = is.Identifier
		}
		all = append(all, page...)
		if len(page) < issuePage {
			break
		}
	}
	for start := 0; start < len(all); start += issuePage {
		batch := all[start:min(start+issuePage, len(all))]
		ids := make([]string, len(batch))
		for i, is := range batch {
			ids[i] = is.ID
		}
		var details []*issueDetails
		if err := e.x.call(ctx, "work.portability.issueDetails", e.companyID, map[string]any{"issueIds": ids}, &details); err != nil {
			return err
		}
		if len(details) != len(batch) {
			return fmt.Errorf("error reading issue details: %d asked, %d answered", len(batch), len(details))
		}
		for i, is := range batch {
			if err := e.issue(ctx, is, details[i], idents); err != nil {
				return err
			}
		}
		e.x.log.Info("export progress", "companyId", e.companyID, "group", GroupIssues, "done", start+len(batch), "total", len(all))
	}
	e.progress(GroupIssues, len(all))
	e.out.counts["attachments"] = len(e.assets)
	return nil
}

func (e *exporter) issue(ctx context.Context, is *issueRecord, d *issueDetails, idents map[string]string) error {
	ref := is.Identifier
	dir := "issues/" + ref + "/"
	f := IssueFront{Ref: ref, Title: is.Title, Status: is.Status, Priority: is.Priority, WorkMode: is.WorkMode, ReviewPolicy: is.ReviewPolicy,
		BillingCode: is.BillingCode, RequestDepth: is.RequestDepth, AssigneeUser: is.AssigneeUserID, BlockedBy: d.BlockedBy}
	if is.ProjectID != nil {
		f.Project = e.projectSlugs[*is.ProjectID]
	}
	if is.ParentID != nil {
		f.Parent = idents[*is.ParentID]
	}
	if is.AssigneeAgentID != nil {
		f.Assignee = e.agentSlugs[*is.AssigneeAgentID]
	}
	for _, l := range is.Labels {
		f.Labels = append(f.Labels, LabelRef{Name: l.Name, Color: l.Color})
	}
	for _, wp := range d.WorkProducts {
		keep := map[string]any{}
		for _, k := range workProductFields {
			if v, ok := wp[k]; ok && v != nil {
				keep[k] = v
			}
		}
		f.WorkProducts = append(f.WorkProducts, keep)
	}
	for _, a := range d.Attachments {
		p := assetPath(a.SHA256)
		if !e.assets[a.SHA256] {
			var content struct {
				ContentType string `json:"contentType"`
				Data        string `json:"data"`
			}
			if err := e.x.call(ctx, "work.portability.attachmentContent", e.companyID, map[string]any{"attachmentId": a.ID}, &content); err != nil {
				return err
			}
			b, err := base64.StdEncoding.DecodeString(content.Data)
			if err != nil {
				return fmt.Errorf("error decoding attachment %s: %w", a.ID, err)
			}
			if got := sha256Hex(b); got != a.SHA256 {
				e.out.warnings = append(e.out.warnings, fmt.Sprintf("attachment %s of %s: stored bytes hash to %s, not %s", a.FileName, ref, got, a.SHA256))
				continue
			}
			e.assets[a.SHA256] = true
			e.out.pkg.put(p, b)
			e.out.manifest.Assets = append(e.out.manifest.Assets, Asset{Path: p, SHA256: a.SHA256, SizeBytes: int64(len(b)), ContentType: a.ContentType})
		}
		f.Attachments = append(f.Attachments, AttachmentRef{FileName: a.FileName, ContentType: a.ContentType, SHA256: a.SHA256, SizeBytes: a.SizeBytes, Path: p})
	}
	for i, c := range d.Comments {
		cf := CommentFront{AuthorType: c.AuthorType, CreatedAt: c.CreatedAt}
		if c.AgentID != nil {
			cf.Author = e.agentSlugs[*c.AgentID]
		}
		b, err := markdown(cf, c.Body)
		if err != nil {
			return err
		}
		p := fmt.Sprintf("%scomments/%04d.md", dir, i+1)
		e.out.pkg.put(p, b)
		f.Comments = append(f.Comments, strings.TrimPrefix(p, dir))
	}
	for _, doc := range d.Documents {
		b, err := markdown(DocumentFront{Key: doc.Key, Title: doc.Title, Format: doc.Format}, doc.Body)
		if err != nil {
			return err
		}
		p := dir + "documents/" + slugify(doc.Key) + ".md"
		e.out.pkg.put(p, b)
		f.Documents = append(f.Documents, strings.TrimPrefix(p, dir))
	}
	body := ""
	if is.Description != nil {
		body = *is.Description
	}
	b, err := markdown(f, body)
	if err != nil {
		return err
	}
	e.out.pkg.put(dir+"ISSUE.md", b)
	e.out.manifest.Issues = append(e.out.manifest.Issues, dir+"ISSUE.md")
	return nil
}

// routineRecord is a routine as the routines owner shows it.
type routineRecord struct {
	ID                 string           `json:"id"`
	Title              string           `json:"title"`
	Description        *string          `json:"description"`
	AssigneeAgentID    *string          `json:"assigneeAgentId"`
	ProjectID          *string          `json:"projectId"`
	Priority           string           `json:"priority"`
	Status             string           `json:"status"`
	ConcurrencyPolicy  string           `json:"concurrencyPolicy"`
	CatchUpPolicy      string           `json:"catchUpPolicy"`
	ActivityGatePolicy string           `json:"activityGatePolicy"`
	Variables          []map[string]any `json:"variables"`
	Triggers           []struct {
		Kind           string  `json:"kind"`
		Label          *string `json:"label"`
		Enabled        bool    `json:"enabled"`
		CronExpression *string `json:"cronExpression"`
		Timezone       *string `json:"timezone"`
	} `json:"triggers"`
}

func (e *exporter) routines(ctx context.Context) error {
	var list []*routineRecord
	if err := e.x.call(ctx, "routines.list", e.companyID, map[string]any{}, &list); err != nil {
		return err
	}
	taken := map[string]bool{}
	n := 0
	for _, r := range list {
		if r.Status == "archived" {
			continue
		}
		f := RoutineFront{Slug: uniqueSlug(taken, slugify(r.Title)), Title: r.Title, Priority: r.Priority, Status: r.Status,
			ConcurrencyPolicy: r.ConcurrencyPolicy, CatchUpPolicy: r.CatchUpPolicy, ActivityGatePolicy: r.ActivityGatePolicy, Variables: r.Variables}
		if r.AssigneeAgentID != nil {
			f.Assignee = e.agentSlugs[*r.AssigneeAgentID]
		}
		if r.ProjectID != nil {
			f.Project = e.projectSlugs[*r.ProjectID]
		}
		for _, t := range r.Triggers {
			if t.Kind != "schedule" {
				continue
			}
			f.Triggers = append(f.Triggers, TriggerRef{Kind: t.Kind, Label: t.Label, Enabled: t.Enabled, CronExpression: t.CronExpression, Timezone: t.Timezone})
		}
		body := ""
		if r.Description != nil {
			body = *r.Description
		}
		b, err := markdown(f, body)
		if err != nil {
			return err
		}
		p := "routines/" + f.Slug + "/ROUTINE.md"
		e.out.pkg.put(p, b)
		e.out.manifest.Routines = append(e.out.manifest.Routines, p)
		n++
	}
	e.progress("routines", n)
	return nil
}

// skillRecord is a skill as the skills owner lists it, with its files.
type skillRecord struct {
	SkillMeta
	Files []struct {
		Path     string `json:"path"`
		Content  string `json:"content"`
		Encoding string `json:"encoding"`
	} `json:"files"`
}

func (e *exporter) skills(ctx context.Context) error {
	var out struct {
		Skills []*skillRecord `json:"skills"`
	}
	if err := e.x.call(ctx, "skills.list", e.companyID, map[string]any{"includeFiles": true, "includeBundled": false}, &out); err != nil {
		return err
	}
	taken := map[string]bool{}
	for _, s := range out.Skills {
		slug := uniqueSlug(taken, slugify(s.Slug))
		dir := "skills/" + slug + "/"
		for _, f := range s.Files {
			p, ok := cleanPackagePath(f.Path)
			if !ok {
				e.out.warnings = append(e.out.warnings, fmt.Sprintf("skill %s: file %q left out", s.Key, f.Path))
				continue
			}
			b := []byte(f.Content)
			if f.Encoding == "base64" {
				d, err := base64.StdEncoding.DecodeString(f.Content)
				if err != nil {
					return fmt.Errorf("error decoding file %s of skill %s: %w", f.Path, s.Key, err)
				}
				b = d
			}
			e.out.pkg.put(dir+p, b)
		}
		meta, err := json.MarshalIndent(s.SkillMeta, "", "  ")
		if err != nil {
			return fmt.Errorf("error encoding skill %s: %w", s.Key, err)
		}
		e.out.pkg.put(dir+"skill.json", append(meta, '\n'))
		e.out.manifest.Skills = append(e.out.manifest.Skills, dir+"SKILL.md")
	}
	e.progress(GroupSkills, len(out.Skills))
	return nil
}
