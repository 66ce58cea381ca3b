package kernel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5"
)

// Invite token and claim secret prefixes (REFERENCE.md 2.11).
const (
	InviteTokenPrefix = "pcp_invite_"
	ClaimSecretPrefix = "pcp_claim_"
)

// Invite join types: who may join through an invite.
const (
	JoinTypeHuman = "human"
	JoinTypeAgent = "agent"
	JoinTypeBoth  = "both"
)

// Invite limits.
const (
	// DefaultInviteTTL is how long an invite stays usable when the request names no expiry.
	DefaultInviteTTL = 72 * time.Hour
	// MaxInviteTTL is the longest expiry an invite may have.
	MaxInviteTTL       = 30 * 24 * time.Hour
	maxAgentMessageLen = 4000
	maxAgentNameLen    = 100
	maxCapabilitiesLen = 4000
	// claimSecretTTL is how long an agent may take to claim its API key after joining.
	claimSecretTTL = 30 * 24 * time.Hour
)

// Invite is a company invite as its company's board sees it; the token is shown only when
// the invite is created.
type Invite struct {
	ID               string          `json:"id"`
	CompanyID        string          `json:"companyId"`
	InviteType       string          `json:"inviteType"`
	AllowedJoinTypes string          `json:"allowedJoinTypes" jsonschema:"enum=human,enum=agent,enum=both"`
	MembershipRole   string          `json:"membershipRole"`
	Email            *string         `json:"email"`
	DefaultsPayload  json.RawMessage `json:"defaultsPayload" jsonschema:"type=object"`
	AgentMessage     *string         `json:"agentMessage"`
	InvitedByUserID  *string         `json:"invitedByUserId"`
	// Status is computed: active, accepted, revoked or expired.
	Status           string     `json:"status" jsonschema:"enum=active,enum=accepted,enum=revoked,enum=expired"`
	ExpiresAt        time.Time  `json:"expiresAt"`
	AcceptedAt       *time.Time `json:"acceptedAt"`
	AcceptedByUserID *string    `json:"acceptedByUserId"`
	RevokedAt        *time.Time `json:"revokedAt"`
	CreatedAt        time.Time  `json:"createdAt"`
	UpdatedAt        time.Time  `json:"updatedAt"`
}

// InviteCreated is a new invite with its token and the paths built from it; the token is
// stored only as a hash and never shown again.
type InviteCreated struct {
	Invite
	Token string `json:"token"`
	// InvitePath is the public read of the invite; InviteURL the same under the public base URL.
	InvitePath         string `json:"invitePath"`
	InviteURL          string `json:"inviteUrl"`
	AcceptPath         string `json:"acceptPath"`
	OnboardingTextPath string `json:"onboardingTextPath"`
	OnboardingTextURL  string `json:"onboardingTextUrl"`
}

const inviteColumns = `i.id::text, i.company_id::text, i.invite_type, i.allowed_join_types, i.membership_role,
	i.defaults_payload->>'email', i.defaults_payload, i.agent_message, i.invited_by_user_id, i.expires_at, i.accepted_at,
	i.accepted_by_user_id, i.revoked_at, i.created_at, i.updated_at`

func scanInvite(row pgx.Row) (*Invite, error) {
	var inv Invite
	if err := row.Scan(&inv.ID, &inv.CompanyID, &inv.InviteType, &inv.AllowedJoinTypes, &inv.MembershipRole, &inv.Email,
		&inv.DefaultsPayload, &inv.AgentMessage, &inv.InvitedByUserID, &inv.ExpiresAt, &inv.AcceptedAt, &inv.AcceptedByUserID,
		&inv.RevokedAt, &inv.CreatedAt, &inv.UpdatedAt); err != nil {
		return nil, err
	}
	inv.Status = inviteStatus(&inv, time.Now())
	for _, t := range []*time.Time{&inv.ExpiresAt, &inv.CreatedAt, &inv.UpdatedAt} {
		*t = t.UTC()
	}
	return &inv, nil
}

func inviteStatus(inv *Invite, now time.Time) string {
	switch {
	case inv.RevokedAt != nil:
		return "revoked"
	case inv.AcceptedAt != nil:
		return "accepted"
	case !inv.ExpiresAt.After(now):
		return "expired"
	}
	return "active"
}

// inviteStatusFilter is the SQL condition of each computed invite status.
var inviteStatusFilter = map[string]string{
	"active":   `i.revoked_at IS NULL AND i.accepted_at IS NULL AND i.expires_at > now()`,
	"accepted": `i.revoked_at IS NULL AND i.accepted_at IS NOT NULL`,
	"revoked":  `i.revoked_at IS NOT NULL`,
	"expired":  `i.revoked_at IS NULL AND i.accepted_at IS NULL AND i.expires_at <= now()`,
}

// errInviteNotFound is the one answer for an unknown, expired, revoked or used invite token,
// so a token's answers tell nothing about invites it does not open.
var errInviteNotFound = NotFound("Invite not found")

// inviteByToken returns the open invite a token opens (not revoked, accepted or expired,
// in a company that is not archived), or errInviteNotFound.
func (k *Kernel) inviteByToken(ctx context.Context, token string) (*Invite, error) {
	if !strings.HasPrefix(token, InviteTokenPrefix) || len(token) > 200 {
		return nil, errInviteNotFound
	}
	inv, err := scanInvite(k.Pool.QueryRow(ctx, `SELECT `+inviteColumns+` FROM kernel.invites i
		JOIN kernel.companies c ON c.id = i.company_id
		WHERE i.token_hash = $1 AND i.revoked_at IS NULL AND i.accepted_at IS NULL AND i.expires_at > now()
			AND c.status <> 'archived'`, HashToken(token)))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errInviteNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("error reading invite: %w", err)
	}
	return inv, nil
}

// publicBaseURL is the configured public base URL, or else requestBase, the base URL the
// request came in on.
func (k *Kernel) publicBaseURL(requestBase string) string {
	if u := strings.TrimRight(k.cfg.PublicBaseURL, "/"); u != "" {
		return u
	}
	return strings.TrimRight(requestBase, "/")
}

// bindWithBase decodes a request the default way (JSON body when hasBody, then path and
// query parameters) and returns the base URL the request came in on.
func bindWithBase(c *fiber.Ctx, rc *RequestContext, req any, hasBody bool) (string, error) {
	if hasBody {
		if err := DecodeJSON(c, req); err != nil {
			return "", err
		}
	}
	if err := bindParams(c, rc, req); err != nil {
		return "", err
	}
	return strings.Clone(c.BaseURL()), nil
}

var adapterTypePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,99}$`)

// jsonObjectOrEmpty returns raw when it is a JSON object, {} when absent or null, and
// false when it is anything else.
func jsonObjectOrEmpty(raw json.RawMessage) (json.RawMessage, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return json.RawMessage(`{}`), true
	}
	var m map[string]any
	if raw[0] != '{' || json.Unmarshal(raw, &m) != nil {
		return nil, false
	}
	return raw, true
}

type inviteCreateRequest struct {
	CompanyID string `path:"companyId" json:"-"`
	// AllowedJoinTypes says who may join: human, agent or both (default both).
	AllowedJoinTypes string `json:"allowedJoinTypes,omitempty" jsonschema:"enum=human,enum=agent,enum=both"`
	// MembershipRole is the role a person joining gets (default operator; owner only from owners).
	MembershipRole string `json:"membershipRole,omitempty" jsonschema:"enum=owner,enum=admin,enum=operator,enum=viewer,enum=member"`
	// Email, when set, limits a human join to the signed-in user with this address.
	Email string `json:"email,omitempty"`
	// DefaultsPayload are defaults for an agent joining (adapterType, adapterConfig, runtimeConfig, role).
	DefaultsPayload json.RawMessage `json:"defaultsPayload,omitempty" jsonschema:"type=object"`
	// AgentMessage is shown to an agent in the onboarding text.
	AgentMessage *string `json:"agentMessage,omitempty"`
	// ExpiresInHours sets the expiry (1 to 720; default 72). ExpiresAt sets it as a time.
	ExpiresInHours *int       `json:"expiresInHours,omitempty"`
	ExpiresAt      *time.Time `json:"expiresAt,omitempty"`

	base string
}

func (r *inviteCreateRequest) Bind(c *fiber.Ctx, rc *RequestContext) error {
	base, err := bindWithBase(c, rc, r, true)
	r.base = base
	return err
}

type inviteCreateEndpoint struct{ k *Kernel }

func (e *inviteCreateEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "POST /api/companies/{companyId}/invites", Status: http.StatusCreated, Access: AccessBoard,
		CompanyFrom: CompanyFromPath, Permission: "users:invite",
		Summary: "Invite a person or an outside agent to the company; the token is shown only in this response"}
}

func (e *inviteCreateEndpoint) Execute(ctx context.Context, req *inviteCreateRequest) (*InviteCreated, error) {
	return e.k.inviteCreate(ctx, req)
}

// inviteCreate validates and stores an invite for the request's actor.
func (k *Kernel) inviteCreate(ctx context.Context, req *inviteCreateRequest) (*InviteCreated, error) {
	a := ActorFrom(ctx)
	var d detailList
	joinTypes := strings.TrimSpace(req.AllowedJoinTypes)
	if joinTypes == "" {
		joinTypes = JoinTypeBoth
	}
	if !slices.Contains([]string{JoinTypeHuman, JoinTypeAgent, JoinTypeBoth}, joinTypes) {
		d.add("allowedJoinTypes", "must be human, agent or both")
	}
	role := strings.TrimSpace(req.MembershipRole)
	if role == "" {
		role = "operator"
	}
	role, ok := normalizeMembershipRole(PrincipalUser, role)
	if !ok {
		d.add("membershipRole", "must be one of "+strings.Join(MembershipRoles, ", "))
	}
	defaults, ok := jsonObjectOrEmpty(req.DefaultsPayload)
	if !ok {
		d.add("defaultsPayload", "must be an object")
	}
	email := ""
	if strings.TrimSpace(req.Email) != "" {
		if email, ok = normalizeEmail(req.Email); !ok {
			d.add("email", "must be a valid email address")
		}
	}
	if req.AgentMessage != nil && utf8.RuneCountInString(*req.AgentMessage) > maxAgentMessageLen {
		d.add("agentMessage", fmt.Sprintf("must be at most %d characters", maxAgentMessageLen))
	}
	now := time.Now()
	expires := now.Add(DefaultInviteTTL)
	switch {
	case req.ExpiresInHours != nil && req.ExpiresAt != nil:
		d.add("expiresAt", "give expiresAt or expiresInHours, not both")
	case req.ExpiresInHours != nil:
		if h := *req.ExpiresInHours; h < 1 || time.Duration(h)*time.Hour > MaxInviteTTL {
			d.add("expiresInHours", fmt.Sprintf("must be between 1 and %d", int(MaxInviteTTL/time.Hour)))
		} else {
			expires = now.Add(time.Duration(h) * time.Hour)
		}
	case req.ExpiresAt != nil:
		if !req.ExpiresAt.After(now) || req.ExpiresAt.Sub(now) > MaxInviteTTL {
			d.add("expiresAt", "must be in the future and within 30 days")
		} else {
			expires = *req.ExpiresAt
		}
	}
	if err := d.err(); err != nil {
		return nil, err
	}
	if role == "owner" {
		if err := requireCompanyManager(a, req.CompanyID, true); err != nil {
			return nil, Forbidden("Only company owners can invite owners")
		}
	}
	if email != "" {
		var m map[string]any
		_ = json.Unmarshal(defaults, &m)
		m["email"] = email
		defaults, _ = json.Marshal(m)
	}
	token := InviteTokenPrefix + randomHex(24)
	inv, err := scanInvite(k.Pool.QueryRow(ctx, `INSERT INTO kernel.invites AS i (id, company_id, token_hash, allowed_join_types,
			membership_role, defaults_payload, agent_message, invited_by_user_id, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING `+inviteColumns,
		newID(), req.CompanyID, HashToken(token), joinTypes, role, defaults, req.AgentMessage, nullable(a.UserID), expires.UTC()))
	if err != nil {
		return nil, fmt.Errorf("error creating invite: %w", err)
	}
	if err := k.appendActorActivity(ctx, req.CompanyID, "invite.created", "invite", inv.ID, map[string]any{
		"allowedJoinTypes": inv.AllowedJoinTypes, "membershipRole": inv.MembershipRole, "expiresAt": inv.ExpiresAt,
	}); err != nil {
		return nil, err
	}
	out := &InviteCreated{Invite: *inv, Token: token,
		InvitePath: "/api/invites/" + token, AcceptPath: "/api/invites/" + token + "/accept",
		OnboardingTextPath: "/api/invites/" + token + "/onboarding.txt"}
	base := k.publicBaseURL(req.base)
	out.InviteURL = base + out.InvitePath
	out.OnboardingTextURL = base + out.OnboardingTextPath
	return out, nil
}

type inviteListRequest struct {
	CompanyID string `path:"companyId"`
	// Status filters by computed status: active, accepted, revoked or expired.
	Status string `query:"status"`
}

type inviteListEndpoint struct{ k *Kernel }

func (e *inviteListEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "GET /api/companies/{companyId}/invites", Access: AccessBoard, CompanyFrom: CompanyFromPath,
		Permission: "users:invite", Summary: "List a company's invites, newest first (status active, accepted, revoked or expired)"}
}

func (e *inviteListEndpoint) Execute(ctx context.Context, req *inviteListRequest) (*[]*Invite, error) {
	cond := "true"
	if req.Status != "" {
		c, ok := inviteStatusFilter[req.Status]
		if !ok {
			return nil, ValidationError(ValidationDetail{Path: "status", Message: "must be active, accepted, revoked or expired"})
		}
		cond = c
	}
	rows, err := e.k.Pool.Query(ctx, `SELECT `+inviteColumns+` FROM kernel.invites i
		WHERE i.company_id = $1 AND `+cond+` ORDER BY i.created_at DESC, i.id DESC LIMIT 500`, req.CompanyID)
	if err != nil {
		return nil, fmt.Errorf("error listing invites: %w", err)
	}
	defer rows.Close()
	out := []*Invite{}
	for rows.Next() {
		inv, err := scanInvite(rows)
		if err != nil {
			return nil, fmt.Errorf("error listing invites: %w", err)
		}
		out = append(out, inv)
	}
	return &out, rows.Err()
}

type inviteRevokeRequest struct {
	InviteID string `path:"inviteId" json:"-"`
}

type inviteRevokeEndpoint struct{ k *Kernel }

func (e *inviteRevokeEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "POST /api/invites/{inviteId}/revoke", Access: AccessBoard,
		Summary: "Revoke an invite by id; its token then answers like an unknown one", Errors: []int{http.StatusConflict}}
}

func (e *inviteRevokeEndpoint) Execute(ctx context.Context, req *inviteRevokeRequest) (*Invite, error) {
	k := e.k
	a := ActorFrom(ctx)
	if !isUUID(req.InviteID) {
		return nil, NotFound("Invite not found")
	}
	var companyID string
	err := k.Pool.QueryRow(ctx, `SELECT company_id::text FROM kernel.invites WHERE id = $1 AND company_id IS NOT NULL`, req.InviteID).Scan(&companyID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, NotFound("Invite not found")
	}
	if err != nil {
		return nil, fmt.Errorf("error reading invite: %w", err)
	}
	if err := k.AuthorizeCompany(ctx, a, companyID, "users:invite"); err != nil {
		return nil, err
	}
	if !a.CanWriteCompany(companyID) {
		return nil, ReadOnlyMember()
	}
	inv, err := scanInvite(k.Pool.QueryRow(ctx, `UPDATE kernel.invites i SET revoked_at = coalesce(i.revoked_at, now()),
			revoked_by_user_id = coalesce(i.revoked_by_user_id, $2), updated_at = now()
		WHERE i.id = $1 AND i.accepted_at IS NULL RETURNING `+inviteColumns, req.InviteID, nullable(a.UserID)))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, Conflict("Invite has already been accepted")
	}
	if err != nil {
		return nil, fmt.Errorf("error revoking invite: %w", err)
	}
	if err := k.appendActorActivity(ctx, companyID, "invite.revoked", "invite", inv.ID, map[string]any{}); err != nil {
		return nil, err
	}
	return inv, nil
}

// InviteSummary is what an invite token shows anyone holding it.
type InviteSummary struct {
	ID string `json:"id"`
	// CompanyID and CompanyName are left out for a bootstrap_ceo invite, which opens no company.
	CompanyID          string    `json:"companyId,omitempty"`
	CompanyName        string    `json:"companyName,omitempty"`
	CompanyBrandColor  *string   `json:"companyBrandColor"`
	InviteType         string    `json:"inviteType"`
	AllowedJoinTypes   string    `json:"allowedJoinTypes"`
	MembershipRole     string    `json:"membershipRole"`
	AgentMessage       *string   `json:"agentMessage"`
	InvitedByName      *string   `json:"invitedByName"`
	ExpiresAt          time.Time `json:"expiresAt"`
	LogoPath           string    `json:"logoPath"`
	AcceptPath         string    `json:"acceptPath"`
	OnboardingPath     string    `json:"onboardingPath"`
	OnboardingTextPath string    `json:"onboardingTextPath"`
	SkillIndexPath     string    `json:"skillIndexPath"`
	TestResolutionPath string    `json:"testResolutionPath"`
}

// inviteSummary builds the public summary of an open invite.
func (k *Kernel) inviteSummary(ctx context.Context, token string, inv *Invite) (*InviteSummary, *Company, error) {
	co, err := k.CompanyGetByID(ctx, inv.CompanyID)
	if err != nil {
		return nil, nil, err
	}
	if co == nil {
		return nil, nil, errInviteNotFound
	}
	s := &InviteSummary{ID: inv.ID, CompanyID: inv.CompanyID, CompanyName: co.Name, CompanyBrandColor: co.BrandColor,
		InviteType: inv.InviteType, AllowedJoinTypes: inv.AllowedJoinTypes, MembershipRole: inv.MembershipRole,
		AgentMessage: inv.AgentMessage, ExpiresAt: inv.ExpiresAt}
	if inv.InvitedByUserID != nil {
		if u, err := k.userGet(ctx, *inv.InvitedByUserID); err == nil && u != nil {
			s.InvitedByName = &u.Name
		}
	}
	p := "/api/invites/" + token
	s.LogoPath, s.AcceptPath, s.OnboardingPath, s.OnboardingTextPath = p+"/logo", p+"/accept", p+"/onboarding", p+"/onboarding.txt"
	s.SkillIndexPath, s.TestResolutionPath = p+"/skills/index", p+"/test-resolution"
	return s, co, nil
}

type inviteTokenRequest struct {
	Token string `path:"token"`
}

type inviteGetEndpoint struct{ k *Kernel }

func (e *inviteGetEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "GET /api/invites/{token}", Access: AccessPublic,
		Summary: "Read an open invite by its token (unknown, expired, revoked and used tokens are all 404)"}
}

func (e *inviteGetEndpoint) Execute(ctx context.Context, req *inviteTokenRequest) (*InviteSummary, error) {
	inv, err := e.k.inviteByToken(ctx, req.Token)
	if errors.Is(err, errInviteNotFound) {
		if boot, berr := e.k.bootstrapInviteByToken(ctx, req.Token); berr == nil {
			return bootstrapInviteSummary(req.Token, boot), nil
		}
	}
	if err != nil {
		return nil, err
	}
	s, _, err := e.k.inviteSummary(ctx, req.Token, inv)
	return s, err
}

// JoinRequest is a request to join a company, made by accepting an invite.
type JoinRequest struct {
	ID                   string          `json:"id"`
	CompanyID            string          `json:"companyId"`
	InviteID             *string         `json:"inviteId"`
	RequestType          string          `json:"requestType" jsonschema:"enum=human,enum=agent"`
	Status               string          `json:"status" jsonschema:"enum=pending_approval,enum=approved,enum=rejected"`
	RequestingUserID     *string         `json:"requestingUserId"`
	RequestingUser       *MemberUser     `json:"requestingUser,omitempty"`
	AgentName            *string         `json:"agentName"`
	AdapterType          *string         `json:"adapterType"`
	Capabilities         *string         `json:"capabilities"`
	AgentDefaultsPayload json.RawMessage `json:"agentDefaultsPayload" jsonschema:"type=object"`
	CreatedAgentID       *string         `json:"createdAgentId"`
	ApiKeyClaimedAt      *time.Time      `json:"apiKeyClaimedAt"`
	DecidedByUserID      *string         `json:"decidedByUserId"`
	DecidedAt            *time.Time      `json:"decidedAt"`
	DecisionNote         *string         `json:"decisionNote"`
	CreatedAt            time.Time       `json:"createdAt"`
	UpdatedAt            time.Time       `json:"updatedAt"`
}

// JoinRequestAccepted answers an invite accept: the join request, the membership a person
// got, and for an agent the claim secret (shown only here) and what to do next.
type JoinRequestAccepted struct {
	JoinRequest
	// Membership is set when a person joined.
	Membership *Member `json:"membership,omitempty"`
	// ClaimSecret is set for an agent: with it, claim the API key once approved.
	ClaimSecret      string     `json:"claimSecret,omitempty"`
	ClaimSecretUntil *time.Time `json:"claimSecretExpiresAt,omitempty"`
	ClaimAPIKeyPath  string     `json:"claimApiKeyPath,omitempty"`
	ClaimAPIKeyURL   string     `json:"claimApiKeyUrl,omitempty"`
	NextSteps        string     `json:"nextSteps"`

	// bootstrap is set when a bootstrap_ceo invite was accepted (see WriteResponse).
	bootstrap *BootstrapAccepted
}

type inviteAcceptRequest struct {
	Token string `path:"token" json:"-"`
	// RequestType is human or agent; when absent a signed-in person joins as human on an
	// invite that allows it, anyone else as agent.
	RequestType string `json:"requestType,omitempty" jsonschema:"enum=human,enum=agent"`
	// AgentName names the joining agent (required for agents, 1 to 100 characters).
	AgentName string `json:"agentName,omitempty"`
	// AdapterType is how keel runs the agent (default from the invite, else http).
	AdapterType string `json:"adapterType,omitempty"`
	// Capabilities describe what the agent can do (up to 4000 characters).
	Capabilities *string `json:"capabilities,omitempty"`
	// AgentDefaultsPayload are the agent's own settings (adapterConfig, runtimeConfig, role, title).
	AgentDefaultsPayload json.RawMessage `json:"agentDefaultsPayload,omitempty" jsonschema:"type=object"`

	base string
}

func (r *inviteAcceptRequest) Bind(c *fiber.Ctx, rc *RequestContext) error {
	base, err := bindWithBase(c, rc, r, true)
	r.base = base
	return err
}

type inviteAcceptEndpoint struct{ k *Kernel }

func (e *inviteAcceptEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "POST /api/invites/{token}/accept", Status: http.StatusCreated, Access: AccessPublic,
		Summary: "Accept an invite: a signed-in person becomes a member; an agent files a join request and gets its claim secret once",
		Errors:  []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusConflict, http.StatusUnprocessableEntity}}
}

func (e *inviteAcceptEndpoint) Execute(ctx context.Context, req *inviteAcceptRequest) (*JoinRequestAccepted, error) {
	k := e.k
	a := ActorFrom(ctx)
	inv, err := k.inviteByToken(ctx, req.Token)
	if errors.Is(err, errInviteNotFound) {
		if boot, berr := k.bootstrapInviteByToken(ctx, req.Token); berr == nil {
			return k.acceptBootstrap(ctx, req, boot)
		}
	}
	if err != nil {
		return nil, err
	}
	reqType := strings.TrimSpace(req.RequestType)
	if reqType == "" {
		switch {
		case inv.AllowedJoinTypes == JoinTypeAgent:
			reqType = JoinTypeAgent
		case inv.AllowedJoinTypes == JoinTypeHuman || a.IsBoard():
			reqType = JoinTypeHuman
		default:
			reqType = JoinTypeAgent
		}
	}
	if reqType != JoinTypeHuman && reqType != JoinTypeAgent {
		return nil, ValidationError(ValidationDetail{Path: "requestType", Message: "must be human or agent"})
	}
	if inv.AllowedJoinTypes != JoinTypeBoth && inv.AllowedJoinTypes != reqType {
		return nil, Unprocessable(fmt.Sprintf("This invite does not allow %s joins", reqType))
	}
	if reqType == JoinTypeHuman {
		return k.acceptHuman(ctx, req, inv)
	}
	return k.acceptAgent(ctx, req, inv)
}

// consumeInvite marks the invite a token opens as accepted inside tx, or answers like an
// unknown token when another accept used it first.
func consumeInvite(ctx context.Context, tx pgx.Tx, inviteID, userID string) error {
	tag, err := tx.Exec(ctx, `UPDATE kernel.invites SET accepted_at = now(), accepted_by_user_id = $2, updated_at = now()
		WHERE id = $1 AND accepted_at IS NULL AND revoked_at IS NULL AND expires_at > now()`, inviteID, nullable(userID))
	if err != nil {
		return fmt.Errorf("error accepting invite: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return errInviteNotFound
	}
	return nil
}

func (k *Kernel) acceptHuman(ctx context.Context, req *inviteAcceptRequest, inv *Invite) (*JoinRequestAccepted, error) {
	a := ActorFrom(ctx)
	if !a.IsBoard() || a.UserID == "" {
		return nil, Unauthorized("Sign in to accept this invite")
	}
	if inv.Email != nil {
		u, err := k.userGet(ctx, a.UserID)
		if err != nil {
			return nil, err
		}
		if u == nil || !strings.EqualFold(u.Email, *inv.Email) {
			return nil, Forbidden("This invite is for another email address")
		}
	}
	if m, ok := a.MembershipFor(inv.CompanyID); ok && m.Status == "active" {
		return nil, Conflict("You are already a member of this company").WithCode("already_member")
	}
	tx, err := k.Pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("error accepting invite: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if err := consumeInvite(ctx, tx, inv.ID, a.UserID); err != nil {
		return nil, err
	}
	joinID := newID()
	if _, err := tx.Exec(ctx, `INSERT INTO kernel.join_requests (id, company_id, invite_id, request_type, status,
			requesting_user_id, decided_by_user_id, decided_at, decision_note)
		VALUES ($1, $2, $3, 'human', 'approved', $4, $5, now(), 'accepted invite')`,
		joinID, inv.CompanyID, inv.ID, a.UserID, inv.InvitedByUserID); err != nil {
		return nil, fmt.Errorf("error recording join request: %w", err)
	}
	// A returning member (archived, suspended) is reactivated with the invite's role.
	var memberID string
	if err := tx.QueryRow(ctx, `INSERT INTO kernel.company_memberships
			(id, company_id, principal_type, principal_id, status, membership_role) VALUES ($1, $2, 'user', $3, 'active', $4)
		ON CONFLICT (company_id, principal_type, principal_id) DO UPDATE SET status = 'active',
			membership_role = EXCLUDED.membership_role, updated_at = now()
		RETURNING id::text`, newID(), inv.CompanyID, a.UserID, inv.MembershipRole).Scan(&memberID); err != nil {
		return nil, fmt.Errorf("error adding member: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("error accepting invite: %w", err)
	}
	if err := k.appendActorActivity(ctx, inv.CompanyID, "invite.accepted", "invite", inv.ID,
		map[string]any{"requestType": JoinTypeHuman, "joinRequestId": joinID, "userId": a.UserID}); err != nil {
		return nil, err
	}
	if err := k.appendActorActivity(ctx, inv.CompanyID, "member.added", "member", memberID,
		map[string]any{"principalType": PrincipalUser, "principalId": a.UserID, "membershipRole": inv.MembershipRole, "inviteId": inv.ID}); err != nil {
		return nil, err
	}
	jr, err := k.joinRequestGet(ctx, inv.CompanyID, joinID)
	if err != nil {
		return nil, err
	}
	m, err := k.MemberGetByID(ctx, inv.CompanyID, memberID)
	if err != nil {
		return nil, err
	}
	return &JoinRequestAccepted{JoinRequest: *jr, Membership: m,
		NextSteps: "You are now a member of this company."}, nil
}

func (k *Kernel) acceptAgent(ctx context.Context, req *inviteAcceptRequest, inv *Invite) (*JoinRequestAccepted, error) {
	var defaults struct {
		AdapterType string `json:"adapterType"`
	}
	_ = json.Unmarshal(inv.DefaultsPayload, &defaults)
	var d detailList
	name := strings.TrimSpace(req.AgentName)
	if name == "" {
		d.add("agentName", "is required")
	} else if utf8.RuneCountInString(name) > maxAgentNameLen {
		d.add("agentName", fmt.Sprintf("must be at most %d characters", maxAgentNameLen))
	}
	adapterType := strings.TrimSpace(req.AdapterType)
	if adapterType == "" {
		adapterType = defaults.AdapterType
	}
	if adapterType == "" {
		adapterType = "http"
	}
	if !adapterTypePattern.MatchString(adapterType) {
		d.add("adapterType", "must be an adapter type such as http or process")
	}
	if req.Capabilities != nil && utf8.RuneCountInString(*req.Capabilities) > maxCapabilitiesLen {
		d.add("capabilities", fmt.Sprintf("must be at most %d characters", maxCapabilitiesLen))
	}
	agentDefaults, ok := jsonObjectOrEmpty(req.AgentDefaultsPayload)
	if !ok {
		d.add("agentDefaultsPayload", "must be an object")
	}
	if err := d.err(); err != nil {
		return nil, err
	}
	secret := ClaimSecretPrefix + randomHex(24)
	expires := time.Now().Add(claimSecretTTL).UTC().Truncate(time.Millisecond)
	tx, err := k.Pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("error accepting invite: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if err := consumeInvite(ctx, tx, inv.ID, ""); err != nil {
		return nil, err
	}
	joinID := newID()
	if _, err := tx.Exec(ctx, `INSERT INTO kernel.join_requests (id, company_id, invite_id, request_type, status, agent_name,
			adapter_type, capabilities, agent_defaults, claim_secret_hash, claim_secret_expires_at)
		VALUES ($1, $2, $3, 'agent', 'pending_approval', $4, $5, $6, $7, $8, $9)`,
		joinID, inv.CompanyID, inv.ID, name, adapterType, req.Capabilities, agentDefaults, HashToken(secret), expires); err != nil {
		return nil, fmt.Errorf("error recording join request: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("error accepting invite: %w", err)
	}
	for _, entry := range []*ActivityInsertParams{
		{Action: "invite.accepted", EntityType: "invite", EntityID: inv.ID, Details: map[string]any{"requestType": JoinTypeAgent, "joinRequestId": joinID}},
		{Action: "join_request.created", EntityType: "join_request", EntityID: joinID, Details: map[string]any{"requestType": JoinTypeAgent, "agentName": name, "adapterType": adapterType}},
	} {
		entry.CompanyID = inv.CompanyID
		k.recordActivity(ctx, entry)
	}
	jr, err := k.joinRequestGet(ctx, inv.CompanyID, joinID)
	if err != nil {
		return nil, err
	}
	path := "/api/join-requests/" + joinID + "/claim-api-key"
	return &JoinRequestAccepted{JoinRequest: *jr, ClaimSecret: secret, ClaimSecretUntil: &expires,
		ClaimAPIKeyPath: path, ClaimAPIKeyURL: k.publicBaseURL(req.base) + path,
		NextSteps: "Keep claimSecret: it is shown only once. When a board member has approved this request, POST {\"claimSecret\": \"...\"} " +
			"to claimApiKeyUrl to receive your API key (once). Until then that call answers 409 with code join_request_pending."}, nil
}

// InvitePrompt is an agent invite with the prompt to paste into an agent (an OpenClaw-style
// assistant, say) so that it joins on its own.
type InvitePrompt struct {
	InviteCreated
	Prompt string `json:"prompt"`
}

type invitePromptEndpoint struct{ k *Kernel }

func (e *invitePromptEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "POST /api/companies/{companyId}/openclaw/invite-prompt", Status: http.StatusCreated, Access: AccessBoard,
		CompanyFrom: CompanyFromPath, Permission: "users:invite",
		Summary: "Create an agent invite and the prompt that tells an outside agent how to join with it"}
}

func (e *invitePromptEndpoint) Execute(ctx context.Context, req *inviteCreateRequest) (*InvitePrompt, error) {
	req.AllowedJoinTypes = JoinTypeAgent
	inv, err := e.k.inviteCreate(ctx, req)
	if err != nil {
		return nil, err
	}
	co, err := e.k.CompanyGetByID(ctx, req.CompanyID)
	if err != nil {
		return nil, err
	}
	name := "the company"
	if co != nil {
		name = co.Name
	}
	prompt := fmt.Sprintf("You are invited to join %s as an agent on its keel control plane. Fetch %s and follow its steps "+
		"exactly: accept the invite once, keep the claim secret it returns, and claim your API key once a board member "+
		"has approved you. The invite expires at %s.", name, inv.OnboardingTextURL, inv.ExpiresAt.Format(time.RFC3339))
	if inv.AgentMessage != nil && strings.TrimSpace(*inv.AgentMessage) != "" {
		prompt += "\n\nMessage from " + name + ": " + strings.TrimSpace(*inv.AgentMessage)
	}
	return &InvitePrompt{InviteCreated: *inv, Prompt: prompt}, nil
}

func (k *Kernel) inviteRoutes() []*Route {
	return []*Route{
		Mount[inviteCreateRequest, InviteCreated](&inviteCreateEndpoint{k}),
		Mount[inviteListRequest, []*Invite](&inviteListEndpoint{k}),
		Mount[inviteRevokeRequest, Invite](&inviteRevokeEndpoint{k}),
		Mount[inviteTokenRequest, InviteSummary](&inviteGetEndpoint{k}),
		Mount[inviteAcceptRequest, JoinRequestAccepted](&inviteAcceptEndpoint{k}),
		Mount[inviteCreateRequest, InvitePrompt](&invitePromptEndpoint{k}),
	}
}
