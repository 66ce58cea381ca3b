package agents

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	"github.com/keelhq/keel/sdk"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

// BuiltInMarker is the metadata key that marks a built-in agent (spec part 2 "Built-in agent
// definition"): it holds the registry key and feature keys, and only the built-in agent
// service (BuiltInOwner) may write it.
const BuiltInMarker = "serviceBuiltInAgent"

// BuiltInOwner is the extension key of the built-in agent service, the only caller of
// createBuiltIn and updateBuiltIn.
const BuiltInOwner = "builtinagents"

// msgMarkerImmutable is the 403 answered to a write by anyone else that touches the marker.
const msgMarkerImmutable = "metadata.serviceBuiltInAgent is managed by the built-in agent service and cannot be changed"

func init() {
	addMethods(map[string]method{
		"createBuiltIn": {
			Description: "Create a built-in agent (builtinagents only): the create body of POST /api/companies/{companyId}/agents " +
				"(metadata must carry serviceBuiltInAgent) plus status (idle, paused or pending_approval; paused records " +
				"pauseReason system) and permissionKeys (kernel grants). The call's company is the agent's. Returns the agent.",
			Call: callCreateBuiltIn,
		},
		"updateBuiltIn": {
			Description: "Update a built-in agent (builtinagents only): input {agentId, patch} where patch holds the fields of " +
				"PATCH /api/agents/{agentId} (metadata may change serviceBuiltInAgent; status paused or idle pauses or resumes; " +
				"terminated terminates, also a pending_approval agent). " +
				"Returns the agent.",
			Call: callUpdateBuiltIn,
		},
	})
}

// markerOf returns the marker held by a metadata object, nil when it holds none.
func markerOf(meta json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(meta, &m) != nil {
		return nil
	}
	v, ok := m[BuiltInMarker]
	if !ok || bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
		return nil
	}
	return v
}

// withMarker returns meta with its marker replaced by marker (removed when marker is nil);
// meta is returned unchanged when it is not an object.
func withMarker(meta, marker json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if len(bytes.TrimSpace(meta)) > 0 && json.Unmarshal(meta, &m) != nil {
		return meta
	}
	if m == nil {
		m = map[string]json.RawMessage{}
	}
	if marker == nil {
		delete(m, BuiltInMarker)
	} else {
		m[BuiltInMarker] = marker
	}
	return mustJSON(m)
}

// markerForbidden is the answer to a write by anyone but the built-in agent service that
// touches the marker.
func markerForbidden() error {
	return &sdk.Error{Status: http.StatusForbidden, Code: "built_in_agent_marker_immutable", Message: msgMarkerImmutable}
}

// refuseMarkerOnCreate refuses a create or hire body whose metadata carries the marker.
func refuseMarkerOnCreate(meta json.RawMessage) error {
	if markerOf(meta) != nil {
		return markerForbidden()
	}
	return nil
}

// guardMarkerPatch checks a PATCH by anyone but the built-in agent service: metadata that
// names the marker with a value other than the stored one (null included) is refused, and
// metadata that leaves the key out keeps the stored marker, so replacing an agent's other
// metadata never drops it.
func guardMarkerPatch(stored json.RawMessage, raw map[string]json.RawMessage) error {
	v, ok := raw["metadata"]
	if !ok {
		return nil
	}
	cur := markerOf(stored)
	var m map[string]json.RawMessage
	if json.Unmarshal(v, &m) != nil || m == nil {
		if cur != nil && bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			return markerForbidden() // null clears the metadata, marker included
		}
		return nil // not an object: the patch's own validation answers
	}
	next, named := m[BuiltInMarker]
	switch {
	case !named:
		if cur != nil {
			raw["metadata"] = withMarker(v, cur)
		}
		return nil
	case cur == nil || !jsonEqual(cur, next):
		return markerForbidden()
	}
	return nil
}

// builtInCreateInput is the input of agents.createBuiltIn.
type builtInCreateInput struct {
	agentCreateBody
	// Status is idle (default), paused or pending_approval.
	Status string `json:"status"`
	// PermissionKeys are kernel permission keys granted to the agent.
	PermissionKeys []string `json:"permissionKeys"`
}

func callCreateBuiltIn(a *Agents, ctx context.Context, call *sdk.MethodCall) (any, error) {
	if call.Caller != BuiltInOwner {
		return nil, forbidden("Only the built-in agent service can create built-in agents")
	}
	var in builtInCreateInput
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	companyID := call.CompanyID
	if !isUUID(companyID) {
		return nil, invalid("companyId", "is required")
	}
	if markerOf(in.Metadata) == nil {
		return nil, invalid("metadata."+BuiltInMarker, "is required")
	}
	st := in.Status
	if st == "" {
		st = statusIdle
	}
	if !slices.Contains([]string{statusIdle, statusPaused, statusPendingApproval}, st) {
		return nil, invalid("status", "must be idle, paused or pending_approval")
	}
	for _, k := range in.PermissionKeys {
		if k == "" {
			return nil, invalid("permissionKeys", "must not hold empty keys")
		}
	}
	ctx = methodCtx(ctx, call, companyID)
	cfg, role, err := a.newConfig(ctx, companyID, &in.agentCreateBody)
	if err != nil {
		return nil, err
	}
	if st == statusPaused {
		reason, now := "system", timeNow()
		cfg.PauseReason, cfg.PausedAt = &reason, &now
	}
	ag, err := a.createAgent(ctx, companyID, in.Name, role, st, cfg, 0)
	if err != nil {
		return nil, err
	}
	for _, k := range in.PermissionKeys {
		if _, err := a.host.Principals.SetPermission(ctx, &hostv1.SetPermissionRequest{
			CompanyId: companyID, PrincipalType: "agent", PrincipalId: ag.ID.Id, Permission: k, Granted: true,
		}); err != nil {
			return nil, fmt.Errorf("error granting %s to built-in agent %s: %w", k, ag.ID.Id, err)
		}
	}
	if err := a.activity(ctx, companyID, "agent.created", "agent", ag.ID.Id, map[string]any{"name": ag.ID.Name,
		"role": ag.ID.Role, "adapterType": cfg.AdapterType, "status": st, "builtIn": json.RawMessage(markerOf(cfg.Metadata))}); err != nil {
		a.log.Warn("error logging activity", "error", err)
	}
	return ag.record(false), nil
}

func callUpdateBuiltIn(a *Agents, ctx context.Context, call *sdk.MethodCall) (any, error) {
	if call.Caller != BuiltInOwner {
		return nil, forbidden("Only the built-in agent service can update built-in agents")
	}
	var in struct {
		AgentID string                     `json:"agentId"`
		Patch   map[string]json.RawMessage `json:"patch"`
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
	if markerOf(ag.Cfg.Metadata) == nil {
		return nil, conflict("Agent is not a built-in agent")
	}
	if ag.ID.Status == statusTerminated {
		return nil, conflict("Terminated agents cannot be changed")
	}
	ctx = methodCtx(ctx, call, ag.ID.CompanyId)
	var st string
	if v, ok := in.Patch["status"]; ok && json.Unmarshal(v, &st) == nil && st == statusTerminated {
		// A built-in whose provision was refused or abandoned goes, whatever its status.
		id, err := a.setStatus(ctx, ag.ID.Id, statusTerminated)
		if err != nil {
			return nil, err
		}
		if err := a.activity(ctx, ag.ID.CompanyId, "agent.terminated", "agent", ag.ID.Id, map[string]any{"builtIn": true}); err != nil {
			a.log.Warn("error logging activity", "error", err)
		}
		return (&agentRef{ID: id, Cfg: ag.Cfg}).record(false), nil
	}
	patch := map[string]json.RawMessage{}
	for k, v := range in.Patch {
		if slices.Contains(patchKeys, k) {
			patch[k] = v
		}
	}
	if v, ok := patch["metadata"]; ok && markerOf(v) == nil {
		return nil, invalid("patch.metadata."+BuiltInMarker, "is required")
	}
	res, err := a.applyPatch(ctx, ag, patch)
	if err != nil {
		return nil, err
	}
	if len(res.changed) > 0 {
		if err := a.activity(ctx, ag.ID.CompanyId, "agent.updated", "agent", ag.ID.Id,
			map[string]any{"changedKeys": res.changed, "status": res.agent.ID.Status, "builtIn": true}); err != nil {
			a.log.Warn("error logging activity", "error", err)
		}
	}
	return res.agent.record(false), nil
}
