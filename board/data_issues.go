package board

import (
	"encoding/json"
	"time"
)

// The shapes below are the parts of the work graph's and the activity log's JSON answers
// the issue pages show (the board by status, the issue detail's documents, work products,
// attachments and checkout, and the activity feed).

// issueDetail is GET /api/issues/{id}: the issue with its goal and ancestors.
type issueDetail struct {
	issue
	GoalID            *string      `json:"goalId"`
	CreatedAt         time.Time    `json:"createdAt"`
	ExecutionLockedAt *time.Time   `json:"executionLockedAt"`
	StartedAt         *time.Time   `json:"startedAt"`
	LabelIDs          []string     `json:"labelIds"`
	Ancestors         []issueBrief `json:"ancestors"`
}

// issueDocument is GET /api/issues/{id}/documents/{key}: a document with its latest body.
type issueDocument struct {
	ID                   string    `json:"id"`
	Key                  string    `json:"key"`
	Title                *string   `json:"title"`
	Format               string    `json:"format"`
	Body                 string    `json:"body"`
	LatestRevisionID     *string   `json:"latestRevisionId"`
	LatestRevisionNumber int       `json:"latestRevisionNumber"`
	Locked               bool      `json:"locked"`
	UpdatedAt            time.Time `json:"updatedAt"`
}

// documentRevision is an entry of GET /api/issues/{id}/documents/{key}/revisions.
type documentRevision struct {
	ID               string    `json:"id"`
	RevisionNumber   int       `json:"revisionNumber"`
	Title            *string   `json:"title"`
	Body             string    `json:"body"`
	ChangeSummary    *string   `json:"changeSummary"`
	CreatedByAgentID *string   `json:"createdByAgentId"`
	CreatedByUserID  *string   `json:"createdByUserId"`
	ActorAgentName   *string   `json:"actorAgentName"`
	CreatedAt        time.Time `json:"createdAt"`
}

// documentRevisions is GET /api/issues/{id}/documents/{key}/revisions.
type documentRevisions struct {
	Revisions []documentRevision `json:"revisions"`
}

// workProduct is an entry of GET /api/issues/{id}/work-products.
type workProduct struct {
	ID          string  `json:"id"`
	Type        string  `json:"type"`
	Provider    string  `json:"provider"`
	Title       string  `json:"title"`
	URL         *string `json:"url"`
	Status      string  `json:"status"`
	ReviewState string  `json:"reviewState"`
	IsPrimary   bool    `json:"isPrimary"`
	Summary     *string `json:"summary"`
}

// attachment is an entry of GET /api/issues/{id}/attachments.
type attachment struct {
	ID          string    `json:"id"`
	FileName    string    `json:"fileName"`
	ContentType string    `json:"contentType"`
	SizeBytes   int64     `json:"sizeBytes"`
	ContentPath string    `json:"contentPath"`
	CreatedAt   time.Time `json:"createdAt"`
}

// activityItem is an entry of GET /api/companies/{companyId}/activity, as the feed shows it.
type activityItem struct {
	ID         string          `json:"id"`
	ActorType  string          `json:"actorType"`
	ActorID    string          `json:"actorId"`
	Action     string          `json:"action"`
	EntityType string          `json:"entityType"`
	EntityID   string          `json:"entityId"`
	AgentID    *string         `json:"agentId"`
	RunID      *string         `json:"runId"`
	Details    json.RawMessage `json:"details"`
	CreatedAt  time.Time       `json:"createdAt"`
}
