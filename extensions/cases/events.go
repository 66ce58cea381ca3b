package cases

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelhq/keel/sdk"
)

// Case events limits (spec part 2 "Limits").
const (
	eventsDefault = 100
	eventsMax     = 500
)

func init() {
	addRoutes(route{Method: http.MethodGet, Path: "/api/cases/{id}/events", Response: new([]*Event),
		Summary: "List a case's timeline events, newest first (limit 1-500, default 100), with actorAgentName and issue",
		Handle:  (*Cases).handleEvents})
}

// Event is a case timeline event and its API shape.
type Event struct {
	ID             string          `json:"id"`
	CompanyID      string          `json:"companyId"`
	CaseID         string          `json:"caseId"`
	Kind           string          `json:"kind"`
	ActorType      string          `json:"actorType"`
	ActorUserID    *string         `json:"actorUserId"`
	ActorAgentID   *string         `json:"actorAgentId"`
	RunID          *string         `json:"runId"`
	Payload        json.RawMessage `json:"payload"`
	CreatedAt      time.Time       `json:"createdAt"`
	UpdatedAt      time.Time       `json:"updatedAt"`
	ActorAgentName *string         `json:"actorAgentName"`
	Issue          *IssueSummary   `json:"issue"`
	issueID        *string
}

func (x *Cases) handleEvents(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	limit, _, err := sdk.Page(r, eventsDefault, eventsMax)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	c, err := x.caseByRef(ctx, x.pool, r.PathValue("id"), false)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	rows, err := x.pool.Query(ctx, `SELECT id, company_id, case_id, kind, actor_type, actor_user_id, actor_agent_id, run_id, issue_id,
		payload, created_at, updated_at FROM case_events WHERE case_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2`, c.ID, limit)
	if err != nil {
		x.writeErr(rw, fmt.Errorf("error listing events of case %s: %w", c.ID, err))
		return
	}
	events, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*Event, error) {
		e := new(Event)
		err := row.Scan(&e.ID, &e.CompanyID, &e.CaseID, &e.Kind, &e.ActorType, &e.ActorUserID, &e.ActorAgentID, &e.RunID, &e.issueID,
			&e.Payload, &e.CreatedAt, &e.UpdatedAt)
		return e, err
	})
	if err != nil {
		x.writeErr(rw, fmt.Errorf("error listing events of case %s: %w", c.ID, err))
		return
	}
	var agents, issues []string
	for _, e := range events {
		agents = append(agents, deref(e.ActorAgentID))
		issues = append(issues, deref(e.issueID))
	}
	names := x.agentNames(ctx, agents)
	briefs := x.issueSummaries(ctx, c.CompanyID, issues)
	for _, e := range events {
		if n := names[deref(e.ActorAgentID)]; n != "" {
			e.ActorAgentName = ptr(n)
		}
		if e.issueID != nil {
			e.Issue = briefs[*e.issueID]
		}
	}
	if events == nil {
		events = []*Event{}
	}
	sdk.WriteJSON(rw, http.StatusOK, events)
}
