package costs

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// eventWriter stores the cost events reported without a heartbeat run (the usual POST
// cost-events) in groups. Concurrent events of one company, agent and model add to the same
// hourly, daily and monthly rollup rows; written one statement each, they queue on those
// rows' locks, each held until its commit's WAL flush, and pay lock waits and rechecks. The
// writer hands what is waiting to one flusher goroutine instead, which stores the whole
// group with one statement: one commit, one WAL flush, and each rollup row locked once per
// group.
//
// An idle writer adds no latency: the first event is written at once, and the events that
// arrive while a write is in flight form the next group (no timers). A group the database
// refuses is retried one event at a time, so that each caller gets its own result or error.
type eventWriter struct {
	pool *pgxpool.Pool
	// queue holds the events waiting for the flusher.
	queue    chan *writeRequest
	stopping chan struct{}
	stopOnce sync.Once
	done     chan struct{}
	// ctx bounds the flusher's writes; cancelled when close gives up waiting for one.
	ctx    context.Context
	cancel context.CancelFunc
}

// maxGroup is the most events one statement stores.
const maxGroup = 128

// writeRequest is one caller's event and where its answer goes.
type writeRequest struct {
	in  *costInput
	res chan writeResult // buffered: the flusher never waits for a caller
}

type writeResult struct {
	ev  *CostEvent
	err error
}

var errWriterStopped = errors.New("error storing cost event: the extension is stopping")

// newEventWriter starts the flusher of the events stored in pool; stop it with close.
func newEventWriter(pool *pgxpool.Pool) *eventWriter {
	ctx, cancel := context.WithCancel(context.Background())
	w := &eventWriter{pool: pool, queue: make(chan *writeRequest, maxGroup), stopping: make(chan struct{}), done: make(chan struct{}),
		ctx: ctx, cancel: cancel}
	go w.run()
	return w
}

// write stores in (whose HeartbeatRunID is nil) with its rollups and returns the stored
// row. A caller whose context ends first gets ctx.Err() (wrapped) at once; its event may
// still be stored by the group it joined (then it is in the ledger and the rollups alike,
// as an event whose response was lost on the way would be).
func (w *eventWriter) write(ctx context.Context, in *costInput) (*CostEvent, error) {
	req := &writeRequest{in: in, res: make(chan writeResult, 1)}
	select {
	case w.queue <- req:
	case <-ctx.Done():
		return nil, fmt.Errorf("error storing cost event: %w", ctx.Err())
	case <-w.done:
		return nil, errWriterStopped
	}
	select {
	case r := <-req.res:
		return r.ev, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("error storing cost event: %w", ctx.Err())
	case <-w.done:
		// The flusher answers every request it took before it exits; one left in the queue
		// was not written.
		select {
		case r := <-req.res:
			return r.ev, r.err
		default:
			return nil, errWriterStopped
		}
	}
}

// run is the flusher: it waits for an event, takes whatever else is waiting (up to
// maxGroup) and stores them together, until stopped.
func (w *eventWriter) run() {
	defer close(w.done)
	group := make([]*writeRequest, 0, maxGroup)
	for {
		select {
		case req := <-w.queue:
			group = append(group[:0], req)
		case <-w.stopping:
			return
		}
	take:
		for len(group) < maxGroup {
			select {
			case req := <-w.queue:
				group = append(group, req)
			default:
				break take
			}
		}
		w.flush(group)
		clear(group)
	}
}

// flush stores a group and answers its callers. A single event takes the one-event
// statement. A group the database refused (nothing of it is stored) is retried one event
// at a time; a group whose outcome is unknown (say, the connection broke while it ran)
// fails as a whole rather than risk storing an event twice.
func (w *eventWriter) flush(group []*writeRequest) {
	ctx, cancel := context.WithTimeout(w.ctx, time.Minute)
	defer cancel()
	if len(group) > 1 {
		stored, err := w.insertGroup(ctx, group)
		var pgErr *pgconn.PgError
		switch {
		case err == nil:
			for i, req := range group {
				req.res <- writeResult{ev: stored[i]}
			}
			return
		case !errors.As(err, &pgErr) && !pgconn.SafeToRetry(err):
			for _, req := range group {
				req.res <- writeResult{err: err}
			}
			return
		}
	}
	for _, req := range group {
		ev, err := scanStoredEvent(w.pool.QueryRow(ctx, insertCostSQL, insertCostArgs(req.in)...))
		if err != nil {
			err = fmt.Errorf("error storing cost event: %w", err)
		}
		req.res <- writeResult{ev: ev, err: err}
	}
}

// insertGroupSQL stores a group of cost events without heartbeat runs and adds them to
// their hourly, daily and monthly rollups in one statement, as insertCostSQL does for one.
// The rollup deltas are summed per rollup key first, so that no row is updated twice (the
// key is NULLS NOT DISTINCT, and GROUP BY puts nulls together too). They are upserted hours
// first, then days, then months, as the one-event statement takes its rows, so that a
// group and a run's event (which still takes that statement) do not deadlock.
const insertGroupSQL = `WITH ev AS (
	INSERT INTO cost_events (id, company_id, agent_id, issue_id, project_id, goal_id, billing_code, provider, biller,
		billing_type, cost_status, model, input_tokens, cached_input_tokens, output_tokens, cost_cents, occurred_at, source,
		counts_run)
	SELECT t.*, false FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::uuid[], $5::uuid[], $6::uuid[], $7::text[],
		$8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::bigint[], $14::bigint[], $15::bigint[],
		$16::bigint[], $17::timestamptz[], $18::text[]) AS t
	RETURNING *
), roll AS (
	INSERT INTO cost_rollups AS r (company_id, grain, bucket, agent_id, project_id, provider, biller, billing_type, model,
		cost_cents, input_tokens, cached_input_tokens, output_tokens, event_count, run_count)
	SELECT ev.company_id, g.grain, date_trunc(g.unit, ev.occurred_at, 'UTC'), ev.agent_id, ev.project_id, ev.provider,
		ev.biller, ev.billing_type, ev.model, sum(ev.cost_cents)::bigint, sum(ev.input_tokens)::bigint,
		sum(ev.cached_input_tokens)::bigint, sum(ev.output_tokens)::bigint, count(*), count(*) FILTER (WHERE ev.counts_run)
	FROM ev CROSS JOIN (VALUES (1, 'h', 'hour'), (2, 'd', 'day'), (3, 'm', 'month')) AS g (ord, grain, unit)
	GROUP BY g.ord, 1, 2, 3, 4, 5, 6, 7, 8, 9
	ORDER BY g.ord, 1, 3, 4, 5, 6, 7, 8, 9
	` + rollupAddSQL + `
)
SELECT ` + storedEventColumns + ` FROM ev`

// groupArgs holds a group's events column by column, the arrays insertGroupSQL unnests.
type groupArgs struct {
	ids, companies, agents                                      []string
	issues, projects, goals, codes                              []*string
	providers, billers, billingTypes, statuses, models, sources []string
	inputTokens, cachedInputTokens, outputTokens, costCents     []int64
	occurredAt                                                  []time.Time
}

func (a *groupArgs) add(in *costInput) {
	e := &in.CostEvent
	a.ids, a.companies, a.agents = append(a.ids, e.ID), append(a.companies, e.CompanyID), append(a.agents, e.AgentID)
	a.issues, a.projects, a.goals = append(a.issues, e.IssueID), append(a.projects, e.ProjectID), append(a.goals, e.GoalID)
	a.codes, a.providers, a.billers = append(a.codes, e.BillingCode), append(a.providers, e.Provider), append(a.billers, e.Biller)
	a.billingTypes, a.statuses = append(a.billingTypes, e.BillingType), append(a.statuses, e.CostStatus)
	a.models, a.sources = append(a.models, e.Model), append(a.sources, in.Source)
	a.inputTokens, a.cachedInputTokens = append(a.inputTokens, e.InputTokens), append(a.cachedInputTokens, e.CachedInputTokens)
	a.outputTokens, a.costCents = append(a.outputTokens, e.OutputTokens), append(a.costCents, e.CostCents)
	a.occurredAt = append(a.occurredAt, e.OccurredAt)
}

func (a *groupArgs) args() []any {
	return []any{a.ids, a.companies, a.agents, a.issues, a.projects, a.goals, a.codes, a.providers, a.billers, a.billingTypes,
		a.statuses, a.models, a.inputTokens, a.cachedInputTokens, a.outputTokens, a.costCents, a.occurredAt, a.sources}
}

// insertGroup stores a group with insertGroupSQL and returns the stored rows in the
// group's order.
func (w *eventWriter) insertGroup(ctx context.Context, group []*writeRequest) ([]*CostEvent, error) {
	var a groupArgs
	index := make(map[string]int, len(group))
	for i, req := range group {
		a.add(req.in)
		index[req.in.ID] = i
	}
	rows, err := w.pool.Query(ctx, insertGroupSQL, a.args()...)
	if err != nil {
		return nil, fmt.Errorf("error storing %d cost events: %w", len(group), err)
	}
	defer rows.Close()
	stored := make([]*CostEvent, len(group))
	for rows.Next() {
		ev, err := scanStoredEvent(rows)
		if err != nil {
			return nil, fmt.Errorf("error storing %d cost events: %w", len(group), err)
		}
		if i, ok := index[ev.ID]; ok {
			stored[i] = ev
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error storing %d cost events: %w", len(group), err)
	}
	for i, ev := range stored {
		if ev == nil {
			return nil, fmt.Errorf("error storing %d cost events: event %s was not returned", len(group), a.ids[i])
		}
	}
	return stored, nil
}

// close stops the flusher after the write in flight; if ctx ends first, that write is
// cancelled. Callers still waiting get errWriterStopped. close may be called more than once.
func (w *eventWriter) close(ctx context.Context) {
	w.stopOnce.Do(func() { close(w.stopping) })
	select {
	case <-w.done:
	case <-ctx.Done():
		w.cancel()
		<-w.done
	}
	w.cancel()
}
