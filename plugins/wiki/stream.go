package main

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/keelhq/keel/sdk"
)

// Live streaming of a query session: while the maintainer's run works on the query's
// hidden issue, its output (the run's events, read through the agents owner) is forwarded
// on the session's channel as agent.event messages, as the run produces it; the answer
// itself still completes the session when the maintainer comments it (answerQuery).

const (
	// followPoll is how often a followed query asks for its run's new events.
	followPoll = 300 * time.Millisecond
	// followMax bounds how long a query session is followed.
	followMax = 15 * time.Minute
	// followMessageMax caps one forwarded message.
	followMessageMax = 6000
)

// runEvent is one event of agents.runEventsList.
type runEvent struct {
	Seq       int64           `json:"seq"`
	EventType string          `json:"eventType"`
	Stream    *string         `json:"stream"`
	Message   *string         `json:"message"`
	Payload   json.RawMessage `json:"payload"`
}

// followQuery starts following a query session's run in the background.
func (w *Wiki) followQuery(companyID, opID, issueID string) {
	ctx, cancel := context.WithTimeout(w.bg, followMax)
	go func() {
		defer cancel()
		if err := w.follow(ctx, companyID, opID, issueID); err != nil && ctx.Err() == nil {
			sdk.LoggerFrom(ctx).Warn("stopped following a query session's run", "operation", opID, "error", err)
		}
	}()
}

// follow waits for the run that takes the query's issue, then forwards its events until the
// run finishes and its last events are read (output after the answer included). A session
// answered before any run took its issue is not followed further. Subscribers get what is
// emitted after they connect: the stream has no replay.
func (w *Wiki) follow(ctx context.Context, companyID, opID, issueID string) error {
	channel := queryChannel(opID)
	runID, seq := "", int64(-1)
	tick := time.NewTicker(followPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		if runID == "" {
			var iss struct {
				ExecutionRunID *string `json:"executionRunId"`
				CheckoutRunID  *string `json:"checkoutRunId"`
			}
			if err := w.host.Call(ctx, "work.issues.get", sdk.SystemActor(), companyID, map[string]string{"id": issueID}, &iss); err != nil {
				return err
			}
			switch {
			case iss.ExecutionRunID != nil && sdk.IsUUID(*iss.ExecutionRunID):
				runID = *iss.ExecutionRunID
			case iss.CheckoutRunID != nil && sdk.IsUUID(*iss.CheckoutRunID):
				runID = *iss.CheckoutRunID
			default:
				if !w.sessionActive(ctx, opID) {
					return nil // answered (or failed) before a run took the issue
				}
				continue
			}
			if _, err := w.db.ExecContext(ctx, `UPDATE wiki_operations SET run_ids = run_ids || to_jsonb($2::text), updated_at = now()
				WHERE id = $1 AND NOT run_ids ? $2`, opID, runID); err != nil {
				return err
			}
		}
		var page struct {
			Finished bool       `json:"finished"`
			Events   []runEvent `json:"events"`
		}
		err := w.host.Call(ctx, "agents.runEventsList", sdk.SystemActor(), companyID, map[string]any{"runId": runID, "afterSeq": seq, "limit": 200}, &page)
		var e *sdk.Error
		if errors.As(err, &e) && e.Status == 404 {
			return nil
		}
		if err != nil {
			return err
		}
		for _, ev := range page.Events {
			seq = ev.Seq
			msg := ""
			if ev.Message != nil {
				msg = truncate(*ev.Message, followMessageMax)
			}
			stream := ""
			if ev.Stream != nil {
				stream = *ev.Stream
			}
			_ = w.host.EmitStream(ctx, channel, companyID, map[string]any{"type": "agent.event", "eventType": ev.EventType,
				"stream": stream, "message": msg, "payload": ev.Payload, "runId": runID, "seq": ev.Seq})
		}
		if len(page.Events) < 200 && page.Finished {
			return nil // the run is over and its last events are forwarded
		}
	}
}

// sessionActive reports whether a query session still waits for its answer.
func (w *Wiki) sessionActive(ctx context.Context, opID string) bool {
	var status string
	if err := w.db.QueryRowContext(ctx, `SELECT status FROM wiki_query_sessions WHERE id = $1`, opID).Scan(&status); err != nil {
		return false
	}
	return status == "active"
}
