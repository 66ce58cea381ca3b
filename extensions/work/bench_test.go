package work

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"

	"github.com/keelhq/keel/host"
	"github.com/keelhq/keel/sdktest"
)

// issueSeed is what issueSeedCompany put in a company.
type issueSeed struct {
	CompanyID, ProjectID, GoalID, LabelID, ParentID, AgentID string
}

// issueBenchStart starts a host for the benchmarks and the plan test and waits for the work
// extension (see issStart in issues_test.go for why it may need a moment).
func issueBenchStart(tb testing.TB) *sdktest.Host {
	tb.Helper()
	// The benchmarks time the reads' queries: the host's read cache would answer repeats.
	h := sdktest.Start(tb, sdktest.Options{Builtins: true, Configure: func(c *host.Config) { c.DisableReadCache = true }})
	sdktest.WaitFor(tb, 60*time.Second, func() bool {
		res := h.Do("GET", "/api/plugins/work", nil)
		return res.Status == http.StatusOK && strings.Contains(string(res.Body), `"status":"ready"`)
	}, "the work extension to be ready")
	return h
}

// issueSeedCompany creates a company and bulk-loads n issues into it with one
// INSERT … SELECT generate_series through the superuser pool (seeding only: the kernel's
// issue counter is not advanced). Issue k is <prefix>-k; titles draw two words from fixed
// lists (so a word matches 1/40 of the issues), statuses, priorities and origins rotate,
// updated_at decreases with k; every 9th issue has an agent assignee, every 20th a user
// assignee, every 100th the project, every 97th the goal, every 50th the parent <prefix>-1
// and every 30th the label; every 50th (k % 50 = 7) is hidden, like a plugin's operation issue.
func issueSeedCompany(tb testing.TB, h *sdktest.Host, name, prefix string, n int) *issueSeed {
	tb.Helper()
	ctx := context.Background()
	s := &issueSeed{CompanyID: h.CreateCompany(name), ProjectID: uuid.NewString(), GoalID: uuid.NewString(),
		LabelID: uuid.NewString(), AgentID: uuid.NewString()}
	pool := h.Kernel.Pool
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO ext_work.projects (id, company_id, name) VALUES ($1, $2, 'Seeded project')`, []any{s.ProjectID, s.CompanyID}},
		{`INSERT INTO ext_work.goals (id, company_id, title) VALUES ($1, $2, 'Seeded goal')`, []any{s.GoalID, s.CompanyID}},
		{`INSERT INTO ext_work.labels (id, company_id, name, color) VALUES ($1, $2, 'seeded', '#123456')`, []any{s.LabelID, s.CompanyID}},
		{`INSERT INTO ext_work.issues (id, company_id, title, status, priority, issue_number, identifier, origin_kind, origin_id,
				assignee_agent_id, assignee_user_id, project_id, goal_id, hidden_at, created_at, updated_at)
			SELECT gen_random_uuid(), $1,
				'Issue ' || k || ' ' || (ARRAY['deploy','login','billing','search','export','import','invoice','report','cache','queue',
					'worker','schema','backup','restore','upload','download','payment','refund','email','webhook','token','session',
					'profile','avatar','theme','layout','chart','metric','alert','pager','audit','policy','budget','quota','limit',
					'retry','timeout','latency','memory','cursor'])[1 + k % 40]
				|| ' ' || (ARRAY['fix','add','remove','rework','document','test','speed','split'])[1 + (k / 40) % 8],
				(ARRAY['backlog','todo','in_progress','in_review','blocked','done','cancelled'])[1 + k % 7],
				(ARRAY['critical','high','medium','low'])[1 + k % 4],
				k, $2 || '-' || k,
				CASE k % 10 WHEN 0 THEN 'routine_execution' WHEN 1 THEN 'plugin:acme.sync' ELSE 'manual' END,
				CASE WHEN k % 10 <= 1 THEN 'origin-' || (k % 1000) END,
				CASE WHEN k % 9 = 0 THEN $4::uuid END,
				CASE WHEN k % 20 = 0 THEN 'user-' || (k % 7) END,
				CASE WHEN k % 100 = 0 THEN $5::uuid END,
				CASE WHEN k % 97 = 0 THEN $6::uuid END,
				CASE WHEN k % 50 = 7 THEN now() END,
				now() - k * interval '1 second', now() - k * interval '1 second'
			FROM generate_series(1, $3) AS k`, []any{s.CompanyID, prefix, n, s.AgentID, s.ProjectID, s.GoalID}},
		{`UPDATE ext_work.issues SET parent_id = (SELECT id FROM ext_work.issues WHERE company_id = $1 AND issue_number = 1)
			WHERE company_id = $1 AND issue_number % 50 = 0`, []any{s.CompanyID}},
		{`INSERT INTO ext_work.issue_labels (issue_id, label_id, company_id)
			SELECT id, $2, $1 FROM ext_work.issues WHERE company_id = $1 AND issue_number % 30 = 0`, []any{s.CompanyID, s.LabelID}},
	} {
		_, err := pool.Exec(ctx, q.sql, q.args...)
		require.NoError(tb, err)
	}
	require.NoError(tb, pool.QueryRow(ctx, `SELECT id::text FROM ext_work.issues WHERE company_id = $1 AND issue_number = 1`,
		s.CompanyID).Scan(&s.ParentID))
	for _, table := range []string{"ext_work.issues", "ext_work.issue_labels"} {
		_, err := pool.Exec(ctx, `VACUUM ANALYZE `+table)
		require.NoError(tb, err)
	}
	return s
}

// issueBenchSizes are the company sizes compared.
var issueBenchSizes = []int{100, 100_000}

// issueBenchRun measures one request path per company size and logs the ratio of the
// largest to the smallest.
func issueBenchRun(b *testing.B, path func(s *issueSeed) string) {
	h := issueBenchStart(b)
	start := time.Now()
	seeds := map[int]*issueSeed{}
	for _, n := range issueBenchSizes {
		name, prefix := "Small Co", "SML"
		if n >= 10_000 {
			name, prefix = "Big Co", "BIG"
		}
		seeds[n] = issueSeedCompany(b, h, name, prefix, n)
	}
	fmt.Printf("%s: seeded %v issues in %s\n", b.Name(), issueBenchSizes, time.Since(start).Round(time.Millisecond))
	nsPerOp := map[int]float64{}
	for _, n := range issueBenchSizes {
		p := path(seeds[n])
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			if res := h.Do("GET", p, nil); res.Status != http.StatusOK {
				b.Fatalf("GET %s: %d %s", p, res.Status, res.Body)
			}
			for b.Loop() {
				if res := h.Do("GET", p, nil); res.Status != http.StatusOK {
					b.Fatalf("GET %s: %d %s", p, res.Status, res.Body)
				}
			}
			nsPerOp[n] = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		})
	}
	small, large := issueBenchSizes[0], issueBenchSizes[len(issueBenchSizes)-1]
	if nsPerOp[small] > 0 {
		// Printed, not logged: benchmark logs only show with -v.
		fmt.Printf("%s: %d issues %.0f ns/op, %d issues %.0f ns/op, ratio %.2fx\n",
			b.Name(), small, nsPerOp[small], large, nsPerOp[large], nsPerOp[large]/nsPerOp[small])
	}
}

// BenchmarkIssueList lists the first page (50, default sort updatedAt desc) of a company with
// 100 issues and of one with 100,000.
func BenchmarkIssueList(b *testing.B) {
	issueBenchRun(b, func(s *issueSeed) string { return "/api/companies/" + s.CompanyID + "/issues" })
}

// BenchmarkIssueSearch runs a q search (a title word carried by 1 issue in 40) in both companies.
func BenchmarkIssueSearch(b *testing.B) {
	issueBenchRun(b, func(s *issueSeed) string { return "/api/companies/" + s.CompanyID + "/issues?q=deploy" })
}

// TestIssueListUsesIndexes seeds a company with 30,000 issues (and a neighbour with 3,000),
// one in 50 hidden, then EXPLAINs the exact select IssueList runs for every filter and sort
// and requires that none scans the issues table sequentially (the hidden_at IS NULL filter
// every list and count carries is served by the partial indexes of migration 0045).
func TestIssueListUsesIndexes(t *testing.T) {
	t.Parallel()
	h := issueBenchStart(t)
	start := time.Now()
	// KEEL_PLAN_ISSUES=100000 seeds that many issues instead and EXPLAINs with ANALYZE,
	// logging each statement's execution time (go test -v -run TestIssueListUsesIndexes).
	size, explain := 30_000, "EXPLAIN "
	if v, err := strconv.Atoi(os.Getenv("KEEL_PLAN_ISSUES")); err == nil && v >= 1000 {
		size, explain = v, "EXPLAIN (ANALYZE) "
	}
	s := issueSeedCompany(t, h, "Plan Co", "PLN", size)
	issueSeedCompany(t, h, "Neighbour Co", "NBR", 3_000)
	t.Logf("seeded %d issues in %s", size+3_000, time.Since(start).Round(time.Millisecond))
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(h.DatabaseURL)
	require.NoError(t, err)
	cfg.ConnConfig.RuntimeParams["search_path"] = Schema
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer pool.Close()
	db := bun.NewDB(stdlib.OpenDBFromPool(pool), pgdialect.New())
	defer db.Close()
	st := newIssueStore(db)

	base := func() *IssueListParams {
		return &IssueListParams{CompanyID: s.CompanyID, SortField: "updatedAt", SortDir: "desc", Limit: 50}
	}
	cases := map[string]func(p *IssueListParams){
		"default":              func(p *IssueListParams) {},
		"offset":               func(p *IssueListParams) { p.Offset = 5000 },
		"status":               func(p *IssueListParams) { p.Statuses = []string{"todo"} },
		"statuses":             func(p *IssueListParams) { p.Statuses = []string{"todo", "in_progress", "blocked"} },
		"assigneeAgentId":      func(p *IssueListParams) { p.AssigneeAgentID = s.AgentID },
		"assigneeAgentId=null": func(p *IssueListParams) { p.Unassigned = true },
		"assigneeUserId":       func(p *IssueListParams) { p.AssigneeUserID = "user-3" },
		"projectId":            func(p *IssueListParams) { p.ProjectID = s.ProjectID },
		"parentId":             func(p *IssueListParams) { p.ParentID = s.ParentID },
		"parentId=null":        func(p *IssueListParams) { p.TopLevel = true },
		"goalId":               func(p *IssueListParams) { p.GoalID = s.GoalID },
		"labelId":              func(p *IssueListParams) { p.LabelID = s.LabelID },
		"q word":               func(p *IssueListParams) { p.Q = "deploy" },
		"q prefix":             func(p *IssueListParams) { p.Q = "depl" },
		"q identifier":         func(p *IssueListParams) { p.Q = "pln-1234" },
		"originKind":           func(p *IssueListParams) { p.OriginKind = "routine_execution" },
		"originKindPrefix":     func(p *IssueListParams) { p.OriginKindPrefix = "plugin:" },
		"originId":             func(p *IssueListParams) { p.OriginID = "origin-11" },
		"excludeRoutine":       func(p *IssueListParams) { p.ExcludeRoutineExecutions = true },
		"sort createdAt":       func(p *IssueListParams) { p.SortField = "createdAt" },
		"sort createdAt asc":   func(p *IssueListParams) { p.SortField, p.SortDir = "createdAt", "asc" },
		"sort priority":        func(p *IssueListParams) { p.SortField = "priority" },
		"sort status":          func(p *IssueListParams) { p.SortField = "status" },
		"sort updatedAt asc":   func(p *IssueListParams) { p.SortDir = "asc" },
		"status+assignee":      func(p *IssueListParams) { p.Statuses, p.AssigneeAgentID = []string{"todo"}, s.AgentID },
		"status+q+excludeRoutine": func(p *IssueListParams) {
			p.Statuses, p.Q, p.ExcludeRoutineExecutions = []string{"done"}, "login", true
		},
	}
	for name, mod := range cases {
		p := base()
		mod(p)
		for kind, sql := range map[string]string{
			"list":  st.issueListSelect(p, nil).ColumnExpr(issueColumns()).String(),
			"count": st.issueListQuery(p, nil).ColumnExpr("count(*)").String(),
		} {
			rows, err := pool.Query(ctx, explain+sql)
			require.NoError(t, err, "%s %s: %s", name, kind, sql)
			var plan []string
			for rows.Next() {
				var line string
				require.NoError(t, rows.Scan(&line))
				plan = append(plan, line)
			}
			require.NoError(t, rows.Err())
			text := strings.Join(plan, "\n")
			// assert, not require: one bad plan is reported with the plans of every other case.
			assert.NotContains(t, text, "Seq Scan on issues", "%s %s sequentially scans issues:\n%s\n%s", name, kind, sql, text)
			if kind == "list" || explain != "EXPLAIN " {
				t.Logf("%s %s: %s %s [%s]", name, kind, strings.TrimSpace(plan[0]), strings.TrimSpace(plan[len(plan)-1]),
					strings.Join(planIndexes(plan), ", "))
			}
		}
		// The same parameters answer through the store, without hidden issues.
		list, err := st.IssueList(ctx, pool, p)
		require.NoError(t, err, name)
		require.LessOrEqual(t, len(list), 50)
		for _, iss := range list {
			require.Nil(t, iss.HiddenAt, "%s lists hidden issue %s", name, iss.Identifier)
		}
	}
	// Every 50th issue (k % 50 = 7) is hidden: the count leaves those out.
	n, err := st.IssueCount(ctx, base())
	require.NoError(t, err)
	require.Equal(t, size-(size+43)/50, n)

	issueLookupsUseIndexes(t, pool, explain, s)
}

// issueLookupsUseIndexes EXPLAINs the issue reads other than the list that the issues
// table's narrow indexes serve (by identifier, by parent, by project) and requires each to
// scan its index: migration 0050 made those indexes fewer and partial.
func issueLookupsUseIndexes(t *testing.T, pool *pgxpool.Pool, explain string, s *issueSeed) {
	ctx := context.Background()
	c, p := "'"+s.CompanyID+"'", "'"+s.ParentID+"'"
	cases := []struct{ name, sql, index string }{
		{"issue by identifier", `SELECT id FROM issues WHERE upper(identifier) = upper('pln-1234')`, "issues_identifier_key"},
		{"locks by identifier", `SELECT id FROM issues WHERE company_id = ` + c + ` AND upper(identifier) = 'PLN-1234'`,
			"issues_identifier_key"},
		{"fingerprints by identifiers", `SELECT id FROM issues WHERE upper(identifier) = ANY(ARRAY['PLN-1', 'PLN-77']) AND company_id = ` + c,
			"issues_identifier_key"},
		{"search identifier prefix", `SELECT i.id FROM issues i WHERE i.company_id = ` + c + ` AND i.hidden_at IS NULL
			AND (i.search_vector @@ websearch_to_tsquery('simple', 'PLN-12') OR upper(i.identifier) LIKE 'PLN-12%')`,
			"issues_identifier_key"},
		{"children count", `SELECT count(*) FROM issues c WHERE c.parent_id = ` + p, "issues_parent_idx"},
		{"descendants", `WITH RECURSIVE tree(id, depth) AS (SELECT c.id, 1 FROM issues c WHERE c.parent_id = ` + p + `
			UNION SELECT c.id, tree.depth + 1 FROM tree JOIN issues c ON c.parent_id = tree.id WHERE tree.depth < 100)
			SELECT count(DISTINCT id) FROM tree`, "issues_parent_idx"},
		{"project issues", `SELECT id FROM issues WHERE company_id = ` + c + ` AND project_id = '` + s.ProjectID + `'`,
			"issues_company_project_idx"},
	}
	for _, tc := range cases {
		plan := issueExplain(t, pool, explain+tc.sql)
		assert.Contains(t, planIndexes(plan), tc.index, "%s:\n%s", tc.name, strings.Join(plan, "\n"))
		t.Logf("%s: %s %s [%s]", tc.name, strings.TrimSpace(plan[0]), strings.TrimSpace(plan[len(plan)-1]),
			strings.Join(planIndexes(plan), ", "))
	}
	// A parent's delete sets its children's parent_id null through the foreign key, whose
	// statement is planned once for any parent: the generic plan must take the index too.
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	for _, q := range []string{`SET plan_cache_mode = force_generic_plan`,
		`PREPARE parent_fk(uuid) AS SELECT 1 FROM ONLY issues x WHERE $1 OPERATOR(pg_catalog.=) parent_id FOR KEY SHARE OF x`} {
		_, err := conn.Exec(ctx, q)
		require.NoError(t, err)
	}
	rows, err := conn.Query(ctx, `EXPLAIN EXECUTE parent_fk(`+p+`)`)
	require.NoError(t, err)
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	assert.Contains(t, planIndexes(plan), "issues_parent_idx", "parent foreign key:\n%s", strings.Join(plan, "\n"))
	t.Logf("parent foreign key (generic plan): %s [%s]", strings.TrimSpace(plan[0]), strings.Join(planIndexes(plan), ", "))
	_, err = conn.Exec(ctx, `DEALLOCATE parent_fk; RESET plan_cache_mode`)
	require.NoError(t, err)
}

// issueExplain runs an EXPLAIN statement and returns its lines.
func issueExplain(t *testing.T, pool *pgxpool.Pool, sql string) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), sql)
	require.NoError(t, err, sql)
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err, sql)
	return plan
}

// issueWriteMix is the seed harness's create mix: every issue has a short description, 4 in
// 5 are in a project and about half are assigned to an agent.
func issueWriteMix(k int64) (inProject, assigned bool) { return k%5 != 0, k%20 < 11 }

// BenchmarkIssueInsert times the issue INSERT alone (the statement a create runs, every
// column bound, committed without waiting for the WAL flush) into a company that already
// holds 100,000 issues: serially (one insert's cost) and 16 in flight (throughput on this
// machine's cores). It measures what the table's indexes cost a create.
func BenchmarkIssueInsert(b *testing.B) {
	h := issueBenchStart(b)
	s := issueSeedCompany(b, h, "Big Co", "BIG", 100_000)
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(h.DatabaseURL)
	require.NoError(b, err)
	cfg.ConnConfig.RuntimeParams["search_path"] = Schema
	cfg.MaxConns = 16
	// The commit's WAL flush is the same whatever the indexes: leave it out of the timing.
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(b, err)
	defer pool.Close()
	var next atomic.Int64
	next.Store(100_000)
	issue := func() *Issue {
		k := next.Add(1)
		iss := &Issue{ID: uuid.NewString(), CompanyID: s.CompanyID, IssueNumber: k, Identifier: fmt.Sprintf("BIG-%d", k),
			Title: fmt.Sprintf("Benchmark issue %d deploy fix", k), Status: StatusBacklog, WorkMode: "standard",
			Priority: "medium", OriginKind: "manual", CreatedByUserID: issueStrPtr("local-board")}
		iss.Description = issueStrPtr("Steps to reproduce, what happened and what should have happened instead.")
		if inProject, assigned := issueWriteMix(k); inProject || assigned {
			if inProject {
				iss.ProjectID = &s.ProjectID
			}
			if assigned {
				iss.AssigneeAgentID, iss.Status = &s.AgentID, StatusTodo
			}
		}
		return iss
	}
	insert := func() error {
		_, err := pool.Exec(ctx, issueInsertSQL(), issueInsertArgs(issue())...)
		return err
	}
	b.Run("serial", func(b *testing.B) {
		// One connection, so that its server process's CPU time (user and system, from
		// /proc: the embedded server runs on this machine) is the inserts' own; wall time
		// on a shared machine also counts other processes' turns.
		conn, err := pool.Acquire(ctx)
		require.NoError(b, err)
		defer conn.Release()
		var pid int
		require.NoError(b, conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid))
		var wal0 string
		require.NoError(b, conn.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&wal0))
		cpu0 := procCPU(pid)
		for b.Loop() {
			if _, err := conn.Exec(ctx, issueInsertSQL(), issueInsertArgs(issue())...); err != nil {
				b.Fatal(err)
			}
		}
		if cpu1 := procCPU(pid); cpu0 >= 0 && cpu1 >= 0 {
			b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/float64(b.N), "pg-cpu-ns/op")
		}
		// The WAL the inserts wrote (the heap row and one entry per index it went into) does
		// not depend on the machine's load.
		var walBytes float64
		require.NoError(b, conn.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::pg_lsn)::float8`, wal0).
			Scan(&walBytes))
		b.ReportMetric(walBytes/float64(b.N), "wal-B/op")
	})
	b.Run("parallel16", func(b *testing.B) {
		b.SetParallelism(max(1, 16/runtime.GOMAXPROCS(0)))
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := insert(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkIssueCreate times POST /api/companies/{id}/issues through the host, 16 in
// flight, into one company of 100,000 issues (the seed mix, without assignees: the seeded
// agent id is no real agent). The creates' number reservations coalesce per company.
func BenchmarkIssueCreate(b *testing.B) {
	h := issueBenchStart(b)
	s := issueSeedCompany(b, h, "Big Co", "BIG", 100_000)
	// The seed does not advance the company's issue counter: move it past the seeded numbers.
	_, err := h.Kernel.Pool.Exec(context.Background(), `UPDATE kernel.companies SET issue_counter = 100000 WHERE id = $1`, s.CompanyID)
	require.NoError(b, err)
	path := "/api/companies/" + s.CompanyID + "/issues"
	var next atomic.Int64
	b.SetParallelism(max(1, 16/runtime.GOMAXPROCS(0)))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			k := next.Add(1)
			body := map[string]any{"title": fmt.Sprintf("Benchmark issue %d", k),
				"description": "Steps to reproduce, what happened and what should have happened instead."}
			if inProject, _ := issueWriteMix(k); inProject {
				body["projectId"] = s.ProjectID
			}
			if res := h.Do("POST", path, body); res.Status != http.StatusCreated {
				b.Errorf("POST %s: %d %s", path, res.Status, res.Body)
				return
			}
		}
	})
}

// planIndexes returns the indexes an EXPLAIN output scans, in plan order.
func planIndexes(plan []string) []string {
	var out []string
	for _, line := range plan {
		if _, after, ok := strings.Cut(line, " using "); ok {
			out = append(out, strings.Fields(after)[0])
		} else if _, after, ok := strings.Cut(line, "Bitmap Index Scan on "); ok {
			out = append(out, strings.Fields(after)[0])
		}
	}
	return out
}

// procCPU returns the user and system CPU time process pid has used, read from /proc
// (-1 where there is none).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	// The fields after the command name (in parentheses, which may hold spaces): utime and
	// stime are the 12th and 13th, in clock ticks (100 a second on Linux).
	_, rest, ok := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if !ok || len(f) < 13 {
		return -1
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return -1
	}
	return time.Duration(ut+st) * (time.Second / 100)
}
