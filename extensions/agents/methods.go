package agents

import (
	"context"

	"github.com/keelhq/keel/sdk"
)

func init() {
	addMethods(map[string]method{
		"approveHire": {
			Description: "Activate a hired agent after its hire_agent approval: input {approvalId, agentId}; pending_approval → idle " +
				"(already active agents are left alone). Returns the agent.",
			Call: callApproveHire,
		},
		"get": {
			Description: "Read an agent with its configuration: input {agentId}. 404 when missing or outside the call's company.",
			Call:        callGet,
		},
		"list": {
			Description: "List a company's agents with their configuration: input {companyId, includeTerminated?}. The call's company wins.",
			Call:        callList,
		},
	})
}

// methodCtx puts the call's actor (the system actor when none) into the context.
func methodCtx(ctx context.Context, call *sdk.MethodCall, companyID string) context.Context {
	actor := call.Actor
	if actor == nil || actor.Type == "" || actor.Type == "none" {
		actor = sdk.SystemActor()
	}
	return sdk.WithRequestInfo(ctx, actor, companyID, "", nil)
}

// methodAgent reads an agent for a method call: 404 when missing or outside the call's company.
func (a *Agents) methodAgent(ctx context.Context, call *sdk.MethodCall, agentID string) (*agentRef, error) {
	id, err := a.identity(ctx, agentID)
	if err != nil {
		return nil, err
	}
	if id == nil || (call.CompanyID != "" && id.CompanyId != call.CompanyID) {
		return nil, notFound("Agent not found")
	}
	cfg, err := a.loadConfig(ctx, a.db, id.Id)
	if err != nil {
		return nil, err
	}
	if cfg == nil {
		cfg = defaultConfig(id)
	}
	return &agentRef{ID: id, Cfg: cfg}, nil
}

func callApproveHire(a *Agents, ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in struct {
		ApprovalID string `json:"approvalId"`
		AgentID    string `json:"agentId"`
	}
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	if !isUUID(in.AgentID) {
		return nil, invalid("agentId", "must be a UUID")
	}
	ag, err := a.methodAgent(ctx, call, in.AgentID)
	if err != nil {
		return nil, err
	}
	ctx = methodCtx(ctx, call, ag.ID.CompanyId)
	switch ag.ID.Status {
	case statusTerminated:
		return nil, conflict("Terminated agents cannot be approved")
	case statusPendingApproval:
		if ag.ID, err = a.setStatus(ctx, ag.ID.Id, statusIdle); err != nil {
			return nil, err
		}
		if err := a.activity(ctx, ag.ID.CompanyId, "agent.approved", "agent", ag.ID.Id,
			map[string]any{"approvalId": in.ApprovalID}); err != nil {
			a.log.Warn("error logging activity", "error", err)
		}
	}
	return ag.record(false), nil
}

func callGet(a *Agents, ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in struct {
		AgentID string `json:"agentId"`
	}
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	ag, err := a.methodAgent(ctx, call, in.AgentID)
	if err != nil {
		return nil, err
	}
	return ag.record(false), nil
}

func callList(a *Agents, ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in struct {
		CompanyID         string `json:"companyId"`
		IncludeTerminated bool   `json:"includeTerminated"`
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
	ros, err := a.loadRoster(ctx, companyID)
	if err != nil {
		return nil, err
	}
	out := []*agentRecord{}
	for _, ag := range ros.order {
		if ag.ID.Status != statusTerminated || in.IncludeTerminated {
			out = append(out, ag.record(false))
		}
	}
	return out, nil
}
