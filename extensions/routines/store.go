package routines

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// querier is a pool or a transaction.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Routine statuses, policies and scopes.
const (
	statusActive   = "active"
	statusPaused   = "paused"
	statusArchived = "archived"

	policyCoalesce      = "coalesce_if_active"
	policyAlwaysEnqueue = "always_enqueue"
	policySkipIfActive  = "skip_if_active"

	catchUpSkipMissed = "skip_missed"
	catchUpEnqueueCap = "enqueue_missed_with_cap"

	gateAlways   = "always"
	gateRequire  = "require_external_activity"
	scopeCompany = "company"
	scopeProject = "project"
)

// maxCatchUpRuns caps the runs enqueue_missed_with_cap records for one claimed tick
// (REFERENCE.md 5 MAX_CATCH_UP_RUNS).
const maxCatchUpRuns = 25

var (
	routineStatuses     = []string{statusActive, statusPaused, statusArchived}
	routinePriorities   = []string{"critical", "high", "medium", "low"}
	concurrencyPolicies = []string{policyCoalesce, policyAlwaysEnqueue, policySkipIfActive}
	catchUpPolicies     = []string{catchUpSkipMissed, catchUpEnqueueCap}
	gatePolicies        = []string{gateAlways, gateRequire}
	gateScopes          = []string{scopeCompany, scopeProject}
)

// Routine is a row of ext_routines.routines and its API shape.
type Routine struct {
	ID        string  `json:"id"`
	CompanyID string  `json:"companyId"`
	ProjectID *string `json:"projectId"`
	// FolderID is a routine folder of the company (the folders owner checks it) or null.
	FolderID           *string    `json:"folderId"`
	GoalID             *string    `json:"goalId"`
	ParentIssueID      *string    `json:"parentIssueId"`
	Title              string     `json:"title"`
	Description        *string    `json:"description"`
	AssigneeAgentID    *string    `json:"assigneeAgentId"`
	Priority           string     `json:"priority"`
	Status             string     `json:"status"`
	ConcurrencyPolicy  string     `json:"concurrencyPolicy"`
	CatchUpPolicy      string     `json:"catchUpPolicy"`
	ActivityGatePolicy string     `json:"activityGatePolicy"`
	ActivityGateScope  string     `json:"activityGateScope"`
	OriginKind         string     `json:"originKind"`
	OriginID           *string    `json:"originId"`
	Variables          []Variable `json:"variables"`
	// Env is the routine's env map (string values, plain or secret_ref bindings) or null.
	Env json.RawMessage `json:"env"`
	// LatestRevisionID and LatestRevisionNumber name the routine's newest revision.
	LatestRevisionID     *string    `json:"latestRevisionId"`
	LatestRevisionNumber int        `json:"latestRevisionNumber"`
	CreatedByAgentID     *string    `json:"createdByAgentId"`
	CreatedByUserID      *string    `json:"createdByUserId"`
	ResponsibleUserID    *string    `json:"responsibleUserId"`
	UpdatedByAgentID     *string    `json:"updatedByAgentId"`
	UpdatedByUserID      *string    `json:"updatedByUserId"`
	LastTriggeredAt      *time.Time `json:"lastTriggeredAt"`
	LastEnqueuedAt       *time.Time `json:"lastEnqueuedAt"`
	CreatedAt            time.Time  `json:"createdAt"`
	UpdatedAt            time.Time  `json:"updatedAt"`
	// ManagedByPlugin names the plugin managing the routine; always null for now.
	ManagedByPlugin *string `json:"managedByPlugin"`
}

const routineCols = `id, company_id, project_id, goal_id, parent_issue_id, title, description, assignee_agent_id, priority,
	status, concurrency_policy, catch_up_policy, activity_gate_policy, activity_gate_scope, origin_kind, origin_id, variables,
	created_by_agent_id, created_by_user_id, responsible_user_id, updated_by_agent_id, updated_by_user_id, last_triggered_at,
	last_enqueued_at, created_at, updated_at, folder_id, env, latest_revision_id, latest_revision_number`

// dest returns the scan destinations of routineCols; variables land in vars.
func (r *Routine) dest(vars *[]byte) []any {
	return []any{&r.ID, &r.CompanyID, &r.ProjectID, &r.GoalID, &r.ParentIssueID, &r.Title, &r.Description, &r.AssigneeAgentID,
		&r.Priority, &r.Status, &r.ConcurrencyPolicy, &r.CatchUpPolicy, &r.ActivityGatePolicy, &r.ActivityGateScope, &r.OriginKind,
		&r.OriginID, vars, &r.CreatedByAgentID, &r.CreatedByUserID, &r.ResponsibleUserID, &r.UpdatedByAgentID, &r.UpdatedByUserID,
		&r.LastTriggeredAt, &r.LastEnqueuedAt, &r.CreatedAt, &r.UpdatedAt, &r.FolderID, &r.Env, &r.LatestRevisionID,
		&r.LatestRevisionNumber}
}

// decodeVariables reads the variables column.
func (r *Routine) decodeVariables(vars []byte) error {
	r.Variables = []Variable{}
	if len(r.Env) == 0 {
		r.Env = json.RawMessage("null")
	}
	if len(vars) > 0 {
		if err := json.Unmarshal(vars, &r.Variables); err != nil {
			return fmt.Errorf("error reading routine variables: %w", err)
		}
	}
	return nil
}

func scanRoutine(row pgx.Row) (*Routine, error) {
	var r Routine
	var vars []byte
	err := row.Scan(r.dest(&vars)...)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("error reading routine: %w", err)
	}
	if err := r.decodeVariables(vars); err != nil {
		return nil, err
	}
	return &r, nil
}

// routineGet loads a routine by id (nil when absent or the id is not a UUID).
func routineGet(ctx context.Context, q querier, id string, forUpdate bool) (*Routine, error) {
	if !isUUID(id) {
		return nil, nil
	}
	sql := `SELECT ` + routineCols + ` FROM routines WHERE id = $1`
	if forUpdate {
		sql += ` FOR UPDATE`
	}
	return scanRoutine(q.QueryRow(ctx, sql, id))
}

// Trigger kinds.
const (
	kindSchedule = "schedule"
	kindWebhook  = "webhook"
	kindAPI      = "api"
)

var triggerKinds = []string{kindSchedule, kindWebhook, kindAPI}

// Trigger is a row of ext_routines.routine_triggers and its API shape.
type Trigger struct {
	ID             string     `json:"id"`
	CompanyID      string     `json:"companyId"`
	RoutineID      string     `json:"routineId"`
	Kind           string     `json:"kind"`
	Label          *string    `json:"label"`
	Enabled        bool       `json:"enabled"`
	CronExpression *string    `json:"cronExpression"`
	Timezone       *string    `json:"timezone"`
	NextRunAt      *time.Time `json:"nextRunAt"`
	LastFiredAt    *time.Time `json:"lastFiredAt"`
	PublicID       *string    `json:"publicId"`
	// WebhookURL is the public fire URL of a webhook trigger, filled by the single routine
	// read (the secret is shown only at creation and rotation).
	WebhookURL       *string    `json:"webhookUrl,omitempty"`
	SecretID         *string    `json:"secretId"`
	SigningMode      *string    `json:"signingMode"`
	ReplayWindowSec  *int       `json:"replayWindowSec"`
	LastRotatedAt    *time.Time `json:"lastRotatedAt"`
	LastResult       *string    `json:"lastResult"`
	CreatedByAgentID *string    `json:"createdByAgentId"`
	CreatedByUserID  *string    `json:"createdByUserId"`
	UpdatedByAgentID *string    `json:"updatedByAgentId"`
	UpdatedByUserID  *string    `json:"updatedByUserId"`
	CreatedAt        time.Time  `json:"createdAt"`
	UpdatedAt        time.Time  `json:"updatedAt"`

	// secretVersion is the version of the secret that currently signs (never shown).
	secretVersion *int
}

const triggerCols = `id, company_id, routine_id, kind, label, enabled, cron_expression, timezone, next_run_at, last_fired_at,
	public_id, secret_id, secret_version, signing_mode, replay_window_sec, last_rotated_at, last_result, created_by_agent_id,
	created_by_user_id, updated_by_agent_id, updated_by_user_id, created_at, updated_at`

// dest returns the scan destinations of triggerCols.
func (t *Trigger) dest() []any {
	return []any{&t.ID, &t.CompanyID, &t.RoutineID, &t.Kind, &t.Label, &t.Enabled, &t.CronExpression, &t.Timezone, &t.NextRunAt,
		&t.LastFiredAt, &t.PublicID, &t.SecretID, &t.secretVersion, &t.SigningMode, &t.ReplayWindowSec, &t.LastRotatedAt,
		&t.LastResult, &t.CreatedByAgentID, &t.CreatedByUserID, &t.UpdatedByAgentID, &t.UpdatedByUserID, &t.CreatedAt, &t.UpdatedAt}
}

func scanTrigger(row pgx.Row) (*Trigger, error) {
	var t Trigger
	err := row.Scan(t.dest()...)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("error reading routine trigger: %w", err)
	}
	return &t, nil
}

// qualify prefixes every column of a column list with a table alias.
func qualify(cols, alias string) string {
	parts := strings.Split(cols, ",")
	for i, p := range parts {
		parts[i] = alias + "." + strings.TrimSpace(p)
	}
	return strings.Join(parts, ", ")
}

// triggerByPublicID loads a trigger by its public id with its routine in one query (nil
// when there is none).
func triggerByPublicID(ctx context.Context, q querier, publicID string) (*Trigger, *Routine, error) {
	var t Trigger
	var r Routine
	var vars []byte
	err := q.QueryRow(ctx, `SELECT `+qualify(triggerCols, "t")+`, `+qualify(routineCols, "r")+`
		FROM routine_triggers t JOIN routines r ON r.id = t.routine_id WHERE t.public_id = $1`, publicID).
		Scan(append(t.dest(), r.dest(&vars)...)...)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("error reading routine trigger: %w", err)
	}
	if err := r.decodeVariables(vars); err != nil {
		return nil, nil, err
	}
	return &t, &r, nil
}

// triggerGet loads a trigger by id (nil when absent).
func triggerGet(ctx context.Context, q querier, id string, forUpdate bool) (*Trigger, error) {
	if !isUUID(id) {
		return nil, nil
	}
	sql := `SELECT ` + triggerCols + ` FROM routine_triggers WHERE id = $1`
	if forUpdate {
		sql += ` FOR UPDATE`
	}
	return scanTrigger(q.QueryRow(ctx, sql, id))
}

// triggersOf lists the triggers of routines, oldest first, by routine id.
func triggersOf(ctx context.Context, q querier, routineIDs []string) (map[string][]*Trigger, error) {
	out := map[string][]*Trigger{}
	if len(routineIDs) == 0 {
		return out, nil
	}
	rows, err := q.Query(ctx, `SELECT `+triggerCols+` FROM routine_triggers WHERE routine_id = ANY($1::uuid[])
		ORDER BY created_at, id`, routineIDs)
	if err != nil {
		return nil, fmt.Errorf("error listing routine triggers: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		t, err := scanTrigger(rows)
		if err != nil {
			return nil, err
		}
		out[t.RoutineID] = append(out[t.RoutineID], t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error listing routine triggers: %w", err)
	}
	return out, nil
}

// Run sources and statuses (REFERENCE.md 5).
const (
	sourceSchedule = "schedule"
	sourceManual   = "manual"
	sourceAPI      = "api"
	sourceWebhook  = "webhook"

	runReceived     = "received"
	runCoalesced    = "coalesced"
	runSkipped      = "skipped"
	runIssueCreated = "issue_created"
	runCompleted    = "completed"
	runFailed       = "failed"
)

// Failure reasons of skipped runs.
const (
	reasonNoActivity     = "no_external_activity"
	reasonProjectPaused  = "paused"
	reasonIssueCancelled = "execution_issue_cancelled"
)

// Run is a row of ext_routines.routine_runs and its API shape.
type Run struct {
	ID           string     `json:"id"`
	CompanyID    string     `json:"companyId"`
	RoutineID    string     `json:"routineId"`
	TriggerID    *string    `json:"triggerId"`
	Source       string     `json:"source"`
	Status       string     `json:"status"`
	TriggeredAt  time.Time  `json:"triggeredAt"`
	ScheduledFor *time.Time `json:"scheduledFor"`
	// RoutineRevisionID is the routine's latest revision when the run was recorded.
	RoutineRevisionID *string `json:"routineRevisionId"`
	// ResponsibleUserID is the board user who caused the run (null for agents and the system).
	ResponsibleUserID *string         `json:"responsibleUserId"`
	IdempotencyKey    *string         `json:"idempotencyKey"`
	TriggerPayload    json.RawMessage `json:"triggerPayload"`
	// DispatchFingerprint identifies what the run dispatches (see dispatchFingerprint).
	DispatchFingerprint *string    `json:"dispatchFingerprint"`
	LinkedIssueID       *string    `json:"linkedIssueId"`
	CoalescedIntoRunID  *string    `json:"coalescedIntoRunId"`
	FailureReason       *string    `json:"failureReason"`
	CompletedAt         *time.Time `json:"completedAt"`
	CreatedAt           time.Time  `json:"createdAt"`
	UpdatedAt           time.Time  `json:"updatedAt"`

	dispatch json.RawMessage
}

const runCols = `id, company_id, routine_id, trigger_id, source, status, triggered_at, scheduled_for, idempotency_key,
	trigger_payload, dispatch, linked_issue_id, coalesced_into_run_id, failure_reason, completed_at, created_at, updated_at,
	routine_revision_id, responsible_user_id, dispatch_fingerprint`

func scanRun(row pgx.Row) (*Run, error) {
	var r Run
	var payload, dispatch []byte
	err := row.Scan(&r.ID, &r.CompanyID, &r.RoutineID, &r.TriggerID, &r.Source, &r.Status, &r.TriggeredAt, &r.ScheduledFor,
		&r.IdempotencyKey, &payload, &dispatch, &r.LinkedIssueID, &r.CoalescedIntoRunID, &r.FailureReason, &r.CompletedAt,
		&r.CreatedAt, &r.UpdatedAt, &r.RoutineRevisionID, &r.ResponsibleUserID, &r.DispatchFingerprint)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("error reading routine run: %w", err)
	}
	r.TriggerPayload = json.RawMessage("null")
	if len(payload) > 0 {
		r.TriggerPayload = payload
	}
	r.dispatch = dispatch
	return &r, nil
}

func scanRuns(rows pgx.Rows) ([]*Run, error) {
	defer rows.Close()
	out := []*Run{}
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error listing routine runs: %w", err)
	}
	return out, nil
}

// runGet loads a run by id (nil when absent).
func runGet(ctx context.Context, q querier, id string) (*Run, error) {
	if !isUUID(id) {
		return nil, nil
	}
	return scanRun(q.QueryRow(ctx, `SELECT `+runCols+` FROM routine_runs WHERE id = $1`, id))
}

// runsOf lists a routine's runs, newest first.
func runsOf(ctx context.Context, q querier, routineID string, limit int) ([]*Run, error) {
	rows, err := q.Query(ctx, `SELECT `+runCols+` FROM routine_runs WHERE routine_id = $1
		ORDER BY created_at DESC, id DESC LIMIT $2`, routineID, limit)
	if err != nil {
		return nil, fmt.Errorf("error listing routine runs: %w", err)
	}
	return scanRuns(rows)
}

// latestRunsOf returns the newest run of each routine.
func latestRunsOf(ctx context.Context, q querier, routineIDs []string) (map[string]*Run, error) {
	out := map[string]*Run{}
	if len(routineIDs) == 0 {
		return out, nil
	}
	rows, err := q.Query(ctx, `SELECT DISTINCT ON (routine_id) `+runCols+` FROM routine_runs WHERE routine_id = ANY($1::uuid[])
		ORDER BY routine_id, created_at DESC, id DESC`, routineIDs)
	if err != nil {
		return nil, fmt.Errorf("error reading latest routine runs: %w", err)
	}
	runs, err := scanRuns(rows)
	if err != nil {
		return nil, err
	}
	for _, r := range runs {
		out[r.RoutineID] = r
	}
	return out, nil
}

// isUniqueViolation reports whether err violates the named constraint or index.
func isUniqueViolation(err error, constraint string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == constraint
}
