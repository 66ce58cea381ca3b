package statuscards

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/keelhq/keel/sdk"
)

// The scheduler. tick(ctx, now) is all of it: it claims every live card whose nextEvalAt is
// due at now and evaluates it at now. A manifest interval job (River periodic work, inserted
// only by the elected leader node) calls it with the wall clock; statuscards.tick calls it
// with any instant, so tests run days of policy in milliseconds.
//
// Exactly once: the claim is a conditional UPDATE … WHERE id = $1 AND next_eval_at = $old,
// so of two nodes evaluating at once only one evaluates a card, and the generation itself is
// claimed once more on the card (generating_entry_id), so the same update is never generated
// twice.
//
// Evaluation of an interval or reactive card at now, in order:
//  1. a generation in flight: look again in a minute;
//  2. outside activeHours: state paused_hours until the window opens (changes batch into
//     the one update made when it does);
//  3. today's tokens (the costs owner's events of the card's generation tasks since midnight
//     UTC) at or over dailyTokenCap: state paused_budget until the next UTC day;
//  4. not compiled yet: nothing to do;
//  5. diff the watched set against the fingerprint; the changes the triggers count decide;
//  6. reactive: no counted change → done (next sweep in an hour); maxUpdatesPerHour updates
//     started in the last hour → wait until the oldest is an hour old; else queue an update;
//     interval: queue an update when a change counts, then wait one interval.

const jobEvaluate = "evaluate"

// Scheduler timings.
const (
	evaluateEvery  = "15s"
	claimLease     = time.Minute
	busyRetry      = time.Minute
	reactiveSweep  = time.Hour
	tickBatch      = 100
	tickMaxBatches = 50
)

func init() {
	addJobs(sdk.Job{Key: jobEvaluate, Every: evaluateEvery,
		Description: "Evaluate due interval and reactive status cards (each card claimed once across nodes): active hours, " +
			"daily token cap, debounce, hourly cap and change detection; queue updates."})
	addMethods(map[string]method{
		"tick": {
			Description: "Evaluate due status cards at an instant (kernel and system callers only). Input {now: RFC 3339, " +
				"default the wall clock; companyId?: only that company's cards}. Output {now, evaluated: [{cardId, outcome, state, kind?, changes}]}.",
			Call: (*StatusCards).methodTick,
		},
	})
}

// Evaluation is what the scheduler did with one card.
type Evaluation struct {
	CardID string `json:"cardId"`
	// Outcome is enqueued, no_changes, generating, paused_hours, paused_budget, capped,
	// not_compiled or error.
	Outcome string `json:"outcome"`
	State   string `json:"state"`
	Kind    string `json:"kind,omitempty"`
	Changes int    `json:"changes"`
	Error   string `json:"error,omitempty"`
}

// TickResult is what one tick did.
type TickResult struct {
	Now       time.Time    `json:"now"`
	Evaluated []Evaluation `json:"evaluated"`
}

func (x *StatusCards) methodTick(ctx context.Context, call *sdk.MethodCall) (any, error) {
	if call.Caller != "kernel" && (call.Actor == nil || call.Actor.Type != "system") {
		return nil, sdk.Forbidden("Only the kernel or the system may evaluate status cards")
	}
	var in struct {
		Now       string `json:"now"`
		CompanyID string `json:"companyId"`
	}
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	now := time.Now()
	if s := strings.TrimSpace(in.Now); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return nil, sdk.Invalid("now", "must be an RFC 3339 time")
		}
		now = t
	}
	if in.CompanyID != "" && !sdk.IsUUID(in.CompanyID) {
		return nil, sdk.Invalid("companyId", "must be a UUID")
	}
	return x.tickCompany(ctx, now, in.CompanyID)
}

// tick evaluates every card due at now.
func (x *StatusCards) tick(ctx context.Context, now time.Time) (*TickResult, error) {
	return x.tickCompany(ctx, now, "")
}

// tickCompany evaluates the cards due at now, of one company when companyID is set.
func (x *StatusCards) tickCompany(ctx context.Context, now time.Time, companyID string) (*TickResult, error) {
	now = now.UTC().Truncate(time.Microsecond)
	res := &TickResult{Now: now, Evaluated: []Evaluation{}}
	for range tickMaxBatches {
		rows, err := x.pool.Query(ctx, `SELECT `+cardCols+` FROM status_cards WHERE next_eval_at <= $1 AND archived_at IS NULL
			AND ($3 = '' OR company_id::text = $3) ORDER BY next_eval_at, id LIMIT $2`, now, tickBatch, companyID)
		if err != nil {
			return res, fmt.Errorf("error listing due status cards: %w", err)
		}
		due, err := scanCards(rows)
		if err != nil {
			return res, err
		}
		for _, c := range due {
			// Claim: move nextEvalAt past now; another node's claim makes this one a no-op.
			tag, err := x.pool.Exec(ctx, `UPDATE status_cards SET next_eval_at = $3 WHERE id = $1 AND next_eval_at = $2`,
				c.ID, c.NextEvalAt, now.Add(claimLease))
			if err != nil {
				return res, fmt.Errorf("error claiming status card %s: %w", c.ID, err)
			}
			if tag.RowsAffected() == 0 {
				continue
			}
			ev := x.evaluate(ctx, c, now)
			if ev.Outcome == "error" {
				x.log.Warn("error evaluating status card", "card", c.ID, "error", ev.Error)
			}
			res.Evaluated = append(res.Evaluated, ev)
		}
		if len(due) < tickBatch {
			break
		}
	}
	return res, nil
}

// schedule records an evaluation's state and next evaluation.
func (x *StatusCards) schedule(ctx context.Context, c *Card, state string, next *time.Time, clearDirty bool) error {
	if c.RefreshPolicy.Mode == modeManual {
		next = nil
	}
	_, err := x.pool.Exec(ctx, `UPDATE status_cards SET state = $2, next_eval_at = $3,
		dirty_at = CASE WHEN $4 THEN NULL ELSE dirty_at END,
		updated_at = CASE WHEN state <> $2 THEN clock_timestamp() ELSE updated_at END
		WHERE id = $1 AND archived_at IS NULL`, c.ID, state, next, clearDirty)
	if err != nil {
		return fmt.Errorf("error scheduling status card %s: %w", c.ID, err)
	}
	return nil
}

// evaluate applies a card's refresh policy at now.
func (x *StatusCards) evaluate(ctx context.Context, c *Card, now time.Time) Evaluation {
	ev := Evaluation{CardID: c.ID, State: c.State}
	fail := func(err error) Evaluation {
		ev.Outcome, ev.Error = "error", err.Error()
		// Look again after a retry delay rather than never.
		_ = x.schedule(ctx, c, c.State, ptr(now.Add(busyRetry)), false)
		return ev
	}
	p := c.RefreshPolicy
	regular := nextEval(p, now)
	if p.Mode == modeReactive {
		regular = ptr(now.Add(reactiveSweep))
	}
	if c.generatingEntryID != nil {
		ev.Outcome = "generating"
		if err := x.schedule(ctx, c, c.State, ptr(now.Add(busyRetry)), false); err != nil {
			return fail(err)
		}
		return ev
	}
	if p.ActiveHours != nil {
		if in, opens := p.ActiveHours.inWindow(now); !in {
			ev.Outcome, ev.State = "paused_hours", statePausedHours
			if err := x.schedule(ctx, c, statePausedHours, &opens, false); err != nil {
				return fail(err)
			}
			return ev
		}
	}
	today, err := x.today(ctx, c, now)
	if err != nil {
		return fail(err)
	}
	if today.InputTokens+today.OutputTokens >= int64(p.DailyTokenCap) {
		ev.Outcome, ev.State = "paused_budget", statePausedBudget
		if err := x.schedule(ctx, c, statePausedBudget, ptr(midnightUTC(now).Add(24*time.Hour)), false); err != nil {
			return fail(err)
		}
		return ev
	}
	state := c.State
	if state == statePausedBudget || state == statePausedHours {
		state = liveState(c)
	}
	c.State = state
	ev.State = state
	if c.QueryVersion == 0 {
		ev.Outcome = "not_compiled"
		if err := x.schedule(ctx, c, state, regular, false); err != nil {
			return fail(err)
		}
		return ev
	}
	fp, err := x.watch(ctx, c)
	if err != nil {
		return fail(err)
	}
	changes := diff(c.Fingerprint, fp)
	counted := p.Triggers.relevant(changes)
	kind := updateKind(c, false)
	firstSummary := kind == kindFull && (c.DocumentID == nil || c.LastUpdateRunKind == nil)
	if _, err := x.pool.Exec(ctx, `UPDATE status_cards SET pending_change_count = $2,
		last_change_at = CASE WHEN $2 > 0 AND pending_change_count <> $2 THEN $3 ELSE last_change_at END WHERE id = $1`,
		c.ID, len(counted), now); err != nil {
		return fail(fmt.Errorf("error recording the changes of status card %s: %w", c.ID, err))
	}
	ev.Changes = len(counted)
	if len(counted) == 0 && !firstSummary {
		ev.Outcome = "no_changes"
		if err := x.schedule(ctx, c, state, regular, true); err != nil {
			return fail(err)
		}
		return ev
	}
	trigger := triggerInterval
	if p.Mode == modeReactive {
		trigger = triggerReactive
		var n int
		var oldest *time.Time
		if err := x.pool.QueryRow(ctx, `SELECT count(*), min(started_at) FROM status_card_updates WHERE card_id = $1
			AND trigger = 'reactive' AND kind <> 'compile' AND started_at > $2 AND started_at <= $3`,
			c.ID, now.Add(-time.Hour), now).Scan(&n, &oldest); err != nil {
			return fail(fmt.Errorf("error counting the updates of status card %s: %w", c.ID, err))
		}
		if n >= p.MaxUpdatesPerHour && oldest != nil {
			ev.Outcome = "capped"
			if err := x.schedule(ctx, c, state, ptr(oldest.Add(time.Hour)), false); err != nil {
				return fail(err)
			}
			return ev
		}
	}
	if err := x.schedule(ctx, c, state, regular, true); err != nil {
		return fail(err)
	}
	out, _, _, err := x.enqueue(ctx, c, &enqueueParams{kind: kind, trigger: trigger, changes: changes, fingerprint: fp, now: now})
	switch {
	case errors.Is(err, errAlreadyGenerating):
		ev.Outcome = "generating"
		return ev
	case err != nil:
		return fail(err)
	}
	ev.Outcome, ev.Kind, ev.State = "enqueued", kind, out.State
	return ev
}
