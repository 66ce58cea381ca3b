package builtinagents

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/keelhq/keel/builtins"
	"github.com/keelhq/keel/sdk"
)

const base = "/api/companies/{companyId}/built-in-agents"

func init() {
	addRoutes(
		route{Method: http.MethodGet, Path: base, Response: new([]*View), CompanyFromPath: true,
			Summary: "List every registry built-in agent with its lifecycle state (adapter and runtime config redacted)",
			Handle:  (*BuiltInAgents).handleList},
		route{Method: http.MethodGet, Path: base + "/{key}/status", Response: new(View), CompanyFromPath: true,
			Summary: "Read one built-in agent's lifecycle state (not_provisioned, pending_approval, needs_setup, ready, paused) and pieces",
			Handle:  (*BuiltInAgents).handleStatus},
		route{Method: http.MethodPost, Path: base + "/{key}/provision", Response: new(View), CompanyFromPath: true, Permission: "agents:create",
			Body: ProvisionBody{}, Errors: []int{http.StatusConflict},
			Summary: "Provision a built-in agent: 200 directly, 202 with a board approval when the company requires one; " +
				"first-time configuration of a needs_setup agent applies directly; 409 for a reconfiguration or a pending approval",
			Handle: (*BuiltInAgents).handleProvision},
		route{Method: http.MethodPost, Path: base + "/{key}/reconcile", Response: new(ChangeAnswer), CompanyFromPath: true, Permission: "agents:create",
			Summary: "Make sure the agent and its registry-managed pieces exist without changing the adapter (idempotent)",
			Handle:  (*BuiltInAgents).handleReconcile},
		route{Method: http.MethodPost, Path: base + "/{key}/reset", Response: new(ChangeAnswer), CompanyFromPath: true, Permission: "agents:create",
			Body: ResetBody{}, Errors: []int{http.StatusConflict},
			Summary: "Restore registry defaults of resources agent, instructions, skill, routine (all when omitted), keeping the adapter setup",
			Handle:  (*BuiltInAgents).handleReset},
		route{Method: http.MethodPut, Path: base + "/{key}/instructions", Response: new(View), CompanyFromPath: true, Permission: "agents:create",
			Body: InstructionsBody{}, Errors: []int{http.StatusConflict},
			Summary: "Replace a provisioned built-in agent's instructions (reset instructions restores the registry's)",
			Handle:  (*BuiltInAgents).handleInstructions},
		route{Method: http.MethodPost, Path: base + "/{key}/routines/{routineKey}/enable", Response: new(RoutineAnswer), CompanyFromPath: true,
			Access: sdk.AccessBoard, Permission: "tasks:assign", Errors: []int{http.StatusConflict},
			Summary: "Activate a bundled routine and its schedule, resuming the agent if paused",
			Handle:  (*BuiltInAgents).handleRoutineEnable},
		route{Method: http.MethodPost, Path: base + "/{key}/routines/{routineKey}/disable", Response: new(RoutineAnswer), CompanyFromPath: true,
			Access: sdk.AccessBoard, Permission: "tasks:assign", Errors: []int{http.StatusConflict},
			Summary: "Pause a bundled routine and its schedule",
			Handle:  (*BuiltInAgents).handleRoutineDisable},
		route{Method: http.MethodPost, Path: base + "/{key}/routines/{routineKey}/run", Status: http.StatusAccepted, Response: new(map[string]any),
			CompanyFromPath: true, Access: sdk.AccessBoard, Permission: "tasks:assign", Errors: []int{http.StatusConflict},
			Summary: "Run a bundled routine once outside its schedule (202 with the routine run)",
			Handle:  (*BuiltInAgents).handleRoutineRun},
	)
}

// ProvisionBody is the optional body of POST …/built-in-agents/{key}/provision.
type ProvisionBody struct {
	// AdapterType is one of the built-in's allowed adapter types (default the first).
	AdapterType *string `json:"adapterType,omitempty"`
	// AdapterConfig is the adapter's configuration object.
	AdapterConfig json.RawMessage `json:"adapterConfig,omitempty" jsonschema:"type=object"`
	// BudgetMonthlyCents is the agent's monthly budget (default 0).
	BudgetMonthlyCents *int64 `json:"budgetMonthlyCents,omitempty" jsonschema:"minimum=0"`
}

// ResetBody is the optional body of POST …/built-in-agents/{key}/reset.
type ResetBody struct {
	// Resources are agent, instructions, skill and routine; all of them when omitted.
	Resources []string `json:"resources,omitempty" jsonschema:"uniqueItems=true"`
}

// InstructionsBody is the body of PUT …/built-in-agents/{key}/instructions.
type InstructionsBody struct {
	// Markdown is the agent's instructions, 1 to 200000 characters.
	Markdown string `json:"markdown" jsonschema:"required,minLength=1,maxLength=200000"`
}

// ChangeAnswer is the answer of reconcile and reset: the built-in and what changed.
type ChangeAnswer struct {
	*View
	// Changes lists what was created or restored: agent, instructions, skill[:name], routine[:key].
	Changes []string `json:"changes"`
}

// RoutineAnswer is the answer of the routine enable and disable routes.
type RoutineAnswer struct {
	BuiltIn *View           `json:"builtIn"`
	Routine json.RawMessage `json:"routine"`
}

// pathDefinition reads the {key} path parameter's definition.
func pathDefinition(r *http.Request) (*builtins.Definition, error) {
	return definition(r.PathValue("key"))
}

func (x *BuiltInAgents) handleList(rw http.ResponseWriter, r *http.Request) {
	out, err := x.list(r.Context(), sdk.CompanyIDFrom(r.Context()))
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, out)
}

func (x *BuiltInAgents) handleStatus(rw http.ResponseWriter, r *http.Request) {
	d, err := pathDefinition(r)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	v, err := x.status(r.Context(), sdk.CompanyIDFrom(r.Context()), d)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, v)
}

// checkProvision validates a provision body against a definition.
func checkProvision(d *builtins.Definition, b *ProvisionBody) (*provisionInput, error) {
	in := &provisionInput{}
	var details []sdk.ValidationDetail
	bad := func(path, msg string) { details = append(details, sdk.ValidationDetail{Path: path, Message: msg}) }
	if b.AdapterType != nil {
		in.adapterType, in.typeGiven = strings.TrimSpace(*b.AdapterType), true
		if !slices.Contains(d.AllowedAdapterTypes, in.adapterType) {
			bad("adapterType", "must be one of "+strings.Join(d.AllowedAdapterTypes, ", "))
		}
	}
	if raw := bytes.TrimSpace(b.AdapterConfig); len(raw) > 0 && !bytes.Equal(raw, []byte("null")) {
		var m map[string]any
		if raw[0] != '{' || json.Unmarshal(raw, &m) != nil {
			bad("adapterConfig", "must be an object")
		}
		in.adapterConfig, in.configGiven = raw, true
	}
	if b.BudgetMonthlyCents != nil {
		if *b.BudgetMonthlyCents < 0 {
			bad("budgetMonthlyCents", "must be a non-negative integer")
		}
		in.budget, in.budgetGiven = *b.BudgetMonthlyCents, true
	}
	if len(details) > 0 {
		return nil, sdk.ValidationError(details...)
	}
	return in, nil
}

func (x *BuiltInAgents) handleProvision(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := sdk.CompanyIDFrom(ctx)
	d, err := pathDefinition(r)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	var body ProvisionBody
	if err := sdk.DecodeJSON(r, &body); err != nil {
		x.writeErr(rw, err)
		return
	}
	in, err := checkProvision(d, &body)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	res, err := x.provision(ctx, companyID, d, in)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	x.writeView(rw, r, d, res, false)
}

// writeView answers a write with the built-in's view: 202 while a pending approval stands
// for the built-in, 200 otherwise.
func (x *BuiltInAgents) writeView(rw http.ResponseWriter, r *http.Request, d *builtins.Definition, res *result, withChanges bool) {
	v, err := x.status(r.Context(), sdk.CompanyIDFrom(r.Context()), d)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	st := http.StatusOK
	if res.accepted {
		st = http.StatusAccepted
	}
	if !withChanges {
		sdk.WriteJSON(rw, st, v)
		return
	}
	changes := res.changes
	if changes == nil {
		changes = []string{}
	}
	sdk.WriteJSON(rw, st, &ChangeAnswer{View: v, Changes: changes})
}

func (x *BuiltInAgents) handleReconcile(rw http.ResponseWriter, r *http.Request) {
	d, err := pathDefinition(r)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	res, err := x.reconcile(r.Context(), sdk.CompanyIDFrom(r.Context()), d)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	x.writeView(rw, r, d, res, true)
}

func (x *BuiltInAgents) handleReset(rw http.ResponseWriter, r *http.Request) {
	d, err := pathDefinition(r)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	var body ResetBody
	if err := sdk.DecodeJSON(r, &body); err != nil {
		x.writeErr(rw, err)
		return
	}
	resources := body.Resources
	if len(resources) == 0 {
		resources = allResources
	}
	for i, res := range resources {
		if !slices.Contains(allResources, res) {
			x.writeErr(rw, sdk.ValidationError(sdk.ValidationDetail{Path: "resources." + itoa(i),
				Message: "must be one of agent, instructions, skill, routine"}))
			return
		}
	}
	res, err := x.reset(r.Context(), sdk.CompanyIDFrom(r.Context()), d, resources)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	res.accepted = false
	x.writeView(rw, r, d, res, true)
}

func (x *BuiltInAgents) handleInstructions(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := sdk.CompanyIDFrom(ctx)
	d, err := pathDefinition(r)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	var body InstructionsBody
	if err := sdk.DecodeJSON(r, &body); err != nil {
		x.writeErr(rw, err)
		return
	}
	if n := len([]rune(body.Markdown)); strings.TrimSpace(body.Markdown) == "" || n > 200000 {
		x.writeErr(rw, sdk.Invalid("markdown", "must be 1 to 200000 characters"))
		return
	}
	err = x.withLock(ctx, companyID, d.Key, func(row *row) error {
		ag, err := x.readAgent(ctx, companyID, row.AgentID)
		if err != nil {
			return err
		}
		if ag == nil {
			return sdk.Conflict(msgNotProvisioned)
		}
		row.Instructions = body.Markdown
		x.activity(ctx, companyID, "built_in_agent.instructions_updated", ag.ID, map[string]any{"key": d.Key, "agentId": ag.ID})
		return nil
	})
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	x.writeView(rw, r, d, &result{}, false)
}

// routineTarget reads the definition, bundled routine and agent of a routine route: 404 for
// an unknown key or routine, 409 when the built-in is not provisioned or awaits approval.
func (x *BuiltInAgents) routineTarget(r *http.Request) (*builtins.Definition, *builtins.Routine, error) {
	d, err := pathDefinition(r)
	if err != nil {
		return nil, nil, err
	}
	rt := d.Routine(r.PathValue("routineKey"))
	if rt == nil {
		return nil, nil, sdk.NotFound(msgRoutineNotFound)
	}
	return d, rt, nil
}

// routineAgent reads the agent a routine route acts for.
func (x *BuiltInAgents) routineAgent(r *http.Request, row *row) (*agent, error) {
	ag, err := x.readAgent(r.Context(), row.CompanyID, row.AgentID)
	switch {
	case err != nil:
		return nil, err
	case ag == nil:
		return nil, sdk.Conflict(msgNotProvisioned)
	case ag.Status == agentPendingApproval:
		return nil, conflictCode(codePendingApproval)
	}
	return ag, nil
}

func (x *BuiltInAgents) handleRoutineEnable(rw http.ResponseWriter, r *http.Request) {
	x.routineToggle(rw, r, true)
}

func (x *BuiltInAgents) handleRoutineDisable(rw http.ResponseWriter, r *http.Request) {
	x.routineToggle(rw, r, false)
}

// routineToggle activates or pauses a bundled routine; activating resumes a paused agent.
func (x *BuiltInAgents) routineToggle(rw http.ResponseWriter, r *http.Request, active bool) {
	ctx := r.Context()
	companyID := sdk.CompanyIDFrom(ctx)
	d, rt, err := x.routineTarget(r)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	var routine json.RawMessage
	err = x.withLock(ctx, companyID, d.Key, func(row *row) error {
		ag, err := x.routineAgent(r, row)
		if err != nil {
			return err
		}
		if active && ag.Status == agentPaused {
			if ag, err = x.updateAgent(ctx, ag, map[string]any{"status": "idle"}); err != nil {
				return err
			}
		}
		if routine, err = x.setRoutineActive(ctx, row, rt, ag, active); err != nil {
			return err
		}
		action := "built_in_agent.routine_disabled"
		if active {
			action = "built_in_agent.routine_enabled"
		}
		x.activity(ctx, companyID, action, ag.ID, map[string]any{"key": d.Key, "routineKey": rt.Key,
			"routineId": row.Routines[rt.Key].RoutineID})
		return nil
	})
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	v, err := x.status(ctx, companyID, d)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, &RoutineAnswer{BuiltIn: v, Routine: routine})
}

func (x *BuiltInAgents) handleRoutineRun(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := sdk.CompanyIDFrom(ctx)
	d, rt, err := x.routineTarget(r)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	var run json.RawMessage
	err = x.withLock(ctx, companyID, d.Key, func(row *row) error {
		ag, err := x.routineAgent(r, row)
		if err != nil {
			return err
		}
		if _, err := x.ensureRoutine(ctx, row, rt, ag, false); err != nil {
			return err
		}
		return x.routinesRoute(ctx, companyID, http.MethodPost, "/api/routines/"+row.Routines[rt.Key].RoutineID+"/run",
			map[string]any{"source": "manual"}, &run)
	})
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusAccepted, run)
}

// itoa formats a small index.
func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}
