package agents

import (
	"context"
	"fmt"
	"net/http"

	"github.com/keelhq/keel/sdk"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

func init() {
	addRoutes(route{Method: "PATCH", Path: "/api/agents/{agentId}/permissions", Response: new(agentRecord), Body: permissionsBody{},
		Summary: "Change an agent's canCreateAgents and canAssignTasks (board, or the company's CEO agent)",
		Handle:  handlePermissionsPatch})
}

// permissionsBody is the body of PATCH /api/agents/{agentId}/permissions.
type permissionsBody struct {
	CanCreateAgents *bool `json:"canCreateAgents,omitempty"`
	CanAssignTasks  *bool `json:"canAssignTasks,omitempty"`
}

// accessBlock explains whether an agent can assign tasks and why.
type accessBlock struct {
	CanAssignTasks   bool   `json:"canAssignTasks"`
	TaskAssignSource string `json:"taskAssignSource"`
	Reason           string `json:"reason"`
}

// hasPermission asks the kernel whether an actor holds a permission key in a company.
func (a *Agents) hasPermission(ctx context.Context, actor *sdk.Actor, companyID, permission string) (bool, error) {
	res, err := a.host.Authz.Check(ctx, &hostv1.CheckRequest{Actor: actor, CompanyId: companyID, Permission: permission})
	if err != nil {
		return false, fmt.Errorf("error checking permission %s: %w", permission, err)
	}
	return res.Allowed, nil
}

// canManageAgents reports whether the request's actor may create agents and read or change
// other agents' configuration in the company: board actors holding agents:create, agent
// actors holding agents:create (a CEO agent holds it implicitly) or the legacy
// canCreateAgents flag.
func (a *Agents) canManageAgents(ctx context.Context, companyID string) (bool, error) {
	actor := sdk.ActorFrom(ctx)
	if !sdk.CanAccessCompany(actor, companyID) {
		return false, nil
	}
	if actor.Type == "system" {
		return true, nil
	}
	ok, err := a.hasPermission(ctx, actor, companyID, "agents:create")
	if err != nil || ok || actor.Type != "agent" {
		return ok, err
	}
	cfg, err := a.loadConfig(ctx, a.db, actor.AgentId)
	if err != nil || cfg == nil {
		return false, err
	}
	return cfg.permissions().CanCreateAgents, nil
}

// canReadConfig reports whether the request's actor may see the target's adapter and
// runtime configuration: board members of the company, the agent itself, and agents that
// may manage agents.
func (a *Agents) canReadConfig(ctx context.Context, companyID, targetID string) (bool, error) {
	actor := sdk.ActorFrom(ctx)
	switch {
	case actor == nil || !sdk.CanAccessCompany(actor, companyID):
		return false, nil
	case actor.Type == "board" || actor.Type == "system":
		return true, nil
	case actor.Type == "agent" && actor.AgentId == targetID:
		return true, nil
	}
	return a.canManageAgents(ctx, companyID)
}

// requireManageAgents refuses (403) callers that may not change other agents' configuration.
func (a *Agents) requireManageAgents(ctx context.Context, companyID string) error {
	ok, err := a.canManageAgents(ctx, companyID)
	if err != nil {
		return err
	}
	if !ok {
		return &sdk.Error{Status: http.StatusForbidden, Code: "permission_denied", Message: "Missing permission agents:create for this company"}
	}
	return nil
}

// access computes the access block of an agent: the CEO role, the legacy canCreateAgents
// flag, the stored canAssignTasks flag and a kernel tasks:assign grant each allow assignment.
func (a *Agents) access(ctx context.Context, ag *agentRef) *accessBlock {
	p := ag.Cfg.permissions()
	switch {
	case ag.ID.Status == statusTerminated:
		return &accessBlock{TaskAssignSource: "none", Reason: "Terminated agents cannot assign tasks"}
	case ag.ID.Role == "ceo":
		return &accessBlock{CanAssignTasks: true, TaskAssignSource: "ceo_role", Reason: "The CEO role can assign tasks"}
	case p.CanAssignTasks:
		return &accessBlock{CanAssignTasks: true, TaskAssignSource: "explicit_grant", Reason: "Granted tasks:assign"}
	case p.CanCreateAgents:
		return &accessBlock{CanAssignTasks: true, TaskAssignSource: "agent_creator", Reason: "Agents that can create agents can assign tasks"}
	}
	target := &sdk.Actor{Type: "agent", AgentId: ag.ID.Id, CompanyId: ag.ID.CompanyId, Source: "agent_key"}
	if ok, err := a.hasPermission(ctx, target, ag.ID.CompanyId, "tasks:assign"); err == nil && ok {
		return &accessBlock{CanAssignTasks: true, TaskAssignSource: "explicit_grant", Reason: "Granted tasks:assign"}
	}
	return &accessBlock{TaskAssignSource: "none", Reason: "No tasks:assign grant, CEO role or canCreateAgents permission"}
}

// handlePermissionsPatch serves PATCH /api/agents/{agentId}/permissions.
func handlePermissionsPatch(a *Agents, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ag, err := a.loadAgent(ctx, r.PathValue("agentId"))
	if err != nil {
		a.writeErr(rw, err)
		return
	}
	var body permissionsBody
	if err := decodeBody(r, &body); err != nil {
		a.writeErr(rw, err)
		return
	}
	if err := a.requirePermissionsManager(ctx, ag.ID.CompanyId); err != nil {
		a.writeErr(rw, err)
		return
	}
	if ag.ID.Status == statusTerminated {
		a.writeErr(rw, conflict("Terminated agents cannot change permissions"))
		return
	}
	p := ag.Cfg.permissions()
	if body.CanCreateAgents != nil {
		p.CanCreateAgents = *body.CanCreateAgents
	}
	if body.CanAssignTasks != nil {
		p.CanAssignTasks = *body.CanAssignTasks
	}
	ag.Cfg.Permissions = mustJSON(p)
	if err := a.saveConfig(ctx, a.db, ag.Cfg); err != nil {
		a.writeErr(rw, err)
		return
	}
	if body.CanAssignTasks != nil {
		// canAssignTasks is the kernel grant tasks:assign (with an active membership row).
		if _, err := a.host.Principals.SetPermission(ctx, &hostv1.SetPermissionRequest{
			CompanyId: ag.ID.CompanyId, PrincipalType: "agent", PrincipalId: ag.ID.Id, Permission: "tasks:assign",
			Granted: *body.CanAssignTasks, GrantedByUserId: sdk.ActorFrom(ctx).UserId,
		}); err != nil {
			a.writeErr(rw, fmt.Errorf("error setting tasks:assign for agent %s: %w", ag.ID.Id, err))
			return
		}
	}
	if err := a.activity(ctx, ag.ID.CompanyId, "agent.permissions_updated", "agent", ag.ID.Id,
		map[string]any{"canCreateAgents": p.CanCreateAgents, "canAssignTasks": p.CanAssignTasks}); err != nil {
		a.log.Warn("error logging activity", "error", err)
	}
	a.writeAgent(ctx, rw, http.StatusOK, ag, true)
}

// requirePermissionsManager allows board actors of the company and the company's CEO agent.
func (a *Agents) requirePermissionsManager(ctx context.Context, companyID string) error {
	actor := sdk.ActorFrom(ctx)
	switch actor.Type {
	case "board", "system":
		return nil
	case "agent":
		self, err := a.identity(ctx, actor.AgentId)
		if err != nil {
			return err
		}
		if self != nil && self.CompanyId == companyID && self.Role == "ceo" {
			return nil
		}
	}
	return forbidden("Only the board or the company's CEO agent can change agent permissions")
}
