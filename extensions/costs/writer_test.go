package costs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

// requireRollupsMatchLedger requires a company's hourly, daily and monthly rollups to equal
// the sums of its raw cost events, row for row.
func requireRollupsMatchLedger(t *testing.T, h *sdktest.Host, company string, wantEvents int64) {
	t.Helper()
	var missing, extra, events int64
	require.NoError(t, h.Kernel.Pool.QueryRow(context.Background(), `WITH want AS (
			SELECT company_id, g.grain, date_trunc(g.unit, occurred_at, 'UTC') AS bucket, agent_id, project_id, provider, biller,
				billing_type, model, sum(cost_cents)::bigint AS cost_cents, sum(input_tokens)::bigint AS input_tokens,
				sum(cached_input_tokens)::bigint AS cached_input_tokens, sum(output_tokens)::bigint AS output_tokens,
				count(*) AS event_count, count(*) FILTER (WHERE counts_run) AS run_count
			FROM ext_costs.cost_events CROSS JOIN (VALUES ('h', 'hour'), ('d', 'day'), ('m', 'month')) AS g (grain, unit)
			WHERE company_id = $1
			GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9
		), got AS (
			SELECT company_id, grain::text, bucket, agent_id, project_id, provider, biller, billing_type, model, cost_cents,
				input_tokens, cached_input_tokens, output_tokens, event_count, run_count
			FROM ext_costs.cost_rollups WHERE company_id = $1
		)
		SELECT (SELECT count(*) FROM (SELECT * FROM want EXCEPT ALL SELECT * FROM got) AS m),
			(SELECT count(*) FROM (SELECT * FROM got EXCEPT ALL SELECT * FROM want) AS x),
			(SELECT coalesce(sum(event_count), 0)::bigint FROM got WHERE grain = 'm')`, company).Scan(&missing, &extra, &events))
	require.Zero(t, missing, "rollup rows missing or different from the sums of the events")
	require.Zero(t, extra, "rollup rows without matching events")
	require.Equal(t, wantEvents, events, "monthly rollups count every event once")
}

// TestConcurrentCostEventsStoredInGroups posts 200 cost events from 32 clients at once
// (several agents, models, billers, projects, days and months, priced and unpriced), so
// that the writer stores them in groups, and requires each caller to get its own event and
// the rollups and spend reads to equal the sums of the raw events.
func TestConcurrentCostEventsStoredInGroups(t *testing.T) {
	t.Parallel()
	h := startHost(t)
	company := h.CreateCompany("Group Co")
	var agents []string
	for i := range 4 {
		agents = append(agents, createAgent(t, h, company, fmt.Sprintf("Grouper %d", i)))
	}
	project := obj(t, do(t, h, http.StatusCreated, "POST", "/api/companies/"+company+"/projects", map[string]any{"name": "Group Project"}))["id"].(string)

	now := time.Now().UTC().Truncate(time.Microsecond) // the database's resolution
	monthStart := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	instants := []time.Time{now.Add(-time.Minute), now.Add(-3 * time.Hour), now.Add(-26 * time.Hour), monthStart, monthStart.Add(-time.Second),
		now.AddDate(0, -2, 0)}
	const n = 200
	evs := make([]ledgerEvent, n)
	bodies := make([]map[string]any, n)
	for i := range evs {
		e := ledgerEvent{agent: agents[i%len(agents)], provider: []string{"anthropic", "openai"}[i%2], model: []string{"m1", "m2", "m3"}[i%3],
			billingType: []string{"metered_api", "subscription_included", "credits"}[i%3], at: instants[i%len(instants)],
			cost: int64(i % 7), in: int64(10 * i), cached: int64(i % 4), out: int64(i % 11)}
		e.biller = e.provider
		body := map[string]any{"agentId": e.agent, "provider": e.provider, "model": e.model, "billingType": e.billingType,
			"occurredAt": iso(e.at), "inputTokens": e.in, "cachedInputTokens": e.cached, "outputTokens": e.out}
		if i%5 == 0 {
			e.biller = "openrouter"
			body["biller"] = e.biller
		}
		if i%4 == 1 {
			e.project = project
			body["projectId"] = project
		}
		if i%9 == 0 {
			e.costStatus, e.cost = "unpriced", 0
			body["costStatus"] = "unpriced"
		} else {
			body["costCents"] = e.cost
		}
		evs[i], bodies[i] = e, body
	}

	type answer struct {
		status int
		body   map[string]any
		err    error
	}
	answers := make([]answer, n)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
	defer client.CloseIdleConnections()
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for i := range jobs {
				b, _ := json.Marshal(bodies[i])
				res, err := client.Post(h.URL+"/api/companies/"+company+"/cost-events", "application/json", bytes.NewReader(b))
				if err != nil {
					answers[i].err = err
					continue
				}
				raw, err := io.ReadAll(res.Body)
				res.Body.Close()
				answers[i] = answer{status: res.StatusCode, err: err}
				if err == nil {
					answers[i].err = json.Unmarshal(raw, &answers[i].body)
				}
			}
		})
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()

	// The stored rows, as the API shows them. Events stored by one statement share their
	// created_at (the transaction's start).
	stored := map[string]map[string]any{}
	groups := map[time.Time]bool{}
	rows, err := h.Kernel.Pool.Query(context.Background(), `SELECT `+costEventColumns+` FROM ext_costs.cost_events WHERE company_id = $1`, company)
	require.NoError(t, err)
	for rows.Next() {
		ev, err := scanCostEvent(rows)
		require.NoError(t, err)
		b, err := json.Marshal(ev)
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, json.Unmarshal(b, &m))
		stored[ev.ID] = m
		groups[ev.CreatedAt] = true
	}
	require.NoError(t, rows.Err())
	t.Logf("%d events stored by %d statements", n, len(groups))

	ids := map[string]bool{}
	for i, a := range answers {
		require.NoError(t, a.err, "event %d", i)
		require.Equal(t, http.StatusCreated, a.status, "event %d: %v", i, a.body)
		e, got := evs[i], a.body
		id, _ := got["id"].(string)
		require.False(t, ids[id], "event %d got the id of another", i)
		ids[id] = true
		want := map[string]any{"companyId": company, "agentId": e.agent, "provider": e.provider, "biller": e.biller,
			"billingType": e.billingType, "model": e.model, "costCents": float64(e.cost), "inputTokens": float64(e.in),
			"cachedInputTokens": float64(e.cached), "outputTokens": float64(e.out), "costStatus": "reported",
			"projectId": nil, "issueId": nil, "goalId": nil, "heartbeatRunId": nil, "billingCode": nil}
		if e.costStatus != "" {
			want["costStatus"] = e.costStatus
		}
		if e.project != "" {
			want["projectId"] = e.project
		}
		for k, v := range want {
			require.Equal(t, v, got[k], "event %d %s", i, k)
		}
		at, err := time.Parse(time.RFC3339Nano, got["occurredAt"].(string))
		require.NoError(t, err)
		require.True(t, at.Equal(e.at), "event %d occurredAt %s", i, got["occurredAt"])
		require.Equal(t, stored[id], got, "event %d: the response is the stored row", i)
	}
	require.Len(t, stored, n)

	requireRollupsMatchLedger(t, h, company, n)
	all := func(ledgerEvent) bool { return true }
	total := sumBy(evs, all, func(ledgerEvent) string { return "" })[""]
	summary := obj(t, do(t, h, http.StatusOK, "GET", "/api/companies/"+company+"/costs/summary", nil))
	require.EqualValues(t, total.cost, summary["spendCents"])
	byModel := list(t, do(t, h, http.StatusOK, "GET", "/api/companies/"+company+"/costs/by-agent-model", nil))
	want := sumBy(evs, all, func(e ledgerEvent) string {
		return e.agent + "|" + e.provider + "|" + e.biller + "|" + e.billingType + "|" + e.model
	})
	require.Len(t, byModel, len(want))
	for _, row := range byModel {
		w := want[fmt.Sprintf("%s|%s|%s|%s|%s", row["agentId"], row["provider"], row["biller"], row["billingType"], row["model"])]
		require.NotNil(t, w, "%v", row)
		require.Equal(t, []int64{w.cost, w.in, w.cached, w.out},
			[]int64{num(row["costCents"]), num(row["inputTokens"]), num(row["cachedInputTokens"]), num(row["outputTokens"])}, "%v", row)
	}
	inMonth := sumBy(evs, func(e ledgerEvent) bool { return !e.at.Before(monthStart) }, func(ledgerEvent) string { return "" })[""]
	require.EqualValues(t, inMonth.cost, obj(t, do(t, h, http.StatusOK, "GET", "/api/companies/"+company, nil))["spentMonthlyCents"])
}

// TestEventWriterGroups drives an eventWriter of the test process on the extension's
// schema: the flusher is held on a rollup row lock while events queue behind it, which
// makes their grouping certain.
func TestEventWriterGroups(t *testing.T) {
	t.Parallel()
	h := startHost(t)
	cfg, err := pgxpool.ParseConfig(h.DatabaseURL)
	require.NoError(t, err)
	cfg.ConnConfig.RuntimeParams["search_path"] = Schema
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	defer pool.Close()
	w := newEventWriter(pool)
	defer w.close(context.Background())

	company, agent := uuid.NewString(), uuid.NewString()
	at := time.Now().UTC().Truncate(time.Microsecond)
	event := func(cents int64) *costInput {
		return &costInput{Source: "api", CostEvent: CostEvent{ID: uuid.NewString(), CompanyID: company, AgentID: agent, Provider: "anthropic",
			Biller: "anthropic", BillingType: "unknown", CostStatus: "reported", Model: "m1", CostCents: cents, InputTokens: 3, OccurredAt: at}}
	}
	ctx := context.Background()
	first, err := w.write(ctx, event(1))
	require.NoError(t, err, "an idle writer writes at once")
	require.Equal(t, int64(1), first.CostCents)

	// hold locks the company's hourly rollup row in a transaction, sends block through the
	// writer (it waits on the lock), waits until the flusher is blocked, and returns the
	// transaction to release.
	hold := func(t *testing.T, block *costInput) (release func(), blocked <-chan writeResult) {
		tx, err := h.Kernel.Pool.Begin(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, `SELECT 1 FROM ext_costs.cost_rollups WHERE company_id = $1 AND grain = 'h' FOR UPDATE`, company)
		require.NoError(t, err)
		res := make(chan writeResult, 1)
		go func() {
			ev, err := w.write(ctx, block)
			res <- writeResult{ev, err}
		}()
		sdktest.WaitFor(t, 30*time.Second, func() bool {
			var waiting int
			require.NoError(t, h.Kernel.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%cost_rollups%'`).Scan(&waiting))
			return waiting > 0
		}, "the flusher to wait on the rollup row")
		return func() { require.NoError(t, tx.Rollback(ctx)) }, res
	}
	// queue writes evs from one goroutine each and waits until all are queued.
	queue := func(t *testing.T, evs []*costInput, ctxs []context.Context) []chan writeResult {
		out := make([]chan writeResult, len(evs))
		for i, e := range evs {
			out[i] = make(chan writeResult, 1)
			go func() {
				ev, err := w.write(ctxs[i], e)
				out[i] <- writeResult{ev, err}
			}()
		}
		sdktest.WaitFor(t, 30*time.Second, func() bool { return len(w.queue) == len(evs) }, "the events to queue")
		return out
	}
	createdAt := func(t *testing.T, ids []string) map[time.Time]int {
		rows, err := h.Kernel.Pool.Query(ctx, `SELECT created_at FROM ext_costs.cost_events WHERE id = ANY($1::uuid[])`, ids)
		require.NoError(t, err)
		out := map[time.Time]int{}
		for rows.Next() {
			var c time.Time
			require.NoError(t, rows.Scan(&c))
			out[c]++
		}
		require.NoError(t, rows.Err())
		return out
	}

	t.Run("QueuedEventsFormOneGroup", func(t *testing.T) {
		release, blocked := hold(t, event(2))
		var evs []*costInput
		var ctxs []context.Context
		for i := range 20 {
			evs = append(evs, event(int64(10+i)))
			ctxs = append(ctxs, ctx)
		}
		// One caller gives up while it waits: it gets its context's error at once.
		gone, cancel := context.WithCancel(ctx)
		evs, ctxs = append(evs, event(100)), append(ctxs, gone)
		res := queue(t, evs, ctxs)
		cancel()
		r := <-res[len(res)-1]
		require.ErrorIs(t, r.err, context.Canceled)
		release()
		b := <-blocked
		require.NoError(t, b.err)
		var ids []string
		for i, ch := range res[:20] {
			r := <-ch
			require.NoError(t, r.err)
			require.Equal(t, evs[i].ID, r.ev.ID, "each caller gets its own event")
			require.Equal(t, evs[i].CostCents, r.ev.CostCents)
			require.True(t, r.ev.OccurredAt.Equal(at))
			ids = append(ids, r.ev.ID)
		}
		groups := createdAt(t, ids)
		require.Len(t, groups, 1, "the queued events were stored by one statement")
		require.NotContains(t, groups, b.ev.CreatedAt, "apart from the event written before them")
		// The abandoned event was in the group, so it was stored too.
		requireRollupsMatchLedger(t, h, company, 23)
	})

	t.Run("RefusedGroupRetriedOneByOne", func(t *testing.T) {
		release, blocked := hold(t, event(3))
		var evs []*costInput
		var ctxs []context.Context
		for i := range 10 {
			evs = append(evs, event(int64(i)))
			ctxs = append(ctxs, ctx)
		}
		evs[4].CostCents = -1 // refused by the table's check constraint
		res := queue(t, evs, ctxs)
		release()
		require.NoError(t, (<-blocked).err)
		for i, ch := range res {
			r := <-ch
			if i == 4 {
				require.ErrorContains(t, r.err, "cost_events_amounts_check")
				continue
			}
			require.NoError(t, r.err, "event %d", i)
			require.Equal(t, evs[i].ID, r.ev.ID)
		}
		requireRollupsMatchLedger(t, h, company, 23+1+9)
	})

	t.Run("Closed", func(t *testing.T) {
		w.close(ctx)
		_, err := w.write(ctx, event(1))
		require.ErrorIs(t, err, errWriterStopped)
	})
}
