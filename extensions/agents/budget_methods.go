package agents

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/keelhq/keel/sdk"
)

// budgetPauseReason is the pauseReason budget enforcement sets; only a pause with this
// reason is lifted by agents.resumeFromBudget.
const budgetPauseReason = "budget"

// Provided methods of budget enforcement, called by the costs extension.
func init() {
	addMethods(map[string]method{
		"pauseForBudget": {
			Description: "Pause an agent for budget enforcement: input {agentId}. Sets status paused with pauseReason \"budget\" " +
				"(an agent already paused keeps its reason) and cancels its queued and running runs. Output: the agent.",
			Call: callPauseForBudget,
		},
		"resumeFromBudget": {
			Description: "Resume an agent paused by budget enforcement: input {agentId}. Only a pause with pauseReason \"budget\" " +
				"is lifted (status idle). Output: the agent.",
			Call: callResumeFromBudget,
		},
		"setBudget": {
			Description: "Store an agent's budget figures: input {agentId, budgetMonthlyCents?, spentMonthlyCents?} (absent fields " +
				"are left alone; both non-negative). Output: the agent (with orgChainHealth when budgetMonthlyCents is set).",
			Call: callSetBudget,
		},
		"setSpend": {
			Description: "Store this month's spend of many agents of the call's company in one statement: input {spent: {agentId: cents}} " +
				"(non-negative). Output: {agents: {agentId: budgetMonthlyCents}} for the agents of the company (others are left out).",
			Call: callSetSpend,
		},
		"cancelRuns": {
			Description: "Cancel the queued and running runs of a company: input {companyId, issueIds?}; with issueIds only the " +
				"runs whose context issue is one of them. The call's company wins. Output: {cancelled}.",
			Call: callCancelRuns,
		},
	})
}

type budgetAgentInput struct {
	AgentID string `json:"agentId"`
}

// budgetAgent reads the agent a budget method names, in the call's company.
func (a *Agents) budgetAgent(ctx context.Context, call *sdk.MethodCall, agentID string) (*agentRef, error) {
	if !isUUID(agentID) {
		return nil, invalid("agentId", "must be a UUID")
	}
	return a.methodAgent(ctx, call, agentID)
}

func callPauseForBudget(a *Agents, ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in budgetAgentInput
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	ag, err := a.budgetAgent(ctx, call, in.AgentID)
	if err != nil {
		return nil, err
	}
	ctx = methodCtx(ctx, call, ag.ID.CompanyId)
	switch ag.ID.Status {
	case statusTerminated, statusPendingApproval:
		return ag.record(false), nil
	case statusPaused:
		// A manual (or earlier) pause stands; a paused agent should have no live runs,
		// but cancel any that slipped through.
		if n := a.cancelLiveRuns(ctx, ag.ID.Id); n > 0 {
			if err := a.activity(ctx, ag.ID.CompanyId, "agent.runs_cancelled", "agent", ag.ID.Id,
				map[string]any{"reason": budgetPauseReason, "cancelledRuns": n}); err != nil {
				a.log.Warn("error logging activity", "error", err)
			}
		}
		return ag.record(false), nil
	}
	reason, now := budgetPauseReason, timeNow()
	ag.Cfg.PauseReason, ag.Cfg.PausedAt = &reason, &now
	if err := a.moveStatus(ctx, ag, statusPaused); err != nil {
		return nil, err
	}
	n := a.cancelLiveRuns(ctx, ag.ID.Id)
	if err := a.activity(ctx, ag.ID.CompanyId, "agent.paused", "agent", ag.ID.Id,
		map[string]any{"pauseReason": reason, "cancelledRuns": n}); err != nil {
		a.log.Warn("error logging activity", "error", err)
	}
	return ag.record(false), nil
}

func callResumeFromBudget(a *Agents, ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in budgetAgentInput
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	ag, err := a.budgetAgent(ctx, call, in.AgentID)
	if err != nil {
		return nil, err
	}
	if ag.ID.Status != statusPaused || ag.Cfg.PauseReason == nil || *ag.Cfg.PauseReason != budgetPauseReason {
		return ag.record(false), nil
	}
	ctx = methodCtx(ctx, call, ag.ID.CompanyId)
	ag.Cfg.PauseReason, ag.Cfg.PausedAt = nil, nil
	if err := a.moveStatus(ctx, ag, statusIdle); err != nil {
		return nil, err
	}
	if err := a.activity(ctx, ag.ID.CompanyId, "agent.resumed", "agent", ag.ID.Id,
		map[string]any{"previousPauseReason": budgetPauseReason}); err != nil {
		a.log.Warn("error logging activity", "error", err)
	}
	return ag.record(false), nil
}

func callSetBudget(a *Agents, ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in struct {
		AgentID            string `json:"agentId"`
		BudgetMonthlyCents *int64 `json:"budgetMonthlyCents"`
		SpentMonthlyCents  *int64 `json:"spentMonthlyCents"`
	}
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	var probs []validationDetail
	if in.BudgetMonthlyCents != nil && *in.BudgetMonthlyCents < 0 {
		probs = append(probs, validationDetail{Path: "budgetMonthlyCents", Message: "must be a non-negative integer"})
	}
	if in.SpentMonthlyCents != nil && *in.SpentMonthlyCents < 0 {
		probs = append(probs, validationDetail{Path: "spentMonthlyCents", Message: "must be a non-negative integer"})
	}
	if len(probs) > 0 {
		return nil, validationError(probs...)
	}
	if !isUUID(in.AgentID) {
		return nil, invalid("agentId", "must be a UUID")
	}
	id, err := a.identity(ctx, in.AgentID)
	if err != nil {
		return nil, err
	}
	if id == nil || (call.CompanyID != "" && id.CompanyId != call.CompanyID) {
		return nil, notFound("Agent not found")
	}
	// One statement stores the figures; an identity without a configuration row gets its
	// default row first, so that the figures have somewhere to live. The spend is written
	// on every cost event, so this path stays at one round trip.
	store := func() (*configRow, error) {
		cfg := new(configRow)
		err := a.db.NewRaw(`UPDATE agent_configs SET
				budget_monthly_cents = coalesce(?, budget_monthly_cents),
				spent_monthly_cents = coalesce(?, spent_monthly_cents),
				updated_at = CASE WHEN ?::bigint IS NOT NULL AND ?::bigint <> budget_monthly_cents THEN now() ELSE updated_at END
			WHERE agent_id = ? RETURNING *`, in.BudgetMonthlyCents, in.SpentMonthlyCents, in.BudgetMonthlyCents, in.BudgetMonthlyCents,
			id.Id).Scan(ctx, cfg)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("error storing budget of agent %s: %w", id.Id, err)
		}
		return cfg, nil
	}
	cfg, err := store()
	if err == nil && cfg == nil {
		if _, err = a.pool.Exec(ctx, `INSERT INTO agent_configs (agent_id, company_id) VALUES ($1, $2) ON CONFLICT (agent_id) DO NOTHING`,
			id.Id, id.CompanyId); err != nil {
			return nil, fmt.Errorf("error creating configuration of agent %s: %w", id.Id, err)
		}
		cfg, err = store()
	}
	if err != nil {
		return nil, err
	}
	if cfg == nil {
		return nil, notFound("Agent not found")
	}
	ag := &agentRef{ID: id, Cfg: cfg}
	if in.BudgetMonthlyCents == nil {
		// A spend update (every cost event) answers without the reporting chain.
		return ag.record(false), nil
	}
	ros, err := a.loadRoster(ctx, id.CompanyId)
	if err != nil {
		return nil, err
	}
	if cur := ros.byID[id.Id]; cur != nil {
		cur.Cfg = cfg
		return ag.record(false).withChain(ros, cur, false), nil
	}
	return ag.record(false), nil
}

func callCancelRuns(a *Agents, ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in struct {
		CompanyID string   `json:"companyId"`
		IssueIDs  []string `json:"issueIds"`
	}
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	companyID := call.CompanyID
	if companyID == "" {
		companyID = in.CompanyID
	}
	if !isUUID(companyID) {
		return nil, invalid("companyId", "is required")
	}
	if in.IssueIDs != nil && len(in.IssueIDs) == 0 {
		return map[string]any{"cancelled": 0}, nil
	}
	rows, err := a.pool.Query(ctx, `SELECT id::text FROM heartbeat_runs
		WHERE company_id = $1 AND status IN ('queued', 'scheduled_retry', 'running')
		  AND ($2::text[] IS NULL OR context_snapshot->>'issueId' = ANY($2))
		ORDER BY created_at`, companyID, in.IssueIDs)
	if err != nil {
		return nil, fmt.Errorf("error listing live runs of company %s: %w", companyID, err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, fmt.Errorf("error listing live runs of company %s: %w", companyID, err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error listing live runs of company %s: %w", companyID, err)
	}
	n := 0
	for _, id := range ids {
		if _, err := a.engine.cancelRun(ctx, id); err != nil {
			a.log.Warn("error cancelling run", "run", id, "error", err)
			continue
		}
		n++
	}
	return map[string]any{"cancelled": n}, nil
}

// setSpendSQL stores the spend of many agents of one company and returns their monthly
// budgets; an agent of the company without a configuration row gets its default row.
const setSpendSQL = `WITH spent (agent_id, cents) AS (
	SELECT * FROM unnest($2::uuid[], $3::bigint[])
), inserted AS (
	INSERT INTO agent_configs (agent_id, company_id, spent_monthly_cents)
	SELECT s.agent_id, $1, s.cents FROM spent s WHERE $4 AND NOT EXISTS (SELECT 1 FROM agent_configs c WHERE c.agent_id = s.agent_id)
	ON CONFLICT (agent_id) DO NOTHING
	RETURNING agent_id::text, budget_monthly_cents
), updated AS (
	UPDATE agent_configs c SET spent_monthly_cents = s.cents
	FROM spent s WHERE c.agent_id = s.agent_id AND c.company_id = $1
	RETURNING c.agent_id::text, c.budget_monthly_cents
)
SELECT * FROM inserted UNION ALL SELECT * FROM updated`

func callSetSpend(a *Agents, ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in struct {
		Spent map[string]int64 `json:"spent"`
	}
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	if !isUUID(call.CompanyID) {
		return nil, invalid("companyId", "the call needs a company")
	}
	ids := make([]string, 0, len(in.Spent))
	cents := make([]int64, 0, len(in.Spent))
	for id, c := range in.Spent {
		if !isUUID(id) {
			return nil, invalid("spent", fmt.Sprintf("%q is not an agent id", id))
		}
		if c < 0 {
			return nil, invalid("spent."+id, "must be a non-negative integer")
		}
		ids, cents = append(ids, id), append(cents, c)
	}
	out := map[string]int64{}
	if len(ids) == 0 {
		return map[string]any{"agents": out}, nil
	}
	// Agents without a configuration row are rare (created by the kernel only); only then
	// are identities read, to keep other companies' agents out.
	var configured int
	if err := a.pool.QueryRow(ctx, `SELECT count(*) FROM agent_configs WHERE agent_id = ANY($1::uuid[]) AND company_id = $2`,
		ids, call.CompanyID).Scan(&configured); err != nil {
		return nil, fmt.Errorf("error storing agent spend: %w", err)
	}
	insertMissing := false
	if configured < len(ids) {
		kept := ids[:0]
		keptCents := cents[:0]
		for i, id := range ids {
			ident, err := a.identity(ctx, id) // nil when there is no such agent
			if err != nil {
				return nil, err
			}
			if ident != nil && ident.CompanyId == call.CompanyID {
				kept, keptCents = append(kept, id), append(keptCents, cents[i])
			}
		}
		ids, cents, insertMissing = kept, keptCents, true
	}
	rows, err := a.pool.Query(ctx, setSpendSQL, call.CompanyID, ids, cents, insertMissing)
	if err != nil {
		return nil, fmt.Errorf("error storing agent spend: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var budget int64
		if err := rows.Scan(&id, &budget); err != nil {
			return nil, fmt.Errorf("error storing agent spend: %w", err)
		}
		out[id] = budget
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error storing agent spend: %w", err)
	}
	return map[string]any{"agents": out}, nil
}
