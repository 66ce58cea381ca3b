package agents

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/uptrace/bun"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keelhq/keel/sdk"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

// Agent statuses (spec "Agent status"); the kernel stores them on the identity.
const (
	statusActive          = "active"
	statusPaused          = "paused"
	statusIdle            = "idle"
	statusRunning         = "running"
	statusError           = "error"
	statusPendingApproval = "pending_approval"
	statusTerminated      = "terminated"
)

// agentRoles are the role labels an agent may carry (REFERENCE 2.6).
var agentRoles = []string{"ceo", "cto", "cmo", "cfo", "security", "engineer", "designer", "pm", "qa", "devops", "researcher", "general"}

// configRow is an agent's configuration: everything but the kernel-owned identity.
type configRow struct {
	bun.BaseModel `bun:"table:agent_configs"`

	AgentID              string          `bun:"agent_id,pk,type:uuid"`
	CompanyID            string          `bun:"company_id,type:uuid"`
	Title                *string         `bun:"title"`
	Icon                 *string         `bun:"icon"`
	ReportsTo            *string         `bun:"reports_to,type:uuid"`
	Capabilities         *string         `bun:"capabilities"`
	AdapterType          string          `bun:"adapter_type"`
	AdapterConfig        json.RawMessage `bun:"adapter_config,type:jsonb"`
	RuntimeConfig        json.RawMessage `bun:"runtime_config,type:jsonb"`
	BudgetMonthlyCents   int64           `bun:"budget_monthly_cents"`
	SpentMonthlyCents    int64           `bun:"spent_monthly_cents"`
	Permissions          json.RawMessage `bun:"permissions,type:jsonb"`
	DesiredSkills        json.RawMessage `bun:"desired_skills,type:jsonb"`
	Metadata             json.RawMessage `bun:"metadata,type:jsonb"`
	DefaultEnvironmentID *string         `bun:"default_environment_id,type:uuid"`
	PauseReason          *string         `bun:"pause_reason"`
	PausedAt             *time.Time      `bun:"paused_at"`
	ErrorReason          *string         `bun:"error_reason"`
	LastHeartbeatAt      *time.Time      `bun:"last_heartbeat_at"`
	CreatedAt            time.Time       `bun:"created_at,nullzero,notnull,default:current_timestamp"`
	UpdatedAt            time.Time       `bun:"updated_at,nullzero,notnull,default:current_timestamp"`
}

// agentPermissions is the stored permissions block; the record shows both flags as stored
// (the reference product answers them so). canAssignTasks mirrors the kernel tasks:assign
// grant, which access explains.
type agentPermissions struct {
	CanCreateAgents bool `json:"canCreateAgents,omitempty"`
	CanAssignTasks  bool `json:"canAssignTasks,omitempty"`
}

// defaultConfig is the configuration of an identity that has no row yet (made directly in
// the kernel, or before this extension was installed).
func defaultConfig(id *hostv1.AgentIdentity) *configRow {
	return &configRow{
		AgentID: id.Id, CompanyID: id.CompanyId, AdapterType: "process",
		AdapterConfig: json.RawMessage(`{}`), RuntimeConfig: json.RawMessage(`{}`), Permissions: json.RawMessage(`{}`),
		DesiredSkills: json.RawMessage(`[]`), Metadata: json.RawMessage(`{}`),
	}
}

func (c *configRow) permissions() agentPermissions {
	var p agentPermissions
	_ = json.Unmarshal(c.Permissions, &p)
	return p
}

func (c *configRow) desiredSkills() []string {
	out := []string{}
	_ = json.Unmarshal(c.DesiredSkills, &out)
	return out
}

// loadConfig reads an agent's configuration row; nil when there is none.
func (a *Agents) loadConfig(ctx context.Context, db bun.IDB, agentID string) (*configRow, error) {
	c := new(configRow)
	err := db.NewSelect().Model(c).Where("agent_id = ?", agentID).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("error reading configuration of agent %s: %w", agentID, err)
	}
	return c, nil
}

// companyConfigs reads the configuration rows of a company keyed by agent id.
func (a *Agents) companyConfigs(ctx context.Context, companyID string) (map[string]*configRow, error) {
	var list []*configRow
	if err := a.db.NewSelect().Model(&list).Where("company_id = ?", companyID).Scan(ctx); err != nil {
		return nil, fmt.Errorf("error reading agent configurations of company %s: %w", companyID, err)
	}
	out := make(map[string]*configRow, len(list))
	for _, c := range list {
		out[c.AgentID] = c
	}
	return out, nil
}

// saveConfig upserts a configuration row, stamping updated_at.
func (a *Agents) saveConfig(ctx context.Context, db bun.IDB, c *configRow) error {
	c.UpdatedAt = time.Now().UTC()
	if c.CreatedAt.IsZero() {
		c.CreatedAt = c.UpdatedAt
	}
	_, err := db.NewInsert().Model(c).On("CONFLICT (agent_id) DO UPDATE").
		Set("title = EXCLUDED.title, icon = EXCLUDED.icon, reports_to = EXCLUDED.reports_to").
		Set("capabilities = EXCLUDED.capabilities, adapter_type = EXCLUDED.adapter_type").
		Set("adapter_config = EXCLUDED.adapter_config, runtime_config = EXCLUDED.runtime_config").
		Set("budget_monthly_cents = EXCLUDED.budget_monthly_cents, permissions = EXCLUDED.permissions").
		Set("desired_skills = EXCLUDED.desired_skills, metadata = EXCLUDED.metadata").
		Set("default_environment_id = EXCLUDED.default_environment_id, pause_reason = EXCLUDED.pause_reason").
		Set("paused_at = EXCLUDED.paused_at, error_reason = EXCLUDED.error_reason, updated_at = EXCLUDED.updated_at").
		Exec(ctx)
	if err != nil {
		return fmt.Errorf("error saving configuration of agent %s: %w", c.AgentID, err)
	}
	return nil
}

// principalErr maps a Principals host-service failure to an API error.
func principalErr(err error, doing string) error {
	switch status.Code(err) {
	case codes.NotFound:
		return notFound("Agent not found")
	case codes.InvalidArgument:
		return apiError(http.StatusBadRequest, status.Convert(err).Message())
	case codes.FailedPrecondition:
		return conflict(status.Convert(err).Message())
	case codes.PermissionDenied:
		return forbidden(status.Convert(err).Message())
	}
	return fmt.Errorf("error %s: %w", doing, err)
}

// identity reads a kernel agent identity; nil when there is none.
func (a *Agents) identity(ctx context.Context, agentID string) (*hostv1.AgentIdentity, error) {
	if !isUUID(agentID) {
		return nil, nil
	}
	id, err := a.host.Principals.GetAgent(ctx, &hostv1.GetAgentRequest{AgentId: agentID})
	if status.Code(err) == codes.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("error reading agent %s: %w", agentID, err)
	}
	return id, nil
}

// setStatus moves the kernel identity to a status (terminating also revokes its keys).
func (a *Agents) setStatus(ctx context.Context, agentID, st string) (*hostv1.AgentIdentity, error) {
	id, err := a.host.Principals.SetAgentStatus(ctx, &hostv1.SetAgentStatusRequest{AgentId: agentID, Status: st})
	if err != nil {
		return nil, principalErr(err, "setting agent status")
	}
	return id, nil
}

// agent is an identity with its configuration.
type agentRef struct {
	ID  *hostv1.AgentIdentity
	Cfg *configRow
}

// loadAgent reads an agent by id: 404 "Agent not found" when it does not exist, 403 when
// the caller cannot reach its company.
func (a *Agents) loadAgent(ctx context.Context, agentID string) (*agentRef, error) {
	id, err := a.identity(ctx, agentID)
	if err != nil {
		return nil, err
	}
	if id == nil {
		return nil, notFound("Agent not found")
	}
	if err := requireCompanyAccess(ctx, id.CompanyId); err != nil {
		return nil, err
	}
	cfg, err := a.loadConfig(ctx, a.db, id.Id)
	if err != nil {
		return nil, err
	}
	if cfg == nil {
		cfg = defaultConfig(id)
	}
	return &agentRef{ID: id, Cfg: cfg}, nil
}

// roster is every agent of a company, terminated ones included.
type roster struct {
	byID  map[string]*agentRef
	order []*agentRef
}

func (a *Agents) loadRoster(ctx context.Context, companyID string) (*roster, error) {
	res, err := a.host.Principals.ListAgents(ctx, &hostv1.ListAgentsRequest{CompanyId: companyID, IncludeTerminated: true})
	if err != nil {
		return nil, fmt.Errorf("error listing agents of company %s: %w", companyID, err)
	}
	cfgs, err := a.companyConfigs(ctx, companyID)
	if err != nil {
		return nil, err
	}
	r := &roster{byID: map[string]*agentRef{}}
	for _, id := range res.Agents {
		cfg := cfgs[id.Id]
		if cfg == nil {
			cfg = defaultConfig(id)
		}
		ag := &agentRef{ID: id, Cfg: cfg}
		r.byID[id.Id] = ag
		r.order = append(r.order, ag)
	}
	return r, nil
}

// byURLKey finds a non-terminated agent by its url key.
func (r *roster) byURLKey(key string) *agentRef {
	key = strings.ToLower(strings.TrimSpace(key))
	for _, ag := range r.order {
		if ag.ID.UrlKey == key && ag.ID.Status != statusTerminated {
			return ag
		}
	}
	return nil
}

// ancestors walks the reportsTo chain upward from ag (excluding ag), stopping at a cycle
// or a missing manager.
func (r *roster) ancestors(ag *agentRef) []*agentRef {
	var out []*agentRef
	seen := map[string]bool{ag.ID.Id: true}
	cur := ag
	for cur.Cfg.ReportsTo != nil {
		next := r.byID[*cur.Cfg.ReportsTo]
		if next == nil || seen[next.ID.Id] {
			break
		}
		seen[next.ID.Id] = true
		out = append(out, next)
		cur = next
	}
	return out
}

// invalidAncestor returns the first manager up ag's chain that is terminated or pending
// approval, or nil when the chain is valid.
func (r *roster) invalidAncestor(ag *agentRef) *agentRef {
	for _, x := range r.ancestors(ag) {
		if x.ID.Status == statusTerminated || x.ID.Status == statusPendingApproval {
			return x
		}
	}
	return nil
}

// agentRecord is the API form of an agent.
type agentRecord struct {
	ID                   string          `json:"id"`
	CompanyID            string          `json:"companyId"`
	Name                 string          `json:"name"`
	Role                 string          `json:"role"`
	Title                *string         `json:"title"`
	Icon                 *string         `json:"icon"`
	Status               string          `json:"status"`
	ReportsTo            *string         `json:"reportsTo"`
	Capabilities         *string         `json:"capabilities"`
	AdapterType          string          `json:"adapterType"`
	AdapterConfig        json.RawMessage `json:"adapterConfig"`
	RuntimeConfig        json.RawMessage `json:"runtimeConfig"`
	DefaultEnvironmentID *string         `json:"defaultEnvironmentId"`
	BudgetMonthlyCents   int64           `json:"budgetMonthlyCents"`
	SpentMonthlyCents    int64           `json:"spentMonthlyCents"`
	PauseReason          *string         `json:"pauseReason"`
	PausedAt             *time.Time      `json:"pausedAt"`
	ErrorReason          *string         `json:"errorReason"`
	Permissions          map[string]bool `json:"permissions"`
	DesiredSkills        []string        `json:"desiredSkills"`
	LastHeartbeatAt      *time.Time      `json:"lastHeartbeatAt"`
	Metadata             json.RawMessage `json:"metadata"`
	CreatedAt            string          `json:"createdAt"`
	UpdatedAt            string          `json:"updatedAt"`
	URLKey               string          `json:"urlKey"`
	// ConfigRedacted is true when adapterConfig and runtimeConfig were withheld.
	ConfigRedacted bool            `json:"configRedacted,omitempty"`
	OrgChainHealth *orgChainHealth `json:"orgChainHealth,omitempty"`
	ChainOfCommand []chainEntry    `json:"chainOfCommand,omitzero"`
	Access         *accessBlock    `json:"access,omitempty"`
}

// chainEntry is one manager in chainOfCommand.
type chainEntry struct {
	ID    string  `json:"id"`
	Name  string  `json:"name"`
	Role  string  `json:"role"`
	Title *string `json:"title"`
}

// orgChainHealth describes the agent's reporting chain.
type orgChainHealth struct {
	Status          string      `json:"status"`
	Reason          string      `json:"reason"`
	FullChain       []chainLink `json:"fullChain"`
	InvalidAncestor []chainLink `json:"invalidAncestors"`
	PausedAncestors []chainLink `json:"pausedAncestors"`
	FirstInvalid    *chainLink  `json:"firstInvalidAncestor"`
	RepairGuidance  *string     `json:"repairGuidance"`
	Escalation      any         `json:"escalationWarning"`
}

type chainLink struct {
	ID        string  `json:"id"`
	CompanyID string  `json:"companyId"`
	Name      string  `json:"name"`
	Status    string  `json:"status"`
	ReportsTo *string `json:"reportsTo"`
	Depth     int     `json:"depth"`
	Relation  string  `json:"relation"`
}

// record builds the API form of an agent; redact withholds adapter and runtime config.
func (ag *agentRef) record(redact bool) *agentRecord {
	c := ag.Cfg
	p := c.permissions()
	perms := map[string]bool{"canCreateAgents": p.CanCreateAgents, "canAssignTasks": p.CanAssignTasks}
	rec := &agentRecord{
		ID: ag.ID.Id, CompanyID: ag.ID.CompanyId, Name: ag.ID.Name, Role: ag.ID.Role, Title: c.Title, Icon: c.Icon,
		Status: ag.ID.Status, ReportsTo: c.ReportsTo, Capabilities: c.Capabilities, AdapterType: c.AdapterType,
		AdapterConfig: c.AdapterConfig, RuntimeConfig: c.RuntimeConfig, DefaultEnvironmentID: c.DefaultEnvironmentID,
		BudgetMonthlyCents: c.BudgetMonthlyCents, SpentMonthlyCents: c.SpentMonthlyCents, PauseReason: c.PauseReason,
		PausedAt: c.PausedAt, ErrorReason: c.ErrorReason, Permissions: perms, DesiredSkills: c.desiredSkills(),
		LastHeartbeatAt: c.LastHeartbeatAt, Metadata: c.Metadata, CreatedAt: ag.ID.CreatedAt, UpdatedAt: ag.ID.UpdatedAt,
		URLKey: ag.ID.UrlKey,
	}
	if !c.UpdatedAt.IsZero() {
		if t, err := time.Parse(time.RFC3339Nano, ag.ID.UpdatedAt); err != nil || c.UpdatedAt.After(t) {
			rec.UpdatedAt = c.UpdatedAt.UTC().Format(time.RFC3339Nano)
		}
	}
	if redact {
		rec.AdapterConfig, rec.RuntimeConfig, rec.ConfigRedacted = json.RawMessage(`{}`), json.RawMessage(`{}`), true
	}
	return rec
}

// withChain adds orgChainHealth (and chainOfCommand when full) from the roster.
func (rec *agentRecord) withChain(r *roster, ag *agentRef, full bool) *agentRecord {
	link := func(x *agentRef, depth int, rel string) chainLink {
		return chainLink{ID: x.ID.Id, CompanyID: x.ID.CompanyId, Name: x.ID.Name, Status: x.ID.Status,
			ReportsTo: x.Cfg.ReportsTo, Depth: depth, Relation: rel}
	}
	h := &orgChainHealth{Status: "healthy", Reason: "healthy", FullChain: []chainLink{link(ag, 0, "self")},
		InvalidAncestor: []chainLink{}, PausedAncestors: []chainLink{}}
	anc := r.ancestors(ag)
	for i, x := range anc {
		l := link(x, i+1, "ancestor")
		h.FullChain = append(h.FullChain, l)
		switch x.ID.Status {
		case statusTerminated, statusPendingApproval:
			h.InvalidAncestor = append(h.InvalidAncestor, l)
			if h.FirstInvalid == nil {
				first := l
				h.FirstInvalid = &first
			}
		case statusPaused:
			h.PausedAncestors = append(h.PausedAncestors, l)
		}
	}
	if h.FirstInvalid != nil {
		h.Status, h.Reason = "invalid", "invalid_ancestor"
		g := "Point reportsTo at an active manager"
		h.RepairGuidance = &g
	}
	rec.OrgChainHealth = h
	if full {
		rec.ChainOfCommand = []chainEntry{}
		for _, x := range anc {
			rec.ChainOfCommand = append(rec.ChainOfCommand, chainEntry{ID: x.ID.Id, Name: x.ID.Name, Role: x.ID.Role, Title: x.Cfg.Title})
		}
	}
	return rec
}

// configSnapshot is the configuration a revision records and a rollback restores.
func (c *configRow) snapshot(id *hostv1.AgentIdentity) map[string]any {
	return map[string]any{
		"name": id.Name, "role": id.Role, "title": c.Title, "icon": c.Icon, "reportsTo": c.ReportsTo,
		"capabilities": c.Capabilities, "adapterType": c.AdapterType, "adapterConfig": c.AdapterConfig,
		"runtimeConfig": c.RuntimeConfig, "budgetMonthlyCents": c.BudgetMonthlyCents, "metadata": c.Metadata,
		"defaultEnvironmentId": c.DefaultEnvironmentID, "desiredSkills": c.desiredSkills(),
	}
}

// changedKeys lists the snapshot keys whose JSON differs.
func changedKeys(before, after map[string]any) []string {
	out := []string{}
	for _, k := range snapshotKeys {
		b, _ := json.Marshal(before[k])
		a, _ := json.Marshal(after[k])
		if !jsonEqual(b, a) {
			out = append(out, k)
		}
	}
	return out
}

var snapshotKeys = []string{"name", "role", "title", "icon", "reportsTo", "capabilities", "adapterType", "adapterConfig",
	"runtimeConfig", "budgetMonthlyCents", "metadata", "defaultEnvironmentId", "desiredSkills"}

// jsonEqual compares two JSON documents by value.
func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return string(a) == string(b)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

// actorIDs returns the agent and user ids of the request's actor for attribution.
func actorIDs(ctx context.Context) (agentID, userID *string) {
	act := sdk.ActorFrom(ctx)
	if act == nil {
		return nil, nil
	}
	if act.AgentId != "" {
		v := act.AgentId
		agentID = &v
	}
	if act.UserId != "" {
		v := act.UserId
		userID = &v
	}
	return agentID, userID
}

// urlKey derives an agent's url key from its name, as the kernel does.
func urlKey(name string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			dash = false
			continue
		}
		if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	key := strings.TrimRight(b.String(), "-")
	if key == "" {
		return "agent"
	}
	return key
}
