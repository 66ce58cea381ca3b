package skills

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/keelhq/keel/sdk"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

func init() {
	const base = "/api/companies/{companyId}/skills"
	addRoutes(
		route{Method: http.MethodGet, Path: base, CompanyFromPath: true, Response: new([]*Skill),
			Summary: "List a company's skills (bundled skills are re-imported on every list and are read-only)",
			Handle:  (*Skills).handleList},
		route{Method: http.MethodPost, Path: base, CompanyFromPath: true, Body: CreateBody{}, Status: http.StatusCreated,
			Response: new(Skill), Errors: []int{http.StatusConflict},
			Summary: "Create an empty managed skill (agents:create or canCreateAgents)", Handle: (*Skills).handleCreate},
		route{Method: http.MethodPost, Path: base + "/import", CompanyFromPath: true, Body: ImportBody{}, Status: http.StatusCreated,
			Response: new(ImportResult), Errors: []int{http.StatusUnprocessableEntity, http.StatusBadGateway},
			Summary: "Import skills from a forge URL, owner/repo[/skill], a registry URL or npx add command, a raw URL or a local path",
			Handle:  (*Skills).handleImport},
		route{Method: http.MethodPost, Path: base + "/scan-projects", CompanyFromPath: true, Body: ScanBody{}, Response: new(ScanResult),
			Summary: "Scan project workspaces for skills without overwriting (conflicts are reported)", Handle: (*Skills).handleScan},
		route{Method: http.MethodGet, Path: base + "/{skillId}", CompanyFromPath: true, Response: new(Skill), Errors: []int{http.StatusNotFound},
			Summary: "A skill with its SKILL.md and the agents that use it", Handle: (*Skills).handleGet},
		route{Method: http.MethodDelete, Path: base + "/{skillId}", CompanyFromPath: true, Response: new(Skill),
			Errors: []int{http.StatusNotFound}, Summary: "Delete a skill (bundled skills cannot be deleted)", Handle: (*Skills).handleDelete},
		route{Method: http.MethodGet, Path: base + "/{skillId}/files", CompanyFromPath: true, Response: new(FileView),
			Query: fileQuery{}, Errors: []int{http.StatusNotFound}, Summary: "Read a skill file (path, default SKILL.md)",
			Handle: (*Skills).handleFileGet},
		route{Method: http.MethodPatch, Path: base + "/{skillId}/files", CompanyFromPath: true, Body: FilePatchBody{},
			Response: new(FileView), Errors: []int{http.StatusNotFound},
			Summary: "Write a file of a managed skill (a new SKILL.md re-reads name and description)", Handle: (*Skills).handleFilePatch},
		route{Method: http.MethodGet, Path: base + "/{skillId}/update-status", CompanyFromPath: true, Response: new(UpdateStatus),
			Errors: []int{http.StatusNotFound, http.StatusBadGateway}, Summary: "Whether a forge-managed skill's tracking ref moved on",
			Handle: (*Skills).handleUpdateStatus},
		route{Method: http.MethodPost, Path: base + "/{skillId}/install-update", CompanyFromPath: true, Response: new(Skill),
			Errors:  []int{http.StatusNotFound, http.StatusUnprocessableEntity, http.StatusBadGateway},
			Summary: "Re-import a forge-managed skill at its tracking ref's latest commit", Handle: (*Skills).handleInstallUpdate},
	)
}

// CreateBody is the body of POST /api/companies/{companyId}/skills.
type CreateBody struct {
	// Name is 1-200 characters.
	Name string `json:"name" jsonschema:"required,minLength=1,maxLength=200"`
	// Slug is kebab-case; derived from the name when omitted.
	Slug *string `json:"slug,omitempty" jsonschema:"maxLength=120"`
	// Description is up to 4000 characters.
	Description *string `json:"description,omitempty" jsonschema:"maxLength=4000"`
	// Markdown is the SKILL.md body (a frontmatter with name and description is written for you).
	Markdown *string `json:"markdown,omitempty"`
}

// ImportBody is the body of POST /api/companies/{companyId}/skills/import.
type ImportBody struct {
	Source string `json:"source" jsonschema:"required,minLength=1,maxLength=2000"`
}

// ImportResult is the answer of an import.
type ImportResult struct {
	Imported []*Skill `json:"imported"`
	Updated  []*Skill `json:"updated"`
	Skipped  []any    `json:"skipped"`
	Warnings []string `json:"warnings"`
	Source   *Source  `json:"source"`
}

// ScanBody is the body of POST /api/companies/{companyId}/skills/scan-projects.
type ScanBody struct {
	ProjectIDs   []string `json:"projectIds,omitempty"`
	WorkspaceIDs []string `json:"workspaceIds,omitempty"`
}

// ScanResult is the answer of a project scan.
type ScanResult struct {
	Imported  []*Skill `json:"imported"`
	Updated   []*Skill `json:"updated"`
	Skipped   []any    `json:"skipped"`
	Conflicts []any    `json:"conflicts"`
	Warnings  []string `json:"warnings"`
}

// fileQuery documents the file read's query.
type fileQuery struct {
	Path string `query:"path" doc:"The file inside the skill (default SKILL.md)"`
}

// FilePatchBody is the body of PATCH .../skills/{skillId}/files.
type FilePatchBody struct {
	Path    string `json:"path" jsonschema:"required,minLength=1,maxLength=500"`
	Content string `json:"content" jsonschema:"maxLength=1048576"`
}

// FileView is one skill file.
type FileView struct {
	SkillID  string `json:"skillId"`
	Path     string `json:"path"`
	Kind     string `json:"kind"`
	Content  string `json:"content"`
	Encoding string `json:"encoding"`
	Markdown bool   `json:"markdown"`
	Editable bool   `json:"editable"`
}

// UpdateStatus is a forge-managed skill's update status.
type UpdateStatus struct {
	Supported     bool    `json:"supported"`
	Reason        *string `json:"reason"`
	TrackingRef   *string `json:"trackingRef"`
	CurrentCommit *string `json:"currentCommit"`
	LatestCommit  *string `json:"latestCommit"`
	HasUpdate     bool    `json:"hasUpdate"`
}

// requireMutate refuses callers without agents:create or the canCreateAgents flag.
func (x *Skills) requireMutate(ctx context.Context, companyID string) error {
	if err := sdk.RequireCompanyAccess(ctx, companyID); err != nil {
		return err
	}
	actor := sdk.ActorFrom(ctx)
	if actor.Type == "system" {
		return nil
	}
	res, err := x.host.Authz.Check(ctx, &hostv1.CheckRequest{Actor: actor, CompanyId: companyID, Permission: "agents:create"})
	if err != nil {
		return fmt.Errorf("error checking permission agents:create: %w", err)
	}
	if res.Allowed {
		return nil
	}
	if actor.Type == "agent" && sdk.IsUUID(actor.AgentId) {
		var ag struct {
			Permissions map[string]bool `json:"permissions"`
		}
		if err := x.host.Call(ctx, "agents.get", sdk.SystemActor(), companyID, map[string]any{"agentId": actor.AgentId}, &ag); err != nil {
			return fmt.Errorf("error reading agent %s: %w", actor.AgentId, err)
		}
		if ag.Permissions["canCreateAgents"] {
			return nil
		}
	}
	return &sdk.Error{Status: http.StatusForbidden, Code: "permission_denied", Message: msgPermission}
}

// agentRecord is the part of an agent the skills read.
type agentRecord struct {
	ID            string   `json:"id"`
	Name          string   `json:"name"`
	AdapterType   string   `json:"adapterType"`
	DesiredSkills []string `json:"desiredSkills"`
}

// agentsUsing maps skill ids to the agents whose desired skills name the skill (key, slug or name).
func (x *Skills) agentsUsing(ctx context.Context, companyID string, skills []*Skill) map[string][]AgentUse {
	out := map[string][]AgentUse{}
	var agents []agentRecord
	if err := x.host.Call(ctx, "agents.list", sdk.SystemActor(), companyID, map[string]any{"companyId": companyID}, &agents); err != nil {
		x.log.Warn("error reading agents for skill usage", "company", companyID, "error", err)
		return out
	}
	for _, s := range skills {
		for _, a := range agents {
			for _, want := range a.DesiredSkills {
				if w := strings.ToLower(strings.TrimSpace(want)); w == s.Key || w == s.Slug || w == strings.ToLower(s.Name) {
					out[s.ID] = append(out[s.ID], AgentUse{ID: a.ID, Name: a.Name, AdapterType: a.AdapterType})
					break
				}
			}
		}
	}
	return out
}

// ensureBundled re-imports the bundled catalog skills into a company and files them in the
// bundled folder. Unchanged skills are not written.
func (x *Skills) ensureBundled(ctx context.Context, companyID string) error {
	src := &Source{Type: SourceBundled, Locator: "keel://skills"}
	// Fast path: one read says whether every bundled skill is there, filed and current.
	want := map[string]string{}
	for _, c := range catalog {
		if c.Kind == "bundled" {
			want[c.Key] = contentHash(c.files)
		}
	}
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	current := 0
	rows, err := x.pool.Query(ctx, `SELECT key, content_hash FROM skills WHERE company_id = $1 AND key = ANY($2)
		AND source_type = $3 AND folder_id IS NOT NULL`, companyID, keys, SourceBundled)
	if err != nil {
		return fmt.Errorf("error reading the bundled skills of company %s: %w", companyID, err)
	}
	for rows.Next() {
		var k, h string
		if err := rows.Scan(&k, &h); err != nil {
			rows.Close()
			return fmt.Errorf("error reading the bundled skills of company %s: %w", companyID, err)
		}
		if want[k] == h {
			current++
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("error reading the bundled skills of company %s: %w", companyID, err)
	}
	if current == len(want) {
		return nil
	}
	var cands []candidate
	for _, c := range catalog {
		if c.Kind == "bundled" {
			cands = append(cands, candidate{Dir: c.Slug, Files: c.files, Locator: "keel://skills/" + c.Slug})
		}
	}
	if _, err := x.importCandidates(ctx, companyID, src, cands, importOptions{}); err != nil {
		return err
	}
	var unfiled int
	if err := x.pool.QueryRow(ctx, `SELECT count(*) FROM skills WHERE company_id = $1 AND key = ANY($2) AND folder_id IS NULL`,
		companyID, keys).Scan(&unfiled); err != nil {
		return fmt.Errorf("error reading the bundled skills of company %s: %w", companyID, err)
	}
	if unfiled == 0 {
		return nil
	}
	folder, err := x.systemFolder(ctx, companyID, "bundled", "Bundled", "bundled", "")
	if err != nil {
		x.log.Warn("error filing bundled skills", "company", companyID, "error", err)
		return nil
	}
	if _, err := x.pool.Exec(ctx, `UPDATE skills SET folder_id = $3 WHERE company_id = $1 AND key = ANY($2) AND folder_id IS NULL`,
		companyID, keys, folder); err != nil {
		return fmt.Errorf("error filing the bundled skills of company %s: %w", companyID, err)
	}
	return nil
}

func (x *Skills) handleList(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := sdk.CompanyIDFrom(ctx)
	if err := x.ensureBundled(ctx, companyID); err != nil {
		x.writeErr(rw, err)
		return
	}
	list, err := skillList(ctx, x.pool, companyID)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	uses := x.agentsUsing(ctx, companyID, list)
	for _, s := range list {
		s.AttachedAgentCount = ptr(len(uses[s.ID]))
	}
	sdk.WriteJSON(rw, http.StatusOK, list)
}

// skillOf reads the path's skill: 404 "Skill not found" when it is not the company's.
func (x *Skills) skillOf(ctx context.Context, q querier) (*Skill, error) {
	s, err := skillGet(ctx, q, sdk.CompanyIDFrom(ctx), strings.ToLower(sdk.ParamFrom(ctx, "skillId")))
	if err != nil {
		return nil, err
	}
	if s == nil {
		return nil, sdk.NotFound(msgSkillNotFound)
	}
	return s, nil
}

func (x *Skills) handleGet(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	s, err := x.skillOf(ctx, x.pool)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	md, err := skillFile(ctx, x.pool, s.ID, SkillFile)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	s.Markdown = ptr(string(md))
	s.UsedByAgents = x.agentsUsing(ctx, s.CompanyID, []*Skill{s})[s.ID]
	if s.UsedByAgents == nil {
		s.UsedByAgents = []AgentUse{}
	}
	s.AttachedAgentCount = ptr(len(s.UsedByAgents))
	sdk.WriteJSON(rw, http.StatusOK, s)
}

// skillMarkdown writes the SKILL.md of a new managed skill.
func skillMarkdown(name, description, body string) string {
	q := func(s string) string {
		return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
	}
	var b strings.Builder
	b.WriteString("---\nname: " + q(name) + "\n")
	if description != "" {
		b.WriteString("description: " + q(description) + "\n")
	}
	b.WriteString("---\n")
	if body == "" {
		body = "# " + name + "\n"
	}
	b.WriteString(body)
	return b.String()
}

func (x *Skills) handleCreate(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := sdk.CompanyIDFrom(ctx)
	if err := x.requireMutate(ctx, companyID); err != nil {
		x.writeErr(rw, err)
		return
	}
	var body CreateBody
	if err := sdk.DecodeJSON(r, &body); err != nil {
		x.writeErr(rw, err)
		return
	}
	var d []sdk.ValidationDetail
	bad := func(p, m string) { d = append(d, sdk.ValidationDetail{Path: p, Message: m}) }
	name := strings.TrimSpace(body.Name)
	if n := utf8.RuneCountInString(name); n < 1 || n > maxSkillName {
		bad("name", "must be 1 to 200 characters")
	}
	slug := Slugify(name)
	if body.Slug != nil {
		if slug = strings.TrimSpace(*body.Slug); !slugPattern.MatchString(slug) || len(slug) > 120 {
			bad("slug", "must be kebab-case: lowercase letters and digits in hyphen-separated runs, at most 120")
		}
	} else if slug == "" && len(d) == 0 {
		bad("name", "must contain a letter or digit to derive a slug from, or give a slug")
	}
	desc := ""
	if body.Description != nil {
		if desc = strings.TrimSpace(*body.Description); utf8.RuneCountInString(desc) > maxSkillDescription {
			bad("description", "must be at most 4000 characters")
		}
	}
	if body.Markdown != nil && len(*body.Markdown) > maxManagedFileLength {
		bad("markdown", "must be at most 1 MiB")
	}
	if len(d) > 0 {
		x.writeErr(rw, sdk.ValidationError(d...))
		return
	}
	md := skillMarkdown(name, desc, deref(body.Markdown))
	key := "company/" + companyID + "/" + slug
	var out *upsertResult
	err := x.inTx(ctx, func(tx pgx.Tx) error {
		cur, err := skillGetByKey(ctx, tx, companyID, key)
		if err != nil {
			return err
		}
		if cur != nil {
			return sdk.Conflict("A managed skill with this slug already exists")
		}
		out, err = skillUpsert(ctx, tx, &upsertParams{CompanyID: companyID, Key: key, Slug: slug, Name: name, Description: desc,
			SourceType: SourceManagedLocal, Metadata: map[string]any{"sourceKind": SourceManagedLocal},
			Files: map[string][]byte{SkillFile: []byte(md)}})
		return err
	})
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	x.materializeAll(ctx, out.Skill)
	x.activity(ctx, companyID, "skill.created", out.Skill.ID, map[string]any{"key": key, "slug": slug, "name": name})
	out.Skill.Markdown = &md
	sdk.WriteJSON(rw, http.StatusCreated, out.Skill)
}

// activity appends an activity entry for a skill write (a failure is logged).
func (x *Skills) activity(ctx context.Context, companyID, action, skillID string, details map[string]any) {
	err := x.host.LogActivity(ctx, &sdk.ActivityEntry{CompanyID: companyID, Actor: sdk.ActorFrom(ctx), Action: action,
		EntityType: "skill", EntityID: skillID, Details: details})
	if err != nil {
		x.log.Warn("error appending activity", "action", action, "skill", skillID, "error", err)
	}
}

func (x *Skills) handleImport(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := sdk.CompanyIDFrom(ctx)
	if err := x.requireMutate(ctx, companyID); err != nil {
		x.writeErr(rw, err)
		return
	}
	var body ImportBody
	if err := sdk.DecodeJSON(r, &body); err != nil {
		x.writeErr(rw, err)
		return
	}
	src, err := x.resolveSource(body.Source)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	cands, warnings, err := x.load(ctx, src)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	out, err := x.importCandidates(ctx, companyID, src, cands, importOptions{})
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	x.logImport(ctx, companyID, src, out, "import")
	res := &ImportResult{Imported: append(out.Imported, out.Updated...), Updated: out.Updated, Skipped: toAny(out.Skipped),
		Warnings: append(warnings, out.Warnings...), Source: src}
	if res.Warnings == nil {
		res.Warnings = []string{}
	}
	// Unchanged skills are part of what the source holds: answer them too.
	for _, sk := range out.Skipped {
		if id, _ := sk["skillId"].(string); id != "" {
			if s, err := skillGet(ctx, x.pool, companyID, id); err == nil && s != nil {
				res.Imported = append(res.Imported, s)
			}
		}
	}
	sdk.WriteJSON(rw, http.StatusCreated, res)
}

// toAny widens a list of maps.
func toAny(in []map[string]any) []any {
	out := make([]any, 0, len(in))
	for _, m := range in {
		out = append(out, m)
	}
	return out
}

func (x *Skills) handleDelete(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := sdk.CompanyIDFrom(ctx)
	if err := x.requireMutate(ctx, companyID); err != nil {
		x.writeErr(rw, err)
		return
	}
	s, err := x.skillOf(ctx, x.pool)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	if s.SourceType == SourceBundled {
		x.writeErr(rw, sdk.Forbidden(msgBundledReadOnly))
		return
	}
	if err := x.deleteSkill(ctx, companyID, s); err != nil {
		x.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, s)
}

// deleteSkill deletes a skill with its files, forgets its copy on disk and records the
// activity entry.
func (x *Skills) deleteSkill(ctx context.Context, companyID string, s *Skill) error {
	if _, err := x.pool.Exec(ctx, `DELETE FROM skills WHERE id = $1 AND company_id = $2`, s.ID, companyID); err != nil {
		return fmt.Errorf("error deleting skill %s: %w", s.ID, err)
	}
	x.forget(companyID, s)
	x.activity(ctx, companyID, "skill.deleted", s.ID, map[string]any{"key": s.Key, "slug": s.Slug, "name": s.Name})
	return nil
}

// fileView builds a file answer: UTF-8 text as is, anything else base64.
func fileView(s *Skill, p string, b []byte) *FileView {
	v := &FileView{SkillID: s.ID, Path: p, Kind: classify(p, b), Editable: s.Editable,
		Markdown: strings.EqualFold(path.Ext(p), ".md") || strings.EqualFold(path.Ext(p), ".markdown")}
	if utf8.Valid(b) {
		v.Content, v.Encoding = string(b), "utf8"
	} else {
		v.Content, v.Encoding = base64.StdEncoding.EncodeToString(b), "base64"
	}
	return v
}

func (x *Skills) handleFileGet(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	s, err := x.skillOf(ctx, x.pool)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	p := r.URL.Query().Get("path")
	if p == "" {
		p = SkillFile
	}
	p, ok := cleanRelPath(p)
	if !ok {
		x.writeErr(rw, sdk.Invalid("path", "must be a relative path inside the skill"))
		return
	}
	b, err := skillFile(ctx, x.pool, s.ID, p)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	if b == nil {
		x.writeErr(rw, sdk.NotFound(msgFileNotFound))
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, fileView(s, p, b))
}

func (x *Skills) handleFilePatch(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := sdk.CompanyIDFrom(ctx)
	if err := x.requireMutate(ctx, companyID); err != nil {
		x.writeErr(rw, err)
		return
	}
	var body FilePatchBody
	if err := sdk.DecodeJSON(r, &body); err != nil {
		x.writeErr(rw, err)
		return
	}
	p, ok := cleanRelPath(body.Path)
	if !ok {
		x.writeErr(rw, sdk.Invalid("path", "must be a relative path inside the skill"))
		return
	}
	if len(body.Content) > maxManagedFileLength {
		x.writeErr(rw, sdk.Invalid("content", "must be at most 1 MiB"))
		return
	}
	var view *FileView
	var s *Skill
	err := x.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		if s, err = x.skillOf(ctx, tx); err != nil {
			return err
		}
		switch {
		case s.SourceType == SourceBundled:
			return sdk.Forbidden(msgBundledReadOnly)
		case !s.Editable:
			return sdk.Forbidden(msgNotEditable)
		}
		files, err := skillFiles(ctx, tx, s.ID)
		if err != nil {
			return err
		}
		if _, exists := files[p]; !exists && len(files) >= importMaxFiles {
			return sdk.Unprocessable(fmt.Sprintf("A skill holds at most %d files", importMaxFiles))
		}
		files[p] = []byte(body.Content)
		name, desc := s.Name, s.Description
		if p == SkillFile {
			parsed, err := ParseSkill(body.Content)
			if err != nil {
				return sdk.Invalid("content", "the SKILL.md frontmatter cannot be read: "+err.Error())
			}
			if parsed.Name != "" {
				name = parsed.Name
			}
			desc = parsed.Description
		}
		res, err := skillUpsert(ctx, tx, &upsertParams{CompanyID: companyID, Key: s.Key, Slug: s.Slug, Name: name, Description: desc,
			SourceType: s.SourceType, Locator: s.SourceLocator, Ref: s.SourceRef, Metadata: s.Metadata, Files: files, ManagedBy: s.ManagedBy})
		if err != nil {
			return err
		}
		s = res.Skill
		view = fileView(s, p, files[p])
		return nil
	})
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	x.materializeAll(ctx, s)
	x.activity(ctx, companyID, "skill.file_updated", s.ID, map[string]any{"key": s.Key, "path": p})
	sdk.WriteJSON(rw, http.StatusOK, view)
}

// forgeManaged reports whether a skill follows a forge ref, with its owner, repo and ref.
func forgeManaged(s *Skill) (owner, repo, ref string, ok bool) {
	if s.SourceType != SourceForge && s.SourceType != SourceRegistrySite {
		return "", "", "", false
	}
	owner, repo = str(s.Metadata, "owner"), str(s.Metadata, "repo")
	ref = str(s.Metadata, "trackingRef")
	return owner, repo, ref, owner != "" && repo != ""
}

// updateStatus checks a forge-managed skill's tracking ref.
func (x *Skills) updateStatus(ctx context.Context, s *Skill) (*UpdateStatus, error) {
	owner, repo, ref, ok := forgeManaged(s)
	if !ok {
		return &UpdateStatus{Reason: ptr(msgNotForge), CurrentCommit: s.SourceRef}, nil
	}
	branch, sha, err := x.forgeCommit(ctx, owner, repo, ref)
	if err != nil {
		return nil, err
	}
	return &UpdateStatus{Supported: true, TrackingRef: &branch, CurrentCommit: s.SourceRef, LatestCommit: &sha,
		HasUpdate: deref(s.SourceRef) != sha}, nil
}

func (x *Skills) handleUpdateStatus(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	s, err := x.skillOf(ctx, x.pool)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	st, err := x.updateStatus(ctx, s)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, st)
}

func (x *Skills) handleInstallUpdate(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := sdk.CompanyIDFrom(ctx)
	if err := x.requireMutate(ctx, companyID); err != nil {
		x.writeErr(rw, err)
		return
	}
	s, err := x.skillOf(ctx, x.pool)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	owner, repo, ref, ok := forgeManaged(s)
	if !ok {
		x.writeErr(rw, sdk.Unprocessable(msgNotForge))
		return
	}
	src := x.forgeSource(owner, repo)
	src.Type, src.Ref, src.TrackingRef, src.Path = s.SourceType, ref, ref, str(s.Metadata, "path")
	src.Original = str(s.Metadata, "originalLocator")
	cands, warnings, err := x.loadForge(ctx, src)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	var pick []candidate
	for _, c := range cands {
		if c.Dir == src.Path {
			pick = append(pick, c)
		}
	}
	if len(pick) != 1 {
		x.writeErr(rw, sdk.Unprocessable("The skill is no longer at "+src.Path+" in "+owner+"/"+repo))
		return
	}
	p, w, err := prepare(companyID, src, pick[0])
	if err != nil {
		x.writeErr(rw, sdk.Unprocessable(err.Error()))
		return
	}
	warnings = append(warnings, w...)
	// The update keeps the skill's key even if the new SKILL.md asks for another one.
	p.params.Key = s.Key
	var res *upsertResult
	if err := x.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		res, err = skillUpsert(ctx, tx, p.params)
		return err
	}); err != nil {
		x.writeErr(rw, err)
		return
	}
	if res.Changed {
		x.materializeAll(ctx, res.Skill)
		x.logImport(ctx, companyID, src, &importOutcome{Updated: []*Skill{res.Skill}}, "install-update")
	}
	if len(warnings) > 0 {
		x.log.Info("skill update warnings", "skill", s.ID, "warnings", warnings)
	}
	sdk.WriteJSON(rw, http.StatusOK, res.Skill)
}

// isNotFound reports an owner's 404.
func isNotFound(err error) bool {
	var e *sdk.Error
	return errors.As(err, &e) && e.Status == http.StatusNotFound
}
