package routines

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/idem"
)

// RoutineCreateBody is the body of POST /api/companies/{companyId}/routines.
type RoutineCreateBody struct {
	// Title is 1-200 characters and may reference {{variables}}.
	Title string `json:"title" jsonschema:"minLength=1,maxLength=200"`
	// Description may reference {{variables}}.
	Description *string `json:"description,omitempty"`
	// AssigneeAgentID is the agent receiving each run (same company, not terminated, not
	// pending approval). Agents may only assign routines to themselves.
	AssigneeAgentID *string `json:"assigneeAgentId,omitempty" jsonschema:"format=uuid"`
	ProjectID       *string `json:"projectId,omitempty" jsonschema:"format=uuid"`
	GoalID          *string `json:"goalId,omitempty" jsonschema:"format=uuid"`
	ParentIssueID   *string `json:"parentIssueId,omitempty" jsonschema:"format=uuid"`
	// Priority is critical, high, medium (default) or low.
	Priority *string `json:"priority,omitempty" jsonschema:"enum=critical,enum=high,enum=medium,enum=low"`
	// Status defaults to active with an assignee, else paused.
	Status             *string    `json:"status,omitempty" jsonschema:"enum=active,enum=paused,enum=archived"`
	ConcurrencyPolicy  *string    `json:"concurrencyPolicy,omitempty" jsonschema:"enum=coalesce_if_active,enum=always_enqueue,enum=skip_if_active"`
	CatchUpPolicy      *string    `json:"catchUpPolicy,omitempty" jsonschema:"enum=skip_missed,enum=enqueue_missed_with_cap"`
	ActivityGatePolicy *string    `json:"activityGatePolicy,omitempty" jsonschema:"enum=always,enum=require_external_activity"`
	ActivityGateScope  *string    `json:"activityGateScope,omitempty" jsonschema:"enum=company,enum=project"`
	Variables          []Variable `json:"variables,omitempty"`
	// FolderID is a routine folder of the company (checked with the folders owner) or null.
	FolderID *string `json:"folderId,omitempty" jsonschema:"format=uuid"`
	// Env maps variable names to strings, {type:"plain",value} or
	// {type:"secret_ref",secretId,version?} bindings; null for none.
	Env map[string]json.RawMessage `json:"env,omitempty"`
}

// RoutinePatchBody is the body of PATCH /api/routines/{routineId}: any create field; null
// clears a nullable one.
type RoutinePatchBody struct {
	Title              patchField[string]     `json:"title,omitempty"`
	Description        patchField[string]     `json:"description,omitempty"`
	AssigneeAgentID    patchField[string]     `json:"assigneeAgentId,omitempty"`
	ProjectID          patchField[string]     `json:"projectId,omitempty"`
	GoalID             patchField[string]     `json:"goalId,omitempty"`
	ParentIssueID      patchField[string]     `json:"parentIssueId,omitempty"`
	Priority           patchField[string]     `json:"priority,omitempty"`
	Status             patchField[string]     `json:"status,omitempty"`
	ConcurrencyPolicy  patchField[string]     `json:"concurrencyPolicy,omitempty"`
	CatchUpPolicy      patchField[string]     `json:"catchUpPolicy,omitempty"`
	ActivityGatePolicy patchField[string]     `json:"activityGatePolicy,omitempty"`
	ActivityGateScope  patchField[string]     `json:"activityGateScope,omitempty"`
	Variables          patchField[[]Variable] `json:"variables,omitempty"`
	FolderID           patchField[string]     `json:"folderId,omitempty"`
	// Env replaces the whole env map; null clears it.
	Env patchField[map[string]json.RawMessage] `json:"env,omitempty"`
	// BaseRevisionID is the revision the change was made against: when it is not the
	// routine's latest revision the update is refused (409) and nothing changes.
	BaseRevisionID patchField[string] `json:"baseRevisionId,omitempty"`
}

// Text limits of routines.
const (
	maxTitle       = 200
	maxDescription = 100000
)

func init() {
	addRoutes(
		route{Method: "GET", Path: "/api/companies/{companyId}/routines", Query: routineListQuery{}, Response: new([]RoutineListItem), CompanyFromPath: true,
			Summary: "List the company's routines, newest update first, with trigger summaries, latest run and active execution issue",
			Handle:  (*Routines).listRoute},
		route{Method: "POST", Path: "/api/companies/{companyId}/routines", Status: http.StatusCreated, Response: new(Routine), CompanyFromPath: true,
			Summary: "Create a routine (agents only for themselves)", Body: RoutineCreateBody{}, Handle: (*Routines).createRoute},
		route{Method: "GET", Path: "/api/routines/{routineId}", Response: new(RoutineDetail),
			Summary: "Read a routine with its project, agent, parent issue, triggers, recent runs and active execution issue",
			Handle:  (*Routines).getRoute},
		route{Method: "PATCH", Path: "/api/routines/{routineId}", Response: new(Routine),
			Summary: "Update a routine (agents only their own, never reassigning it); a change records a new revision, and a " +
				"baseRevisionId that is not the latest is refused with 409", Body: RoutinePatchBody{}, Handle: (*Routines).patchRoute},
	)
}

// routineState is the editable state of a routine, validated as a whole.
type routineState struct {
	Title, Description                                              string
	AssigneeAgentID, ProjectID, GoalID, ParentIssueID               *string
	Priority, Status                                                string
	ConcurrencyPolicy, CatchUpPolicy, ActivityGatePolicy, GateScope string
	Variables                                                       []Variable
	FolderID                                                        *string
	Env                                                             map[string]json.RawMessage
}

// check validates the state's own fields (400 Validation error naming each).
func (st *routineState) check() error {
	var d []detail
	bad := func(path, msg string) { d = append(d, detail{Path: path, Message: msg}) }
	st.Title = strings.TrimSpace(st.Title)
	switch n := utf8.RuneCountInString(st.Title); {
	case n == 0:
		bad("title", "is required")
	case n > maxTitle:
		bad("title", fmt.Sprintf("must be at most %d characters", maxTitle))
	}
	if utf8.RuneCountInString(st.Description) > maxDescription {
		bad("description", fmt.Sprintf("must be at most %d characters", maxDescription))
	}
	enum := func(path, v string, allowed []string) {
		if !slices.Contains(allowed, v) {
			bad(path, "must be one of "+strings.Join(allowed, ", "))
		}
	}
	enum("priority", st.Priority, routinePriorities)
	enum("status", st.Status, routineStatuses)
	enum("concurrencyPolicy", st.ConcurrencyPolicy, concurrencyPolicies)
	enum("catchUpPolicy", st.CatchUpPolicy, catchUpPolicies)
	enum("activityGatePolicy", st.ActivityGatePolicy, gatePolicies)
	enum("activityGateScope", st.GateScope, gateScopes)
	for path, v := range map[string]*string{"assigneeAgentId": st.AssigneeAgentID, "projectId": st.ProjectID,
		"goalId": st.GoalID, "parentIssueId": st.ParentIssueID, "folderId": st.FolderID} {
		if v != nil && !isUUID(*v) {
			bad(path, "must be a UUID")
		}
	}
	d = append(d, checkEnv(st.Env)...)
	vars, vd := normalizeVariables(st.Variables)
	d = append(d, vd...)
	if len(vd) == 0 {
		st.Variables = vars
		d = append(d, checkTemplate("title", st.Title, vars)...)
		d = append(d, checkTemplate("description", st.Description, vars)...)
	}
	if len(d) > 0 {
		slices.SortStableFunc(d, func(a, b detail) int { return strings.Compare(a.Path, b.Path) })
		return validationError(d...)
	}
	return nil
}

// checkRefs checks that the assignee, project, goal and parent issue belong to the company
// (422 naming the first that does not). Unchanged references are not re-read.
func (x *Routines) checkRefs(ctx context.Context, companyID string, st *routineState, prev *Routine) error {
	changed := func(next, cur *string) bool { return next != nil && (prev == nil || deref(cur) != *next) }
	var cur Routine
	if prev != nil {
		cur = *prev
	}
	if changed(st.AssigneeAgentID, cur.AssigneeAgentID) {
		if err := x.checkAssignee(ctx, companyID, *st.AssigneeAgentID); err != nil {
			return err
		}
	}
	if changed(st.ProjectID, cur.ProjectID) {
		p, err := x.project(ctx, companyID, *st.ProjectID)
		if err != nil {
			return err
		}
		if p == nil {
			return unprocessable("Project not found in this company")
		}
	}
	if changed(st.GoalID, cur.GoalID) {
		ok, err := x.goalExists(ctx, companyID, *st.GoalID)
		if err != nil {
			return err
		}
		if !ok {
			return unprocessable("Goal not found in this company")
		}
	}
	if changed(st.FolderID, cur.FolderID) {
		if err := x.checkFolder(ctx, companyID, *st.FolderID); err != nil {
			return err
		}
	}
	if changed(st.ParentIssueID, cur.ParentIssueID) {
		raw, err := x.issue(ctx, companyID, *st.ParentIssueID)
		if err != nil {
			return err
		}
		if raw == nil {
			return unprocessable("Parent issue not found in this company")
		}
	}
	return nil
}

// canAssign checks that the request's actor may make agentID a routine's assignee: agents
// only themselves, board users when they may assign tasks.
func (x *Routines) canAssign(ctx context.Context, companyID string, agentID *string, agentMsg string) error {
	a := sdk.ActorFrom(ctx)
	switch a.Type {
	case "agent":
		if agentID == nil || *agentID != a.AgentId {
			return forbidden(agentMsg)
		}
		return nil
	case "board":
		if agentID == nil {
			return nil
		}
		return x.host.RequirePermission(ctx, companyID, "tasks:assign")
	}
	return nil
}

// loadRoutine loads the routine of the {routineId} path and checks company access.
func (x *Routines) loadRoutine(r *http.Request) (*Routine, error) {
	rt, err := routineGet(r.Context(), x.pool, strings.ToLower(r.PathValue("routineId")), false)
	if err != nil {
		return nil, err
	}
	if rt == nil {
		return nil, notFound(msgRoutineNotFound)
	}
	if err := requireCompanyAccess(r.Context(), rt.CompanyID); err != nil {
		return nil, err
	}
	return rt, nil
}

// requireManage refuses an agent managing a routine that is not assigned to it.
func requireManage(ctx context.Context, rt *Routine) error {
	if a := sdk.ActorFrom(ctx); a.Type == "agent" && deref(rt.AssigneeAgentID) != a.AgentId {
		return forbidden(msgAgentOwnOnly)
	}
	return nil
}

func (x *Routines) createRoute(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := sdk.CompanyIDFrom(ctx)
	var body RoutineCreateBody
	if err := decodeBody(r, &body); err != nil {
		x.writeErr(rw, err)
		return
	}
	st := &routineState{Title: body.Title, Description: deref(body.Description), AssigneeAgentID: lowerPtr(body.AssigneeAgentID),
		ProjectID: lowerPtr(body.ProjectID), GoalID: lowerPtr(body.GoalID), ParentIssueID: lowerPtr(body.ParentIssueID),
		Priority: "medium", ConcurrencyPolicy: policyCoalesce, CatchUpPolicy: catchUpSkipMissed, ActivityGatePolicy: gateAlways,
		GateScope: scopeCompany, Variables: body.Variables, FolderID: lowerPtr(body.FolderID), Env: body.Env}
	if st.Variables == nil {
		st.Variables = []Variable{}
	}
	for dst, src := range map[*string]*string{&st.Priority: body.Priority, &st.ConcurrencyPolicy: body.ConcurrencyPolicy,
		&st.CatchUpPolicy: body.CatchUpPolicy, &st.ActivityGatePolicy: body.ActivityGatePolicy, &st.GateScope: body.ActivityGateScope} {
		if src != nil {
			*dst = *src
		}
	}
	switch {
	case body.Status != nil:
		st.Status = *body.Status
	case st.AssigneeAgentID != nil:
		st.Status = statusActive
	default:
		st.Status = statusPaused
	}
	if err := st.check(); err != nil {
		x.writeErr(rw, err)
		return
	}
	if st.Status == statusActive && st.AssigneeAgentID == nil {
		x.writeErr(rw, unprocessable("An active routine needs an assignee"))
		return
	}
	if err := x.canAssign(ctx, companyID, st.AssigneeAgentID, msgAgentCreateOwnOnly); err != nil {
		x.writeErr(rw, err)
		return
	}
	if err := x.checkRefs(ctx, companyID, st, nil); err != nil {
		x.writeErr(rw, err)
		return
	}
	actor := sdk.ActorFrom(ctx)
	agentID, userID := actorIDs(actor)
	vars, _ := json.Marshal(st.Variables)
	env, err := envJSON(st.Env)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	rt, err := x.insertRoutine(ctx, actor, func(tx pgx.Tx) (*Routine, error) {
		return scanRoutine(tx.QueryRow(ctx, `INSERT INTO routines (id, company_id, project_id, goal_id, parent_issue_id, title,
		description, assignee_agent_id, priority, status, concurrency_policy, catch_up_policy, activity_gate_policy,
		activity_gate_scope, variables, created_by_agent_id, created_by_user_id, responsible_user_id, updated_by_agent_id,
		updated_by_user_id, folder_id, env) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17,$17,$16,$17,$18,$19)
		RETURNING `+routineCols,
			uuid.NewString(), companyID, st.ProjectID, st.GoalID, st.ParentIssueID, st.Title, strOrNil(st.Description),
			st.AssigneeAgentID, st.Priority, st.Status, st.ConcurrencyPolicy, st.CatchUpPolicy, st.ActivityGatePolicy, st.GateScope,
			vars, agentID, userID, st.FolderID, env))
	})
	if err != nil {
		x.writeErr(rw, fmt.Errorf("error creating routine: %w", err))
		return
	}
	x.activityBy(ctx, actor, "", companyID, "routine.created", "routine", rt.ID, withProject(rt.ProjectID, map[string]any{
		"routineId": rt.ID, "title": rt.Title, "status": rt.Status, "assigneeAgentId": rt.AssigneeAgentID}))
	sdk.WriteJSON(rw, http.StatusCreated, rt)
}

// insertRoutine inserts a routine and its first revision ("Created routine") in one
// transaction.
func (x *Routines) insertRoutine(ctx context.Context, actor *sdk.Actor, insert func(tx pgx.Tx) (*Routine, error)) (*Routine, error) {
	tx, err := x.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	rt, err := insert(tx)
	if err != nil {
		return nil, err
	}
	rt, _, err = writeRevision(ctx, tx, rt.ID, actor, summaryCreated, nil)
	if err != nil {
		return nil, err
	}
	if err := idem.Record(ctx, tx, http.StatusCreated, "/api/routines/"+rt.ID); err != nil {
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, err
	}
	return rt, nil
}

// withProject adds projectId to activity details when the routine has one.
func withProject(projectID *string, details map[string]any) map[string]any {
	if projectID != nil {
		details["projectId"] = *projectID
	}
	return details
}

func lowerPtr(p *string) *string {
	if p == nil {
		return nil
	}
	s := strings.ToLower(strings.TrimSpace(*p))
	return &s
}

func (x *Routines) patchRoute(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	cur, err := x.loadRoutine(r)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	if err := requireManage(ctx, cur); err != nil {
		x.writeErr(rw, err)
		return
	}
	var body RoutinePatchBody
	if err := decodeBody(r, &body); err != nil {
		x.writeErr(rw, err)
		return
	}
	rt, _, err := x.applyPatch(ctx, cur, &body, &patchOpts{summary: summaryUpdated})
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, rt)
}

// patchOpts says how applyPatch records its revision: the change summary, the revision a
// restore copies, and force to record a revision (and activity) even when no field changes.
type patchOpts struct {
	summary      string
	restoredFrom *Revision
	force        bool
}

// staleRevision is the 409 of an update made against a revision that is not the latest.
func staleRevision(rt *Routine) error {
	return conflict(fmt.Sprintf("Routine has changed since the base revision: the latest revision is %d; reload it and try again",
		rt.LatestRevisionNumber))
}

// applyPatch validates and applies a partial update of cur and records it as a new revision
// in the same transaction, with its activity entry. A patch that changes nothing writes
// nothing (no revision, no activity) unless opts.force; it answers the routine unchanged
// and a nil revision.
func (x *Routines) applyPatch(ctx context.Context, cur *Routine, body *RoutinePatchBody, opts *patchOpts) (*Routine, *Revision, error) {
	var baseRevision *string
	if body.BaseRevisionID.Set && !body.BaseRevisionID.Null {
		b := strings.ToLower(strings.TrimSpace(body.BaseRevisionID.Value))
		if !isUUID(b) {
			return nil, nil, invalid("baseRevisionId", "must be a UUID")
		}
		if b != deref(cur.LatestRevisionID) {
			return nil, nil, staleRevision(cur)
		}
		baseRevision = &b
	}
	st := &routineState{Title: cur.Title, Description: deref(cur.Description), AssigneeAgentID: cur.AssigneeAgentID,
		ProjectID: cur.ProjectID, GoalID: cur.GoalID, ParentIssueID: cur.ParentIssueID, Priority: cur.Priority, Status: cur.Status,
		ConcurrencyPolicy: cur.ConcurrencyPolicy, CatchUpPolicy: cur.CatchUpPolicy, ActivityGatePolicy: cur.ActivityGatePolicy,
		GateScope: cur.ActivityGateScope, Variables: cur.Variables, FolderID: cur.FolderID}
	if s := strings.TrimSpace(string(cur.Env)); s != "" && s != "null" {
		if err := json.Unmarshal(cur.Env, &st.Env); err != nil {
			return nil, nil, fmt.Errorf("error reading routine env: %w", err)
		}
	}
	var nullErrs []detail
	str := func(name string, f patchField[string], dst *string) {
		if !f.Set {
			return
		}
		if f.Null {
			nullErrs = append(nullErrs, detail{Path: name, Message: "cannot be null"})
			return
		}
		*dst = f.Value
	}
	ref := func(f patchField[string], dst **string) {
		if !f.Set {
			return
		}
		if f.Null {
			*dst = nil
		} else {
			*dst = lowerPtr(&f.Value)
		}
	}
	str("title", body.Title, &st.Title)
	if body.Description.Set {
		st.Description = body.Description.Value
	}
	ref(body.AssigneeAgentID, &st.AssigneeAgentID)
	ref(body.ProjectID, &st.ProjectID)
	ref(body.GoalID, &st.GoalID)
	ref(body.ParentIssueID, &st.ParentIssueID)
	ref(body.FolderID, &st.FolderID)
	str("priority", body.Priority, &st.Priority)
	str("status", body.Status, &st.Status)
	str("concurrencyPolicy", body.ConcurrencyPolicy, &st.ConcurrencyPolicy)
	str("catchUpPolicy", body.CatchUpPolicy, &st.CatchUpPolicy)
	str("activityGatePolicy", body.ActivityGatePolicy, &st.ActivityGatePolicy)
	str("activityGateScope", body.ActivityGateScope, &st.GateScope)
	if body.Variables.Set {
		st.Variables = body.Variables.Value
		if st.Variables == nil {
			st.Variables = []Variable{}
		}
	}
	if body.Env.Set {
		st.Env = body.Env.Value
		if body.Env.Null {
			st.Env = nil
		}
	}
	if len(nullErrs) > 0 {
		return nil, nil, validationError(nullErrs...)
	}
	if err := st.check(); err != nil {
		return nil, nil, err
	}
	if cur.Status == statusArchived && st.Status != statusArchived {
		return nil, nil, conflict(msgRoutineArchived)
	}
	// An assignee removed from an active routine pauses it; activating one without an
	// assignee is refused.
	if st.AssigneeAgentID == nil && st.Status == statusActive {
		if body.Status.Set {
			return nil, nil, unprocessable("An active routine needs an assignee")
		}
		st.Status = statusPaused
	}
	if deref(st.AssigneeAgentID) != deref(cur.AssigneeAgentID) {
		if err := x.canAssign(ctx, cur.CompanyID, st.AssigneeAgentID, msgAgentNoReassign); err != nil {
			return nil, nil, err
		}
	}
	if err := x.checkRefs(ctx, cur.CompanyID, st, cur); err != nil {
		return nil, nil, err
	}
	vars, _ := json.Marshal(st.Variables)
	env, err := envJSON(st.Env)
	if err != nil {
		return nil, nil, err
	}
	changes := routineChanges(cur, st, vars, env)
	if len(changes) == 0 && !opts.force {
		return cur, nil, nil
	}
	if missing := missingRequired(st.Variables); len(missing) > 0 && slices.Contains(changes, "variables") {
		var n int
		if err := x.pool.QueryRow(ctx, `SELECT count(*) FROM routine_triggers WHERE routine_id = $1 AND kind = 'schedule' AND enabled`,
			cur.ID).Scan(&n); err != nil {
			return nil, nil, fmt.Errorf("error reading schedule triggers: %w", err)
		}
		if n > 0 {
			return nil, nil, unprocessable("Required variables need a default while a schedule trigger is enabled: " + strings.Join(missing, ", "))
		}
	}
	actor := sdk.ActorFrom(ctx)
	agentID, userID := actorIDs(actor)
	var restoredFrom *string
	if opts.restoredFrom != nil {
		restoredFrom = &opts.restoredFrom.ID
	}
	tx, err := x.pool.Begin(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("error updating routine: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	// The base revision is checked again under the row lock, so two updates made against
	// the same revision cannot both pass.
	var latest *string
	var latestNumber int
	if err := tx.QueryRow(ctx, `SELECT latest_revision_id, latest_revision_number FROM routines WHERE id = $1 FOR UPDATE`,
		cur.ID).Scan(&latest, &latestNumber); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, nil, notFound(msgRoutineNotFound)
		}
		return nil, nil, fmt.Errorf("error updating routine: %w", err)
	}
	if baseRevision != nil && deref(latest) != *baseRevision {
		return nil, nil, staleRevision(&Routine{LatestRevisionNumber: latestNumber})
	}
	rt, err := scanRoutine(tx.QueryRow(ctx, `UPDATE routines SET title = $2, description = $3, assignee_agent_id = $4, project_id = $5,
		goal_id = $6, parent_issue_id = $7, priority = $8, status = $9, concurrency_policy = $10, catch_up_policy = $11,
		activity_gate_policy = $12, activity_gate_scope = $13, variables = $14, updated_by_agent_id = $15, updated_by_user_id = $16,
		folder_id = $17, env = $18, updated_at = clock_timestamp() WHERE id = $1 RETURNING `+routineCols,
		cur.ID, st.Title, strOrNil(st.Description), st.AssigneeAgentID, st.ProjectID, st.GoalID, st.ParentIssueID, st.Priority,
		st.Status, st.ConcurrencyPolicy, st.CatchUpPolicy, st.ActivityGatePolicy, st.GateScope, vars, agentID, userID,
		st.FolderID, env))
	if err == nil && rt == nil {
		err = notFound(msgRoutineNotFound)
	}
	var rev *Revision
	if err == nil {
		rt, rev, err = writeRevision(ctx, tx, cur.ID, actor, opts.summary, restoredFrom)
	}
	if err == nil {
		err = tx.Commit(ctx)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("error updating routine: %w", err)
	}
	details := map[string]any{"routineId": rt.ID, "changes": changes, "revisionId": rev.ID, "revisionNumber": rev.RevisionNumber}
	if rt.Status != cur.Status {
		details["status"], details["previousStatus"] = rt.Status, cur.Status
	}
	if deref(rt.AssigneeAgentID) != deref(cur.AssigneeAgentID) {
		details["assigneeAgentId"], details["previousAssigneeAgentId"] = rt.AssigneeAgentID, cur.AssigneeAgentID
	}
	action := "routine.updated"
	if opts.restoredFrom != nil {
		action = "routine.revision_restored"
		details["restoredFromRevisionId"] = opts.restoredFrom.ID
		details["restoredFromRevisionNumber"] = opts.restoredFrom.RevisionNumber
	}
	x.activityBy(ctx, actor, "", rt.CompanyID, action, "routine", rt.ID, withProject(rt.ProjectID, details))
	return rt, rev, nil
}

// routineChanges names the fields whose next state (st, with variables and env encoded)
// differs from the routine's.
func routineChanges(cur *Routine, st *routineState, vars, env []byte) []string {
	var changes []string
	diff := func(name string, changed bool) {
		if changed {
			changes = append(changes, name)
		}
	}
	curVars, _ := json.Marshal(cur.Variables)
	diff("title", st.Title != cur.Title)
	diff("description", st.Description != deref(cur.Description))
	diff("assigneeAgentId", deref(st.AssigneeAgentID) != deref(cur.AssigneeAgentID))
	diff("projectId", deref(st.ProjectID) != deref(cur.ProjectID))
	diff("goalId", deref(st.GoalID) != deref(cur.GoalID))
	diff("parentIssueId", deref(st.ParentIssueID) != deref(cur.ParentIssueID))
	diff("folderId", deref(st.FolderID) != deref(cur.FolderID))
	diff("priority", st.Priority != cur.Priority)
	diff("status", st.Status != cur.Status)
	diff("concurrencyPolicy", st.ConcurrencyPolicy != cur.ConcurrencyPolicy)
	diff("catchUpPolicy", st.CatchUpPolicy != cur.CatchUpPolicy)
	diff("activityGatePolicy", st.ActivityGatePolicy != cur.ActivityGatePolicy)
	diff("activityGateScope", st.GateScope != cur.ActivityGateScope)
	diff("variables", !jsonEqual(vars, curVars))
	diff("env", !jsonEqual(env, cur.Env))
	return changes
}

// jsonEqual compares two JSON documents by value (nil and empty are null).
func jsonEqual(a, b []byte) bool {
	norm := func(b []byte) string {
		if len(bytes.TrimSpace(b)) == 0 {
			return "null"
		}
		var v any
		if json.Unmarshal(b, &v) != nil {
			return string(b)
		}
		out, _ := json.Marshal(v)
		return string(out)
	}
	return norm(a) == norm(b)
}

// triggerSummary is a trigger as the routine list shows it.
type triggerSummary struct {
	ID             string  `json:"id"`
	Kind           string  `json:"kind"`
	Label          *string `json:"label"`
	Enabled        bool    `json:"enabled"`
	CronExpression *string `json:"cronExpression"`
	Timezone       *string `json:"timezone"`
	NextRunAt      any     `json:"nextRunAt"`
	LastFiredAt    any     `json:"lastFiredAt"`
	LastResult     *string `json:"lastResult"`
}

// triggerBrief is the trigger block of a run.
type triggerBrief struct {
	ID    string  `json:"id"`
	Kind  string  `json:"kind"`
	Label *string `json:"label"`
}

// RunView is a run with its linked issue and trigger, as run lists show it.
type RunView struct {
	*Run
	LinkedIssue *issueBrief   `json:"linkedIssue"`
	Trigger     *triggerBrief `json:"trigger"`
}

// runViews decorates runs with their linked issues and triggers.
func (x *Routines) runViews(ctx context.Context, companyID string, runs []*Run, triggers []*Trigger) ([]RunView, error) {
	ids := make([]string, 0, len(runs))
	for _, r := range runs {
		if r.LinkedIssueID != nil {
			ids = append(ids, *r.LinkedIssueID)
		}
	}
	briefs, err := x.issueBriefs(ctx, companyID, ids)
	if err != nil {
		return nil, err
	}
	byID := map[string]*Trigger{}
	for _, t := range triggers {
		byID[t.ID] = t
	}
	out := make([]RunView, len(runs))
	for i, r := range runs {
		out[i] = RunView{Run: r}
		if r.LinkedIssueID != nil {
			out[i].LinkedIssue = briefs[*r.LinkedIssueID]
		}
		if r.TriggerID != nil {
			if t := byID[*r.TriggerID]; t != nil {
				out[i].Trigger = &triggerBrief{ID: t.ID, Kind: t.Kind, Label: t.Label}
			}
		}
	}
	return out, nil
}

// RoutineListItem is a routine as the company list shows it.
type RoutineListItem struct {
	*Routine
	Triggers    []triggerSummary `json:"triggers"`
	LastRun     *RunView         `json:"lastRun"`
	ActiveIssue *issueBrief      `json:"activeIssue"`
}

func (x *Routines) listRoute(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := sdk.CompanyIDFrom(ctx)
	q := r.URL.Query()
	args := []any{companyID}
	where := "company_id = $1"
	if p := strings.TrimSpace(q.Get("projectId")); p != "" {
		if !isUUID(p) {
			x.writeErr(rw, invalid("projectId", "must be a UUID"))
			return
		}
		args = append(args, strings.ToLower(p))
		where += " AND project_id = $2"
	}
	rows, err := x.pool.Query(ctx, `SELECT `+routineCols+` FROM routines WHERE `+where+` ORDER BY updated_at DESC, title, id`, args...)
	if err != nil {
		x.writeErr(rw, fmt.Errorf("error listing routines: %w", err))
		return
	}
	var list []*Routine
	for rows.Next() {
		rt, err := scanRoutine(rows)
		if err != nil {
			rows.Close()
			x.writeErr(rw, err)
			return
		}
		list = append(list, rt)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		x.writeErr(rw, fmt.Errorf("error listing routines: %w", err))
		return
	}
	out := make([]RoutineListItem, len(list))
	if len(list) == 0 {
		sdk.WriteJSON(rw, http.StatusOK, out)
		return
	}
	ids := make([]string, len(list))
	for i, rt := range list {
		ids[i] = rt.ID
	}
	trigs, err := triggersOf(ctx, x.pool, ids)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	latest, err := latestRunsOf(ctx, x.pool, ids)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	_, live, err := x.liveExecutionIssues(ctx, companyID, "", 500)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	activeByRoutine := map[string]*issueBrief{}
	for _, b := range live {
		if b.OriginID != nil && activeByRoutine[*b.OriginID] == nil {
			activeByRoutine[*b.OriginID] = b
		}
	}
	var latestRuns []*Run
	var allTriggers []*Trigger
	for _, rt := range list {
		if run := latest[rt.ID]; run != nil {
			latestRuns = append(latestRuns, run)
		}
		allTriggers = append(allTriggers, trigs[rt.ID]...)
	}
	views, err := x.runViews(ctx, companyID, latestRuns, allTriggers)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	viewByRoutine := map[string]*RunView{}
	for i := range views {
		viewByRoutine[views[i].RoutineID] = &views[i]
	}
	for i, rt := range list {
		item := RoutineListItem{Routine: rt, Triggers: []triggerSummary{}, LastRun: viewByRoutine[rt.ID], ActiveIssue: activeByRoutine[rt.ID]}
		for _, t := range trigs[rt.ID] {
			item.Triggers = append(item.Triggers, triggerSummary{ID: t.ID, Kind: t.Kind, Label: t.Label, Enabled: t.Enabled,
				CronExpression: t.CronExpression, Timezone: t.Timezone, NextRunAt: t.NextRunAt, LastFiredAt: t.LastFiredAt,
				LastResult: t.LastResult})
		}
		out[i] = item
	}
	sdk.WriteJSON(rw, http.StatusOK, out)
}

// recentRunsLimit is how many runs the single routine read shows.
const recentRunsLimit = 25

// RoutineDetail is the single routine read.
type RoutineDetail struct {
	*Routine
	Project     json.RawMessage `json:"project"`
	Assignee    *agentSummary   `json:"assignee"`
	ParentIssue json.RawMessage `json:"parentIssue"`
	Triggers    []*Trigger      `json:"triggers"`
	RecentRuns  []RunView       `json:"recentRuns"`
	ActiveIssue json.RawMessage `json:"activeIssue"`
}

func (x *Routines) getRoute(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	rt, err := x.loadRoutine(r)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	d, err := x.detail(ctx, rt)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, d)
}

// detail builds the single routine read.
func (x *Routines) detail(ctx context.Context, rt *Routine) (*RoutineDetail, error) {
	null := json.RawMessage("null")
	d := &RoutineDetail{Routine: rt, Project: null, ParentIssue: null, ActiveIssue: null, Triggers: []*Trigger{}}
	if rt.ProjectID != nil {
		p, err := x.project(ctx, rt.CompanyID, *rt.ProjectID)
		if err != nil {
			return nil, err
		}
		if p != nil {
			d.Project = p.Raw
		}
	}
	if rt.AssigneeAgentID != nil {
		a, err := x.agentDetails(ctx, rt.CompanyID, *rt.AssigneeAgentID)
		if err != nil {
			return nil, err
		}
		d.Assignee = a
	}
	if rt.ParentIssueID != nil {
		raw, err := x.issue(ctx, rt.CompanyID, *rt.ParentIssueID)
		if err != nil {
			return nil, err
		}
		if raw != nil {
			d.ParentIssue = raw
		}
	}
	trigs, err := triggersOf(ctx, x.pool, []string{rt.ID})
	if err != nil {
		return nil, err
	}
	if t := trigs[rt.ID]; t != nil {
		d.Triggers = t
	}
	for _, t := range d.Triggers {
		if t.Kind == kindWebhook && t.PublicID != nil {
			u := x.webhookURL(*t.PublicID)
			t.WebhookURL = &u
		}
	}
	runs, err := runsOf(ctx, x.pool, rt.ID, recentRunsLimit)
	if err != nil {
		return nil, err
	}
	if d.RecentRuns, err = x.runViews(ctx, rt.CompanyID, runs, d.Triggers); err != nil {
		return nil, err
	}
	raws, _, err := x.liveExecutionIssues(ctx, rt.CompanyID, rt.ID, 1)
	if err != nil {
		return nil, err
	}
	if len(raws) > 0 {
		d.ActiveIssue = raws[0]
	}
	return d, nil
}

// routineListQuery documents the query parameters of the routine list.
type routineListQuery struct {
	ProjectID string `query:"projectId" jsonschema:"format=uuid"`
}
