package routines

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/keelhq/keel/sdk"
)

// RunBody is the body of POST /api/routines/{routineId}/run.
type RunBody struct {
	// Source is manual (default) or api.
	Source *string `json:"source,omitempty" jsonschema:"enum=manual,enum=api"`
	// TriggerID must be an enabled trigger of the routine.
	TriggerID *string `json:"triggerId,omitempty" jsonschema:"format=uuid"`
	// Payload is stored on the run as its triggerPayload.
	Payload json.RawMessage `json:"payload,omitempty"`
	// Variables override the routine's variable defaults for this run.
	Variables map[string]json.RawMessage `json:"variables,omitempty"`
	// ProjectID overrides the routine's project for this run.
	ProjectID *string `json:"projectId,omitempty" jsonschema:"format=uuid"`
	// AssigneeAgentID overrides the routine's assignee for this run.
	AssigneeAgentID *string `json:"assigneeAgentId,omitempty" jsonschema:"format=uuid"`
	// IdempotencyKey deduplicates repeated requests for the same source and trigger.
	IdempotencyKey *string `json:"idempotencyKey,omitempty" jsonschema:"maxLength=255"`
	// ExecutionWorkspaceID, ExecutionWorkspacePreference and ExecutionWorkspaceSettings are
	// recorded with the run's dispatch.
	ExecutionWorkspaceID         *string         `json:"executionWorkspaceId,omitempty" jsonschema:"format=uuid"`
	ExecutionWorkspacePreference *string         `json:"executionWorkspacePreference,omitempty" jsonschema:"maxLength=100"`
	ExecutionWorkspaceSettings   json.RawMessage `json:"executionWorkspaceSettings,omitempty"`
}

// maxIdempotencyKey bounds idempotency keys (REFERENCE.md 5).
const maxIdempotencyKey = 255

// Run list bounds.
const (
	runsDefaultLimit = 50
	runsMaxLimit     = 200
)

func init() {
	addRoutes(
		route{Method: "POST", Path: "/api/routines/{routineId}/run", Status: http.StatusAccepted, Response: new(Run),
			Summary: "Fire a manual or api run now (202 with the run); the concurrency policy applies",
			Body:    RunBody{}, Handle: (*Routines).runRoute},
		route{Method: "GET", Path: "/api/routines/{routineId}/runs", Response: new([]RunView),
			Summary: "List a routine's recent runs, newest first (limit default 50, at most 200)", Handle: (*Routines).runsListRoute},
	)
}

// dispatchDoc is what an execution issue is created from, stored with the run.
type dispatchDoc struct {
	Title                        string          `json:"title"`
	Description                  *string         `json:"description,omitempty"`
	AssigneeAgentID              string          `json:"assigneeAgentId"`
	ProjectID                    *string         `json:"projectId,omitempty"`
	GoalID                       *string         `json:"goalId,omitempty"`
	ParentIssueID                *string         `json:"parentIssueId,omitempty"`
	Priority                     string          `json:"priority"`
	ExecutionWorkspaceID         *string         `json:"executionWorkspaceId,omitempty"`
	ExecutionWorkspacePreference *string         `json:"executionWorkspacePreference,omitempty"`
	ExecutionWorkspaceSettings   json.RawMessage `json:"executionWorkspaceSettings,omitempty"`
}

// dispatchInput is one request to fire a routine.
type dispatchInput struct {
	routine *Routine
	trigger *Trigger
	source  string
	// payload is the trigger payload as JSON (nil for none).
	payload json.RawMessage
	// variables are the run's own values; strict refuses unknown names.
	variables map[string]json.RawMessage
	strict    bool
	projectID *string
	assignee  *string
	// idempotencyKey deduplicates per source and trigger.
	idempotencyKey string
	// scheduledFor is the schedule tick a scheduled run stands for.
	scheduledFor *time.Time
	// actor is the request's actor; systemID names the engine part otherwise.
	actor    *sdk.Actor
	systemID string
	// workspace fields of a manual run.
	workspaceID         *string
	workspacePreference *string
	workspaceSettings   json.RawMessage
	now                 time.Time
}

// errTickTaken means another host already recorded this schedule tick; errDuplicate means
// a run was already recorded for the idempotency key.
var (
	errTickTaken = errors.New("schedule tick already recorded")
	errDuplicate = errors.New("idempotency key already used")
)

// dispatch records a run and completes it: coalesced or skipped against a live execution
// issue, or an execution issue created for the assignee. It returns the run and whether it
// is an earlier run returned for a repeated idempotency key. Variable problems of a run
// somebody asked for are returned as errors (400, 422) without recording anything.
func (x *Routines) dispatch(ctx context.Context, in *dispatchInput) (*Run, bool, error) {
	rt := in.routine
	scope := runScope(in.source, in.trigger)
	var payload any
	if len(in.payload) > 0 {
		if err := json.Unmarshal(in.payload, &payload); err != nil {
			return nil, false, invalid("payload", "must be JSON")
		}
	}
	values, problems, missing := resolveVariables(rt.Variables, in.variables, in.strict)
	if len(problems) > 0 {
		return nil, false, validationError(problems...)
	}
	doc := &dispatchDoc{AssigneeAgentID: deref(rt.AssigneeAgentID), ProjectID: rt.ProjectID, GoalID: rt.GoalID,
		ParentIssueID: rt.ParentIssueID, Priority: rt.Priority, ExecutionWorkspaceID: in.workspaceID,
		ExecutionWorkspacePreference: in.workspacePreference, ExecutionWorkspaceSettings: in.workspaceSettings}
	if in.assignee != nil {
		doc.AssigneeAgentID = *in.assignee
	}
	if in.projectID != nil {
		doc.ProjectID = in.projectID
	}
	failure := ""
	switch {
	case len(missing) > 0:
		if in.source != sourceSchedule {
			return nil, false, &sdk.Error{Status: http.StatusUnprocessableEntity,
				Message: "Missing required variables: " + strings.Join(missing, ", ")}
		}
		failure = "Missing required variables: " + strings.Join(missing, ", ")
	case doc.AssigneeAgentID == "":
		if in.source != sourceSchedule {
			return nil, false, unprocessable("Routine has no assignee")
		}
		failure = "Routine has no assignee"
	}
	for k, v := range builtinValues(in.now, payload) {
		values[k] = v
	}
	doc.Title = truncateRunes(renderTemplate(rt.Title, values, payload), 500)
	if rt.Description != nil {
		doc.Description = ptr(renderTemplate(*rt.Description, values, payload))
	}
	run, err := x.insertRun(ctx, in, scope, doc)
	if errors.Is(err, errDuplicate) {
		// A repeated idempotency key: the run recorded for it.
		run, err := x.runByKey(ctx, rt.ID, scope, in.idempotencyKey)
		return run, run != nil, err
	}
	if err != nil {
		return nil, false, err
	}
	if failure != "" {
		run, err = x.finishRun(ctx, x.pool, run, runFailed, nil, nil, failure)
		if err != nil {
			return nil, false, err
		}
		x.recordOutcome(ctx, in, run, doc)
		return run, false, nil
	}
	run, err = x.completeRun(ctx, rt, run, doc)
	if err != nil {
		return nil, false, err
	}
	x.recordOutcome(ctx, in, run, doc)
	return run, false, nil
}

// runScope is the idempotency scope of a run: its source and trigger.
func runScope(source string, t *Trigger) string {
	if t == nil {
		return source + ":"
	}
	return source + ":" + t.ID
}

func truncateRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}

// runByKey returns the run recorded for an idempotency key (nil when none).
func (x *Routines) runByKey(ctx context.Context, routineID, scope, key string) (*Run, error) {
	return scanRun(x.pool.QueryRow(ctx, `SELECT `+runCols+` FROM routine_runs
		WHERE routine_id = $1 AND idempotency_scope = $2 AND idempotency_key = $3`, routineID, scope, key))
}

// insertRun records a received run. A schedule tick another host already recorded is
// errTickTaken.
func (x *Routines) insertRun(ctx context.Context, in *dispatchInput, scope string, doc *dispatchDoc) (*Run, error) {
	docJSON, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("error encoding run dispatch: %w", err)
	}
	var triggerID *string
	if in.trigger != nil {
		triggerID = &in.trigger.ID
	}
	agentID, userID := actorIDs(in.actor)
	var payload any
	if len(in.payload) > 0 {
		payload = in.payload
	}
	// The run names the routine's latest revision at insert, read in the same statement;
	// the board user who asked for it is responsible for it.
	run, err := scanRun(x.pool.QueryRow(ctx, `INSERT INTO routine_runs (id, company_id, routine_id, trigger_id, source, status,
		scheduled_for, idempotency_key, idempotency_scope, trigger_payload, dispatch, created_by_agent_id, created_by_user_id,
		routine_revision_id, responsible_user_id, dispatch_fingerprint)
		VALUES ($1,$2,$3,$4,$5,'received',$6,$7,$8,$9,$10,$11,$12,
			(SELECT latest_revision_id FROM routines WHERE id = $3),$12,$13)
		ON CONFLICT DO NOTHING RETURNING `+runCols,
		uuid.NewString(), in.routine.CompanyID, in.routine.ID, triggerID, in.source, in.scheduledFor, strOrNil(in.idempotencyKey),
		scope, payload, docJSON, agentID, userID, dispatchFingerprint(in.routine.ID, triggerID, doc)))
	if err != nil {
		return nil, fmt.Errorf("error recording routine run: %w", err)
	}
	if run == nil {
		// The only unique keys are the schedule tick and the idempotency key.
		if in.scheduledFor != nil {
			return nil, errTickTaken
		}
		return nil, errDuplicate
	}
	return run, nil
}

// completeRun finishes a received run: against a live execution issue the routine's
// concurrency policy coalesces or skips it; otherwise it creates the execution issue.
// Coalescing onto a live issue needs no lock, so it is tried first. Creating one is
// serialized per routine by an advisory lock held until the issue exists (checking again
// under it), so two dispatches never both create one. The lock's connection also records
// the outcome, so a dispatch holding it never waits for a second connection.
func (x *Routines) completeRun(ctx context.Context, rt *Routine, run *Run, doc *dispatchDoc) (*Run, error) {
	if rt.ConcurrencyPolicy == policyAlwaysEnqueue {
		return x.createExecutionIssue(ctx, x.pool, rt, run, doc)
	}
	if done, err := x.coalesceIfLive(ctx, x.pool, rt, run); done != nil || err != nil {
		return done, err
	}
	conn, err := x.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("error locking routine dispatch: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(hashtext('routines.dispatch'), hashtext($1))`, rt.ID); err != nil {
		return nil, fmt.Errorf("error locking routine dispatch: %w", err)
	}
	defer func() {
		if _, err := conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(hashtext('routines.dispatch'), hashtext($1))`,
			rt.ID); err != nil {
			// A connection that cannot unlock must not go back to the pool holding the lock.
			x.log.Warn("error unlocking routine dispatch", "routine", rt.ID, "error", err)
			_ = conn.Conn().Close(context.WithoutCancel(ctx))
		}
	}()
	if done, err := x.coalesceIfLive(ctx, conn, rt, run); done != nil || err != nil {
		return done, err
	}
	return x.createExecutionIssue(ctx, conn, rt, run, doc)
}

// coalesceIfLive finishes the run as coalesced (or skipped, by the routine's policy) when
// the routine has a live execution issue; it returns nil when there is none.
func (x *Routines) coalesceIfLive(ctx context.Context, db querier, rt *Routine, run *Run) (*Run, error) {
	_, live, err := x.liveExecutionIssues(ctx, rt.CompanyID, rt.ID, 1)
	if err != nil {
		return x.finishRun(ctx, db, run, runFailed, nil, nil, errorText(err))
	}
	if len(live) == 0 {
		return nil, nil
	}
	status := runCoalesced
	if rt.ConcurrencyPolicy == policySkipIfActive {
		status = runSkipped
	}
	return x.finishRun(ctx, db, run, status, &live[0].ID, live[0].OriginRunID, "")
}

// createExecutionIssue creates the run's execution issue through work (idempotent per
// run, so a retried dispatch finds the same issue). Work wakes the assignee on assignment.
func (x *Routines) createExecutionIssue(ctx context.Context, db querier, rt *Routine, run *Run, doc *dispatchDoc) (*Run, error) {
	iss, err := x.createIssue(ctx, rt.CompanyID, &issueCreateInput{
		Title: doc.Title, Description: doc.Description, Status: "todo", Priority: doc.Priority, AssigneeAgentID: doc.AssigneeAgentID,
		ProjectID: doc.ProjectID, GoalID: doc.GoalID, ParentID: doc.ParentIssueID, OriginKind: originRoutineExecution,
		OriginID: rt.ID, OriginRunID: run.ID, IdempotencyKey: "routine-run:" + run.ID,
	})
	if err != nil {
		var e *sdk.Error
		if !errors.As(err, &e) {
			x.log.Warn("error creating execution issue", "routine", rt.ID, "run", run.ID, "error", err)
		}
		return x.finishRun(ctx, db, run, runFailed, nil, nil, errorText(err))
	}
	return x.finishRun(ctx, db, run, runIssueCreated, &iss.ID, nil, "")
}

// finishRunSQL moves a received run to its outcome and stamps its routine (lastTriggeredAt,
// and lastEnqueuedAt when an issue was created) and trigger (lastFiredAt, lastResult) in
// one statement.
const finishRunSQL = `WITH run AS (
		UPDATE routine_runs SET status = $2, linked_issue_id = $3, coalesced_into_run_id = $4, failure_reason = $5,
			completed_at = CASE WHEN $6 THEN clock_timestamp() END, updated_at = clock_timestamp()
		WHERE id = $1 AND status = 'received' RETURNING ` + runCols + `
	), routine AS (
		UPDATE routines r SET last_triggered_at = run.triggered_at,
			last_enqueued_at = CASE WHEN $2 = 'issue_created' THEN run.triggered_at ELSE r.last_enqueued_at END
		FROM run WHERE r.id = run.routine_id RETURNING r.id
	), trig AS (
		UPDATE routine_triggers t SET last_fired_at = run.triggered_at, last_result = $7
		FROM run WHERE t.id = run.trigger_id RETURNING t.id
	)
	SELECT ` + runCols + ` FROM run`

// finishRun moves a received run to its outcome and stamps the routine and trigger.
func (x *Routines) finishRun(ctx context.Context, db querier, run *Run, status string, issueID, coalescedInto *string, failure string) (*Run, error) {
	out, err := scanRun(db.QueryRow(ctx, finishRunSQL, run.ID, status, issueID, coalescedInto, strOrNil(failure),
		status != runIssueCreated, lastResultText(status, issueID, failure)))
	if err != nil {
		return nil, fmt.Errorf("error finishing routine run: %w", err)
	}
	if out == nil {
		// Another worker finished it first; report what it recorded.
		return runGet(ctx, db, run.ID)
	}
	return out, nil
}

// lastResultText is a trigger's lastResult after a run.
func lastResultText(status string, issueID *string, failure string) string {
	switch status {
	case runIssueCreated:
		return "Created execution issue " + deref(issueID)
	case runCoalesced:
		return "Coalesced into execution issue " + deref(issueID)
	case runSkipped:
		switch failure {
		case reasonNoActivity:
			return "skipped_no_activity"
		case reasonProjectPaused:
			return "skipped_paused"
		}
		return "Skipped: execution issue " + deref(issueID) + " is still open"
	case runFailed:
		return "Failed: " + failure
	}
	return status
}

// recordOutcome logs routine_run.created for a dispatched run. Scheduler and webhook runs
// are the system's ("routine-scheduler", "routine-webhook") and carry routineId, which is
// how the activity gate recognises the scheduler's own entries.
func (x *Routines) recordOutcome(ctx context.Context, in *dispatchInput, run *Run, doc *dispatchDoc) {
	details := map[string]any{"routineId": run.RoutineID, "triggerId": run.TriggerID, "source": run.Source, "status": run.Status,
		"linkedIssueId": run.LinkedIssueID}
	if run.CoalescedIntoRunID != nil {
		details["coalescedIntoRunId"] = *run.CoalescedIntoRunID
	}
	if run.FailureReason != nil {
		details["failureReason"] = *run.FailureReason
	}
	if run.ScheduledFor != nil {
		details["scheduledFor"] = run.ScheduledFor.UTC().Format(time.RFC3339)
	}
	project := in.routine.ProjectID
	if doc != nil && doc.ProjectID != nil {
		project = doc.ProjectID
	}
	x.activityBy(ctx, in.actor, in.systemID, run.CompanyID, "routine_run.created", "routine_run", run.ID, withProject(project, details))
}

// recordSkip records an automatic firing that was claimed but not dispatched (activity
// gate, paused project): a skipped run with its reason and the trigger's lastResult.
func (x *Routines) recordSkip(ctx context.Context, rt *Routine, t *Trigger, source string, scheduledFor *time.Time, reason string,
	payload map[string]any) (*Run, error) {
	var raw json.RawMessage
	if payload != nil {
		b, err := json.Marshal(payload)
		if err != nil {
			return nil, fmt.Errorf("error encoding skipped run payload: %w", err)
		}
		raw = b
	}
	systemID := actorScheduler
	if source == sourceWebhook {
		systemID = actorWebhook
	}
	in := &dispatchInput{routine: rt, trigger: t, source: source, payload: raw, scheduledFor: scheduledFor, systemID: systemID}
	run, err := x.insertRun(ctx, in, runScope(source, t), &dispatchDoc{})
	if err != nil {
		return nil, err
	}
	run, err = x.finishRun(ctx, x.pool, run, runSkipped, nil, nil, reason)
	if err != nil {
		return nil, err
	}
	x.recordOutcome(ctx, in, run, nil)
	return run, nil
}

func (x *Routines) runRoute(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	rt, err := x.loadRoutine(r)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	if err := requireManage(ctx, rt); err != nil {
		x.writeErr(rw, err)
		return
	}
	var body RunBody
	if err := decodeBody(r, &body); err != nil {
		x.writeErr(rw, err)
		return
	}
	var d []detail
	bad := func(path, msg string) { d = append(d, detail{Path: path, Message: msg}) }
	source := sourceManual
	if body.Source != nil {
		source = *body.Source
		if source != sourceManual && source != sourceAPI {
			bad("source", "must be manual or api")
		}
	}
	uuidField := func(path string, p *string) *string {
		if p == nil {
			return nil
		}
		v := strings.ToLower(strings.TrimSpace(*p))
		if !isUUID(v) {
			bad(path, "must be a UUID")
		}
		return &v
	}
	triggerID := uuidField("triggerId", body.TriggerID)
	projectID := uuidField("projectId", body.ProjectID)
	assignee := uuidField("assigneeAgentId", body.AssigneeAgentID)
	workspaceID := uuidField("executionWorkspaceId", body.ExecutionWorkspaceID)
	key := ""
	if body.IdempotencyKey != nil {
		key = strings.TrimSpace(*body.IdempotencyKey)
		if key == "" || len(key) > maxIdempotencyKey {
			bad("idempotencyKey", fmt.Sprintf("must be 1 to %d characters", maxIdempotencyKey))
		}
	}
	if body.ExecutionWorkspacePreference != nil && utf8.RuneCountInString(*body.ExecutionWorkspacePreference) > 100 {
		bad("executionWorkspacePreference", "must be at most 100 characters")
	}
	if s := bytes.TrimSpace(body.ExecutionWorkspaceSettings); len(s) > 0 && s[0] != '{' && string(s) != "null" {
		bad("executionWorkspaceSettings", "must be an object")
	}
	if len(d) > 0 {
		x.writeErr(rw, validationError(d...))
		return
	}
	if rt.Status == statusArchived {
		x.writeErr(rw, conflict("Routine is archived"))
		return
	}
	var trigger *Trigger
	if triggerID != nil {
		if trigger, err = triggerGet(ctx, x.pool, *triggerID, false); err != nil {
			x.writeErr(rw, err)
			return
		}
		if trigger == nil || trigger.RoutineID != rt.ID {
			x.writeErr(rw, forbidden("Routine trigger does not belong to this routine"))
			return
		}
		if !trigger.Enabled {
			x.writeErr(rw, conflict(msgTriggerNotActive))
			return
		}
	}
	if assignee != nil && *assignee != deref(rt.AssigneeAgentID) {
		if err := x.canAssign(ctx, rt.CompanyID, assignee, msgAgentNoReassign); err != nil {
			x.writeErr(rw, err)
			return
		}
		if err := x.checkAssignee(ctx, rt.CompanyID, *assignee); err != nil {
			x.writeErr(rw, err)
			return
		}
	}
	if projectID != nil && *projectID != deref(rt.ProjectID) {
		p, err := x.project(ctx, rt.CompanyID, *projectID)
		if err != nil {
			x.writeErr(rw, err)
			return
		}
		if p == nil {
			x.writeErr(rw, unprocessable("Project not found in this company"))
			return
		}
	}
	payload := body.Payload
	if string(bytes.TrimSpace(payload)) == "null" {
		payload = nil
	}
	settings := body.ExecutionWorkspaceSettings
	if string(bytes.TrimSpace(settings)) == "null" {
		settings = nil
	}
	run, _, err := x.dispatch(ctx, &dispatchInput{routine: rt, trigger: trigger, source: source, payload: payload,
		variables: body.Variables, strict: true, projectID: projectID, assignee: assignee, idempotencyKey: key,
		actor: sdk.ActorFrom(ctx), workspaceID: workspaceID, workspacePreference: body.ExecutionWorkspacePreference,
		workspaceSettings: settings, now: time.Now()})
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusAccepted, run)
}

func (x *Routines) runsListRoute(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	rt, err := x.loadRoutine(r)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	limit, _, err := sdk.Page(r, runsDefaultLimit, runsMaxLimit)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	runs, err := runsOf(ctx, x.pool, rt.ID, limit)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	trigs, err := triggersOf(ctx, x.pool, []string{rt.ID})
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	views, err := x.runViews(ctx, rt.CompanyID, runs, trigs[rt.ID])
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, views)
}

// staleReceived is how long a run may stay received before the ticker completes it.
const staleReceived = 2 * time.Minute

// completeStaleRuns finishes runs left received (their dispatcher died between recording
// and finishing them). Each is claimed by a conditional update so two hosts never both
// take it; the execution issue is idempotent per run.
func (x *Routines) completeStaleRuns(ctx context.Context) (int, error) {
	rows, err := x.pool.Query(ctx, `SELECT `+runCols+` FROM routine_runs WHERE status = 'received'
		AND updated_at < clock_timestamp() - $1::interval ORDER BY updated_at LIMIT 100`, fmt.Sprintf("%d seconds", int(staleReceived.Seconds())))
	if err != nil {
		return 0, fmt.Errorf("error listing stale routine runs: %w", err)
	}
	runs, err := scanRuns(rows)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, run := range runs {
		tag, err := x.pool.Exec(ctx, `UPDATE routine_runs SET updated_at = clock_timestamp() WHERE id = $1 AND status = 'received'
			AND updated_at = $2`, run.ID, run.UpdatedAt)
		if err != nil {
			return n, fmt.Errorf("error claiming stale routine run: %w", err)
		}
		if tag.RowsAffected() == 0 {
			continue
		}
		rt, err := routineGet(ctx, x.pool, run.RoutineID, false)
		if err != nil || rt == nil {
			continue
		}
		var doc dispatchDoc
		if err := json.Unmarshal(run.dispatch, &doc); err != nil || doc.AssigneeAgentID == "" {
			if _, err := x.finishRun(ctx, x.pool, run, runFailed, nil, nil, "run could not be completed"); err != nil {
				return n, err
			}
			continue
		}
		var trigger *Trigger
		if run.TriggerID != nil {
			trigger, _ = triggerGet(ctx, x.pool, *run.TriggerID, false)
		}
		done, err := x.completeRun(ctx, rt, run, &doc)
		if err != nil {
			return n, err
		}
		x.recordOutcome(ctx, &dispatchInput{routine: rt, trigger: trigger, systemID: actorScheduler}, done, &doc)
		n++
	}
	return n, nil
}
