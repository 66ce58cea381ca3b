package agents

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/keelhq/keel/sdk"
)

// Provided method that lets another extension follow a run's output live (the wiki streams
// its maintainer's answer to a query session from it): the run's events after a sequence
// number, and whether the run has finished, so a poller knows when it has read everything.
func init() {
	addMethods(map[string]method{
		"runEventsList": {
			Description: "Read a run's events after a sequence number. Input: {runId, afterSeq (default -1), limit (1-500, default 200)}. " +
				"Output: {runId, status, finished (the run is over: no events follow those listed once a page comes back short), " +
				"events: [{seq, eventType, stream, level, message, payload, createdAt}]}; 404 \"Heartbeat run not found\" for a run " +
				"of another company.",
			Call: callRunEventsList,
		},
	})
}

// runEventsListMax bounds a page of runEventsList.
const runEventsListMax = 500

func callRunEventsList(a *Agents, ctx context.Context, call *sdk.MethodCall) (any, error) {
	in := struct {
		RunID    string `json:"runId"`
		AfterSeq *int64 `json:"afterSeq"`
		Limit    int    `json:"limit"`
	}{}
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	if in.Limit == 0 {
		in.Limit = 200
	}
	if in.Limit < 1 || in.Limit > runEventsListMax {
		return nil, invalid("limit", fmt.Sprintf("must be between 1 and %d", runEventsListMax))
	}
	after := int64(-1)
	if in.AfterSeq != nil {
		after = *in.AfterSeq
	}
	if !sdk.IsUUID(in.RunID) {
		return nil, notFound("Heartbeat run not found")
	}
	run, err := a.runGet(ctx, a.pool, in.RunID)
	if err != nil {
		return nil, err
	}
	if run == nil || call.CompanyID == "" || call.CompanyID != run.CompanyID {
		return nil, notFound("Heartbeat run not found")
	}
	rows, err := a.pool.Query(ctx, `SELECT seq, event_type, stream, level, message, payload, created_at
		FROM heartbeat_run_events WHERE run_id = $1 AND seq > $2 ORDER BY seq, id LIMIT $3`, run.ID, after, in.Limit)
	if err != nil {
		return nil, fmt.Errorf("error listing events of run %s: %w", run.ID, err)
	}
	defer rows.Close()
	events := []runEventView{}
	for rows.Next() {
		e := runEventView{RunID: run.ID, AgentID: run.AgentID}
		var payload []byte
		if err := rows.Scan(&e.Seq, &e.EventType, &e.Stream, &e.Level, &e.Message, &payload, &e.CreatedAt); err != nil {
			return nil, fmt.Errorf("error reading event of run %s: %w", run.ID, err)
		}
		e.Payload = json.RawMessage("null")
		if len(payload) > 0 {
			e.Payload = payload
		}
		events = append(events, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error listing events of run %s: %w", run.ID, err)
	}
	return map[string]any{"runId": run.ID, "status": run.Status, "finished": run.FinishedAt != nil, "events": events}, nil
}
