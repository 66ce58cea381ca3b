package agents

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/uptrace/bun"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/idem"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

func init() {
	addRoutes(
		route{Method: "GET", Path: "/api/companies/{companyId}/agents", Response: new([]*agentRecord), CompanyFromPath: true,
			Summary: "List the company's agents (terminated ones excluded)", Handle: handleAgentList},
		route{Method: "GET", Path: "/api/agents/{agentId}", Response: new(agentRecord),
			Summary: "Read an agent by id, or by shortname with ?companyId=, with chainOfCommand and access", Handle: handleAgentGet},
		route{Method: "POST", Path: "/api/companies/{companyId}/agents", Status: http.StatusCreated, Response: new(agentRecord), Access: sdk.AccessBoard, CompanyFromPath: true,
			Permission: "agents:create", Body: agentCreateBody{}, Summary: "Create an agent (status idle)", Handle: handleAgentCreate},
		route{Method: "POST", Path: "/api/companies/{companyId}/agent-hires", Status: http.StatusCreated, Response: new(map[string]any), CompanyFromPath: true, Body: agentHireBody{},
			Summary: "Hire an agent; a pending approval when the company requires board approval for new agents",
			Handle:  handleAgentHire},
		route{Method: "PATCH", Path: "/api/agents/{agentId}", Response: new(agentRecord), Body: map[string]any{},
			Summary: "Update an agent's configuration (adapterConfig merged unless replaceAdapterConfig)", Handle: handleAgentPatch},
	)
}

// agentCreateBody is the body of POST /api/companies/{companyId}/agents.
type agentCreateBody struct {
	Name                 string           `json:"name" jsonschema:"required"`
	Role                 string           `json:"role,omitempty"`
	Title                *string          `json:"title,omitempty"`
	Icon                 *string          `json:"icon,omitempty"`
	ReportsTo            *string          `json:"reportsTo,omitempty"`
	Capabilities         *string          `json:"capabilities,omitempty"`
	AdapterType          string           `json:"adapterType,omitempty"`
	AdapterConfig        json.RawMessage  `json:"adapterConfig,omitempty" jsonschema:"type=object"`
	RuntimeConfig        json.RawMessage  `json:"runtimeConfig,omitempty" jsonschema:"type=object"`
	BudgetMonthlyCents   *int64           `json:"budgetMonthlyCents,omitempty"`
	Permissions          *permissionsBody `json:"permissions,omitempty"`
	DesiredSkills        []string         `json:"desiredSkills,omitempty"`
	Metadata             json.RawMessage  `json:"metadata,omitempty" jsonschema:"type=object"`
	DefaultEnvironmentID *string          `json:"defaultEnvironmentId,omitempty"`
	// InstructionsBundle is accepted for compatibility; instruction bundles are not stored yet.
	InstructionsBundle json.RawMessage `json:"instructionsBundle,omitempty"`
}

// agentHireBody is the create body plus the issues the hire comes from.
type agentHireBody struct {
	agentCreateBody
	SourceIssueID  *string  `json:"sourceIssueId,omitempty"`
	SourceIssueIDs []string `json:"sourceIssueIds,omitempty"`
}

var adapterTypeRe = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,99}$`)

// fieldErrs collects validation details.
type fieldErrs []validationDetail

func (f *fieldErrs) add(path, msg string) {
	*f = append(*f, validationDetail{Path: path, Message: msg})
}

func (f fieldErrs) err() error {
	if len(f) == 0 {
		return nil
	}
	return validationError(f...)
}

// jsonObject normalizes an optional JSON object ({} when absent or null).
func jsonObject(errs *fieldErrs, path string, raw json.RawMessage) json.RawMessage {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return json.RawMessage(`{}`)
	}
	var m map[string]any
	if raw[0] != '{' || json.Unmarshal(raw, &m) != nil {
		errs.add(path, "must be an object")
		return nil
	}
	return raw
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("agents: encoding %T: %v", v, err))
	}
	return b
}

// normalizeRuntimeConfig fills heartbeat.enabled (default false).
func normalizeRuntimeConfig(raw json.RawMessage) json.RawMessage {
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil || m == nil {
		m = map[string]any{}
	}
	hb, _ := m["heartbeat"].(map[string]any)
	if hb == nil {
		hb = map[string]any{}
	}
	if _, ok := hb["enabled"]; !ok {
		hb["enabled"] = false
	}
	m["heartbeat"] = hb
	return mustJSON(m)
}

// normalizeSkills trims, drops empties and de-duplicates skill names, keeping order.
func normalizeSkills(in []string) []string {
	out := []string{}
	for _, s := range in {
		s = strings.TrimSpace(s)
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// validateReportsTo checks a manager: an agent of the company, not terminated, and (for an
// existing agent) not the agent itself or one of its reports.
func (a *Agents) validateReportsTo(ctx context.Context, errs *fieldErrs, companyID, selfID string, reportsTo *string) error {
	if reportsTo == nil {
		return nil
	}
	mgr, err := a.identity(ctx, *reportsTo)
	if err != nil {
		return err
	}
	if mgr == nil || mgr.CompanyId != companyID {
		errs.add("reportsTo", "must be an agent of this company")
		return nil
	}
	if mgr.Status == statusTerminated {
		errs.add("reportsTo", "agent is terminated")
		return nil
	}
	if selfID == "" {
		return nil
	}
	if *reportsTo == selfID {
		return unprocessable("An agent cannot report to itself")
	}
	r, err := a.loadRoster(ctx, companyID)
	if err != nil {
		return err
	}
	for _, anc := range r.ancestors(r.byID[*reportsTo]) {
		if anc.ID.Id == selfID {
			return unprocessable("reportsTo would create a cycle in the chain of command")
		}
	}
	return nil
}

// newConfig validates a create body and returns the configuration and normalized role.
func (a *Agents) newConfig(ctx context.Context, companyID string, b *agentCreateBody) (*configRow, string, error) {
	var errs fieldErrs
	b.Name = strings.TrimSpace(b.Name)
	switch {
	case b.Name == "":
		errs.add("name", "is required")
	default:
		limitText(&errs, "name", &b.Name, agentNameMax)
	}
	limitText(&errs, "title", b.Title, agentTitleMax)
	limitText(&errs, "icon", b.Icon, agentIconMax)
	limitText(&errs, "capabilities", b.Capabilities, agentCapabilitiesMax)
	role := strings.TrimSpace(b.Role)
	if role == "" {
		role = "general"
	}
	if !slices.Contains(agentRoles, role) {
		errs.add("role", "must be one of "+strings.Join(agentRoles, ", "))
	}
	adapterType := strings.TrimSpace(b.AdapterType)
	if adapterType == "" {
		adapterType = "process"
	}
	if !adapterTypeRe.MatchString(adapterType) {
		errs.add("adapterType", "must be an adapter type such as process or http")
	}
	cfg := &configRow{CompanyID: companyID, Title: b.Title, Icon: b.Icon, ReportsTo: b.ReportsTo, Capabilities: b.Capabilities,
		AdapterType: adapterType, DefaultEnvironmentID: b.DefaultEnvironmentID}
	cfg.AdapterConfig = jsonObject(&errs, "adapterConfig", b.AdapterConfig)
	cfg.RuntimeConfig = normalizeRuntimeConfig(jsonObject(&errs, "runtimeConfig", b.RuntimeConfig))
	cfg.Metadata = jsonObject(&errs, "metadata", b.Metadata)
	if b.BudgetMonthlyCents != nil {
		if *b.BudgetMonthlyCents < 0 {
			errs.add("budgetMonthlyCents", "must be a non-negative integer")
		}
		cfg.BudgetMonthlyCents = *b.BudgetMonthlyCents
	}
	if b.ReportsTo != nil && !isUUID(*b.ReportsTo) {
		errs.add("reportsTo", "must be a UUID")
	} else if err := a.validateReportsTo(ctx, &errs, companyID, "", b.ReportsTo); err != nil {
		return nil, "", err
	}
	if b.DefaultEnvironmentID != nil && !isUUID(*b.DefaultEnvironmentID) {
		errs.add("defaultEnvironmentId", "must be a UUID")
	}
	cfg.DesiredSkills = mustJSON(normalizeSkills(b.DesiredSkills))
	perms := agentPermissions{CanCreateAgents: role == "ceo"}
	if b.Permissions != nil {
		if b.Permissions.CanCreateAgents != nil {
			perms.CanCreateAgents = *b.Permissions.CanCreateAgents
		}
		if b.Permissions.CanAssignTasks != nil {
			perms.CanAssignTasks = *b.Permissions.CanAssignTasks
		}
	}
	cfg.Permissions = mustJSON(perms)
	if err := errs.err(); err != nil {
		return nil, "", err
	}
	if err := a.checkAdapterType(ctx, companyID, adapterType); err != nil {
		return nil, "", err
	}
	defaults, err := a.checkAdapterConfig(ctx, companyID, adapterType, cfg.AdapterConfig)
	if err != nil {
		return nil, "", err
	}
	if len(defaults) > 0 {
		// Keys the adapter fills on create (a default model); the body's own win.
		cfg.AdapterConfig = mergeObjects(defaults, cfg.AdapterConfig)
	}
	if _, _, _, err := deviceKeyPlan(cfg); err != nil {
		return nil, "", err
	}
	return cfg, role, nil
}

// createAgent creates the kernel identity with the given status and its configuration, and
// a monthly budget policy when budgetMonthlyCents > 0. A non-zero idemStatus records the
// request's Idempotency-Key in the configuration's transaction (the answer reads back from
// GET /api/agents/{id}).
func (a *Agents) createAgent(ctx context.Context, companyID, name, role, st string, cfg *configRow, idemStatus int) (*agentRef, error) {
	id, err := a.host.Principals.CreateAgent(ctx, &hostv1.CreateAgentRequest{CompanyId: companyID, Name: name, Role: role, Status: st})
	if err != nil {
		return nil, principalErr(err, "creating agent")
	}
	cfg.AgentID = id.Id
	// The device key is stored once the name is known to be free, so a refused create
	// leaves no secret behind.
	err = a.ensureConfigSecrets(ctx, companyID, name, cfg)
	if err == nil {
		err = a.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			if err := a.saveConfig(ctx, tx, cfg); err != nil {
				return err
			}
			if idemStatus == 0 {
				return nil
			}
			return idem.Record(ctx, tx, idemStatus, "/api/agents/"+id.Id)
		})
	}
	if err != nil {
		if _, serr := a.setStatus(ctx, id.Id, statusTerminated); serr != nil {
			a.log.Warn("error terminating agent after a failed create", "agent", id.Id, "error", serr)
		}
		return nil, err
	}
	if cfg.BudgetMonthlyCents > 0 {
		a.upsertBudgetPolicy(ctx, companyID, id.Id, cfg.BudgetMonthlyCents)
	}
	return &agentRef{ID: id, Cfg: cfg}, nil
}

// upsertBudgetPolicy asks the costs extension for a monthly agent budget policy; without a
// costs extension the amount stays on the agent only.
func (a *Agents) upsertBudgetPolicy(ctx context.Context, companyID, agentID string, cents int64) {
	err := a.host.Call(ctx, "costs.upsertBudgetPolicy", sdk.ActorFrom(ctx), companyID, map[string]any{
		"companyId": companyID, "scopeType": "agent", "scopeId": agentID, "amount": cents,
		"metric": "billed_cents", "windowKind": "calendar_month_utc",
	}, nil)
	switch {
	case err == nil:
	case sdk.IsMethodNotProvided(err):
		a.log.Debug("no costs extension; budget kept on the agent", "agent", agentID)
	default:
		a.log.Warn("error creating agent budget policy", "agent", agentID, "error", err)
	}
}

// writeAgent writes an agent record with its chain; full adds chainOfCommand and access.
// The configuration is redacted for callers that may not read it.
func (a *Agents) writeAgent(ctx context.Context, rw http.ResponseWriter, st int, ag *agentRef, full bool) {
	rec, err := a.agentView(ctx, ag, full)
	if err != nil {
		a.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, st, rec)
}

func (a *Agents) agentView(ctx context.Context, ag *agentRef, full bool) (*agentRecord, error) {
	canRead, err := a.canReadConfig(ctx, ag.ID.CompanyId, ag.ID.Id)
	if err != nil {
		return nil, err
	}
	r, err := a.loadRoster(ctx, ag.ID.CompanyId)
	if err != nil {
		return nil, err
	}
	r.byID[ag.ID.Id] = ag
	rec := ag.record(!canRead).withChain(r, ag, full)
	if full {
		rec.Access = a.access(ctx, ag)
	}
	return rec, nil
}

// handleAgentList serves GET /api/companies/{companyId}/agents.
func handleAgentList(a *Agents, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := r.PathValue("companyId")
	ros, err := a.loadRoster(ctx, companyID)
	if err != nil {
		a.writeErr(rw, err)
		return
	}
	actor := sdk.ActorFrom(ctx)
	manage := actor.Type == "board" || actor.Type == "system"
	if !manage {
		if manage, err = a.canManageAgents(ctx, companyID); err != nil {
			a.writeErr(rw, err)
			return
		}
	}
	out := []*agentRecord{}
	for _, ag := range ros.order {
		if ag.ID.Status == statusTerminated {
			continue
		}
		redact := !manage && !(actor.Type == "agent" && actor.AgentId == ag.ID.Id)
		out = append(out, ag.record(redact).withChain(ros, ag, false))
	}
	sdk.WriteJSON(rw, http.StatusOK, out)
}

// resolveAgentRef reads an agent by UUID or by shortname (url key) with ?companyId=
// (an agent caller's own company by default).
func (a *Agents) resolveAgentRef(ctx context.Context, r *http.Request, ref string) (*agentRef, error) {
	if isUUID(ref) {
		return a.loadAgent(ctx, ref)
	}
	companyID := r.URL.Query().Get("companyId")
	if companyID == "" {
		if actor := sdk.ActorFrom(ctx); actor.Type == "agent" {
			companyID = actor.CompanyId
		}
	}
	if companyID == "" {
		return nil, invalid("companyId", "is required when the agent is named by its shortname")
	}
	if !isUUID(companyID) {
		return nil, invalid("companyId", "must be a UUID")
	}
	if err := requireCompanyAccess(ctx, companyID); err != nil {
		return nil, err
	}
	ros, err := a.loadRoster(ctx, companyID)
	if err != nil {
		return nil, err
	}
	ag := ros.byURLKey(ref)
	if ag == nil {
		return nil, notFound("Agent not found")
	}
	return ag, nil
}

// handleAgentGet serves GET /api/agents/{agentId}.
func handleAgentGet(a *Agents, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ag, err := a.resolveAgentRef(ctx, r, r.PathValue("agentId"))
	if err != nil {
		a.writeErr(rw, err)
		return
	}
	a.writeAgent(ctx, rw, http.StatusOK, ag, true)
}

// handleAgentCreate serves POST /api/companies/{companyId}/agents.
func handleAgentCreate(a *Agents, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := r.PathValue("companyId")
	var body agentCreateBody
	if err := decodeBody(r, &body); err != nil {
		a.writeErr(rw, err)
		return
	}
	if err := refuseMarkerOnCreate(body.Metadata); err != nil {
		a.writeErr(rw, err)
		return
	}
	cfg, role, err := a.newConfig(ctx, companyID, &body)
	if err != nil {
		a.writeErr(rw, err)
		return
	}
	ag, err := a.createAgent(ctx, companyID, body.Name, role, statusIdle, cfg, http.StatusCreated)
	if err != nil {
		a.writeErr(rw, err)
		return
	}
	if err := a.activity(ctx, companyID, "agent.created", "agent", ag.ID.Id,
		map[string]any{"name": ag.ID.Name, "role": ag.ID.Role, "adapterType": cfg.AdapterType}); err != nil {
		a.log.Warn("error logging activity", "error", err)
	}
	a.writeAgent(ctx, rw, http.StatusCreated, ag, false)
}

// company is the part of the kernel company record the agents extension reads.
type company struct {
	ID                               string `json:"id"`
	RequireBoardApprovalForNewAgents bool   `json:"requireBoardApprovalForNewAgents"`
}

func (a *Agents) company(ctx context.Context, companyID string) (*company, error) {
	res, err := a.host.Companies.Get(ctx, &hostv1.GetCompanyRequest{CompanyId: companyID})
	if err != nil {
		return nil, fmt.Errorf("error reading company %s: %w", companyID, err)
	}
	c := new(company)
	if err := json.Unmarshal(res.CompanyJson, c); err != nil {
		return nil, fmt.Errorf("error decoding company %s: %w", companyID, err)
	}
	return c, nil
}

// handleAgentHire serves POST /api/companies/{companyId}/agent-hires.
func handleAgentHire(a *Agents, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := r.PathValue("companyId")
	var body agentHireBody
	if err := decodeBody(r, &body); err != nil {
		a.writeErr(rw, err)
		return
	}
	if err := a.requireManageAgents(ctx, companyID); err != nil {
		a.writeErr(rw, err)
		return
	}
	if err := refuseMarkerOnCreate(body.Metadata); err != nil {
		a.writeErr(rw, err)
		return
	}
	if err := a.refuseUnboundSecretRefs(ctx, "", nil, body.AdapterConfig); err != nil {
		a.writeErr(rw, err)
		return
	}
	cfg, role, err := a.newConfig(ctx, companyID, &body.agentCreateBody)
	if err != nil {
		a.writeErr(rw, err)
		return
	}
	co, err := a.company(ctx, companyID)
	if err != nil {
		a.writeErr(rw, err)
		return
	}
	st := statusIdle
	if co.RequireBoardApprovalForNewAgents {
		st = statusPendingApproval
	}
	ag, err := a.createAgent(ctx, companyID, body.Name, role, st, cfg, 0)
	if err != nil {
		a.writeErr(rw, err)
		return
	}
	var approval json.RawMessage
	if st == statusPendingApproval {
		issueIDs := append([]string{}, body.SourceIssueIDs...)
		if body.SourceIssueID != nil && !slices.Contains(issueIDs, *body.SourceIssueID) {
			issueIDs = append(issueIDs, *body.SourceIssueID)
		}
		payload := cfg.snapshot(ag.ID)
		payload["agentId"] = ag.ID.Id
		in := map[string]any{"companyId": companyID, "type": "hire_agent", "payload": payload}
		if len(issueIDs) > 0 {
			in["issueIds"] = issueIDs
		}
		if err := a.host.Call(ctx, "work.approvals.create", sdk.ActorFrom(ctx), companyID, in, &approval); err != nil {
			if _, serr := a.setStatus(ctx, ag.ID.Id, statusTerminated); serr != nil {
				a.log.Warn("error terminating agent after a failed hire", "agent", ag.ID.Id, "error", serr)
			}
			if sdk.IsMethodNotProvided(err) {
				err = apiError(http.StatusServiceUnavailable, "Approvals are not available")
			}
			a.writeErr(rw, err)
			return
		}
	}
	if err := a.activity(ctx, companyID, "agent.hired", "agent", ag.ID.Id,
		map[string]any{"name": ag.ID.Name, "role": ag.ID.Role, "status": ag.ID.Status, "requiresApproval": st == statusPendingApproval}); err != nil {
		a.log.Warn("error logging activity", "error", err)
	}
	rec, err := a.agentView(ctx, ag, false)
	if err != nil {
		a.writeErr(rw, err)
		return
	}
	if approval == nil {
		approval = json.RawMessage(`null`)
	}
	sdk.WriteJSON(rw, http.StatusCreated, map[string]any{"agent": rec, "approval": approval})
}

// patchKeys are the fields PATCH /api/agents/{agentId} accepts.
var patchKeys = []string{"name", "role", "title", "icon", "reportsTo", "capabilities", "adapterType", "adapterConfig",
	"replaceAdapterConfig", "runtimeConfig", "budgetMonthlyCents", "status", "desiredSkills", "metadata", "defaultEnvironmentId"}

// optString decodes a nullable string field.
func optString(errs *fieldErrs, path string, raw json.RawMessage) *string {
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		errs.add(path, "must be a string or null")
		return nil
	}
	return &s
}

// mergeObjects returns base with patch's top-level keys laid over it.
func mergeObjects(base, patch json.RawMessage) json.RawMessage {
	m := map[string]json.RawMessage{}
	_ = json.Unmarshal(base, &m)
	p := map[string]json.RawMessage{}
	_ = json.Unmarshal(patch, &p)
	for k, v := range p {
		m[k] = v
	}
	return mustJSON(m)
}

// handleAgentPatch serves PATCH /api/agents/{agentId}.
func handleAgentPatch(a *Agents, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ag, err := a.loadAgent(ctx, r.PathValue("agentId"))
	if err != nil {
		a.writeErr(rw, err)
		return
	}
	var raw map[string]json.RawMessage
	if err := decodeBody(r, &raw); err != nil {
		a.writeErr(rw, err)
		return
	}
	if _, ok := raw["permissions"]; ok {
		a.writeErr(rw, invalid("permissions", "cannot be changed here; use PATCH /api/agents/{agentId}/permissions"))
		return
	}
	// Unknown fields are ignored, as the reference product does.
	for k := range raw {
		if !slices.Contains(patchKeys, k) {
			delete(raw, k)
		}
	}
	if err := a.requireConfigWriter(ctx, ag); err != nil {
		a.writeErr(rw, err)
		return
	}
	if err := a.refuseAgentEscalation(ctx, ag, raw); err != nil {
		a.writeErr(rw, err)
		return
	}
	// Only the built-in agent service writes the built-in marker (agents.updateBuiltIn).
	if err := guardMarkerPatch(ag.Cfg.Metadata, raw); err != nil {
		a.writeErr(rw, err)
		return
	}
	if err := a.refuseUnboundSecretRefs(ctx, ag.ID.Id, ag.Cfg.AdapterConfig, raw["adapterConfig"]); err != nil {
		a.writeErr(rw, err)
		return
	}
	res, err := a.applyPatch(ctx, ag, raw)
	if err != nil {
		a.writeErr(rw, err)
		return
	}
	if err := a.activity(ctx, ag.ID.CompanyId, "agent.updated", "agent", ag.ID.Id,
		map[string]any{"changedKeys": res.changed, "status": res.agent.ID.Status}); err != nil {
		a.log.Warn("error logging activity", "error", err)
	}
	a.writeAgent(ctx, rw, http.StatusOK, res.agent, false)
}

type patchResult struct {
	agent   *agentRef
	changed []string
}

// applyPatch validates and applies a patch: configuration changes are saved with a config
// revision; a status change goes to the kernel identity.
func (a *Agents) applyPatch(ctx context.Context, ag *agentRef, raw map[string]json.RawMessage) (*patchResult, error) {
	var errs fieldErrs
	cfg := *ag.Cfg
	var renameTo, roleTo *string
	if v, ok := raw["name"]; ok {
		var name string
		if json.Unmarshal(v, &name) != nil || strings.TrimSpace(name) == "" {
			errs.add("name", "must be a non-empty string")
		} else if name = strings.TrimSpace(name); utf8.RuneCountInString(name) > agentNameMax {
			limitText(&errs, "name", &name, agentNameMax)
		} else if name = strings.TrimSpace(name); name != ag.ID.Name {
			ros, err := a.loadRoster(ctx, ag.ID.CompanyId)
			if err != nil {
				return nil, err
			}
			if other := ros.byURLKey(urlKey(name)); other != nil && other.ID.Id != ag.ID.Id {
				return nil, conflict("Agent name already in use")
			}
			renameTo = &name // the kernel owns the name; applied through Principals.UpdateAgent

		}
	}
	if v, ok := raw["role"]; ok {
		var role string
		if json.Unmarshal(v, &role) != nil || !slices.Contains(agentRoles, role) {
			errs.add("role", "must be one of "+strings.Join(agentRoles, ", "))
		} else if role != ag.ID.Role {
			roleTo = &role
		}
	}
	if v, ok := raw["title"]; ok {
		cfg.Title = optString(&errs, "title", v)
		limitText(&errs, "title", cfg.Title, agentTitleMax)
	}
	if v, ok := raw["icon"]; ok {
		cfg.Icon = optString(&errs, "icon", v)
		limitText(&errs, "icon", cfg.Icon, agentIconMax)
	}
	if v, ok := raw["capabilities"]; ok {
		cfg.Capabilities = optString(&errs, "capabilities", v)
		limitText(&errs, "capabilities", cfg.Capabilities, agentCapabilitiesMax)
	}
	if v, ok := raw["reportsTo"]; ok {
		cfg.ReportsTo = optString(&errs, "reportsTo", v)
		if cfg.ReportsTo != nil && !isUUID(*cfg.ReportsTo) {
			errs.add("reportsTo", "must be a UUID")
		} else if err := a.validateReportsTo(ctx, &errs, ag.ID.CompanyId, ag.ID.Id, cfg.ReportsTo); err != nil {
			return nil, err
		}
	}
	if v, ok := raw["defaultEnvironmentId"]; ok {
		cfg.DefaultEnvironmentID = optString(&errs, "defaultEnvironmentId", v)
		if cfg.DefaultEnvironmentID != nil && !isUUID(*cfg.DefaultEnvironmentID) {
			errs.add("defaultEnvironmentId", "must be a UUID")
		}
	}
	if v, ok := raw["adapterType"]; ok {
		var t string
		if json.Unmarshal(v, &t) != nil || !adapterTypeRe.MatchString(t) {
			errs.add("adapterType", "must be an adapter type such as process or http")
		} else if t != ag.Cfg.AdapterType {
			if err := a.checkAdapterType(ctx, ag.ID.CompanyId, t); err != nil {
				return nil, err
			}
		}
		cfg.AdapterType = t
	}
	replace := false
	if v, ok := raw["replaceAdapterConfig"]; ok && json.Unmarshal(v, &replace) != nil {
		errs.add("replaceAdapterConfig", "must be a boolean")
	}
	if v, ok := raw["adapterConfig"]; ok {
		obj := jsonObject(&errs, "adapterConfig", v)
		if replace {
			cfg.AdapterConfig = obj
		} else if obj != nil {
			cfg.AdapterConfig = mergeObjects(ag.Cfg.AdapterConfig, obj)
		}
	}
	if v, ok := raw["runtimeConfig"]; ok {
		cfg.RuntimeConfig = normalizeRuntimeConfig(jsonObject(&errs, "runtimeConfig", v))
	}
	if v, ok := raw["metadata"]; ok {
		cfg.Metadata = jsonObject(&errs, "metadata", v)
	}
	if v, ok := raw["budgetMonthlyCents"]; ok {
		var n int64
		if json.Unmarshal(v, &n) != nil || n < 0 {
			errs.add("budgetMonthlyCents", "must be a non-negative integer")
		}
		cfg.BudgetMonthlyCents = n
	}
	if v, ok := raw["desiredSkills"]; ok {
		var skills []string
		if json.Unmarshal(v, &skills) != nil {
			errs.add("desiredSkills", "must be an array of skill names")
		}
		cfg.DesiredSkills = mustJSON(normalizeSkills(skills))
	}
	newStatus := ""
	if v, ok := raw["status"]; ok {
		if json.Unmarshal(v, &newStatus) != nil || !slices.Contains([]string{statusActive, statusPaused, statusIdle,
			statusRunning, statusError, statusPendingApproval, statusTerminated}, newStatus) {
			errs.add("status", "must be one of active, paused, idle, running, error, terminated")
		}
	}
	if err := errs.err(); err != nil {
		return nil, err
	}
	if newStatus != "" && newStatus != ag.ID.Status {
		switch {
		case ag.ID.Status == statusTerminated:
			return nil, conflict("Terminated agents cannot be resumed through a patch")
		case ag.ID.Status == statusPendingApproval:
			return nil, conflict("Pending approval agents cannot be activated through a patch")
		case newStatus == statusPendingApproval:
			return nil, invalid("status", "cannot be set to pending_approval")
		}
	}
	if _, typed := raw["adapterType"]; typed || raw["adapterConfig"] != nil {
		if _, err := a.checkAdapterConfig(ctx, ag.ID.CompanyId, cfg.AdapterType, cfg.AdapterConfig); err != nil {
			return nil, err
		}
		if err := a.ensureConfigSecrets(ctx, ag.ID.CompanyId, ag.ID.Name, &cfg); err != nil {
			return nil, err
		}
	}
	before, after := ag.Cfg.snapshot(ag.ID), cfg.snapshot(ag.ID)
	changed := changedKeys(before, after)
	if newStatus != "" && newStatus != ag.ID.Status {
		switch {
		case newStatus == statusPaused:
			reason, now := "manual", timeNow()
			cfg.PauseReason, cfg.PausedAt = &reason, &now
		case ag.ID.Status == statusPaused:
			cfg.PauseReason, cfg.PausedAt = nil, nil
		}
	}
	if len(changed) > 0 || newStatus != "" {
		if err := a.saveWithRevision(ctx, ag, &cfg, "patch", nil, changed); err != nil {
			return nil, err
		}
	}
	id := ag.ID
	if renameTo != nil || roleTo != nil {
		updated, err := a.host.Principals.UpdateAgent(ctx, &hostv1.UpdateAgentRequest{AgentId: ag.ID.Id, Name: renameTo, Role: roleTo})
		if err != nil {
			return nil, identityError(err)
		}
		id = updated
		if renameTo != nil {
			changed = append(changed, "name")
		}
		if roleTo != nil {
			changed = append(changed, "role")
		}
	}
	if newStatus != "" && newStatus != ag.ID.Status {
		var err error
		if id, err = a.setStatus(ctx, ag.ID.Id, newStatus); err != nil {
			return nil, err
		}
	}
	return &patchResult{agent: &agentRef{ID: id, Cfg: &cfg}, changed: changed}, nil
}

// identityError maps a failed kernel identity update to an API error: a name collision is
// 409, validation is 400.
func identityError(err error) error {
	switch status.Code(err) {
	case codes.FailedPrecondition, codes.AlreadyExists:
		return conflict("Agent name already in use")
	case codes.InvalidArgument:
		return invalid("name", status.Convert(err).Message())
	case codes.NotFound:
		return notFound("Agent not found")
	}
	return fmt.Errorf("error updating agent identity: %w", err)
}
