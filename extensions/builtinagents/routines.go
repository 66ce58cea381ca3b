package builtinagents

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/keelhq/keel/builtins"
	"github.com/keelhq/keel/sdk"
)

// routeAnswer is the output of routines.invokeRoute.
type routeAnswer struct {
	Status int             `json:"status"`
	Body   json.RawMessage `json:"body"`
}

// routinesRoute runs one routines route through the routines owner as the system and
// decodes a success answer into out; an error answer comes back as an *sdk.Error with the
// owner's status, text and code.
func (x *BuiltInAgents) routinesRoute(ctx context.Context, companyID, method, path string, body, out any) error {
	in := map[string]any{"method": method, "path": path}
	if body != nil {
		in["body"] = body
	}
	var ans routeAnswer
	if err := x.host.Call(ctx, "routines.invokeRoute", sdk.SystemActor(), companyID, in, &ans); err != nil {
		if sdk.IsMethodNotProvided(err) {
			return sdk.NewError(http.StatusServiceUnavailable, "Routines are not available")
		}
		return callErr(err, "error calling routines %s %s", method, path)
	}
	if ans.Status >= 400 {
		var e struct {
			Error string `json:"error"`
			Code  string `json:"code"`
		}
		_ = json.Unmarshal(ans.Body, &e)
		if e.Error == "" {
			e.Error = http.StatusText(ans.Status)
		}
		return &sdk.Error{Status: ans.Status, Message: e.Error, Code: e.Code, Source: sdk.SourceDownstream}
	}
	if out != nil && len(ans.Body) > 0 {
		if err := json.Unmarshal(ans.Body, out); err != nil {
			return fmt.Errorf("error decoding routines %s %s: %w", method, path, err)
		}
	}
	return nil
}

// routineDetail is what the extension reads of a routine.
type routineDetail struct {
	ID              string  `json:"id"`
	Title           string  `json:"title"`
	Status          string  `json:"status"`
	AssigneeAgentID *string `json:"assigneeAgentId"`
	Triggers        []struct {
		ID             string  `json:"id"`
		Kind           string  `json:"kind"`
		Enabled        bool    `json:"enabled"`
		CronExpression *string `json:"cronExpression"`
		Timezone       *string `json:"timezone"`
	} `json:"triggers"`
}

// hasTrigger reports whether the routine still has the trigger.
func (d *routineDetail) hasTrigger(id string) bool {
	for _, t := range d.Triggers {
		if t.ID == id {
			return true
		}
	}
	return false
}

// assignable reports whether a routine may name the agent as its assignee (the routines
// owner refuses pending and terminated agents).
func assignable(ag *agent) bool { return ag != nil && ag.Status != agentPendingApproval }

// ensureRoutine makes sure the bundled routine rt exists with its schedule trigger, creating
// what is missing with the registry's defaults; with reset it also restores an existing
// routine's title, description, status and schedule. A routine created while the agent
// awaited approval gets the agent as assignee once it can. It reports whether it created or
// changed anything.
func (x *BuiltInAgents) ensureRoutine(ctx context.Context, r *row, rt *builtins.Routine, ag *agent, reset bool) (bool, error) {
	changed := false
	p := r.Routines[rt.Key]
	var cur *routineDetail
	if p != nil {
		cur = new(routineDetail)
		err := x.routinesRoute(ctx, r.CompanyID, http.MethodGet, "/api/routines/"+p.RoutineID, nil, cur)
		if e, ok := err.(*sdk.Error); ok && e.Status == http.StatusNotFound {
			cur, p = nil, nil
		} else if err != nil {
			return false, err
		}
	}
	status := "paused"
	if rt.Enabled && assignable(ag) {
		status = "active"
	}
	if cur == nil {
		body := map[string]any{"title": rt.Title, "description": rt.Description, "status": status,
			"concurrencyPolicy": "coalesce_if_active"}
		if assignable(ag) {
			body["assigneeAgentId"] = ag.ID
		}
		cur = new(routineDetail)
		if err := x.routinesRoute(ctx, r.CompanyID, http.MethodPost, "/api/companies/"+r.CompanyID+"/routines", body, cur); err != nil {
			return false, err
		}
		p = &routinePiece{RoutineID: cur.ID}
		r.Routines[rt.Key] = p
		changed = true
	} else {
		patch := map[string]any{}
		if reset {
			patch["title"], patch["description"], patch["status"] = rt.Title, rt.Description, status
		}
		if assignable(ag) && (cur.AssigneeAgentID == nil || reset && *cur.AssigneeAgentID != ag.ID) {
			patch["assigneeAgentId"] = ag.ID
		}
		if len(patch) > 0 {
			if err := x.routinesRoute(ctx, r.CompanyID, http.MethodPatch, "/api/routines/"+cur.ID, patch, nil); err != nil {
				return false, err
			}
			changed = true
		}
	}
	if p.TriggerID == "" || !cur.hasTrigger(p.TriggerID) {
		var trig struct {
			Trigger struct {
				ID string `json:"id"`
			} `json:"trigger"`
		}
		if err := x.routinesRoute(ctx, r.CompanyID, http.MethodPost, "/api/routines/"+p.RoutineID+"/triggers", map[string]any{
			"kind": "schedule", "label": "Built-in " + r.Key, "cronExpression": rt.CronExpression, "timezone": rt.Timezone,
			"enabled": rt.Enabled}, &trig); err != nil {
			return false, err
		}
		p.TriggerID = trig.Trigger.ID
		changed = true
	} else if reset {
		if err := x.routinesRoute(ctx, r.CompanyID, http.MethodPatch, "/api/routine-triggers/"+p.TriggerID, map[string]any{
			"cronExpression": rt.CronExpression, "timezone": rt.Timezone, "enabled": rt.Enabled}, nil); err != nil {
			return false, err
		}
		changed = true
	}
	return changed, nil
}

// setRoutineActive activates (or pauses) a bundled routine and its schedule.
func (x *BuiltInAgents) setRoutineActive(ctx context.Context, r *row, rt *builtins.Routine, ag *agent, active bool) (json.RawMessage, error) {
	if _, err := x.ensureRoutine(ctx, r, rt, ag, false); err != nil {
		return nil, err
	}
	p := r.Routines[rt.Key]
	patch := map[string]any{"status": "paused"}
	if active {
		patch = map[string]any{"status": "active", "assigneeAgentId": ag.ID}
	}
	if err := x.routinesRoute(ctx, r.CompanyID, http.MethodPatch, "/api/routine-triggers/"+p.TriggerID,
		map[string]any{"enabled": active}, nil); err != nil {
		return nil, err
	}
	var out json.RawMessage
	if err := x.routinesRoute(ctx, r.CompanyID, http.MethodPatch, "/api/routines/"+p.RoutineID, patch, &out); err != nil {
		return nil, err
	}
	return out, nil
}
