package cases_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/extensions/cases"
)

// TestCaseListPlans seeds a company with 50,000 cases (and a neighbour with 100), then
// EXPLAIN ANALYZEs the exact select of the list for every filter: none may scan the cases
// table sequentially. q runs in both modes: the window of the newest cases (a common term)
// and the trigram index (a rare one).
func TestCaseListPlans(t *testing.T) {
	t.Parallel()
	h, _ := startHost(t)
	setFlag(t, h, true)
	waitStatus(t, h, "cases", "ready")
	start := time.Now()
	s := seedCases(t, h, "Plan Co", "PLN", 50_000)
	seedCases(t, h, "Plan Neighbour Co", "NBR", 100)
	t.Logf("seeded 50,100 cases in %s", time.Since(start).Round(time.Millisecond))
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(h.DatabaseURL)
	require.NoError(t, err)
	cfg.ConnConfig.RuntimeParams["search_path"] = cases.Schema
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer pool.Close()
	explain := func(q string, trigram bool) {
		t.Helper()
		sql, args, err := cases.BuildListQuery(httptest.NewRequest("GET", "/x?"+q, nil), s.CompanyID, trigram)
		require.NoError(t, err, q)
		rows, err := pool.Query(ctx, "EXPLAIN ANALYZE "+sql, args...)
		require.NoError(t, err, "%s: %s", q, sql)
		var plan []string
		for rows.Next() {
			var line string
			require.NoError(t, rows.Scan(&line))
			plan = append(plan, line)
		}
		require.NoError(t, rows.Err())
		text := strings.Join(plan, "\n")
		require.NotContains(t, text, "Seq Scan on cases", "%s sequentially scans cases:\n%s", q, text)
		mode := "window"
		if trigram {
			mode = "trigram"
		}
		t.Logf("%-50s %-7s %s | %s", q, mode, strings.TrimSpace(plan[len(plan)-1]), strings.TrimSpace(plan[0]))
	}
	for _, q := range []string{
		"", "limit=200", "type=contract", "types=contract,memo&statuses=draft,in_review", "status=active", "status=done",
		"type=contract&status=active", "projectId={project}", "projectId={project}&includeNoProject=1&type=memo",
		"includeNoProject=1", "label={label}", "parent={parent}", "q=charlie", "q=pln-c4242", "q=nothing-matches-this",
		"types=contract,memo&q=charlie", "q=ch",
	} {
		q = strings.NewReplacer("{project}", s.ProjectID, "{label}", s.LabelID, "{parent}", s.ParentID).Replace(q)
		explain(q, false)
		if strings.Contains(q, "q=") {
			explain(q, true)
		}
	}
}
