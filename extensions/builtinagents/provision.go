package builtinagents

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	"github.com/keelhq/keel/builtins"
	"github.com/keelhq/keel/sdk"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

// provisionInput is a checked provision body.
type provisionInput struct {
	adapterType   string
	typeGiven     bool
	adapterConfig json.RawMessage
	configGiven   bool
	budget        int64
	budgetGiven   bool
}

// details reports whether the body names adapter details.
func (in *provisionInput) details() bool { return in.typeGiven || in.configGiven }

// result is the outcome of a provision or reconcile.
type result struct {
	// accepted is true when a pending approval stands (202).
	accepted bool
	// changes lists what was created or changed (reconcile's answer).
	changes []string
}

// conflictCode is a 409 whose text is its code (spec part 2 "Errors").
func conflictCode(code string) error {
	return &sdk.Error{Status: http.StatusConflict, Message: code, Code: code}
}

// requiresApproval reads the company's requireBoardApprovalForNewAgents.
func (x *BuiltInAgents) requiresApproval(ctx context.Context, companyID string) (bool, error) {
	res, err := x.host.Companies.Get(ctx, &hostv1.GetCompanyRequest{CompanyId: companyID})
	if err != nil {
		return false, fmt.Errorf("error reading company %s: %w", companyID, err)
	}
	var co struct {
		RequireBoardApprovalForNewAgents bool `json:"requireBoardApprovalForNewAgents"`
	}
	if err := json.Unmarshal(res.GetCompanyJson(), &co); err != nil {
		return false, fmt.Errorf("error decoding company %s: %w", companyID, err)
	}
	return co.RequireBoardApprovalForNewAgents, nil
}

// skillNames are the names of a definition's bundled skills.
func skillNames(d *builtins.Definition) []string {
	out := []string{}
	for _, s := range d.Skills {
		out = append(out, s.Name)
	}
	return out
}

// metadataWithMarker returns an agent's metadata with the registry's marker laid over it.
func metadataWithMarker(meta json.RawMessage, d *builtins.Definition) json.RawMessage {
	m := map[string]any{}
	_ = json.Unmarshal(meta, &m)
	if m == nil {
		m = map[string]any{}
	}
	m["serviceBuiltInAgent"] = markerOf(d)
	b, _ := json.Marshal(m)
	return b
}

// markerCurrent reports whether an agent's marker is the registry's.
func markerCurrent(ag *agent, d *builtins.Definition) bool {
	var meta map[string]json.RawMessage
	_ = json.Unmarshal(ag.Metadata, &meta)
	want, _ := json.Marshal(markerOf(d))
	var a, b any
	return json.Unmarshal(meta["serviceBuiltInAgent"], &a) == nil && json.Unmarshal(want, &b) == nil && jsonEq(a, b)
}

func jsonEq(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// createAgent creates the built-in's agent through the agents owner with the registry's
// defaults: name, role, title, purpose, skills, permission keys, budget 0 unless given,
// paused when the definition starts paused.
func (x *BuiltInAgents) createAgent(ctx context.Context, companyID string, d *builtins.Definition, in *provisionInput, status string) (*agent, error) {
	adapterType := d.AllowedAdapterTypes[0]
	if in.typeGiven {
		adapterType = in.adapterType
	}
	cfg := in.adapterConfig
	if len(cfg) == 0 {
		cfg = json.RawMessage(`{}`)
	}
	budget := d.BudgetMonthlyCents
	if in.budgetGiven {
		budget = in.budget
	}
	body := map[string]any{"name": d.DisplayName, "role": d.Role, "capabilities": d.Purpose, "adapterType": adapterType,
		"adapterConfig": cfg, "budgetMonthlyCents": budget, "desiredSkills": skillNames(d),
		"metadata": metadataWithMarker(nil, d), "status": status, "permissionKeys": d.PermissionKeys}
	if d.Title != "" {
		body["title"] = d.Title
	}
	ag := new(agent)
	if err := x.host.Call(ctx, "agents.createBuiltIn", sdk.ActorFrom(ctx), companyID, body, ag); err != nil {
		return nil, callErr(err, "error creating built-in agent %s", d.Key)
	}
	return ag, nil
}

// updateAgent applies a patch to the built-in's agent through the agents owner.
func (x *BuiltInAgents) updateAgent(ctx context.Context, ag *agent, patch map[string]any) (*agent, error) {
	out := new(agent)
	if err := x.host.Call(ctx, "agents.updateBuiltIn", sdk.ActorFrom(ctx), ag.CompanyID,
		map[string]any{"agentId": ag.ID, "patch": patch}, out); err != nil {
		return nil, callErr(err, "error updating built-in agent %s", ag.ID)
	}
	return out, nil
}

// fillPieces gives a row the registry's instructions and skills where it has none.
func fillPieces(r *row, d *builtins.Definition) []string {
	var changes []string
	if r.Instructions == "" {
		r.Instructions, r.InstructionsHash = d.Instructions, builtins.Hash(d.Instructions)
		changes = append(changes, "instructions")
	}
	for _, s := range d.Skills {
		if r.Skills[s.Name] == nil {
			r.Skills[s.Name] = &skillPiece{Markdown: s.Markdown, RegistryHash: builtins.Hash(s.Markdown)}
			changes = append(changes, "skill:"+s.Name)
		}
	}
	return changes
}

// provisionNew creates the agent of a built-in that has none: directly, or pending a
// hire_agent approval when the company requires board approval for new agents.
func (x *BuiltInAgents) provisionNew(ctx context.Context, r *row, d *builtins.Definition, in *provisionInput) (*result, error) {
	approval, err := x.requiresApproval(ctx, r.CompanyID)
	if err != nil {
		return nil, err
	}
	status := "idle"
	switch {
	case approval:
		status = agentPendingApproval
	case d.StartsPaused:
		status = agentPaused
	}
	ag, err := x.createAgent(ctx, r.CompanyID, d, in, status)
	if err != nil {
		return nil, err
	}
	r.AgentID, r.ApprovalID = &ag.ID, nil
	// A re-provisioned built-in starts again from the registry's pieces.
	r.Instructions, r.Skills = "", map[string]*skillPiece{}
	res := &result{changes: append([]string{"agent"}, fillPieces(r, d)...)}
	if approval {
		var ap struct {
			ID string `json:"id"`
		}
		in := map[string]any{"type": "hire_agent", "payload": map[string]any{"agentId": ag.ID, "name": ag.Name, "role": ag.Role,
			"adapterType": ag.AdapterType, "budgetMonthlyCents": ag.BudgetMonthlyCents, "builtInAgentKey": d.Key,
			"serviceBuiltInAgent": markerOf(d)}}
		if err := x.host.Call(ctx, "work.approvals.create", sdk.ActorFrom(ctx), r.CompanyID, in, &ap); err != nil {
			if _, terr := x.updateAgent(ctx, ag, map[string]any{"status": agentTerminated}); terr != nil {
				x.log.Warn("error terminating built-in agent after a failed approval request", "agent", ag.ID, "error", terr)
			}
			if sdk.IsMethodNotProvided(err) {
				return nil, sdk.NewError(http.StatusServiceUnavailable, "Approvals are not available")
			}
			return nil, callErr(err, "error requesting approval of built-in agent %s", d.Key)
		}
		r.ApprovalID = &ap.ID
		res.accepted = true
	}
	for _, rt := range d.Routines {
		if _, err := x.ensureRoutine(ctx, r, rt, ag, false); err != nil {
			return nil, err
		}
		res.changes = append(res.changes, "routine:"+rt.Key)
	}
	x.activity(ctx, r.CompanyID, "built_in_agent.provisioned", ag.ID, map[string]any{"key": d.Key, "agentId": ag.ID,
		"adapterType": ag.AdapterType, "pendingApproval": approval, "approvalId": r.ApprovalID})
	return res, nil
}

// provision moves a built-in through the provision row of the lifecycle table.
func (x *BuiltInAgents) provision(ctx context.Context, companyID string, d *builtins.Definition, in *provisionInput) (*result, error) {
	var res *result
	err := x.withLock(ctx, companyID, d.Key, func(r *row) error {
		ag, err := x.agentOf(ctx, r)
		if err != nil {
			return err
		}
		switch stateOf(ag) {
		case StateNotProvisioned:
			res, err = x.provisionNew(ctx, r, d, in)
			return err
		case StatePendingApproval:
			if in.details() {
				return conflictCode(codePendingApproval)
			}
			res = &result{accepted: true}
			return nil
		case StateNeedsSetup:
			// First-time configuration applies directly, even under board approval.
			res = &result{}
			patch := map[string]any{}
			if in.typeGiven && in.adapterType != ag.AdapterType {
				patch["adapterType"], patch["replaceAdapterConfig"] = in.adapterType, true
				patch["adapterConfig"] = json.RawMessage(`{}`)
			}
			if in.configGiven {
				patch["adapterConfig"] = in.adapterConfig
			}
			if in.budgetGiven && in.budget != ag.BudgetMonthlyCents {
				patch["budgetMonthlyCents"] = in.budget
			}
			if len(patch) == 0 {
				return nil
			}
			if _, err := x.updateAgent(ctx, ag, patch); err != nil {
				return err
			}
			res.changes = []string{"agent"}
			x.activity(ctx, companyID, "built_in_agent.configured", ag.ID, map[string]any{"key": d.Key, "agentId": ag.ID})
			return nil
		default: // ready or paused
			if in.typeGiven && in.adapterType != ag.AdapterType {
				return conflictCode(codeReconfiguration)
			}
			if in.configGiven {
				var want, have any
				_ = json.Unmarshal(in.adapterConfig, &want)
				_ = json.Unmarshal(ag.AdapterConfig, &have)
				if !jsonEq(want, have) {
					return conflictCode(codeReconfiguration)
				}
			}
			res = &result{}
			return nil
		}
	})
	return res, err
}

// reconcile makes sure the agent and the registry-managed pieces exist without changing the
// adapter: a missing agent is provisioned, a stale marker or missing bundled skill on the
// agent is put back, missing instructions, skills and routines are created. Run twice, the
// second run changes nothing.
func (x *BuiltInAgents) reconcile(ctx context.Context, companyID string, d *builtins.Definition) (*result, error) {
	var res *result
	err := x.withLock(ctx, companyID, d.Key, func(r *row) error {
		ag, err := x.agentOf(ctx, r)
		if err != nil {
			return err
		}
		if ag == nil {
			res, err = x.provisionNew(ctx, r, d, &provisionInput{})
			return err
		}
		res = &result{accepted: ag.Status == agentPendingApproval, changes: []string{}}
		patch := map[string]any{}
		if !markerCurrent(ag, d) {
			patch["metadata"] = metadataWithMarker(ag.Metadata, d)
		}
		skills := append([]string{}, ag.DesiredSkills...)
		for _, s := range d.Skills {
			if !slices.Contains(skills, s.Name) {
				skills = append(skills, s.Name)
			}
		}
		if len(skills) != len(ag.DesiredSkills) {
			patch["desiredSkills"] = skills
		}
		if len(patch) > 0 && ag.Status != agentPendingApproval {
			if ag, err = x.updateAgent(ctx, ag, patch); err != nil {
				return err
			}
			res.changes = append(res.changes, "agent")
		}
		res.changes = append(res.changes, fillPieces(r, d)...)
		for _, rt := range d.Routines {
			changed, err := x.ensureRoutine(ctx, r, rt, ag, false)
			if err != nil {
				return err
			}
			if changed {
				res.changes = append(res.changes, "routine:"+rt.Key)
			}
		}
		if len(res.changes) > 0 {
			x.activity(ctx, companyID, "built_in_agent.reconciled", ag.ID, map[string]any{"key": d.Key, "agentId": ag.ID,
				"changes": res.changes})
		}
		return nil
	})
	return res, err
}

// Resources a reset restores.
const (
	resourceAgent        = "agent"
	resourceInstructions = "instructions"
	resourceSkill        = "skill"
	resourceRoutine      = "routine"
)

var allResources = []string{resourceAgent, resourceInstructions, resourceSkill, resourceRoutine}

// reset restores the registry's defaults of the named resources, keeping the adapter setup.
func (x *BuiltInAgents) reset(ctx context.Context, companyID string, d *builtins.Definition, resources []string) (*result, error) {
	var res *result
	err := x.withLock(ctx, companyID, d.Key, func(r *row) error {
		ag, err := x.agentOf(ctx, r)
		if err != nil {
			return err
		}
		if ag == nil {
			return sdk.Conflict(msgNotProvisioned)
		}
		res = &result{changes: []string{}}
		patch := map[string]any{}
		if slices.Contains(resources, resourceAgent) {
			patch["name"], patch["role"], patch["capabilities"] = d.DisplayName, d.Role, d.Purpose
			if d.Title != "" {
				patch["title"] = d.Title
			}
			patch["metadata"] = metadataWithMarker(ag.Metadata, d)
			res.changes = append(res.changes, resourceAgent)
		}
		if slices.Contains(resources, resourceSkill) {
			skills := append([]string{}, ag.DesiredSkills...)
			for _, s := range d.Skills {
				if !slices.Contains(skills, s.Name) {
					skills = append(skills, s.Name)
				}
				r.Skills[s.Name] = &skillPiece{Markdown: s.Markdown, RegistryHash: builtins.Hash(s.Markdown)}
			}
			patch["desiredSkills"] = skills
			res.changes = append(res.changes, resourceSkill)
		}
		if len(patch) > 0 && ag.Status != agentPendingApproval {
			if ag, err = x.updateAgent(ctx, ag, patch); err != nil {
				return err
			}
		}
		if slices.Contains(resources, resourceInstructions) {
			r.Instructions, r.InstructionsHash = d.Instructions, builtins.Hash(d.Instructions)
			res.changes = append(res.changes, resourceInstructions)
		}
		if slices.Contains(resources, resourceRoutine) {
			for _, rt := range d.Routines {
				if _, err := x.ensureRoutine(ctx, r, rt, ag, true); err != nil {
					return err
				}
			}
			res.changes = append(res.changes, resourceRoutine)
		}
		x.activity(ctx, companyID, "built_in_agent.reset", ag.ID, map[string]any{"key": d.Key, "agentId": ag.ID,
			"resources": res.changes})
		return nil
	})
	return res, err
}

// onApprovalDecided settles a provision under approval: approved, a built-in that starts
// paused is paused and its routines get the agent as assignee; rejected or cancelled, the
// pending agent is terminated and the built-in is not provisioned again. Redelivery is a
// no-op (the row no longer names the approval).
func (x *BuiltInAgents) onApprovalDecided(ctx context.Context, ev *sdk.Event) error {
	var e struct {
		EntityType string `json:"entityType"`
		EntityID   string `json:"entityId"`
		Details    struct {
			Type   string `json:"type"`
			Status string `json:"status"`
		} `json:"details"`
	}
	if err := json.Unmarshal(ev.Payload, &e); err != nil || e.EntityType != "approval" || !sdk.IsUUID(e.EntityID) ||
		e.Details.Type != "hire_agent" {
		return nil
	}
	var key string
	err := x.pool.QueryRow(ctx, `SELECT key FROM builtin_agents WHERE company_id = $1 AND approval_id = $2`, ev.CompanyID, e.EntityID).Scan(&key)
	if err != nil {
		return nil // not a built-in's approval (or already settled)
	}
	d, ok := builtins.Get(key)
	if !ok {
		return nil
	}
	ctx = sdk.WithRequestInfo(ctx, sdk.SystemActor(), ev.CompanyID, "", nil)
	return x.withLock(ctx, ev.CompanyID, key, func(r *row) error {
		if r.ApprovalID == nil || *r.ApprovalID != e.EntityID {
			return nil
		}
		ag, err := x.readAgent(ctx, ev.CompanyID, r.AgentID)
		if err != nil {
			return err
		}
		switch e.Details.Status {
		case "approved":
			if ag != nil && ag.Status != agentPendingApproval {
				if d.StartsPaused && ag.Status != agentPaused {
					if ag, err = x.updateAgent(ctx, ag, map[string]any{"status": agentPaused}); err != nil {
						return err
					}
				}
				for _, rt := range d.Routines {
					if _, err := x.ensureRoutine(ctx, r, rt, ag, false); err != nil {
						return err
					}
				}
			}
			r.ApprovalID = nil
		case "rejected", "cancelled":
			if ag != nil && ag.Status == agentPendingApproval {
				if _, err := x.updateAgent(ctx, ag, map[string]any{"status": agentTerminated}); err != nil {
					return err
				}
			}
			r.AgentID, r.ApprovalID = nil, nil
		}
		return nil
	})
}

// activity appends an activity entry for a built-in agent write; a failure is logged: the
// write it records has already happened.
func (x *BuiltInAgents) activity(ctx context.Context, companyID, action, agentID string, details map[string]any) {
	if err := x.host.LogActivity(ctx, &sdk.ActivityEntry{CompanyID: companyID, Actor: sdk.ActorFrom(ctx), Action: action,
		EntityType: "agent", EntityID: agentID, Details: details}); err != nil {
		x.log.Warn("error appending activity", "action", action, "agent", agentID, "error", err)
	}
}
