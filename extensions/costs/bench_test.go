package costs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	_ "github.com/keelhq/keel/extensions/dashboard" // for BenchmarkDashboard1M
	"github.com/keelhq/keel/host"
	"github.com/keelhq/keel/host/pgembed/pgtest"
	"github.com/keelhq/keel/sdktest"
)

// bench1M is a database holding one company with 1,000,000 cost events over 90 days,
// loaded once per test binary and shared by the 1M benchmarks (each starts its own host
// on it: the framework calls a benchmark more than once).
var bench1M struct {
	mu      sync.Mutex
	dsn     string
	company string
	agents  []string
}

const bench1MEvents = 1_000_000

func start1M(b *testing.B) (*sdktest.Host, string) {
	b.Helper()
	bench1M.mu.Lock()
	defer bench1M.mu.Unlock()
	if bench1M.dsn == "" {
		c := pgtest.Cluster(b)
		require.NoError(b, c.EnsureDatabase(context.Background(), "costs_bench_1m"))
		bench1M.dsn = c.DSN("costs_bench_1m")
	}
	// The benchmarks time the reads' queries: the host's read cache would answer repeats.
	h := sdktest.Start(b, sdktest.Options{Builtins: true, DatabaseURL: bench1M.dsn, Configure: func(c *host.Config) { c.DisableReadCache = true }})
	if bench1M.company == "" {
		company := h.CreateCompany("Million Co")
		var agents []string
		for i := range 10 {
			agents = append(agents, h.CreateAgent(company, fmt.Sprintf("Agent %d", i), "engineer").ID)
		}
		took := bulkLoad(b, h, company, agents, bench1MEvents, 90*24*time.Hour)
		b.Logf("loaded %d cost events and rebuilt rollups in %s", bench1MEvents, took)
		bench1M.company, bench1M.agents = company, agents
	}
	return h, bench1M.company
}

// benchGet times GET path b.N times.
func benchGet(b *testing.B, h *sdktest.Host, path string) {
	b.Helper()
	res := h.Do("GET", path, nil)
	require.Equal(b, http.StatusOK, res.Status, "%s", res.Body)
	b.ResetTimer()
	for range b.N {
		res := h.Do("GET", path, nil)
		if res.Status != http.StatusOK {
			b.Fatalf("GET %s: %d %s", path, res.Status, res.Body)
		}
	}
}

// BenchmarkCostsSummary1M times GET costs/summary of a company with 1,000,000 cost events:
// all time, the current month (the dashboard's figure) and a 30-day range with ragged ends.
func BenchmarkCostsSummary1M(b *testing.B) {
	h, company := start1M(b)
	now := time.Now().UTC()
	ms, _ := monthWindow(now)
	base := "/api/companies/" + company + "/costs/summary"
	b.Run("AllTime", func(b *testing.B) { benchGet(b, h, base) })
	b.Run("Month", func(b *testing.B) { benchGet(b, h, base+"?from="+url.QueryEscape(iso(ms))) })
	b.Run("Ragged30d", func(b *testing.B) {
		benchGet(b, h, base+"?from="+url.QueryEscape(iso(now.Add(-30*24*time.Hour-7*time.Minute)))+"&to="+url.QueryEscape(iso(now.Add(-13*time.Minute))))
	})
}

// BenchmarkCostsByAgent1M times GET costs/by-agent of a company with 1,000,000 cost events.
func BenchmarkCostsByAgent1M(b *testing.B) {
	h, company := start1M(b)
	now := time.Now().UTC()
	base := "/api/companies/" + company + "/costs/by-agent"
	b.Run("AllTime", func(b *testing.B) { benchGet(b, h, base) })
	b.Run("Ragged30d", func(b *testing.B) {
		benchGet(b, h, base+"?from="+url.QueryEscape(iso(now.Add(-30*24*time.Hour-7*time.Minute)))+"&to="+url.QueryEscape(iso(now.Add(-13*time.Minute))))
	})
}

// BenchmarkDashboard1M times GET dashboard of a company with 1,000,000 cost events (its
// month spend comes from the costs owner's rollups).
func BenchmarkDashboard1M(b *testing.B) {
	h, company := start1M(b)
	benchGet(b, h, "/api/companies/"+company+"/dashboard")
}

// BenchmarkCostEventIngest posts b.N cost events over HTTP from 32 concurrent clients
// (ten agents of one company, a monthly company budget policy evaluated on every event)
// and reports events per second.
func BenchmarkCostEventIngest(b *testing.B) {
	h := startHost(b)
	company := h.CreateCompany("Ingest Co")
	var agents []string
	for i := range 10 {
		agents = append(agents, createAgent(b, h, company, fmt.Sprintf("Ingester %d", i)))
	}
	do(b, h, http.StatusOK, "PATCH", "/api/companies/"+company+"/budgets", map[string]any{"budgetMonthlyCents": 1 << 40})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	url := h.URL + "/api/companies/" + company + "/cost-events"
	post := func(i int) error {
		body, _ := json.Marshal(map[string]any{"agentId": agents[i%len(agents)], "provider": "anthropic", "model": "m1",
			"costCents": 1 + i%5, "inputTokens": 100, "outputTokens": 10, "occurredAt": iso(time.Now())})
		return postCreated(client, url, body)
	}
	require.NoError(b, post(0))
	b.ResetTimer()
	elapsed := postConcurrently(b, 32, post)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
	var total int64
	for i := 1; i <= b.N; i++ {
		total += int64(1 + i%5)
	}
	got := obj(b, do(b, h, http.StatusOK, "GET", "/api/companies/"+company, nil))
	require.EqualValues(b, total+1, got["spentMonthlyCents"], "every event reached the company's month spend")
}

// postConcurrently calls post(1) … post(b.N) from clients goroutines, stops the benchmark's
// timer and returns the time they took; the first error fails the benchmark.
func postConcurrently(b *testing.B, clients int, post func(i int) error) time.Duration {
	b.Helper()
	var next atomic.Int64
	var failed atomic.Value
	start := time.Now()
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for {
				i := int(next.Add(1))
				if i > b.N {
					return
				}
				if err := post(i); err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	return elapsed
}

// postCreated posts a JSON body and requires 201 Created.
func postCreated(client *http.Client, url string, body []byte) error {
	res, err := client.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusCreated {
		return fmt.Errorf("status %d: %s", res.StatusCode, b)
	}
	return nil
}
