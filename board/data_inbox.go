package board

import (
	"encoding/json"
	"time"
)

// The shapes of the inbox pages: approvals (the work owner), decisions (the decisions
// extension), join requests and inbox dismissals (the kernel).

// approval is an approval of GET /api/companies/{companyId}/approvals and GET /api/approvals/{id}.
type approval struct {
	ID                 string          `json:"id"`
	CompanyID          string          `json:"companyId"`
	Type               string          `json:"type"`
	RequestedByAgentID *string         `json:"requestedByAgentId"`
	RequestedByUserID  *string         `json:"requestedByUserId"`
	Status             string          `json:"status"`
	Payload            json.RawMessage `json:"payload"`
	DecisionNote       *string         `json:"decisionNote"`
	DecidedByUserID    *string         `json:"decidedByUserId"`
	DecidedAt          *time.Time      `json:"decidedAt"`
	CreatedAt          time.Time       `json:"createdAt"`
	UpdatedAt          time.Time       `json:"updatedAt"`
	IssueIDs           []string        `json:"issueIds"`
}

// approvalComment is a comment of GET /api/approvals/{id}/comments.
type approvalComment struct {
	ID            string    `json:"id"`
	AuthorAgentID *string   `json:"authorAgentId"`
	AuthorUserID  *string   `json:"authorUserId"`
	Body          string    `json:"body"`
	CreatedAt     time.Time `json:"createdAt"`
}

// decisionOption is one option of a decision.
type decisionOption struct {
	ID          string  `json:"id"`
	Label       string  `json:"label"`
	Description *string `json:"description"`
	Style       string  `json:"style"`
	Effects     []struct {
		Type          string `json:"type"`
		TargetIssueID string `json:"targetIssueId"`
	} `json:"effects"`
}

// decisionInput is a value the deciding user supplies.
type decisionInput struct {
	ID          string  `json:"id"`
	Label       string  `json:"label"`
	Placeholder *string `json:"placeholder"`
	Required    bool    `json:"required"`
	MaxLength   *int    `json:"maxLength"`
}

// decisionExecution is one effect's execution row.
type decisionExecution struct {
	EffectIndex   int        `json:"effectIndex"`
	EffectType    string     `json:"effectType"`
	TargetIssueID *string    `json:"targetIssueId"`
	Status        string     `json:"status"`
	Error         *string    `json:"error"`
	ExecutedAt    *time.Time `json:"executedAt"`
}

// decision is a decision of GET /api/companies/{companyId}/decisions and GET /api/decisions/{id}.
type decision struct {
	ID              string              `json:"id"`
	CompanyID       string              `json:"companyId"`
	OriginAgentID   string              `json:"originAgentId"`
	OriginIssueID   string              `json:"originIssueId"`
	Title           string              `json:"title"`
	Body            string              `json:"body"`
	Options         []decisionOption    `json:"options"`
	Inputs          []decisionInput     `json:"inputs"`
	Status          string              `json:"status"`
	ExecutionStatus *string             `json:"executionStatus"`
	ChosenOptionID  *string             `json:"chosenOptionId"`
	InputValues     map[string]string   `json:"inputValues"`
	DecidedByUserID *string             `json:"decidedByUserId"`
	DecidedAt       *time.Time          `json:"decidedAt"`
	ExpiresAt       time.Time           `json:"expiresAt"`
	CreatedAt       time.Time           `json:"createdAt"`
	Executions      []decisionExecution `json:"executions"`
	TargetChanged   map[string]bool     `json:"targetChanged"`
}

// inboxDismissal is an entry of GET /api/companies/{companyId}/inbox-dismissals.
type inboxDismissal struct {
	ItemKey      string     `json:"itemKey"`
	Kind         string     `json:"kind"`
	SnoozedUntil *time.Time `json:"snoozedUntil"`
}

// sidebarBadges is GET /api/companies/{companyId}/sidebar-badges.
type sidebarBadges struct {
	Inbox        int64 `json:"inbox"`
	Approvals    int64 `json:"approvals"`
	FailedRuns   int64 `json:"failedRuns"`
	JoinRequests int64 `json:"joinRequests"`
}

// historyEntry is an activity entry shown as an item's history.
type historyEntry struct {
	ID        string    `json:"id"`
	ActorType string    `json:"actorType"`
	ActorID   string    `json:"actorId"`
	Action    string    `json:"action"`
	AgentID   *string   `json:"agentId"`
	CreatedAt time.Time `json:"createdAt"`
}
