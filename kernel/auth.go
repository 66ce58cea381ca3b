package kernel

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/jackc/pgx/v5"
)

// Credential prefixes.
const (
	BoardKeyPrefix = "pcp_board_"
	AgentKeyPrefix = "pcp_"
)

// RequestCredentials are the parts of a request actor resolution looks at.
type RequestCredentials struct {
	Authorization string
	SessionToken  string
	RunID         string
}

// HashToken returns the stored form of an opaque token: SHA-256, hex.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// agentAuthError is the 401 for an agent credential that failed verification; the cause is
// named in the text and the code, and the request never falls through to anonymous.
func agentAuthError(code, cause string) *APIError {
	return &APIError{Status: 401, Message: "Agent token did not verify (" + cause + "); obtain fresh credentials and retry", Code: code}
}

// ResolveActor resolves the caller exactly in the order of spec part 1 "Authentication":
// no bearer in local_trusted mode is the local board; no bearer in authenticated mode is the
// session user, if any; a bearer is tried as a board API key, then an agent API key, then a
// local agent JWT. A bearer that matches nothing, or an empty one ("Bearer "), is 401, except
// on public routes (webhook senders carry their own bearer secrets), where the caller is
// anonymous; an empty bearer is never the local board.
func (k *Kernel) ResolveActor(ctx context.Context, cred RequestCredentials, public bool) (*Actor, *APIError) {
	token, hasBearer := bearerToken(cred.Authorization)
	if !hasBearer {
		if k.cfg.DeploymentMode == ModeLocalTrusted {
			return &Actor{Type: ActorBoard, Source: SourceLocalImplicit, UserID: LocalBoardUserID, IsInstanceAdmin: true, RunID: cred.RunID}, nil
		}
		if cred.SessionToken != "" {
			a, err := k.sessionActor(ctx, cred.SessionToken)
			if err != nil {
				return nil, Internal(err)
			}
			if a != nil {
				return a, nil
			}
		}
		return &Actor{Type: ActorNone}, nil
	}
	if token == "" {
		if public {
			return &Actor{Type: ActorNone}, nil
		}
		return nil, Unauthorized("Unauthorized: empty bearer token")
	}
	if strings.HasPrefix(token, BoardKeyPrefix) {
		a, err := k.boardKeyActor(ctx, token)
		if err != nil {
			return nil, Internal(err)
		}
		if a != nil {
			a.RunID = cred.RunID
			return a, nil
		}
		if public {
			return &Actor{Type: ActorNone}, nil
		}
		return nil, Unauthorized("Invalid board API key")
	}
	if strings.HasPrefix(token, AgentKeyPrefix) {
		a, apiErr := k.agentKeyActor(ctx, token)
		if apiErr != nil {
			if public && apiErr.Code == "agent_key_unknown" {
				return &Actor{Type: ActorNone}, nil
			}
			return nil, apiErr
		}
		if apiErr := k.checkRunHeader(ctx, a.AgentID, cred.RunID); apiErr != nil {
			return nil, apiErr
		}
		a.RunID = strings.Clone(cred.RunID)
		return a, nil
	}
	if strings.Count(token, ".") == 2 {
		a, apiErr := k.agentJWTActor(ctx, token, cred.RunID)
		if apiErr != nil {
			if public && apiErr.Code == "agent_token_malformed" {
				return &Actor{Type: ActorNone}, nil
			}
			return nil, apiErr
		}
		return a, nil
	}
	if public {
		return &Actor{Type: ActorNone}, nil
	}
	return nil, Unauthorized("Unauthorized: bearer token is not a board key, agent key or agent JWT")
}

// bearerToken returns the token of a Bearer Authorization header and whether the header uses
// the Bearer scheme at all: "Bearer" or "Bearer " alone (transports may trim the trailing
// space) is a Bearer header with an empty token.
func bearerToken(h string) (string, bool) {
	h = strings.TrimSpace(h)
	if len(h) < 6 || !strings.EqualFold(h[:6], "bearer") || (len(h) > 6 && h[6] != ' ' && h[6] != '\t') {
		return "", false
	}
	return strings.TrimSpace(h[6:]), true
}

func (k *Kernel) sessionActor(ctx context.Context, token string) (*Actor, error) {
	var userID string
	err := k.Pool.QueryRow(ctx, `SELECT user_id FROM kernel.sessions WHERE token_hash = $1 AND expires_at > now()`, HashToken(token)).Scan(&userID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("error reading session: %w", err)
	}
	return k.boardUserActor(ctx, userID, SourceSession, "")
}

func (k *Kernel) boardKeyActor(ctx context.Context, token string) (*Actor, error) {
	var keyID, userID string
	var lastUsed *time.Time
	err := k.Pool.QueryRow(ctx, `SELECT id, user_id, last_used_at FROM kernel.board_api_keys
		WHERE key_hash = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())`, HashToken(token)).Scan(&keyID, &userID, &lastUsed)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("error reading board API key: %w", err)
	}
	if lastUsed == nil || time.Since(*lastUsed) > time.Minute {
		if _, err := k.Pool.Exec(ctx, `UPDATE kernel.board_api_keys SET last_used_at = now() WHERE id = $1`, keyID); err != nil {
			return nil, fmt.Errorf("error touching board API key: %w", err)
		}
	}
	return k.boardUserActor(ctx, userID, SourceBoardKey, keyID)
}

// boardUserActor builds a board actor with the user's memberships and instance-admin flag.
func (k *Kernel) boardUserActor(ctx context.Context, userID, source, keyID string) (*Actor, error) {
	a := &Actor{Type: ActorBoard, Source: source, UserID: userID, KeyID: keyID}
	rows, err := k.Pool.Query(ctx, `SELECT company_id::text, membership_role, status FROM kernel.company_memberships
		WHERE principal_type = 'user' AND principal_id = $1 ORDER BY created_at`, userID)
	if err != nil {
		return nil, fmt.Errorf("error reading memberships: %w", err)
	}
	for rows.Next() {
		var m Membership
		if err := rows.Scan(&m.CompanyID, &m.MembershipRole, &m.Status); err != nil {
			rows.Close()
			return nil, fmt.Errorf("error reading memberships: %w", err)
		}
		a.Memberships = append(a.Memberships, m)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error reading memberships: %w", err)
	}
	if err := k.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM kernel.instance_user_roles WHERE user_id = $1 AND role = 'instance_admin')`, userID).Scan(&a.IsInstanceAdmin); err != nil {
		return nil, fmt.Errorf("error reading instance roles: %w", err)
	}
	return a, nil
}

// agentUsable says why an agent in this status cannot authenticate, or "" when it can.
func agentUnusable(status string) (code, cause string) {
	switch status {
	case "terminated":
		return "agent_terminated", "agent is terminated"
	case "pending_approval":
		return "agent_pending_approval", "agent is pending approval"
	}
	return "", ""
}

func (k *Kernel) agentKeyActor(ctx context.Context, token string) (*Actor, *APIError) {
	var keyID, agentID, companyID, status, role, scope string
	var revoked bool
	var lastUsed *time.Time
	// Revoked keys are read too: terminating an agent revokes its keys, and the caller should
	// then hear that the agent is terminated rather than that the key is unknown.
	err := k.Pool.QueryRow(ctx, `SELECT k.id::text, k.revoked_at IS NOT NULL, k.last_used_at, coalesce(k.scope->>'kind', 'standard'),
		a.id::text, a.company_id::text, a.status, a.role
		FROM kernel.agent_api_keys k JOIN kernel.agents a ON a.id = k.agent_id
		WHERE k.key_hash = $1`, HashToken(token)).Scan(&keyID, &revoked, &lastUsed, &scope, &agentID, &companyID, &status, &role)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, agentAuthError("agent_key_unknown", "unknown or revoked agent API key")
	}
	if err != nil {
		return nil, Internal(fmt.Errorf("error reading agent API key: %w", err))
	}
	if code, cause := agentUnusable(status); code != "" {
		return nil, agentAuthError(code, cause)
	}
	if revoked {
		return nil, agentAuthError("agent_key_unknown", "unknown or revoked agent API key")
	}
	// lastUsedAt is kept to the minute, so a busy agent does not write on every request.
	if lastUsed == nil || time.Since(*lastUsed) > time.Minute {
		if _, err := k.Pool.Exec(ctx, `UPDATE kernel.agent_api_keys SET last_used_at = now() WHERE id = $1`, keyID); err != nil {
			return nil, Internal(fmt.Errorf("error touching agent API key: %w", err))
		}
	}
	return &Actor{Type: ActorAgent, Source: SourceAgentKey, AgentID: agentID, CompanyID: companyID, AgentRole: role, KeyID: keyID, KeyScope: scope}, nil
}

// AgentClaims are the claims of a local agent JWT (spec part 1).
type AgentClaims struct {
	CompanyID   string `json:"company_id"`
	AdapterType string `json:"adapter_type"`
	RunID       string `json:"run_id"`
	KeyScope    string `json:"key_scope,omitempty"`
	InstanceID  string `json:"instance_id,omitempty"`
	jwt.RegisteredClaims
}

// JWT issuer and audience.
const (
	JWTIssuer   = "service"
	JWTAudience = "service-api"
)

// agentJWTKey derives the per-company signing key: HMAC-SHA256(master, "jwt:"+instance+":"+company), hex.
func (k *Kernel) agentJWTKey(companyID string) []byte {
	m := hmac.New(sha256.New, k.jwtSecret)
	m.Write([]byte("jwt:" + k.instanceID + ":" + companyID))
	return []byte(hex.EncodeToString(m.Sum(nil)))
}

// MintAgentJWT signs a local agent JWT bound to a run.
func (k *Kernel) MintAgentJWT(agentID, companyID, adapterType, runID string, ttl time.Duration) (string, time.Time, error) {
	if ttl <= 0 {
		ttl = k.cfg.AgentJWTTTL
	}
	now := time.Now()
	exp := now.Add(ttl)
	claims := AgentClaims{
		CompanyID: companyID, AdapterType: adapterType, RunID: runID, InstanceID: k.instanceID,
		RegisteredClaims: jwt.RegisteredClaims{
			Subject: agentID, Issuer: JWTIssuer, Audience: jwt.ClaimStrings{JWTAudience},
			IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(exp),
		},
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(k.agentJWTKey(companyID))
	if err != nil {
		return "", time.Time{}, fmt.Errorf("error signing agent JWT: %w", err)
	}
	return s, exp, nil
}

func (k *Kernel) agentJWTActor(ctx context.Context, token, headerRunID string) (*Actor, *APIError) {
	var unverified AgentClaims
	if _, _, err := jwt.NewParser().ParseUnverified(token, &unverified); err != nil {
		return nil, agentAuthError("agent_token_malformed", "malformed token")
	}
	var claims AgentClaims
	_, err := jwt.ParseWithClaims(token, &claims, func(t *jwt.Token) (any, error) {
		return k.agentJWTKey(unverified.CompanyID), nil
	}, jwt.WithValidMethods([]string{"HS256"}), jwt.WithIssuer(JWTIssuer), jwt.WithAudience(JWTAudience), jwt.WithExpirationRequired())
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return nil, agentAuthError("agent_token_expired", "token expired")
	case err != nil:
		return nil, agentAuthError("agent_token_invalid", "signature or claims invalid")
	}
	var companyID, status, role string
	err = k.Pool.QueryRow(ctx, `SELECT company_id::text, status, role FROM kernel.agents WHERE id = $1`, claims.Subject).Scan(&companyID, &status, &role)
	if errors.Is(err, pgx.ErrNoRows) || (err != nil && strings.Contains(err.Error(), "invalid input syntax")) {
		return nil, agentAuthError("agent_not_found", "agent does not exist")
	}
	if err != nil {
		return nil, Internal(fmt.Errorf("error reading agent: %w", err))
	}
	if companyID != claims.CompanyID {
		return nil, agentAuthError("agent_company_mismatch", "agent does not belong to the token's company")
	}
	if code, cause := agentUnusable(status); code != "" {
		return nil, agentAuthError(code, cause)
	}
	if headerRunID != "" && claims.RunID != "" && headerRunID != claims.RunID {
		return nil, &APIError{Status: 422, Message: "X-Service-Run-Id does not match the token's run", Code: "agent_jwt_run_id_mismatch"}
	}
	runID := claims.RunID
	if runID == "" {
		if apiErr := k.checkRunHeader(ctx, claims.Subject, headerRunID); apiErr != nil {
			return nil, apiErr
		}
		runID = strings.Clone(headerRunID)
	}
	scope := claims.KeyScope
	if scope == "" {
		scope = "standard"
	}
	return &Actor{Type: ActorAgent, Source: SourceAgentJWT, AgentID: claims.Subject, CompanyID: companyID, AgentRole: role, RunID: runID, KeyScope: scope}, nil
}

// LoadBoardActor builds the board actor of a user with memberships and the instance-admin
// flag, for callers outside HTTP (host services checking an actor an extension passes on).
func (k *Kernel) LoadBoardActor(ctx context.Context, userID, source string) (*Actor, error) {
	if userID == LocalBoardUserID && k.cfg.DeploymentMode == ModeLocalTrusted && (source == "" || source == SourceLocalImplicit) {
		return &Actor{Type: ActorBoard, Source: SourceLocalImplicit, UserID: LocalBoardUserID, IsInstanceAdmin: true}, nil
	}
	return k.boardUserActor(ctx, userID, source, "")
}
