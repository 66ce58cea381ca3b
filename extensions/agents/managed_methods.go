package agents

import (
	"context"
	"net/url"

	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/extkit"
)

// Provided methods with which the host keeps a plugin's managed agents (sdk.ManagedAgent):
// create one with a chosen status and adapter preference, put declared fields back, pause
// and terminate it. Each acts as the call's actor (the system actor for the host) in the
// call's company, with the routes' own validation.
func init() {
	addMethods(map[string]method{
		"create": {
			Description: "Create an agent in the call's company. Input: the create body of POST /api/companies/{companyId}/agents, " +
				"plus status (idle, default, or paused) and adapterPreference (adapter types in order: the first the registry " +
				"knows is used, else adapterType). Used by the host for plugins' managed agents and by the kernel when it " +
				"approves an agent's join request. Output: the agent.",
			Call: callCreate,
		},
		"update": {
			Description: "Update an agent of the call's company. Input: {agentId, …the PATCH /api/agents/{agentId} body}. Output: the agent.",
			Call:        callUpdate,
		},
		"pause": {
			Description: "Pause an agent of the call's company as POST /api/agents/{agentId}/pause does. Input: {agentId}. Output: the agent.",
			Call: func(a *Agents, ctx context.Context, call *sdk.MethodCall) (any, error) {
				return a.lifecycleMethod(ctx, call, "pause")
			},
		},
		"terminate": {
			Description: "Terminate an agent of the call's company as POST /api/agents/{agentId}/terminate does. Input: {agentId}. Output: the agent.",
			Call: func(a *Agents, ctx context.Context, call *sdk.MethodCall) (any, error) {
				return a.lifecycleMethod(ctx, call, "terminate")
			},
		},
	})
}

func callCreate(a *Agents, ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in struct {
		agentCreateBody
		CompanyID         string   `json:"companyId"`
		Status            string   `json:"status"`
		AdapterPreference []string `json:"adapterPreference"`
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
	st := statusIdle
	switch in.Status {
	case "", statusIdle:
	case statusPaused:
		st = statusPaused
	default:
		return nil, invalid("status", "must be idle or paused")
	}
	ctx = methodCtx(ctx, call, companyID)
	for _, t := range in.AdapterPreference {
		if adapterTypeRe.MatchString(t) && a.checkAdapterType(ctx, companyID, t) == nil {
			in.AdapterType = t
			break
		}
	}
	cfg, role, err := a.newConfig(ctx, companyID, &in.agentCreateBody)
	if err != nil {
		return nil, err
	}
	ag, err := a.createAgent(ctx, companyID, in.Name, role, st, cfg, 0)
	if err != nil {
		return nil, err
	}
	if err := a.activity(ctx, companyID, "agent.created", "agent", ag.ID.Id,
		map[string]any{"name": ag.ID.Name, "role": ag.ID.Role, "adapterType": cfg.AdapterType, "status": st}); err != nil {
		a.log.Warn("error logging activity", "error", err)
	}
	return ag.record(false), nil
}

func callUpdate(a *Agents, ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in map[string]any
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	id, _ := in["agentId"].(string)
	if !isUUID(id) {
		return nil, invalid("agentId", "must be a UUID")
	}
	if _, err := a.methodAgent(ctx, call, id); err != nil {
		return nil, err
	}
	delete(in, "agentId")
	return extkit.ServeRoute(ctx, a.HTTPHandler(), call, "PATCH /api/agents/{agentId}", "/api/agents/"+url.PathEscape(id), in)
}

// lifecycleMethod runs a lifecycle route (pause, terminate) on an agent of the call's company.
func (a *Agents) lifecycleMethod(ctx context.Context, call *sdk.MethodCall, step string) (any, error) {
	var in struct {
		AgentID string `json:"agentId"`
	}
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	if !isUUID(in.AgentID) {
		return nil, invalid("agentId", "must be a UUID")
	}
	if _, err := a.methodAgent(ctx, call, in.AgentID); err != nil {
		return nil, err
	}
	return extkit.ServeRoute(ctx, a.HTTPHandler(), call, "POST /api/agents/{agentId}/"+step, "/api/agents/"+in.AgentID+"/"+step, nil)
}
