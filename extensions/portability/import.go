package portability

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/keelhq/keel/sdk"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

// Collision modes: what an import does with an entity whose name the target already uses.
const (
	CollisionRename  = "rename"
	CollisionSkip    = "skip"
	CollisionReplace = "replace"
)

// Plan actions.
const (
	actionCreate  = "create"
	actionRename  = "rename"
	actionSkip    = "skip"
	actionReplace = "replace"
	actionUpdate  = "update"
)

// importBatch is how many issues one owner call writes.
const importBatch = 100

// parsed is a package read into entities.
type parsed struct {
	pkg      *pkg
	manifest *Manifest
	include  map[string]bool
	company  *CompanyFront
	agents   []*parsedAgent
	projects []*parsedProject
	issues   []*parsedIssue
	routines []*parsedRoutine
	skills   []*parsedSkill
	assets   int
	bytes    int64
}

type parsedAgent struct {
	AgentFront
	Capabilities string
}

type parsedProject struct {
	ProjectFront
	Description string
}

type parsedIssue struct {
	IssueFront
	Description string
	comments    []parsedComment
	documents   []parsedDocument
}

type parsedComment struct {
	CommentFront
	Body string
}

type parsedDocument struct {
	DocumentFront
	Body string
}

type parsedRoutine struct {
	RoutineFront
	Description string
}

type parsedSkill struct {
	SkillMeta
	files map[string][]byte
}

// parsePackage reads the manifest and every file of the included groups, and verifies every
// attachment against its hash. Nothing is written.
func parsePackage(p *pkg, want []string) (*parsed, error) {
	raw, ok := p.files[ManifestFile]
	if !ok {
		return nil, sdk.Unprocessable("Package has no " + ManifestFile)
	}
	m := &Manifest{}
	if err := json.Unmarshal(raw, m); err != nil {
		return nil, sdk.Unprocessable(ManifestFile + " is not valid JSON: " + err.Error())
	}
	if m.Kind != PackageKind {
		return nil, sdk.Unprocessable(fmt.Sprintf("%s: kind must be %s", ManifestFile, PackageKind))
	}
	if m.SchemaVersion != SchemaVersion {
		return nil, sdk.Unprocessable(fmt.Sprintf("%s: schemaVersion %d is not supported", ManifestFile, m.SchemaVersion))
	}
	out := &parsed{pkg: p, manifest: m, include: map[string]bool{}}
	inPkg := map[string]bool{}
	for _, g := range m.Include {
		inPkg[g] = true
	}
	if len(want) == 0 {
		out.include = inPkg
	} else {
		for _, g := range want {
			if inPkg[g] {
				out.include[g] = true
			}
		}
	}
	file := func(name string) ([]byte, error) {
		clean, ok := cleanPackagePath(name)
		if !ok {
			return nil, sdk.Unprocessable(fmt.Sprintf("%s names a path outside the package: %q", ManifestFile, name))
		}
		b, ok := p.files[clean]
		if !ok {
			return nil, sdk.Unprocessable("Package file missing: " + clean)
		}
		return b, nil
	}
	bad := func(name string, err error) error {
		return sdk.Unprocessable("Invalid package file " + name + ": " + err.Error())
	}
	if out.include[GroupCompany] && m.Company != "" {
		b, err := file(m.Company)
		if err != nil {
			return nil, err
		}
		out.company = &CompanyFront{}
		if _, err := parseMarkdown(m.Company, b, out.company); err != nil {
			return nil, bad(m.Company, err)
		}
	}
	if out.include[GroupAgents] {
		for _, name := range m.Agents {
			b, err := file(name)
			if err != nil {
				return nil, err
			}
			a := &parsedAgent{}
			body, err := parseMarkdown(name, b, &a.AgentFront)
			if err != nil {
				return nil, bad(name, err)
			}
			if a.Slug == "" || a.Name == "" {
				return nil, bad(name, fmt.Errorf("slug and name are required"))
			}
			a.Capabilities = body
			out.agents = append(out.agents, a)
		}
	}
	if out.include[GroupProjects] {
		for _, name := range m.Projects {
			b, err := file(name)
			if err != nil {
				return nil, err
			}
			pr := &parsedProject{}
			body, err := parseMarkdown(name, b, &pr.ProjectFront)
			if err != nil {
				return nil, bad(name, err)
			}
			if pr.Slug == "" || pr.Name == "" {
				return nil, bad(name, fmt.Errorf("slug and name are required"))
			}
			pr.Description = body
			out.projects = append(out.projects, pr)
		}
	}
	if out.include[GroupSkills] {
		for _, name := range m.Skills {
			dir := path.Dir(name) + "/"
			s := &parsedSkill{files: map[string][]byte{}}
			meta, err := file(dir + "skill.json")
			if err != nil {
				return nil, err
			}
			if err := json.Unmarshal(meta, &s.SkillMeta); err != nil {
				return nil, bad(dir+"skill.json", err)
			}
			for _, f := range p.under(dir) {
				if f != dir+"skill.json" {
					s.files[strings.TrimPrefix(f, dir)] = p.files[f]
				}
			}
			if _, ok := s.files["SKILL.md"]; !ok {
				return nil, sdk.Unprocessable("Package file missing: " + dir + "SKILL.md")
			}
			out.skills = append(out.skills, s)
		}
	}
	if out.include[GroupIssues] {
		// Every asset is checked against its hash before anything else is read or written.
		for _, a := range m.Assets {
			if err := verifyAsset(p, a.Path, a.SHA256, ""); err != nil {
				return nil, err
			}
			out.assets++
			out.bytes += a.SizeBytes
		}
		for _, name := range m.Issues {
			b, err := file(name)
			if err != nil {
				return nil, err
			}
			is := &parsedIssue{}
			body, err := parseMarkdown(name, b, &is.IssueFront)
			if err != nil {
				return nil, bad(name, err)
			}
			if is.Ref == "" || is.Title == "" {
				return nil, bad(name, fmt.Errorf("ref and title are required"))
			}
			is.Description = body
			dir := path.Dir(name) + "/"
			for _, a := range is.Attachments {
				if err := verifyAsset(p, a.Path, a.SHA256, a.FileName+" of "+is.Ref); err != nil {
					return nil, err
				}
			}
			for _, c := range is.Comments {
				b, err := file(dir + c)
				if err != nil {
					return nil, err
				}
				pc := parsedComment{}
				if pc.Body, err = parseMarkdown(dir+c, b, &pc.CommentFront); err != nil {
					return nil, bad(dir+c, err)
				}
				is.comments = append(is.comments, pc)
			}
			for _, d := range is.Documents {
				b, err := file(dir + d)
				if err != nil {
					return nil, err
				}
				pd := parsedDocument{}
				if pd.Body, err = parseMarkdown(dir+d, b, &pd.DocumentFront); err != nil {
					return nil, bad(dir+d, err)
				}
				is.documents = append(is.documents, pd)
			}
			out.issues = append(out.issues, is)
		}
		for _, name := range m.Routines {
			b, err := file(name)
			if err != nil {
				return nil, err
			}
			r := &parsedRoutine{}
			body, err := parseMarkdown(name, b, &r.RoutineFront)
			if err != nil {
				return nil, bad(name, err)
			}
			if r.Title == "" {
				return nil, bad(name, fmt.Errorf("title is required"))
			}
			r.Description = body
			out.routines = append(out.routines, r)
		}
	}
	return out, nil
}

// verifyAsset checks that an asset exists and hashes to what the package says: the name
// under assets/sha256/ and the declared sum. A mismatch aborts the import with 409 naming
// the file.
func verifyAsset(p *pkg, name, sum, what string) error {
	clean, ok := cleanPackagePath(name)
	if !ok || !strings.HasPrefix(clean, AssetsDir) {
		return sdk.Unprocessable(fmt.Sprintf("Attachment path %q is not under %s", name, AssetsDir))
	}
	b, ok := p.files[clean]
	if !ok {
		return sdk.Unprocessable("Package file missing: " + clean)
	}
	got := sha256Hex(b)
	if got != strings.ToLower(sum) || got != strings.TrimPrefix(clean, AssetsDir) {
		msg := "Import aborted: attachment " + clean + " does not match its sha256"
		if what != "" {
			msg += " (" + what + ")"
		}
		return sdk.Conflict(msg)
	}
	return nil
}

// PlanItem is what an import does with one entity.
type PlanItem struct {
	Slug        string `json:"slug"`
	Name        string `json:"name"`
	Action      string `json:"action"`
	PlannedName string `json:"plannedName"`
	ExistingID  string `json:"existingId,omitempty"`
	ID          string `json:"id,omitempty"`
}

// Plan is an import's plan (the preview) and, after apply, its outcome.
type Plan struct {
	Company  *PlanItem  `json:"company"`
	Agents   []PlanItem `json:"agents"`
	Projects []PlanItem `json:"projects"`
	Skills   []PlanItem `json:"skills"`
	Routines []PlanItem `json:"routines"`
	Issues   struct {
		Create      int   `json:"create"`
		Attachments int   `json:"attachments"`
		AssetBytes  int64 `json:"assetBytes"`
	} `json:"issues"`
}

// existing is the target company's entities an import may collide with.
type existing struct {
	agents   map[string]string // lower name → id
	projects map[string]string
	skills   map[string]string // key → id
	slugs    map[string]string // skill slug → key
	routines map[string]string
}

func (x *Portability) loadExisting(ctx context.Context, companyID string, pr *parsed) (*existing, error) {
	ex := &existing{agents: map[string]string{}, projects: map[string]string{}, skills: map[string]string{}, slugs: map[string]string{},
		routines: map[string]string{}}
	var agents []*agentRecord
	if err := x.call(ctx, "agents.list", companyID, map[string]any{}, &agents); err != nil {
		return nil, err
	}
	for _, a := range agents {
		ex.agents[strings.ToLower(a.Name)] = a.ID
		if a.URLKey != "" {
			ex.agents["@"+a.URLKey] = a.ID
		}
	}
	var projects []*projectRecord
	if err := x.call(ctx, "work.projects.list", companyID, map[string]any{}, &projects); err != nil {
		return nil, err
	}
	for _, p := range projects {
		ex.projects[strings.ToLower(p.Name)] = p.ID
	}
	if len(pr.skills) > 0 {
		var out struct {
			Skills []*struct {
				ID   string `json:"id"`
				Key  string `json:"key"`
				Slug string `json:"slug"`
			} `json:"skills"`
		}
		if err := x.call(ctx, "skills.list", companyID, map[string]any{"includeBundled": false}, &out); err != nil {
			return nil, err
		}
		for _, s := range out.Skills {
			ex.skills[s.Key] = s.ID
			ex.slugs[s.Slug] = s.Key
		}
	}
	if len(pr.routines) > 0 {
		var routines []*routineRecord
		if err := x.call(ctx, "routines.list", companyID, map[string]any{}, &routines); err != nil {
			return nil, err
		}
		for _, r := range routines {
			if r.Status != "archived" {
				ex.routines[strings.ToLower(r.Title)] = r.ID
			}
		}
	}
	return ex, nil
}

// rename returns the first "name N" not taken (case-insensitively) and marks it taken.
func rename(taken map[string]string, name string) string {
	for i := 2; ; i++ {
		n := fmt.Sprintf("%s %d", name, i)
		if _, ok := taken[strings.ToLower(n)]; !ok {
			taken[strings.ToLower(n)] = ""
			return n
		}
	}
}

// planNamed plans one named entity against the target's names.
func planNamed(taken map[string]string, slug, name, mode string) PlanItem {
	it := PlanItem{Slug: slug, Name: name, Action: actionCreate, PlannedName: name}
	id, ok := taken[strings.ToLower(name)]
	if !ok {
		taken[strings.ToLower(name)] = ""
		return it
	}
	it.ExistingID = id
	switch mode {
	case CollisionSkip:
		it.Action = actionSkip
	case CollisionReplace:
		it.Action = actionReplace
	default:
		it.Action, it.PlannedName, it.ExistingID = actionRename, rename(taken, name), ""
	}
	return it
}

// plan builds the preview: what each entity of the package becomes in the target.
func (x *Portability) plan(ctx context.Context, companyID string, pr *parsed, mode string) (*Plan, *existing, error) {
	ex, err := x.loadExisting(ctx, companyID, pr)
	if err != nil {
		return nil, nil, err
	}
	pl := &Plan{Agents: []PlanItem{}, Projects: []PlanItem{}, Skills: []PlanItem{}, Routines: []PlanItem{}}
	if pr.company != nil {
		pl.Company = &PlanItem{Name: pr.company.Name, Action: actionUpdate, PlannedName: pr.company.Name, ExistingID: companyID}
	}
	names := map[string]string{}
	for k, v := range ex.agents {
		names[k] = v
	}
	for _, a := range pr.agents {
		pl.Agents = append(pl.Agents, planNamed(names, a.Slug, a.Name, mode))
	}
	names = map[string]string{}
	for k, v := range ex.projects {
		names[k] = v
	}
	for _, p := range pr.projects {
		pl.Projects = append(pl.Projects, planNamed(names, p.Slug, p.Name, mode))
	}
	slugs := map[string]string{}
	for s, key := range ex.slugs {
		slugs[s] = ex.skills[key]
	}
	for _, s := range pr.skills {
		key := s.Key
		if s.SourceType == "managed_local" || strings.HasPrefix(key, "company/") {
			key = "company/" + companyID + "/" + s.Slug
		}
		it := PlanItem{Slug: s.Slug, Name: s.Name, Action: actionCreate, PlannedName: s.Slug}
		id, taken := ex.skills[key]
		if !taken {
			id, taken = slugs[s.Slug]
		}
		if taken {
			it.ExistingID = id
			switch mode {
			case CollisionSkip:
				it.Action = actionSkip
			case CollisionReplace:
				it.Action = actionReplace
			default:
				it.Action, it.ExistingID = actionRename, ""
				it.PlannedName = uniqueSlug(map[string]bool{s.Slug: true}, s.Slug)
				for _, ok := slugs[it.PlannedName]; ok; _, ok = slugs[it.PlannedName] {
					it.PlannedName = uniqueSlug(map[string]bool{it.PlannedName: true}, s.Slug)
				}
			}
		}
		slugs[it.PlannedName] = ""
		pl.Skills = append(pl.Skills, it)
	}
	names = map[string]string{}
	for k, v := range ex.routines {
		names[k] = v
	}
	for _, r := range pr.routines {
		pl.Routines = append(pl.Routines, planNamed(names, r.Slug, r.Title, mode))
	}
	pl.Issues.Create = len(pr.issues)
	pl.Issues.Attachments = pr.assets
	pl.Issues.AssetBytes = pr.bytes
	return pl, ex, nil
}

// heartbeatOff returns a runtime config with the timer heartbeat switched off.
func heartbeatOff(rc map[string]any) map[string]any {
	if rc == nil {
		rc = map[string]any{}
	}
	hb, _ := rc["heartbeat"].(map[string]any)
	if hb == nil {
		hb = map[string]any{}
	}
	hb["enabled"] = false
	rc["heartbeat"] = hb
	return rc
}

// applier writes a planned package into the target company.
type applier struct {
	x         *Portability
	companyID string
	pr        *parsed
	pl        *Plan
	agents    map[string]string // package slug → target id
	projects  map[string]string
	issues    map[string]string // package ref → target id
	progress  map[string]int
	warnings  []string
}

func (a *applier) step(group string, n int) {
	a.progress[group] = n
	a.x.log.Info("import progress", "companyId", a.companyID, "group", group, "done", n)
}

// apply writes the plan. The package has been parsed and every attachment verified.
func (x *Portability) apply(ctx context.Context, companyID string, pr *parsed, pl *Plan) (*applier, error) {
	a := &applier{x: x, companyID: companyID, pr: pr, pl: pl, agents: map[string]string{}, projects: map[string]string{},
		issues: map[string]string{}, progress: map[string]int{}}
	if pr.company != nil {
		budget := pr.company.BudgetMonthlyCents
		if _, err := x.host.Companies.UpdateBudget(ctx, &hostv1.UpdateCompanyBudgetRequest{CompanyId: companyID, BudgetMonthlyCents: &budget}); err != nil {
			return nil, fmt.Errorf("error setting the company budget: %w", err)
		}
		a.warnings = append(a.warnings, "company name, description and branding are kept; only the monthly budget is imported")
		a.step(GroupCompany, 1)
	}
	if err := a.applyAgents(ctx); err != nil {
		return nil, err
	}
	if err := a.applyProjects(ctx); err != nil {
		return nil, err
	}
	if err := a.applySkills(ctx); err != nil {
		return nil, err
	}
	if err := a.applyIssues(ctx); err != nil {
		return nil, err
	}
	if err := a.applyRoutines(ctx); err != nil {
		return nil, err
	}
	return a, nil
}

// existingAgents maps target agent slugs (url keys) to ids, for references to agents the
// package does not carry.
func (a *applier) agentID(slug string) (string, bool) {
	if slug == "" {
		return "", false
	}
	id, ok := a.agents[slug]
	return id, ok && id != ""
}

func (a *applier) applyAgents(ctx context.Context) error {
	if !a.pr.include[GroupAgents] {
		var list []*agentRecord
		if err := a.x.call(ctx, "agents.list", a.companyID, map[string]any{}, &list); err != nil {
			return err
		}
		for _, r := range list {
			a.agents[r.URLKey] = r.ID
		}
		return nil
	}
	for i, ag := range a.pr.agents {
		it := &a.pl.Agents[i]
		body := map[string]any{"name": it.PlannedName, "role": ag.Role, "adapterType": ag.AdapterType,
			"runtimeConfig": heartbeatOff(ag.RuntimeConfig), "budgetMonthlyCents": ag.BudgetMonthlyCents}
		if ag.Title != nil {
			body["title"] = *ag.Title
		}
		if ag.Icon != nil {
			body["icon"] = *ag.Icon
		}
		if ag.Capabilities != "" {
			body["capabilities"] = ag.Capabilities
		}
		if ag.AdapterConfig != nil {
			body["adapterConfig"] = ag.AdapterConfig
		}
		if ag.Metadata != nil {
			body["metadata"] = ag.Metadata
		}
		if len(ag.Permissions) > 0 {
			body["permissions"] = ag.Permissions
		}
		var rec agentRecord
		switch it.Action {
		case actionSkip:
			a.agents[ag.Slug] = it.ExistingID
			it.ID = it.ExistingID
			continue
		case actionReplace:
			// Permissions have their own route; a replace keeps the target agent's.
			delete(body, "permissions")
			body["agentId"] = it.ExistingID
			for _, k := range []string{"title", "icon", "capabilities"} {
				if _, ok := body[k]; !ok {
					body[k] = nil
				}
			}
			if err := a.x.call(ctx, "agents.update", a.companyID, body, &rec); err != nil {
				return fmt.Errorf("error replacing agent %s: %w", ag.Slug, err)
			}
		default:
			if err := a.x.call(ctx, "agents.create", a.companyID, body, &rec); err != nil {
				return fmt.Errorf("error creating agent %s: %w", ag.Slug, err)
			}
		}
		a.agents[ag.Slug] = rec.ID
		it.ID = rec.ID
	}
	// Reporting lines, once every agent exists.
	for i, ag := range a.pr.agents {
		it := a.pl.Agents[i]
		if ag.ReportsTo == "" || it.Action == actionSkip {
			continue
		}
		boss, ok := a.agentID(ag.ReportsTo)
		if !ok {
			a.warnings = append(a.warnings, fmt.Sprintf("agent %s reports to %s, which the package does not carry", ag.Slug, ag.ReportsTo))
			continue
		}
		if err := a.x.call(ctx, "agents.update", a.companyID, map[string]any{"agentId": it.ID, "reportsTo": boss}, nil); err != nil {
			return fmt.Errorf("error setting the manager of agent %s: %w", ag.Slug, err)
		}
	}
	a.step(GroupAgents, len(a.pr.agents))
	return nil
}

func (a *applier) applyProjects(ctx context.Context) error {
	if !a.pr.include[GroupProjects] {
		var list []*projectRecord
		if err := a.x.call(ctx, "work.projects.list", a.companyID, map[string]any{}, &list); err != nil {
			return err
		}
		for _, p := range list {
			a.projects[p.URLKey] = p.ID
		}
		return nil
	}
	for i, p := range a.pr.projects {
		it := &a.pl.Projects[i]
		body := map[string]any{"name": it.PlannedName}
		if p.Status != "" {
			body["status"] = p.Status
		}
		if p.Description != "" {
			body["description"] = p.Description
		}
		if id, ok := a.agentID(p.LeadAgent); ok {
			body["leadAgentId"] = id
		}
		for k, v := range map[string]*string{"targetDate": p.TargetDate, "color": p.Color, "icon": p.Icon} {
			if v != nil {
				body[k] = *v
			}
		}
		var rec projectRecord
		switch it.Action {
		case actionSkip:
			a.projects[p.Slug], it.ID = it.ExistingID, it.ExistingID
			continue
		case actionReplace:
			body["projectId"] = it.ExistingID
			if err := a.x.call(ctx, "work.projects.update", a.companyID, body, &rec); err != nil {
				return fmt.Errorf("error replacing project %s: %w", p.Slug, err)
			}
		default:
			if err := a.x.call(ctx, "work.projects.create", a.companyID, body, &rec); err != nil {
				return fmt.Errorf("error creating project %s: %w", p.Slug, err)
			}
		}
		a.projects[p.Slug], it.ID = rec.ID, rec.ID
	}
	a.step(GroupProjects, len(a.pr.projects))
	return nil
}

func (a *applier) applySkills(ctx context.Context) error {
	for i, s := range a.pr.skills {
		it := &a.pl.Skills[i]
		if it.Action == actionSkip {
			it.ID = it.ExistingID
			continue
		}
		names := make([]string, 0, len(s.files))
		for n := range s.files {
			names = append(names, n)
		}
		sort.Strings(names)
		files := make([]map[string]string, 0, len(names))
		for _, n := range names {
			files = append(files, fileEntry(n, s.files[n]))
		}
		in := map[string]any{"slug": it.PlannedName, "name": s.Name, "description": s.Description, "files": files,
			"sourceType": s.SourceType, "sourceLocator": s.SourceLocator, "sourceRef": s.SourceRef, "metadata": s.Metadata}
		if s.SourceType != "managed_local" && !strings.HasPrefix(s.Key, "company/") && it.Action != actionRename {
			in["key"] = s.Key
		}
		if s.SourceType == "" {
			delete(in, "sourceType")
		}
		var out struct {
			Skill struct {
				ID string `json:"id"`
			} `json:"skill"`
		}
		if err := a.x.call(ctx, "skills.upsert", a.companyID, in, &out); err != nil {
			return fmt.Errorf("error importing skill %s: %w", s.Slug, err)
		}
		it.ID = out.Skill.ID
	}
	if len(a.pr.skills) > 0 {
		a.step(GroupSkills, len(a.pr.skills))
	}
	return nil
}

// importStatus is the status an issue is created with: blocked needs its blockers, which
// the second pass adds, and in_progress needs an assignee.
func importStatus(is *parsedIssue, assigned bool) string {
	switch {
	case is.Status == "blocked":
		return "todo"
	case is.Status == "in_progress" && !assigned:
		return "todo"
	}
	return is.Status
}

func (a *applier) applyIssues(ctx context.Context) error {
	if !a.pr.include[GroupIssues] {
		return nil
	}
	total := len(a.pr.issues)
	for start := 0; start < total; start += importBatch {
		batch := a.pr.issues[start:min(start+importBatch, total)]
		items := make([]map[string]any, 0, len(batch))
		for _, is := range batch {
			body := map[string]any{"title": is.Title}
			if is.Description != "" {
				body["description"] = is.Description
			}
			if is.Priority != "" {
				body["priority"] = is.Priority
			}
			if is.WorkMode != "" {
				body["workMode"] = is.WorkMode
			}
			if is.ReviewPolicy != "" {
				body["reviewPolicy"] = is.ReviewPolicy
			}
			if is.BillingCode != nil {
				body["billingCode"] = *is.BillingCode
			}
			if is.RequestDepth > 0 {
				body["requestDepth"] = is.RequestDepth
			}
			if id, ok := a.projects[is.Project]; ok && is.Project != "" {
				body["projectId"] = id
			}
			agentID, assigned := a.agentID(is.Assignee)
			if assigned {
				body["assigneeAgentId"] = agentID
			} else if is.Assignee != "" {
				a.warnings = append(a.warnings, fmt.Sprintf("issue %s: assignee %s is not in the target company", is.Ref, is.Assignee))
			}
			body["status"] = importStatus(is, assigned)
			comments := make([]map[string]any, 0, len(is.comments))
			for _, c := range is.comments {
				comments = append(comments, map[string]any{"body": c.Body})
			}
			docs := make([]map[string]any, 0, len(is.documents))
			for _, d := range is.documents {
				doc := map[string]any{"key": d.Key, "body": d.Body}
				if d.Title != nil {
					doc["title"] = *d.Title
				}
				if d.Format != "" {
					doc["format"] = d.Format
				}
				docs = append(docs, doc)
			}
			atts := make([]map[string]any, 0, len(is.Attachments))
			for _, at := range is.Attachments {
				clean, _ := cleanPackagePath(at.Path)
				atts = append(atts, map[string]any{"fileName": at.FileName, "contentType": at.ContentType,
					"data": base64.StdEncoding.EncodeToString(a.pr.pkg.files[clean])})
			}
			labels := make([]map[string]any, 0, len(is.Labels))
			for _, l := range is.Labels {
				labels = append(labels, map[string]any{"name": l.Name, "color": l.Color})
			}
			items = append(items, map[string]any{"issue": body, "comments": comments, "documents": docs,
				"workProducts": is.WorkProducts, "attachments": atts, "labels": labels})
		}
		var out struct {
			Issues []struct {
				ID         string `json:"id"`
				Identifier string `json:"identifier"`
			} `json:"issues"`
		}
		if err := a.x.call(ctx, "work.portability.importIssues", a.companyID, map[string]any{"issues": items}, &out); err != nil {
			return fmt.Errorf("error importing issues %d-%d: %w", start+1, start+len(batch), err)
		}
		if len(out.Issues) != len(batch) {
			return fmt.Errorf("error importing issues: %d sent, %d created", len(batch), len(out.Issues))
		}
		for i, is := range batch {
			a.issues[is.Ref] = out.Issues[i].ID
		}
		a.step(GroupIssues, start+len(batch))
	}
	// Second pass: parents, blockers and the statuses that need them.
	for _, is := range a.pr.issues {
		patch := map[string]any{}
		if is.Parent != "" {
			if id, ok := a.issues[is.Parent]; ok {
				patch["parentId"] = id
			}
		}
		var blockers []string
		for _, b := range is.BlockedBy {
			if id, ok := a.issues[b]; ok {
				blockers = append(blockers, id)
			}
		}
		if len(blockers) > 0 {
			patch["blockedByIssueIds"] = blockers
		}
		_, assigned := a.agentID(is.Assignee)
		if importStatus(is, assigned) != is.Status && (is.Status != "blocked" || len(blockers) > 0) && (is.Status != "in_progress" || assigned) {
			patch["status"] = is.Status
		}
		if len(patch) == 0 {
			continue
		}
		patch["id"] = a.issues[is.Ref]
		if err := a.x.call(ctx, "work.issues.update", a.companyID, patch, nil); err != nil {
			a.warnings = append(a.warnings, fmt.Sprintf("issue %s: %v", is.Ref, err))
		}
	}
	return nil
}

func (a *applier) applyRoutines(ctx context.Context) error {
	if len(a.pr.routines) == 0 {
		return nil
	}
	for i, r := range a.pr.routines {
		it := &a.pl.Routines[i]
		if it.Action == actionSkip {
			it.ID = it.ExistingID
			continue
		}
		body := map[string]any{"title": it.PlannedName}
		if r.Description != "" {
			body["description"] = r.Description
		}
		if id, ok := a.agentID(r.Assignee); ok {
			body["assigneeAgentId"] = id
		}
		if id, ok := a.projects[r.Project]; ok && r.Project != "" {
			body["projectId"] = id
		}
		for k, v := range map[string]string{"priority": r.Priority, "status": r.Status, "concurrencyPolicy": r.ConcurrencyPolicy,
			"catchUpPolicy": r.CatchUpPolicy, "activityGatePolicy": r.ActivityGatePolicy} {
			if v != "" {
				body[k] = v
			}
		}
		if _, ok := body["assigneeAgentId"]; !ok && r.Status == "active" {
			body["status"] = "paused"
		}
		if len(r.Variables) > 0 {
			body["variables"] = r.Variables
		}
		var rec struct {
			ID string `json:"id"`
		}
		if it.Action == actionReplace {
			body["routineId"] = it.ExistingID
			if err := a.x.call(ctx, "routines.update", a.companyID, body, &rec); err != nil {
				return fmt.Errorf("error replacing routine %s: %w", r.Slug, err)
			}
		} else {
			var triggers []map[string]any
			for _, t := range r.Triggers {
				tr := map[string]any{"kind": t.Kind, "enabled": t.Enabled}
				if t.Label != nil {
					tr["label"] = *t.Label
				}
				if t.CronExpression != nil {
					tr["cronExpression"] = *t.CronExpression
				}
				if t.Timezone != nil {
					tr["timezone"] = *t.Timezone
				}
				triggers = append(triggers, tr)
			}
			body["triggers"] = triggers
			if err := a.x.call(ctx, "routines.create", a.companyID, body, &rec); err != nil {
				return fmt.Errorf("error creating routine %s: %w", r.Slug, err)
			}
		}
		it.ID = rec.ID
	}
	a.step("routines", len(a.pr.routines))
	return nil
}

// readGroups checks and normalises a list of groups ("tasks" is issues).
func readGroups(field string, in []string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, g := range in {
		g = strings.ToLower(strings.TrimSpace(g))
		if g == "tasks" {
			g = GroupIssues
		}
		switch g {
		case GroupCompany, GroupAgents, GroupProjects, GroupIssues, GroupSkills:
		default:
			return nil, sdk.ValidationError(sdk.ValidationDetail{Path: field,
				Message: fmt.Sprintf("unknown group %q (company, agents, projects, issues or tasks, skills)", g)})
		}
		if !seen[g] {
			seen[g] = true
			out = append(out, g)
		}
	}
	return out, nil
}

// readCollision checks a collision mode (default rename).
func readCollision(s string) (string, error) {
	switch s {
	case "":
		return CollisionRename, nil
	case CollisionRename, CollisionSkip, CollisionReplace:
		return s, nil
	}
	return "", sdk.ValidationError(sdk.ValidationDetail{Path: "collisionStrategy", Message: "must be rename, skip or replace"})
}

// fileEntry is a skill file as the skills owner takes it: text, or base64 for binary.
func fileEntry(name string, b []byte) map[string]string {
	if utf8.Valid(b) {
		return map[string]string{"path": name, "content": string(b)}
	}
	return map[string]string{"path": name, "content": base64.StdEncoding.EncodeToString(b), "encoding": "base64"}
}
