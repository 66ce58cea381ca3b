package costs

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

// reportScript writes a run report (usage, provider, cost…) for the process adapter.
func reportScript(report string) string {
	return `printf '%s' '` + report + `' > "$SERVICE_RUN_REPORT_FILE"`
}

func TestRunUsageBecomesCostEvent(t *testing.T) {
	t.Parallel()
	h := startHost(t)
	company := h.CreateCompany("Run Cost Co")
	project := obj(t, do(t, h, http.StatusCreated, "POST", "/api/companies/"+company+"/projects", map[string]any{"name": "Runs"}))["id"].(string)
	issue := obj(t, do(t, h, http.StatusCreated, "POST", "/api/companies/"+company+"/issues",
		map[string]any{"title": "Do it", "projectId": project}))["id"].(string)
	priced := scriptAgent(t, h, company, "Priced", reportScript(`{"usage":{"inputTokens":1000,"outputTokens":200,"cachedInputTokens":50},`+
		`"provider":"anthropic","model":"m-large","costUsd":0.5,"cacheAdjustedCostUsd":0.42,"billingType":"api"}`))
	sub := scriptAgent(t, h, company, "Subscriber", reportScript(`{"usage":{"inputTokens":300,"outputTokens":30},`+
		`"provider":"anthropic","biller":"max-plan","model":"m-large","costUsd":0.3,"billingType":"subscription"}`))
	unpriced := scriptAgent(t, h, company, "Unpriced", reportScript(`{"usage":{"inputTokens":77,"outputTokens":7},"provider":"openai","model":"m-small"}`))

	runOf := func(agentID string, payload map[string]any) string {
		res := obj(t, do(t, h, http.StatusAccepted, "POST", "/api/agents/"+agentID+"/wakeup", map[string]any{"payload": payload}))
		runID := res["id"].(string)
		require.Equal(t, "succeeded", waitRun(t, h, runID, "succeeded", "failed")["status"])
		return runID
	}
	pricedRun := runOf(priced, map[string]any{"issueId": issue})
	subRun := runOf(sub, nil)
	runOf(unpriced, nil)

	event := func(runID string) map[string]any {
		var ev map[string]any
		sdktest.WaitFor(t, 10*time.Second, func() bool {
			var b []byte
			err := h.Kernel.Pool.QueryRow(context.Background(), `SELECT to_jsonb(e) FROM ext_costs.cost_events e WHERE heartbeat_run_id = $1`,
				runID).Scan(&b)
			if err != nil {
				return false
			}
			ev = map[string]any{}
			res := &sdktest.Response{Body: b}
			res.JSON(t, &ev)
			return true
		}, "the run's cost event")
		return ev
	}
	ev := event(pricedRun)
	require.EqualValues(t, 42, ev["cost_cents"], "cacheAdjustedCostUsd wins, in cents")
	require.Equal(t, "metered_api", ev["billing_type"])
	require.Equal(t, "reported", ev["cost_status"])
	require.Equal(t, issue, ev["issue_id"])
	require.Equal(t, project, ev["project_id"], "the project comes from the run's issue")
	require.Equal(t, "run", ev["source"])
	require.EqualValues(t, 1000, ev["input_tokens"])
	ev = event(subRun)
	require.EqualValues(t, 0, ev["cost_cents"])
	require.Equal(t, "subscription_included", ev["billing_type"])
	require.Equal(t, "max-plan", ev["biller"])

	byAgent := map[string]map[string]any{}
	sdktest.WaitFor(t, 10*time.Second, func() bool {
		rows := list(t, do(t, h, http.StatusOK, "GET", "/api/companies/"+company+"/costs/by-agent", nil))
		for _, r := range rows {
			byAgent[r["agentId"].(string)] = r
		}
		return len(rows) == 3
	}, "three agents with usage")
	require.EqualValues(t, 42, byAgent[priced]["costCents"])
	require.EqualValues(t, 1, byAgent[priced]["apiRunCount"])
	require.EqualValues(t, 0, byAgent[priced]["subscriptionRunCount"])
	require.EqualValues(t, 1, byAgent[sub]["subscriptionRunCount"])
	require.EqualValues(t, 300, byAgent[sub]["subscriptionInputTokens"])
	require.EqualValues(t, 30, byAgent[sub]["subscriptionOutputTokens"])
	require.EqualValues(t, 0, byAgent[unpriced]["costCents"])
	require.EqualValues(t, 77, byAgent[unpriced]["inputTokens"], "an unpriced run keeps its tokens")
	byModel := list(t, do(t, h, http.StatusOK, "GET", "/api/companies/"+company+"/costs/by-provider", nil))
	require.Len(t, byModel, 3)
	require.EqualValues(t, 42, obj(t, do(t, h, http.StatusOK, "GET", "/api/agents/"+priced, nil))["spentMonthlyCents"])
	byProject := list(t, do(t, h, http.StatusOK, "GET", "/api/companies/"+company+"/costs/by-project", nil))
	require.Len(t, byProject, 1)
	require.EqualValues(t, 42, byProject[0]["costCents"])

	// Recording the same run again returns the first event and changes nothing.
	var again map[string]any
	require.Nil(t, invoke(t, h, "costs.recordRunCost", company, map[string]any{"companyId": company, "agentId": priced,
		"heartbeatRunId": pricedRun, "provider": "anthropic", "model": "m-large", "costCents": 999, "occurredAt": iso(time.Now())}, &again))
	require.EqualValues(t, 42, again["costCents"])
	require.Equal(t, pricedRun, again["heartbeatRunId"])
	require.EqualValues(t, 42, obj(t, do(t, h, http.StatusOK, "GET", "/api/companies/"+company+"/costs/summary?from="+
		time.Now().UTC().Add(-time.Hour).Format(time.RFC3339), nil))["spendCents"])

	e := invoke(t, h, "costs.recordRunCost", company, map[string]any{"companyId": company, "agentId": priced, "provider": "p", "model": "m",
		"costCents": 1, "occurredAt": iso(time.Now())}, nil)
	require.NotNil(t, e)
	require.Equal(t, http.StatusBadRequest, e.Status)
	e = invoke(t, h, "costs.recordRunCost", company, map[string]any{"companyId": company, "agentId": uuid.NewString(), "heartbeatRunId": uuid.NewString(),
		"provider": "p", "model": "m", "costCents": 1, "occurredAt": iso(time.Now())}, nil)
	require.NotNil(t, e)
	require.Equal(t, http.StatusBadRequest, e.Status)
}
