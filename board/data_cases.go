package board

import (
	"encoding/json"
	"time"
)

// caseRow is a case of GET /api/companies/{companyId}/cases.
type caseRow struct {
	ID             string          `json:"id"`
	CompanyID      string          `json:"companyId"`
	Identifier     string          `json:"identifier"`
	CaseType       string          `json:"caseType"`
	Key            *string         `json:"key"`
	Title          string          `json:"title"`
	Summary        *string         `json:"summary"`
	Status         string          `json:"status"`
	Fields         json.RawMessage `json:"fields"`
	ProjectID      *string         `json:"projectId"`
	ParentCaseID   *string         `json:"parentCaseId"`
	CompletedAt    *time.Time      `json:"completedAt"`
	CreatedAt      time.Time       `json:"createdAt"`
	LastActivityAt time.Time       `json:"lastActivityAt"`
	// MatchesListFilters is false for an ancestor listed only for context (includeAncestors).
	MatchesListFilters *bool `json:"matchesListFilters"`
}

// caseDocument is a case document with its latest body.
type caseDocument struct {
	ID                   string  `json:"id"`
	Key                  string  `json:"key"`
	Title                *string `json:"title"`
	Format               string  `json:"format"`
	LatestBody           string  `json:"latestBody"`
	LatestRevisionID     *string `json:"latestRevisionId"`
	LatestRevisionNumber int     `json:"latestRevisionNumber"`
	Locked               bool    `json:"locked"`
}

// caseDetail is GET /api/cases/{id}.
type caseDetail struct {
	caseRow
	Parent *struct {
		ID         string `json:"id"`
		Identifier string `json:"identifier"`
		Title      string `json:"title"`
	} `json:"parent"`
	Labels     []label `json:"labels"`
	IssueLinks []struct {
		ID    string      `json:"id"`
		Role  string      `json:"role"`
		Issue *issueBrief `json:"issue"`
	} `json:"issueLinks"`
	Documents []struct {
		Key      string        `json:"key"`
		Document *caseDocument `json:"document"`
	} `json:"documents"`
	Attachments []struct {
		ID          string `json:"id"`
		FileName    string `json:"fileName"`
		ByteSize    int64  `json:"byteSize"`
		ContentPath string `json:"contentPath"`
	} `json:"attachments"`
}

// annotationComment is a comment of an annotation thread.
type annotationComment struct {
	ID               string    `json:"id"`
	Body             string    `json:"body"`
	CreatedByAgentID *string   `json:"createdByAgentId"`
	CreatedByUserID  *string   `json:"createdByUserId"`
	ActorAgentName   *string   `json:"actorAgentName"`
	CreatedAt        time.Time `json:"createdAt"`
}

// annotationThread is an annotation thread of a case document.
type annotationThread struct {
	ID          string `json:"id"`
	AnchorState string `json:"anchorState"`
	Anchor      struct {
		Quote string `json:"quote"`
	} `json:"anchor"`
	Status    string              `json:"status"`
	CreatedAt time.Time           `json:"createdAt"`
	Comments  []annotationComment `json:"comments"`
}

// caseEvent is an entry of a case's timeline.
type caseEvent struct {
	ID             string          `json:"id"`
	Kind           string          `json:"kind"`
	ActorType      string          `json:"actorType"`
	ActorUserID    *string         `json:"actorUserId"`
	ActorAgentName *string         `json:"actorAgentName"`
	Payload        json.RawMessage `json:"payload"`
	CreatedAt      time.Time       `json:"createdAt"`
	Issue          *issueBrief     `json:"issue"`
}
