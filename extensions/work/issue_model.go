package work

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/uptrace/bun"
)

// Issue statuses.
const (
	StatusBacklog    = "backlog"
	StatusTodo       = "todo"
	StatusInProgress = "in_progress"
	StatusInReview   = "in_review"
	StatusBlocked    = "blocked"
	StatusDone       = "done"
	StatusCancelled  = "cancelled"
)

// Issue is a row of ext_work.issues and its API shape.
type Issue struct {
	bun.BaseModel `bun:"table:issues"`

	ID                    string          `bun:"id,pk,type:uuid" json:"id"`
	CompanyID             string          `bun:"company_id,type:uuid" json:"companyId"`
	ProjectID             *string         `bun:"project_id,type:uuid" json:"projectId"`
	ProjectWorkspaceID    *string         `bun:"project_workspace_id,type:uuid" json:"projectWorkspaceId"`
	GoalID                *string         `bun:"goal_id,type:uuid" json:"goalId"`
	ParentID              *string         `bun:"parent_id,type:uuid" json:"parentId"`
	Title                 string          `bun:"title" json:"title"`
	Description           *string         `bun:"description" json:"description"`
	Status                string          `bun:"status" json:"status"`
	WorkMode              string          `bun:"work_mode" json:"workMode"`
	Priority              string          `bun:"priority" json:"priority"`
	ReviewPolicy          *string         `bun:"review_policy" json:"reviewPolicy"`
	AssigneeAgentID       *string         `bun:"assignee_agent_id,type:uuid" json:"assigneeAgentId"`
	AssigneeUserID        *string         `bun:"assignee_user_id" json:"assigneeUserId"`
	CheckoutRunID         *string         `bun:"checkout_run_id" json:"checkoutRunId"`
	ExecutionRunID        *string         `bun:"execution_run_id" json:"executionRunId"`
	ExecutionAgentNameKey *string         `bun:"execution_agent_name_key" json:"executionAgentNameKey"`
	ExecutionLockedAt     *time.Time      `bun:"execution_locked_at" json:"executionLockedAt"`
	CreatedByAgentID      *string         `bun:"created_by_agent_id,type:uuid" json:"createdByAgentId"`
	CreatedByUserID       *string         `bun:"created_by_user_id" json:"createdByUserId"`
	ResponsibleUserID     *string         `bun:"responsible_user_id" json:"responsibleUserId"`
	IssueNumber           int64           `bun:"issue_number" json:"issueNumber"`
	Identifier            string          `bun:"identifier" json:"identifier"`
	OriginKind            string          `bun:"origin_kind" json:"originKind"`
	OriginID              *string         `bun:"origin_id" json:"originId"`
	OriginRunID           *string         `bun:"origin_run_id" json:"originRunId"`
	OriginFingerprint     *string         `bun:"origin_fingerprint" json:"originFingerprint"`
	RequestDepth          int             `bun:"request_depth" json:"requestDepth"`
	BillingCode           *string         `bun:"billing_code" json:"billingCode"`
	UnblockDescriptor     json.RawMessage `bun:"unblock_descriptor,type:jsonb,nullzero" json:"unblockDescriptor"`
	IdempotencyKey        *string         `bun:"idempotency_key" json:"-"`
	StartedAt             *time.Time      `bun:"started_at" json:"startedAt"`
	CompletedAt           *time.Time      `bun:"completed_at" json:"completedAt"`
	CancelledAt           *time.Time      `bun:"cancelled_at" json:"cancelledAt"`
	HiddenAt              *time.Time      `bun:"hidden_at" json:"hiddenAt"`
	CreatedAt             time.Time       `bun:"created_at,nullzero,notnull,default:current_timestamp" json:"createdAt"`
	UpdatedAt             time.Time       `bun:"updated_at,nullzero,notnull,default:current_timestamp" json:"updatedAt"`
}

// issueGet loads an issue by UUID or identifier (such as ABC-12, case-insensitive).
// A missing issue is (nil, nil).
func (w *Work) issueGet(ctx context.Context, db bun.IDB, ref string) (*Issue, error) {
	if db == nil {
		db = w.db
	}
	iss := new(Issue)
	q := db.NewSelect().Model(iss)
	switch {
	case isUUID(ref):
		q = q.Where("id = ?", ref)
	case strings.Contains(ref, "-"):
		q = q.Where("upper(identifier) = upper(?)", ref)
	default:
		return nil, nil
	}
	if err := q.Scan(ctx); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, nil
		}
		return nil, fmt.Errorf("error reading issue %s: %w", ref, err)
	}
	return iss, nil
}

// issueByRef loads an issue a route names by UUID or identifier and checks the caller's
// company access: 404 "Issue not found" when missing, 403 for another company's issue.
func (w *Work) issueByRef(ctx context.Context, ref string) (*Issue, error) {
	iss, err := w.issueGet(ctx, nil, ref)
	if err != nil {
		return nil, err
	}
	if iss == nil {
		return nil, notFound("Issue not found")
	}
	if err := requireCompanyAccess(ctx, iss.CompanyID); err != nil {
		return nil, err
	}
	return iss, nil
}
