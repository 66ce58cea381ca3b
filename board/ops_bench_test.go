package board_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

// benchOpsPages seeds the company for the routine and cost pages of BenchmarkBoardPages and
// returns those pages: 100,000 cost events over 60 days across 8 agents (inserted with SQL
// straight into the costs extension's ledger, its rollups rebuilt from them, as the costs
// extension's own plan test does: a fixture, not a read path), and 30 routines with a
// schedule trigger each, made through the API, ten of them run once.
func benchOpsPages(b *testing.B, h *sdktest.Host, co string) []struct{ name, path string } {
	b.Helper()
	ctx := context.Background()
	var agents []string
	for i := range 8 {
		agents = append(agents, h.CreateAgent(co, fmt.Sprintf("Bench Agent %d", i), "engineer").ID)
	}
	const events = 100_000
	span := 60 * 24 * time.Hour
	_, err := h.Kernel.Pool.Exec(ctx, `INSERT INTO ext_costs.cost_events (id, company_id, agent_id, provider, biller, billing_type,
			cost_status, model, input_tokens, cached_input_tokens, output_tokens, cost_cents, occurred_at, source, counts_run)
		SELECT gen_random_uuid(), $1, ($2::uuid[])[1 + i % array_length($2::uuid[], 1)],
			(ARRAY['anthropic', 'openai'])[1 + i % 2], (ARRAY['anthropic', 'openrouter'])[1 + i % 2],
			(ARRAY['metered_api', 'subscription_included', 'credits'])[1 + i % 3], 'reported',
			(ARRAY['m1', 'm2', 'm3'])[1 + (i / 7) % 3], i % 1000, i % 50, i % 200, i % 97,
			$3::timestamptz - make_interval(secs => i * $4::double precision), 'api', false
		FROM generate_series(1, $5::int) AS i`, co, agents, time.Now().UTC(), span.Seconds()/events, events)
	require.NoError(b, err)
	rollup := func(to, unit, from string) string {
		return `INSERT INTO ext_costs.cost_rollups (company_id, grain, bucket, agent_id, project_id, provider, biller, billing_type, model,
				cost_cents, input_tokens, cached_input_tokens, output_tokens, event_count, run_count)
			SELECT company_id, '` + to + `', date_trunc('` + unit + `', bucket, 'UTC'), agent_id, project_id, provider, biller, billing_type,
				model, sum(cost_cents), sum(input_tokens), sum(cached_input_tokens), sum(output_tokens), sum(event_count), sum(run_count)
			FROM ext_costs.cost_rollups WHERE company_id = $1 AND grain = '` + from + `'
			GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9 ORDER BY 3`
	}
	for _, q := range []string{
		`DELETE FROM ext_costs.cost_rollups WHERE company_id = $1`,
		`INSERT INTO ext_costs.cost_rollups (company_id, grain, bucket, agent_id, project_id, provider, biller, billing_type, model,
			cost_cents, input_tokens, cached_input_tokens, output_tokens, event_count, run_count)
		SELECT company_id, 'h', date_trunc('hour', occurred_at, 'UTC'), agent_id, project_id, provider, biller, billing_type, model,
			sum(cost_cents), sum(input_tokens), sum(cached_input_tokens), sum(output_tokens), count(*), count(*) FILTER (WHERE counts_run)
		FROM ext_costs.cost_events WHERE company_id = $1 GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9 ORDER BY 3`,
		rollup("d", "day", "h"),
		rollup("m", "month", "d"),
	} {
		_, err := h.Kernel.Pool.Exec(ctx, q, co)
		require.NoError(b, err)
	}
	for _, q := range []string{`ANALYZE ext_costs.cost_events`, `ANALYZE ext_costs.cost_rollups`} {
		_, err := h.Kernel.Pool.Exec(ctx, q)
		require.NoError(b, err)
	}
	var routineID string
	for i := range 30 {
		res := h.Do("POST", "/api/companies/"+co+"/routines", map[string]any{"title": fmt.Sprintf("Bench routine %d", i),
			"assigneeAgentId": agents[i%len(agents)]})
		require.Equal(b, http.StatusCreated, res.Status, "%s", res.Body)
		routineID = res.Map(b)["id"].(string)
		res = h.Do("POST", "/api/routines/"+routineID+"/triggers", map[string]any{"kind": "schedule", "cronExpression": "0 9 * * *"})
		require.Equal(b, http.StatusCreated, res.Status, "%s", res.Body)
		if i%3 == 0 {
			res = h.Do("POST", "/api/routines/"+routineID+"/run", map[string]any{})
			require.Equal(b, http.StatusAccepted, res.Status, "%s", res.Body)
		}
	}
	return []struct{ name, path string }{
		{"Costs", "/c/" + co + "/costs"},
		{"Costs90Days", "/c/" + co + "/costs?from=" + time.Now().UTC().AddDate(0, 0, -89).Format(time.DateOnly)},
		{"Routines", "/c/" + co + "/routines"},
		{"Routine", "/c/" + co + "/routines/" + routineID},
	}
}
