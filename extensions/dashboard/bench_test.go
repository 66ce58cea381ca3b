package dashboard_test

import (
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

// BenchmarkDashboard reads GET /api/companies/{companyId}/dashboard through a real host
// (kernel, dashboard process, and the agents, work and costs processes it asks).
//
//   - Serial: one reader of a company with 20 agents, 500 issues in every status, 20
//     pending approvals, 50 cost events and 2,000 runs over the last 14 days (ns/op is
//     the latency of one snapshot).
//   - Parallel32: 32 concurrent readers of that company (req/s), the load the design
//     budget is stated for; concurrent reads of one company share a round of owner calls.
//   - Parallel32Companies: 32 concurrent readers spread over that company and 31 smaller
//     ones (5 agents, 50 issues, 5 approvals, 10 cost events and 2,000 runs each), so
//     nothing is shared (req/s).
//
// The fixtures are bulk-loaded, so the tables are analyzed afterwards as autovacuum would.
func BenchmarkDashboard(b *testing.B) {
	h := startHost(b)
	companies := make([]string, 32)
	companies[0] = benchCompany(b, h, "Dashboard Bench", 500, 20, 20, 50, 2000)
	for i := 1; i < len(companies); i++ {
		companies[i] = benchCompany(b, h, fmt.Sprintf("Dashboard Bench %d", i), 50, 5, 5, 10, 2000)
	}
	for _, table := range []string{"ext_agents.heartbeat_runs", "ext_agents.agent_configs", "ext_work.issues", "ext_work.approvals",
		"ext_work.projects"} {
		exec(b, h, "ANALYZE "+table)
	}

	client := &http.Client{Transport: &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 64}}
	get := func(company string) error {
		res, err := client.Get(h.URL + "/api/companies/" + company + "/dashboard")
		if err != nil {
			return err
		}
		defer res.Body.Close()
		if _, err := io.Copy(io.Discard, res.Body); err != nil {
			return err
		}
		if res.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", res.StatusCode)
		}
		return nil
	}
	for _, c := range companies {
		require.NoError(b, get(c))
	}

	b.Run("Serial", func(b *testing.B) {
		for b.Loop() {
			if err := get(companies[0]); err != nil {
				b.Fatal(err)
			}
		}
	})
	parallel := func(b *testing.B, pick func(i int64) string) {
		b.SetParallelism(16) // 16 × GOMAXPROCS (2 on the reference machine) readers
		var n atomic.Int64
		t0 := time.Now()
		b.RunParallel(func(pb *testing.PB) {
			company := pick(n.Add(1))
			for pb.Next() {
				if err := get(company); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/time.Since(t0).Seconds(), "req/s")
	}
	b.Run("Parallel32", func(b *testing.B) { parallel(b, func(int64) string { return companies[0] }) })
	b.Run("Parallel32Companies", func(b *testing.B) {
		parallel(b, func(i int64) string { return companies[i%int64(len(companies))] })
	})
}

// benchCompany creates a company with process agents, issues in every status, pending
// approvals, cost events this month and runs every 10 minutes back from now.
func benchCompany(b testing.TB, h *sdktest.Host, name string, issues, nAgents, approvals, costs, runs int) string {
	b.Helper()
	company := h.CreateCompany(name)
	var agents []string
	for i := range nAgents {
		agents = append(agents, createAgent(b, h, company, fmt.Sprintf("Bench %d", i), "/bin/true"))
	}
	statuses := []string{"backlog", "todo", "in_progress", "in_review", "blocked", "done", "done", "cancelled"}
	for i := range issues {
		do(b, h, "POST", "/api/companies/"+company+"/issues",
			map[string]any{"title": fmt.Sprintf("Issue %d", i), "status": statuses[i%len(statuses)]}, http.StatusCreated)
	}
	for range approvals {
		do(b, h, "POST", "/api/companies/"+company+"/approvals",
			map[string]any{"type": "request_board_approval", "payload": map[string]any{}}, http.StatusCreated)
	}
	for i := range costs {
		do(b, h, "POST", "/api/companies/"+company+"/cost-events", map[string]any{"agentId": agents[i%len(agents)],
			"provider": "anthropic", "model": "m1", "costCents": 10, "occurredAt": time.Now().UTC().Format(time.RFC3339Nano)}, http.StatusCreated)
	}
	// Runs round-robin over the agents, statuses and error codes.
	exec(b, h, `INSERT INTO ext_agents.heartbeat_runs (id, company_id, agent_id, status, error_code, created_at, updated_at)
		SELECT gen_random_uuid(), $1, ($2::uuid[])[1 + i % $4],
			(ARRAY['succeeded', 'succeeded', 'succeeded', 'failed', 'timed_out', 'cancelled'])[1 + i % 6],
			CASE WHEN i % 2 = 1 THEN 'provider_quota' END, now() - i * interval '10 minutes', now()
		FROM generate_series(0, $3 - 1) AS i`, company, agents, runs, len(agents))
	return company
}
