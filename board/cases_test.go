package board_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

// testCases creates a case through the list's form, writes a document, annotates it,
// replies and resolves, changes the status, and reads the timeline.
func testCases(t *testing.T, h *sdktest.Host) {
	co := h.CreateCompany("Cases Co")
	b := newBrowser(t, h.URL)
	list := "/c/" + co + "/cases"
	p := b.get(list)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	requireSafePage(t, p)
	require.Contains(t, p.Body, "No cases match.")
	for _, name := range []string{"q", "status", "type", "projectId", "labelId", "parent", "limit", "includeNoProject", "includeAncestors"} {
		require.Contains(t, p.Body, `name="`+name+`"`, "filter %s", name)
	}
	tok := p.csrf(t)

	p = b.post(list, url.Values{"_csrf": {tok}, "caseType": {"incident"}, "title": {"Checkout outage"}, "summary": {"Payments failed"}, "status": {"in_progress"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	casePath := p.Header.Get("Location")
	require.True(t, strings.HasPrefix(casePath, list+"/"), casePath)
	caseID := strings.TrimPrefix(casePath, list+"/")
	// A refused create keeps the form's values and says why.
	p = b.post(list, url.Values{"_csrf": {tok}, "caseType": {"incident"}, "title": {""}})
	require.Equal(t, http.StatusBadRequest, p.Status, p.Body)
	require.Contains(t, p.Body, "The case was not created")
	require.Contains(t, p.Body, `value="incident"`)

	// The list and its filters.
	p = b.get(list + "?q=outage&status=active")
	require.Contains(t, p.Body, "Checkout outage")
	p = b.get(list + "?status=done")
	require.NotContains(t, p.Body, "Checkout outage")
	p = b.get(list + "?status=bogus")
	require.Equal(t, http.StatusBadRequest, p.Status, p.Body)
	require.Contains(t, p.Body, "The cases could not be listed")

	// A document, annotated, replied to and resolved.
	p = b.post(casePath+"/documents", url.Values{"_csrf": {tok}, "key": {"postmortem"}, "title": {"Postmortem"},
		"body": {"The card processor timed out for ten minutes."}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	p = b.post(casePath+"/documents", url.Values{"_csrf": {tok}, "key": {"bad key!"}, "body": {"x"}})
	require.Equal(t, http.StatusBadRequest, p.Status, p.Body)
	p = b.get(casePath)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	requireSafePage(t, p)
	require.Contains(t, p.Body, "The card processor timed out for ten minutes.")
	p = b.post(casePath+"/documents/postmortem/annotations", url.Values{"_csrf": {tok}, "quote": {"timed out"}, "body": {"For how long exactly?"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	// A passage that is not in the document is the API's refusal, on the page.
	p = b.post(casePath+"/documents/postmortem/annotations", url.Values{"_csrf": {tok}, "quote": {"not in there"}, "body": {"?"}})
	require.GreaterOrEqual(t, p.Status, 400, p.Body)
	require.Less(t, p.Status, 500, p.Body)
	require.Contains(t, p.Body, "The change was refused")
	var threads []map[string]any
	h.Do("GET", "/api/cases/"+caseID+"/documents/postmortem/annotations", nil).JSON(t, &threads)
	require.Len(t, threads, 1)
	thread := threads[0]["id"].(string)
	p = b.post(casePath+"/documents/postmortem/annotations/"+thread+"/comments", url.Values{"_csrf": {tok}, "body": {"Ten minutes."}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	p = b.post(casePath+"/documents/postmortem/annotations/"+thread+"/status", url.Values{"_csrf": {tok}, "status": {"resolved"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	p = b.get(casePath)
	for _, want := range []string{"For how long exactly?", "Ten minutes.", "<blockquote>timed out</blockquote>", ">resolved<", ">Reopen<"} {
		require.Contains(t, p.Body, want)
	}

	// Status change through the properties form; the timeline shows it.
	p = b.post(casePath, url.Values{"_csrf": {tok}, "status": {"done"}, "title": {"Checkout outage"}, "summary": {"Payments failed"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	require.Equal(t, "done", h.Do("GET", "/api/cases/"+caseID, nil).Map(t)["status"])
	p = b.get(casePath)
	require.Contains(t, p.Body, `id="case-status">done<`)
	for _, kind := range []string{"created", "status_changed", "document_revised"} {
		require.Contains(t, p.Body, "<code>"+kind+"</code>")
	}
	p = b.get(list + "/00000000-0000-0000-0000-000000000000")
	require.Equal(t, http.StatusNotFound, p.Status, p.Body)
}
