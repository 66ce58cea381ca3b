package agents

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/keelhq/keel/sdk"
)

// refuseAgentEscalation keeps an agent with configuration rights (a CEO agent, an agent
// with agents:create or canCreateAgents) from widening rights through PATCH
// /api/agents/{agentId}: status moves only through the lifecycle routes (a paused agent
// cannot unpause itself), no agent may make an agent a CEO, and an agent may change
// neither its own role nor its own budget. The board may do all of it.
func (a *Agents) refuseAgentEscalation(ctx context.Context, ag *agentRef, raw map[string]json.RawMessage) error {
	actor := sdk.ActorFrom(ctx)
	if actor == nil || actor.Type != "agent" {
		return nil
	}
	self := actor.AgentId == ag.ID.Id
	if _, ok := raw["status"]; ok {
		return agentForbidden("Agents cannot change an agent's status; use the lifecycle routes")
	}
	if v, ok := raw["role"]; ok {
		var role string
		_ = json.Unmarshal(v, &role)
		switch {
		case role == "ceo" && ag.ID.Role != "ceo":
			return agentForbidden("Only the board can make an agent the CEO")
		case self && role != ag.ID.Role:
			return agentForbidden("Agents cannot change their own role")
		}
	}
	if _, ok := raw["budgetMonthlyCents"]; ok && self {
		return agentForbidden("Agents cannot change their own budget")
	}
	return nil
}

func agentForbidden(msg string) error {
	return &sdk.Error{Status: http.StatusForbidden, Code: "permission_denied", Message: msg}
}
