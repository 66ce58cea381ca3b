package work_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
	"github.com/keelhq/keel/sdktest"
)

// listTitles lists a company's issues through h and returns the answer and the titles.
func listTitles(t *testing.T, h *sdktest.Host, companyID string) (*sdktest.Response, []string) {
	t.Helper()
	res := h.Do("GET", "/api/companies/"+companyID+"/issues?limit=50", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var list []struct {
		Title string `json:"title"`
	}
	res.JSON(t, &list)
	titles := make([]string, len(list))
	for i, iss := range list {
		titles[i] = iss.Title
	}
	return res, titles
}

// TestIssueListReadCache: the host answers repeated issue lists from its read cache (with
// an ETag, 304 for a client holding it), and every write through any path (a company
// route, an issue route that names no company, a write on another node) is visible to the
// next list.
func TestIssueListReadCache(t *testing.T) {
	h := startWork(t)
	company := h.CreateCompany("Cached")
	other := h.CreateCompany("Other")
	created := h.Do("POST", "/api/companies/"+company+"/issues", map[string]any{"title": "first"})
	require.Equal(t, http.StatusCreated, created.Status, "%s", created.Body)
	issueID := created.Map(t)["id"].(string)

	// Repeats become hits once the cache listens for other nodes' writes.
	first, titles := listTitles(t, h, company)
	require.Equal(t, []string{"first"}, titles)
	etag := first.Header.Get("ETag")
	require.NotEmpty(t, etag)
	sdktest.WaitFor(t, 30*time.Second, func() bool {
		before, _ := h.Kernel.ReadCache.Stats()
		res, _ := listTitles(t, h, company)
		after, _ := h.Kernel.ReadCache.Stats()
		require.Equal(t, etag, res.Header.Get("ETag"))
		return after > before
	}, "repeated issue lists are answered from the read cache")
	notModified := h.Do("GET", "/api/companies/"+company+"/issues?limit=50", nil, "If-None-Match", etag)
	require.Equal(t, http.StatusNotModified, notModified.Status)
	require.Empty(t, notModified.Body)
	_, otherTitles := listTitles(t, h, other)
	require.Empty(t, otherTitles, "another company's list is its own")

	// A create through the company's route.
	require.Equal(t, http.StatusCreated, h.Do("POST", "/api/companies/"+company+"/issues", map[string]any{"title": "second"}).Status)
	res, titles := listTitles(t, h, company)
	require.ElementsMatch(t, []string{"first", "second"}, titles)
	require.NotEqual(t, etag, res.Header.Get("ETag"))
	require.Equal(t, http.StatusOK, h.Do("GET", "/api/companies/"+company+"/issues?limit=50", nil, "If-None-Match", etag).Status)

	// An update through /api/issues/{id}, which names no company.
	listTitles(t, h, company)
	patched := h.Do("PATCH", "/api/issues/"+issueID, map[string]any{"title": "first, renamed"})
	require.Equal(t, http.StatusOK, patched.Status, "%s", patched.Body)
	_, titles = listTitles(t, h, company)
	require.ElementsMatch(t, []string{"first, renamed", "second"}, titles)
	count := h.Do("GET", "/api/companies/"+company+"/issues/count", nil)
	require.Equal(t, http.StatusOK, count.Status)
	require.JSONEq(t, `{"count":2}`, string(count.Body))

	// A second node on the same database: its cached list learns of this node's writes.
	h2 := sdktest.Start(t, sdktest.Options{Builtins: true, DatabaseURL: h.DatabaseURL})
	sdktest.WaitFor(t, 30*time.Second, func() bool {
		before, _ := h2.Kernel.ReadCache.Stats()
		listTitles(t, h2, company)
		after, _ := h2.Kernel.ReadCache.Stats()
		return after > before
	}, "the second node answers from its read cache")
	for i := range 3 {
		title := fmt.Sprintf("from node one %d", i)
		require.Equal(t, http.StatusCreated, h.Do("POST", "/api/companies/"+company+"/issues", map[string]any{"title": title}).Status)
		sdktest.WaitFor(t, 30*time.Second, func() bool {
			_, titles := listTitles(t, h2, company)
			return len(titles) == 3+i
		}, "the second node's list shows node one's new issue")
	}
	patched = h.Do("PATCH", "/api/issues/"+issueID, map[string]any{"title": "renamed on node one"})
	require.Equal(t, http.StatusOK, patched.Status, "%s", patched.Body)
	sdktest.WaitFor(t, 30*time.Second, func() bool {
		_, titles := listTitles(t, h2, company)
		for _, title := range titles {
			if title == "renamed on node one" {
				return true
			}
		}
		return false
	}, "the second node's list shows node one's update")
}

// TestReadOnlyCallKeepsReadCache: a call to a method its manifest declares read-only
// (work.dashboardCounts) leaves the company's cached reads in place, and a call to any
// other method (work.issues.update) forgets them.
func TestReadOnlyCallKeepsReadCache(t *testing.T) {
	h := startWork(t)
	company := h.CreateCompany("Read Only Calls")
	created := h.Do("POST", "/api/companies/"+company+"/issues", map[string]any{"title": "counted"})
	require.Equal(t, http.StatusCreated, created.Status, "%s", created.Body)
	issueID := created.Map(t)["id"].(string)
	hit := func() bool {
		before, _ := h.Kernel.ReadCache.Stats()
		listTitles(t, h, company)
		after, _ := h.Kernel.ReadCache.Stats()
		return after > before
	}
	sdktest.WaitFor(t, 30*time.Second, hit, "repeated issue lists are answered from the read cache")

	invoke := func(method, input string) {
		t.Helper()
		res, err := h.Supervisor.Invoke(context.Background(), "kernel", &hostv1.InvokeRequest{Method: method,
			InputJson: []byte(input), CompanyId: company})
		require.NoError(t, err)
		require.Nil(t, res.Error, "%s: %v", method, res.Error)
	}
	invoke("work.dashboardCounts", `{}`)
	require.True(t, hit(), "a read-only call keeps the cached list")

	invoke("work.issues.update", fmt.Sprintf(`{"id":%q,"title":"renamed"}`, issueID))
	before, _ := h.Kernel.ReadCache.Stats()
	_, titles := listTitles(t, h, company)
	after, _ := h.Kernel.ReadCache.Stats()
	require.Equal(t, before, after, "a call that may write forgets the cached list")
	require.Equal(t, []string{"renamed"}, titles)
}
