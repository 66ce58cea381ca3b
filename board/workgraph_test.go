package board_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/host"
	"github.com/keelhq/keel/sdktest"
)

// upload posts a multipart form with one file, the way a browser on the board's origin does.
func (b *browser) upload(path string, fields map[string]string, fileName, content string) *page {
	b.t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for k, v := range fields {
		require.NoError(b.t, mw.WriteField(k, v))
	}
	if fileName != "" {
		fw, err := mw.CreateFormFile("file", fileName)
		require.NoError(b.t, err)
		_, err = io.WriteString(fw, content)
		require.NoError(b.t, err)
	}
	require.NoError(b.t, mw.Close())
	req, err := http.NewRequest("POST", b.base+path, &buf)
	require.NoError(b.t, err)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Origin", b.base)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	res, err := b.c.Do(req)
	require.NoError(b.t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(b.t, err)
	return &page{Status: res.StatusCode, Header: res.Header, Body: string(raw)}
}

// apiMap sends an API request that must answer want and returns its JSON object.
func apiMap(t *testing.T, h *sdktest.Host, want int, method, path string, body any, headers ...string) map[string]any {
	t.Helper()
	res := h.Do(method, path, body, headers...)
	require.Equal(t, want, res.Status, "%s %s: %s", method, path, res.Body)
	return res.Map(t)
}

// TestBoardWorkGraph covers the work graph's pages: the new-issue form, the board by status
// with its moves, the complete issue detail (edit, blockers, checkout, documents and their
// revisions, work products, attachments, sub-issues, runs) and the activity feed.
func TestBoardWorkGraph(t *testing.T) {
	t.Parallel()
	h, co := startLocal(t)
	cp := "/api/companies/" + co
	agent := h.CreateAgent(co, "Alice", "engineer")
	project := apiMap(t, h, http.StatusCreated, "POST", cp+"/projects", map[string]any{"name": "Rocket"})["id"].(string)
	goal := apiMap(t, h, http.StatusCreated, "POST", cp+"/goals", map[string]any{"title": "Reach orbit"})["id"].(string)
	bug := apiMap(t, h, http.StatusCreated, "POST", cp+"/labels", map[string]any{"name": "bug", "color": "#ff0000"})["id"].(string)

	t.Run("NewIssueForm", func(t *testing.T) {
		t.Parallel()
		b := newBrowser(t, h.URL)
		p := b.get("/c/" + co + "/issues")
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		requireSafePage(t, p)
		for _, want := range []string{"New issue", `action="/c/` + co + `/issues"`, `id="n-title"`, `id="n-desc"`, `id="n-status"`,
			`id="n-priority"`, `id="n-agent"`, `id="n-user"`, `id="n-project"`, `id="n-goal"`, `id="n-parent"`, `id="n-labels"`,
			`href="/c/` + co + `/issues/board?`} {
			require.Contains(t, p.Body, want)
		}
		tok := p.csrf(t)
		parent := createIssue(t, h, co, "Parent of the form's issue")
		p = b.post("/c/"+co+"/issues", url.Values{"_csrf": {tok}, "title": {"Made with the form"}, "description": {"Line one\r\nLine two"},
			"status": {"todo"}, "priority": {"high"}, "assigneeAgentId": {agent.ID}, "projectId": {project}, "goalId": {goal},
			"parentId": {parent["identifier"].(string)}, "labelIds": {bug}})
		require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
		loc := p.Header.Get("Location")
		require.True(t, strings.HasPrefix(loc, "/c/"+co+"/issues/"), loc)
		is := apiMap(t, h, http.StatusOK, "GET", "/api/issues/"+strings.TrimPrefix(loc, "/c/"+co+"/issues/"), nil)
		require.Equal(t, "Made with the form", is["title"])
		require.Equal(t, "todo", is["status"])
		require.Equal(t, "high", is["priority"])
		require.Equal(t, agent.ID, is["assigneeAgentId"])
		require.Equal(t, project, is["projectId"])
		require.Equal(t, goal, is["goalId"])
		require.Equal(t, parent["id"], is["parentId"])
		require.Equal(t, []any{bug}, is["labelIds"])

		// A refused issue keeps the form open with what was typed and the API's message.
		p = b.post("/c/"+co+"/issues", url.Values{"_csrf": {tok}, "title": {"Bad parent"}, "parentId": {"NOPE-999"}})
		require.GreaterOrEqual(t, p.Status, 400, p.Body)
		require.Less(t, p.Status, 500, p.Body)
		requireSafePage(t, p)
		require.Contains(t, p.Body, "The issue was not created:")
		require.Contains(t, p.Body, `<details class="panel new-issue" open`)
		require.Contains(t, p.Body, `value="Bad parent"`)
		p = b.post("/c/"+co+"/issues", url.Values{"_csrf": {tok}, "title": {"  "}})
		require.Equal(t, http.StatusBadRequest, p.Status, p.Body)
		require.Contains(t, p.Body, "The issue was not created:")

		// No token, no issue.
		p = b.post("/c/"+co+"/issues", url.Values{"title": {"Forged"}})
		require.Equal(t, http.StatusForbidden, p.Status, p.Body)
		var n map[string]int
		h.Do("GET", cp+"/issues/count?q=Forged", nil).JSON(t, &n)
		require.Zero(t, n["count"])
	})

	t.Run("IssueBoard", func(t *testing.T) {
		t.Parallel()
		for i := 0; i < 27; i++ {
			apiMap(t, h, http.StatusCreated, "POST", cp+"/issues", map[string]any{"title": fmt.Sprintf("Capped card %d", i), "status": "backlog"})
		}
		apiMap(t, h, http.StatusCreated, "POST", cp+"/issues", map[string]any{"title": "Capped card todo", "status": "todo"})
		b := newBrowser(t, h.URL)
		p := b.get("/c/" + co + "/issues/board?q=Capped")
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		requireSafePage(t, p)
		for _, s := range []string{"backlog", "todo", "in_progress", "in_review", "blocked", "done", "cancelled"} {
			require.Contains(t, p.Body, `<section class="column" data-status="`+s+`"`, s)
		}
		require.Contains(t, p.Body, "Capped card todo")
		require.Equal(t, 25+1, strings.Count(p.Body, `class="card"`), "25 cards in backlog, 1 in todo")
		require.Contains(t, p.Body, "2 more in backlog")
		require.Contains(t, p.Body, `href="/c/`+co+`/issues?limit=50&amp;q=Capped&amp;sortDir=desc&amp;sortField=updatedAt&amp;status=backlog"`)
		require.Contains(t, p.Body, `sse-connect="/api/companies/`+co+`/events?entityType=issue&amp;since=`)
		require.Contains(t, p.Body, `hx-trigger="sse:message delay:500ms"`)
		require.Contains(t, p.Body, `draggable="true"`)
		require.Regexp(t, `<script src="/assets/issues-board\.[0-9a-f]{12}\.js" defer>`, p.Body)
		require.Contains(t, p.Body, `<div id="board-message" class="board-message" role="status" aria-live="polite">`)
		// Every card has a labelled status select and a Move button (keyboard and no-JS).
		require.Equal(t, 26, strings.Count(p.Body, `<label for="mv-`))
		// The htmx fragment is the columns alone.
		p = b.get("/c/"+co+"/issues/board?q=Capped", "HX-Request", "true")
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		require.True(t, strings.HasPrefix(p.Body, `<div id="issue-board"`), p.Body)
		// A filter the API refuses is a clear 400.
		p = b.get("/c/" + co + "/issues/board?projectId=nope")
		require.Equal(t, http.StatusBadRequest, p.Status, p.Body)
		require.Contains(t, p.Body, "The issues could not be listed")
		// The asset is served.
		require.Equal(t, http.StatusOK, b.get(assetURL(t, p.Body, "issues-board")).Status)
	})

	t.Run("MoveOnTheBoard", func(t *testing.T) {
		t.Parallel()
		is := createIssue(t, h, co, "Move me around")
		id := is["id"].(string)
		b := newBrowser(t, h.URL)
		board := "/c/" + co + "/issues/board"
		tok := b.get(board).csrf(t)
		move := "/c/" + co + "/issues/" + id + "/move"
		// The script's request: the card comes back in its new status.
		p := b.post(move, url.Values{"status": {"todo"}}, "HX-Request", "true", "X-CSRF-Token", tok)
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		require.True(t, strings.HasPrefix(p.Body, `<li class="card" id="card-`+id+`"`), p.Body)
		require.Contains(t, p.Body, `data-status="todo"`)
		require.Equal(t, "todo", apiMap(t, h, http.StatusOK, "GET", "/api/issues/"+id, nil)["status"])
		// A move the API refuses answers its status and text, for the script to put the card back.
		p = b.post(move, url.Values{"status": {"in_progress"}}, "HX-Request", "true", "X-CSRF-Token", tok)
		require.Equal(t, http.StatusUnprocessableEntity, p.Status, p.Body)
		require.Contains(t, p.Body, "in_progress issues require an assignee")
		require.Contains(t, p.Body, `role="alert"`)
		require.Equal(t, "todo", apiMap(t, h, http.StatusOK, "GET", "/api/issues/"+id, nil)["status"])
		// The no-JS form: redirected back to the board with its filters.
		p = b.post(move, url.Values{"_csrf": {tok}, "status": {"in_review"}, "back": {board + "?q=Move"}})
		require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
		require.Equal(t, board+"?q=Move", p.Header.Get("Location"))
		require.Equal(t, "in_review", apiMap(t, h, http.StatusOK, "GET", "/api/issues/"+id, nil)["status"])
		// A back link elsewhere is not followed.
		p = b.post(move, url.Values{"_csrf": {tok}, "status": {"todo"}, "back": {"https://evil.example/"}})
		require.Equal(t, board, p.Header.Get("Location"))
		// The no-JS refusal is the board with the message.
		p = b.post(move, url.Values{"_csrf": {tok}, "status": {"in_progress"}})
		require.Equal(t, http.StatusUnprocessableEntity, p.Status, p.Body)
		requireSafePage(t, p)
		require.Contains(t, p.Body, "The change was refused: in_progress issues require an assignee")
		require.Contains(t, p.Body, `id="issue-board"`)
		// Without the token nothing moves.
		p = b.post(move, url.Values{"status": {"done"}}, "HX-Request", "true")
		require.Equal(t, http.StatusForbidden, p.Status, p.Body)
		require.Equal(t, "todo", apiMap(t, h, http.StatusOK, "GET", "/api/issues/"+id, nil)["status"])
	})

	t.Run("IssueDetailComplete", func(t *testing.T) {
		t.Parallel()
		is := createIssue(t, h, co, "The whole picture")
		id := is["id"].(string)
		blocker := createIssue(t, h, co, "Blocking issue")
		child := apiMap(t, h, http.StatusCreated, "POST", "/api/issues/"+id+"/children", map[string]any{"title": "A sub-issue"})
		apiMap(t, h, http.StatusCreated, "POST", "/api/issues/"+id+"/work-products", map[string]any{"type": "pull_request", "provider": "github",
			"title": "PR 42", "url": "https://example.com/pr/42", "status": "ready_for_review"})
		apiMap(t, h, http.StatusOK, "PATCH", "/api/issues/"+id, map[string]any{"status": "todo"})
		res := h.Do("POST", "/api/issues/"+id+"/checkout", map[string]any{"agentId": agent.ID, "expectedStatuses": []string{"todo"}}, "X-Service-Run-Id", "run-board-1")
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)

		b := newBrowser(t, h.URL)
		path := "/c/" + co + "/issues/" + id
		p := b.get(path)
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		requireSafePage(t, p)
		for _, want := range []string{"Checkout", "Held by <strong>Alice</strong>", `href="/c/` + co + `/runs/run-board-1"`, "Release checkout",
			"Sub-issues (1)", child["identifier"].(string), "Work products", "PR 42", `href="https://example.com/pr/42"`,
			"Attachments", "No attachments.", "Attach a file", `enctype="multipart/form-data"`, "Add a blocker", "New document",
			`id="e-title"`, `id="e-desc"`, `id="e-priority"`, `id="e-project"`, `id="e-goal"`, `id="e-labels"`} {
			require.Contains(t, p.Body, want)
		}
		tok := p.csrf(t)

		// Release the checkout.
		p = b.post(path+"/release", url.Values{}, "HX-Request", "true", "X-CSRF-Token", tok)
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		require.Contains(t, p.Body, "Not checked out.")
		require.Nil(t, apiMap(t, h, http.StatusOK, "GET", "/api/issues/"+id, nil)["checkoutRunId"])

		// Edit the details.
		p = b.post(path+"/details", url.Values{"title": {"The whole picture, edited"}, "description": {"New words"}, "priority": {"critical"},
			"projectId": {project}, "goalId": {goal}, "labelIds": {bug}}, "HX-Request", "true", "X-CSRF-Token", tok)
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		got := apiMap(t, h, http.StatusOK, "GET", "/api/issues/"+id, nil)
		require.Equal(t, "The whole picture, edited", got["title"])
		require.Equal(t, "New words", got["description"])
		require.Equal(t, "critical", got["priority"])
		require.Equal(t, project, got["projectId"])
		require.Equal(t, goal, got["goalId"])
		require.Equal(t, []any{bug}, got["labelIds"])
		require.Contains(t, p.Body, "Rocket")
		require.Contains(t, p.Body, "Reach orbit")
		p = b.post(path+"/details", url.Values{"_csrf": {tok}, "title": {"The whole picture, edited"}, "priority": {"low"}})
		require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
		got = apiMap(t, h, http.StatusOK, "GET", "/api/issues/"+id, nil)
		require.Nil(t, got["projectId"])
		require.Nil(t, got["description"])
		require.Empty(t, got["labelIds"])
		p = b.post(path+"/details", url.Values{"title": {""}, "priority": {"low"}}, "HX-Request", "true", "X-CSRF-Token", tok)
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		require.Contains(t, p.Body, "The change was refused")

		// Blockers: add by identifier, refuse a bad one, remove.
		p = b.post(path+"/blockers", url.Values{"add": {blocker["identifier"].(string)}}, "HX-Request", "true", "X-CSRF-Token", tok)
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		require.Contains(t, p.Body, "Remove blocker "+blocker["identifier"].(string))
		got = apiMap(t, h, http.StatusOK, "GET", "/api/issues/"+id, nil)
		require.Len(t, got["blockedBy"], 1)
		p = b.post(path+"/blockers", url.Values{"add": {"NOPE-404"}}, "HX-Request", "true", "X-CSRF-Token", tok)
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		require.Contains(t, p.Body, "The change was refused")
		p = b.post(path+"/blockers", url.Values{"_csrf": {tok}, "remove": {blocker["id"].(string)}})
		require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
		got = apiMap(t, h, http.StatusOK, "GET", "/api/issues/"+id, nil)
		require.Empty(t, got["blockedBy"])

		// Attachments: upload through the API's multipart route, list, download link, delete.
		p = b.upload(path+"/attachments", map[string]string{"_csrf": tok}, "notes.txt", "hello attachment")
		require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
		p = b.get(path)
		require.Contains(t, p.Body, "notes.txt")
		var atts []map[string]any
		h.Do("GET", "/api/issues/"+id+"/attachments", nil).JSON(t, &atts)
		require.Len(t, atts, 1)
		attID := atts[0]["id"].(string)
		require.Contains(t, p.Body, `href="/api/attachments/`+attID+`/content?download=1"`)
		dl := b.get("/api/attachments/" + attID + "/content?download=1")
		require.Equal(t, http.StatusOK, dl.Status)
		require.Equal(t, "hello attachment", dl.Body)
		p = b.upload(path+"/attachments", map[string]string{"_csrf": tok}, "", "")
		require.Equal(t, http.StatusBadRequest, p.Status, p.Body)
		require.Contains(t, p.Body, "Choose a file to upload.")
		p = b.upload(path+"/attachments", nil, "forged.txt", "x")
		require.Equal(t, http.StatusForbidden, p.Status, p.Body)
		p = b.post(path+"/attachments/"+attID+"/delete", url.Values{}, "HX-Request", "true", "X-CSRF-Token", tok)
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		require.Contains(t, p.Body, "No attachments.")

		// Documents: create, view, edit into a new revision, view the old one, a stale base refused.
		p = b.post(path+"/documents", url.Values{"_csrf": {tok}, "key": {"plan"}, "title": {"The plan"}, "body": {"First draft"}})
		require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
		docPath := path + "/documents/plan"
		require.Equal(t, docPath, p.Header.Get("Location"))
		p = b.get(docPath)
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		requireSafePage(t, p)
		require.Contains(t, p.Body, "First draft")
		require.Contains(t, p.Body, "Revisions (1)")
		require.Contains(t, p.Body, "Save new revision")
		firstRev := regexpFind(t, p.Body, `name="baseRevisionId" value="([^"]+)"`)
		p = b.post(docPath, url.Values{"_csrf": {tok}, "title": {"The plan"}, "body": {"Second draft"}, "changeSummary": {"Rewrote it"},
			"baseRevisionId": {firstRev}})
		require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
		p = b.get(docPath)
		require.Contains(t, p.Body, "Second draft")
		require.Contains(t, p.Body, "Revisions (2)")
		require.Contains(t, p.Body, "Rewrote it")
		p = b.get(docPath + "?revision=" + firstRev)
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		require.Contains(t, p.Body, "Revision 1 (not the latest)")
		require.Contains(t, p.Body, "First draft")
		p = b.post(docPath, url.Values{"_csrf": {tok}, "body": {"Lost update"}, "baseRevisionId": {firstRev}})
		require.Equal(t, http.StatusConflict, p.Status, p.Body)
		require.Contains(t, p.Body, "The revision was not saved:")
		require.Contains(t, p.Body, "Lost update", "the draft is kept")
		p = b.get(docPath + "?revision=" + uuid.NewString())
		require.Equal(t, http.StatusNotFound, p.Status, p.Body)
		p = b.get(path + "/documents/nope")
		require.Equal(t, http.StatusNotFound, p.Status, p.Body)
		p = b.post(path+"/documents", url.Values{"_csrf": {tok}, "key": {"Bad Key"}, "body": {"x"}})
		require.Equal(t, http.StatusBadRequest, p.Status, p.Body)
		require.Contains(t, p.Body, "The change was refused")
		p = b.get(path)
		require.Contains(t, p.Body, `href="/c/`+co+`/issues/`+id+`/documents/plan"`)
		require.Contains(t, p.Body, "revision 2")
	})

	t.Run("Activity", func(t *testing.T) {
		t.Parallel()
		is := createIssue(t, h, co, "Activity subject")
		id := is["id"].(string)
		for _, s := range []string{"todo", "backlog", "todo"} {
			apiMap(t, h, http.StatusOK, "PATCH", "/api/issues/"+id, map[string]any{"status": s})
		}
		b := newBrowser(t, h.URL)
		p := b.get("/c/" + co + "/activity")
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		requireSafePage(t, p)
		require.Contains(t, p.Body, `aria-current="page">`)
		require.Contains(t, p.Body, "issue.created")
		require.Contains(t, p.Body, `sse-connect="/api/companies/`+co+`/events?since=`)
		require.Contains(t, p.Body, `hx-trigger="sse:message delay:500ms"`)
		for _, name := range []string{"entityType", "agentId", "action"} {
			require.Contains(t, p.Body, `name="`+name+`"`)
		}
		// Filters and pages, as htmx fragments.
		p = b.get("/c/"+co+"/activity?entityType=issue&action=issue.updated&limit=2", "HX-Request", "true")
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		require.True(t, strings.HasPrefix(p.Body, `<div id="activity-feed"`), p.Body)
		require.Equal(t, 2, strings.Count(p.Body, "<code>issue.updated</code>"))
		require.NotContains(t, p.Body, "issue.created")
		require.Contains(t, p.Body, ">Older<")
		require.NotContains(t, p.Body, ">Newer<")
		require.Contains(t, p.Body, `href="/c/`+co+`/issues/`)
		p = b.get("/c/"+co+"/activity?entityType=issue&action=issue.updated&limit=2&offset=2", "HX-Request", "true")
		require.Contains(t, p.Body, ">Newer<")
		require.NotContains(t, p.Body, `hx-trigger="sse:message`, "only the first page follows the stream")
		// A filter the API refuses is a clear 400.
		p = b.get("/c/" + co + "/activity?agentId=nope")
		require.Equal(t, http.StatusBadRequest, p.Status, p.Body)
		require.Contains(t, p.Body, "The activity could not be listed")
	})
}

// TestBoardWorkGraphViewer shows a viewer of a company the work graph's pages and the API's
// refusal of every write, on the page.
func TestBoardWorkGraphViewer(t *testing.T) {
	t.Parallel()
	h := sdktest.Start(t, sdktest.Options{Builtins: true, Configure: func(c *host.Config) {
		c.DeploymentMode, c.DeploymentExposure = "authenticated", "private"
	}})
	waitExtensions(t, h)
	signUp := func(name, email string) (*browser, string) {
		b := newBrowser(t, h.URL)
		p := b.post("/signup", url.Values{"_csrf": {b.get("/signin").csrf(t)}, "name": {name}, "email": {email}, "password": {"correct horse battery"}})
		require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
		var s struct {
			User struct {
				ID string `json:"id"`
			} `json:"user"`
		}
		res := h.Do("GET", "/api/auth/get-session", nil, "Cookie", "keel_session="+sessionValue(t, b))
		res.JSON(t, &s)
		return b, s.User.ID
	}
	owner, _ := signUp("Olga", "olga@example.test")
	p := owner.post("/companies", url.Values{"_csrf": {owner.get("/companies").csrf(t)}, "name": {"Viewed Co"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	co := strings.TrimPrefix(p.Header.Get("Location"), "/c/")
	p = owner.post("/c/"+co+"/issues", url.Values{"_csrf": {owner.get("/c/" + co + "/issues").csrf(t)}, "title": {"Owned issue"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	issuePath := p.Header.Get("Location")

	viewer, viewerID := signUp("Vic", "vic@example.test")
	_, err := h.Kernel.Pool.Exec(context.Background(), `INSERT INTO kernel.company_memberships
		(id, company_id, principal_type, principal_id, status, membership_role) VALUES ($1, $2, 'user', $3, 'active', 'viewer')`,
		uuid.NewString(), co, viewerID)
	require.NoError(t, err)

	for _, path := range []string{"/c/" + co + "/issues", "/c/" + co + "/issues/board", issuePath, "/c/" + co + "/activity"} {
		p = viewer.get(path)
		require.Equal(t, http.StatusOK, p.Status, "%s: %s", path, p.Body)
		requireSafePage(t, p)
	}
	tok := viewer.get(issuePath).csrf(t)
	p = viewer.post("/c/"+co+"/issues", url.Values{"_csrf": {tok}, "title": {"Viewer's issue"}})
	require.Equal(t, http.StatusForbidden, p.Status, p.Body)
	require.Contains(t, p.Body, "The issue was not created: you may not do this")
	p = viewer.post(issuePath+"/move", url.Values{"status": {"done"}}, "HX-Request", "true", "X-CSRF-Token", tok)
	require.Equal(t, http.StatusForbidden, p.Status, p.Body)
	require.Contains(t, p.Body, "You may not do this")
	p = viewer.post(issuePath+"/details", url.Values{"title": {"Hijacked"}, "priority": {"low"}}, "HX-Request", "true", "X-CSRF-Token", tok)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	require.Contains(t, p.Body, "You may not do this")
	p = viewer.upload(issuePath+"/attachments", map[string]string{"_csrf": tok}, "v.txt", "x")
	require.Equal(t, http.StatusForbidden, p.Status, p.Body)
	require.Contains(t, p.Body, "You may not do this")

	// Someone outside the company is told so on every page.
	outsider, _ := signUp("Otto", "otto@example.test")
	for _, path := range []string{"/c/" + co + "/issues/board", "/c/" + co + "/activity", issuePath + "/documents/plan"} {
		p = outsider.get(path)
		require.Equal(t, http.StatusForbidden, p.Status, "%s: %s", path, p.Body)
		require.Contains(t, p.Body, "You do not have access")
	}
}

// regexpFind returns the first group of pattern's first match in s.
func regexpFind(t *testing.T, s, pattern string) string {
	t.Helper()
	m := regexp.MustCompile(pattern).FindStringSubmatch(s)
	require.NotNil(t, m, "no %s in: %s", pattern, s)
	return m[1]
}

// assetURL is the content-hashed URL of the named script the page loads.
func assetURL(t *testing.T, body, name string) string {
	t.Helper()
	return regexpFind(t, body, `src="(/assets/`+regexp.QuoteMeta(name)+`\.[0-9a-f]{12}\.js)"`)
}

// sessionValue is the browser's session cookie.
func sessionValue(t *testing.T, b *browser) string {
	t.Helper()
	u, err := url.Parse(b.base)
	require.NoError(t, err)
	for _, c := range b.c.Jar.Cookies(u) {
		if c.Name == "keel_session" {
			return c.Value
		}
	}
	t.Fatal("no session cookie")
	return ""
}
