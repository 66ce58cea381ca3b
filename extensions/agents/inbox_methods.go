package agents

import (
	"context"
	"fmt"
	"slices"

	"github.com/keelhq/keel/sdk"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

// Provided methods of the sidebar badges and of the issue-graph liveness recovery: the
// kernel asks the agents owner once per badge read for its failed runs, and the work owner
// asks once per liveness scan for the state of the runs its issues name.
func init() {
	addMethods(map[string]method{
		"inboxCounts": {
			ReadOnly: true,
			Description: "Count a company's items for the board's inbox badge. Input: {companyId (the call's company wins), excludeIds " +
				"(run ids the reader dismissed)}. Output: {failedRuns: agents, not terminated, whose latest run failed or timed out " +
				"and is not excluded}.",
			Call: callInboxCounts,
		},
		"runStatuses": {
			ReadOnly: true,
			Description: "Read the status of many runs at once. Input: {runIds (up to 1000)}. Output: {runs: {<runId>: {status, agentId, " +
				"companyId, finishedAt}}}; a run that does not exist (or is outside the call's company) is left out.",
			Call: callRunStatuses,
		},
	})
}

// inboxFailedRunsSQL reads the latest run of each of the given agents (one index probe per
// agent) and counts those that failed or timed out, less the runs the reader dismissed.
const inboxFailedRunsSQL = `SELECT count(*) FROM unnest($1::uuid[]) AS ag (id)
CROSS JOIN LATERAL (SELECT r.id, r.status FROM heartbeat_runs r WHERE r.agent_id = ag.id ORDER BY r.created_at DESC LIMIT 1) AS latest
WHERE latest.status IN ('failed', 'timed_out') AND NOT (latest.id::text = ANY($2::text[]))`

func callInboxCounts(a *Agents, ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in struct {
		CompanyID  string   `json:"companyId"`
		ExcludeIDs []string `json:"excludeIds"`
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
	ctx = methodCtx(ctx, call, companyID)
	if err := requireCompanyAccess(ctx, companyID); err != nil {
		return nil, err
	}
	res, err := a.host.Principals.ListAgents(ctx, &hostv1.ListAgentsRequest{CompanyId: companyID})
	if err != nil {
		return nil, fmt.Errorf("error listing agents of company %s: %w", companyID, err)
	}
	ids := make([]string, 0, len(res.Agents))
	for _, ag := range res.Agents {
		if ag.Status != statusTerminated {
			ids = append(ids, ag.Id)
		}
	}
	if in.ExcludeIDs == nil {
		in.ExcludeIDs = []string{}
	}
	var n int64
	if len(ids) > 0 {
		if err := a.pool.QueryRow(ctx, inboxFailedRunsSQL, ids, in.ExcludeIDs).Scan(&n); err != nil {
			return nil, fmt.Errorf("error counting failed runs of company %s: %w", companyID, err)
		}
	}
	return map[string]int64{"failedRuns": n}, nil
}

// maxRunStatuses bounds one runStatuses call.
const maxRunStatuses = 1000

// runStatusEntry is one run in the answer of agents.runStatuses.
type runStatusEntry struct {
	Status     string  `json:"status"`
	AgentID    string  `json:"agentId"`
	CompanyID  string  `json:"companyId"`
	FinishedAt *string `json:"finishedAt"`
}

func callRunStatuses(a *Agents, ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in struct {
		RunIDs []string `json:"runIds"`
	}
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	if len(in.RunIDs) > maxRunStatuses {
		return nil, invalid("runIds", fmt.Sprintf("must hold at most %d ids", maxRunStatuses))
	}
	ids := slices.DeleteFunc(slices.Clone(in.RunIDs), func(id string) bool { return !isUUID(id) })
	out := map[string]*runStatusEntry{}
	if len(ids) == 0 {
		return map[string]any{"runs": out}, nil
	}
	rows, err := a.pool.Query(ctx, `SELECT id::text, status, agent_id::text, company_id::text,
			to_char(finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
		FROM heartbeat_runs WHERE id = ANY($1::uuid[]) AND ($2 = '' OR company_id::text = $2)`, ids, call.CompanyID)
	if err != nil {
		return nil, fmt.Errorf("error reading run statuses: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var e runStatusEntry
		if err := rows.Scan(&id, &e.Status, &e.AgentID, &e.CompanyID, &e.FinishedAt); err != nil {
			return nil, fmt.Errorf("error reading run statuses: %w", err)
		}
		out[id] = &e
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error reading run statuses: %w", err)
	}
	return map[string]any{"runs": out}, nil
}
