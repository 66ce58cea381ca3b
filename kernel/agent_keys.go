package kernel

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// Agent API key scope kinds (REFERENCE.md 2.6).
const (
	AgentKeyScopeStandard   = "standard"
	AgentKeyScopeTaskBridge = "task_bridge"
	AgentKeyScopeSkillTest  = "skill_test"
)

var agentKeyScopeKinds = []string{AgentKeyScopeStandard, AgentKeyScopeTaskBridge, AgentKeyScopeSkillTest}

// AgentKeyScope says what an agent API key may be used for.
type AgentKeyScope struct {
	// Kind is standard, task_bridge or skill_test.
	Kind string `json:"kind"`
}

// AgentAPIKey is an agent API key as the API lists it, without its token.
type AgentAPIKey struct {
	ID         string        `json:"id"`
	Name       string        `json:"name"`
	Scope      AgentKeyScope `json:"scope"`
	LastUsedAt *time.Time    `json:"lastUsedAt"`
	RevokedAt  *time.Time    `json:"revokedAt"`
	CreatedAt  time.Time     `json:"createdAt"`
}

// AgentAPIKeyCreated is a freshly minted agent API key; Token is shown only here.
type AgentAPIKeyCreated struct {
	ID                string        `json:"id"`
	Name              string        `json:"name"`
	Scope             AgentKeyScope `json:"scope"`
	ResponsibleUserID *string       `json:"responsibleUserId"`
	Token             string        `json:"token"`
	CreatedAt         time.Time     `json:"createdAt"`
}

// newAgentKeyToken returns a new agent API key token: "pcp_" + 48 hex characters.
func newAgentKeyToken() string { return AgentKeyPrefix + randomHex(24) }

const agentKeyColumns = `id::text, name, scope, last_used_at, revoked_at, created_at`

func scanAgentKey(row pgx.Row) (*AgentAPIKey, error) {
	var key AgentAPIKey
	if err := row.Scan(&key.ID, &key.Name, &key.Scope, &key.LastUsedAt, &key.RevokedAt, &key.CreatedAt); err != nil {
		return nil, err
	}
	return &key, nil
}

// agentForKeys loads the agent of a key route and checks the caller's access to its company
// (and the permission, when set): 404 for a missing agent, 403 for a foreign company.
func (k *Kernel) agentForKeys(ctx context.Context, agentID, permission string) (*AgentIdentity, error) {
	agent, err := k.AgentGetByID(ctx, agentID)
	if err != nil {
		return nil, err
	}
	if agent == nil {
		return nil, NotFound("Agent not found")
	}
	if err := k.AuthorizeCompany(ctx, ActorFrom(ctx), agent.CompanyID, permission); err != nil {
		return nil, err
	}
	return agent, nil
}

type agentKeyCreateRequest struct {
	AgentID string `path:"agentId" json:"-"`
	// Name labels the key; default "default".
	Name string `json:"name"`
	// Scope defaults to {kind: standard}.
	Scope *AgentKeyScope `json:"scope"`
}

type agentKeyCreateEndpoint struct{ k *Kernel }

func (e *agentKeyCreateEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "POST /api/agents/{agentId}/keys", Status: http.StatusCreated, Access: AccessBoard,
		Summary: "Create an agent API key; the token is shown only in this response"}
}

func (e *agentKeyCreateEndpoint) Execute(ctx context.Context, req *agentKeyCreateRequest) (*AgentAPIKeyCreated, error) {
	agent, err := e.k.agentForKeys(ctx, req.AgentID, "agents:create")
	if err != nil {
		return nil, err
	}
	name := strings.TrimSpace(req.Name)
	if name == "" {
		name = "default"
	}
	scope := AgentKeyScope{Kind: AgentKeyScopeStandard}
	if req.Scope != nil && req.Scope.Kind != "" {
		scope.Kind = req.Scope.Kind
	}
	var details []ValidationDetail
	if utf8.RuneCountInString(name) > maxKeyNameLen {
		details = append(details, ValidationDetail{Path: "name", Message: fmt.Sprintf("must be at most %d characters", maxKeyNameLen)})
	}
	if !slices.Contains(agentKeyScopeKinds, scope.Kind) {
		details = append(details, ValidationDetail{Path: "scope.kind", Message: "must be one of standard, task_bridge, skill_test"})
	}
	if len(details) > 0 {
		return nil, ValidationError(details...)
	}
	if agent.Status == AgentStatusPendingApproval || agent.Status == AgentStatusTerminated {
		return nil, Conflict(fmt.Sprintf("Cannot create keys for an agent in status %s", agent.Status)).WithCode("agent_status_conflict")
	}
	a := ActorFrom(ctx)
	responsible := nullable(a.UserID)
	token := newAgentKeyToken()
	out := &AgentAPIKeyCreated{Scope: scope, ResponsibleUserID: responsible, Token: token}
	// The insert re-checks the status so that a key is never minted for an agent terminated
	// (and its keys revoked) between the read above and this statement.
	err = e.k.Pool.QueryRow(ctx, `INSERT INTO kernel.agent_api_keys (id, agent_id, company_id, name, key_hash, scope, responsible_user_id)
		SELECT $1::uuid, a.id, a.company_id, $3::text, $4::text, $5::jsonb, $6::text FROM kernel.agents a
		WHERE a.id = $2::uuid AND a.status NOT IN ('pending_approval', 'terminated')
		RETURNING id::text, name, created_at`,
		newID(), agent.ID, name, HashToken(token), scope, responsible).Scan(&out.ID, &out.Name, &out.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, Conflict("Cannot create keys for an agent in status pending_approval or terminated").WithCode("agent_status_conflict")
	}
	if err != nil {
		return nil, fmt.Errorf("error creating agent API key: %w", err)
	}
	e.k.recordActivity(ctx, actorActivity(ctx, &ActivityInsertParams{
		CompanyID: agent.CompanyID, Action: "agent_key.created", EntityType: "agent", EntityID: agent.ID,
		ResponsibleUserID: a.UserID,
		Details:           map[string]any{"keyId": out.ID, "name": out.Name, "scope": scope},
	}))
	return out, nil
}

type agentKeyListRequest struct {
	AgentID string `path:"agentId"`
}

type agentKeyListEndpoint struct{ k *Kernel }

func (e *agentKeyListEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "GET /api/agents/{agentId}/keys", Access: AccessBoard, Summary: "List an agent's API keys without their tokens"}
}

func (e *agentKeyListEndpoint) Execute(ctx context.Context, req *agentKeyListRequest) (*[]*AgentAPIKey, error) {
	agent, err := e.k.agentForKeys(ctx, req.AgentID, "")
	if err != nil {
		return nil, err
	}
	rows, err := e.k.Pool.Query(ctx, `SELECT `+agentKeyColumns+` FROM kernel.agent_api_keys WHERE agent_id = $1 ORDER BY created_at, id`, agent.ID)
	if err != nil {
		return nil, fmt.Errorf("error listing keys of agent %s: %w", agent.ID, err)
	}
	defer rows.Close()
	out := []*AgentAPIKey{}
	for rows.Next() {
		key, err := scanAgentKey(rows)
		if err != nil {
			return nil, fmt.Errorf("error listing keys of agent %s: %w", agent.ID, err)
		}
		out = append(out, key)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error listing keys of agent %s: %w", agent.ID, err)
	}
	return &out, nil
}

type agentKeyRevokeRequest struct {
	AgentID string `path:"agentId"`
	KeyID   string `path:"keyId"`
}

type agentKeyRevokeEndpoint struct{ k *Kernel }

func (e *agentKeyRevokeEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "DELETE /api/agents/{agentId}/keys/{keyId}", Access: AccessBoard, Summary: "Revoke an agent API key"}
}

func (e *agentKeyRevokeEndpoint) Execute(ctx context.Context, req *agentKeyRevokeRequest) (*AgentAPIKey, error) {
	agent, err := e.k.agentForKeys(ctx, req.AgentID, "agents:create")
	if err != nil {
		return nil, err
	}
	if !isUUID(req.KeyID) {
		return nil, NotFound("Agent API key not found")
	}
	key, err := scanAgentKey(e.k.Pool.QueryRow(ctx, `UPDATE kernel.agent_api_keys SET revoked_at = now()
		WHERE id = $1 AND agent_id = $2 AND revoked_at IS NULL RETURNING `+agentKeyColumns, req.KeyID, agent.ID))
	if errors.Is(err, pgx.ErrNoRows) {
		key, err = scanAgentKey(e.k.Pool.QueryRow(ctx, `SELECT `+agentKeyColumns+` FROM kernel.agent_api_keys WHERE id = $1 AND agent_id = $2`, req.KeyID, agent.ID))
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, NotFound("Agent API key not found")
		}
		if err != nil {
			return nil, fmt.Errorf("error reading agent API key %s: %w", req.KeyID, err)
		}
		return key, nil // already revoked
	}
	if err != nil {
		return nil, fmt.Errorf("error revoking agent API key %s: %w", req.KeyID, err)
	}
	e.k.recordActivity(ctx, actorActivity(ctx, &ActivityInsertParams{
		CompanyID: agent.CompanyID, Action: "agent_key.revoked", EntityType: "agent", EntityID: agent.ID,
		Details: map[string]any{"keyId": key.ID, "name": key.Name},
	}))
	return key, nil
}

func (k *Kernel) agentKeyRoutes() []*Route {
	return []*Route{
		Mount[agentKeyCreateRequest, AgentAPIKeyCreated](&agentKeyCreateEndpoint{k}),
		Mount[agentKeyListRequest, []*AgentAPIKey](&agentKeyListEndpoint{k}),
		Mount[agentKeyRevokeRequest, AgentAPIKey](&agentKeyRevokeEndpoint{k}),
	}
}
