package costs

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

// TestSpendReadsAvoidScanningEvents loads a large ledger and EXPLAINs the very SQL the
// summary and by-agent reads build, over all time, a month and a range with ragged ends:
// none may scan cost_events sequentially (only the sub-hour ends touch it, through its
// index). It also checks the rollup answers against sums over the raw events.
func TestSpendReadsAvoidScanningEvents(t *testing.T) {
	t.Parallel()
	h := startHost(t)
	company := h.CreateCompany("Plan Co")
	var agents []string
	for i := range 8 {
		agents = append(agents, h.CreateAgent(company, fmt.Sprintf("Planner %d", i), "engineer").ID)
	}
	// Another company's history shares the tables.
	other := h.CreateCompany("Noise Co")
	bulkLoad(t, h, other, []string{h.CreateAgent(other, "Noise", "engineer").ID}, 20_000, 30*24*time.Hour)
	took := bulkLoad(t, h, company, agents, 100_000, 60*24*time.Hour)
	t.Logf("loaded 120,000 events and rebuilt rollups in %s", took)

	now := time.Now().UTC()
	ms, me := monthWindow(now)
	ragged := timeRange{From: ptr(now.Add(-20*24*time.Hour - 17*time.Minute - 3*time.Second)), To: ptr(now.Add(-3*time.Hour - 41*time.Minute))}
	ctx := context.Background()
	conn, err := h.Kernel.Pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, `SET search_path TO ext_costs`)
	require.NoError(t, err)
	defer conn.Exec(context.Background(), `RESET search_path`) //nolint:errcheck
	for _, tc := range []struct {
		name  string
		sp    spans
		group []string
	}{
		{"SummaryAllTime", rangeSpans(timeRange{}), nil},
		{"SummaryMonth", decompose(&ms, &me), nil},
		{"SummaryRagged", rangeSpans(ragged), nil},
		{"ByAgentAllTime", rangeSpans(timeRange{}), []string{"agent_id"}},
		{"ByAgentRagged", rangeSpans(ragged), []string{"agent_id"}},
		{"WindowSpend5h", decompose(ptr(now.Add(-5*time.Hour)), nil), []string{"provider", "biller"}},
	} {
		q, args := spendSQL(company, tc.sp, tc.group, spendFilter{}, false)
		rows, err := conn.Query(ctx, "EXPLAIN "+q, args...)
		require.NoError(t, err)
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		plan := strings.Join(lines, "\n")
		require.NotContains(t, plan, "Seq Scan on cost_events", "%s plan:\n%s", tc.name, plan)
		t.Logf("%s plan:\n%s", tc.name, plan)
	}

	// The by-day read touches only the daily rollups (the planner picks their key index or,
	// while the partition is small, a scan of it), never the ledger.
	today := now.Truncate(24 * time.Hour)
	for _, tc := range []struct {
		name string
		from time.Time
		f    spendFilter
	}{{"ByDay14", today.AddDate(0, 0, -13), spendFilter{}}, {"ByDay366", today.AddDate(0, 0, -365), spendFilter{}},
		{"ByDayAgent", today.AddDate(0, 0, -29), spendFilter{AgentID: agents[0]}}} {
		q, args := byDaySQL(company, tc.from, today, tc.f)
		rows, err := conn.Query(ctx, "EXPLAIN "+q, args...)
		require.NoError(t, err)
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		plan := strings.Join(lines, "\n")
		for _, other := range []string{"cost_events", "cost_rollups_hourly", "cost_rollups_monthly"} {
			require.NotContains(t, plan, other, "%s plan:\n%s", tc.name, plan)
		}
		t.Logf("%s plan:\n%s", tc.name, plan)
	}
	// Its days agree with the raw ledger.
	var days []map[string]any
	do(t, h, http.StatusOK, "GET", "/api/companies/"+company+"/costs/by-day?from="+today.AddDate(0, 0, -6).Format(time.DateOnly), nil).JSON(t, &days)
	require.Len(t, days, 7)
	for _, d := range days {
		day, err := time.Parse(time.DateOnly, d["date"].(string))
		require.NoError(t, err)
		end := day.Add(24*time.Hour - time.Microsecond)
		require.EqualValues(t, rawSumOf(t, h, company, &day, &end), num(d["costCents"]), "day %s", d["date"])
	}

	// The rollup-backed reads agree with the raw ledger.
	rawSum := func(from, to *time.Time) int64 { return rawSumOf(t, h, company, from, to) }
	for _, rg := range []timeRange{{}, ragged, {From: &ms}} {
		v := url.Values{}
		if rg.From != nil {
			v.Set("from", iso(*rg.From))
		}
		if rg.To != nil {
			v.Set("to", iso(*rg.To))
		}
		got := obj(t, do(t, h, http.StatusOK, "GET", "/api/companies/"+company+"/costs/summary?"+v.Encode(), nil))
		require.EqualValues(t, rawSum(rg.From, rg.To), got["spendCents"], "range %v", v)
	}
	byAgent := list(t, do(t, h, http.StatusOK, "GET", "/api/companies/"+company+"/costs/by-agent", nil))
	require.Len(t, byAgent, len(agents))
	require.Equal(t, "Planner 0", byAgentName(byAgent, agents[0]))
}

func ptr[T any](v T) *T { return &v }

// rawSumOf sums a company's billed cents over [from, to] (nil ends open) straight from the
// ledger.
func rawSumOf(t *testing.T, h *sdktest.Host, company string, from, to *time.Time) int64 {
	t.Helper()
	var s int64
	require.NoError(t, h.Kernel.Pool.QueryRow(context.Background(), `SELECT coalesce(sum(cost_cents), 0)::bigint FROM ext_costs.cost_events
		WHERE company_id = $1 AND ($2::timestamptz IS NULL OR occurred_at >= $2) AND ($3::timestamptz IS NULL OR occurred_at <= $3)`,
		company, from, to).Scan(&s))
	return s
}

func byAgentName(rows []map[string]any, agentID string) string {
	for _, r := range rows {
		if r["agentId"] == agentID {
			s, _ := r["agentName"].(string)
			return s
		}
	}
	return ""
}
