package board

import "time"

// statusCard is a hydrated card of GET /api/companies/{companyId}/status-cards.
type statusCard struct {
	ID                 string     `json:"id"`
	CompanyID          string     `json:"companyId"`
	CreatedByUserID    *string    `json:"createdByUserId"`
	CreatedByAgentID   *string    `json:"createdByAgentId"`
	Title              *string    `json:"title"`
	TitlePinned        bool       `json:"titlePinned"`
	InterestPrompt     string     `json:"interestPrompt"`
	AgentID            *string    `json:"agentId"`
	State              string     `json:"state"`
	PendingChangeCount int        `json:"pendingChangeCount"`
	GeneratingIssueID  *string    `json:"generatingIssueId"`
	FailureReason      *string    `json:"failureReason"`
	ArchivedAt         *time.Time `json:"archivedAt"`
	LastGeneratedAt    *time.Time `json:"lastGeneratedAt"`
	UpdatedAt          time.Time  `json:"updatedAt"`
	SummaryBody        *string    `json:"summaryBody"`
	WatchedIssueCount  *int       `json:"watchedIssueCount"`
	Warning            string     `json:"warning"`
}
