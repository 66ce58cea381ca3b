package workspaces

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/keelhq/keel/sdk"
)

func init() {
	addRoutes(
		route{Method: http.MethodGet, Path: "/api/companies/{companyId}/execution-workspaces", CompanyFromPath: true,
			Response: new([]*ExecutionWorkspace), Query: listQuery{},
			Summary: "List the company's execution workspaces (newest use first)", Handle: (*Workspaces).handleList},
		route{Method: http.MethodGet, Path: "/api/execution-workspaces/{id}", Response: new(ExecutionWorkspace), Errors: []int{http.StatusNotFound},
			Summary: "Read an execution workspace with its runtime services and commands", Handle: (*Workspaces).handleGet},
		route{Method: http.MethodPatch, Path: "/api/execution-workspaces/{id}", Body: patchBody{}, Response: new(ExecutionWorkspace),
			Errors:  []int{http.StatusNotFound, http.StatusConflict},
			Summary: "Update an execution workspace; status archived closes it (refused while close readiness is blocked)",
			Handle:  (*Workspaces).handlePatch},
		route{Method: http.MethodGet, Path: "/api/execution-workspaces/{id}/close-readiness", Response: new(CloseReadiness),
			Errors:  []int{http.StatusNotFound},
			Summary: "Whether the workspace can be closed: uncommitted or unpushed work blocks it; what a close would do",
			Handle:  (*Workspaces).handleReadiness},
		route{Method: http.MethodGet, Path: "/api/execution-workspaces/{id}/workspace-operations", Response: new([]*Operation),
			Errors: []int{http.StatusNotFound}, Query: opsQuery{},
			Summary: "List the operations that made, provisioned, ran commands in and removed the workspace (newest first)",
			Handle:  (*Workspaces).handleOperations},
		route{Method: http.MethodGet, Path: "/api/heartbeat-runs/{runId}/workspace-operations", Response: new([]*Operation),
			Errors: []int{http.StatusNotFound}, Summary: "List the workspace operations a heartbeat run caused (oldest first)",
			Handle: (*Workspaces).handleRunOperations},
		route{Method: http.MethodPost, Path: "/api/execution-workspaces/{id}/runtime-services/{action}", Body: runtimeBody{},
			Response: new(RuntimeActionResult), Errors: []int{http.StatusNotFound, http.StatusConflict, http.StatusUnprocessableEntity},
			Summary: "Start, stop or restart the workspace's runtime services (all, or the one named)", Handle: (*Workspaces).handleRuntime},
		route{Method: http.MethodPost, Path: "/api/execution-workspaces/{id}/runtime-commands/{action}", Body: runtimeBody{},
			Response: new(RuntimeActionResult), Errors: []int{http.StatusNotFound, http.StatusConflict, http.StatusUnprocessableEntity},
			Summary: "Run (start), stop or restart the workspace's runtime commands (all, or the one named)", Handle: (*Workspaces).handleRuntime},
	)
}

// listQuery documents the list's query parameters.
type listQuery struct {
	ProjectID          string `query:"projectId" doc:"only workspaces of this project"`
	ProjectWorkspaceID string `query:"projectWorkspaceId" doc:"only workspaces of this project workspace"`
	IssueID            string `query:"issueId" doc:"only the workspace made for this issue"`
	Status             string `query:"status" doc:"a status or a comma list (active, idle, in_review, archived)"`
	Limit              int    `query:"limit" doc:"1-200, default 50"`
}

// opsQuery documents the operations list's query parameters.
type opsQuery struct {
	Limit int `query:"limit" doc:"1-500, default 100"`
}

// loadWorkspace reads the path's workspace and checks the caller's access to its company.
func (x *Workspaces) loadWorkspace(ctx context.Context, id string) (*ExecutionWorkspace, error) {
	w, err := x.workspaceGet(ctx, strings.ToLower(strings.TrimSpace(id)))
	if err != nil {
		return nil, err
	}
	if w == nil {
		return nil, sdk.NotFound(msgWorkspaceNotFound)
	}
	if err := sdk.RequireCompanyAccess(ctx, w.CompanyID); err != nil {
		return nil, err
	}
	return w, nil
}

func (x *Workspaces) handleList(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := r.PathValue("companyId")
	q := r.URL.Query()
	limit, _, err := sdk.Page(r, 50, 200)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	where := []string{"company_id = $1"}
	args := []any{companyID}
	for _, f := range []struct{ param, column string }{
		{"projectId", "project_id"}, {"projectWorkspaceId", "project_workspace_id"}, {"issueId", "source_issue_id"}} {
		v := strings.TrimSpace(q.Get(f.param))
		if v == "" {
			continue
		}
		if !sdk.IsUUID(v) {
			x.writeErr(rw, sdk.Invalid(f.param, "must be a UUID"))
			return
		}
		args = append(args, strings.ToLower(v))
		where = append(where, fmt.Sprintf("%s = $%d", f.column, len(args)))
	}
	if v := strings.TrimSpace(q.Get("status")); v != "" {
		var statuses []string
		for _, s := range strings.Split(v, ",") {
			s = strings.TrimSpace(s)
			if !slices.Contains(workspaceStatuses, s) {
				x.writeErr(rw, sdk.Invalid("status", "must be active, idle, in_review or archived"))
				return
			}
			statuses = append(statuses, s)
		}
		args = append(args, statuses)
		where = append(where, fmt.Sprintf("status = ANY($%d)", len(args)))
	}
	args = append(args, limit)
	rows, err := x.pool.Query(ctx, `SELECT `+workspaceColumns+` FROM execution_workspaces WHERE `+strings.Join(where, " AND ")+
		fmt.Sprintf(` ORDER BY last_used_at DESC, id DESC LIMIT $%d`, len(args)), args...)
	if err != nil {
		x.writeErr(rw, fmt.Errorf("error listing execution workspaces: %w", err))
		return
	}
	defer rows.Close()
	out := []*ExecutionWorkspace{}
	for rows.Next() {
		w, err := scanWorkspace(rows)
		if err != nil {
			x.writeErr(rw, fmt.Errorf("error reading an execution workspace: %w", err))
			return
		}
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		x.writeErr(rw, fmt.Errorf("error listing execution workspaces: %w", err))
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, out)
}

// withServices attaches the workspace's runtime services.
func (x *Workspaces) withServices(ctx context.Context, w *ExecutionWorkspace) (*ExecutionWorkspace, error) {
	s, err := x.servicesList(ctx, w.ID)
	if err != nil {
		return nil, err
	}
	w.RuntimeServices = s
	return w, nil
}

func (x *Workspaces) handleGet(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	w, err := x.loadWorkspace(ctx, r.PathValue("id"))
	if err == nil {
		w, err = x.withServices(ctx, w)
	}
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, w)
}

// patchBody is the body of PATCH /api/execution-workspaces/{id}.
type patchBody struct {
	// Name is 1-200 characters.
	Name *string `json:"name,omitempty" jsonschema:"minLength=1,maxLength=200"`
	// Status is active, idle, in_review or archived (archived closes the workspace).
	Status *string `json:"status,omitempty" jsonschema:"enum=active,enum=idle,enum=in_review,enum=archived"`
	// CleanupReason is recorded when the workspace is archived.
	CleanupReason *string `json:"cleanupReason,omitempty" jsonschema:"maxLength=1000"`
	// Metadata replaces the workspace's metadata object.
	Metadata json.RawMessage `json:"metadata,omitempty"`
	// Config replaces the workspace's config: workspaceRuntime {services, commands} and cleanupCommand.
	Config json.RawMessage `json:"config,omitempty"`
}

func (x *Workspaces) handlePatch(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	w, err := x.loadWorkspace(ctx, r.PathValue("id"))
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	var body patchBody
	if err := sdk.DecodeJSON(r, &body); err != nil {
		x.writeErr(rw, err)
		return
	}
	var d []sdk.ValidationDetail
	bad := func(p, m string) { d = append(d, sdk.ValidationDetail{Path: p, Message: m}) }
	if body.Name != nil {
		if n := utf8.RuneCountInString(strings.TrimSpace(*body.Name)); n < 1 || n > 200 {
			bad("name", "must be 1-200 characters")
		}
	}
	if body.Status != nil && !slices.Contains(workspaceStatuses, *body.Status) {
		bad("status", "must be active, idle, in_review or archived")
	}
	if body.CleanupReason != nil && utf8.RuneCountInString(*body.CleanupReason) > 1000 {
		bad("cleanupReason", "must be at most 1000 characters")
	}
	if len(body.Metadata) > 0 && !isJSONObject(body.Metadata) {
		bad("metadata", "must be an object")
	}
	if len(body.Config) > 0 {
		if !isJSONObject(body.Config) {
			bad("config", "must be an object")
		} else if err := validateConfig(body.Config); err != nil {
			bad("config", err.Error())
		}
	}
	if len(d) > 0 {
		x.writeErr(rw, sdk.ValidationError(d...))
		return
	}
	if w.Status == StatusArchived && body.Status != nil && *body.Status != StatusArchived {
		x.writeErr(rw, sdk.Conflict(msgReopen))
		return
	}
	if body.Status != nil && *body.Status == StatusArchived && w.Status != StatusArchived {
		if w, err = x.close(ctx, w, deref(body.CleanupReason)); err != nil {
			x.writeErr(rw, err)
			return
		}
	} else if body.Status != nil {
		if _, err := x.pool.Exec(ctx, `UPDATE execution_workspaces SET status = $2, updated_at = now() WHERE id = $1`, w.ID, *body.Status); err != nil {
			x.writeErr(rw, fmt.Errorf("error updating execution workspace %s: %w", w.ID, err))
			return
		}
	}
	if body.Name != nil || len(body.Metadata) > 0 || len(body.Config) > 0 {
		var name *string
		if body.Name != nil {
			n := strings.TrimSpace(*body.Name)
			name = &n
		}
		if _, err := x.pool.Exec(ctx, `UPDATE execution_workspaces SET name = coalesce($2, name), metadata = coalesce($3, metadata),
			config = coalesce($4, config), updated_at = now() WHERE id = $1`, w.ID, name, nullJSON(body.Metadata), nullJSON(body.Config)); err != nil {
			x.writeErr(rw, fmt.Errorf("error updating execution workspace %s: %w", w.ID, err))
			return
		}
	}
	x.activity(ctx, w.CompanyID, "execution_workspace.updated", w.ID, map[string]any{"status": body.Status, "name": body.Name})
	w, err = x.workspaceGet(ctx, w.ID)
	if err == nil {
		w, err = x.withServices(ctx, w)
	}
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, w)
}

// validateConfig checks a config's runtime: each service and command has a command that is
// a string or a non-empty list of strings, and unique names.
func validateConfig(raw json.RawMessage) error {
	var c struct {
		WorkspaceRuntime *struct {
			Services []*serviceSpec `json:"services"`
			Commands []*serviceSpec `json:"commands"`
		} `json:"workspaceRuntime"`
		CleanupCommand *string `json:"cleanupCommand"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("has the wrong shape: %v", err)
	}
	if c.WorkspaceRuntime == nil {
		return nil
	}
	for _, list := range []struct {
		name  string
		specs []*serviceSpec
	}{{"services", c.WorkspaceRuntime.Services}, {"commands", c.WorkspaceRuntime.Commands}} {
		seen := map[string]bool{}
		for i, s := range list.specs {
			if s == nil || s.argv() == nil {
				return fmt.Errorf("workspaceRuntime.%s.%d.command must be a string or a list of strings", list.name, i)
			}
			if s.Port < 0 || s.Port > 65535 {
				return fmt.Errorf("workspaceRuntime.%s.%d.port must be 0-65535", list.name, i)
			}
			if s.Name != "" && seen[s.Name] {
				return fmt.Errorf("workspaceRuntime.%s.%d.name %q is used twice", list.name, i, s.Name)
			}
			seen[s.Name] = true
		}
	}
	return nil
}

func isJSONObject(raw json.RawMessage) bool {
	var m map[string]any
	return json.Unmarshal(raw, &m) == nil && m != nil
}

func nullJSON(raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return nil
	}
	return raw
}

func (x *Workspaces) handleReadiness(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	w, err := x.loadWorkspace(ctx, r.PathValue("id"))
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	res, err := x.readiness(ctx, w)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, res)
}

func (x *Workspaces) handleOperations(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	w, err := x.loadWorkspace(ctx, r.PathValue("id"))
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	limit, _, err := sdk.Page(r, 100, 500)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	ops, err := x.operationsList(ctx, w.ID, limit)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, ops)
}

// msgRunNotFound is the agents owner's text for an unknown run.
const msgRunNotFound = "Heartbeat run not found"

func (x *Workspaces) handleRunOperations(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	runID := strings.ToLower(r.PathValue("runId"))
	if !sdk.IsUUID(runID) {
		x.writeErr(rw, sdk.NotFound(msgRunNotFound))
		return
	}
	var st struct {
		Found     bool   `json:"found"`
		CompanyID string `json:"companyId"`
	}
	if err := x.host.Call(ctx, "agents.runStatus", sdk.SystemActor(), "", map[string]any{"runId": runID}, &st); err != nil {
		if sdk.IsMethodNotProvided(err) {
			err = sdk.NotFound(msgRunNotFound)
		}
		x.writeErr(rw, err)
		return
	}
	if !st.Found {
		x.writeErr(rw, sdk.NotFound(msgRunNotFound))
		return
	}
	if err := sdk.RequireCompanyAccess(ctx, st.CompanyID); err != nil {
		x.writeErr(rw, err)
		return
	}
	rows, err := x.pool.Query(ctx, `SELECT `+operationColumns+` FROM workspace_operations WHERE heartbeat_run_id = $1 AND company_id = $2
		ORDER BY started_at, id LIMIT 500`, runID, st.CompanyID)
	if err != nil {
		x.writeErr(rw, fmt.Errorf("error listing the workspace operations of run %s: %w", runID, err))
		return
	}
	defer rows.Close()
	out := []*Operation{}
	for rows.Next() {
		o, err := scanOperation(rows)
		if err != nil {
			x.writeErr(rw, fmt.Errorf("error reading a workspace operation: %w", err))
			return
		}
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		x.writeErr(rw, fmt.Errorf("error listing the workspace operations of run %s: %w", runID, err))
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, out)
}

// runtimeBody is the body of both runtime action routes; every field is optional and
// without one the action applies to every declared service (or command).
type runtimeBody struct {
	// Name picks a declared service or command by name (serviceName and commandName are
	// accepted as well).
	Name        string `json:"name,omitempty" jsonschema:"maxLength=200"`
	ServiceName string `json:"serviceName,omitempty" jsonschema:"maxLength=200"`
	CommandName string `json:"commandName,omitempty" jsonschema:"maxLength=200"`
	// RuntimeServiceID picks a started service or command (stop and restart).
	RuntimeServiceID string `json:"runtimeServiceId,omitempty"`
}

// RuntimeActionResult is the answer of a runtime action.
type RuntimeActionResult struct {
	ExecutionWorkspaceID string            `json:"executionWorkspaceId"`
	Action               string            `json:"action"`
	RuntimeServices      []*RuntimeService `json:"runtimeServices"`
}

// runtimeActions are the actions of the runtime routes ("run" is start for commands).
var runtimeActions = []string{"start", "stop", "restart", "run"}

func (x *Workspaces) handleRuntime(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	w, err := x.loadWorkspace(ctx, r.PathValue("id"))
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	action := r.PathValue("action")
	kind := kindService
	if strings.Contains(r.URL.Path, "/runtime-commands/") {
		kind = kindCommand
	}
	if !slices.Contains(runtimeActions, action) || (action == "run" && kind == kindService) {
		msg := "must be start, stop or restart"
		if kind == kindCommand {
			msg = "must be run, start, stop or restart"
		}
		x.writeErr(rw, sdk.Invalid("action", msg))
		return
	}
	var body runtimeBody
	if err := sdk.DecodeJSON(r, &body); err != nil {
		x.writeErr(rw, err)
		return
	}
	if body.RuntimeServiceID != "" && !sdk.IsUUID(body.RuntimeServiceID) {
		x.writeErr(rw, sdk.Invalid("runtimeServiceId", "must be a UUID"))
		return
	}
	if w.Status == StatusArchived {
		x.writeErr(rw, sdk.Conflict(msgArchived))
		return
	}
	res, err := x.runtimeAction(ctx, w, kind, action, &body)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	x.activity(ctx, w.CompanyID, "execution_workspace.runtime_"+kind+"_"+action, w.ID, map[string]any{"name": body.pick(kind)})
	sdk.WriteJSON(rw, http.StatusOK, res)
}

// pick is the declared name the body selects.
func (b *runtimeBody) pick(kind string) string {
	if kind == kindCommand {
		return firstNonEmpty(b.CommandName, b.Name, b.ServiceName)
	}
	return firstNonEmpty(b.ServiceName, b.Name, b.CommandName)
}

// runtimeAction starts, stops or restarts the selected declared services or commands.
func (x *Workspaces) runtimeAction(ctx context.Context, w *ExecutionWorkspace, kind, action string, body *runtimeBody) (*RuntimeActionResult, error) {
	res := &RuntimeActionResult{ExecutionWorkspaceID: w.ID, Action: action, RuntimeServices: []*RuntimeService{}}
	rs := parseRuntime(w.Config)
	specs := rs.Services
	none := msgNoRuntime
	if kind == kindCommand {
		specs, none = rs.Commands, msgNoCommands
	}
	name := body.pick(kind)
	if name != "" {
		var picked []*serviceSpec
		for _, s := range specs {
			if s.Name == name {
				picked = append(picked, s)
			}
		}
		if len(picked) == 0 && (action != "stop" || len(specs) > 0) {
			return nil, sdk.NotFound(msgServiceNotFound)
		}
		specs = picked
	}
	live, err := x.servicesList(ctx, w.ID)
	if err != nil {
		return nil, err
	}
	var running []*RuntimeService
	for _, s := range live {
		if s.Kind != kind || s.Status != svcRunning {
			continue
		}
		if body.RuntimeServiceID != "" && s.ID != body.RuntimeServiceID {
			continue
		}
		if name != "" && s.ServiceName != name {
			continue
		}
		running = append(running, s)
	}
	if body.RuntimeServiceID != "" && len(running) == 0 && action != "start" && action != "run" {
		found := false
		for _, s := range live {
			found = found || s.ID == body.RuntimeServiceID
		}
		if !found {
			return nil, sdk.NotFound(msgServiceNotFound)
		}
	}
	if action == "stop" || action == "restart" {
		for _, s := range running {
			out, err := x.stopRuntime(ctx, w, s)
			if err != nil {
				return nil, err
			}
			res.RuntimeServices = append(res.RuntimeServices, out)
		}
		running = nil
		if action == "stop" {
			return res, nil
		}
	}
	if len(specs) == 0 {
		return nil, sdk.Unprocessable(none)
	}
	for _, s := range specs {
		if kind == kindService && slices.ContainsFunc(running, func(r *RuntimeService) bool { return r.ServiceName == s.Name }) {
			continue // already running
		}
		out, err := x.startRuntime(ctx, w, s, kind)
		if err != nil {
			return nil, err
		}
		res.RuntimeServices = append(res.RuntimeServices, out)
	}
	return res, nil
}
