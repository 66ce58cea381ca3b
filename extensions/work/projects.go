package work

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/idem"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

// Project statuses (REFERENCE 2.3).
var projectStatuses = []string{"backlog", "planned", "in_progress", "completed", "cancelled"}

// Project workspace source types and visibilities (REFERENCE 2.3).
var (
	workspaceSourceTypes  = []string{"local_path", "git_repo", "remote_managed", "non_git_path"}
	workspaceVisibilities = []string{"default", "advanced"}
)

// Project is a row of ext_work.projects and its API shape. The read adds goalIds, goals,
// workspaces, primaryWorkspace and urlKey, which are not columns.
type Project struct {
	bun.BaseModel `bun:"table:projects"`

	ID                       string          `bun:"id,pk,type:uuid" json:"id"`
	CompanyID                string          `bun:"company_id,type:uuid" json:"companyId"`
	GoalID                   *string         `bun:"goal_id,type:uuid" json:"goalId"`
	Name                     string          `bun:"name" json:"name"`
	Description              *string         `bun:"description" json:"description"`
	Status                   string          `bun:"status" json:"status"`
	LeadAgentID              *string         `bun:"lead_agent_id,type:uuid" json:"leadAgentId"`
	TargetDate               *calendarDate   `bun:"target_date,type:date" json:"targetDate"`
	Color                    *string         `bun:"color" json:"color"`
	Icon                     *string         `bun:"icon" json:"icon"`
	Env                      json.RawMessage `bun:"env,type:jsonb,nullzero" json:"env"`
	PauseReason              *string         `bun:"pause_reason" json:"pauseReason"`
	PausedAt                 *time.Time      `bun:"paused_at" json:"pausedAt"`
	ExecutionWorkspacePolicy json.RawMessage `bun:"execution_workspace_policy,type:jsonb,nullzero" json:"executionWorkspacePolicy"`
	ArchivedAt               *time.Time      `bun:"archived_at" json:"archivedAt"`
	CreatedAt                time.Time       `bun:"created_at,nullzero,notnull,default:current_timestamp" json:"createdAt"`
	UpdatedAt                time.Time       `bun:"updated_at,nullzero,notnull,default:current_timestamp" json:"updatedAt"`

	URLKey           string              `bun:"-" json:"urlKey"`
	GoalIDs          []string            `bun:"-" json:"goalIds"`
	Goals            []ProjectGoalRef    `bun:"-" json:"goals"`
	Workspaces       []*ProjectWorkspace `bun:"-" json:"workspaces"`
	PrimaryWorkspace *ProjectWorkspace   `bun:"-" json:"primaryWorkspace"`
}

// ProjectGoalRef names one goal of a project.
type ProjectGoalRef struct {
	ID    string `json:"id"`
	Title string `json:"title"`
}

// ProjectWorkspace is a row of ext_work.project_workspaces and its API shape: a place the
// project's work happens (a local folder, a git repository, a remote managed workspace).
type ProjectWorkspace struct {
	bun.BaseModel `bun:"table:project_workspaces"`

	ID                 string          `bun:"id,pk,type:uuid" json:"id"`
	CompanyID          string          `bun:"company_id,type:uuid" json:"companyId"`
	ProjectID          string          `bun:"project_id,type:uuid" json:"projectId"`
	Name               string          `bun:"name" json:"name"`
	SourceType         string          `bun:"source_type" json:"sourceType"`
	Cwd                *string         `bun:"cwd" json:"cwd"`
	RepoURL            *string         `bun:"repo_url" json:"repoUrl"`
	RepoRef            *string         `bun:"repo_ref" json:"repoRef"`
	DefaultRef         *string         `bun:"default_ref" json:"defaultRef"`
	Visibility         string          `bun:"visibility" json:"visibility"`
	SetupCommand       *string         `bun:"setup_command" json:"setupCommand"`
	CleanupCommand     *string         `bun:"cleanup_command" json:"cleanupCommand"`
	RemoteProvider     *string         `bun:"remote_provider" json:"remoteProvider"`
	RemoteWorkspaceRef *string         `bun:"remote_workspace_ref" json:"remoteWorkspaceRef"`
	SharedWorkspaceKey *string         `bun:"shared_workspace_key" json:"sharedWorkspaceKey"`
	Metadata           json.RawMessage `bun:"metadata,type:jsonb,nullzero" json:"metadata"`
	IsPrimary          bool            `bun:"is_primary,notnull" json:"isPrimary"`
	RuntimeConfig      json.RawMessage `bun:"runtime_config,type:jsonb,nullzero" json:"runtimeConfig"`
	CreatedAt          time.Time       `bun:"created_at,nullzero,notnull,default:current_timestamp" json:"createdAt"`
	UpdatedAt          time.Time       `bun:"updated_at,nullzero,notnull,default:current_timestamp" json:"updatedAt"`
}

func init() {
	addRoutes(
		route{Method: "GET", Path: "/api/companies/{companyId}/projects", Query: projectListQuery{}, Response: new([]*Project), CompanyFromPath: true,
			Summary: "List the company's projects (filter status; limit default 200, at most 500)", Handle: handleProjectList},
		route{Method: "POST", Path: "/api/companies/{companyId}/projects", Status: http.StatusCreated, Response: new(Project), CompanyFromPath: true,
			Summary: "Create a project, optionally with goals and a first workspace", Body: projectCreateBody{}, Handle: handleProjectCreate},
		route{Method: "GET", Path: "/api/projects/{id}", Response: new(Project), Summary: "Read a project with its goal ids and workspaces", Handle: handleProjectGet},
		route{Method: "PATCH", Path: "/api/projects/{id}", Response: new(Project),
			Summary: "Update a project; pauseReason pauses it (null resumes), goalIds replaces its goals", Body: projectPatchBody{}, Handle: handleProjectPatch},
		route{Method: "DELETE", Path: "/api/projects/{id}", Response: new(Project), Summary: "Delete a project and its workspaces", Handle: handleProjectDelete},
		route{Method: "GET", Path: "/api/projects/{id}/workspaces", Response: new([]*ProjectWorkspace), Summary: "List a project's workspaces", Handle: handleWorkspaceList},
		route{Method: "POST", Path: "/api/projects/{id}/workspaces", Status: http.StatusCreated, Response: new(ProjectWorkspace),
			Summary: "Add a workspace (cwd or repoUrl required; isPrimary clears the other primaries)", Body: workspaceBody{}, Handle: handleWorkspaceCreate},
		route{Method: "PATCH", Path: "/api/projects/{id}/workspaces/{workspaceId}", Response: new(ProjectWorkspace), Summary: "Update a workspace", Body: workspaceBody{}, Handle: handleWorkspacePatch},
		route{Method: "DELETE", Path: "/api/projects/{id}/workspaces/{workspaceId}", Response: new(ProjectWorkspace),
			Summary: "Delete a workspace (the oldest remaining becomes primary when the primary goes)", Handle: handleWorkspaceDelete},
	)
}

// ---- shared helpers of the projects, goals, approvals and search areas ----

// fieldProblems collects validation details; err is nil when there are none.
type fieldProblems []validationDetail

func (p *fieldProblems) add(path, msg string) {
	*p = append(*p, validationDetail{Path: path, Message: msg})
}

func (p fieldProblems) err() error {
	if len(p) == 0 {
		return nil
	}
	return validationError(p...)
}

// cleanText trims s and checks it is valid UTF-8 without NUL bytes and at most max
// characters; it reports the problem under path and returns the trimmed text.
func cleanText(probs *fieldProblems, path, s string, max int) string {
	s = strings.TrimSpace(s)
	switch {
	case !utf8.ValidString(s) || strings.ContainsRune(s, 0):
		probs.add(path, "must be valid UTF-8 text without NUL characters")
	case max > 0 && utf8.RuneCountInString(s) > max:
		probs.add(path, fmt.Sprintf("must be at most %d characters", max))
	}
	return s
}

// optText applies a nullable text field: null or blank clears it.
func optText(probs *fieldProblems, path string, f patchField[string], max int, dst **string) bool {
	if !f.Set {
		return false
	}
	if f.Null {
		*dst = nil
		return true
	}
	s := cleanText(probs, path, f.Value, max)
	if s == "" {
		*dst = nil
	} else {
		*dst = &s
	}
	return true
}

// oneOf reports whether v is in the list, adding a problem otherwise.
func oneOf(probs *fieldProblems, path, v string, list []string) bool {
	if slices.Contains(list, v) {
		return true
	}
	probs.add(path, "must be one of "+strings.Join(list, ", "))
	return false
}

// jsonObject encodes an object field for a jsonb column ({} for null).
func jsonObject(m map[string]any) json.RawMessage {
	if m == nil {
		return json.RawMessage(`{}`)
	}
	b, err := json.Marshal(m)
	if err != nil {
		return json.RawMessage(`{}`)
	}
	return b
}

// lookupCompanyAgent returns the kernel identity of an agent of the company, or nil when
// the id names no agent of that company.
func (w *Work) lookupCompanyAgent(ctx context.Context, companyID, agentID string) (*hostv1.AgentIdentity, error) {
	if !isUUID(agentID) {
		return nil, nil
	}
	a, err := w.host.Principals.GetAgent(ctx, &hostv1.GetAgentRequest{AgentId: agentID})
	if status.Code(err) == codes.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("error reading agent %s: %w", agentID, err)
	}
	if a.CompanyId != companyID {
		return nil, nil
	}
	return a, nil
}

// checkCompanyAgent validates an optional agent reference of the company (not terminated).
func (w *Work) checkCompanyAgent(ctx context.Context, probs *fieldProblems, path, companyID string, agentID *string) error {
	if agentID == nil {
		return nil
	}
	a, err := w.lookupCompanyAgent(ctx, companyID, *agentID)
	if err != nil {
		return err
	}
	switch {
	case a == nil:
		probs.add(path, "must be an agent of this company")
	case a.Status == "terminated":
		probs.add(path, "agent is terminated")
	}
	return nil
}

// uniqueStrings returns the strings of list without repeats, in first-seen order.
func uniqueStrings(list []string) []string {
	var out []string
	for _, s := range list {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// calendarDate is a date column shown as YYYY-MM-DD.
type calendarDate string

// Scan reads a date column.
func (d *calendarDate) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*d = ""
	case time.Time:
		*d = calendarDate(v.Format(time.DateOnly))
	case string:
		*d = calendarDate(v[:min(len(v), 10)])
	case []byte:
		*d = calendarDate(v[:min(len(v), 10)])
	default:
		return fmt.Errorf("cannot scan %T into a date", src)
	}
	return nil
}

// Value writes the date.
func (d calendarDate) Value() (driver.Value, error) { return string(d), nil }

var projectColorPattern = regexp.MustCompile(`^#[0-9A-Fa-f]{6}$`)

// projectURLKey derives a URL key from a project name: lowercase, runs of characters other
// than a-z and 0-9 become '-'.
func projectURLKey(name string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			dash = false
			continue
		}
		if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	if k := strings.TrimRight(b.String(), "-"); k != "" {
		return k
	}
	return "project"
}

// ---- projects ----

// projectCreateBody is the body of POST /api/companies/{companyId}/projects.
type projectCreateBody struct {
	Name        string  `json:"name" jsonschema:"required,maxLength=200"`
	Description *string `json:"description,omitempty"`
	Status      string  `json:"status,omitempty" jsonschema:"enum=backlog,enum=planned,enum=in_progress,enum=completed,enum=cancelled"`
	LeadAgentID *string `json:"leadAgentId,omitempty"`
	// TargetDate is YYYY-MM-DD.
	TargetDate *string `json:"targetDate,omitempty"`
	// Color is #RRGGBB.
	Color *string `json:"color,omitempty"`
	Icon  *string `json:"icon,omitempty"`
	// GoalID is deprecated; it is added to goalIds.
	GoalID  *string  `json:"goalId,omitempty"`
	GoalIDs []string `json:"goalIds,omitempty"`
	// Env is the project's environment map (plain values or secret references).
	Env                      map[string]any `json:"env,omitempty"`
	ExecutionWorkspacePolicy map[string]any `json:"executionWorkspacePolicy,omitempty"`
	// Workspace, when given, is created with the project as its primary workspace.
	Workspace *workspaceBody `json:"workspace,omitempty"`
}

// projectPatchBody is the body of PATCH /api/projects/{id}; absent keys are left alone.
type projectPatchBody struct {
	Name                     patchField[string]         `json:"name"`
	Description              patchField[string]         `json:"description"`
	Status                   patchField[string]         `json:"status"`
	LeadAgentID              patchField[string]         `json:"leadAgentId"`
	TargetDate               patchField[string]         `json:"targetDate"`
	Color                    patchField[string]         `json:"color"`
	Icon                     patchField[string]         `json:"icon"`
	GoalID                   patchField[string]         `json:"goalId"`
	GoalIDs                  patchField[[]string]       `json:"goalIds"`
	Env                      patchField[map[string]any] `json:"env"`
	ExecutionWorkspacePolicy patchField[map[string]any] `json:"executionWorkspacePolicy"`
	// PauseReason pauses the project (routines skip paused projects); null resumes it.
	PauseReason patchField[string] `json:"pauseReason"`
}

func handleProjectList(w *Work, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	limit, offset, err := page(r, 200, 500)
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	q := w.db.NewSelect().Model((*Project)(nil)).Where("company_id = ?", r.PathValue("companyId"))
	if s := r.URL.Query().Get("status"); s != "" {
		var probs fieldProblems
		for _, st := range strings.Split(s, ",") {
			oneOf(&probs, "status", strings.TrimSpace(st), projectStatuses)
		}
		if err := probs.err(); err != nil {
			w.writeErr(rw, err)
			return
		}
		q = q.Where("status IN (?)", bun.In(strings.Split(strings.ReplaceAll(s, " ", ""), ",")))
	}
	var ps []*Project
	if err := q.Order("created_at DESC", "id DESC").Limit(int64(limit)).Offset(int64(offset)).Scan(ctx, &ps); err != nil {
		w.writeErr(rw, fmt.Errorf("error listing projects: %w", err))
		return
	}
	if err := w.projectsDecorate(ctx, w.db, ps); err != nil {
		w.writeErr(rw, err)
		return
	}
	if ps == nil {
		ps = []*Project{}
	}
	sdk.WriteJSON(rw, http.StatusOK, ps)
}

// checkProjectGoals validates goal ids of a project (same company, deduplicated).
func (w *Work) checkProjectGoals(ctx context.Context, probs *fieldProblems, companyID string, ids []string) ([]string, error) {
	var out []string
	for i, id := range ids {
		id = strings.ToLower(strings.TrimSpace(id))
		if !isUUID(id) {
			probs.add(fmt.Sprintf("goalIds[%d]", i), "must be a goal id")
			continue
		}
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	if len(out) == 0 {
		return out, nil
	}
	var found []string
	if err := w.db.NewSelect().Table("goals").Column("id").Where("company_id = ? AND id IN (?)", companyID, bun.In(out)).
		Scan(ctx, &found); err != nil {
		return nil, fmt.Errorf("error checking goals: %w", err)
	}
	for _, id := range out {
		if !slices.Contains(found, id) {
			probs.add("goalIds", "goal "+id+" not found in this company")
		}
	}
	return out, nil
}

func handleProjectCreate(w *Work, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := r.PathValue("companyId")
	var body projectCreateBody
	if err := decodeBody(r, &body); err != nil {
		w.writeErr(rw, err)
		return
	}
	var probs fieldProblems
	p := &Project{ID: uuid.NewString(), CompanyID: companyID, Status: "backlog",
		Env: json.RawMessage(`{}`)}
	p.Name = cleanText(&probs, "name", body.Name, 200)
	if p.Name == "" {
		probs.add("name", "is required")
	}
	if body.Description != nil {
		optText(&probs, "description", patchField[string]{Set: true, Value: *body.Description}, 0, &p.Description)
	}
	if body.Status != "" && oneOf(&probs, "status", body.Status, projectStatuses) {
		p.Status = body.Status
	}
	pp := projectPatchBody{}
	if body.LeadAgentID != nil {
		pp.LeadAgentID = patchField[string]{Set: true, Value: *body.LeadAgentID}
	}
	if body.TargetDate != nil {
		pp.TargetDate = patchField[string]{Set: true, Value: *body.TargetDate}
	}
	if body.Color != nil {
		pp.Color = patchField[string]{Set: true, Value: *body.Color}
	}
	if body.Icon != nil {
		pp.Icon = patchField[string]{Set: true, Value: *body.Icon}
	}
	pp.applySimple(&probs, p)
	if body.Env != nil {
		p.Env = jsonObject(body.Env)
	}
	if body.ExecutionWorkspacePolicy != nil {
		p.ExecutionWorkspacePolicy = jsonObject(body.ExecutionWorkspacePolicy)
	}
	if err := w.checkCompanyAgent(ctx, &probs, "leadAgentId", companyID, p.LeadAgentID); err != nil {
		w.writeErr(rw, err)
		return
	}
	goalIDs := body.GoalIDs
	if body.GoalID != nil {
		goalIDs = append([]string{*body.GoalID}, goalIDs...)
	}
	goalIDs, err := w.checkProjectGoals(ctx, &probs, companyID, goalIDs)
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	if len(goalIDs) > 0 {
		p.GoalID = &goalIDs[0]
	}
	var ws *ProjectWorkspace
	if body.Workspace != nil {
		ws = newProjectWorkspace(p)
		body.Workspace.apply(&probs, "workspace.", ws, true)
		ws.IsPrimary = true
	}
	if err := probs.err(); err != nil {
		w.writeErr(rw, err)
		return
	}
	err = w.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewInsert().Model(p).Returning("*").Exec(ctx); err != nil {
			return fmt.Errorf("error inserting project: %w", err)
		}
		if err := projectGoalsReplace(ctx, tx, p, goalIDs); err != nil {
			return err
		}
		if ws != nil {
			if _, err := tx.NewInsert().Model(ws).Returning("*").Exec(ctx); err != nil {
				return fmt.Errorf("error inserting workspace: %w", err)
			}
		}
		return idem.Record(ctx, tx, http.StatusCreated, "/api/projects/"+p.ID)
	})
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	if err := w.projectsDecorate(ctx, w.db, []*Project{p}); err != nil {
		w.writeErr(rw, err)
		return
	}
	w.activityOrLog(ctx, companyID, "project.created", "project", p.ID, map[string]any{"name": p.Name, "goalIds": p.GoalIDs})
	if ws != nil {
		w.activityOrLog(ctx, companyID, "project.workspace_created", "project", p.ID, map[string]any{"workspaceId": ws.ID, "name": ws.Name})
	}
	sdk.WriteJSON(rw, http.StatusCreated, p)
}

// applySimple applies the fields that need no lookups (everything but name, status,
// description, goals, env, policy and pause, which the callers handle).
func (b *projectPatchBody) applySimple(probs *fieldProblems, p *Project) []string {
	var cols []string
	if b.LeadAgentID.Set {
		cols = append(cols, "lead_agent_id")
		if b.LeadAgentID.Null {
			p.LeadAgentID = nil
		} else {
			id := strings.ToLower(strings.TrimSpace(b.LeadAgentID.Value))
			p.LeadAgentID = &id
		}
	}
	if b.TargetDate.Set {
		cols = append(cols, "target_date")
		p.TargetDate = nil
		if !b.TargetDate.Null && b.TargetDate.Value != "" {
			if t, err := time.Parse(time.DateOnly, b.TargetDate.Value); err != nil {
				probs.add("targetDate", "must be a date YYYY-MM-DD")
			} else {
				d := calendarDate(t.Format(time.DateOnly))
				p.TargetDate = &d
			}
		}
	}
	if b.Color.Set {
		cols = append(cols, "color")
		p.Color = nil
		if !b.Color.Null && b.Color.Value != "" {
			if !projectColorPattern.MatchString(b.Color.Value) {
				probs.add("color", "must be a colour #RRGGBB")
			} else {
				c := strings.ToLower(b.Color.Value)
				p.Color = &c
			}
		}
	}
	if optText(probs, "icon", b.Icon, 100, &p.Icon) {
		cols = append(cols, "icon")
	}
	return cols
}

// projectGoalsReplace sets the goals of a project (and the deprecated goal_id).
func projectGoalsReplace(ctx context.Context, tx bun.IDB, p *Project, goalIDs []string) error {
	if _, err := tx.NewDelete().Table("project_goals").Where("project_id = ?", p.ID).Exec(ctx); err != nil {
		return fmt.Errorf("error clearing goals of project %s: %w", p.ID, err)
	}
	for i, id := range goalIDs {
		if _, err := tx.NewRaw(`INSERT INTO project_goals (project_id, goal_id, company_id, created_at)
			VALUES (?, ?, ?, now() + ? * interval '1 microsecond')`, p.ID, id, p.CompanyID, i).Exec(ctx); err != nil {
			return fmt.Errorf("error adding goal %s to project %s: %w", id, p.ID, err)
		}
	}
	return nil
}

// projectGet loads a project by id (nil when missing).
func (w *Work) projectGet(ctx context.Context, db bun.IDB, id string, forUpdate bool) (*Project, error) {
	if !isUUID(id) {
		return nil, nil
	}
	p := new(Project)
	q := db.NewSelect().Model(p).Where("id = ?", id)
	if forUpdate {
		q = q.For("UPDATE")
	}
	if err := q.Scan(ctx); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, nil
		}
		return nil, fmt.Errorf("error reading project %s: %w", id, err)
	}
	return p, nil
}

// projectByRef loads the project a route names and checks company access (404, 403).
func (w *Work) projectByRef(ctx context.Context, id string) (*Project, error) {
	p, err := w.projectGet(ctx, w.db, id, false)
	if err != nil {
		return nil, err
	}
	if p == nil {
		return nil, notFound("Project not found")
	}
	if err := requireCompanyAccess(ctx, p.CompanyID); err != nil {
		return nil, err
	}
	return p, nil
}

// projectsDecorate fills the read-only parts of projects: goals, workspaces, URL key.
func (w *Work) projectsDecorate(ctx context.Context, db bun.IDB, ps []*Project) error {
	if len(ps) == 0 {
		return nil
	}
	ids := make([]string, len(ps))
	byID := map[string]*Project{}
	for i, p := range ps {
		ids[i] = p.ID
		byID[p.ID] = p
		p.URLKey = projectURLKey(p.Name)
		p.GoalIDs, p.Goals, p.Workspaces, p.PrimaryWorkspace = []string{}, []ProjectGoalRef{}, []*ProjectWorkspace{}, nil
	}
	var links []struct {
		ProjectID string `bun:"project_id"`
		GoalID    string `bun:"goal_id"`
		Title     string `bun:"title"`
	}
	if err := db.NewRaw(`SELECT pg.project_id, pg.goal_id, g.title FROM project_goals pg JOIN goals g ON g.id = pg.goal_id
		WHERE pg.project_id IN (?) ORDER BY pg.created_at, pg.goal_id`, bun.In(ids)).Scan(ctx, &links); err != nil {
		return fmt.Errorf("error reading project goals: %w", err)
	}
	for _, l := range links {
		p := byID[l.ProjectID]
		p.GoalIDs = append(p.GoalIDs, l.GoalID)
		p.Goals = append(p.Goals, ProjectGoalRef{ID: l.GoalID, Title: l.Title})
	}
	var wss []*ProjectWorkspace
	if err := db.NewSelect().Model(&wss).Where("project_id IN (?)", bun.In(ids)).Order("created_at", "id").Scan(ctx); err != nil {
		return fmt.Errorf("error reading project workspaces: %w", err)
	}
	for _, ws := range wss {
		p := byID[ws.ProjectID]
		p.Workspaces = append(p.Workspaces, ws)
		if ws.IsPrimary {
			p.PrimaryWorkspace = ws
		}
	}
	return nil
}

func handleProjectGet(w *Work, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	p, err := w.projectByRef(ctx, r.PathValue("id"))
	if err == nil {
		err = w.projectsDecorate(ctx, w.db, []*Project{p})
	}
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, p)
}

func handleProjectPatch(w *Work, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	cur, err := w.projectByRef(ctx, r.PathValue("id"))
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	var body projectPatchBody
	if err := decodeBody(r, &body); err != nil {
		w.writeErr(rw, err)
		return
	}
	// Lookups first, outside the transaction.
	var probs fieldProblems
	if body.LeadAgentID.Set && !body.LeadAgentID.Null {
		id := strings.TrimSpace(body.LeadAgentID.Value)
		if err := w.checkCompanyAgent(ctx, &probs, "leadAgentId", cur.CompanyID, &id); err != nil {
			w.writeErr(rw, err)
			return
		}
	}
	var goalIDs []string
	goalsSet := body.GoalIDs.Set || body.GoalID.Set
	if goalsSet {
		ids := body.GoalIDs.Value
		if body.GoalID.Set && !body.GoalID.Null {
			ids = append([]string{body.GoalID.Value}, ids...)
		}
		if goalIDs, err = w.checkProjectGoals(ctx, &probs, cur.CompanyID, ids); err != nil {
			w.writeErr(rw, err)
			return
		}
	}
	if err := probs.err(); err != nil {
		w.writeErr(rw, err)
		return
	}
	var p *Project
	var changed []string
	err = w.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if p, err = w.projectGet(ctx, tx, cur.ID, true); err != nil {
			return err
		}
		if p == nil {
			return notFound("Project not found")
		}
		var probs fieldProblems
		cols := body.applySimple(&probs, p)
		if body.Name.Set {
			name := ""
			if !body.Name.Null {
				name = cleanText(&probs, "name", body.Name.Value, 200)
			}
			if name == "" {
				probs.add("name", "is required")
			}
			p.Name = name
			cols = append(cols, "name")
		}
		if optText(&probs, "description", body.Description, 0, &p.Description) {
			cols = append(cols, "description")
		}
		if body.Status.Set {
			if body.Status.Null {
				probs.add("status", "must be one of "+strings.Join(projectStatuses, ", "))
			} else if oneOf(&probs, "status", body.Status.Value, projectStatuses) {
				p.Status = body.Status.Value
				cols = append(cols, "status")
			}
		}
		if body.Env.Set {
			p.Env = jsonObject(body.Env.Value)
			cols = append(cols, "env")
		}
		if body.ExecutionWorkspacePolicy.Set {
			p.ExecutionWorkspacePolicy = nil
			if !body.ExecutionWorkspacePolicy.Null {
				p.ExecutionWorkspacePolicy = jsonObject(body.ExecutionWorkspacePolicy.Value)
			}
			cols = append(cols, "execution_workspace_policy")
		}
		if body.PauseReason.Set {
			var reason *string
			optText(&probs, "pauseReason", body.PauseReason, 500, &reason)
			if reason == nil && !body.PauseReason.Null {
				probs.add("pauseReason", "must be non-empty, or null to resume")
			}
			p.PauseReason = reason
			if reason == nil {
				p.PausedAt = nil
			} else if p.PausedAt == nil {
				now := time.Now().UTC()
				p.PausedAt = &now
			}
			cols = append(cols, "pause_reason", "paused_at")
		}
		if goalsSet {
			p.GoalID = nil
			if len(goalIDs) > 0 {
				p.GoalID = &goalIDs[0]
			}
			cols = append(cols, "goal_id")
			if err := projectGoalsReplace(ctx, tx, p, goalIDs); err != nil {
				return err
			}
		}
		if err := probs.err(); err != nil {
			return err
		}
		cols = uniqueStrings(cols)
		changed = cols
		if len(cols) == 0 {
			return nil
		}
		p.UpdatedAt = time.Now().UTC()
		if _, err := tx.NewUpdate().Model(p).Column(append(cols, "updated_at")...).WherePK().Returning("*").Exec(ctx); err != nil {
			return fmt.Errorf("error updating project %s: %w", p.ID, err)
		}
		return nil
	})
	if err == nil {
		err = w.projectsDecorate(ctx, w.db, []*Project{p})
	}
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	if len(changed) > 0 {
		details := map[string]any{"changes": changed}
		if body.PauseReason.Set {
			details["paused"] = p.PausedAt != nil
			details["pauseReason"] = p.PauseReason
		}
		w.activityOrLog(ctx, p.CompanyID, "project.updated", "project", p.ID, details)
	}
	sdk.WriteJSON(rw, http.StatusOK, p)
}

func handleProjectDelete(w *Work, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	p, err := w.projectByRef(ctx, r.PathValue("id"))
	if err == nil {
		err = w.projectsDecorate(ctx, w.db, []*Project{p})
	}
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	res, err := w.db.NewDelete().Model((*Project)(nil)).Where("id = ?", p.ID).Exec(ctx)
	if err != nil {
		w.writeErr(rw, fmt.Errorf("error deleting project %s: %w", p.ID, err))
		return
	}
	if n, _ := res.RowsAffected(); n == 0 {
		w.writeErr(rw, notFound("Project not found"))
		return
	}
	w.activityOrLog(ctx, p.CompanyID, "project.deleted", "project", p.ID, map[string]any{"name": p.Name})
	sdk.WriteJSON(rw, http.StatusOK, p)
}

// ---- workspaces ----

// workspaceBody is the body of the workspace routes (and the project create's workspace);
// on update absent keys are left alone.
type workspaceBody struct {
	Name               patchField[string]         `json:"name"`
	SourceType         patchField[string]         `json:"sourceType"`
	Cwd                patchField[string]         `json:"cwd"`
	RepoURL            patchField[string]         `json:"repoUrl"`
	RepoRef            patchField[string]         `json:"repoRef"`
	DefaultRef         patchField[string]         `json:"defaultRef"`
	Visibility         patchField[string]         `json:"visibility"`
	SetupCommand       patchField[string]         `json:"setupCommand"`
	CleanupCommand     patchField[string]         `json:"cleanupCommand"`
	RemoteProvider     patchField[string]         `json:"remoteProvider"`
	RemoteWorkspaceRef patchField[string]         `json:"remoteWorkspaceRef"`
	SharedWorkspaceKey patchField[string]         `json:"sharedWorkspaceKey"`
	Metadata           patchField[map[string]any] `json:"metadata"`
	IsPrimary          patchField[bool]           `json:"isPrimary"`
	RuntimeConfig      patchField[map[string]any] `json:"runtimeConfig"`
}

func newProjectWorkspace(p *Project) *ProjectWorkspace {
	return &ProjectWorkspace{ID: uuid.NewString(), CompanyID: p.CompanyID, ProjectID: p.ID, Visibility: "default",
		Metadata: json.RawMessage(`{}`), RuntimeConfig: json.RawMessage(`{}`)}
}

// apply applies the body to ws, reporting problems under prefix, and returns the changed
// columns. A workspace must keep a cwd or a repoUrl.
func (b *workspaceBody) apply(probs *fieldProblems, prefix string, ws *ProjectWorkspace, creating bool) []string {
	var cols []string
	text := func(name, col string, f patchField[string], max int, dst **string) {
		if optText(probs, prefix+name, f, max, dst) {
			cols = append(cols, col)
		}
	}
	text("cwd", "cwd", b.Cwd, 4096, &ws.Cwd)
	text("repoUrl", "repo_url", b.RepoURL, 2048, &ws.RepoURL)
	text("repoRef", "repo_ref", b.RepoRef, 500, &ws.RepoRef)
	text("defaultRef", "default_ref", b.DefaultRef, 500, &ws.DefaultRef)
	text("setupCommand", "setup_command", b.SetupCommand, 10000, &ws.SetupCommand)
	text("cleanupCommand", "cleanup_command", b.CleanupCommand, 10000, &ws.CleanupCommand)
	text("remoteProvider", "remote_provider", b.RemoteProvider, 200, &ws.RemoteProvider)
	text("remoteWorkspaceRef", "remote_workspace_ref", b.RemoteWorkspaceRef, 2048, &ws.RemoteWorkspaceRef)
	text("sharedWorkspaceKey", "shared_workspace_key", b.SharedWorkspaceKey, 500, &ws.SharedWorkspaceKey)
	if b.SourceType.Set {
		if !b.SourceType.Null && oneOf(probs, prefix+"sourceType", b.SourceType.Value, workspaceSourceTypes) {
			ws.SourceType = b.SourceType.Value
			cols = append(cols, "source_type")
		} else if b.SourceType.Null {
			probs.add(prefix+"sourceType", "must be one of "+strings.Join(workspaceSourceTypes, ", "))
		}
	} else if creating {
		ws.SourceType = "local_path"
		if ws.Cwd == nil && ws.RepoURL != nil {
			ws.SourceType = "git_repo"
		}
	}
	if b.Visibility.Set {
		if !b.Visibility.Null && oneOf(probs, prefix+"visibility", b.Visibility.Value, workspaceVisibilities) {
			ws.Visibility = b.Visibility.Value
			cols = append(cols, "visibility")
		} else if b.Visibility.Null {
			probs.add(prefix+"visibility", "must be one of "+strings.Join(workspaceVisibilities, ", "))
		}
	}
	if b.Metadata.Set {
		ws.Metadata = jsonObject(b.Metadata.Value)
		cols = append(cols, "metadata")
	}
	if b.RuntimeConfig.Set {
		ws.RuntimeConfig = jsonObject(b.RuntimeConfig.Value)
		cols = append(cols, "runtime_config")
	}
	if b.IsPrimary.Set {
		ws.IsPrimary = b.IsPrimary.Value && !b.IsPrimary.Null
		cols = append(cols, "is_primary")
	}
	if b.Name.Set && !b.Name.Null {
		ws.Name = cleanText(probs, prefix+"name", b.Name.Value, 200)
		cols = append(cols, "name")
	}
	if ws.Name == "" {
		// Derive a name from the repository or the folder.
		switch {
		case ws.RepoURL != nil:
			ws.Name = strings.TrimSuffix(path.Base(strings.TrimRight(*ws.RepoURL, "/")), ".git")
		case ws.Cwd != nil:
			ws.Name = path.Base(strings.TrimRight(strings.ReplaceAll(*ws.Cwd, `\`, "/"), "/"))
		}
		if ws.Name == "" || ws.Name == "." || ws.Name == "/" {
			ws.Name = "workspace"
		}
		cols = append(cols, "name")
	}
	if ws.Cwd == nil && ws.RepoURL == nil {
		probs.add(prefix+"cwd", "a workspace needs cwd or repoUrl")
	}
	return cols
}

// workspaceRef loads a workspace of a project the caller may reach (404, 403).
func (w *Work) workspaceRef(ctx context.Context, projectID, workspaceID string) (*Project, *ProjectWorkspace, error) {
	p, err := w.projectByRef(ctx, projectID)
	if err != nil {
		return nil, nil, err
	}
	if !isUUID(workspaceID) {
		return nil, nil, notFound("Workspace not found")
	}
	ws := new(ProjectWorkspace)
	if err := w.db.NewSelect().Model(ws).Where("id = ? AND project_id = ?", workspaceID, p.ID).Scan(ctx); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, nil, notFound("Workspace not found")
		}
		return nil, nil, fmt.Errorf("error reading workspace %s: %w", workspaceID, err)
	}
	return p, ws, nil
}

func handleWorkspaceList(w *Work, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	p, err := w.projectByRef(ctx, r.PathValue("id"))
	if err == nil {
		err = w.projectsDecorate(ctx, w.db, []*Project{p})
	}
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, p.Workspaces)
}

// lockProject locks a project row so that workspace changes of one project serialize.
func lockProject(ctx context.Context, tx bun.Tx, id string) error {
	var got string
	if err := tx.NewRaw(`SELECT id::text FROM projects WHERE id = ? FOR UPDATE`, id).Scan(ctx, &got); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("Project not found")
		}
		return fmt.Errorf("error locking project %s: %w", id, err)
	}
	return nil
}

// clearPrimary unsets the primary flag of the project's other workspaces.
func clearPrimary(ctx context.Context, tx bun.Tx, projectID, exceptID string) error {
	if _, err := tx.NewRaw(`UPDATE project_workspaces SET is_primary = false, updated_at = now()
		WHERE project_id = ? AND is_primary AND id <> ?`, projectID, exceptID).Exec(ctx); err != nil {
		return fmt.Errorf("error clearing primary workspace of project %s: %w", projectID, err)
	}
	return nil
}

func handleWorkspaceCreate(w *Work, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	p, err := w.projectByRef(ctx, r.PathValue("id"))
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	var body workspaceBody
	if err := decodeBody(r, &body); err != nil {
		w.writeErr(rw, err)
		return
	}
	var probs fieldProblems
	ws := newProjectWorkspace(p)
	body.apply(&probs, "", ws, true)
	if err := probs.err(); err != nil {
		w.writeErr(rw, err)
		return
	}
	err = w.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if err := lockProject(ctx, tx, p.ID); err != nil {
			return err
		}
		if !ws.IsPrimary && !body.IsPrimary.Set {
			// The first workspace of a project becomes its primary.
			exists, err := tx.NewSelect().Model((*ProjectWorkspace)(nil)).Where("project_id = ? AND is_primary", p.ID).Exists(ctx)
			if err != nil {
				return fmt.Errorf("error reading workspaces of project %s: %w", p.ID, err)
			}
			ws.IsPrimary = !exists
		}
		if ws.IsPrimary {
			if err := clearPrimary(ctx, tx, p.ID, ws.ID); err != nil {
				return err
			}
		}
		if _, err := tx.NewInsert().Model(ws).Returning("*").Exec(ctx); err != nil {
			return fmt.Errorf("error inserting workspace: %w", err)
		}
		return nil
	})
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	w.activityOrLog(ctx, p.CompanyID, "project.workspace_created", "project", p.ID,
		map[string]any{"workspaceId": ws.ID, "name": ws.Name, "isPrimary": ws.IsPrimary})
	sdk.WriteJSON(rw, http.StatusCreated, ws)
}

func handleWorkspacePatch(w *Work, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	p, cur, err := w.workspaceRef(ctx, r.PathValue("id"), r.PathValue("workspaceId"))
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	var body workspaceBody
	if err := decodeBody(r, &body); err != nil {
		w.writeErr(rw, err)
		return
	}
	var ws *ProjectWorkspace
	var cols []string
	err = w.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if err := lockProject(ctx, tx, p.ID); err != nil {
			return err
		}
		ws = new(ProjectWorkspace)
		if err := tx.NewSelect().Model(ws).Where("id = ?", cur.ID).Scan(ctx); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return notFound("Workspace not found")
			}
			return fmt.Errorf("error reading workspace %s: %w", cur.ID, err)
		}
		var probs fieldProblems
		cols = body.apply(&probs, "", ws, false)
		if err := probs.err(); err != nil {
			return err
		}
		if len(cols) == 0 {
			return nil
		}
		if ws.IsPrimary && body.IsPrimary.Set {
			if err := clearPrimary(ctx, tx, p.ID, ws.ID); err != nil {
				return err
			}
		}
		ws.UpdatedAt = time.Now().UTC()
		if _, err := tx.NewUpdate().Model(ws).Column(append(uniqueStrings(cols), "updated_at")...).WherePK().Returning("*").Exec(ctx); err != nil {
			return fmt.Errorf("error updating workspace %s: %w", ws.ID, err)
		}
		return nil
	})
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	if len(cols) > 0 {
		w.activityOrLog(ctx, p.CompanyID, "project.workspace_updated", "project", p.ID,
			map[string]any{"workspaceId": ws.ID, "changes": uniqueStrings(cols)})
	}
	sdk.WriteJSON(rw, http.StatusOK, ws)
}

func handleWorkspaceDelete(w *Work, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	p, ws, err := w.workspaceRef(ctx, r.PathValue("id"), r.PathValue("workspaceId"))
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	err = w.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if err := lockProject(ctx, tx, p.ID); err != nil {
			return err
		}
		var wasPrimary bool
		if err := tx.NewRaw(`DELETE FROM project_workspaces WHERE id = ? RETURNING is_primary`, ws.ID).Scan(ctx, &wasPrimary); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return notFound("Workspace not found")
			}
			return fmt.Errorf("error deleting workspace %s: %w", ws.ID, err)
		}
		if wasPrimary {
			if _, err := tx.NewRaw(`UPDATE project_workspaces SET is_primary = true, updated_at = now()
				WHERE id = (SELECT id FROM project_workspaces WHERE project_id = ? ORDER BY created_at, id LIMIT 1)`, p.ID).Exec(ctx); err != nil {
				return fmt.Errorf("error promoting a primary workspace of project %s: %w", p.ID, err)
			}
		}
		return nil
	})
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	w.activityOrLog(ctx, p.CompanyID, "project.workspace_deleted", "project", p.ID, map[string]any{"workspaceId": ws.ID, "name": ws.Name})
	sdk.WriteJSON(rw, http.StatusOK, ws)
}

// projectListQuery documents the query parameters of the project list.
type projectListQuery struct {
	Status string `query:"status"`
}
