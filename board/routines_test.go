package board_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

var routineLink = regexp.MustCompile(`^/c/[0-9a-f-]+/routines/([0-9a-f-]{36})$`)

// testRoutines drives the routine pages on a local_trusted host: create a routine through
// the form, add schedule and webhook triggers (the secret shown once), disable one, rotate
// the secret, run now and see the run listed, edit, and the refusals.
func testRoutines(t *testing.T, h *sdktest.Host, co string) {
	agent := h.CreateAgent(co, "Routine Worker", "engineer")
	b := newBrowser(t, h.URL)
	p := b.get("/c/" + co + "/routines")
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	requireSafePage(t, p)
	require.Contains(t, p.Body, "No routines yet.")
	require.Contains(t, p.Body, `href="/c/`+co+`/routines" aria-current="page"`)
	// Each sidebar link is named by its label (the icon is aria-hidden).
	for _, label := range []string{"Dashboard", "Issues", "Routines", "Costs"} {
		require.Regexp(t, `<a href="/c/`+co+`[^"]*" aria-current="[a-z]+"><svg class="icon" aria-hidden="true"[^>]*>.*?</svg>\s*(<span>)?`+label+`(</span>)?\s*</a>`, p.Body)
	}
	for _, name := range []string{"title", "description", "assigneeAgentId", "projectId", "priority", "concurrencyPolicy", "catchUpPolicy"} {
		require.Contains(t, p.Body, `name="`+name+`"`)
	}
	require.Contains(t, p.Body, "Routine Worker")
	tok := p.csrf(t)

	// Create.
	p = b.post("/c/"+co+"/routines", url.Values{"_csrf": {tok}, "title": {"Weekly report"}, "assigneeAgentId": {agent.ID},
		"priority": {"high"}, "concurrencyPolicy": {"always_enqueue"}, "catchUpPolicy": {"skip_missed"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	m := routineLink.FindStringSubmatch(p.Header.Get("Location"))
	require.NotNil(t, m, p.Header.Get("Location"))
	routineID := m[1]
	path := "/c/" + co + "/routines/" + routineID
	p = b.get(path)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	requireSafePage(t, p)
	require.Contains(t, p.Body, "<h1>Weekly report</h1>")
	require.Contains(t, p.Body, `<option value="always_enqueue" selected>`)
	require.Contains(t, p.Body, "No runs yet.")
	require.Contains(t, p.Body, `sse-connect="/api/companies/`+co+`/events?entityType=routine_run&amp;since=`)

	// A refused create shows the API's reason on the list page.
	p = b.post("/c/"+co+"/routines", url.Values{"_csrf": {tok}, "title": {""}})
	require.Equal(t, http.StatusBadRequest, p.Status, p.Body)
	require.Contains(t, p.Body, "The routine was not created")

	// A schedule trigger.
	p = b.post(path+"/triggers", url.Values{"_csrf": {tok}, "kind": {"schedule"}, "label": {"mornings"}, "cronExpression": {"0 9 * * 1-5"}, "timezone": {"Europe/Paris"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	// A bad cron is refused with the API's reason.
	p = b.post(path+"/triggers", url.Values{"_csrf": {tok}, "kind": {"schedule"}, "cronExpression": {"every day"}})
	require.Equal(t, http.StatusBadRequest, p.Status, p.Body)
	require.Contains(t, p.Body, "The change was refused: Validation error (cronExpression: ")

	// A webhook trigger: the answer is the page with the URL and the secret, once.
	p = b.post(path+"/triggers", url.Values{"_csrf": {tok}, "kind": {"webhook"}, "label": {"ci"}, "signingMode": {"bearer"}})
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	requireSafePage(t, p)
	require.Contains(t, p.Body, "Copy this webhook secret now")
	secret := regexp.MustCompile(`<code id="webhook-secret">([0-9a-f]{64})</code>`).FindStringSubmatch(p.Body)
	require.NotNil(t, secret, p.Body)
	p = b.get(path)
	require.NotContains(t, p.Body, secret[1], "the secret is shown once")
	require.Contains(t, p.Body, "/api/routine-triggers/public/")
	require.Contains(t, p.Body, `schedule “mornings” 0 9 * * 1-5 (Europe/Paris)`)
	var detail struct {
		Triggers []struct {
			ID      string `json:"id"`
			Kind    string `json:"kind"`
			Enabled bool   `json:"enabled"`
		} `json:"triggers"`
	}
	h.Do("GET", "/api/routines/"+routineID, nil).JSON(t, &detail)
	require.Len(t, detail.Triggers, 2)
	var scheduleID, webhookID string
	for _, tr := range detail.Triggers {
		if tr.Kind == "schedule" {
			scheduleID = tr.ID
		} else {
			webhookID = tr.ID
		}
	}

	// Rotation shows a new secret.
	p = b.post(path+"/triggers/"+webhookID+"/rotate", url.Values{"_csrf": {tok}})
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	rotated := regexp.MustCompile(`<code id="webhook-secret">([0-9a-f]{64})</code>`).FindStringSubmatch(p.Body)
	require.NotNil(t, rotated, p.Body)
	require.NotEqual(t, secret[1], rotated[1])

	// Disable the schedule.
	p = b.post(path+"/triggers/"+scheduleID, url.Values{"_csrf": {tok}, "enabled": {"false"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	p = b.get(path)
	require.Contains(t, p.Body, `(Europe/Paris), disabled`)
	require.Contains(t, p.Body, `aria-label="Enable schedule “mornings” 0 9 * * 1-5 (Europe/Paris), disabled"`)

	// Run now: the run is listed on the page and in the runs fragment.
	p = b.post(path+"/run", url.Values{"_csrf": {tok}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	p = b.get(path)
	require.NotContains(t, p.Body, "No runs yet.")
	require.Regexp(t, `<tr id="run-[0-9a-f-]{36}">`, p.Body)
	require.Contains(t, p.Body, "manual")
	p = b.get(path+"/runs", "HX-Request", "true")
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	require.True(t, strings.HasPrefix(p.Body, `<div id="routine-runs"`), p.Body)
	require.Regexp(t, `<tr id="run-[0-9a-f-]{36}">`, p.Body)

	// Edit: pause it.
	p = b.post(path, url.Values{"_csrf": {tok}, "title": {"Weekly report v2"}, "assigneeAgentId": {agent.ID}, "priority": {"low"},
		"status": {"paused"}, "concurrencyPolicy": {"skip_if_active"}, "catchUpPolicy": {"enqueue_missed_with_cap"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	got := h.Do("GET", "/api/routines/"+routineID, nil).Map(t)
	require.Equal(t, "Weekly report v2", got["title"])
	require.Equal(t, "paused", got["status"])
	require.Equal(t, "skip_if_active", got["concurrencyPolicy"])
	require.Equal(t, "enqueue_missed_with_cap", got["catchUpPolicy"])

	// Delete the webhook trigger.
	p = b.post(path+"/triggers/"+webhookID+"/delete", url.Values{"_csrf": {tok}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)

	// The list shows the routine, its trigger and its last run.
	p = b.get("/c/" + co + "/routines")
	require.Contains(t, p.Body, "Weekly report v2")
	require.Contains(t, p.Body, `(Europe/Paris), disabled`)
	require.NotContains(t, p.Body, "No routines yet.")

	// Without a CSRF token nothing changes.
	p = b.post(path+"/run", url.Values{})
	require.Equal(t, http.StatusForbidden, p.Status, p.Body)
	p = b.post(path, url.Values{"_csrf": {"forged"}, "title": {"Hijacked"}})
	require.Equal(t, http.StatusForbidden, p.Status, p.Body)
	require.Equal(t, "Weekly report v2", h.Do("GET", "/api/routines/"+routineID, nil).Map(t)["title"])

	// Unknown routines are a clear 404 page.
	p = b.get("/c/" + co + "/routines/00000000-0000-0000-0000-000000000000")
	require.Equal(t, http.StatusNotFound, p.Status, p.Body)
	requireSafePage(t, p)
}
