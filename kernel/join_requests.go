package kernel

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Join request statuses (spec part 2); "pending" is accepted as an alias of
// pending_approval in filters.
const (
	JoinPendingApproval = "pending_approval"
	JoinApproved        = "approved"
	JoinRejected        = "rejected"
)

const joinRequestColumns = `j.id::text, j.company_id::text, j.invite_id::text, j.request_type, j.status, j.requesting_user_id,
	u.id, u.name, u.email, j.agent_name, j.adapter_type, j.capabilities, j.agent_defaults, j.created_agent_id::text, j.claimed_at,
	j.decided_by_user_id, j.decided_at, j.decision_note, j.created_at, j.updated_at`

const joinRequestFrom = ` FROM kernel.join_requests j LEFT JOIN kernel.users u ON u.id = j.requesting_user_id`

func scanJoinRequest(row pgx.Row) (*JoinRequest, error) {
	var j JoinRequest
	var uID, uName, uEmail *string
	if err := row.Scan(&j.ID, &j.CompanyID, &j.InviteID, &j.RequestType, &j.Status, &j.RequestingUserID, &uID, &uName, &uEmail,
		&j.AgentName, &j.AdapterType, &j.Capabilities, &j.AgentDefaultsPayload, &j.CreatedAgentID, &j.ApiKeyClaimedAt,
		&j.DecidedByUserID, &j.DecidedAt, &j.DecisionNote, &j.CreatedAt, &j.UpdatedAt); err != nil {
		return nil, err
	}
	if uID != nil {
		j.RequestingUser = &MemberUser{ID: *uID, Name: *uName, Email: *uEmail}
	}
	j.CreatedAt, j.UpdatedAt = j.CreatedAt.UTC(), j.UpdatedAt.UTC()
	return &j, nil
}

// joinRequestGet reads one join request of a company (404 when missing or elsewhere).
func (k *Kernel) joinRequestGet(ctx context.Context, companyID, id string) (*JoinRequest, error) {
	if !isUUID(id) {
		return nil, NotFound("Join request not found")
	}
	j, err := scanJoinRequest(k.Pool.QueryRow(ctx, `SELECT `+joinRequestColumns+joinRequestFrom+`
		WHERE j.id = $1 AND j.company_id = $2`, id, companyID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, NotFound("Join request not found")
	}
	if err != nil {
		return nil, fmt.Errorf("error reading join request %s: %w", id, err)
	}
	return j, nil
}

type joinRequestListRequest struct {
	CompanyID string `path:"companyId"`
	// Status is pending_approval (alias pending), approved or rejected.
	Status string `query:"status"`
	// RequestType is human or agent.
	RequestType string `query:"requestType"`
}

type joinRequestListEndpoint struct{ k *Kernel }

func (e *joinRequestListEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "GET /api/companies/{companyId}/join-requests", Access: AccessBoard, CompanyFrom: CompanyFromPath,
		Permission: "joins:approve",
		Summary:    "List a company's join requests, newest first (status pending_approval, alias pending, approved, rejected; requestType human or agent)"}
}

func (e *joinRequestListEndpoint) Execute(ctx context.Context, req *joinRequestListRequest) (*[]*JoinRequest, error) {
	var d detailList
	status := req.Status
	if status == "pending" {
		status = JoinPendingApproval
	}
	if status != "" && status != JoinPendingApproval && status != JoinApproved && status != JoinRejected {
		d.add("status", "must be pending_approval (or pending), approved or rejected")
	}
	if req.RequestType != "" && req.RequestType != JoinTypeHuman && req.RequestType != JoinTypeAgent {
		d.add("requestType", "must be human or agent")
	}
	if err := d.err(); err != nil {
		return nil, err
	}
	rows, err := e.k.Pool.Query(ctx, `SELECT `+joinRequestColumns+joinRequestFrom+`
		WHERE j.company_id = $1 AND ($2 = '' OR j.status = $2) AND ($3 = '' OR j.request_type = $3)
		ORDER BY j.created_at DESC, j.id DESC LIMIT 500`, req.CompanyID, status, req.RequestType)
	if err != nil {
		return nil, fmt.Errorf("error listing join requests: %w", err)
	}
	defer rows.Close()
	out := []*JoinRequest{}
	for rows.Next() {
		j, err := scanJoinRequest(rows)
		if err != nil {
			return nil, fmt.Errorf("error listing join requests: %w", err)
		}
		out = append(out, j)
	}
	return &out, rows.Err()
}

type joinRequestDecideRequest struct {
	CompanyID string `path:"companyId" json:"-"`
	RequestID string `path:"requestId" json:"-"`
	// Note is kept with the decision (up to 2000 characters).
	Note *string `json:"note,omitempty"`
	// MembershipRole overrides the role a person gets on approval.
	MembershipRole string `json:"membershipRole,omitempty"`
	// AgentName and Role override the name and role of an approved agent.
	AgentName string `json:"agentName,omitempty"`
	Role      string `json:"role,omitempty"`
}

// claimPendingDecision moves a pending request to status for the deciding user, so that
// two deciders cannot both act; the loser hears that it is no longer pending.
func (k *Kernel) claimPendingDecision(ctx context.Context, companyID, id, status, userID string, note *string) (*JoinRequest, error) {
	tag, err := k.Pool.Exec(ctx, `UPDATE kernel.join_requests SET status = $3, decided_by_user_id = $4, decided_at = now(),
			decision_note = $5, updated_at = now()
		WHERE id = $1 AND company_id = $2 AND status = 'pending_approval'`, id, companyID, status, nullable(userID), note)
	if err != nil {
		return nil, fmt.Errorf("error deciding join request %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		if _, err := k.joinRequestGet(ctx, companyID, id); err != nil {
			return nil, err
		}
		return nil, Conflict("Join request is not pending approval").WithCode("join_request_not_pending")
	}
	return k.joinRequestGet(ctx, companyID, id)
}

// reopenDecision puts a request back to pending after its approval failed half-way.
func (k *Kernel) reopenDecision(ctx context.Context, id string) {
	if _, err := k.Pool.Exec(ctx, `UPDATE kernel.join_requests SET status = 'pending_approval', decided_by_user_id = NULL,
		decided_at = NULL, decision_note = NULL, updated_at = now() WHERE id = $1 AND created_agent_id IS NULL`, id); err != nil {
		k.log.Warn("error reopening join request after a failed approval", "joinRequest", id, "error", err)
	}
}

func validateNote(note *string) error {
	if note != nil && len([]rune(*note)) > 2000 {
		return ValidationError(ValidationDetail{Path: "note", Message: "must be at most 2000 characters"})
	}
	return nil
}

type joinRequestApproveEndpoint struct{ k *Kernel }

func (e *joinRequestApproveEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "POST /api/companies/{companyId}/join-requests/{requestId}/approve", Access: AccessBoard,
		CompanyFrom: CompanyFromPath, Permission: "joins:approve",
		Summary: "Approve a join request: a person becomes a member; an agent is created through the agents owner and may then claim its API key once",
		Errors:  []int{http.StatusConflict}}
}

func (e *joinRequestApproveEndpoint) Execute(ctx context.Context, req *joinRequestDecideRequest) (*JoinRequest, error) {
	k := e.k
	a := ActorFrom(ctx)
	if err := validateNote(req.Note); err != nil {
		return nil, err
	}
	role := "operator"
	if req.MembershipRole != "" {
		r, ok := normalizeMembershipRole(PrincipalUser, req.MembershipRole)
		if !ok {
			return nil, ValidationError(ValidationDetail{Path: "membershipRole", Message: "must be one of " + strings.Join(MembershipRoles, ", ")})
		}
		role = r
	}
	if role == "owner" {
		if err := requireCompanyManager(a, req.CompanyID, true); err != nil {
			return nil, Forbidden("Only company owners can add owners")
		}
	}
	jr, err := k.claimPendingDecision(ctx, req.CompanyID, req.RequestID, JoinApproved, a.UserID, req.Note)
	if err != nil {
		return nil, err
	}
	if jr.RequestType == JoinTypeHuman {
		if jr.RequestingUserID == nil {
			k.reopenDecision(ctx, jr.ID)
			return nil, Conflict("Join request names no user")
		}
		if err := k.MembershipEnsure(ctx, req.CompanyID, PrincipalUser, *jr.RequestingUserID, role); err != nil {
			k.reopenDecision(ctx, jr.ID)
			return nil, err
		}
	} else {
		agentID, err := k.createJoinedAgent(ctx, a, jr, req)
		if err != nil {
			k.reopenDecision(ctx, jr.ID)
			return nil, err
		}
		if _, err := k.Pool.Exec(ctx, `UPDATE kernel.join_requests SET created_agent_id = $2, updated_at = now() WHERE id = $1`,
			jr.ID, agentID); err != nil {
			return nil, fmt.Errorf("error recording the agent of join request %s: %w", jr.ID, err)
		}
		if err := k.MembershipEnsure(ctx, req.CompanyID, PrincipalAgent, agentID, "member"); err != nil {
			return nil, err
		}
	}
	if err := k.appendActorActivity(ctx, req.CompanyID, "join_request.approved", "join_request", jr.ID,
		map[string]any{"requestType": jr.RequestType}); err != nil {
		return nil, err
	}
	return k.joinRequestGet(ctx, req.CompanyID, jr.ID)
}

// createJoinedAgent creates the agent of an approved agent join request through the agents
// owner (agents.create), which validates the adapter type and configuration. A bare kernel
// with no host creates the identity alone.
func (k *Kernel) createJoinedAgent(ctx context.Context, a *Actor, jr *JoinRequest, req *joinRequestDecideRequest) (string, error) {
	var defaults map[string]json.RawMessage
	_ = json.Unmarshal(jr.AgentDefaultsPayload, &defaults)
	name := strings.TrimSpace(req.AgentName)
	if name == "" && jr.AgentName != nil {
		name = *jr.AgentName
	}
	// The role comes from the approver, else from the invite's defaults: never from what the
	// joining agent asked for, since a role carries implicit grants (a ceo's).
	role := strings.TrimSpace(req.Role)
	if role == "" && jr.InviteID != nil {
		var inviteRole *string
		err := k.Pool.QueryRow(ctx, `SELECT defaults_payload->>'role' FROM kernel.invites WHERE id = $1`, *jr.InviteID).Scan(&inviteRole)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return "", fmt.Errorf("error reading invite defaults: %w", err)
		}
		if inviteRole != nil {
			role = *inviteRole
		}
	}
	in := map[string]any{"companyId": jr.CompanyID, "name": name, "capabilities": jr.Capabilities,
		"metadata": map[string]any{"joinRequestId": jr.ID, "inviteId": jr.InviteID}}
	if role != "" {
		in["role"] = role
	}
	if jr.AdapterType != nil {
		in["adapterType"] = *jr.AdapterType
	}
	for _, key := range []string{"adapterConfig", "runtimeConfig", "title", "icon"} {
		if v, ok := defaults[key]; ok {
			in[key] = v
		}
	}
	var out struct {
		ID string `json:"id"`
	}
	err := k.callMethod(ctx, "agents.create", jr.CompanyID, a, in, &out)
	switch {
	case errors.Is(err, errNoMethodCaller):
		ag, err := k.AgentCreate(ctx, &AgentCreateParams{CompanyID: jr.CompanyID, Name: name, Role: role})
		if err != nil {
			return "", err
		}
		return ag.ID, nil
	case isMethodNotProvided(err):
		return "", (&APIError{Status: http.StatusServiceUnavailable, Message: "Agents cannot be created now: the agents extension is not running",
			Internal: err}).WithCode("agents_unavailable")
	case err != nil:
		return "", err
	}
	if !isUUID(out.ID) {
		return "", fmt.Errorf("agents.create answered without an agent id")
	}
	return out.ID, nil
}

type joinRequestRejectEndpoint struct{ k *Kernel }

func (e *joinRequestRejectEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "POST /api/companies/{companyId}/join-requests/{requestId}/reject", Access: AccessBoard,
		CompanyFrom: CompanyFromPath, Permission: "joins:approve", Summary: "Reject a pending join request",
		Errors: []int{http.StatusConflict}}
}

func (e *joinRequestRejectEndpoint) Execute(ctx context.Context, req *joinRequestDecideRequest) (*JoinRequest, error) {
	if err := validateNote(req.Note); err != nil {
		return nil, err
	}
	jr, err := e.k.claimPendingDecision(ctx, req.CompanyID, req.RequestID, JoinRejected, ActorFrom(ctx).UserID, req.Note)
	if err != nil {
		return nil, err
	}
	if err := e.k.appendActorActivity(ctx, req.CompanyID, "join_request.rejected", "join_request", jr.ID,
		map[string]any{"requestType": jr.RequestType}); err != nil {
		return nil, err
	}
	return jr, nil
}

type claimAPIKeyRequest struct {
	RequestID string `path:"requestId" json:"-"`
	// ClaimSecret is the pcp_claim_ secret the invite accept returned.
	ClaimSecret string `json:"claimSecret" jsonschema:"required"`
}

// ClaimedAPIKey is the agent API key of an approved join request; the token is shown only here.
type ClaimedAPIKey struct {
	KeyID     string    `json:"keyId"`
	Token     string    `json:"token"`
	AgentID   string    `json:"agentId"`
	CompanyID string    `json:"companyId"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"createdAt"`
}

type claimAPIKeyEndpoint struct{ k *Kernel }

func (e *claimAPIKeyEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "POST /api/join-requests/{requestId}/claim-api-key", Status: http.StatusCreated, Access: AccessPublic,
		Summary: "Claim the API key of an approved agent join request with its claim secret; succeeds once",
		Errors:  []int{http.StatusForbidden, http.StatusNotFound, http.StatusConflict}}
}

// errBadClaimSecret answers a wrong or missing claim secret.
var errBadClaimSecret = Forbidden("Invalid claim secret").WithCode("invalid_claim_secret")

func (e *claimAPIKeyEndpoint) Execute(ctx context.Context, req *claimAPIKeyRequest) (*ClaimedAPIKey, error) {
	k := e.k
	if strings.TrimSpace(req.ClaimSecret) == "" {
		return nil, ValidationError(ValidationDetail{Path: "claimSecret", Message: "is required"})
	}
	notFound := NotFound("Join request not found")
	if !isUUID(req.RequestID) {
		return nil, notFound
	}
	tx, err := k.Pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("error claiming API key: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	var companyID, status, reqType string
	var hash, agentID, decidedBy *string
	var expires, claimed *time.Time
	err = tx.QueryRow(ctx, `SELECT company_id::text, status, request_type, claim_secret_hash, claim_secret_expires_at, claimed_at,
			created_agent_id::text, decided_by_user_id
		FROM kernel.join_requests WHERE id = $1 FOR UPDATE`, req.RequestID).
		Scan(&companyID, &status, &reqType, &hash, &expires, &claimed, &agentID, &decidedBy)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && reqType != JoinTypeAgent) {
		return nil, notFound
	}
	if err != nil {
		return nil, fmt.Errorf("error reading join request: %w", err)
	}
	// The secret is compared as hashes in constant time, so timing tells nothing of it.
	if hash == nil || subtle.ConstantTimeCompare([]byte(HashToken(req.ClaimSecret)), []byte(*hash)) != 1 {
		return nil, errBadClaimSecret
	}
	switch {
	case claimed != nil:
		return nil, Conflict("API key has already been claimed").WithCode("api_key_already_claimed")
	case expires != nil && !expires.After(time.Now()):
		return nil, Forbidden("Claim secret has expired").WithCode("claim_secret_expired")
	case status == JoinRejected:
		return nil, Conflict("Join request was rejected").WithCode("join_request_rejected")
	case status != JoinApproved || agentID == nil:
		return nil, Conflict("Join request is pending approval").WithCode("join_request_pending")
	}
	if _, err := tx.Exec(ctx, `UPDATE kernel.join_requests SET claimed_at = now(), updated_at = now() WHERE id = $1`, req.RequestID); err != nil {
		return nil, fmt.Errorf("error claiming API key: %w", err)
	}
	token := newAgentKeyToken()
	out := &ClaimedAPIKey{Token: token, AgentID: *agentID, CompanyID: companyID}
	err = tx.QueryRow(ctx, `INSERT INTO kernel.agent_api_keys (id, agent_id, company_id, name, key_hash, responsible_user_id)
		SELECT $1::uuid, a.id, a.company_id, 'join', $3::text, $4::text FROM kernel.agents a
		WHERE a.id = $2::uuid AND a.status NOT IN ('pending_approval', 'terminated')
		RETURNING id::text, name, created_at`, newID(), *agentID, HashToken(token), decidedBy).Scan(&out.KeyID, &out.Name, &out.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, Conflict("The agent of this join request can no longer receive keys").WithCode("agent_status_conflict")
	}
	if err != nil {
		return nil, fmt.Errorf("error creating agent API key: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("error claiming API key: %w", err)
	}
	out.CreatedAt = out.CreatedAt.UTC()
	k.recordActivity(ctx, &ActivityInsertParams{CompanyID: companyID, ActorType: "agent", ActorID: *agentID, AgentID: *agentID,
		Action: "join_request.api_key_claimed", EntityType: "join_request", EntityID: req.RequestID,
		Details: map[string]any{"keyId": out.KeyID, "agentId": *agentID}})
	return out, nil
}

func (k *Kernel) joinRequestRoutes() []*Route {
	return []*Route{
		Mount[joinRequestListRequest, []*JoinRequest](&joinRequestListEndpoint{k}),
		Mount[joinRequestDecideRequest, JoinRequest](&joinRequestApproveEndpoint{k}),
		Mount[joinRequestDecideRequest, JoinRequest](&joinRequestRejectEndpoint{k}),
		Mount[claimAPIKeyRequest, ClaimedAPIKey](&claimAPIKeyEndpoint{k}),
	}
}
