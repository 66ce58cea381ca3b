package work_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/extensions/work"
	"github.com/keelhq/keel/sdk"
	extensionv1 "github.com/keelhq/keel/sdk/proto/extension/v1"
	"github.com/keelhq/keel/sdktest"
)

// searchErrPaths returns the detail paths of a search validation error.
func searchErrPaths(t testing.TB, err error) []string {
	t.Helper()
	var e *sdk.Error
	require.True(t, errors.As(err, &e), "error %T %v", err, err)
	require.Equal(t, http.StatusBadRequest, e.Status)
	require.Equal(t, "Validation error", e.Message)
	b, jerr := json.Marshal(e.Details)
	require.NoError(t, jerr)
	var details []struct {
		Path string `json:"path"`
	}
	require.NoError(t, json.Unmarshal(b, &details))
	var paths []string
	for _, d := range details {
		paths = append(paths, d.Path)
	}
	return paths
}

func TestParseSearchQuery(t *testing.T) {
	t.Parallel()
	agentID := uuid.NewString()
	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		q, err := work.ParseSearchQuery(url.Values{})
		require.NoError(t, err)
		require.Equal(t, &work.SearchQuery{Scope: "all", Limit: 20, Sort: "relevance"}, q)
	})
	t.Run("Normalizes", func(t *testing.T) {
		t.Parallel()
		v, err := url.ParseQuery("q=+login+bug+&scope=issues&limit=50&offset=200&status=todo,backlog&status=todo" +
			"&priority=low,%20critical&assigneeAgentId=" + strings.ToUpper(agentID) + "&assigneeUserId=u1&updatedWithin=7d" +
			"&updatedAfter=2026-01-02&sort=priority&unknown=ignored")
		require.NoError(t, err)
		q, err := work.ParseSearchQuery(v)
		require.NoError(t, err)
		require.Equal(t, "login bug", q.Q)
		require.Equal(t, "issues", q.Scope)
		require.Equal(t, 50, q.Limit)
		require.Equal(t, 200, q.Offset)
		require.Equal(t, work.SearchList{"backlog", "todo"}, q.Status, "deduplicated, canonical order")
		require.Equal(t, work.SearchList{"critical", "low"}, q.Priority)
		require.Equal(t, agentID, q.AssigneeAgentID, "lowercased")
		require.Equal(t, "2026-01-02T00:00:00Z", q.UpdatedAfter)
		require.Equal(t, "priority", q.Sort)

		again, err := work.ParseSearchQuery(q.Values())
		require.NoError(t, err)
		require.Equal(t, q, again, "Values round-trips")
		cp := *q
		require.NoError(t, cp.Normalize())
		require.Equal(t, *q, cp, "Normalize is idempotent")
	})
	t.Run("NullAssignee", func(t *testing.T) {
		t.Parallel()
		q, err := work.ParseSearchQuery(url.Values{"assigneeAgentId": {"null"}, "assigneeUserId": {"null"}})
		require.NoError(t, err)
		require.Equal(t, "null", q.AssigneeAgentID)
	})
	t.Run("RejectsEveryBadField", func(t *testing.T) {
		t.Parallel()
		_, err := work.ParseSearchQuery(url.Values{
			"q": {strings.Repeat("x", 201)}, "scope": {"tickets"}, "limit": {"51"}, "offset": {"201"},
			"status": {"todo,nope"}, "priority": {"urgent"}, "assigneeAgentId": {"bob"}, "projectId": {"null"},
			"labelId": {"x"}, "updatedWithin": {"1y"}, "updatedAfter": {"yesterday"}, "sort": {"random"},
		})
		require.ElementsMatch(t, []string{"q", "scope", "limit", "offset", "status", "priority", "assigneeAgentId",
			"projectId", "labelId", "updatedWithin", "updatedAfter", "sort"}, searchErrPaths(t, err))
	})
	for _, tc := range []struct {
		name string
		v    url.Values
		path string
	}{
		{"QTooLong", url.Values{"q": {strings.Repeat("é", 201)}}, "q"},
		{"QWithNUL", url.Values{"q": {"a\x00b"}}, "q"},
		{"LimitZero", url.Values{"limit": {"0"}}, "limit"},
		{"LimitNotANumber", url.Values{"limit": {"ten"}}, "limit"},
		{"NegativeOffset", url.Values{"offset": {"-1"}}, "offset"},
		{"RepeatedScope", url.Values{"scope": {"issues", "agents"}}, "scope"},
		{"BadWindow", url.Values{"updatedWithin": {"2d"}}, "updatedWithin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := work.ParseSearchQuery(tc.v)
			require.Contains(t, searchErrPaths(t, err), tc.path)
		})
	}
	t.Run("QAtTheLimit", func(t *testing.T) {
		t.Parallel()
		q, err := work.ParseSearchQuery(url.Values{"q": {strings.Repeat("é", 200)}})
		require.NoError(t, err)
		require.Equal(t, 200, utf8.RuneCountInString(q.Q))
	})
	t.Run("JSONAcceptsListsAsStringsOrArrays", func(t *testing.T) {
		t.Parallel()
		var a, b work.SearchQuery
		require.NoError(t, json.Unmarshal([]byte(`{"status":"todo,done"}`), &a))
		require.NoError(t, json.Unmarshal([]byte(`{"status":["done","todo"]}`), &b))
		require.NoError(t, a.Normalize())
		require.NoError(t, b.Normalize())
		require.Equal(t, a, b)
		require.Equal(t, 20, a.Limit, "0 in JSON means the default")
	})
}

func FuzzParseSearchQuery(f *testing.F) {
	for _, s := range []string{
		"", "q=login", "q=PRJ-12&scope=issues&limit=5&offset=10", "status=todo,done&priority=high&sort=priority",
		"assigneeAgentId=null&updatedWithin=24h", "updatedAfter=2026-01-01T10:00:00%2B02:00", "limit=51", "offset=201",
		"q=%00", "scope=all&scope=issues", "status=,,todo,", "q=%22quoted+phrase%22+or+-not",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, err := work.ParseSearchQuery(v)
		if err != nil {
			require.NotEmpty(t, searchErrPaths(t, err))
			return
		}
		require.True(t, utf8.ValidString(q.Q))
		require.LessOrEqual(t, utf8.RuneCountInString(q.Q), work.SearchQueryMaxChars)
		require.Equal(t, strings.TrimSpace(q.Q), q.Q)
		require.GreaterOrEqual(t, q.Limit, 1)
		require.LessOrEqual(t, q.Limit, work.SearchLimitMax)
		require.GreaterOrEqual(t, q.Offset, 0)
		require.LessOrEqual(t, q.Offset, work.SearchOffsetMax)
		require.Contains(t, []string{"all", "issues", "comments", "documents", "artifacts", "agents", "projects"}, q.Scope)
		require.Contains(t, []string{"relevance", "updated", "created", "priority"}, q.Sort)
		again, err := work.ParseSearchQuery(q.Values())
		require.NoError(t, err, "values %v", q.Values())
		require.True(t, reflect.DeepEqual(q, again), "round trip: %#v != %#v", q, again)
		cp := *q
		require.NoError(t, cp.Normalize())
		require.True(t, reflect.DeepEqual(*q, cp), "normalize is idempotent")
		b, err := json.Marshal(q)
		require.NoError(t, err)
		var fromJSON work.SearchQuery
		require.NoError(t, json.Unmarshal(b, &fromJSON))
		require.NoError(t, fromJSON.Normalize())
		require.True(t, reflect.DeepEqual(*q, fromJSON), "JSON round trip")
	})
}

type searchResponseJSON struct {
	Query   map[string]any `json:"query"`
	Results []struct {
		Type       string  `json:"type"`
		ID         string  `json:"id"`
		IssueID    string  `json:"issueId"`
		Identifier string  `json:"identifier"`
		Title      string  `json:"title"`
		Snippet    string  `json:"snippet"`
		Status     string  `json:"status"`
		Score      float64 `json:"score"`
		UpdatedAt  string  `json:"updatedAt"`
	} `json:"results"`
	HasMore bool `json:"hasMore"`
	Limit   int  `json:"limit"`
	Offset  int  `json:"offset"`
}

func (r *searchResponseJSON) identifiers() []string {
	var out []string
	for _, x := range r.Results {
		if x.Type == "issue" {
			out = append(out, x.Identifier)
		}
	}
	return out
}

func (r *searchResponseJSON) types() map[string]int {
	out := map[string]int{}
	for _, x := range r.Results {
		out[x.Type]++
	}
	return out
}

// pgsRequireTable skips a test when a table of another area's migration is missing.
func pgsRequireTable(t *testing.T, h *sdktest.Host, table string) {
	t.Helper()
	var ok bool
	require.NoError(t, h.Kernel.Pool.QueryRow(context.Background(), `SELECT to_regclass($1) IS NOT NULL`, "ext_work."+table).Scan(&ok))
	if !ok {
		t.Skipf("table ext_work.%s does not exist yet", table)
	}
}

func TestSearch(t *testing.T) {
	t.Parallel()
	h := startWork(t)
	ctx := context.Background()
	co := h.CreateCompany("Search Co")
	other := h.CreateCompany("Other Co")
	bot := h.CreateAgent(co, "Login Bot", "engineer")
	outsider := h.CreateAgent(other, "Outsider", "engineer")
	res := h.Do("POST", "/api/companies/"+co+"/projects", map[string]any{"name": "Login revamp", "description": "New login"})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	projectID := res.Map(t)["id"].(string)

	now := time.Now()
	crash := pgsSeedIssue(t, h, pgsIssue{Company: co, Identifier: "SRC-1", Title: "Page crashes on submit",
		Description: "After the login step the page crashes.", Status: "todo", Priority: "high", UpdatedAt: now.Add(-time.Hour)})
	fix := pgsSeedIssue(t, h, pgsIssue{Company: co, Identifier: "SRC-2", Title: "Fix login",
		Description: "The login form rejects valid login attempts; login again fails.", Status: "in_progress", Priority: "critical",
		AssigneeAgentID: bot.ID, UpdatedAt: now.Add(-2 * time.Hour), CreatedAt: now.Add(-48 * time.Hour)})
	pgsSeedIssue(t, h, pgsIssue{Company: co, Identifier: "SRC-12", Title: "Unrelated chores", Description: "Nothing to see.",
		Priority: "low", UpdatedAt: now.Add(-3 * time.Hour)})
	old := pgsSeedIssue(t, h, pgsIssue{Company: co, Identifier: "SRC-13", Title: "Payment bug", Status: "done", Priority: "low",
		ProjectID: projectID, UpdatedAt: now.AddDate(0, 0, -10), CreatedAt: now.AddDate(0, 0, -10)})
	hidden := pgsSeedIssue(t, h, pgsIssue{Company: co, Identifier: "SRC-14", Title: "Hidden login issue"})
	_, err := h.Kernel.Pool.Exec(ctx, `UPDATE ext_work.issues SET hidden_at = now() WHERE id = $1`, hidden)
	require.NoError(t, err)
	pgsSeedIssue(t, h, pgsIssue{Company: other, Identifier: "OTH-1", Title: "Login elsewhere"})
	labelID := uuid.NewString()
	_, err = h.Kernel.Pool.Exec(ctx, `INSERT INTO ext_work.labels (id, company_id, name, color) VALUES ($1, $2, 'ux', '#000000')`, labelID, co)
	require.NoError(t, err)
	_, err = h.Kernel.Pool.Exec(ctx, `INSERT INTO ext_work.issue_labels (issue_id, label_id, company_id) VALUES ($1, $2, $3)`, crash, labelID, co)
	require.NoError(t, err)

	search := func(t *testing.T, query string, as ...string) *searchResponseJSON {
		t.Helper()
		res := h.Do("GET", "/api/companies/"+co+"/search?"+query, nil, as...)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		var out searchResponseJSON
		res.JSON(t, &out)
		return &out
	}

	t.Run("RelevanceOrdering", func(t *testing.T) {
		out := search(t, "q=login&scope=issues")
		require.Equal(t, []string{"SRC-2", "SRC-1"}, out.identifiers(), "title match and more hits rank first; hidden and other companies' issues never show")
		require.Greater(t, out.Results[0].Score, out.Results[1].Score)
		require.Equal(t, fix, out.Results[0].ID)
		require.Equal(t, fix, out.Results[0].IssueID)
		require.Equal(t, "Fix login", out.Results[0].Title)
		require.Equal(t, "in_progress", out.Results[0].Status)
		require.Contains(t, out.Results[1].Snippet, "login step")
		require.Equal(t, "login", out.Query["q"])
		require.Equal(t, "issues", out.Query["scope"])
		require.EqualValues(t, 20, out.Query["limit"])
		require.Equal(t, "relevance", out.Query["sort"])
		require.Equal(t, 20, out.Limit)
	})

	t.Run("WebSearchSyntax", func(t *testing.T) {
		require.Equal(t, []string{"SRC-1"}, search(t, "q="+url.QueryEscape("login -fix")+"&scope=issues").identifiers())
		require.Equal(t, []string{"SRC-2"}, search(t, "q="+url.QueryEscape(`"login form"`)+"&scope=issues").identifiers())
		require.Empty(t, search(t, "q=zebra&scope=issues").Results)
	})

	t.Run("IdentifierPrefix", func(t *testing.T) {
		out := search(t, "q=SRC-1&scope=issues")
		require.Equal(t, "SRC-1", out.Results[0].Identifier, "the exact identifier first")
		require.ElementsMatch(t, []string{"SRC-1", "SRC-12", "SRC-13"}, out.identifiers())
		require.Equal(t, []string{"SRC-2"}, search(t, "q=src-2&scope=issues").identifiers())
	})

	t.Run("Filters", func(t *testing.T) {
		for _, tc := range []struct {
			query string
			want  []string
		}{
			{"status=done", []string{"SRC-13"}},
			{"status=todo,in_progress&sort=updated", []string{"SRC-1", "SRC-2", "SRC-12"}},
			{"status=in_progress&status=done&sort=updated", []string{"SRC-2", "SRC-13"}},
			{"priority=critical", []string{"SRC-2"}},
			{"assigneeAgentId=" + bot.ID, []string{"SRC-2"}},
			{"assigneeAgentId=null&sort=updated", []string{"SRC-1", "SRC-12", "SRC-13"}},
			{"projectId=" + projectID, []string{"SRC-13"}},
			{"labelId=" + labelID, []string{"SRC-1"}},
			{"updatedWithin=7d&sort=updated", []string{"SRC-1", "SRC-2", "SRC-12"}},
			{"updatedAfter=" + url.QueryEscape(now.Add(-90*time.Minute).Format(time.RFC3339)), []string{"SRC-1"}},
			{"q=login&priority=high", []string{"SRC-1"}},
		} {
			out := search(t, "scope=issues&"+tc.query)
			require.Equal(t, tc.want, out.identifiers(), tc.query)
		}
	})

	t.Run("SortsAndPages", func(t *testing.T) {
		require.Equal(t, []string{"SRC-1", "SRC-2", "SRC-12", "SRC-13"}, search(t, "scope=issues").identifiers(), "no q sorts by updated")
		require.Equal(t, []string{"SRC-1", "SRC-12", "SRC-2", "SRC-13"}, search(t, "scope=issues&sort=created").identifiers())
		require.Equal(t, []string{"SRC-2", "SRC-1", "SRC-12", "SRC-13"}, search(t, "scope=issues&sort=priority").identifiers())
		out := search(t, "scope=issues&limit=2&offset=1")
		require.Equal(t, []string{"SRC-2", "SRC-12"}, out.identifiers())
		require.True(t, out.HasMore)
		require.Equal(t, 1, out.Offset)
		out = search(t, "scope=issues&limit=2&offset=2")
		require.False(t, out.HasMore)
		require.Empty(t, search(t, "scope=issues&offset=200").Results)
	})

	t.Run("AgentsAndProjects", func(t *testing.T) {
		out := search(t, "q=login&scope=agents")
		require.Len(t, out.Results, 1)
		require.Equal(t, bot.ID, out.Results[0].ID)
		require.Equal(t, "agent", out.Results[0].Type)
		require.Equal(t, "Login Bot", out.Results[0].Title)
		require.Len(t, search(t, "q=login-bot&scope=agents").Results, 1, "url key")
		require.Empty(t, search(t, "q=outsider&scope=agents").Results, "other companies' agents")

		out = search(t, "q=revamp&scope=projects")
		require.Len(t, out.Results, 1)
		require.Equal(t, projectID, out.Results[0].ID)
		require.Equal(t, "project", out.Results[0].Type)
		require.Empty(t, search(t, "q="+url.QueryEscape("%")+"&scope=projects").Results, "LIKE wildcards are literal")
	})

	t.Run("CommentsDocumentsArtifacts", func(t *testing.T) {
		pgsRequireTable(t, h, "issue_comments")
		pgsRequireTable(t, h, "issue_documents")
		pgsRequireTable(t, h, "issue_work_products")
		commentID, deletedID, docID, wpID := uuid.NewString(), uuid.NewString(), uuid.NewString(), uuid.NewString()
		for _, stmt := range []struct {
			sql  string
			args []any
		}{
			{`INSERT INTO ext_work.issue_comments (id, company_id, issue_id, body) VALUES ($1, $2, $3, 'The quarterly zebra report is late')`,
				[]any{commentID, co, old}},
			{`INSERT INTO ext_work.issue_comments (id, company_id, issue_id, body, deleted_at) VALUES ($1, $2, $3, 'zebra deleted', now())`,
				[]any{deletedID, co, old}},
			{`INSERT INTO ext_work.documents (id, company_id, title, body) VALUES ($1, $2, 'Zebra plan', 'How we stripe the zebra')`,
				[]any{docID, co}},
			{`INSERT INTO ext_work.issue_documents (issue_id, document_id, key, company_id) VALUES ($1, $2, 'plan', $3)`,
				[]any{fix, docID, co}},
			{`INSERT INTO ext_work.issue_work_products (id, company_id, issue_id, type, provider, title, url, summary)
				VALUES ($1, $2, $3, 'pull_request', 'github', 'Zebra PR', 'https://example.com/pr/1', 'adds zebra stripes')`,
				[]any{wpID, co, crash}},
		} {
			_, err := h.Kernel.Pool.Exec(ctx, stmt.sql, stmt.args...)
			require.NoError(t, err)
		}

		out := search(t, "q=zebra&scope=comments")
		require.Len(t, out.Results, 1, "deleted comments are skipped")
		require.Equal(t, commentID, out.Results[0].ID)
		require.Equal(t, old, out.Results[0].IssueID)
		require.Equal(t, "SRC-13", out.Results[0].Identifier)
		require.Contains(t, out.Results[0].Snippet, "zebra report")

		out = search(t, "q=zebra&scope=documents")
		require.Len(t, out.Results, 1)
		require.Equal(t, docID, out.Results[0].ID)
		require.Equal(t, "SRC-2", out.Results[0].Identifier)
		require.Equal(t, "Zebra plan", out.Results[0].Title)

		out = search(t, "q=stripes&scope=artifacts")
		require.Len(t, out.Results, 1)
		require.Equal(t, wpID, out.Results[0].ID)
		require.Equal(t, "SRC-1", out.Results[0].Identifier)
		require.Equal(t, "active", out.Results[0].Status)

		out = search(t, "q=zebra")
		require.Equal(t, map[string]int{"comment": 1, "document": 1, "artifact": 1}, out.types())
		out = search(t, "q=login")
		require.Equal(t, map[string]int{"issue": 2, "agent": 1, "project": 1}, out.types())
		for i := 1; i < len(out.Results); i++ {
			require.GreaterOrEqual(t, out.Results[i-1].Score, out.Results[i].Score, "merged by relevance")
		}
		out = search(t, "q=login&limit=1&offset=1")
		require.Len(t, out.Results, 1)
		require.True(t, out.HasMore)
		require.Equal(t, map[string]int{"issue": 4}, search(t, "").types(), "without q, scope all lists issues only")
	})

	t.Run("Validation", func(t *testing.T) {
		for _, tc := range []struct{ query, path string }{
			{"q=" + strings.Repeat("a", 201), "q"},
			{"limit=51", "limit"},
			{"offset=201", "offset"},
			{"updatedWithin=1y", "updatedWithin"},
			{"scope=tickets", "scope"},
			{"sort=random", "sort"},
			{"assigneeAgentId=me", "assigneeAgentId"},
		} {
			pgsValidation(t, h.Do("GET", "/api/companies/"+co+"/search?"+tc.query, nil), tc.path)
		}
	})

	t.Run("CrossCompanyRefused", func(t *testing.T) {
		res := h.Do("GET", "/api/companies/"+co+"/search?q=login", nil, outsider.As("")...)
		require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
		require.Equal(t, []string{"SRC-2", "SRC-1"}, search(t, "q=login&scope=issues", bot.As("")...).identifiers())
	})

	t.Run("Method", func(t *testing.T) {
		out, perr := pgsInvoke(t, h, "work.search", co, &extensionv1.Actor{Type: "system"},
			map[string]any{"q": "login", "scope": "issues", "status": "todo,in_progress"})
		require.Nil(t, perr)
		var got searchResponseJSON
		require.NoError(t, json.Unmarshal(out, &got))
		require.Equal(t, []string{"SRC-2", "SRC-1"}, got.identifiers())
		require.Equal(t, []any{"todo", "in_progress"}, got.Query["status"])

		_, perr = pgsInvoke(t, h, "work.search", co, &extensionv1.Actor{Type: "system"}, map[string]any{"limit": 51})
		require.NotNil(t, perr)
		require.EqualValues(t, http.StatusBadRequest, perr.Status)
		_, perr = pgsInvoke(t, h, "work.search", co, &extensionv1.Actor{Type: "agent", AgentId: outsider.ID, CompanyId: other},
			map[string]any{"q": "login"})
		require.NotNil(t, perr)
		require.EqualValues(t, http.StatusForbidden, perr.Status)
	})
}
