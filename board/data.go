package board

import (
	"encoding/json"
	"time"
)

// The shapes below are the parts of the API's JSON answers the pages show; the API owns
// the full shapes (spec part 1 and part 2).

// company is an entry of GET /api/companies.
type company struct {
	ID          string  `json:"id"`
	Name        string  `json:"name"`
	Description *string `json:"description"`
	Status      string  `json:"status"`
	IssuePrefix string  `json:"issuePrefix"`
}

// sessionUser is the user of GET /api/auth/get-session.
type sessionUser struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Email string `json:"email"`
}

// session is GET /api/auth/get-session (null without a session).
type session struct {
	Session *struct {
		ID string `json:"id"`
	} `json:"session"`
	User *sessionUser `json:"user"`
}

// health is the part of GET /api/health the sign-in page reads.
type health struct {
	DeploymentMode  string `json:"deploymentMode"`
	BootstrapStatus string `json:"bootstrapStatus"`
}

// issueBrief is a blocker or blocked issue.
type issueBrief struct {
	ID         string `json:"id"`
	Identifier string `json:"identifier"`
	Title      string `json:"title"`
	Status     string `json:"status"`
}

// label is an issue label.
type label struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Color string `json:"color"`
}

// issue is an entry of the issue list and the issue detail.
type issue struct {
	ID              string       `json:"id"`
	CompanyID       string       `json:"companyId"`
	Identifier      string       `json:"identifier"`
	Title           string       `json:"title"`
	Description     *string      `json:"description"`
	Status          string       `json:"status"`
	Priority        string       `json:"priority"`
	AssigneeAgentID *string      `json:"assigneeAgentId"`
	AssigneeUserID  *string      `json:"assigneeUserId"`
	CheckoutRunID   *string      `json:"checkoutRunId"`
	ExecutionRunID  *string      `json:"executionRunId"`
	ProjectID       *string      `json:"projectId"`
	ParentID        *string      `json:"parentId"`
	UpdatedAt       time.Time    `json:"updatedAt"`
	Labels          []label      `json:"labels"`
	BlockedBy       []issueBrief `json:"blockedBy"`
	Blocks          []issueBrief `json:"blocks"`
}

// comment is an issue comment.
type comment struct {
	ID            string    `json:"id"`
	Body          string    `json:"body"`
	AuthorType    string    `json:"authorType"`
	AuthorAgentID *string   `json:"authorAgentId"`
	AuthorUserID  *string   `json:"authorUserId"`
	CreatedAt     time.Time `json:"createdAt"`
}

// document is an entry of an issue's documents.
type document struct {
	ID             string    `json:"id"`
	Key            string    `json:"key"`
	Title          *string   `json:"title"`
	Format         string    `json:"format"`
	RevisionNumber int       `json:"revisionNumber"`
	UpdatedAt      time.Time `json:"updatedAt"`
}

// agent is an entry of a company's agents.
type agent struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Role   string `json:"role"`
	Status string `json:"status"`
}

// named is any list entry with an id and a name (projects, goals).
type named struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Title string `json:"title"`
}

// Label returns the name, or the title for entries named by title.
func (n named) Label() string {
	if n.Name != "" {
		return n.Name
	}
	return n.Title
}

// activityEntry is an entry of a company's activity.
type activityEntry struct {
	ID        string          `json:"id"`
	Action    string          `json:"action"`
	RunID     *string         `json:"runId"`
	AgentID   *string         `json:"agentId"`
	Details   json.RawMessage `json:"details"`
	CreatedAt time.Time       `json:"createdAt"`
}

// run is a heartbeat run.
type run struct {
	ID        string     `json:"id"`
	AgentID   string     `json:"agentId"`
	Status    string     `json:"status"`
	CreatedAt time.Time  `json:"createdAt"`
	StartedAt *time.Time `json:"startedAt"`
}

// snapshot is GET /api/companies/{companyId}/dashboard.
type snapshot struct {
	Agents struct {
		Active  int64 `json:"active"`
		Running int64 `json:"running"`
		Paused  int64 `json:"paused"`
		Error   int64 `json:"error"`
	} `json:"agents"`
	Tasks struct {
		Open       int64 `json:"open"`
		InProgress int64 `json:"inProgress"`
		Blocked    int64 `json:"blocked"`
		Done       int64 `json:"done"`
	} `json:"tasks"`
	Costs struct {
		MonthSpendCents         int64   `json:"monthSpendCents"`
		MonthBudgetCents        int64   `json:"monthBudgetCents"`
		MonthUtilizationPercent float64 `json:"monthUtilizationPercent"`
	} `json:"costs"`
	PendingApprovals int64 `json:"pendingApprovals"`
	Budgets          struct {
		ActiveIncidents int64 `json:"activeIncidents"`
	} `json:"budgets"`
	RunActivity []struct {
		Date      string `json:"date"`
		Succeeded int64  `json:"succeeded"`
		Failed    int64  `json:"failed"`
		Recovered int64  `json:"recovered"`
		Other     int64  `json:"other"`
		Total     int64  `json:"total"`
	} `json:"runActivity"`
}
