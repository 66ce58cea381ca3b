package statuscards

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelhq/keel/sdk"
)

// inFlight reads the task of a card's in-flight generation: nil when none; blocked says the
// task is blocked, which does not count as in flight (a re-kick reopens it).
func (x *StatusCards) inFlight(ctx context.Context, c *Card) (*Entry, *issueView, error) {
	if c.generatingEntryID == nil {
		return nil, nil, nil
	}
	e, err := entryGet(ctx, x.pool, *c.generatingEntryID)
	if err != nil {
		return nil, nil, err
	}
	if c.GeneratingIssueID == nil {
		// Claimed a moment ago; its task is being created.
		return e, nil, nil
	}
	iss, err := x.getIssue(ctx, c.CompanyID, *c.GeneratingIssueID)
	if err != nil {
		return nil, nil, err
	}
	return e, iss, nil
}

// release fails a card's in-flight entry and lets go of it, keeping its task (to reopen it).
func (x *StatusCards) release(ctx context.Context, c *Card, reason string, now time.Time) error {
	return pgx.BeginFunc(ctx, x.pool, func(tx pgx.Tx) error {
		cur, err := cardForUpdate(ctx, tx, c.ID)
		if err != nil || cur == nil {
			return err
		}
		_, err = x.cancelGeneration(ctx, tx, cur, reason, now)
		return err
	})
}

func (x *StatusCards) handleRecompile(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ans, status, err := x.recompile(ctx, r.PathValue("id"))
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, status, ans)
}

func (x *StatusCards) recompile(ctx context.Context, id string) (*GenerationAnswer, int, error) {
	c, err := x.manageCard(ctx, id)
	if err != nil {
		return nil, 0, err
	}
	if c.ArchivedAt != nil {
		return nil, 0, sdk.Unprocessable(msgArchivedNoCompile)
	}
	now := x.now()
	e, iss, err := x.inFlight(ctx, c)
	if err != nil {
		return nil, 0, err
	}
	reuse := ""
	if e != nil {
		blocked := iss != nil && iss.Status == "blocked"
		samePrompt := e.Kind == kindCompile && deref(e.prompt) == c.InterestPrompt
		switch {
		case samePrompt && !blocked:
			x.hydrate(ctx, now, c)
			return &GenerationAnswer{Card: c, GeneratingIssue: iss, AlreadyGenerating: true}, http.StatusOK, nil
		case samePrompt && blocked:
			reuse = iss.ID
			err = x.release(ctx, c, "generation task blocked; reopened", now)
		default:
			var cancel string
			err = pgx.BeginFunc(ctx, x.pool, func(tx pgx.Tx) error {
				cur, err := cardForUpdate(ctx, tx, c.ID)
				if err != nil || cur == nil {
					return err
				}
				cancel, err = x.cancelGeneration(ctx, tx, cur, "superseded by a recompile", now)
				return err
			})
			if err == nil && cancel != "" {
				_ = x.setIssueStatus(ctx, c.CompanyID, cancel, "cancelled")
			}
		}
		if err != nil {
			return nil, 0, err
		}
		if c, err = cardGet(ctx, x.pool, c.ID); err != nil {
			return nil, 0, err
		}
	}
	out, task, warning, err := x.enqueue(ctx, c, &enqueueParams{kind: kindCompile, trigger: triggerManual, now: now, reuseIssueID: reuse})
	if errors.Is(err, errAlreadyGenerating) {
		if c, err = cardGet(ctx, x.pool, c.ID); err != nil {
			return nil, 0, err
		}
		_, iss, err := x.inFlight(ctx, c)
		if err != nil {
			return nil, 0, err
		}
		x.hydrate(ctx, now, c)
		return &GenerationAnswer{Card: c, GeneratingIssue: iss, AlreadyGenerating: true}, http.StatusOK, nil
	}
	if err != nil {
		return nil, 0, err
	}
	x.activity(ctx, c.CompanyID, "status_card.recompile_queued", c.ID, map[string]any{"generatingIssueId": task.ID})
	x.hydrate(ctx, now, out)
	out.Warning = warning
	return &GenerationAnswer{Card: out, GeneratingIssue: task}, http.StatusAccepted, nil
}

func (x *StatusCards) handleRefresh(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var body RefreshBody
	if err := sdk.DecodeJSON(r, &body); err != nil {
		x.writeErr(rw, err)
		return
	}
	c, err := x.manageCard(ctx, r.PathValue("id"))
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	ans, err := x.refresh(ctx, c, body.Full, triggerManual, x.now())
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	status := http.StatusOK
	if ans.Enqueued != nil && *ans.Enqueued && !ans.AlreadyGenerating {
		status = http.StatusAccepted
	}
	x.hydrate(ctx, x.now(), ans.Card)
	sdk.WriteJSON(rw, status, ans)
}

// updateKind is full when forced, before the first summary and after a configuration change
// (lastUpdateRunKind null), and incremental otherwise.
func updateKind(c *Card, full bool) string {
	if full || c.DocumentID == nil || c.LastUpdateRunKind == nil || c.Fingerprint == nil {
		return kindFull
	}
	return kindIncremental
}

// refresh runs change detection for a card and queues an update when there is something to
// write: the manual refresh (every change counts, no caps, no active hours) and the
// scheduler's last step. It answers what happened.
func (x *StatusCards) refresh(ctx context.Context, c *Card, full bool, trigger string, now time.Time) (*GenerationAnswer, error) {
	if c.ArchivedAt != nil {
		return nil, sdk.Unprocessable(msgArchivedNoRefresh)
	}
	if c.QueryVersion == 0 {
		return nil, sdk.Conflict(msgCompileFirst)
	}
	e, iss, err := x.inFlight(ctx, c)
	if err != nil {
		return nil, err
	}
	reuse := ""
	if e != nil {
		if iss == nil || iss.Status != "blocked" {
			return &GenerationAnswer{Card: c, GeneratingIssue: iss, AlreadyGenerating: true, Enqueued: ptr(false)}, nil
		}
		reuse = iss.ID
		if err := x.release(ctx, c, "generation task blocked; reopened", now); err != nil {
			return nil, err
		}
		if c, err = cardGet(ctx, x.pool, c.ID); err != nil {
			return nil, err
		}
	}
	fp, err := x.watch(ctx, c)
	if err != nil {
		return nil, err
	}
	changes := diff(c.Fingerprint, fp)
	kind := updateKind(c, full)
	if kind == kindIncremental && len(changes) == 0 {
		if _, err := x.pool.Exec(ctx, `UPDATE status_cards SET pending_change_count = 0 WHERE id = $1`, c.ID); err != nil {
			return nil, fmt.Errorf("error recording the changes of status card %s: %w", c.ID, err)
		}
		c.PendingChangeCount = 0
		return &GenerationAnswer{Card: c, Enqueued: ptr(false)}, nil
	}
	if trigger == triggerManual && (c.State == statePausedBudget || c.State == statePausedHours) {
		// A manual refresh still runs while paused; the card is live again while it does.
		c.State = liveState(c)
	}
	out, task, warning, err := x.enqueue(ctx, c, &enqueueParams{kind: kind, trigger: trigger, changes: changes, fingerprint: fp,
		now: now, reuseIssueID: reuse})
	if errors.Is(err, errAlreadyGenerating) {
		if c, err = cardGet(ctx, x.pool, c.ID); err != nil {
			return nil, err
		}
		_, iss, err := x.inFlight(ctx, c)
		if err != nil {
			return nil, err
		}
		return &GenerationAnswer{Card: c, GeneratingIssue: iss, AlreadyGenerating: true, Enqueued: ptr(false)}, nil
	}
	if err != nil {
		return nil, err
	}
	if _, err := x.pool.Exec(ctx, `UPDATE status_cards SET pending_change_count = $2, last_change_at = CASE WHEN $2 > 0 THEN $3
		ELSE last_change_at END WHERE id = $1`, c.ID, len(changes), now); err != nil {
		return nil, fmt.Errorf("error recording the changes of status card %s: %w", c.ID, err)
	}
	out.PendingChangeCount = len(changes)
	out.Warning = warning
	x.activity(ctx, c.CompanyID, "status_card.refresh_queued", c.ID, map[string]any{"kind": kind, "trigger": trigger,
		"changes": len(changes), "generatingIssueId": task.ID})
	return &GenerationAnswer{Card: out, GeneratingIssue: task, Enqueued: ptr(true), Kind: kind, Changes: changes}, nil
}

// liveState is the state of a card that is not paused: active once it has a summary,
// compiling before.
func liveState(c *Card) string {
	if c.DocumentID != nil {
		return stateActive
	}
	return stateCompiling
}

// usage sums the cost events of issues since a time through the costs owner.
func (x *StatusCards) usage(ctx context.Context, companyID string, issueIDs []string, since time.Time) (*issueUsage, error) {
	out := &issueUsage{ByRun: map[string]*runUsage{}}
	if len(issueIDs) == 0 {
		return out, nil
	}
	in := map[string]any{"issueIds": issueIDs}
	if !since.IsZero() {
		in["since"] = since.UTC().Format(time.RFC3339Nano)
	}
	if err := x.host.Call(ctx, "costs.issueUsage", sdk.SystemActor(), companyID, in, out); err != nil {
		return nil, fmt.Errorf("error reading status card spend: %w", err)
	}
	return out, nil
}

// runUsage is a costs.issueUsage sum.
type runUsage struct {
	InputTokens  int64  `json:"inputTokens"`
	OutputTokens int64  `json:"outputTokens"`
	CostCents    int64  `json:"costCents"`
	Model        string `json:"model"`
}

// issueUsage is the costs.issueUsage answer.
type issueUsage struct {
	runUsage
	ByRun map[string]*runUsage `json:"byRun"`
}

// generationIssues lists the generation tasks of a card, newest first (at most 5000).
func (x *StatusCards) generationIssues(ctx context.Context, cardID string) ([]string, error) {
	rows, err := x.pool.Query(ctx, `SELECT generation_issue_id::text FROM status_card_updates
		WHERE card_id = $1 AND generation_issue_id IS NOT NULL GROUP BY generation_issue_id ORDER BY max(started_at) DESC LIMIT 5000`, cardID)
	if err != nil {
		return nil, fmt.Errorf("error listing the generation tasks of status card %s: %w", cardID, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("error listing the generation tasks of status card %s: %w", cardID, err)
	}
	return ids, nil
}

// today returns a card's tokens and cost since midnight UTC of now.
func (x *StatusCards) today(ctx context.Context, c *Card, now time.Time) (*runUsage, error) {
	ids, err := x.generationIssues(ctx, c.ID)
	if err != nil {
		return nil, err
	}
	u, err := x.usage(ctx, c.CompanyID, ids, midnightUTC(now))
	if err != nil {
		return nil, err
	}
	return &u.runUsage, nil
}

// hydrate adds the read fields: summaryBody, todayTokens, todayCostCents and
// watchedIssueCount (omitted when it cannot be computed).
func (x *StatusCards) hydrate(ctx context.Context, now time.Time, cards ...*Card) {
	for _, c := range cards {
		if c == nil {
			continue
		}
		c.SummaryBody = c.summaryBody
		if c.Fingerprint != nil {
			c.WatchedIssueCount = ptr(len(c.Fingerprint))
		}
		if u, err := x.today(ctx, c, now); err != nil {
			x.log.Warn("error reading today's spend of a status card", "card", c.ID, "error", err)
		} else {
			c.TodayTokens, c.TodayCostCents = ptr(u.InputTokens+u.OutputTokens), ptr(u.CostCents)
		}
	}
}

// midnightUTC is the start of now's UTC day.
func midnightUTC(now time.Time) time.Time {
	u := now.UTC()
	return time.Date(u.Year(), u.Month(), u.Day(), 0, 0, 0, 0, time.UTC)
}
