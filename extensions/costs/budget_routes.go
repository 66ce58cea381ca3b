package costs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelhq/keel/sdk"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

func init() {
	addRoutes(
		route{Method: "PATCH", Path: "/api/companies/{companyId}/budgets", Response: new(policyView), Access: sdk.AccessBoard, CompanyFromPath: true,
			Summary: "Set the company's monthly budget and sync its monthly budget policy", Body: budgetPatchBody{},
			Handle: handleCompanyBudgetPatch},
		route{Method: "PATCH", Path: "/api/agents/{agentId}/budgets", Response: new(policyView), Access: sdk.AccessBoard,
			Summary: "Set an agent's monthly budget and sync its monthly budget policy", Body: budgetPatchBody{},
			Handle: handleAgentBudgetPatch},
		route{Method: "GET", Path: "/api/companies/{companyId}/budgets/overview", Response: new(map[string]any), CompanyFromPath: true,
			Summary: "Budget policies with their current spend, open incidents, budget-paused agent and project counts, pending approvals",
			Handle:  handleBudgetOverview},
		route{Method: "POST", Path: "/api/companies/{companyId}/budgets/policies", Response: new(policyView), Access: sdk.AccessBoard, CompanyFromPath: true,
			Summary: "Create or update the budget policy of a company, agent or project scope", Body: policyUpsert{},
			Handle: handlePolicyUpsert},
		route{Method: "GET", Path: "/api/companies/{companyId}/budget-incidents", Query: incidentListQuery{}, Response: new([]*incident), CompanyFromPath: true,
			Summary: "List budget incidents, newest first (filter status open|resolved|dismissed; limit 1-500, default 100)",
			Handle:  handleIncidentList},
		route{Method: "POST", Path: "/api/companies/{companyId}/budget-incidents/{incidentId}/resolve", Response: new(incident), Access: sdk.AccessBoard,
			CompanyFromPath: true, Summary: "Resolve a budget incident: keep_paused, or raise_budget_and_resume with a new amount",
			Body: resolveBody{}, Handle: handleIncidentResolve},
	)
	addMethods(map[string]method{
		"upsertBudgetPolicy": {
			Description: "Create or update a budget policy: input {companyId, scopeType company|agent|project, scopeId, amount, metric?, " +
				"windowKind?, warnPercent?, hardStopEnabled?, notifyEnabled?, isActive?} with the defaults of POST " +
				"…/budgets/policies. The call's company wins. Output: the policy with its current spend.",
			Call: callUpsertBudgetPolicy,
		},
		"budgetGate": {
			ReadOnly: true,
			Description: "Ask whether budget enforcement blocks new work: input {companyId, agentId, projectId?}. Output {blocked, " +
				"scopeType, scopeId, incidentId, reason}: blocked while an open hard incident of the current window (or a budget " +
				"pause kept by the board) covers the company, the agent or the project.",
			Call: callBudgetGate,
		},
		"dashboardSummary": {
			ReadOnly: true,
			Description: "Budget figures of the dashboard: input {companyId}. Output {monthSpendCents, monthBudgetCents, " +
				"monthUtilizationPercent, activeIncidents, pendingApprovals} for the current UTC month; pendingApprovals counts " +
				"open hard incidents, which wait for a board decision.",
			Call: callDashboardSummary,
		},
	})
}

// budgetPatchBody is the body of the PATCH …/budgets routes.
type budgetPatchBody struct {
	BudgetMonthlyCents *int64 `json:"budgetMonthlyCents" jsonschema:"required,minimum=0"`
}

func (b *budgetPatchBody) amount() (int64, error) {
	switch {
	case b.BudgetMonthlyCents == nil:
		return 0, invalid("budgetMonthlyCents", "is required")
	case *b.BudgetMonthlyCents < 0:
		return 0, invalid("budgetMonthlyCents", "must be a non-negative integer")
	}
	return *b.BudgetMonthlyCents, nil
}

func handleCompanyBudgetPatch(c *Costs, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := r.PathValue("companyId")
	var body budgetPatchBody
	if err := decodeBody(r, &body); err != nil {
		c.writeErr(rw, err)
		return
	}
	amount, err := body.amount()
	if err != nil {
		c.writeErr(rw, err)
		return
	}
	before, _, err := c.company(ctx, companyID)
	if err != nil {
		c.writeErr(rw, err)
		return
	}
	rec, err := c.updateCompanyBudget(ctx, &hostv1.UpdateCompanyBudgetRequest{CompanyId: companyID, BudgetMonthlyCents: &amount})
	if err != nil {
		c.writeErr(rw, err)
		return
	}
	pol, err := c.ensureMonthlyPolicy(ctx, companyID, scopeCompany, companyID, amount)
	if err != nil {
		c.writeErr(rw, err)
		return
	}
	c.activity(ctx, sdk.ActorFrom(ctx), companyID, "company.budget_updated", "company", companyID, map[string]any{
		"budgetMonthlyCents": amount, "previousBudgetMonthlyCents": before.BudgetMonthlyCents, "policyId": pol.ID})
	rw.Header().Set("Content-Type", "application/json; charset=utf-8")
	rw.WriteHeader(http.StatusOK)
	_, _ = rw.Write(rec)
}

func handleAgentBudgetPatch(c *Costs, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ag, err := c.agent(ctx, r.PathValue("agentId"))
	if err != nil {
		c.writeErr(rw, err)
		return
	}
	if ag == nil {
		c.writeErr(rw, notFound("Agent not found"))
		return
	}
	if err := requireCompanyAccess(ctx, ag.CompanyId); err != nil {
		c.writeErr(rw, err)
		return
	}
	var body budgetPatchBody
	if err := decodeBody(r, &body); err != nil {
		c.writeErr(rw, err)
		return
	}
	amount, err := body.amount()
	if err != nil {
		c.writeErr(rw, err)
		return
	}
	var rec json.RawMessage
	if err := c.host.Call(ctx, "agents.setBudget", sdk.ActorFrom(ctx), ag.CompanyId,
		map[string]any{"agentId": ag.Id, "budgetMonthlyCents": amount}, &rec); err != nil {
		if sdk.IsMethodNotProvided(err) {
			err = &sdk.Error{Status: http.StatusServiceUnavailable, Message: "The agents extension is not running"}
		}
		c.writeErr(rw, err)
		return
	}
	pol, err := c.ensureMonthlyPolicy(ctx, ag.CompanyId, scopeAgent, ag.Id, amount)
	if err != nil {
		c.writeErr(rw, err)
		return
	}
	c.activity(ctx, sdk.ActorFrom(ctx), ag.CompanyId, "agent.budget_updated", "agent", ag.Id, map[string]any{
		"budgetMonthlyCents": amount, "policyId": pol.ID})
	rw.Header().Set("Content-Type", "application/json; charset=utf-8")
	rw.WriteHeader(http.StatusOK)
	_, _ = rw.Write(rec)
}

func handlePolicyUpsert(c *Costs, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := r.PathValue("companyId")
	var body policyUpsert
	if err := decodeBody(r, &body); err != nil {
		c.writeErr(rw, err)
		return
	}
	view, err := c.upsertPolicyView(ctx, sdk.ActorFrom(ctx), companyID, &body)
	if err != nil {
		c.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, view)
}

func callUpsertBudgetPolicy(c *Costs, ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in struct {
		policyUpsert
		CompanyID string `json:"companyId"`
	}
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	companyID, err := callCompany(call, in.CompanyID)
	if err != nil {
		return nil, err
	}
	return c.upsertPolicyView(ctx, callActor(call), companyID, &in.policyUpsert)
}

// upsertPolicyView upserts a policy and returns its view.
func (c *Costs) upsertPolicyView(ctx context.Context, actor *sdk.Actor, companyID string, in *policyUpsert) (*policyView, error) {
	pol, err := c.upsertPolicy(ctx, actor, companyID, in)
	if err != nil {
		return nil, err
	}
	views, err := c.policyViews(ctx, companyID, []*policy{pol})
	if err != nil {
		return nil, err
	}
	return views[0], nil
}

// policyView is the API form of a policy with its current window and spend.
type policyView struct {
	PolicyID           string     `json:"policyId"`
	CompanyID          string     `json:"companyId"`
	ScopeType          string     `json:"scopeType"`
	ScopeID            string     `json:"scopeId"`
	ScopeName          *string    `json:"scopeName"`
	Metric             string     `json:"metric"`
	WindowKind         string     `json:"windowKind"`
	Amount             int64      `json:"amount"`
	ObservedAmount     int64      `json:"observedAmount"`
	RemainingAmount    int64      `json:"remainingAmount"`
	UtilizationPercent float64    `json:"utilizationPercent"`
	WarnPercent        int        `json:"warnPercent"`
	HardStopEnabled    bool       `json:"hardStopEnabled"`
	NotifyEnabled      bool       `json:"notifyEnabled"`
	IsActive           bool       `json:"isActive"`
	Status             string     `json:"status"`
	Paused             bool       `json:"paused"`
	PauseReason        *string    `json:"pauseReason"`
	WindowStart        *time.Time `json:"windowStart"`
	WindowEnd          *time.Time `json:"windowEnd"`
	CreatedAt          time.Time  `json:"createdAt"`
	UpdatedAt          time.Time  `json:"updatedAt"`
}

// scopeState is a scope's name and pause as its owner shows them.
type scopeState struct {
	Name        *string
	Paused      bool
	PauseReason *string
}

// scopeInfo holds the names and pause states of a company's scopes.
type scopeInfo struct {
	states            map[string]scopeState
	pausedAgents      int
	pausedProjects    int
	agentsWithReasons bool
}

func scopeKey(scopeType, scopeID string) string { return scopeType + ":" + scopeID }

// state returns a scope's state (zero when unknown).
func (s *scopeInfo) state(scopeType, scopeID string) scopeState {
	return s.states[scopeKey(scopeType, scopeID)]
}

// loadScopes reads the company, its agents (from the agents owner, for their pause reasons;
// from the kernel when it is absent) and the named projects plus those paused by budget.
func (c *Costs) loadScopes(ctx context.Context, companyID string, projectIDs []string) (*scopeInfo, error) {
	info := &scopeInfo{states: map[string]scopeState{}}
	co, _, err := c.company(ctx, companyID)
	if err != nil {
		return nil, err
	}
	name := co.Name
	info.states[scopeKey(scopeCompany, companyID)] = scopeState{Name: &name, Paused: co.Status == "paused", PauseReason: co.PauseReason}
	var agents []struct {
		ID          string  `json:"id"`
		Name        string  `json:"name"`
		Status      string  `json:"status"`
		PauseReason *string `json:"pauseReason"`
	}
	err = c.host.Call(ctx, "agents.list", sdk.SystemActor(), companyID, map[string]any{"companyId": companyID, "includeTerminated": true}, &agents)
	switch {
	case err == nil:
		info.agentsWithReasons = true
	case sdk.IsMethodNotProvided(err):
		ids, err := c.agentsOf(ctx, companyID)
		if err != nil {
			return nil, err
		}
		for _, a := range ids {
			agents = append(agents, struct {
				ID          string  `json:"id"`
				Name        string  `json:"name"`
				Status      string  `json:"status"`
				PauseReason *string `json:"pauseReason"`
			}{ID: a.Id, Name: a.Name, Status: a.Status})
		}
	default:
		return nil, fmt.Errorf("error listing agents of company %s: %w", companyID, err)
	}
	for _, a := range agents {
		n := a.Name
		info.states[scopeKey(scopeAgent, a.ID)] = scopeState{Name: &n, Paused: a.Status == "paused", PauseReason: a.PauseReason}
		if a.Status == "paused" && strOr(a.PauseReason, "") == budgetPauseReason {
			info.pausedAgents++
		}
	}
	refs, ok, err := c.refs(ctx, companyID, projectIDs, nil)
	if err != nil {
		return nil, err
	}
	if ok {
		for _, p := range refs.Projects {
			n := p.Name
			info.states[scopeKey(scopeProject, p.ID)] = scopeState{Name: &n, Paused: p.PauseReason != nil, PauseReason: p.PauseReason}
		}
		info.pausedProjects = refs.PausedByBudgetCount
	}
	return info, nil
}

// policyViews builds the views of policies of one company.
func (c *Costs) policyViews(ctx context.Context, companyID string, pols []*policy) ([]*policyView, error) {
	var projectIDs []string
	for _, p := range pols {
		if p.ScopeType == scopeProject {
			projectIDs = append(projectIDs, p.ScopeID)
		}
	}
	info, err := c.loadScopes(ctx, companyID, projectIDs)
	if err != nil {
		return nil, err
	}
	return c.policyViewsWith(ctx, companyID, pols, info)
}

func (c *Costs) policyViewsWith(ctx context.Context, companyID string, pols []*policy, info *scopeInfo) ([]*policyView, error) {
	now := time.Now().UTC()
	var month, lifetime *scopeSums
	var err error
	out := make([]*policyView, 0, len(pols))
	for _, p := range pols {
		ws, we := p.window(now)
		var sums *scopeSums
		if p.WindowKind == windowMonth {
			if month == nil {
				if month, err = c.sumScopes(ctx, c.pool, companyID, ws, we); err != nil {
					return nil, err
				}
			}
			sums = month
		} else {
			if lifetime == nil {
				if lifetime, err = c.sumScopes(ctx, c.pool, companyID, nil, nil); err != nil {
					return nil, err
				}
			}
			sums = lifetime
		}
		observed := sums.sum(p.ScopeType, p.ScopeID)
		st := info.state(p.ScopeType, p.ScopeID)
		v := &policyView{PolicyID: p.ID, CompanyID: p.CompanyID, ScopeType: p.ScopeType, ScopeID: p.ScopeID, ScopeName: st.Name,
			Metric: p.Metric, WindowKind: p.WindowKind, Amount: p.Amount, ObservedAmount: observed,
			RemainingAmount: max(0, p.Amount-observed), UtilizationPercent: percent(observed, p.Amount), WarnPercent: p.WarnPercent,
			HardStopEnabled: p.HardStopEnabled, NotifyEnabled: p.NotifyEnabled, IsActive: p.IsActive, Status: "ok",
			Paused: st.Paused, PauseReason: st.PauseReason, WindowStart: ws, WindowEnd: we, CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt}
		switch {
		case p.Amount > 0 && observed >= p.Amount:
			v.Status = "hard_stop"
		case p.Amount > 0 && observed*100 >= p.Amount*int64(p.WarnPercent):
			v.Status = "warning"
		}
		out = append(out, v)
	}
	return out, nil
}

// withNames fills the scope names of incidents.
func withNames(incs []*incident, info *scopeInfo) []*incident {
	for _, i := range incs {
		i.ScopeName = info.state(i.ScopeType, i.ScopeID).Name
	}
	if incs == nil {
		return []*incident{}
	}
	return incs
}

func handleBudgetOverview(c *Costs, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := r.PathValue("companyId")
	pols, err := c.queryPolicies(ctx, `SELECT `+policyColumns+` FROM budget_policies WHERE company_id = $1
		ORDER BY updated_at DESC, created_at DESC, id`, companyID)
	if err != nil {
		c.writeErr(rw, err)
		return
	}
	incs, err := c.queryIncidents(ctx, `SELECT `+incidentColumns+` FROM budget_incidents WHERE company_id = $1 AND status = 'open'
		ORDER BY created_at DESC, id`, companyID)
	if err != nil {
		c.writeErr(rw, err)
		return
	}
	var projectIDs []string
	for _, p := range pols {
		if p.ScopeType == scopeProject {
			projectIDs = append(projectIDs, p.ScopeID)
		}
	}
	for _, i := range incs {
		if i.ScopeType == scopeProject {
			projectIDs = append(projectIDs, i.ScopeID)
		}
	}
	info, err := c.loadScopes(ctx, companyID, projectIDs)
	if err != nil {
		c.writeErr(rw, err)
		return
	}
	views, err := c.policyViewsWith(ctx, companyID, pols, info)
	if err != nil {
		c.writeErr(rw, err)
		return
	}
	pending := 0
	for _, i := range incs {
		if i.ThresholdType == thresholdHard {
			pending++
		}
	}
	sdk.WriteJSON(rw, http.StatusOK, map[string]any{
		"companyId": companyID, "policies": views, "activeIncidents": withNames(incs, info),
		"pausedAgentCount": info.pausedAgents, "pausedProjectCount": info.pausedProjects, "pendingApprovalCount": pending,
	})
}

func handleIncidentList(c *Costs, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := r.PathValue("companyId")
	q := r.URL.Query()
	var p problems
	st := q.Get("status")
	if st != "" && st != incidentOpen && st != incidentResolved && st != incidentDismissed {
		p.add("status", "must be one of open, resolved, dismissed")
	}
	limit := 100
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 500 {
			p.add("limit", "must be an integer from 1 to 500")
		}
		limit = n
	}
	if err := p.err(); err != nil {
		c.writeErr(rw, err)
		return
	}
	incs, err := c.queryIncidents(ctx, `SELECT `+incidentColumns+` FROM budget_incidents WHERE company_id = $1
		AND ($2 = '' OR status = $2) ORDER BY created_at DESC, id LIMIT $3`, companyID, st, limit)
	if err != nil {
		c.writeErr(rw, err)
		return
	}
	var projectIDs []string
	for _, i := range incs {
		if i.ScopeType == scopeProject {
			projectIDs = append(projectIDs, i.ScopeID)
		}
	}
	info, err := c.loadScopes(ctx, companyID, projectIDs)
	if err != nil {
		c.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, withNames(incs, info))
}

func handleIncidentResolve(c *Costs, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := r.PathValue("companyId")
	var body resolveBody
	if err := decodeBody(r, &body); err != nil {
		c.writeErr(rw, err)
		return
	}
	inc, err := c.resolveIncident(ctx, companyID, r.PathValue("incidentId"), &body)
	if err != nil {
		c.writeErr(rw, err)
		return
	}
	info, err := c.loadScopes(ctx, companyID, []string{inc.ScopeID})
	if err != nil {
		c.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, withNames([]*incident{inc}, info)[0])
}

func callBudgetGate(c *Costs, ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in struct {
		CompanyID string `json:"companyId"`
		AgentID   string `json:"agentId"`
		ProjectID string `json:"projectId"`
	}
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	companyID, err := callCompany(call, in.CompanyID)
	if err != nil {
		return nil, err
	}
	return c.budgetGate(ctx, companyID, in.AgentID, in.ProjectID)
}

func callDashboardSummary(c *Costs, ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in struct {
		CompanyID string `json:"companyId"`
	}
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	companyID, err := callCompany(call, in.CompanyID)
	if err != nil {
		return nil, err
	}
	co, _, err := c.company(ctx, companyID)
	if err != nil {
		return nil, err
	}
	ms, me := monthWindow(time.Now())
	var spend, active, pending int64
	if err := c.pool.QueryRow(ctx, `SELECT
			(SELECT coalesce(sum(cost_cents), 0)::bigint FROM cost_rollups WHERE company_id = $1 AND grain = 'm' AND bucket >= $2 AND bucket < $3),
			(SELECT count(*) FROM budget_incidents WHERE company_id = $1 AND status = 'open'),
			(SELECT count(*) FROM budget_incidents WHERE company_id = $1 AND status = 'open' AND threshold_type = 'hard')`,
		companyID, ms, me).Scan(&spend, &active, &pending); err != nil {
		return nil, fmt.Errorf("error reading dashboard figures of company %s: %w", companyID, err)
	}
	return map[string]any{"monthSpendCents": spend, "monthBudgetCents": co.BudgetMonthlyCents,
		"monthUtilizationPercent": percent(spend, co.BudgetMonthlyCents), "activeIncidents": active, "pendingApprovals": pending}, nil
}

// jobMaintenance is the key of the periodic budget maintenance job.
const jobMaintenance = "budget-maintenance"

func init() {
	addJobs(sdk.Job{Key: jobMaintenance, Every: "5m", Description: "Dismiss open budget incidents whose window has ended and lift " +
		"the budget pauses they set (a new window starts at 0), open the incidents that lifetime policies are due and " +
		"have not had (a policy stored after the events that cross it), and at a new UTC month reset spentMonthlyCents " +
		"of the companies and agents that spent in the previous one."})
}

// maintenance runs the budget maintenance job. It is idempotent.
func (c *Costs) maintenance(ctx context.Context) error {
	expired, err := c.queryIncidents(ctx, `SELECT `+incidentColumns+` FROM budget_incidents
		WHERE status = 'open' AND window_end IS NOT NULL AND window_end <= now() ORDER BY created_at`)
	if err != nil {
		return err
	}
	for _, inc := range expired {
		if err := c.expireIncident(ctx, inc); err != nil {
			return err
		}
	}
	if err := c.catchUpLifetimePolicies(ctx); err != nil {
		return err
	}
	return c.monthRollover(ctx)
}

// dueLifetimePoliciesSQL lists, per company, the scopes of the active lifetime policies
// whose all-time billed cents (from the monthly rollups, as sumScopes reads them) cross a
// threshold they have no incident for: the soft one at warnPercent when notifications are
// on, the hard one at the amount when hard stop is on. An incident of the same amount
// counts whatever its status, as it does for openIncident's unique key.
const dueLifetimePoliciesSQL = `SELECT p.company_id::text,
		coalesce(array_agg(DISTINCT p.scope_id::text) FILTER (WHERE p.scope_type = 'agent'), '{}'),
		coalesce(array_agg(DISTINCT p.scope_id::text) FILTER (WHERE p.scope_type = 'project'), '{}')
	FROM budget_policies p
	CROSS JOIN LATERAL (SELECT coalesce(sum(r.cost_cents), 0) AS cents FROM cost_rollups r
		WHERE r.company_id = p.company_id AND r.grain = 'm'
		  AND (p.scope_type = 'company' OR (p.scope_type = 'agent' AND r.agent_id = p.scope_id)
		    OR (p.scope_type = 'project' AND r.project_id = p.scope_id))) AS o
	WHERE p.window_kind = 'lifetime' AND p.is_active AND p.amount > 0 AND p.metric = 'billed_cents'
	  AND ((p.notify_enabled AND o.cents * 100 >= p.amount * p.warn_percent AND NOT EXISTS (SELECT 1 FROM budget_incidents i
	        WHERE i.policy_id = p.id AND i.window_start IS NULL AND i.threshold_type = 'soft' AND i.amount_limit = p.amount))
	    OR (p.hard_stop_enabled AND o.cents >= p.amount AND NOT EXISTS (SELECT 1 FROM budget_incidents i
	        WHERE i.policy_id = p.id AND i.window_start IS NULL AND i.threshold_type = 'hard' AND i.amount_limit = p.amount)))
	GROUP BY p.company_id ORDER BY p.company_id`

// catchUpLifetimePolicies settles the companies whose lifetime policies are due an
// incident they have not had. Policies are evaluated when an event of their scope is
// settled; a lifetime policy stored after the events that cross it (here or on another
// node), or one that was not yet visible to the insert of an event outside the current
// month (see settleNeeded), waits at most for this job.
func (c *Costs) catchUpLifetimePolicies(ctx context.Context) error {
	rows, err := c.pool.Query(ctx, dueLifetimePoliciesSQL)
	if err != nil {
		return fmt.Errorf("error listing due lifetime budget policies: %w", err)
	}
	type due struct {
		company          string
		agents, projects []string
	}
	var all []due
	for rows.Next() {
		var d due
		if err := rows.Scan(&d.company, &d.agents, &d.projects); err != nil {
			rows.Close()
			return fmt.Errorf("error listing due lifetime budget policies: %w", err)
		}
		all = append(all, d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("error listing due lifetime budget policies: %w", err)
	}
	for _, d := range all {
		if err := c.settleSpend(ctx, d.company, d.agents, d.projects); err != nil {
			c.log.Warn("error evaluating lifetime budget policies", "company", d.company, "error", err)
		}
	}
	return nil
}

// expireIncident dismisses an open incident of an ended window and lifts its budget pause.
func (c *Costs) expireIncident(ctx context.Context, inc *incident) error {
	lc, err := c.lockCompany(ctx, inc.CompanyID)
	if err != nil {
		return fmt.Errorf("error expiring budget incident %s: %w", inc.ID, err)
	}
	defer lc.release(true)
	tag, err := lc.Exec(ctx, `UPDATE budget_incidents SET status = 'dismissed', resolution = $2, resolved_at = now(), updated_at = now()
		WHERE id = $1 AND status = 'open'`, inc.ID, resolutionWindowEnded)
	if err != nil {
		return fmt.Errorf("error expiring budget incident %s: %w", inc.ID, err)
	}
	if tag.RowsAffected() == 0 {
		return nil
	}
	resumed := false
	if inc.ThresholdType == thresholdHard && inc.ScopePaused {
		if resumed, err = c.resumeScope(ctx, sdk.SystemActor(), inc.CompanyID, inc.ScopeType, inc.ScopeID); err != nil {
			c.log.Warn("error lifting the budget pause of an expired incident", "incident", inc.ID, "error", err)
		}
	}
	c.activity(ctx, nil, inc.CompanyID, "budget.incident_expired", "budget_incident", inc.ID, map[string]any{
		"scopeType": inc.ScopeType, "scopeId": inc.ScopeID, "thresholdType": inc.ThresholdType, "windowEnd": inc.WindowEnd, "resumed": resumed})
	return nil
}

// monthRollover resets spentMonthlyCents once per new UTC month: every company and agent
// with spend in the months since the last rollover gets this month's figure (usually 0).
func (c *Costs) monthRollover(ctx context.Context) error {
	ms, _ := monthWindow(time.Now())
	cur := ms.Format("2006-01")
	var last string
	err := c.pool.QueryRow(ctx, `SELECT value FROM costs_state WHERE key = 'spend_month'`).Scan(&last)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("error reading spend month: %w", err)
	}
	if last == cur {
		return nil
	}
	if last != "" {
		since, perr := time.Parse("2006-01", last)
		if perr != nil {
			since = ms.AddDate(-1, 0, 0)
		}
		rows, err := c.pool.Query(ctx, `SELECT company_id::text, array_agg(DISTINCT agent_id::text) FROM cost_rollups
			WHERE grain = 'm' AND bucket >= $1 AND bucket < $2 GROUP BY company_id`, since, ms)
		if err != nil {
			return fmt.Errorf("error listing spenders of the last month: %w", err)
		}
		spenders := map[string][]string{}
		for rows.Next() {
			var company string
			var agents []string
			if err := rows.Scan(&company, &agents); err != nil {
				rows.Close()
				return fmt.Errorf("error listing spenders of the last month: %w", err)
			}
			spenders[company] = agents
		}
		rows.Close()
		companies := make([]string, 0, len(spenders))
		for company := range spenders {
			companies = append(companies, company)
		}
		sort.Strings(companies)
		for _, company := range companies {
			agents := spenders[company]
			sort.Strings(agents)
			if err := c.settleSpend(ctx, company, agents, nil); err != nil {
				c.log.Warn("error resetting monthly spend", "company", company, "error", err)
			}
		}
	}
	if _, err := c.pool.Exec(ctx, `INSERT INTO costs_state (key, value) VALUES ('spend_month', $1)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = now()`, cur); err != nil {
		return fmt.Errorf("error storing spend month: %w", err)
	}
	return nil
}
