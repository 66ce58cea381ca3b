package kernel

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5"
	"github.com/valyala/fasthttp"
	"golang.org/x/crypto/bcrypt"
)

// SessionTTL is the lifetime of a board session of authenticated mode.
const SessionTTL = 30 * 24 * time.Hour

// Password length limits; bcrypt reads at most 72 bytes.
const (
	passwordMinLength = 8
	passwordMaxBytes  = 72
)

// AuthUser is a board user as the auth routes show it.
type AuthUser struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Email     string    `json:"email"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// AuthSession is a board session as the auth routes show it; its token lives only in the
// cookie.
type AuthSession struct {
	ID        string     `json:"id"`
	UserID    string     `json:"userId"`
	ExpiresAt *time.Time `json:"expiresAt"`
}

const userColumns = `id, name, email, created_at, updated_at`

func scanUser(row pgx.Row) (*AuthUser, error) {
	var u AuthUser
	if err := row.Scan(&u.ID, &u.Name, &u.Email, &u.CreatedAt, &u.UpdatedAt); err != nil {
		return nil, err
	}
	return &u, nil
}

// userGet returns a user, or (nil, nil) when there is none.
func (k *Kernel) userGet(ctx context.Context, id string) (*AuthUser, error) {
	u, err := scanUser(k.Pool.QueryRow(ctx, `SELECT `+userColumns+` FROM kernel.users WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("error reading user %s: %w", id, err)
	}
	return u, nil
}

// errAuthDisabled answers the password and session routes in local_trusted mode, where every
// request already is the local board.
var errAuthDisabled = NotFound("Authentication is disabled in local_trusted mode").WithCode("auth_disabled")

func (k *Kernel) requireAuthenticatedMode() error {
	if k.cfg.DeploymentMode != ModeAuthenticated {
		return errAuthDisabled
	}
	return nil
}

// sessionCookie returns the board session cookie carrying token, or deleting it when token
// is empty.
func (k *Kernel) sessionCookie(token string, expires time.Time) *fiber.Cookie {
	c := &fiber.Cookie{
		Name: SessionCookie, Value: token, Path: "/", HTTPOnly: true, SameSite: fiber.CookieSameSiteLaxMode,
		Secure: strings.HasPrefix(k.cfg.PublicBaseURL, "https://"),
	}
	if token == "" {
		c.Expires = fasthttp.CookieExpireDelete
	} else {
		c.Expires = expires
		c.MaxAge = int(time.Until(expires).Seconds())
	}
	return c
}

// sessionResponse is {user, session}; when cookie is set the response also sets (or clears)
// the session cookie.
type sessionResponse struct {
	User    *AuthUser    `json:"user"`
	Session *AuthSession `json:"session"`

	cookie *fiber.Cookie
}

func (r *sessionResponse) WriteResponse(c *fiber.Ctx, status int) error {
	if r.cookie != nil {
		c.Cookie(r.cookie)
	}
	return WriteJSON(c, status, r)
}

// sessionCreate starts a session for a user and returns it with its cookie.
func (k *Kernel) sessionCreate(ctx context.Context, u *AuthUser) (*sessionResponse, error) {
	token := randomHex(32)
	expires := time.Now().Add(SessionTTL).UTC().Truncate(time.Millisecond)
	s := &AuthSession{ID: newID(), UserID: u.ID, ExpiresAt: &expires}
	if _, err := k.Pool.Exec(ctx, `INSERT INTO kernel.sessions (id, user_id, token_hash, expires_at) VALUES ($1, $2, $3, $4)`,
		s.ID, u.ID, HashToken(token), expires); err != nil {
		return nil, fmt.Errorf("error creating session: %w", err)
	}
	return &sessionResponse{User: u, Session: s, cookie: k.sessionCookie(token, expires)}, nil
}

func normalizeEmail(email string) (string, bool) {
	email = strings.ToLower(strings.TrimSpace(email))
	local, domain, ok := strings.Cut(email, "@")
	if !ok || local == "" || domain == "" || strings.Contains(domain, "@") || strings.ContainsAny(email, " \t\r\n") || len(email) > 254 {
		return email, false
	}
	return email, true
}

type signUpRequest struct {
	Email    string `json:"email"`
	Password string `json:"password"`
	Name     string `json:"name"`
	// CallbackURL is accepted for browser clients and ignored.
	CallbackURL string `json:"callbackURL"`
}

type signUpEndpoint struct{ k *Kernel }

func (e *signUpEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "POST /api/auth/sign-up/email", Access: AccessPublic,
		Summary: "Create a board user with email and password and sign it in (authenticated mode)"}
}

func (e *signUpEndpoint) Execute(ctx context.Context, req *signUpRequest) (*sessionResponse, error) {
	if err := e.k.requireAuthenticatedMode(); err != nil {
		return nil, err
	}
	email, ok := normalizeEmail(req.Email)
	var details []ValidationDetail
	if !ok {
		details = append(details, ValidationDetail{Path: "email", Message: "must be a valid email address"})
	}
	if len([]rune(req.Password)) < passwordMinLength {
		details = append(details, ValidationDetail{Path: "password", Message: fmt.Sprintf("must be at least %d characters", passwordMinLength)})
	} else if len(req.Password) > passwordMaxBytes {
		details = append(details, ValidationDetail{Path: "password", Message: fmt.Sprintf("must be at most %d bytes", passwordMaxBytes)})
	}
	name := strings.TrimSpace(req.Name)
	if name == "" {
		name, _, _ = strings.Cut(email, "@")
	}
	if len(name) > 200 {
		details = append(details, ValidationDetail{Path: "name", Message: "must be at most 200 characters"})
	}
	if len(details) > 0 {
		return nil, ValidationError(details...)
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(req.Password), bcrypt.DefaultCost)
	if err != nil {
		return nil, fmt.Errorf("error hashing password: %w", err)
	}
	u, err := scanUser(e.k.Pool.QueryRow(ctx, `INSERT INTO kernel.users (id, email, name, password_hash) VALUES ($1, $2, $3, $4) RETURNING `+userColumns,
		newID(), email, name, string(hash)))
	if violatesUnique(err, "users_email_key") {
		return nil, Conflict("User already exists").WithCode("user_already_exists")
	}
	if err != nil {
		return nil, fmt.Errorf("error creating user: %w", err)
	}
	e.k.recordActivity(ctx, &ActivityInsertParams{
		ActorType: "user", ActorID: u.ID, Action: "user.signed_up", EntityType: "user", EntityID: u.ID,
		Details: map[string]any{"email": u.Email},
	})
	return e.k.sessionCreate(ctx, u)
}

type signInRequest struct {
	Email    string `json:"email"`
	Password string `json:"password"`
	// RememberMe and CallbackURL are accepted for browser clients and ignored.
	RememberMe  *bool  `json:"rememberMe"`
	CallbackURL string `json:"callbackURL"`
}

type signInEndpoint struct{ k *Kernel }

func (e *signInEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "POST /api/auth/sign-in/email", Access: AccessPublic,
		Summary: "Sign in with email and password; sets the session cookie (authenticated mode)"}
}

var (
	dummyHashOnce sync.Once
	dummyHash     []byte
)

// dummyPasswordHash is compared against when the email is unknown, so that the response time
// does not tell whether an account exists.
func dummyPasswordHash() []byte {
	dummyHashOnce.Do(func() {
		dummyHash, _ = bcrypt.GenerateFromPassword([]byte(randomHex(16)), bcrypt.DefaultCost)
	})
	return dummyHash
}

func (e *signInEndpoint) Execute(ctx context.Context, req *signInRequest) (*sessionResponse, error) {
	if err := e.k.requireAuthenticatedMode(); err != nil {
		return nil, err
	}
	invalid := Unauthorized("Invalid email or password").WithCode("invalid_credentials")
	email, _ := normalizeEmail(req.Email)
	var hash *string
	var u AuthUser
	err := e.k.Pool.QueryRow(ctx, `SELECT `+userColumns+`, password_hash FROM kernel.users WHERE lower(email) = $1`, email).
		Scan(&u.ID, &u.Name, &u.Email, &u.CreatedAt, &u.UpdatedAt, &hash)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("error reading user: %w", err)
	}
	if err != nil || hash == nil || len(req.Password) > passwordMaxBytes {
		_ = bcrypt.CompareHashAndPassword(dummyPasswordHash(), []byte(req.Password))
		return nil, invalid
	}
	if bcrypt.CompareHashAndPassword([]byte(*hash), []byte(req.Password)) != nil {
		return nil, invalid
	}
	resp, err := e.k.sessionCreate(ctx, &u)
	if err != nil {
		return nil, err
	}
	e.k.recordActivity(ctx, &ActivityInsertParams{
		ActorType: "user", ActorID: u.ID, Action: "user.signed_in", EntityType: "session", EntityID: resp.Session.ID,
	})
	return resp, nil
}

type signOutRequest struct {
	token string
}

func (r *signOutRequest) Bind(c *fiber.Ctx, _ *RequestContext) error {
	r.token = strings.Clone(c.Cookies(SessionCookie))
	return nil
}

type signOutResponse struct {
	Success bool `json:"success"`

	cookie *fiber.Cookie
}

func (r *signOutResponse) WriteResponse(c *fiber.Ctx, status int) error {
	c.Cookie(r.cookie)
	return WriteJSON(c, status, r)
}

type signOutEndpoint struct{ k *Kernel }

func (e *signOutEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "POST /api/auth/sign-out", Access: AccessPublic,
		Summary: "End the current browser session and clear its cookie (authenticated mode)"}
}

func (e *signOutEndpoint) Execute(ctx context.Context, req *signOutRequest) (*signOutResponse, error) {
	if err := e.k.requireAuthenticatedMode(); err != nil {
		return nil, err
	}
	if req.token != "" {
		var sessionID, userID string
		err := e.k.Pool.QueryRow(ctx, `DELETE FROM kernel.sessions WHERE token_hash = $1 RETURNING id, user_id`, HashToken(req.token)).Scan(&sessionID, &userID)
		switch {
		case err == nil:
			e.k.recordActivity(ctx, &ActivityInsertParams{
				ActorType: "user", ActorID: userID, Action: "user.signed_out", EntityType: "session", EntityID: sessionID,
			})
		case !errors.Is(err, pgx.ErrNoRows):
			return nil, fmt.Errorf("error ending session: %w", err)
		}
	}
	return &signOutResponse{Success: true, cookie: e.k.sessionCookie("", time.Time{})}, nil
}

type getSessionRequest struct {
	token string
}

func (r *getSessionRequest) Bind(c *fiber.Ctx, _ *RequestContext) error {
	r.token = strings.Clone(c.Cookies(SessionCookie))
	return nil
}

// getSessionResponse is {session, user}, or JSON null when there is no session.
type getSessionResponse struct {
	Session *AuthSession `json:"session"`
	User    *AuthUser    `json:"user"`
}

func (r *getSessionResponse) WriteResponse(c *fiber.Ctx, status int) error {
	if r.Session == nil {
		c.Status(status)
		c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSONCharsetUTF8)
		return c.SendString("null")
	}
	return WriteJSON(c, status, r)
}

type getSessionEndpoint struct{ k *Kernel }

func (e *getSessionEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "GET /api/auth/get-session", Access: AccessPublic,
		Summary: "The current browser session and its user, or null"}
}

func (e *getSessionEndpoint) Execute(ctx context.Context, req *getSessionRequest) (*getSessionResponse, error) {
	a := ActorFrom(ctx)
	switch {
	case a.IsLocalImplicit():
		// local_trusted: every browser is the local board, in a session that never ends.
		u, err := e.k.userGet(ctx, a.UserID)
		if err != nil || u == nil {
			return &getSessionResponse{}, err
		}
		return &getSessionResponse{Session: &AuthSession{ID: SourceLocalImplicit, UserID: u.ID}, User: u}, nil
	case a.IsBoard() && a.Source == SourceSession && req.token != "":
		var s AuthSession
		var u AuthUser
		err := e.k.Pool.QueryRow(ctx, `SELECT s.id, s.user_id, s.expires_at, u.id, u.name, u.email, u.created_at, u.updated_at
			FROM kernel.sessions s JOIN kernel.users u ON u.id = s.user_id
			WHERE s.token_hash = $1 AND s.expires_at > now()`, HashToken(req.token)).
			Scan(&s.ID, &s.UserID, &s.ExpiresAt, &u.ID, &u.Name, &u.Email, &u.CreatedAt, &u.UpdatedAt)
		if errors.Is(err, pgx.ErrNoRows) {
			return &getSessionResponse{}, nil
		}
		if err != nil {
			return nil, fmt.Errorf("error reading session: %w", err)
		}
		return &getSessionResponse{Session: &s, User: &u}, nil
	}
	return &getSessionResponse{}, nil
}

type profileGetEndpoint struct{ k *Kernel }

func (e *profileGetEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "GET /api/auth/profile", Access: AccessBoard, Summary: "The signed-in board user's own profile"}
}

func (e *profileGetEndpoint) Execute(ctx context.Context, _ *struct{}) (*AuthUser, error) {
	a := ActorFrom(ctx)
	u, err := e.k.userGet(ctx, a.UserID)
	if err != nil {
		return nil, err
	}
	if u == nil {
		return nil, NotFound("User not found")
	}
	return u, nil
}

type profilePatchRequest struct {
	Name *string `json:"name"`
}

type profilePatchEndpoint struct{ k *Kernel }

func (e *profilePatchEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "PATCH /api/auth/profile", Access: AccessBoard, Summary: "Update the signed-in board user's own profile (name)"}
}

func (e *profilePatchEndpoint) Execute(ctx context.Context, req *profilePatchRequest) (*AuthUser, error) {
	a := ActorFrom(ctx)
	if req.Name == nil {
		return nil, ValidationError(ValidationDetail{Path: "name", Message: "is required"})
	}
	name := strings.TrimSpace(*req.Name)
	if name == "" || len(name) > 200 {
		return nil, ValidationError(ValidationDetail{Path: "name", Message: "must be 1 to 200 characters"})
	}
	u, err := scanUser(e.k.Pool.QueryRow(ctx, `UPDATE kernel.users SET name = $2, updated_at = now() WHERE id = $1 RETURNING `+userColumns, a.UserID, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, NotFound("User not found")
	}
	if err != nil {
		return nil, fmt.Errorf("error updating profile: %w", err)
	}
	e.k.recordActivity(ctx, actorActivity(ctx, &ActivityInsertParams{
		Action: "user.profile_updated", EntityType: "user", EntityID: u.ID, Details: map[string]any{"name": u.Name},
	}))
	return u, nil
}

// BootstrapClaim is the answer of a successful first-admin claim.
type BootstrapClaim struct {
	Claimed bool   `json:"claimed"`
	UserID  string `json:"userId"`
}

type bootstrapClaimEndpoint struct{ k *Kernel }

func (e *bootstrapClaimEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "POST /api/bootstrap/claim", Access: AccessPublic,
		Summary: "Claim the first instance admin from a signed-in browser session",
		Errors:  []int{fiber.StatusUnauthorized, fiber.StatusNotFound, fiber.StatusConflict}}
}

func (e *bootstrapClaimEndpoint) Execute(ctx context.Context, _ *struct{}) (*BootstrapClaim, error) {
	k := e.k
	if k.cfg.DeploymentMode != ModeAuthenticated || k.cfg.DeploymentExposure != ExposurePrivate {
		return nil, NotFound("Browser first-admin claim is not available")
	}
	a := ActorFrom(ctx)
	if !a.IsBoard() || a.Source != SourceSession || a.UserID == "" {
		return nil, Unauthorized("Sign in from a browser session before claiming first admin")
	}
	tx, err := k.Pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("error claiming first admin: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	// Serialize claims: two callers must not both see "no admin" and both insert.
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('kernel.bootstrap_claim'))`); err != nil {
		return nil, fmt.Errorf("error claiming first admin: %w", err)
	}
	tag, err := tx.Exec(ctx, `INSERT INTO kernel.instance_user_roles (user_id, role)
		SELECT $1, 'instance_admin' WHERE NOT EXISTS (SELECT 1 FROM kernel.instance_user_roles WHERE role = 'instance_admin')`, a.UserID)
	if err != nil {
		return nil, fmt.Errorf("error claiming first admin: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return nil, Conflict("Someone else has already claimed this instance")
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("error claiming first admin: %w", err)
	}
	k.recordActivity(ctx, actorActivity(ctx, &ActivityInsertParams{
		Action: "instance.first_admin_claimed", EntityType: "user", EntityID: a.UserID,
	}))
	return &BootstrapClaim{Claimed: true, UserID: a.UserID}, nil
}

func (k *Kernel) authRoutes() []*Route {
	return []*Route{
		Mount[signUpRequest, sessionResponse](&signUpEndpoint{k}),
		Mount[signInRequest, sessionResponse](&signInEndpoint{k}),
		Mount[signOutRequest, signOutResponse](&signOutEndpoint{k}),
		Mount[getSessionRequest, getSessionResponse](&getSessionEndpoint{k}),
		Mount[struct{}, AuthUser](&profileGetEndpoint{k}),
		Mount[profilePatchRequest, AuthUser](&profilePatchEndpoint{k}),
		Mount[struct{}, BootstrapClaim](&bootstrapClaimEndpoint{k}),
	}
}
