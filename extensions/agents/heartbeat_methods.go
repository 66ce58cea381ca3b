package agents

import (
	"context"
	"strings"

	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/adapter"
)

func init() {
	addMethods(map[string]method{
		"wakeup": {
			Description: "Wake an agent. Input: {agentId, companyId, source (timer|assignment|on_demand|automation), triggerDetail, reason, " +
				"payload, idempotencyKey}. Same suppression, idempotency and coalescing rules as POST /api/agents/{id}/wakeup " +
				"(the self-only rule is a route rule: callers wake on behalf of their actor). Output: the heartbeat run, or " +
				"{status:\"skipped\", reason:\"wakeup_skipped\", message, issueId, executionRunId, executionAgentId, executionAgentName}.",
			Call: (*Agents).methodWakeup,
		},
		"runStatus": {
			ReadOnly:    true,
			Description: "Read a run's status. Input: {runId}. Output: {found, status, agentId, companyId, issueId (the run's context issue, \"\" when none)}.",
			Call:        (*Agents).methodRunStatus,
		},
		"runEvents": {
			Description: "Adapters stream a run's output: input adapter.RunEventsRequest {runId, events:[{seq, kind log|event|spawn, stream, " +
				"text, payload, pid, at}]}. Logs append to the run log; spawn records the process id. Output: {accepted}.",
			Call: (*Agents).methodRunEvents,
		},
		"cancelRun": {
			Description: "Cancel a queued or running run. Input: {runId}. Output: the run.",
			Call:        (*Agents).methodCancelRun,
		},
		"cancelAgentRuns": {
			Description: "Cancel every queued and running run of an agent (pause, terminate, budget hard stop). Input: {agentId}. Output: {cancelled}.",
			Call:        (*Agents).methodCancelAgentRuns,
		},
		"reap": {
			Description: "Run the reaper now (tests and operators). Input: {}. Output: {reaped: run ids failed as process_lost}.",
			Call:        (*Agents).methodReap,
		},
	})
}

func (a *Agents) methodWakeup(ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in struct {
		WakeRequest
		TriggerDetail     string `json:"triggerDetail"`
		ForceFreshSession bool   `json:"forceFreshSession"`
	}
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	companyID := in.CompanyID
	if companyID == "" {
		companyID = call.CompanyID
	}
	actor := call.Actor
	if actor == nil {
		actor = sdk.SystemActor()
	}
	out, err := a.engine.wakeup(ctx, &wakeInput{AgentID: in.AgentID, CompanyID: companyID, Source: in.Source, TriggerDetail: in.TriggerDetail,
		Reason: in.Reason, Payload: in.Payload, IdempotencyKey: in.IdempotencyKey, ForceFreshSession: in.ForceFreshSession, Actor: actor})
	if err != nil {
		return nil, err
	}
	return out.body(), nil
}

func (a *Agents) methodRunStatus(ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in struct {
		RunID string `json:"runId"`
	}
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	run, err := a.runGet(ctx, a.pool, in.RunID)
	if err != nil {
		return nil, err
	}
	if run == nil || (call.CompanyID != "" && call.CompanyID != run.CompanyID) {
		return map[string]any{"found": false}, nil
	}
	issueID, _ := run.ContextSnapshot["issueId"].(string)
	return map[string]any{"found": true, "status": run.Status, "agentId": run.AgentID, "companyId": run.CompanyID, "issueId": issueID}, nil
}

func (a *Agents) methodRunEvents(ctx context.Context, call *sdk.MethodCall) (any, error) {
	if call.Caller != "" && call.Caller != "kernel" && !strings.HasPrefix(call.Caller, "adapter.") {
		return nil, forbidden("Only adapters stream run events")
	}
	var in adapter.RunEventsRequest
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	if err := a.appendRunEvents(ctx, in.RunID, in.Events); err != nil {
		return nil, err
	}
	return map[string]any{"accepted": len(in.Events)}, nil
}

func (a *Agents) methodCancelRun(ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in struct {
		RunID string `json:"runId"`
	}
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	run, err := a.runGet(ctx, a.pool, in.RunID)
	if err != nil {
		return nil, err
	}
	if run == nil || (call.CompanyID != "" && call.CompanyID != run.CompanyID) {
		return nil, notFound("Heartbeat run not found")
	}
	return a.engine.cancelRun(ctx, in.RunID)
}

func (a *Agents) methodReap(ctx context.Context, _ *sdk.MethodCall) (any, error) {
	ids, err := a.engine.reap(ctx)
	if err != nil {
		return nil, err
	}
	return map[string]any{"reaped": ids}, nil
}

func (a *Agents) methodCancelAgentRuns(ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in struct {
		AgentID string `json:"agentId"`
	}
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	if call.CompanyID != "" {
		agent, err := a.agentIdentity(ctx, in.AgentID)
		if err != nil {
			return nil, err
		}
		if agent.CompanyId != call.CompanyID {
			return nil, notFound("Agent not found")
		}
	}
	n, err := a.engine.cancelAgentRuns(ctx, in.AgentID)
	if err != nil {
		return nil, err
	}
	return map[string]any{"cancelled": n}, nil
}
