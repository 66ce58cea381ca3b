package agents

import (
	"context"
	"encoding/json"
	"fmt"
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

// msgUnboundSecret refuses an agent pointing an agent's env at a secret the board has not
// bound to that agent.
const msgUnboundSecret = "Agents can only reference secrets the board has bound to the agent"

// refuseUnboundSecretRefs keeps an agent from reaching a company secret through agent
// configuration: every secret_ref an agent adds to an agent's adapterConfig.env must name a
// secret the board bound to that agent (POST /api/secrets/{id}/bindings). References the
// configuration already held stay; the board may reference any company secret. target is
// empty for an agent not created yet, which has no bindings.
func (a *Agents) refuseUnboundSecretRefs(ctx context.Context, target string, before, patch json.RawMessage) error {
	actor := sdk.ActorFrom(ctx)
	if actor == nil || actor.Type != "agent" || len(patch) == 0 {
		return nil
	}
	held := map[string]bool{}
	for _, ref := range envSecretRefs(before) {
		held[ref.SecretID] = true
	}
	var added []string
	for _, ref := range envSecretRefs(patch) {
		if !held[ref.SecretID] {
			added = append(added, ref.SecretID)
		}
	}
	if len(added) == 0 {
		return nil
	}
	if target == "" {
		return agentForbidden(msgUnboundSecret)
	}
	var res struct {
		Bound []string `json:"bound"`
	}
	if err := a.host.Call(ctx, "secrets.boundToAgent", sdk.SystemActor(), actor.CompanyId,
		map[string]any{"agentId": target, "secretIds": added}, &res); err != nil {
		return fmt.Errorf("error checking the secret bindings of agent %s: %w", target, err)
	}
	bound := map[string]bool{}
	for _, id := range res.Bound {
		bound[id] = true
	}
	for _, id := range added {
		if !bound[id] {
			return agentForbidden(msgUnboundSecret)
		}
	}
	return nil
}
