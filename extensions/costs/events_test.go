package costs

import (
	"fmt"
	"math"
	"net/http"
	"net/url"
	"sort"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

// ledgerEvent is one cost event a test reports and the model the expected figures are
// computed from.
type ledgerEvent struct {
	agent, provider, biller, billingType, model, project, costStatus string
	cost, in, cached, out                                            int64
	at                                                               time.Time
	issue                                                            string
}

// within reports whether the event falls in [from, to] (zero ends open).
func (e ledgerEvent) within(from, to time.Time) bool {
	return (from.IsZero() || !e.at.Before(from)) && (to.IsZero() || !e.at.After(to))
}

// totals sums events matching keep by key.
type totals struct{ cost, in, cached, out, subIn, subCached, subOut int64 }

func sumBy(evs []ledgerEvent, keep func(ledgerEvent) bool, key func(ledgerEvent) string) map[string]*totals {
	out := map[string]*totals{}
	for _, e := range evs {
		if !keep(e) {
			continue
		}
		k := key(e)
		if out[k] == nil {
			out[k] = &totals{}
		}
		t := out[k]
		t.cost += e.cost
		t.in += e.in
		t.cached += e.cached
		t.out += e.out
		if e.billingType == "subscription_included" || e.billingType == "subscription_overage" {
			t.subIn += e.in
			t.subCached += e.cached
			t.subOut += e.out
		}
	}
	return out
}

func pct(part, whole int64) float64 {
	if whole == 0 {
		return 0
	}
	return math.Round(float64(part)/float64(whole)*10000) / 100
}

func TestCostLedgerAndSpendReads(t *testing.T) {
	t.Parallel()
	h := startHost(t)
	company := h.CreateCompany("Spend Co")
	worker := createAgent(t, h, company, "Smoke Worker")
	ceo := createAgent(t, h, company, "Smoke CEO")
	project := obj(t, do(t, h, http.StatusCreated, "POST", "/api/companies/"+company+"/projects", map[string]any{"name": "Smoke Project"}))["id"].(string)
	issue := obj(t, do(t, h, http.StatusCreated, "POST", "/api/companies/"+company+"/issues",
		map[string]any{"title": "Spend on this", "projectId": project}))["id"].(string)

	now := time.Now().UTC()
	monthStart := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	evs := []ledgerEvent{
		{agent: worker, provider: "anthropic", biller: "anthropic", billingType: "metered_api", model: "m1", project: project, cost: 250, in: 1200, cached: 100, out: 300, at: now.Add(-time.Hour)},
		{agent: ceo, provider: "openai", biller: "openrouter", billingType: "unknown", model: "m2", costStatus: "unpriced", in: 500, out: 50, at: now.Add(-2 * time.Hour)},
		{agent: worker, provider: "anthropic", biller: "anthropic", billingType: "metered_api", model: "m1", issue: issue, project: project, cost: 100, in: 10, out: 5, at: now.Add(-5*time.Hour + 2*time.Minute)},
		{agent: worker, provider: "anthropic", biller: "anthropic", billingType: "metered_api", model: "m1", cost: 40, in: 4, out: 1, at: now.Add(-5*time.Hour - 2*time.Minute)},
		{agent: worker, provider: "anthropic", biller: "anthropic", billingType: "metered_api", model: "m1", cost: 7, at: now.Add(-24*time.Hour + 2*time.Minute)},
		{agent: worker, provider: "anthropic", biller: "anthropic", billingType: "metered_api", model: "m1", cost: 11, at: now.Add(-24*time.Hour - 2*time.Minute)},
		{agent: ceo, provider: "openai", biller: "openai", billingType: "credits", model: "m3", cost: 13, in: 3, at: now.Add(-7*24*time.Hour + 2*time.Minute)},
		{agent: ceo, provider: "openai", biller: "openai", billingType: "credits", model: "m3", cost: 17, in: 7, at: now.Add(-7*24*time.Hour - 2*time.Minute)},
		{agent: worker, provider: "anthropic", biller: "anthropic", billingType: "metered_api", model: "m1", cost: 1000, at: monthStart.Add(-time.Second)},
		{agent: worker, provider: "anthropic", biller: "anthropic", billingType: "metered_api", model: "m1", cost: 3, at: monthStart},
		{agent: worker, provider: "anthropic", biller: "anthropic", billingType: "subscription_included", model: "m1", in: 70, out: 7, at: now.Add(-30 * time.Minute)},
	}
	sampleKeys := []string{"id", "companyId", "agentId", "issueId", "projectId", "goalId", "heartbeatRunId", "billingCode", "provider",
		"biller", "billingType", "costStatus", "model", "inputTokens", "cachedInputTokens", "outputTokens", "costCents", "occurredAt", "createdAt"}
	for i, e := range evs {
		body := map[string]any{"agentId": e.agent, "provider": e.provider, "model": e.model, "occurredAt": iso(e.at),
			"inputTokens": e.in, "cachedInputTokens": e.cached, "outputTokens": e.out, "billingType": e.billingType}
		if e.biller != e.provider {
			body["biller"] = e.biller
		}
		if e.costStatus == "unpriced" {
			body["costStatus"] = "unpriced"
		} else {
			body["costCents"] = e.cost
		}
		switch {
		case e.issue != "":
			body["issueId"] = e.issue
		case e.project != "":
			body["projectId"] = e.project
		}
		got := postCost(t, h, company, body)
		keys := make([]string, 0, len(got))
		for k := range got {
			keys = append(keys, k)
		}
		require.ElementsMatch(t, sampleKeys, keys, "event %d", i)
		require.Equal(t, e.biller, got["biller"], "biller defaults to the provider")
		require.Equal(t, e.project, strOrEmpty(got["projectId"]), "event %d project (derived from its issue)", i)
		if e.costStatus == "unpriced" {
			require.Equal(t, "unpriced", got["costStatus"])
			require.EqualValues(t, 0, got["costCents"])
			require.EqualValues(t, 500, got["inputTokens"], "unpriced events keep their tokens")
		} else {
			require.Equal(t, "reported", got["costStatus"])
		}
	}

	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		c2 := h.CreateCompany("Defaults Co")
		a := createAgent(t, h, c2, "Defaulter")
		got := postCost(t, h, c2, map[string]any{"agentId": a, "provider": "anthropic", "model": "m", "costCents": 5, "occurredAt": iso(now)})
		require.Equal(t, "anthropic", got["biller"])
		require.Equal(t, "unknown", got["billingType"])
		require.Equal(t, "reported", got["costStatus"])
		require.EqualValues(t, 0, got["inputTokens"])
	})

	q := func(path string, from, to time.Time) string {
		v := url.Values{}
		if !from.IsZero() {
			v.Set("from", iso(from))
		}
		if !to.IsZero() {
			v.Set("to", iso(to))
		}
		return "/api/companies/" + company + "/costs/" + path + "?" + v.Encode()
	}
	ranges := []struct {
		name     string
		from, to time.Time
	}{
		{"AllTime", time.Time{}, time.Time{}},
		{"ThisMonth", monthStart, time.Time{}},
		{"UntilMonthStartExclusive", time.Time{}, monthStart.Add(-time.Microsecond)},
		{"OneInstantInclusive", monthStart.Add(-time.Second), monthStart.Add(-time.Second)},
		{"RaggedHours", now.Add(-30*time.Hour - 17*time.Minute), now.Add(-93 * time.Minute)},
		{"WithinOneHour", now.Add(-65 * time.Minute), now.Add(-50 * time.Minute)},
		{"LastEightDays", now.Add(-8 * 24 * time.Hour), now},
	}
	for _, rg := range ranges {
		t.Run("Summary"+rg.name, func(t *testing.T) {
			t.Parallel()
			want := sumBy(evs, func(e ledgerEvent) bool { return e.within(rg.from, rg.to) }, func(ledgerEvent) string { return "" })
			var cost int64
			if w := want[""]; w != nil {
				cost = w.cost
			}
			got := obj(t, do(t, h, http.StatusOK, "GET", q("summary", rg.from, rg.to), nil))
			require.Equal(t, map[string]any{"companyId": company, "spendCents": float64(cost), "budgetCents": float64(0),
				"utilizationPercent": float64(0)}, got)

			byAgent := list(t, do(t, h, http.StatusOK, "GET", q("by-agent", rg.from, rg.to), nil))
			wantAgents := sumBy(evs, func(e ledgerEvent) bool { return e.within(rg.from, rg.to) }, func(e ledgerEvent) string { return e.agent })
			require.Len(t, byAgent, len(wantAgents))
			for _, row := range byAgent {
				w := wantAgents[row["agentId"].(string)]
				require.NotNil(t, w)
				require.Equal(t, []int64{w.cost, w.in, w.cached, w.out, w.subIn, w.subCached, w.subOut},
					[]int64{num(row["costCents"]), num(row["inputTokens"]), num(row["cachedInputTokens"]), num(row["outputTokens"]),
						num(row["subscriptionInputTokens"]), num(row["subscriptionCachedInputTokens"]), num(row["subscriptionOutputTokens"])}, "%v", row)
			}
		})
	}

	t.Run("Breakdowns", func(t *testing.T) {
		t.Parallel()
		all := func(ledgerEvent) bool { return true }
		byAgent := list(t, do(t, h, http.StatusOK, "GET", q("by-agent", time.Time{}, time.Time{}), nil))
		require.Len(t, byAgent, 2)
		require.Equal(t, worker, byAgent[0]["agentId"], "largest spend first")
		require.Equal(t, "Smoke Worker", byAgent[0]["agentName"])
		require.Equal(t, "idle", byAgent[0]["agentStatus"])
		require.ElementsMatch(t, []string{"agentId", "agentName", "agentStatus", "costCents", "inputTokens", "cachedInputTokens", "outputTokens",
			"apiRunCount", "subscriptionRunCount", "subscriptionCachedInputTokens", "subscriptionInputTokens", "subscriptionOutputTokens"}, keysOf(byAgent[0]))
		require.EqualValues(t, 0, byAgent[0]["apiRunCount"], "no heartbeat runs reported costs")

		byModel := list(t, do(t, h, http.StatusOK, "GET", q("by-agent-model", time.Time{}, time.Time{}), nil))
		want := sumBy(evs, all, func(e ledgerEvent) string {
			return e.agent + "|" + e.provider + "|" + e.biller + "|" + e.billingType + "|" + e.model
		})
		require.Len(t, byModel, len(want))
		for _, row := range byModel {
			w := want[fmt.Sprintf("%s|%s|%s|%s|%s", row["agentId"], row["provider"], row["biller"], row["billingType"], row["model"])]
			require.NotNil(t, w, "%v", row)
			require.Equal(t, w.cost, num(row["costCents"]))
			require.Equal(t, w.in, num(row["inputTokens"]))
		}

		byProvider := list(t, do(t, h, http.StatusOK, "GET", q("by-provider", time.Time{}, time.Time{}), nil))
		want = sumBy(evs, all, func(e ledgerEvent) string { return e.provider + "|" + e.biller + "|" + e.billingType + "|" + e.model })
		require.Len(t, byProvider, len(want))
		for _, row := range byProvider {
			w := want[fmt.Sprintf("%s|%s|%s|%s", row["provider"], row["biller"], row["billingType"], row["model"])]
			require.NotNil(t, w, "%v", row)
			require.Equal(t, []int64{w.cost, w.out}, []int64{num(row["costCents"]), num(row["outputTokens"])})
		}

		byBiller := list(t, do(t, h, http.StatusOK, "GET", q("by-biller", time.Time{}, time.Time{}), nil))
		want = sumBy(evs, all, func(e ledgerEvent) string { return e.biller })
		require.Len(t, byBiller, 3)
		for _, row := range byBiller {
			w := want[row["biller"].(string)]
			require.Equal(t, w.cost, num(row["costCents"]), "%v", row)
			require.EqualValues(t, 1, row["providerCount"])
		}
		require.Equal(t, "anthropic", byBiller[0]["biller"])
		require.EqualValues(t, 1, byBiller[0]["modelCount"])

		byProject := list(t, do(t, h, http.StatusOK, "GET", q("by-project", time.Time{}, time.Time{}), nil))
		require.Equal(t, []map[string]any{{"projectId": project, "projectName": "Smoke Project", "costCents": float64(350),
			"inputTokens": float64(1210), "cachedInputTokens": float64(100), "outputTokens": float64(305)}}, byProject)
	})

	t.Run("WindowSpend", func(t *testing.T) {
		t.Parallel()
		rows := list(t, do(t, h, http.StatusOK, "GET", "/api/companies/"+company+"/costs/window-spend", nil))
		asOf := time.Now().UTC()
		got := map[string]int64{}
		for _, row := range rows {
			got[fmt.Sprintf("%s|%s|%s|%v", row["window"], row["provider"], row["biller"], row["windowHours"])] = num(row["costCents"])
		}
		want := map[string]int64{}
		for _, w := range []struct {
			name  string
			hours int
		}{{"5h", 5}, {"24h", 24}, {"7d", 168}} {
			from := asOf.Add(-time.Duration(w.hours) * time.Hour)
			for k, v := range sumBy(evs, func(e ledgerEvent) bool { return !e.at.Before(from) }, func(e ledgerEvent) string { return e.provider + "|" + e.biller }) {
				want[fmt.Sprintf("%s|%s|%d", w.name, k, w.hours)] = v.cost
			}
		}
		require.Equal(t, want, got)
		require.Equal(t, "5h", rows[0]["window"], "windows in order 5h, 24h, 7d")
	})

	t.Run("MonthlySpendAndBudget", func(t *testing.T) {
		t.Parallel()
		inMonth := func(e ledgerEvent) bool { return !e.at.Before(monthStart) }
		month := sumBy(evs, inMonth, func(ledgerEvent) string { return "" })[""].cost
		workerMonth := sumBy(evs, func(e ledgerEvent) bool { return inMonth(e) && e.agent == worker }, func(ledgerEvent) string { return "" })[""].cost
		co := obj(t, do(t, h, http.StatusOK, "GET", "/api/companies/"+company, nil))
		require.EqualValues(t, month, co["spentMonthlyCents"], "the company's month spend excludes last month's events")
		ag := obj(t, do(t, h, http.StatusOK, "GET", "/api/agents/"+worker, nil))
		require.EqualValues(t, workerMonth, ag["spentMonthlyCents"])

		var dash map[string]any
		require.Nil(t, invoke(t, h, "costs.dashboardSummary", company, map[string]any{"companyId": company}, &dash))
		require.Equal(t, map[string]any{"monthSpendCents": float64(month), "monthBudgetCents": float64(0), "monthUtilizationPercent": float64(0),
			"activeIncidents": float64(0), "pendingApprovals": float64(0)}, dash)
	})

	t.Run("Activity", func(t *testing.T) {
		t.Parallel()
		acts := list(t, do(t, h, http.StatusOK, "GET", "/api/companies/"+company+"/activity?action=cost.reported&limit=100", nil))
		require.Len(t, acts, len(evs))
		require.Equal(t, "cost_event", acts[0]["entityType"])
	})

	t.Run("AgentsReportOnlyTheirOwn", func(t *testing.T) {
		t.Parallel()
		own := h.CreateCompany("Own Co")
		me, peer := createAgent(t, h, own, "Me"), createAgent(t, h, own, "Peer")
		key := agentKey(t, h, me)
		body := map[string]any{"agentId": me, "provider": "anthropic", "model": "m1", "costCents": 4, "occurredAt": iso(now)}
		got := postCost(t, h, own, body, key...)
		require.Equal(t, me, got["agentId"])
		body["agentId"] = peer
		res := h.Do("POST", "/api/companies/"+own+"/cost-events", body, key...)
		require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
		require.Equal(t, "Agents can only report their own costs", obj(t, res)["error"])
		// The board reports for any agent of the company.
		postCost(t, h, own, body)
		require.EqualValues(t, 8, obj(t, do(t, h, http.StatusOK, "GET", "/api/companies/"+own+"/costs/summary", nil, key...))["spendCents"])

		// Reads are open to the company's agents, closed to others.
		do(t, h, http.StatusForbidden, "GET", "/api/companies/"+company+"/costs/summary", nil, key...)
		do(t, h, http.StatusForbidden, "POST", "/api/companies/"+company+"/cost-events", body, key...)
		// Board-only routes refuse agents.
		do(t, h, http.StatusForbidden, "GET", "/api/companies/"+own+"/costs/quota-windows", nil, key...)
	})

	t.Run("Validation", func(t *testing.T) {
		t.Parallel()
		other := h.CreateCompany("Stranger Co")
		stranger := createAgent(t, h, other, "Stranger")
		base := func(over map[string]any) map[string]any {
			b := map[string]any{"agentId": worker, "provider": "anthropic", "model": "m1", "costCents": 1, "occurredAt": iso(now)}
			for k, v := range over {
				if v == nil {
					delete(b, k)
				} else {
					b[k] = v
				}
			}
			return b
		}
		cases := []struct {
			name string
			body any
			path string
		}{
			{"MissingAgent", base(map[string]any{"agentId": nil}), "agentId"},
			{"AgentOfAnotherCompany", base(map[string]any{"agentId": stranger}), "agentId"},
			{"UnknownAgent", base(map[string]any{"agentId": uuid.NewString()}), "agentId"},
			{"MissingProvider", base(map[string]any{"provider": " "}), "provider"},
			{"MissingModel", base(map[string]any{"model": nil}), "model"},
			{"MissingCost", base(map[string]any{"costCents": nil}), "costCents"},
			{"FractionalCost", base(map[string]any{"costCents": 1.5}), "costCents"},
			{"NegativeCost", base(map[string]any{"costCents": -1}), "costCents"},
			{"PricedUnpriced", base(map[string]any{"costStatus": "unpriced", "costCents": 5}), "costCents"},
			{"BadCostStatus", base(map[string]any{"costStatus": "estimated"}), "costStatus"},
			{"BadBillingType", base(map[string]any{"billingType": "api"}), "billingType"},
			{"NegativeTokens", base(map[string]any{"inputTokens": -3}), "inputTokens"},
			{"MissingOccurredAt", base(map[string]any{"occurredAt": nil}), "occurredAt"},
			{"BadOccurredAt", base(map[string]any{"occurredAt": "yesterday"}), "occurredAt"},
			{"UnknownIssue", base(map[string]any{"issueId": uuid.NewString()}), "issueId"},
			{"UnknownProject", base(map[string]any{"projectId": uuid.NewString()}), "projectId"},
			{"UnknownGoal", base(map[string]any{"goalId": uuid.NewString()}), "goalId"},
			{"UnknownRun", base(map[string]any{"heartbeatRunId": uuid.NewString()}), "heartbeatRunId"},
			{"MalformedIssue", base(map[string]any{"issueId": "PAP-1x"}), "issueId"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				requireValidation(t, h.Do("POST", "/api/companies/"+company+"/cost-events", tc.body), tc.path)
			})
		}
		// Unknown fields are ignored, as the reference product does (posted to the other
		// company so the sums of this one stay put).
		do(t, h, http.StatusCreated, "POST", "/api/companies/"+other+"/cost-events", base(map[string]any{"agentId": stranger, "costUsd": 1}))
		requireValidation(t, h.Do("GET", "/api/companies/"+company+"/costs/summary?from=last-week", nil), "from")
		requireValidation(t, h.Do("GET", "/api/companies/"+company+"/costs/by-agent?to=2026-13-45", nil), "to")
		requireValidation(t, h.Do("GET", "/api/companies/"+company+"/costs/by-provider?from="+url.QueryEscape(iso(now))+"&to="+
			url.QueryEscape(iso(now.Add(-time.Hour))), nil), "from")
		do(t, h, http.StatusNotFound, "GET", "/api/companies/"+uuid.NewString()+"/costs/summary", nil)
	})
}

func keysOf(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func strOrEmpty(v any) string {
	s, _ := v.(string)
	return s
}

// agentKey mints an API key for an agent and returns bearer header pairs.
func agentKey(t testing.TB, h *sdktest.Host, agentID string) []string {
	t.Helper()
	res := do(t, h, http.StatusCreated, "POST", "/api/agents/"+agentID+"/keys", map[string]any{"name": "test"})
	return []string{"Authorization", "Bearer " + obj(t, res)["token"].(string)}
}
