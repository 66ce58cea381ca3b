package cases

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelhq/keel/sdk"
)

// Case statuses (spec part 2 "Case status").
const (
	StatusDraft      = "draft"
	StatusInProgress = "in_progress"
	StatusInReview   = "in_review"
	StatusApproved   = "approved"
	StatusDone       = "done"
	StatusCancelled  = "cancelled"
)

// statuses are the valid case statuses.
var statuses = map[string]bool{StatusDraft: true, StatusInProgress: true, StatusInReview: true, StatusApproved: true,
	StatusDone: true, StatusCancelled: true}

// terminal reports whether a status stamps completedAt.
func terminal(status string) bool { return status == StatusDone || status == StatusCancelled }

// Link roles.
var linkRoles = map[string]bool{"origin": true, "work": true, "reference": true}

// Case is a row of ext_cases.cases and its API shape.
type Case struct {
	ID               string          `json:"id"`
	CompanyID        string          `json:"companyId"`
	ProjectID        *string         `json:"projectId"`
	CaseNumber       int64           `json:"caseNumber"`
	Identifier       string          `json:"identifier"`
	CaseType         string          `json:"caseType"`
	Key              *string         `json:"key"`
	Title            string          `json:"title"`
	Summary          *string         `json:"summary"`
	Status           string          `json:"status"`
	Fields           json.RawMessage `json:"fields"`
	ParentCaseID     *string         `json:"parentCaseId"`
	CreatedByAgentID *string         `json:"createdByAgentId"`
	CreatedByUserID  *string         `json:"createdByUserId"`
	CreatedByRunID   *string         `json:"createdByRunId"`
	CompletedAt      *time.Time      `json:"completedAt"`
	CreatedAt        time.Time       `json:"createdAt"`
	UpdatedAt        time.Time       `json:"updatedAt"`
	LastActivityAt   time.Time       `json:"lastActivityAt"`
}

// caseCols are the columns scanCase reads, in order.
const caseCols = `id, company_id, project_id, case_number, identifier, case_type, key, title, summary, status, fields,
	parent_case_id, created_by_agent_id, created_by_user_id, created_by_run_id, completed_at, created_at, updated_at, last_activity_at`

// scanCase reads one case row.
func scanCase(row pgx.Row) (*Case, error) {
	c := new(Case)
	err := row.Scan(&c.ID, &c.CompanyID, &c.ProjectID, &c.CaseNumber, &c.Identifier, &c.CaseType, &c.Key, &c.Title, &c.Summary,
		&c.Status, &c.Fields, &c.ParentCaseID, &c.CreatedByAgentID, &c.CreatedByUserID, &c.CreatedByRunID, &c.CompletedAt,
		&c.CreatedAt, &c.UpdatedAt, &c.LastActivityAt)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// IssueLink is a row of ext_cases.case_issue_links and its API shape.
type IssueLink struct {
	ID               string        `json:"id"`
	CompanyID        string        `json:"companyId"`
	CaseID           string        `json:"caseId"`
	IssueID          string        `json:"issueId"`
	Role             string        `json:"role"`
	CreatedByAgentID *string       `json:"createdByAgentId"`
	CreatedByUserID  *string       `json:"createdByUserId"`
	CreatedByRunID   *string       `json:"createdByRunId"`
	CreatedAt        time.Time     `json:"createdAt"`
	UpdatedAt        time.Time     `json:"updatedAt"`
	Issue            *IssueSummary `json:"issue,omitempty"`
}

// linkCols are the columns scanLink reads, in order.
const linkCols = `id, company_id, case_id, issue_id, role, created_by_agent_id, created_by_user_id, created_by_run_id, created_at, updated_at`

// scanLink reads one link row.
func scanLink(row pgx.Row) (*IssueLink, error) {
	l := new(IssueLink)
	if err := row.Scan(&l.ID, &l.CompanyID, &l.CaseID, &l.IssueID, &l.Role, &l.CreatedByAgentID, &l.CreatedByUserID,
		&l.CreatedByRunID, &l.CreatedAt, &l.UpdatedAt); err != nil {
		return nil, err
	}
	return l, nil
}

// querier is a pool or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// caseByRef loads a case by UUID or identifier (case-insensitively) that the caller may
// reach: a case of another company is "Case not found", like a missing one; a viewer's
// write is refused (403). In a transaction the row is locked.
func (x *Cases) caseByRef(ctx context.Context, q querier, ref string, forUpdate bool) (*Case, error) {
	ref = strings.TrimSpace(ref)
	lock := ""
	if forUpdate {
		lock = " FOR UPDATE"
	}
	var row pgx.Row
	switch {
	case isUUID(strings.ToLower(ref)):
		row = q.QueryRow(ctx, `SELECT `+caseCols+` FROM cases WHERE id = $1`+lock, strings.ToLower(ref))
	case ref != "" && len(ref) <= 200:
		row = q.QueryRow(ctx, `SELECT `+caseCols+` FROM cases WHERE lower(identifier) = lower($1)`+lock, ref)
	default:
		return nil, notFound(msgCaseNotFound)
	}
	c, err := scanCase(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound(msgCaseNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("error reading case %s: %w", ref, err)
	}
	if !sdk.CanAccessCompany(sdk.ActorFrom(ctx), c.CompanyID) {
		return nil, notFound(msgCaseNotFound)
	}
	if err := sdk.RequireCompanyAccess(ctx, c.CompanyID); err != nil {
		return nil, err
	}
	return c, nil
}

// inTx runs fn in a transaction of the pool.
func (x *Cases) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, x.pool, fn)
}
