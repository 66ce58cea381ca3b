package costs

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	extensionv1 "github.com/keelhq/keel/sdk/proto/extension/v1"
	"github.com/keelhq/keel/sdktest"
)

// cost reports billed cents for an agent now (optionally for a project).
func cost(t testing.TB, h *sdktest.Host, companyID, agentID string, cents int64, extra ...any) map[string]any {
	t.Helper()
	body := map[string]any{"agentId": agentID, "provider": "anthropic", "model": "m1", "costCents": cents, "occurredAt": iso(time.Now())}
	for i := 0; i+1 < len(extra); i += 2 {
		body[extra[i].(string)] = extra[i+1]
	}
	return postCost(t, h, companyID, body)
}

// wakeRunning wakes an agent (optionally for an issue) and waits for its run to run.
func wakeRunning(t testing.TB, h *sdktest.Host, agentID string, payload map[string]any) string {
	t.Helper()
	res := obj(t, do(t, h, http.StatusAccepted, "POST", "/api/agents/"+agentID+"/wakeup", map[string]any{"source": "on_demand", "payload": payload}))
	runID, _ := res["id"].(string)
	require.NotEmpty(t, runID, "a run, not a skip: %v", res)
	waitRun(t, h, runID, "running")
	return runID
}

func overview(t testing.TB, h *sdktest.Host, companyID string) map[string]any {
	t.Helper()
	return obj(t, do(t, h, http.StatusOK, "GET", "/api/companies/"+companyID+"/budgets/overview", nil))
}

func incidents(t testing.TB, h *sdktest.Host, companyID, status string) []map[string]any {
	t.Helper()
	return list(t, do(t, h, http.StatusOK, "GET", "/api/companies/"+companyID+"/budget-incidents?status="+status, nil))
}

func gate(t testing.TB, h *sdktest.Host, companyID, agentID, projectID string) map[string]any {
	t.Helper()
	var out map[string]any
	require.Nil(t, invoke(t, h, "costs.budgetGate", companyID, map[string]any{"companyId": companyID, "agentId": agentID, "projectId": projectID}, &out))
	return out
}

func resolve(t testing.TB, h *sdktest.Host, companyID, incidentID string, body map[string]any) *sdktest.Response {
	t.Helper()
	return h.Do("POST", "/api/companies/"+companyID+"/budget-incidents/"+incidentID+"/resolve", body)
}

func byThreshold(incs []map[string]any, threshold string) []map[string]any {
	var out []map[string]any
	for _, i := range incs {
		if i["thresholdType"] == threshold {
			out = append(out, i)
		}
	}
	return out
}

func TestBudgetEnforcement(t *testing.T) {
	t.Parallel()
	h := startHost(t)
	monthStart := time.Date(time.Now().UTC().Year(), time.Now().UTC().Month(), 1, 0, 0, 0, 0, time.UTC)

	t.Run("AgentSoftThenHardThenRaise", func(t *testing.T) {
		t.Parallel()
		company := h.CreateCompany("Agent Budget Co")
		worker := scriptAgent(t, h, company, "Sleeper", "sleep 30")
		pol := obj(t, do(t, h, http.StatusOK, "POST", "/api/companies/"+company+"/budgets/policies",
			map[string]any{"scopeType": "agent", "scopeId": worker, "amount": 1000, "warnPercent": 50}))
		for k, v := range map[string]any{"scopeType": "agent", "scopeId": worker, "scopeName": "Sleeper", "metric": "billed_cents",
			"windowKind": "calendar_month_utc", "amount": float64(1000), "observedAmount": float64(0), "remainingAmount": float64(1000),
			"utilizationPercent": float64(0), "warnPercent": float64(50), "hardStopEnabled": true, "notifyEnabled": true, "isActive": true,
			"status": "ok", "paused": false, "pauseReason": nil, "windowStart": iso(monthStart), "windowEnd": iso(monthStart.AddDate(0, 1, 0))} {
			require.Equal(t, v, pol[k], k)
		}
		require.EqualValues(t, 1000, obj(t, do(t, h, http.StatusOK, "GET", "/api/agents/"+worker, nil))["budgetMonthlyCents"],
			"a monthly agent policy syncs the agent's budget")

		runID := wakeRunning(t, h, worker, nil)
		cost(t, h, company, worker, 600)
		ov := overview(t, h, company)
		require.Len(t, ov["activeIncidents"], 1)
		soft := ov["activeIncidents"].([]any)[0].(map[string]any)
		require.Equal(t, "soft", soft["thresholdType"])
		require.Equal(t, "Sleeper", soft["scopeName"])
		require.EqualValues(t, 600, soft["amountObserved"])
		require.Equal(t, "warning", ov["policies"].([]any)[0].(map[string]any)["status"])
		require.Equal(t, "running", obj(t, do(t, h, http.StatusOK, "GET", "/api/agents/"+worker, nil))["status"], "a soft incident pauses nothing")
		require.Equal(t, false, gate(t, h, company, worker, "")["blocked"])

		cost(t, h, company, worker, 500)
		ag := obj(t, do(t, h, http.StatusOK, "GET", "/api/agents/"+worker, nil))
		require.Equal(t, "paused", ag["status"])
		require.Equal(t, "budget", ag["pauseReason"])
		require.EqualValues(t, 1100, ag["spentMonthlyCents"])
		run := waitRun(t, h, runID, "cancelled")
		require.Equal(t, "cancelled", run["status"], "the hard stop cancels the agent's running run")

		hard := byThreshold(incidents(t, h, company, "open"), "hard")
		require.Len(t, hard, 1)
		require.EqualValues(t, 1100, hard[0]["amountObserved"])
		require.EqualValues(t, 1000, hard[0]["amountLimit"])
		require.Equal(t, true, hard[0]["scopePaused"])
		approval := obj(t, do(t, h, http.StatusOK, "GET", fmt.Sprintf("/api/approvals/%s", hard[0]["approvalId"]), nil))
		require.Equal(t, "budget_override_required", approval["type"])
		require.Equal(t, "pending", approval["status"])
		require.Equal(t, hard[0]["id"], approval["payload"].(map[string]any)["incidentId"])

		g := gate(t, h, company, worker, "")
		require.Equal(t, true, g["blocked"])
		require.Equal(t, "agent", g["scopeType"])
		require.Equal(t, hard[0]["id"], g["incidentId"])
		require.NotEmpty(t, g["reason"])

		// More spend in the same window opens nothing new.
		cost(t, h, company, worker, 10)
		require.Len(t, incidents(t, h, company, ""), 2)
		ov = overview(t, h, company)
		require.EqualValues(t, 1, ov["pendingApprovalCount"])
		require.EqualValues(t, 1, ov["pausedAgentCount"])
		var dash map[string]any
		require.Nil(t, invoke(t, h, "costs.dashboardSummary", company, map[string]any{"companyId": company}, &dash))
		require.EqualValues(t, 2, dash["activeIncidents"])
		require.EqualValues(t, 1, dash["pendingApprovals"])
		require.EqualValues(t, 1110, dash["monthSpendCents"])

		// Raising to no more than the observed spend is refused and the agent stays paused.
		requireValidation(t, resolve(t, h, company, hard[0]["id"].(string), map[string]any{"action": "raise_budget_and_resume", "amount": 1110}), "amount")
		requireValidation(t, resolve(t, h, company, hard[0]["id"].(string), map[string]any{"action": "raise_budget_and_resume"}), "amount")
		requireValidation(t, resolve(t, h, company, hard[0]["id"].(string), map[string]any{"action": "forgive"}), "action")
		require.Equal(t, "paused", obj(t, do(t, h, http.StatusOK, "GET", "/api/agents/"+worker, nil))["status"])

		res := resolve(t, h, company, hard[0]["id"].(string), map[string]any{"action": "raise_budget_and_resume", "amount": 5000,
			"decisionNote": "worth it"})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		done := obj(t, res)
		require.Equal(t, "resolved", done["status"])
		require.Equal(t, "raise_budget_and_resume", done["resolution"])
		require.Equal(t, "worth it", done["decisionNote"])
		ag = obj(t, do(t, h, http.StatusOK, "GET", "/api/agents/"+worker, nil))
		require.Equal(t, "idle", ag["status"])
		require.Nil(t, ag["pauseReason"])
		require.EqualValues(t, 5000, ag["budgetMonthlyCents"])
		ov = overview(t, h, company)
		require.Empty(t, ov["activeIncidents"], "raising resolves the policy's soft incident too")
		require.EqualValues(t, 5000, ov["policies"].([]any)[0].(map[string]any)["amount"])
		require.Equal(t, false, gate(t, h, company, worker, "")["blocked"])
		require.Equal(t, http.StatusConflict, resolve(t, h, company, hard[0]["id"].(string), map[string]any{"action": "keep_paused"}).Status)

		acts := list(t, do(t, h, http.StatusOK, "GET", "/api/companies/"+company+"/activity?entityType=budget_incident", nil))
		actions := map[string]int{}
		for _, a := range acts {
			actions[a["action"].(string)]++
		}
		require.Equal(t, map[string]int{"budget.incident_opened": 2, "budget.incident_resolved": 1}, actions)
	})

	t.Run("ProjectConcurrentEventsOpenOneIncidentEach", func(t *testing.T) {
		t.Parallel()
		company := h.CreateCompany("Project Budget Co")
		agent := createAgent(t, h, company, "Builder")
		sleeper := scriptAgent(t, h, company, "Project Sleeper", "sleep 30")
		project := obj(t, do(t, h, http.StatusCreated, "POST", "/api/companies/"+company+"/projects", map[string]any{"name": "Rocket"}))["id"].(string)
		issue := obj(t, do(t, h, http.StatusCreated, "POST", "/api/companies/"+company+"/issues",
			map[string]any{"title": "Build it", "projectId": project}))["id"].(string)
		pol := obj(t, do(t, h, http.StatusOK, "POST", "/api/companies/"+company+"/budgets/policies",
			map[string]any{"scopeType": "project", "scopeId": project, "amount": 100}))
		require.Equal(t, "lifetime", pol["windowKind"], "project policies default to a lifetime window")
		require.Nil(t, pol["windowStart"])
		require.Equal(t, "Rocket", pol["scopeName"])
		require.EqualValues(t, 80, pol["warnPercent"])

		otherRun := wakeRunning(t, h, sleeper, nil)
		projectRun := wakeRunning(t, h, sleeper, map[string]any{"issueId": issue})
		var wg sync.WaitGroup
		for range 10 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cost(t, h, company, agent, 20, "projectId", project)
			}()
		}
		wg.Wait()
		incs := incidents(t, h, company, "")
		require.Len(t, byThreshold(incs, "soft"), 1, "one soft incident however many events crossed 80%%")
		require.Len(t, byThreshold(incs, "hard"), 1, "one hard incident however many events crossed 100%%")
		hard := byThreshold(incs, "hard")[0]
		require.EqualValues(t, 100, hard["amountLimit"])
		require.GreaterOrEqual(t, num(hard["amountObserved"]), int64(100))

		p := obj(t, do(t, h, http.StatusOK, "GET", "/api/projects/"+project, nil))
		require.Equal(t, "budget", p["pauseReason"])
		require.Equal(t, "cancelled", waitRun(t, h, projectRun, "cancelled")["status"], "the project's in-flight run is cancelled")
		require.Equal(t, "running", obj(t, do(t, h, http.StatusOK, "GET", "/api/heartbeat-runs/"+otherRun, nil))["status"],
			"runs outside the project go on")
		do(t, h, http.StatusOK, "POST", "/api/heartbeat-runs/"+otherRun+"/cancel", nil)

		require.Equal(t, true, gate(t, h, company, agent, project)["blocked"])
		require.Equal(t, false, gate(t, h, company, agent, "")["blocked"], "work outside the project is not blocked")
		require.EqualValues(t, 1, overview(t, h, company)["pausedProjectCount"])

		res := resolve(t, h, company, hard["id"].(string), map[string]any{"action": "keep_paused"})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, "keep_paused", obj(t, res)["resolution"])
		require.Equal(t, "budget", obj(t, do(t, h, http.StatusOK, "GET", "/api/projects/"+project, nil))["pauseReason"])
		g := gate(t, h, company, agent, project)
		require.Equal(t, true, g["blocked"], "a kept pause still blocks")
		require.Equal(t, "project", g["scopeType"])

		// The board resumes the project by hand: nothing blocks it any more.
		do(t, h, http.StatusOK, "PATCH", "/api/projects/"+project, map[string]any{"pauseReason": nil})
		require.Equal(t, false, gate(t, h, company, agent, project)["blocked"])
	})

	t.Run("CompanyHardStopAndBudgetPatches", func(t *testing.T) {
		t.Parallel()
		company := h.CreateCompany("Company Budget Co")
		sleeper := scriptAgent(t, h, company, "Company Sleeper", "sleep 30")
		co := obj(t, do(t, h, http.StatusOK, "PATCH", "/api/companies/"+company+"/budgets", map[string]any{"budgetMonthlyCents": 1000}))
		require.EqualValues(t, 1000, co["budgetMonthlyCents"])
		require.Equal(t, company, co["id"])
		requireValidation(t, h.Do("PATCH", "/api/companies/"+company+"/budgets", map[string]any{"budgetMonthlyCents": -1}), "budgetMonthlyCents")
		requireValidation(t, h.Do("PATCH", "/api/companies/"+company+"/budgets", map[string]any{}), "budgetMonthlyCents")
		pols := overview(t, h, company)["policies"].([]any)
		require.Len(t, pols, 1)
		require.Equal(t, "company", pols[0].(map[string]any)["scopeType"])
		require.EqualValues(t, 1000, pols[0].(map[string]any)["amount"])

		ag := obj(t, do(t, h, http.StatusOK, "PATCH", "/api/agents/"+sleeper+"/budgets", map[string]any{"budgetMonthlyCents": 20000}))
		require.EqualValues(t, 20000, ag["budgetMonthlyCents"])
		require.Equal(t, "Company Sleeper", ag["name"])
		require.NotNil(t, ag["orgChainHealth"])
		require.Len(t, overview(t, h, company)["policies"], 2)
		key := agentKey(t, h, sleeper)
		do(t, h, http.StatusForbidden, "PATCH", "/api/agents/"+sleeper+"/budgets", map[string]any{"budgetMonthlyCents": 1}, key...)
		do(t, h, http.StatusForbidden, "PATCH", "/api/companies/"+company+"/budgets", map[string]any{"budgetMonthlyCents": 1}, key...)
		do(t, h, http.StatusNotFound, "PATCH", "/api/agents/"+company+"/budgets", map[string]any{"budgetMonthlyCents": 1})

		runID := wakeRunning(t, h, sleeper, nil)
		cost(t, h, company, sleeper, 1200)
		co = obj(t, do(t, h, http.StatusOK, "GET", "/api/companies/"+company, nil))
		require.Equal(t, "paused", co["status"])
		require.Equal(t, "budget", co["pauseReason"])
		require.EqualValues(t, 1200, co["spentMonthlyCents"])
		waitRun(t, h, runID, "cancelled")
		sum := obj(t, do(t, h, http.StatusOK, "GET", "/api/companies/"+company+"/costs/summary", nil))
		require.EqualValues(t, 1000, sum["budgetCents"])
		require.EqualValues(t, 120, sum["utilizationPercent"])
		g := gate(t, h, company, sleeper, "")
		require.Equal(t, true, g["blocked"])
		require.Equal(t, "company", g["scopeType"])

		hard := byThreshold(incidents(t, h, company, "open"), "hard")
		require.Len(t, hard, 1)
		res := resolve(t, h, company, hard[0]["id"].(string), map[string]any{"action": "raise_budget_and_resume", "amount": 2500})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		co = obj(t, do(t, h, http.StatusOK, "GET", "/api/companies/"+company, nil))
		require.Equal(t, "active", co["status"])
		require.Nil(t, co["pauseReason"])
		require.EqualValues(t, 2500, co["budgetMonthlyCents"])
		require.Equal(t, false, gate(t, h, company, sleeper, "")["blocked"])
		acts := list(t, do(t, h, http.StatusOK, "GET", "/api/companies/"+company+"/activity?entityType=company", nil))
		seen := map[string]bool{}
		for _, a := range acts {
			seen[a["action"].(string)] = true
		}
		require.True(t, seen["company.budget_updated"] && seen["company.paused"] && seen["company.resumed"], "%v", seen)
	})

	t.Run("OwnerBudgetsAreEnforced", func(t *testing.T) {
		t.Parallel()
		// A budget set on the company record at create, or on the agent through its own
		// PATCH, becomes the monthly policy at the next cost event.
		company := obj(t, do(t, h, http.StatusCreated, "POST", "/api/companies", map[string]any{"name": "Born Budgeted", "budgetMonthlyCents": 500}))["id"].(string)
		agent := createAgent(t, h, company, "Patched")
		do(t, h, http.StatusOK, "PATCH", "/api/agents/"+agent, map[string]any{"budgetMonthlyCents": 300})
		cost(t, h, company, agent, 100)
		pols := map[string]float64{}
		for _, p := range overview(t, h, company)["policies"].([]any) {
			pm := p.(map[string]any)
			pols[pm["scopeType"].(string)] = pm["amount"].(float64)
		}
		require.Equal(t, map[string]float64{"company": 500, "agent": 300}, pols)
		cost(t, h, company, agent, 250)
		hard := byThreshold(incidents(t, h, company, "open"), "hard")
		require.Len(t, hard, 1)
		require.Equal(t, "agent", hard[0]["scopeType"])
		require.Equal(t, "paused", obj(t, do(t, h, http.StatusOK, "GET", "/api/agents/"+agent, nil))["status"])
		do(t, h, http.StatusOK, "PATCH", "/api/companies/"+company, map[string]any{"budgetMonthlyCents": 50_000})
		cost(t, h, company, agent, 1)
		for _, p := range overview(t, h, company)["policies"].([]any) {
			if pm := p.(map[string]any); pm["scopeType"] == "company" {
				require.EqualValues(t, 50_000, pm["amount"], "the company record's budget wins")
			}
		}
	})

	t.Run("EndedWindowStopsBlockingAndMonthResets", func(t *testing.T) {
		t.Parallel()
		company := h.CreateCompany("Rollover Co")
		agent := createAgent(t, h, company, "Spender")
		do(t, h, http.StatusOK, "PATCH", "/api/agents/"+agent+"/budgets", map[string]any{"budgetMonthlyCents": 100})
		cost(t, h, company, agent, 150)
		require.Equal(t, "paused", obj(t, do(t, h, http.StatusOK, "GET", "/api/agents/"+agent, nil))["status"])
		require.Equal(t, true, gate(t, h, company, agent, "")["blocked"])

		// Age the incidents into last month's window: they no longer block, and the
		// maintenance job dismisses them and lifts the budget pause.
		ctx := context.Background()
		_, err := h.Kernel.Pool.Exec(ctx, `UPDATE ext_costs.budget_incidents SET window_start = window_start - interval '1 month',
			window_end = window_start WHERE company_id = $1`, company)
		require.NoError(t, err)
		require.Equal(t, false, gate(t, h, company, agent, "")["blocked"])
		runJob(t, h)
		require.Empty(t, incidents(t, h, company, "open"))
		dismissed := incidents(t, h, company, "dismissed")
		require.Len(t, dismissed, 2)
		require.Equal(t, "window_ended", dismissed[0]["resolution"])
		ag := obj(t, do(t, h, http.StatusOK, "GET", "/api/agents/"+agent, nil))
		require.Equal(t, "idle", ag["status"])
		require.Nil(t, ag["pauseReason"])

		// At a new month the job resets spentMonthlyCents of last month's spenders to this
		// month's figure.
		_, err = h.Kernel.Pool.Exec(ctx, `UPDATE kernel.companies SET spent_monthly_cents = 999 WHERE id = $1`, company)
		require.NoError(t, err)
		_, err = h.Kernel.Pool.Exec(ctx, `INSERT INTO ext_costs.costs_state (key, value) VALUES ('spend_month', $1)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value`, monthStart.AddDate(0, -1, 0).Format("2006-01"))
		require.NoError(t, err)
		cost(t, h, company, agent, 50, "occurredAt", iso(monthStart.Add(-time.Hour)))
		_, err = h.Kernel.Pool.Exec(ctx, `UPDATE kernel.companies SET spent_monthly_cents = 999 WHERE id = $1`, company)
		require.NoError(t, err)
		runJob(t, h)
		require.EqualValues(t, 150, obj(t, do(t, h, http.StatusOK, "GET", "/api/companies/"+company, nil))["spentMonthlyCents"])
	})
}

// runJob runs the costs maintenance job now.
func runJob(t testing.TB, h *sdktest.Host) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := h.Supervisor.Extension(ctx, Key).RunJob(ctx, &extensionv1.RunJobRequest{JobKey: jobMaintenance})
	require.NoError(t, err)
	require.Nil(t, res.Error, "%v", res.Error)
}
