package costs

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

// bulkLoad inserts n cost events of a company straight into ext_costs through the
// superuser pool (INSERT … SELECT generate_series), spread evenly over the span before
// now across the agents, two providers, three billing types and three models, then
// rebuilds the company's rollups with one INSERT … SELECT and analyzes the tables. It
// returns how long it took.
func bulkLoad(t testing.TB, h *sdktest.Host, companyID string, agentIDs []string, n int, span time.Duration) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	step := span.Seconds() / float64(n)
	// Ids ascend within a load (a random prefix per load keeps loads apart), so the primary
	// key grows at its right edge instead of splitting pages at random.
	var rnd [4]byte
	_, _ = crand.Read(rnd[:])
	prefix := hex.EncodeToString(rnd[:])
	_, err := h.Kernel.Pool.Exec(ctx, `INSERT INTO ext_costs.cost_events (id, company_id, agent_id, provider, biller, billing_type,
			cost_status, model, input_tokens, cached_input_tokens, output_tokens, cost_cents, occurred_at, source, counts_run)
		SELECT ($6 || '-0000-4000-8000-' || lpad(to_hex(i), 12, '0'))::uuid, $1, ($2::uuid[])[1 + i % array_length($2::uuid[], 1)],
			(ARRAY['anthropic', 'openai'])[1 + i % 2], (ARRAY['anthropic', 'openrouter'])[1 + i % 2],
			(ARRAY['metered_api', 'subscription_included', 'credits'])[1 + i % 3], 'reported',
			(ARRAY['m1', 'm2', 'm3'])[1 + (i / 7) % 3], i % 1000, i % 50, i % 200, i % 97,
			$3::timestamptz - make_interval(secs => i * $4::double precision), 'api', false
		FROM generate_series(1, $5::int) AS i`, companyID, agentIDs, time.Now().UTC(), step, n, prefix)
	require.NoError(t, err)
	inserted := time.Since(start)
	rebuildRollups(t, h, companyID)
	t.Logf("bulk load: %d events inserted in %s, rollups rebuilt in %s", n, inserted, time.Since(start)-inserted)
	return time.Since(start)
}

// rebuildRollups recomputes a company's hourly, daily and monthly rollups from its events
// (after a bulk load that bypassed the insert path) in time order, as live inserts lay
// them out, and analyzes the tables.
func rebuildRollups(t testing.TB, h *sdktest.Host, companyID string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// Hours from the events, then days from the hours and months from the days.
	for _, q := range []string{
		`DELETE FROM ext_costs.cost_rollups WHERE company_id = $1`,
		`INSERT INTO ext_costs.cost_rollups (company_id, grain, bucket, agent_id, project_id, provider, biller, billing_type, model,
			cost_cents, input_tokens, cached_input_tokens, output_tokens, event_count, run_count)
		SELECT company_id, 'h', date_trunc('hour', occurred_at, 'UTC'), agent_id, project_id, provider, biller, billing_type, model,
			sum(cost_cents), sum(input_tokens), sum(cached_input_tokens), sum(output_tokens), count(*), count(*) FILTER (WHERE counts_run)
		FROM ext_costs.cost_events WHERE company_id = $1
		GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9 ORDER BY 3`,
		rollupFrom("d", "day", "h"),
		rollupFrom("m", "month", "d"),
	} {
		_, err := h.Kernel.Pool.Exec(ctx, q, companyID)
		require.NoError(t, err)
	}
	for _, q := range []string{`ANALYZE ext_costs.cost_events`, `ANALYZE ext_costs.cost_rollups`} {
		_, err := h.Kernel.Pool.Exec(ctx, q)
		require.NoError(t, err)
	}
}

// rollupFrom builds the statement that sums a company's rollups of grain from into grain
// to (unit is to's date_trunc unit).
func rollupFrom(to, unit, from string) string {
	return `INSERT INTO ext_costs.cost_rollups (company_id, grain, bucket, agent_id, project_id, provider, biller, billing_type, model,
			cost_cents, input_tokens, cached_input_tokens, output_tokens, event_count, run_count)
		SELECT company_id, '` + to + `', date_trunc('` + unit + `', bucket, 'UTC'), agent_id, project_id, provider, biller, billing_type, model,
			sum(cost_cents), sum(input_tokens), sum(cached_input_tokens), sum(output_tokens), sum(event_count), sum(run_count)
		FROM ext_costs.cost_rollups WHERE company_id = $1 AND grain = '` + from + `'
		GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9 ORDER BY 3`
}
