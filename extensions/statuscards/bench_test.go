package statuscards_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdk"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

// benchWatched is how many issues the benchmark card watches.
const benchWatched = 5000

// BenchmarkChangeDetection5000 measures change detection for a card watching 5,000 issues
// (its mentioned issues, plus one compiled query through the work owner's search): read the
// watched set's fingerprints from the work owner over the host and diff them against the
// stored fingerprint, with 50 of the issues changed since. It prints p50 and p99 of
// statuscards.detect over b.N runs, and the p50 of the work owner's fingerprint read alone.
func BenchmarkChangeDetection5000(b *testing.B) {
	h := startHost(b, true)
	ctx := context.Background()
	co := h.CreateCompany("Detect Co")
	summarizer := h.CreateAgent(co, "Bench Summarizer", "general")
	pool := h.Kernel.Pool
	_, err := pool.Exec(ctx, `INSERT INTO ext_work.issues (id, company_id, title, status, priority, issue_number, identifier,
			created_at, updated_at)
		SELECT gen_random_uuid(), $1, 'Watched issue ' || k, (ARRAY['backlog','todo','done'])[1 + k % 3], 'medium', 1000 + k, 'DET-' || (1000 + k),
			now() - k * interval '1 second', now() - k * interval '1 second'
		FROM generate_series(1, $2) AS k`, co, benchWatched)
	require.NoError(b, err)
	_, err = pool.Exec(ctx, `VACUUM ANALYZE ext_work.issues`)
	require.NoError(b, err)
	res := h.Do("POST", "/api/companies/"+co+"/status-cards", map[string]any{"interestPrompt": "Everything?", "agentId": summarizer.ID})
	require.Equal(b, 201, res.Status, "%s", res.Body)
	cardID := res.Map(b)["id"].(string)
	// The card as a summary mentioning every issue leaves it.
	_, err = pool.Exec(ctx, `UPDATE ext_statuscards.status_cards SET queries = '[{"q":"watched","scope":"issues","limit":50}]',
			query_version = 1, mentioned_issue_ids = (SELECT array_agg(id::text) FROM ext_work.issues WHERE company_id = $2 AND issue_number > 1000)
		WHERE id = $1`, cardID, co)
	require.NoError(b, err)
	detect := func(snapshot bool) map[string]any {
		in, err := json.Marshal(map[string]any{"cardId": cardID, "snapshot": snapshot})
		require.NoError(b, err)
		out, err := h.Supervisor.Invoke(ctx, "kernel", &hostv1.InvokeRequest{Method: "statuscards.detect", InputJson: in,
			Actor: sdk.SystemActor()})
		require.NoError(b, err)
		require.Nil(b, out.Error, "statuscards.detect: %v", out.Error)
		var m map[string]any
		require.NoError(b, json.Unmarshal(out.OutputJson, &m))
		return m
	}
	first := detect(true)
	require.Equal(b, float64(benchWatched), first["watched"])
	_, err = pool.Exec(ctx, `UPDATE ext_work.issues SET status = 'in_review', updated_at = now()
		WHERE company_id = $1 AND issue_number > 1000 AND issue_number % 100 = 0`, co)
	require.NoError(b, err)
	var lat []time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		m := detect(false)
		lat = append(lat, time.Since(start))
		require.Equal(b, float64(benchWatched/100), m["changes"])
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	var ids []string
	rows, err := pool.Query(ctx, `SELECT id::text FROM ext_work.issues WHERE company_id = $1 AND issue_number > 1000`, co)
	require.NoError(b, err)
	for rows.Next() {
		var id string
		require.NoError(b, rows.Scan(&id))
		ids = append(ids, id)
	}
	require.NoError(b, rows.Err())
	in, err := json.Marshal(map[string]any{"issueIds": ids})
	require.NoError(b, err)
	var fl []time.Duration
	for range 10 {
		start := time.Now()
		out, err := h.Supervisor.Invoke(ctx, "kernel", &hostv1.InvokeRequest{Method: "work.issues.fingerprints", InputJson: in,
			Actor: sdk.SystemActor(), CompanyId: co})
		require.NoError(b, err)
		require.Nil(b, out.Error)
		fl = append(fl, time.Since(start))
	}
	sort.Slice(fl, func(i, j int) bool { return fl[i] < fl[j] })
	fmt.Printf("%s: of which the work owner's fingerprint read of %d issues over the host alone: p50 %s\n", b.Name(), benchWatched,
		fl[len(fl)/2].Round(10*time.Microsecond))
	p := func(q float64) time.Duration { return lat[int(q*float64(len(lat)-1))].Round(10 * time.Microsecond) }
	fmt.Printf("%s: change detection for a card watching %d issues (%d changed), %d runs: p50 %s, p99 %s\n",
		b.Name(), benchWatched, benchWatched/100, len(lat), p(0.5), p(0.99))
}
