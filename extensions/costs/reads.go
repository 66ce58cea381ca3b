package costs

import (
	"context"
	"net/http"
	"sort"
	"time"

	"github.com/keelhq/keel/sdk"
)

func init() {
	addRoutes(
		route{Method: "GET", Path: "/api/companies/{companyId}/costs/summary", Query: costRangeQuery{}, Response: new(map[string]any), CompanyFromPath: true,
			Summary: "Billed spend over from..to (ISO date-times, both optional; all time when omitted) against the monthly budget",
			Cache:   true, Handle: handleCostSummary},
		route{Method: "GET", Path: "/api/companies/{companyId}/costs/by-agent", Query: costRangeQuery{}, Response: new([]map[string]any), CompanyFromPath: true,
			Summary: "Spend and tokens per agent over from..to", Handle: breakdownHandler(breakdownByAgent)},
		route{Method: "GET", Path: "/api/companies/{companyId}/costs/by-agent-model", Query: costRangeQuery{}, Response: new([]map[string]any), CompanyFromPath: true,
			Summary: "Spend and tokens per agent, provider, biller, billing type and model over from..to", Handle: breakdownHandler(breakdownByAgentModel)},
		route{Method: "GET", Path: "/api/companies/{companyId}/costs/by-provider", Query: costRangeQuery{}, Response: new([]map[string]any), CompanyFromPath: true,
			Summary: "Spend and tokens per provider, biller, billing type and model over from..to", Handle: breakdownHandler(breakdownByProvider)},
		route{Method: "GET", Path: "/api/companies/{companyId}/costs/by-biller", Query: costRangeQuery{}, Response: new([]map[string]any), CompanyFromPath: true,
			Summary: "Spend and tokens per biller over from..to", Handle: breakdownHandler(breakdownByBiller)},
		route{Method: "GET", Path: "/api/companies/{companyId}/costs/by-project", Query: costRangeQuery{}, Response: new([]map[string]any), CompanyFromPath: true,
			Summary: "Spend and tokens per project over from..to (events attributed to a project)", Handle: breakdownHandler(breakdownByProject)},
		route{Method: "GET", Path: "/api/companies/{companyId}/costs/window-spend", Response: new([]map[string]any), CompanyFromPath: true,
			Summary: "Rolling spend per provider and biller over the last 5 hours, 24 hours and 7 days", Handle: handleWindowSpend},
		route{Method: "GET", Path: "/api/companies/{companyId}/costs/quota-windows", Response: new([]any), Access: sdk.AccessBoard, CompanyFromPath: true,
			Summary: "Provider quota windows reported by adapters (none report quotas yet: an empty list)", Handle: handleQuotaWindows},
	)
}

func handleCostSummary(c *Costs, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := r.PathValue("companyId")
	rng, err := parseRange(r.URL.Query())
	if err != nil {
		c.writeErr(rw, err)
		return
	}
	// The spend read and the company's budget are independent: read them side by side.
	var co *companyRecord
	var coErr error
	coDone := make(chan struct{})
	go func() {
		defer close(coDone)
		co, _, coErr = c.company(ctx, companyID)
	}()
	spend, err := c.spendTotal(ctx, companyID, rangeSpans(rng), spendFilter{})
	<-coDone
	if err != nil {
		c.writeErr(rw, err)
		return
	}
	if coErr != nil {
		c.writeErr(rw, coErr)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, map[string]any{"companyId": companyID, "spendCents": spend,
		"budgetCents": co.BudgetMonthlyCents, "utilizationPercent": percent(spend, co.BudgetMonthlyCents)})
}

// breakdown is one spend breakdown: the columns it groups by and how a group becomes a row.
type breakdown struct {
	group []string
	// row builds the API row of a group; names are looked up once per read.
	row func(r *spendRow, n *names) map[string]any
	// agents and projects say which names the rows show; distinct that they count
	// distinct providers and models.
	agents, projects, distinct bool
}

// names are the display names a breakdown shows.
type names struct {
	agentName, agentStatus map[string]string
	projectName            map[string]string
}

func tokens(m map[string]any, r *spendRow) map[string]any {
	m["costCents"], m["inputTokens"], m["cachedInputTokens"], m["outputTokens"] = r.CostCents, r.InputTokens, r.CachedInputTokens, r.OutputTokens
	return m
}

func runCounts(m map[string]any, r *spendRow) map[string]any {
	m["apiRunCount"], m["subscriptionRunCount"] = r.APIRunCount, r.SubscriptionRunCount
	m["subscriptionCachedInputTokens"], m["subscriptionInputTokens"], m["subscriptionOutputTokens"] =
		r.SubCachedInputTokens, r.SubInputTokens, r.SubOutputTokens
	return m
}

func nameOr(m map[string]string, id string) any {
	if v, ok := m[id]; ok {
		return v
	}
	return nil
}

var (
	breakdownByAgent = &breakdown{group: []string{"agent_id"}, agents: true, row: func(r *spendRow, n *names) map[string]any {
		id := r.key(0)
		return runCounts(tokens(map[string]any{"agentId": id, "agentName": nameOr(n.agentName, id), "agentStatus": nameOr(n.agentStatus, id)}, r), r)
	}}
	breakdownByAgentModel = &breakdown{group: []string{"agent_id", "provider", "biller", "billing_type", "model"}, agents: true,
		row: func(r *spendRow, n *names) map[string]any {
			id := r.key(0)
			return tokens(map[string]any{"agentId": id, "agentName": nameOr(n.agentName, id), "provider": r.key(1), "biller": r.key(2),
				"billingType": r.key(3), "model": r.key(4)}, r)
		}}
	breakdownByProvider = &breakdown{group: []string{"provider", "biller", "billing_type", "model"}, row: func(r *spendRow, _ *names) map[string]any {
		return runCounts(tokens(map[string]any{"provider": r.key(0), "biller": r.key(1), "billingType": r.key(2), "model": r.key(3)}, r), r)
	}}
	breakdownByBiller = &breakdown{group: []string{"biller"}, distinct: true, row: func(r *spendRow, _ *names) map[string]any {
		m := runCounts(tokens(map[string]any{"biller": r.key(0)}, r), r)
		m["providerCount"], m["modelCount"] = r.ProviderCount, r.ModelCount
		return m
	}}
	breakdownByProject = &breakdown{group: []string{"project_id"}, projects: true, row: func(r *spendRow, n *names) map[string]any {
		if r.Keys[0] == nil {
			return nil
		}
		id := r.key(0)
		return tokens(map[string]any{"projectId": id, "projectName": nameOr(n.projectName, id)}, r)
	}}
)

// breakdownHandler serves a breakdown over the from..to of the query, largest spend first.
func breakdownHandler(b *breakdown) func(c *Costs, rw http.ResponseWriter, r *http.Request) {
	return func(c *Costs, rw http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		companyID := r.PathValue("companyId")
		rng, err := parseRange(r.URL.Query())
		if err != nil {
			c.writeErr(rw, err)
			return
		}
		rows, err := c.spendRows(ctx, companyID, rangeSpans(rng), b.group, spendFilter{}, b.distinct)
		if err != nil {
			c.writeErr(rw, err)
			return
		}
		n, err := c.names(ctx, companyID, rows, b)
		if err != nil {
			c.writeErr(rw, err)
			return
		}
		sortRows(rows)
		out := make([]map[string]any, 0, len(rows))
		for _, row := range rows {
			if m := b.row(row, n); m != nil {
				out = append(out, m)
			}
		}
		sdk.WriteJSON(rw, http.StatusOK, out)
	}
}

// sortRows orders groups by spend, then tokens, then their keys.
func sortRows(rows []*spendRow) {
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if a.CostCents != b.CostCents {
			return a.CostCents > b.CostCents
		}
		ta, tb := a.InputTokens+a.OutputTokens, b.InputTokens+b.OutputTokens
		if ta != tb {
			return ta > tb
		}
		for k := range a.Keys {
			if a.key(k) != b.key(k) {
				return a.key(k) < b.key(k)
			}
		}
		return false
	})
}

// names looks up the agent and project names a breakdown shows.
func (c *Costs) names(ctx context.Context, companyID string, rows []*spendRow, b *breakdown) (*names, error) {
	n := &names{agentName: map[string]string{}, agentStatus: map[string]string{}, projectName: map[string]string{}}
	if len(rows) == 0 {
		return n, nil
	}
	if b.agents {
		ags, err := c.agentsOf(ctx, companyID)
		if err != nil {
			return nil, err
		}
		for id, a := range ags {
			n.agentName[id], n.agentStatus[id] = a.Name, a.Status
		}
	}
	if b.projects {
		var ids []string
		for _, r := range rows {
			if id := r.key(0); id != "" {
				ids = append(ids, id)
			}
		}
		if len(ids) > 0 {
			refs, ok, err := c.refs(ctx, companyID, ids, nil)
			if err != nil {
				return nil, err
			}
			if ok {
				for _, p := range refs.Projects {
					n.projectName[p.ID] = p.Name
				}
			}
		}
	}
	return n, nil
}

// spendWindows are the rolling windows of window-spend.
var spendWindows = []struct {
	name  string
	hours int
}{{"5h", 5}, {"24h", 24}, {"7d", 168}}

func handleWindowSpend(c *Costs, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := r.PathValue("companyId")
	now := time.Now().UTC()
	out := []map[string]any{}
	for _, w := range spendWindows {
		from := now.Add(-time.Duration(w.hours) * time.Hour)
		rows, err := c.spendRows(ctx, companyID, decompose(&from, nil), []string{"provider", "biller"}, spendFilter{}, false)
		if err != nil {
			c.writeErr(rw, err)
			return
		}
		sortRows(rows)
		for _, row := range rows {
			out = append(out, tokens(map[string]any{"provider": row.key(0), "biller": row.key(1), "window": w.name,
				"windowHours": w.hours}, row))
		}
	}
	sdk.WriteJSON(rw, http.StatusOK, out)
}

// handleQuotaWindows serves the provider quota windows adapters report. No adapter reports
// quota windows yet, so the list is empty; the company was checked by the kernel (404).
func handleQuotaWindows(c *Costs, rw http.ResponseWriter, r *http.Request) {
	sdk.WriteJSON(rw, http.StatusOK, []any{})
}

// costRangeQuery documents the time range of the cost reads.
type costRangeQuery struct {
	From string `query:"from" jsonschema:"format=date-time" doc:"Start of the range (inclusive)"`
	To   string `query:"to" jsonschema:"format=date-time" doc:"End of the range"`
}

// financeEventsQuery documents the query parameters of the finance event list.
type financeEventsQuery struct {
	costRangeQuery
	Limit int `query:"limit" jsonschema:"minimum=1"`
}

// incidentListQuery documents the query parameters of the budget incident list.
type incidentListQuery struct {
	Status string `query:"status"`
	Limit  int    `query:"limit" jsonschema:"minimum=1"`
}
