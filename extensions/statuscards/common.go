package statuscards

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/google/uuid"

	"github.com/keelhq/keel/sdk"
)

// Error texts (spec part 1 "Errors"; the ones the spec leaves open are plain English).
const (
	msgCardNotFound        = "Status card not found"
	msgAgentsOwnCards      = "Agents can only manage status cards they authored"
	msgAgentWrongCompany   = "Agent cannot author status cards for this company"
	msgDryRunBoundary      = "Status-card dry-run is outside this actor's low-trust authorization boundary"
	msgSummarizerMissing   = "Summarizer built-in agent is not configured"
	msgAgentCardCap        = "Agents can author at most 20 status cards"
	msgAgentPromptTooLong  = "Agent-authored status card prompts cannot exceed 4000 characters"
	msgSummarizerCompany   = "Summarizer agent must belong to this company"
	msgArchivedNoCompile   = "Archived status cards cannot be compiled"
	msgArchivedNoRefresh   = "Archived status cards cannot be refreshed"
	msgCompileFirst        = "Compile the status-card query before refreshing it"
	msgAtLeastOneField     = "At least one field is required"
	msgDesignatedAgentOnly = "Only the card's designated agent may write it, from its generation task"
	msgNotGenerationTask   = "generationIssueId is not the card's current generation task"
	msgNoQueriesYet        = "Write the compiled queries before the summary"
)

// Limits (spec part 1 "Limits"; REFERENCE.md 5).
const (
	promptMax         = 20000
	agentPromptMax    = 4000
	titleMax          = 300
	agentCardCap      = 20
	queriesMax        = 10
	changeSummaryMax  = 2000
	summaryMax        = 200000
	modelMax          = 200
	mentionedMax      = 5000
	issueDescExcerpt  = 4000
	changesInDescMax  = 200
	builtInSummarizer = "summarizer"
)

// Codes of the built-in agent answers (spec part 2 "Built-in agents").
const (
	codeNotConfigured = "summarizer_not_configured"
	warningPaused     = "built_in_agent_paused"
)

// newID returns a time-ordered UUID.
func newID() string { return uuid.Must(uuid.NewV7()).String() }

// ptr returns a pointer to v.
func ptr[T any](v T) *T { return &v }

// deref returns *p or "".
func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// isAgent reports whether the actor is an agent.
func isAgent(a *sdk.Actor) bool { return a != nil && a.Type == "agent" }

// statusOf returns the HTTP status of an *sdk.Error, 0 otherwise.
func statusOf(err error) int {
	var e *sdk.Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// issueView is what the extension reads of an issue from the work owner.
type issueView struct {
	ID              string  `json:"id"`
	CompanyID       string  `json:"companyId"`
	Identifier      string  `json:"identifier"`
	Title           string  `json:"title"`
	Status          string  `json:"status"`
	AssigneeAgentID *string `json:"assigneeAgentId"`
}

// getIssue reads an issue of a company; nil when it does not exist.
func (x *StatusCards) getIssue(ctx context.Context, companyID, id string) (*issueView, error) {
	var iss issueView
	if err := x.host.Call(ctx, "work.issues.get", sdk.SystemActor(), companyID, map[string]string{"id": id}, &iss); err != nil {
		if s := statusOf(err); s == http.StatusNotFound || s == http.StatusBadRequest {
			return nil, nil
		}
		return nil, fmt.Errorf("error reading issue %s: %w", id, err)
	}
	return &iss, nil
}

// setIssueStatus moves an issue to a status as the system; a missing issue is not an error.
func (x *StatusCards) setIssueStatus(ctx context.Context, companyID, id, status string) error {
	err := x.host.Call(ctx, "work.issues.update", sdk.SystemActor(), companyID, map[string]string{"id": id, "status": status}, nil)
	if err != nil && statusOf(err) != http.StatusNotFound {
		return fmt.Errorf("error moving issue %s to %s: %w", id, status, err)
	}
	return nil
}

// activity appends an activity entry about a card; a failure is logged: the write it
// records has already happened.
func (x *StatusCards) activity(ctx context.Context, companyID, action, cardID string, details map[string]any) {
	actor := sdk.ActorFrom(ctx)
	err := x.host.LogActivity(ctx, &sdk.ActivityEntry{CompanyID: companyID, Actor: actor, Action: action,
		EntityType: "status_card", EntityID: cardID, Details: details})
	if err != nil {
		x.log.Warn("error appending activity", "action", action, "card", cardID, "error", err)
	}
}
