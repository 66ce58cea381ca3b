package board_test

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

// BenchmarkBoardPages renders each board page in a company of 10,000 issues and prints the
// p50 and p99 of the server's render time (the Server-Timing header: from the board
// receiving the request to the page written, every in-process API call included) and of the
// whole round trip on loopback. The issues are seeded with SQL straight into the work
// extension's table, as its own list benchmark does (extensions/work/bench_test.go), with one
// activity entry each: a fixture, not a read path.
func BenchmarkBoardPages(b *testing.B) {
	h := sdktest.Start(b, sdktest.Options{Builtins: true, ExtensionDirs: []string{sdktest.BuildProcessExtension(b, "../examples/ui-slots")}})
	waitExtensions(b, h)
	co := h.CreateCompany("Bench Co")
	const n = 10_000
	ctx := context.Background()
	_, err := h.Kernel.Pool.Exec(ctx, `INSERT INTO ext_work.issues (id, company_id, title, description, status, priority,
			issue_number, identifier, origin_kind, created_at, updated_at)
		SELECT gen_random_uuid(), $1, 'Issue ' || k || ' ' || (ARRAY['deploy','login','billing','search','export'])[1 + k % 5],
			'Description of issue ' || k, (ARRAY['backlog','todo','in_progress','in_review','blocked','done','cancelled'])[1 + k % 7],
			(ARRAY['critical','high','medium','low'])[1 + k % 4], k, 'BEN-' || k, 'manual',
			now() - k * interval '1 second', now() - k * interval '1 second'
		FROM generate_series(1, $2) AS k`, co, n)
	require.NoError(b, err)
	// Issues created later (the status cards' generation tasks) number after the seeded ones.
	_, err = h.Kernel.Pool.Exec(ctx, `UPDATE kernel.companies SET issue_counter = $2 WHERE id = $1`, co, n)
	require.NoError(b, err)
	_, err = h.Kernel.Pool.Exec(ctx, `VACUUM ANALYZE ext_work.issues`)
	require.NoError(b, err)
	// One created entry per issue in the activity log, for the activity feed (a fixture too).
	_, err = h.Kernel.Pool.Exec(ctx, `INSERT INTO kernel.activity_log (id, company_id, actor_type, actor_id, action,
			entity_type, entity_id, details, created_at)
		SELECT gen_random_uuid(), company_id, 'user', 'local-board', 'issue.created', 'issue', id::text,
			jsonb_build_object('identifier', identifier), created_at
		FROM ext_work.issues WHERE company_id = $1`, co)
	require.NoError(b, err)
	_, err = h.Kernel.Pool.Exec(ctx, `ANALYZE kernel.activity_log`)
	require.NoError(b, err)
	var issueID string
	require.NoError(b, h.Kernel.Pool.QueryRow(ctx, `SELECT id::text FROM ext_work.issues WHERE company_id = $1 AND issue_number = 1`, co).Scan(&issueID))
	for i := 0; i < 20; i++ {
		res := h.Do("POST", "/api/issues/"+issueID+"/comments", map[string]any{"body": fmt.Sprintf("Comment %d", i)})
		require.Equal(b, http.StatusCreated, res.Status, "%s", res.Body)
	}
	// The inbox's 200 open items (approvals) and 300 cases, through the API.
	var approvalID string
	for i := 0; i < 200; i++ {
		res := h.Do("POST", "/api/companies/"+co+"/approvals", map[string]any{"type": "request_board_approval",
			"payload": map[string]any{"summary": fmt.Sprintf("Request %d", i)}})
		require.Equal(b, http.StatusCreated, res.Status, "%s", res.Body)
		approvalID = res.Map(b)["id"].(string)
	}
	res := h.Do("PATCH", "/api/instance/settings/experimental", map[string]any{"enableCases": true, "enableStatusCards": true})
	require.Equal(b, http.StatusOK, res.Status, "%s", res.Body)
	waitPlugin(b, h, "cases", "ready")
	waitPlugin(b, h, "statuscards", "ready")
	// 20 status cards with a summarizer agent of the company.
	summarizer := h.CreateAgent(co, "Bench Summarizer", "general")
	for i := 0; i < 20; i++ {
		res := h.Do("POST", "/api/companies/"+co+"/status-cards", map[string]any{"interestPrompt": fmt.Sprintf("How is area %d doing?", i),
			"title": fmt.Sprintf("Area %d", i), "agentId": summarizer.ID})
		require.Equal(b, http.StatusCreated, res.Status, "%s", res.Body)
	}
	var caseID string
	for i := 0; i < 300; i++ {
		res := h.Do("POST", "/api/companies/"+co+"/cases", map[string]any{"caseType": []string{"incident", "review", "audit"}[i%3],
			"key": fmt.Sprint(i), "title": fmt.Sprintf("Case %d", i), "summary": "Summary of case " + fmt.Sprint(i)})
		require.Equal(b, http.StatusCreated, res.Status, "%s", res.Body)
		caseID = res.Map(b)["id"].(string)
	}
	res = h.Do("PUT", "/api/cases/"+caseID+"/documents/notes", map[string]any{"title": "Notes", "body": "A passage worth annotating."})
	require.Equal(b, http.StatusCreated, res.Status, "%s", res.Body)
	// The agents pages: a roster of 50 agents in a reporting tree, one of which has run.
	var agentIDs []string
	for i := 0; i < 50; i++ {
		body := map[string]any{"name": fmt.Sprintf("Agent %02d", i), "role": "engineer", "adapterType": "process",
			"adapterConfig": map[string]any{"command": "/bin/echo", "args": []string{"bench run"}}}
		if i > 0 {
			body["reportsTo"] = agentIDs[(i-1)/3]
		}
		res := h.Do("POST", "/api/companies/"+co+"/agents", body)
		require.Equal(b, http.StatusCreated, res.Status, "%s", res.Body)
		agentIDs = append(agentIDs, res.Map(b)["id"].(string))
	}
	res = h.Do("POST", "/api/agents/"+agentIDs[0]+"/heartbeat/invoke", map[string]any{})
	require.Equal(b, http.StatusAccepted, res.Status, "%s", res.Body)
	runID := res.Map(b)["id"].(string)
	sdktest.WaitFor(b, 2*time.Minute, func() bool {
		return h.Do("GET", "/api/heartbeat-runs/"+runID, nil).Map(b)["status"] == "succeeded"
	}, "the bench run to succeed")
	pages := []struct{ name, path string }{
		{"Companies", "/companies"},
		{"Dashboard", "/c/" + co},
		{"IssueList", "/c/" + co + "/issues"},
		{"IssueListSearch", "/c/" + co + "/issues?q=billing&status=todo"},
		{"IssueListLastPage", "/c/" + co + "/issues?limit=50&offset=9950"},
		{"IssueListFragment", "/c/" + co + "/issues?sortField=priority"},
		{"IssueDetail", "/c/" + co + "/issues/" + issueID},
		{"Members", "/c/" + co + "/members"},
		{"Skills", "/c/" + co + "/skills"},
		{"Folders", "/c/" + co + "/folders?kind=skill"},
		{"InstanceSettings", "/instance/settings"},
		{"Inbox200", "/c/" + co + "/inbox"},
		{"CasesList", "/c/" + co + "/cases"},
		{"CaseDetail", "/c/" + co + "/cases/" + caseID},
		{"ApprovalDetail", "/c/" + co + "/approvals/" + approvalID},
		{"StatusCards", "/c/" + co + "/status-cards"},
		{"Plugins", "/instance/plugins"},
		{"Plugin", "/instance/plugins/example.ui_slots"},
		{"Adapters", "/instance/adapters"},
		{"ExtensionPage", "/c/" + co + "/x/example.ui_slots/home"},
		{"ExtensionWidgets", "/c/" + co + "/x-slots/company.dashboardWidget"},
		{"IssueBoard", "/c/" + co + "/issues/board"},
		{"IssueBoardSearch", "/c/" + co + "/issues/board?q=billing"},
		{"Activity", "/c/" + co + "/activity"},
		{"ActivityIssues", "/c/" + co + "/activity?entityType=issue"},
		{"AgentList50", "/c/" + co + "/agents"},
		{"AgentDetail", "/c/" + co + "/agents/" + agentIDs[0]},
		{"Runs", "/c/" + co + "/runs"},
		{"Run", "/c/" + co + "/runs/" + runID},
	}
	pages = append(pages, benchOpsPages(b, h, co)...)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, p := range pages {
		b.Run(p.name, func(b *testing.B) {
			var server, total []time.Duration
			get := func() {
				req, _ := http.NewRequest("GET", h.URL+p.path, nil)
				if p.name == "IssueListFragment" {
					req.Header.Set("HX-Request", "true")
				}
				start := time.Now()
				res, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = res.Body.Read(make([]byte, 1))
				res.Body.Close()
				total = append(total, time.Since(start))
				if res.StatusCode != http.StatusOK {
					b.Fatalf("GET %s: %d", p.path, res.StatusCode)
				}
				server = append(server, serverTiming(b, res.Header.Get("Server-Timing")))
			}
			get()
			server, total = server[:0], total[:0]
			for b.Loop() {
				get()
			}
			fmt.Printf("board %-18s %d issues: server p50 %6.1f ms p99 %6.1f ms · round trip p50 %6.1f ms (%d requests)\n",
				p.name, n, ms(pct(server, 50)), ms(pct(server, 99)), ms(pct(total, 50)), len(server))
		})
	}
}

func serverTiming(tb testing.TB, h string) time.Duration {
	tb.Helper()
	_, v, ok := strings.Cut(h, "dur=")
	if !ok {
		tb.Fatalf("no Server-Timing duration in %q", h)
	}
	f, err := strconv.ParseFloat(v, 64)
	require.NoError(tb, err)
	return time.Duration(f * float64(time.Millisecond))
}

func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[(len(s)-1)*p/100]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
