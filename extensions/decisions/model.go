package decisions

import (
	"context"
	"encoding/json"
	"fmt"
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

// Decision statuses, execution statuses and execution row statuses.
const (
	statusOpen      = "open"
	statusDecided   = "decided"
	statusExpired   = "expired"
	statusCancelled = "cancelled"

	execRunning   = "running"
	execSucceeded = "succeeded"
	execPartial   = "partial"
	execFailed    = "failed"

	rowClaimed  = "claimed"
	rowExecuted = "executed"
	rowFailed   = "failed"
	rowSkipped  = "skipped"

	policyNone = "none"
	policyWake = "wake_origin_agent"

	// chosenDismissed is chosenOptionId of a dismissal without an effect-free option.
	chosenDismissed = "dismissed"
)

// Effect types.
const (
	effectComment     = "comment_on_issue"
	effectCreateIssue = "create_issue"
	effectStatus      = "update_issue_status"
	effectAssign      = "assign_issue"
	effectCancelTree  = "cancel_issue_tree"
	effectResolve     = "resolve_blocker"
)

var effectTypes = []string{effectComment, effectCreateIssue, effectStatus, effectAssign, effectCancelTree, effectResolve}

// Option is one choice a decision offers.
type Option struct {
	// ID is 1-120 characters, unique within the decision.
	ID string `json:"id"`
	// Label is 1-240 characters.
	Label string `json:"label"`
	// Description is up to 2000 characters.
	Description *string `json:"description,omitempty"`
	// Style is default, primary or destructive (default "default").
	Style string `json:"style,omitempty" jsonschema:"enum=default,enum=primary,enum=destructive"`
	// Effects run in order when the option is chosen (up to 10).
	Effects []Effect `json:"effects"`
}

// Effect is one change an option makes to an issue.
type Effect struct {
	// Type is comment_on_issue, create_issue, update_issue_status, assign_issue,
	// cancel_issue_tree or resolve_blocker.
	Type string `json:"type"`
	// TargetIssueID is the issue the effect acts on (for create_issue, the new issue's
	// parent unless the draft names one).
	TargetIssueID string `json:"targetIssueId"`
	// Staleness is strict (default: skipped when the target moved since the snapshot) or
	// lenient (runs regardless). cancel_issue_tree is always strict.
	Staleness string `json:"staleness,omitempty" jsonschema:"enum=strict,enum=lenient"`
	// BodyMarkdown is the comment of comment_on_issue.
	BodyMarkdown *string `json:"bodyMarkdown,omitempty"`
	// Draft is the issue create body of create_issue.
	Draft json.RawMessage `json:"draft,omitempty"`
	// Status is the new status of update_issue_status.
	Status *string `json:"status,omitempty"`
	// Comment is the optional comment of update_issue_status and assign_issue.
	Comment *string `json:"comment,omitempty"`
	// AssigneeAgentID or AssigneeUserID is the new assignee of assign_issue.
	AssigneeAgentID *string `json:"assigneeAgentId,omitempty"`
	AssigneeUserID  *string `json:"assigneeUserId,omitempty"`
	// ReasonComment is the comment cancel_issue_tree posts on the target.
	ReasonComment *string `json:"reasonComment,omitempty"`
	// RemoveBlockedByIssueIDs are the blockers resolve_blocker removes from the target.
	RemoveBlockedByIssueIDs []string `json:"removeBlockedByIssueIds,omitempty"`
}

// Input is a value the deciding board user supplies, substituted into effect texts at
// {{input.<id>}}.
type Input struct {
	ID          string  `json:"id"`
	Label       string  `json:"label"`
	Placeholder *string `json:"placeholder,omitempty"`
	Required    bool    `json:"required,omitempty"`
	MaxLength   *int    `json:"maxLength,omitempty"`
}

// Snapshot is a target issue's state when the decision was created (REFERENCE.md 5: status,
// assignees, updatedAt, and the child and descendant counts a tree effect acts on). Counts
// are absent from snapshots taken before they were recorded.
type Snapshot struct {
	Status          string    `json:"status"`
	AssigneeAgentID *string   `json:"assigneeAgentId"`
	AssigneeUserID  *string   `json:"assigneeUserId"`
	UpdatedAt       time.Time `json:"updatedAt"`
	ChildCount      *int      `json:"childCount,omitempty"`
	DescendantCount *int      `json:"descendantCount,omitempty"`
}

// Execution is one effect's execution row.
type Execution struct {
	EffectIndex   int             `json:"effectIndex"`
	EffectType    string          `json:"effectType"`
	TargetIssueID *string         `json:"targetIssueId"`
	Status        string          `json:"status"`
	Result        json.RawMessage `json:"result"`
	Error         *string         `json:"error"`
	ActivityLogID *string         `json:"activityLogId"`
	ExecutedAt    *time.Time      `json:"executedAt"`
}

// Decision is a row of ext_decisions.decisions and its API shape.
type Decision struct {
	ID                 string              `json:"id"`
	CompanyID          string              `json:"companyId"`
	BundleID           *string             `json:"bundleId"`
	OriginAgentID      string              `json:"originAgentId"`
	OriginIssueID      string              `json:"originIssueId"`
	OriginRunID        string              `json:"originRunId"`
	RuleKey            *string             `json:"ruleKey"`
	Title              string              `json:"title"`
	Body               string              `json:"body"`
	Options            []Option            `json:"options"`
	Inputs             []Input             `json:"inputs"`
	Status             string              `json:"status"`
	ExecutionStatus    *string             `json:"executionStatus"`
	ChosenOptionID     *string             `json:"chosenOptionId"`
	InputValues        map[string]string   `json:"inputValues"`
	DecidedByUserID    *string             `json:"decidedByUserId"`
	DecidedAt          *time.Time          `json:"decidedAt"`
	ExpiresAt          time.Time           `json:"expiresAt"`
	IdempotencyKey     *string             `json:"idempotencyKey"`
	SignedSpec         string              `json:"signedSpec"`
	TargetSnapshots    map[string]Snapshot `json:"targetSnapshots"`
	ContinuationPolicy string              `json:"continuationPolicy"`
	Metadata           map[string]any      `json:"metadata"`
	CreatedAt          time.Time           `json:"createdAt"`
	UpdatedAt          time.Time           `json:"updatedAt"`
	// Executions are the effect rows ordered by effectIndex (set on reads that carry them).
	Executions *[]Execution `json:"executions,omitempty"`
	// TargetChanged maps a target issue id to true when it moved since the snapshot (list only).
	TargetChanged *map[string]bool `json:"targetChanged,omitempty"`

	// Stored but not shown: the raw signed material and bookkeeping.
	rawOptions, rawSnapshots json.RawMessage
	payloadHash              string
	decideKey                *string
	dismissed                bool
}

const decisionCols = `id, company_id, bundle_id, origin_agent_id, origin_issue_id, origin_run_id, rule_key, title, body, options,
	inputs, status, execution_status, chosen_option_id, input_values, decided_by_user_id, decided_at, expires_at, idempotency_key,
	signed_spec, target_snapshots, continuation_policy, metadata, created_at, updated_at, payload_hash, decide_idempotency_key,
	dismissed`

// scanDecision scans one row of decisionCols.
func scanDecision(row pgx.Row) (*Decision, error) {
	var d Decision
	var inputs, values, meta []byte
	err := row.Scan(&d.ID, &d.CompanyID, &d.BundleID, &d.OriginAgentID, &d.OriginIssueID, &d.OriginRunID, &d.RuleKey, &d.Title,
		&d.Body, &d.rawOptions, &inputs, &d.Status, &d.ExecutionStatus, &d.ChosenOptionID, &values, &d.DecidedByUserID,
		&d.DecidedAt, &d.ExpiresAt, &d.IdempotencyKey, &d.SignedSpec, &d.rawSnapshots, &d.ContinuationPolicy, &meta, &d.CreatedAt,
		&d.UpdatedAt, &d.payloadHash, &d.decideKey, &d.dismissed)
	if err != nil {
		return nil, err
	}
	// A tampered row may not decode: it is still returned, and signature verification
	// refuses it before anything runs.
	_ = json.Unmarshal(d.rawOptions, &d.Options)
	_ = json.Unmarshal(d.rawSnapshots, &d.TargetSnapshots)
	if len(inputs) > 0 {
		if err := json.Unmarshal(inputs, &d.Inputs); err != nil {
			return nil, fmt.Errorf("error reading decision inputs: %w", err)
		}
	}
	if len(values) > 0 {
		if err := json.Unmarshal(values, &d.InputValues); err != nil {
			return nil, fmt.Errorf("error reading decision input values: %w", err)
		}
	}
	d.Metadata = map[string]any{}
	if len(meta) > 0 {
		if err := json.Unmarshal(meta, &d.Metadata); err != nil {
			return nil, fmt.Errorf("error reading decision metadata: %w", err)
		}
	}
	if d.Options == nil {
		d.Options = []Option{}
	}
	return &d, nil
}

// decisionGet loads a decision by id (nil when missing); forUpdate locks the row.
func decisionGet(ctx context.Context, q querier, id string, forUpdate bool) (*Decision, error) {
	sql := `SELECT ` + decisionCols + ` FROM decisions WHERE id = $1`
	if forUpdate {
		sql += ` FOR UPDATE`
	}
	d, err := scanDecision(q.QueryRow(ctx, sql, id))
	if err == pgx.ErrNoRows {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("error loading decision %s: %w", id, err)
	}
	return d, nil
}

// executionsList loads the execution rows of decisions, by decision id, ordered by effectIndex.
func executionsList(ctx context.Context, q querier, ids []string) (map[string][]Execution, error) {
	out := map[string][]Execution{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := q.Query(ctx, `SELECT decision_id, effect_index, effect_type, target_issue_id, status, result, error,
		activity_log_id, executed_at FROM decision_effect_executions WHERE decision_id = ANY($1) ORDER BY decision_id, effect_index`, ids)
	if err != nil {
		return nil, fmt.Errorf("error listing executions: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var e Execution
		if err := rows.Scan(&id, &e.EffectIndex, &e.EffectType, &e.TargetIssueID, &e.Status, &e.Result, &e.Error, &e.ActivityLogID,
			&e.ExecutedAt); err != nil {
			return nil, fmt.Errorf("error reading execution: %w", err)
		}
		out[id] = append(out[id], e)
	}
	return out, rows.Err()
}

// withExecutions sets d.Executions from the store (an empty list when none).
func withExecutions(ctx context.Context, q querier, d *Decision) error {
	m, err := executionsList(ctx, q, []string{d.ID})
	if err != nil {
		return err
	}
	ex := m[d.ID]
	if ex == nil {
		ex = []Execution{}
	}
	d.Executions = &ex
	return nil
}

// nowUTC is the wall clock.
func nowUTC() time.Time { return time.Now().UTC() }
