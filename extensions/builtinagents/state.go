package builtinagents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelhq/keel/builtins"
	"github.com/keelhq/keel/sdk"
)

// Lifecycle states (spec part 2 "Built-in agent lifecycle state").
const (
	StateNotProvisioned  = "not_provisioned"
	StatePendingApproval = "pending_approval"
	StateNeedsSetup      = "needs_setup"
	StateReady           = "ready"
	StatePaused          = "paused"
)

// Error texts and codes (spec part 2 "Errors"; the ones the spec leaves open are plain English).
const (
	codeReconfiguration = "built_in_agent_reconfiguration_requires_approval"
	codePendingApproval = "built_in_agent_pending_approval"
	codeNotConfigured   = "built_in_agent_not_configured"
	codePaused          = "built_in_agent_paused"

	msgNotFound        = "Built-in agent not found"
	msgNotProvisioned  = "Built-in agent is not provisioned"
	msgRoutineNotFound = "Routine not found"
)

// redacted replaces every adapter and runtime config value in the list and status answers.
const redacted = "***REDACTED***"

// Agent statuses the extension reads.
const (
	agentPaused          = "paused"
	agentPendingApproval = "pending_approval"
	agentTerminated      = "terminated"
)

// row is a company's record of one built-in (table builtin_agents).
type row struct {
	CompanyID        string
	Key              string
	AgentID          *string
	ApprovalID       *string
	Instructions     string
	InstructionsHash string
	Skills           map[string]*skillPiece
	Routines         map[string]*routinePiece
	UpdatedAt        time.Time
}

// skillPiece is the company's copy of a bundled skill.
type skillPiece struct {
	Markdown     string `json:"markdown"`
	RegistryHash string `json:"registryHash"`
}

// routinePiece names the routines owner's routine and schedule trigger of a bundled routine.
type routinePiece struct {
	RoutineID string `json:"routineId"`
	TriggerID string `json:"triggerId,omitempty"`
}

const rowCols = `company_id, key, agent_id, approval_id, instructions, instructions_hash, skills, routines, updated_at`

func scanRow(s pgx.Row) (*row, error) {
	r := &row{}
	var skills, routines []byte
	if err := s.Scan(&r.CompanyID, &r.Key, &r.AgentID, &r.ApprovalID, &r.Instructions, &r.InstructionsHash, &skills, &routines,
		&r.UpdatedAt); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(skills, &r.Skills); err != nil {
		return nil, fmt.Errorf("error decoding the skills of built-in %s: %w", r.Key, err)
	}
	if err := json.Unmarshal(routines, &r.Routines); err != nil {
		return nil, fmt.Errorf("error decoding the routines of built-in %s: %w", r.Key, err)
	}
	if r.Skills == nil {
		r.Skills = map[string]*skillPiece{}
	}
	if r.Routines == nil {
		r.Routines = map[string]*routinePiece{}
	}
	return r, nil
}

// loadRows reads a company's rows by key.
func (x *BuiltInAgents) loadRows(ctx context.Context, companyID string) (map[string]*row, error) {
	rows, err := x.pool.Query(ctx, `SELECT `+rowCols+` FROM builtin_agents WHERE company_id = $1`, companyID)
	if err != nil {
		return nil, fmt.Errorf("error reading the built-in agents of company %s: %w", companyID, err)
	}
	defer rows.Close()
	out := map[string]*row{}
	for rows.Next() {
		r, err := scanRow(rows)
		if err != nil {
			return nil, err
		}
		out[r.Key] = r
	}
	return out, rows.Err()
}

// loadRow reads one row, nil when the built-in was never provisioned in the company.
func (x *BuiltInAgents) loadRow(ctx context.Context, companyID, key string) (*row, error) {
	r, err := scanRow(x.pool.QueryRow(ctx, `SELECT `+rowCols+` FROM builtin_agents WHERE company_id = $1 AND key = $2`, companyID, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("error reading built-in %s of company %s: %w", key, companyID, err)
	}
	return r, nil
}

// withLock runs fn on the row of (company, key) with every other writer of that built-in
// waiting (a transaction-scoped advisory lock), and saves the row fn leaves. fn gets a fresh
// row when there is none yet; the row is saved when fn returns nil.
func (x *BuiltInAgents) withLock(ctx context.Context, companyID, key string, fn func(r *row) error) error {
	tx, err := x.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("error starting a built-in agent write: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, "builtinagents:"+companyID+":"+key); err != nil {
		return fmt.Errorf("error locking built-in %s: %w", key, err)
	}
	r, err := scanRow(tx.QueryRow(ctx, `SELECT `+rowCols+` FROM builtin_agents WHERE company_id = $1 AND key = $2`, companyID, key))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		r = &row{CompanyID: companyID, Key: key, Skills: map[string]*skillPiece{}, Routines: map[string]*routinePiece{}}
	case err != nil:
		return fmt.Errorf("error reading built-in %s of company %s: %w", key, companyID, err)
	}
	before, _ := json.Marshal(r)
	if err := fn(r); err != nil {
		return err
	}
	if after, _ := json.Marshal(r); string(after) != string(before) {
		skills, _ := json.Marshal(r.Skills)
		routines, _ := json.Marshal(r.Routines)
		if _, err := tx.Exec(ctx, `INSERT INTO builtin_agents (company_id, key, agent_id, approval_id, instructions, instructions_hash,
			skills, routines) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
			ON CONFLICT (company_id, key) DO UPDATE SET agent_id = EXCLUDED.agent_id, approval_id = EXCLUDED.approval_id,
			instructions = EXCLUDED.instructions, instructions_hash = EXCLUDED.instructions_hash, skills = EXCLUDED.skills,
			routines = EXCLUDED.routines, updated_at = now()`,
			companyID, key, r.AgentID, r.ApprovalID, r.Instructions, r.InstructionsHash, skills, routines); err != nil {
			return fmt.Errorf("error saving built-in %s of company %s: %w", key, companyID, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("error saving built-in %s of company %s: %w", key, companyID, err)
	}
	return nil
}

// agent is what the extension reads of an agent from the agents owner.
type agent struct {
	ID                 string          `json:"id"`
	CompanyID          string          `json:"companyId"`
	Name               string          `json:"name"`
	Role               string          `json:"role"`
	Title              *string         `json:"title"`
	Capabilities       *string         `json:"capabilities"`
	Status             string          `json:"status"`
	AdapterType        string          `json:"adapterType"`
	AdapterConfig      json.RawMessage `json:"adapterConfig"`
	RuntimeConfig      json.RawMessage `json:"runtimeConfig"`
	BudgetMonthlyCents int64           `json:"budgetMonthlyCents"`
	PauseReason        *string         `json:"pauseReason"`
	DesiredSkills      []string        `json:"desiredSkills"`
	Metadata           json.RawMessage `json:"metadata"`
	UpdatedAt          string          `json:"updatedAt"`
}

// readAgent reads an agent through the agents owner; nil when it is gone.
func (x *BuiltInAgents) readAgent(ctx context.Context, companyID string, agentID *string) (*agent, error) {
	if agentID == nil || !sdk.IsUUID(*agentID) {
		return nil, nil
	}
	ag := new(agent)
	err := x.host.Call(ctx, "agents.get", sdk.SystemActor(), companyID, map[string]string{"agentId": *agentID}, ag)
	var e *sdk.Error
	if errors.As(err, &e) && e.Status == http.StatusNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, callErr(err, "error reading built-in agent %s", *agentID)
	}
	if ag.Status == agentTerminated {
		return nil, nil
	}
	return ag, nil
}

// markedAgents lists the live agents of the company that carry a built-in marker.
func (x *BuiltInAgents) markedAgents(ctx context.Context, companyID string) ([]*agent, error) {
	var list []*agent
	if err := x.host.Call(ctx, "agents.list", sdk.SystemActor(), companyID, map[string]any{"companyId": companyID}, &list); err != nil {
		return nil, callErr(err, "error listing the agents of company %s", companyID)
	}
	out := []*agent{}
	for _, ag := range list {
		if ag.Status != agentTerminated && markerKey(ag) != "" {
			out = append(out, ag)
		}
	}
	return out, nil
}

// markerKey is the registry key an agent's marker names, "" without one.
func markerKey(ag *agent) string {
	var meta struct {
		Marker *marker `json:"serviceBuiltInAgent"`
	}
	if json.Unmarshal(ag.Metadata, &meta) != nil || meta.Marker == nil {
		return ""
	}
	return meta.Marker.Key
}

// findMarked looks for a live agent of the company carrying the marker of key: an agent the
// row lost track of (a provision whose later steps failed, or rows from before a restore) is
// adopted instead of a second one being created.
func (x *BuiltInAgents) findMarked(ctx context.Context, companyID, key string) (*agent, error) {
	marked, err := x.markedAgents(ctx, companyID)
	if err != nil {
		return nil, err
	}
	for _, ag := range marked {
		if markerKey(ag) == key {
			return ag, nil
		}
	}
	return nil, nil
}

// agentOf reads the row's agent, adopting a marked agent of the company when the row names
// none that is alive.
func (x *BuiltInAgents) agentOf(ctx context.Context, r *row) (*agent, error) {
	ag, err := x.readAgent(ctx, r.CompanyID, r.AgentID)
	if err != nil || ag != nil {
		return ag, err
	}
	if ag, err = x.findMarked(ctx, r.CompanyID, r.Key); err != nil || ag == nil {
		return nil, err
	}
	r.AgentID = &ag.ID
	if ag.Status != agentPendingApproval {
		r.ApprovalID = nil
	}
	return ag, nil
}

// adapterComplete reports whether an adapter config is complete for its type (spec part 2
// "Built-in agent lifecycle state"): process and command types need a command or script;
// http a url, endpoint or webhookUrl; openclaw-style and remote-run gateway types a baseUrl
// or url; every other type a model. It returns the fields one of which is missing.
func adapterComplete(adapterType string, cfg json.RawMessage) (bool, []string) {
	var m map[string]any
	_ = json.Unmarshal(cfg, &m)
	var need []string
	switch {
	case adapterType == "process" || adapterType == "command" || strings.HasSuffix(adapterType, "_command"):
		need = []string{"command", "script"}
	case adapterType == "http":
		need = []string{"url", "endpoint", "webhookUrl"}
	case strings.HasSuffix(adapterType, "_gateway") || strings.Contains(adapterType, "openclaw"):
		need = []string{"baseUrl", "url"}
	default:
		need = []string{"model"}
	}
	for _, k := range need {
		if s, ok := m[k].(string); ok && strings.TrimSpace(s) != "" {
			return true, nil
		}
	}
	return false, need
}

// stateOf computes the lifecycle state of a built-in from its agent.
func stateOf(ag *agent) string {
	switch {
	case ag == nil:
		return StateNotProvisioned
	case ag.Status == agentPendingApproval:
		return StatePendingApproval
	}
	if ok, _ := adapterComplete(ag.AdapterType, ag.AdapterConfig); !ok {
		return StateNeedsSetup
	}
	if ag.Status == agentPaused {
		return StatePaused
	}
	return StateReady
}

// marker is the metadata.serviceBuiltInAgent value of a built-in.
type marker struct {
	Key         string   `json:"key"`
	FeatureKeys []string `json:"featureKeys"`
}

func markerOf(d *builtins.Definition) marker {
	return marker{Key: d.Key, FeatureKeys: append([]string{}, d.FeatureKeys...)}
}

// View is a built-in agent as the list and status routes show it.
type View struct {
	Key                 string   `json:"key"`
	DisplayName         string   `json:"displayName"`
	Purpose             string   `json:"purpose"`
	DefaultRole         string   `json:"defaultRole"`
	AllowedAdapterTypes []string `json:"allowedAdapterTypes"`
	DefaultAdapterType  string   `json:"defaultAdapterType"`
	FeatureKeys         []string `json:"featureKeys"`
	// State is the lifecycle state: not_provisioned, pending_approval, needs_setup, ready or paused.
	State string `json:"state"`
	// Configured is false when a feature needing the built-in gets 412 built_in_agent_not_configured.
	Configured bool `json:"configured"`
	// Paused is true when the agent is paused (scheduled work skips it).
	Paused     bool    `json:"paused"`
	AgentID    *string `json:"agentId"`
	ApprovalID *string `json:"approvalId"`
	// MissingAdapterFields lists the adapter config fields one of which needs_setup waits for.
	MissingAdapterFields []string   `json:"missingAdapterFields,omitempty"`
	Agent                *AgentView `json:"agent"`
	Resources            Resources  `json:"resources"`
}

// AgentView is the built-in's agent with its adapter and runtime config redacted.
type AgentView struct {
	ID                 string          `json:"id"`
	Name               string          `json:"name"`
	Role               string          `json:"role"`
	Title              *string         `json:"title"`
	Status             string          `json:"status"`
	PauseReason        *string         `json:"pauseReason"`
	AdapterType        string          `json:"adapterType"`
	AdapterConfig      map[string]any  `json:"adapterConfig"`
	RuntimeConfig      map[string]any  `json:"runtimeConfig"`
	BudgetMonthlyCents int64           `json:"budgetMonthlyCents"`
	DesiredSkills      []string        `json:"desiredSkills"`
	Marker             json.RawMessage `json:"serviceBuiltInAgent"`
}

// Resources are the registry-managed pieces of a provisioned built-in.
type Resources struct {
	Instructions *InstructionsView `json:"instructions"`
	Skills       []SkillView       `json:"skills"`
	Routines     []RoutineView     `json:"routines"`
}

// InstructionsView says whether the agent's instructions are the registry's.
type InstructionsView struct {
	Present bool `json:"present"`
	// Modified is true when they differ from the registry's instructions.md.
	Modified bool   `json:"modified"`
	Hash     string `json:"hash"`
}

// SkillView is a bundled skill: present in the company's bundle, attached to the agent, changed.
type SkillView struct {
	Name     string `json:"name"`
	Present  bool   `json:"present"`
	Attached bool   `json:"attached"`
	Modified bool   `json:"modified"`
}

// RoutineView is a bundled routine and the routines owner's routine behind it.
type RoutineView struct {
	Key            string  `json:"key"`
	Title          string  `json:"title"`
	CronExpression string  `json:"cronExpression"`
	Timezone       string  `json:"timezone"`
	RoutineID      *string `json:"routineId"`
	TriggerID      *string `json:"triggerId"`
}

// redactConfig keeps a config object's keys and hides every value.
func redactConfig(raw json.RawMessage) map[string]any {
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	out := make(map[string]any, len(m))
	for k := range m {
		out[k] = redacted
	}
	return out
}

// view builds the answer for one built-in.
func view(d *builtins.Definition, r *row, ag *agent) *View {
	v := &View{Key: d.Key, DisplayName: d.DisplayName, Purpose: d.Purpose, DefaultRole: d.Role,
		AllowedAdapterTypes: d.AllowedAdapterTypes, DefaultAdapterType: d.AllowedAdapterTypes[0], FeatureKeys: d.FeatureKeys,
		State: stateOf(ag), Resources: Resources{Skills: []SkillView{}, Routines: []RoutineView{}}}
	v.Configured = v.State == StateReady || v.State == StatePaused
	if ag != nil {
		v.Paused = ag.Status == agentPaused
		v.AgentID = &ag.ID
		if ok, need := adapterComplete(ag.AdapterType, ag.AdapterConfig); !ok {
			v.MissingAdapterFields = need
		}
		var meta map[string]json.RawMessage
		_ = json.Unmarshal(ag.Metadata, &meta)
		skills := ag.DesiredSkills
		if skills == nil {
			skills = []string{}
		}
		v.Agent = &AgentView{ID: ag.ID, Name: ag.Name, Role: ag.Role, Title: ag.Title, Status: ag.Status, PauseReason: ag.PauseReason,
			AdapterType: ag.AdapterType, AdapterConfig: redactConfig(ag.AdapterConfig), RuntimeConfig: redactConfig(ag.RuntimeConfig),
			BudgetMonthlyCents: ag.BudgetMonthlyCents, DesiredSkills: skills, Marker: meta["serviceBuiltInAgent"]}
	}
	if r != nil && ag != nil {
		v.ApprovalID = r.ApprovalID
		v.Resources.Instructions = &InstructionsView{Present: r.Instructions != "",
			Modified: builtins.Hash(r.Instructions) != builtins.Hash(d.Instructions), Hash: builtins.Hash(r.Instructions)}
	}
	for _, s := range d.Skills {
		sv := SkillView{Name: s.Name}
		if r != nil && ag != nil {
			if p := r.Skills[s.Name]; p != nil {
				sv.Present, sv.Modified = true, p.Markdown != s.Markdown
			}
			sv.Attached = slices.Contains(ag.DesiredSkills, s.Name)
		}
		v.Resources.Skills = append(v.Resources.Skills, sv)
	}
	for _, rt := range d.Routines {
		rv := RoutineView{Key: rt.Key, Title: rt.Title, CronExpression: rt.CronExpression, Timezone: rt.Timezone}
		if r != nil && ag != nil {
			if p := r.Routines[rt.Key]; p != nil {
				rv.RoutineID = &p.RoutineID
				if p.TriggerID != "" {
					rv.TriggerID = &p.TriggerID
				}
			}
		}
		v.Resources.Routines = append(v.Resources.Routines, rv)
	}
	return v
}

// status reads one built-in's row and agent and builds its view.
func (x *BuiltInAgents) status(ctx context.Context, companyID string, d *builtins.Definition) (*View, error) {
	views, err := x.views(ctx, companyID, []*builtins.Definition{d})
	if err != nil {
		return nil, err
	}
	return views[0], nil
}

// list builds the views of every registry definition, sorted by key.
func (x *BuiltInAgents) list(ctx context.Context, companyID string) ([]*View, error) {
	out, err := x.views(ctx, companyID, builtins.All())
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// views reads the rows and agents of definitions and builds their views. A built-in whose row
// names no live agent shows a marked agent of the company if there is one (read once).
func (x *BuiltInAgents) views(ctx context.Context, companyID string, defs []*builtins.Definition) ([]*View, error) {
	rows, err := x.loadRows(ctx, companyID)
	if err != nil {
		return nil, err
	}
	var marked []*agent
	listed := false
	out := make([]*View, 0, len(defs))
	for _, d := range defs {
		r := rows[d.Key]
		var ag *agent
		if r != nil {
			if ag, err = x.readAgent(ctx, companyID, r.AgentID); err != nil {
				return nil, err
			}
		}
		if ag == nil {
			if !listed {
				if marked, err = x.markedAgents(ctx, companyID); err != nil {
					return nil, err
				}
				listed = true
			}
			for _, m := range marked {
				if markerKey(m) == d.Key {
					ag = m
					break
				}
			}
		}
		out = append(out, view(d, r, ag))
	}
	return out, nil
}

// definition returns the registry definition of the {key} path (404 when unknown).
func definition(key string) (*builtins.Definition, error) {
	d, ok := builtins.Get(key)
	if !ok {
		return nil, sdk.NotFound(msgNotFound)
	}
	return d, nil
}
