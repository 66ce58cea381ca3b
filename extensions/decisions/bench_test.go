package decisions_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// BenchmarkDecideTenEffects proposes decisions whose chosen option has ten effects (comments)
// and times the board's decide request, which answers after every effect ran with its own
// execution row and activity entry; it reports p50 and p99 over 60 decisions per op, with
// the comments on the origin issue (assigned to the agent: each comment also wakes it, the
// work and agents owners' cost) and on an unassigned issue (decisions' own cost plus a
// plain comment).
func BenchmarkDecideTenEffects(b *testing.B) {
	const samples = 60
	h := startHost(b)
	f := newFixture(b, h, "Decide Bench")
	plain := f.issue(b, map[string]any{"title": "unassigned target"})["id"].(string)
	// Commenting on an issue that is not its own needs issue:comment (rule 2).
	require.NoError(b, h.Kernel.GrantPermission(context.Background(), f.co, "agent", f.agent.ID, "issue:comment", ""))
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	for _, c := range []struct{ name, target string }{{"assigned", f.origin}, {"unassigned", plain}} {
		effects := make([]any, 10)
		for i := range effects {
			effects[i] = map[string]any{"type": "comment_on_issue", "targetIssueId": c.target, "staleness": "lenient",
				"bodyMarkdown": fmt.Sprintf("effect %d: {{input.note}}", i)}
		}
		body := map[string]any{"title": "ten effects", "body": "go?",
			"inputs":  []any{map[string]any{"id": "note", "label": "Note"}},
			"options": []any{map[string]any{"id": "go", "label": "Go", "effects": effects}, map[string]any{"id": "no", "label": "No"}}}
		var all []time.Duration
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				for range samples {
					res := f.propose(body)
					require.Equal(b, http.StatusCreated, res.Status, "%s", res.Body)
					id := res.Map(b)["id"].(string)
					t0 := time.Now()
					res = f.decide(id, map[string]any{"optionId": "go", "inputValues": map[string]string{"note": "bench"}})
					all = append(all, time.Since(t0))
					require.Equal(b, http.StatusOK, res.Status, "%s", res.Body)
					require.Equal(b, "succeeded", res.Map(b)["executionStatus"], "%s", res.Body)
				}
			}
			slices.Sort(all)
			p50, p99 := all[len(all)/2], all[min(len(all)-1, len(all)*99/100)]
			b.ReportMetric(ms(p50), "p50-ms")
			b.ReportMetric(ms(p99), "p99-ms")
			// Printed, not logged: benchmark logs only show with -v.
			fmt.Printf("%s: decide with 10 effects over %d decisions: p50 %.1f ms, p99 %.1f ms\n", b.Name(), len(all), ms(p50), ms(p99))
		})
	}
}

// decisionSeedCompany creates a company with one issue and bulk-loads n decisions targeting
// it with one INSERT … SELECT generate_series through the superuser pool (seeding only: the
// rows are not signed, which listing does not check). Statuses rotate open, decided,
// expired, cancelled; every decided one has an executed effect row; every 10,000th targets
// the issue rare instead.
func decisionSeedCompany(b *testing.B, f *fixture, n int, rare string) {
	b.Helper()
	ctx := context.Background()
	pool := f.h.Kernel.Pool
	_, err := pool.Exec(ctx, `INSERT INTO ext_decisions.decisions (id, company_id, origin_agent_id, origin_issue_id, origin_run_id,
			rule_key, title, body, options, status, execution_status, chosen_option_id, expires_at, payload_hash, signed_spec,
			target_snapshots, created_at, updated_at)
		SELECT gen_random_uuid(), $1::uuid, $2::uuid, $3::uuid, $4::uuid, 'rule-' || (k % 5), 'Decision ' || k, 'body',
			jsonb_build_array(jsonb_build_object('id', 'yes', 'label', 'Yes', 'style', 'default', 'effects',
				jsonb_build_array(jsonb_build_object('type', 'comment_on_issue', 'targetIssueId', $6::text, 'staleness', 'strict',
					'bodyMarkdown', 'ok')))),
			(ARRAY['open','decided','expired','cancelled'])[1 + k % 4],
			CASE WHEN k % 4 = 1 THEN 'succeeded' END, CASE WHEN k % 4 = 1 THEN 'yes' END,
			now() + interval '7 days', 'seed', 'decision-spec-v1.seed',
			jsonb_build_object(CASE WHEN k % 10000 = 50 THEN $8::text ELSE $6::text END, jsonb_build_object('status', 'todo',
				'assigneeAgentId', $7::text, 'assigneeUserId', null, 'updatedAt', now())),
			now() - k * interval '1 second', now() - k * interval '1 second'
		FROM generate_series(1, $5::int) AS k`, f.co, f.agent.ID, f.origin, f.runID, n, f.origin, f.agent.ID, rare)
	require.NoError(b, err)
	_, err = pool.Exec(ctx, `INSERT INTO ext_decisions.decision_effect_executions (decision_id, effect_index, effect_type,
			target_issue_id, status, executed_at)
		SELECT id, 0, 'comment_on_issue', $2, 'executed', now() FROM ext_decisions.decisions
		WHERE company_id = $1 AND status = 'decided'`, f.co, f.origin)
	require.NoError(b, err)
	for _, table := range []string{"ext_decisions.decisions", "ext_decisions.decision_effect_executions"} {
		_, err := pool.Exec(ctx, `VACUUM ANALYZE `+table)
		require.NoError(b, err)
	}
}

// BenchmarkDecisionList lists the first page (50, newest first, with targetChanged and the
// executions of closed rows) of a company with 100 decisions and of one with 100,000, and
// the same with a status filter and with a target that one decision in 10,000 names; it prints the ratio of the large to the small company.
func BenchmarkDecisionList(b *testing.B) {
	sizes := []int{100, 100_000}
	h := startHost(b)
	fixtures := map[int]*fixture{}
	rares := map[int]string{}
	start := time.Now()
	for _, n := range sizes {
		f := &fixture{h: h, co: h.CreateCompany(fmt.Sprintf("List Bench %d", n))}
		f.agent = h.CreateAgent(f.co, "Proposer", "engineer")
		f.origin = f.issue(b, map[string]any{"title": "target", "status": "todo", "assigneeAgentId": f.agent.ID})["id"].(string)
		f.runID = "00000000-0000-4000-8000-000000000001"
		rares[n] = f.issue(b, map[string]any{"title": "rare target"})["id"].(string)
		decisionSeedCompany(b, f, n, rares[n])
		fixtures[n] = f
	}
	fmt.Printf("%s: seeded %v decisions in %s\n", b.Name(), sizes, time.Since(start).Round(time.Millisecond))
	// The filtered pages are limited to what both companies have (25 decided decisions in the
	// small one, one naming the rare target), so both answer the same number of rows.
	for _, q := range []string{"", "?status=decided&limit=20", "?targetIssueId=rare&limit=1"} {
		nsPerOp := map[int]float64{}
		for _, n := range sizes {
			p := "/api/companies/" + fixtures[n].co + "/decisions" + strings.ReplaceAll(q, "rare", rares[n])
			b.Run(fmt.Sprintf("%d%s", n, q), func(b *testing.B) {
				for b.Loop() {
					if res := h.Do("GET", p, nil); res.Status != http.StatusOK {
						b.Fatalf("GET %s: %d %s", p, res.Status, res.Body)
					}
				}
				nsPerOp[n] = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			})
		}
		small, large := sizes[0], sizes[len(sizes)-1]
		if nsPerOp[small] > 0 {
			fmt.Printf("%s%s: %d decisions %.2f ms/op, %d decisions %.2f ms/op, ratio %.2fx\n", b.Name(), q, small,
				nsPerOp[small]/1e6, large, nsPerOp[large]/1e6, nsPerOp[large]/nsPerOp[small])
		}
	}
}
