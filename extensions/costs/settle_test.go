package costs

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

// TestPastMonthCostEvents checks the settling of events outside the current UTC month: they
// change no monthly figure, so without a lifetime policy covering them no settle runs; a
// lifetime policy they cross is enforced as for any event, and one stored after the events
// that cross it is caught up by the maintenance job.
func TestPastMonthCostEvents(t *testing.T) {
	t.Parallel()
	h := startHost(t)
	monthStart, _ := monthWindow(time.Now())
	lastMonth := iso(monthStart.Add(-36 * time.Hour))
	ctx := context.Background()
	spent := func(t *testing.T, path string) int64 {
		t.Helper()
		return num(obj(t, do(t, h, http.StatusOK, "GET", path, nil))["spentMonthlyCents"])
	}
	total := func(t *testing.T, companyID, query string) int64 {
		t.Helper()
		return num(obj(t, do(t, h, http.StatusOK, "GET", "/api/companies/"+companyID+"/costs/summary"+query, nil))["spendCents"])
	}
	project := func(t *testing.T, companyID, name string) string {
		t.Helper()
		return obj(t, do(t, h, http.StatusCreated, "POST", "/api/companies/"+companyID+"/projects", map[string]any{"name": name}))["id"].(string)
	}
	policy := func(t *testing.T, companyID string, body map[string]any) {
		t.Helper()
		do(t, h, http.StatusOK, "POST", "/api/companies/"+companyID+"/budgets/policies", body)
	}
	// staleSpend writes a wrong spentMonthlyCents on the company record, which any settle
	// of the company would correct.
	staleSpend := func(t *testing.T, companyID string, cents int64) {
		t.Helper()
		_, err := h.Kernel.Pool.Exec(ctx, `UPDATE kernel.companies SET spent_monthly_cents = $2 WHERE id = $1`, companyID, cents)
		require.NoError(t, err)
	}

	t.Run("WithoutLifetimePolicyNoSettle", func(t *testing.T) {
		t.Parallel()
		company := h.CreateCompany("History Co")
		agent := createAgent(t, h, company, "Historian")
		mine, other := project(t, company, "Mine"), project(t, company, "Other")
		do(t, h, http.StatusOK, "PATCH", "/api/companies/"+company+"/budgets", map[string]any{"budgetMonthlyCents": 1000})
		// A lifetime policy of another project does not cover the events below.
		policy(t, company, map[string]any{"scopeType": "project", "scopeId": other, "windowKind": "lifetime", "amount": 10})
		cost(t, h, company, agent, 100)
		require.EqualValues(t, 100, spent(t, "/api/companies/"+company))

		ev := cost(t, h, company, agent, 5000, "occurredAt", lastMonth, "projectId", mine)
		require.EqualValues(t, 5000, ev["costCents"])
		require.Equal(t, mine, ev["projectId"])
		require.NotContains(t, ev, "windowedPolicy")
		require.EqualValues(t, 100, spent(t, "/api/companies/"+company), "the month's spend is unchanged")
		require.EqualValues(t, 100, spent(t, "/api/agents/"+agent))
		require.EqualValues(t, 100, total(t, company, "?from="+iso(monthStart)))
		require.EqualValues(t, 5100, total(t, company, ""), "the event is stored and counted")
		require.Empty(t, incidents(t, h, company, "open"), "the monthly budget of 1000 does not count last month's 5000")

		// No settle ran for it: a stale figure on the company record stays as it is.
		staleSpend(t, company, 777)
		cost(t, h, company, agent, 300, "occurredAt", lastMonth, "projectId", mine)
		require.EqualValues(t, 777, spent(t, "/api/companies/"+company))
		// An event of the current month settles, and corrects it.
		cost(t, h, company, agent, 1)
		require.EqualValues(t, 101, spent(t, "/api/companies/"+company))
	})

	t.Run("LifetimePolicyEnforced", func(t *testing.T) {
		t.Parallel()
		for _, scope := range []string{scopeProject, scopeAgent, scopeCompany} {
			t.Run(scope, func(t *testing.T) {
				t.Parallel()
				company := h.CreateCompany("Lifetime " + scope + " Co")
				agent := createAgent(t, h, company, "Spender")
				proj := project(t, company, "Capped")
				scopeID := map[string]string{scopeProject: proj, scopeAgent: agent, scopeCompany: company}[scope]
				policy(t, company, map[string]any{"scopeType": scope, "scopeId": scopeID, "windowKind": "lifetime", "amount": 1000,
					"warnPercent": 50})
				cost(t, h, company, agent, 600, "occurredAt", lastMonth, "projectId", proj)
				open := incidents(t, h, company, "open")
				require.Len(t, open, 1, "%v", open)
				require.Equal(t, thresholdSoft, open[0]["thresholdType"])
				require.Equal(t, scopeID, open[0]["scopeId"])

				cost(t, h, company, agent, 500, "occurredAt", lastMonth, "projectId", proj)
				hard := byThreshold(incidents(t, h, company, "open"), thresholdHard)
				require.Len(t, hard, 1)
				require.Equal(t, windowLifetime, hard[0]["windowKind"])
				require.EqualValues(t, 1100, hard[0]["amountObserved"])
				require.Equal(t, true, hard[0]["scopePaused"])
				requirePausedForBudget(t, h, scope, scopeID)
				require.EqualValues(t, 0, spent(t, "/api/companies/"+company), "the month's spend is unchanged")
			})
		}
	})

	t.Run("MaintenanceCatchesUpLaterPolicy", func(t *testing.T) {
		t.Parallel()
		company := h.CreateCompany("Late Policy Co")
		agent := createAgent(t, h, company, "Early Spender")
		proj := project(t, company, "Overrun")
		cost(t, h, company, agent, 1500, "occurredAt", lastMonth, "projectId", proj)
		// Storing a policy does not evaluate it, here or on another node; the job does.
		policy(t, company, map[string]any{"scopeType": "project", "scopeId": proj, "amount": 1000})
		require.Empty(t, incidents(t, h, company, "open"))
		runJob(t, h)
		open := incidents(t, h, company, "open")
		require.Len(t, open, 2, "%v", open)
		hard := byThreshold(open, thresholdHard)
		require.Len(t, hard, 1)
		require.EqualValues(t, 1500, hard[0]["amountObserved"])
		requirePausedForBudget(t, h, scopeProject, proj)
		runJob(t, h)
		require.Len(t, incidents(t, h, company, "open"), 2, "once per threshold")
	})
}

// requirePausedForBudget requires a company, agent or project to be paused with pauseReason
// "budget".
func requirePausedForBudget(t *testing.T, h *sdktest.Host, scopeType, scopeID string) {
	t.Helper()
	path := map[string]string{scopeCompany: "/api/companies/", scopeAgent: "/api/agents/", scopeProject: "/api/projects/"}[scopeType] + scopeID
	rec := obj(t, do(t, h, http.StatusOK, "GET", path, nil))
	require.Equal(t, budgetPauseReason, rec["pauseReason"], "%v", rec)
	if scopeType != scopeProject {
		require.Equal(t, "paused", rec["status"])
	}
}
