package board_test

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

// testCosts drives the costs page on a local_trusted host: spend by day (an accessible
// chart), agent, model, provider and project; setting the company and an agent budget;
// an incident opened by spend over the agent's budget, resolved from the page; and the
// refusals.
func testCosts(t *testing.T, h *sdktest.Host, co string) {
	res := h.Do("POST", "/api/companies/"+co+"/agents", map[string]any{"name": "Spender", "role": "engineer",
		"adapterConfig": map[string]any{"command": "/bin/true"}})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	agentID := res.Map(t)["id"].(string)
	res = h.Do("POST", "/api/companies/"+co+"/projects", map[string]any{"name": "Costly Project"})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	projectID := res.Map(t)["id"].(string)
	now := time.Now().UTC()
	for _, e := range []map[string]any{
		{"costCents": 123, "model": "opus-x", "occurredAt": now.Add(-time.Minute).Format(time.RFC3339)},
		{"costCents": 77, "model": "sonnet-y", "projectId": projectID, "occurredAt": now.AddDate(0, 0, -3).Format(time.RFC3339)},
	} {
		e["agentId"], e["provider"], e["inputTokens"], e["outputTokens"] = agentID, "anthropic", 1500, 20
		res := h.Do("POST", "/api/companies/"+co+"/cost-events", e)
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	}
	b := newBrowser(t, h.URL)
	path := "/c/" + co + "/costs"
	p := b.get(path)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	requireSafePage(t, p)
	for _, want := range []string{
		`href="/c/` + co + `/costs" aria-current="page"`,
		`role="img" aria-labelledby="costs-chart-t costs-chart-d"`,
		`<title id="costs-chart-t">Spend per day</title>`,
		`<desc id="costs-chart-d">30 days from`, "total $2.00",
		"Spender", "Costly Project", "opus-x", "sonnet-y", "anthropic", "$2.00", "3,000",
		`name="from"`, `name="to"`, "Set company budget", "Set agent budget", "No budget incidents.",
	} {
		require.Contains(t, p.Body, want)
	}
	tok := p.csrf(t)

	// A narrower range leaves the older event out.
	p = b.get(path + "?from=" + now.Format(time.DateOnly) + "&to=" + now.Format(time.DateOnly))
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	require.Contains(t, p.Body, `<desc id="costs-chart-d">1 days from`)
	require.NotContains(t, p.Body, "sonnet-y")
	p = b.get(path + "?from=yesterday")
	require.Equal(t, http.StatusBadRequest, p.Status, p.Body)
	require.Contains(t, p.Body, "The range was not understood")
	p = b.get(path + "?from=2020-01-01&to=2026-01-01")
	require.Equal(t, http.StatusBadRequest, p.Status, p.Body)
	require.Contains(t, p.Body, "longer than 366 days")

	// The company budget.
	p = b.post(path+"/budget?from="+now.AddDate(0, 0, -6).Format(time.DateOnly)+"&to="+now.Format(time.DateOnly), url.Values{"_csrf": {tok}, "amount": {"50"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	require.Contains(t, p.Header.Get("Location"), path+"?from=")
	p = b.get(path)
	require.Contains(t, p.Body, `value="50.00"`)
	require.Regexp(t, `company [^<]*</td><td>calendar_month_utc</td><td class="num">\$50\.00</td>`, p.Body)
	p = b.post(path+"/budget", url.Values{"_csrf": {tok}, "amount": {"lots"}})
	require.Equal(t, http.StatusBadRequest, p.Status, p.Body)
	require.Contains(t, p.Body, "The budget was not set")

	// An agent budget below its spend opens a hard incident at the next cost event.
	p = b.post(path+"/agent-budget", url.Values{"_csrf": {tok}, "agentId": {agentID}, "amount": {"2.50"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	p = b.get(path)
	require.Regexp(t, `Spender</td><td>[a-z_]+</td><td class="num">\$2\.50</td>`, p.Body)
	res = h.Do("POST", "/api/companies/"+co+"/cost-events", map[string]any{"agentId": agentID, "provider": "anthropic", "model": "opus-x",
		"costCents": 100, "occurredAt": now.Format(time.RFC3339)})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	var incidentID string
	sdktest.WaitFor(t, time.Minute, func() bool {
		var incs []map[string]any
		h.Do("GET", "/api/companies/"+co+"/budget-incidents?status=open", nil).JSON(t, &incs)
		for _, inc := range incs {
			if inc["thresholdType"] == "hard" {
				incidentID = inc["id"].(string)
				return true
			}
		}
		return false
	}, "a hard budget incident")
	p = b.get(path)
	require.Contains(t, p.Body, `id="incident-`+incidentID+`"`)
	require.Contains(t, p.Body, "Raise budget and resume")
	// Raising to less than the spend is refused with the API's reason.
	p = b.post(path+"/incidents/"+incidentID+"/resolve", url.Values{"_csrf": {tok}, "action": {"raise_budget_and_resume"}, "amount": {"1"}})
	require.Equal(t, http.StatusBadRequest, p.Status, p.Body)
	require.Contains(t, p.Body, "The change was refused")
	p = b.post(path+"/incidents/"+incidentID+"/resolve", url.Values{"_csrf": {tok}, "action": {"raise_budget_and_resume"}, "amount": {"10"},
		"decisionNote": {"worth it"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	inc := map[string]any{}
	var all []map[string]any
	h.Do("GET", "/api/companies/"+co+"/budget-incidents", nil).JSON(t, &all)
	for _, i := range all {
		if i["id"] == incidentID {
			inc = i
		}
	}
	require.Equal(t, "resolved", inc["status"])
	p = b.get(path)
	require.NotContains(t, p.Body, `action="/c/`+co+`/costs/incidents/`+incidentID)

	// Without a CSRF token nothing changes.
	p = b.post(path+"/budget", url.Values{"amount": {"1"}})
	require.Equal(t, http.StatusForbidden, p.Status, p.Body)
	require.Contains(t, b.get(path).Body, `value="50.00"`)
}
