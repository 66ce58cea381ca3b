package kernel

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5"
)

// CLIAuthTokenPrefix prefixes CLI auth challenge tokens.
const CLIAuthTokenPrefix = "pcp_cli_auth_"

// CLIAuthChallengeTTL is how long a CLI auth challenge waits for approval.
const CLIAuthChallengeTTL = 10 * time.Minute

// CLI auth challenge statuses. Expired is computed from a pending challenge's expiry.
const (
	CLIAuthPending   = "pending"
	CLIAuthApproved  = "approved"
	CLIAuthCancelled = "cancelled"
	CLIAuthExpired   = "expired"
)

// CLI auth requested access levels (the reference product's requestedAccess).
const (
	CLIAuthAccessBoard         = "board"
	CLIAuthAccessInstanceAdmin = "instance_admin_required"
)

// The CLI auth flow: the CLI creates a challenge and gets its token (kept by the CLI only);
// a board user opens approveUrl and approves; the CLI polls the challenge with its token and,
// once, receives a board API key minted for the approving user. The key is generated with
// the challenge: its hash is stored so approval can activate it, and its plaintext is stored
// only sealed under a key derived from the challenge token, which the server never keeps.
// Pickup wipes the sealed copy. Like the reference product, the create response also carries
// the key itself (boardApiToken): it authenticates nothing until the challenge is approved.

// cliAuthSealKey derives the AES-256 key that seals a challenge's board API key.
func cliAuthSealKey(challengeToken string) []byte {
	sum := sha256.Sum256([]byte("keel cli-auth seal v1:" + challengeToken))
	return sum[:]
}

func cliAuthSeal(challengeToken, plaintext string) ([]byte, error) {
	block, err := aes.NewCipher(cliAuthSealKey(challengeToken))
	if err != nil {
		return nil, err
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, gcm.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return gcm.Seal(nonce, nonce, []byte(plaintext), nil), nil
}

func cliAuthOpen(challengeToken string, sealed []byte) (string, error) {
	block, err := aes.NewCipher(cliAuthSealKey(challengeToken))
	if err != nil {
		return "", err
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return "", err
	}
	if len(sealed) < gcm.NonceSize() {
		return "", errors.New("sealed key too short")
	}
	plain, err := gcm.Open(nil, sealed[:gcm.NonceSize()], sealed[gcm.NonceSize():], nil)
	if err != nil {
		return "", err
	}
	return string(plain), nil
}

// CLIAuthChallenge is a CLI auth challenge as the API shows it.
type CLIAuthChallenge struct {
	ID         string `json:"id"`
	Status     string `json:"status"`
	ClientName string `json:"clientName"`
	// Command is the CLI command line being authorised, RequestedAccess "board" or
	// "instance_admin_required", RequestedCompanyID the company the CLI asks for, if any
	// (the reference product's CLI sends all three).
	Command            string     `json:"command"`
	RequestedAccess    string     `json:"requestedAccess"`
	RequestedCompanyID *string    `json:"requestedCompanyId"`
	ApproveURL         string     `json:"approveUrl"`
	ApprovedByUserID   *string    `json:"approvedByUserId"`
	ApprovedAt         *time.Time `json:"approvedAt"`
	BoardAPIKeyID      *string    `json:"boardApiKeyId"`
	ExpiresAt          time.Time  `json:"expiresAt"`
	CreatedAt          time.Time  `json:"createdAt"`
	// BoardAPIKey is the minted key with its token, present once: in the first read by the
	// challenge token's holder after approval.
	BoardAPIKey *BoardAPIKeyCreated `json:"boardApiKey,omitempty"`
}

// CLIAuthChallengeCreated is a new challenge with its token, shown only here.
// Beside keel's fields it carries the reference product's: boardApiToken (the board API key
// the challenge will activate when approved), approvalPath and approvalUrl (the approval
// page, carrying the token as the reference's do), pollPath and suggestedPollIntervalMs.
type CLIAuthChallengeCreated struct {
	ID                      string    `json:"id"`
	Token                   string    `json:"token"`
	BoardAPIToken           string    `json:"boardApiToken"`
	Status                  string    `json:"status"`
	ClientName              string    `json:"clientName"`
	Command                 string    `json:"command"`
	RequestedAccess         string    `json:"requestedAccess"`
	RequestedCompanyID      *string   `json:"requestedCompanyId"`
	ExpiresAt               time.Time `json:"expiresAt"`
	ApproveURL              string    `json:"approveUrl"`
	ApprovalPath            string    `json:"approvalPath"`
	ApprovalURL             string    `json:"approvalUrl"`
	PollPath                string    `json:"pollPath"`
	SuggestedPollIntervalMs int       `json:"suggestedPollIntervalMs"`
	CreatedAt               time.Time `json:"createdAt"`
}

type cliAuthRow struct {
	CLIAuthChallenge
	tokenHash    string
	pendingHash  *string
	sealed       []byte
	deliveredAt  *time.Time
	storedStatus string
}

const cliAuthColumns = `id::text, token_hash, status, client_name, command, requested_access, requested_company_id::text,
	approved_by, approved_at, board_key_id::text, pending_key_hash, pending_key_sealed, key_delivered_at, expires_at, created_at`

func (k *Kernel) scanCLIAuth(row pgx.Row) (*cliAuthRow, error) {
	var r cliAuthRow
	err := row.Scan(&r.ID, &r.tokenHash, &r.storedStatus, &r.ClientName, &r.Command, &r.RequestedAccess, &r.RequestedCompanyID, &r.ApprovedByUserID, &r.ApprovedAt, &r.BoardAPIKeyID,
		&r.pendingHash, &r.sealed, &r.deliveredAt, &r.ExpiresAt, &r.CreatedAt)
	if err != nil {
		return nil, err
	}
	r.Status = r.storedStatus
	if r.Status == CLIAuthPending && !time.Now().Before(r.ExpiresAt) {
		r.Status = CLIAuthExpired
	}
	r.ApproveURL = k.cliAuthApproveURL(r.ID)
	return &r, nil
}

// cliAuthApproveURL is the board page where a user approves a challenge. It carries no
// secret: approving needs a board actor, and only the CLI holds the challenge token.
func (k *Kernel) cliAuthApproveURL(id string) string {
	base := k.cfg.PublicBaseURL
	if base == "" {
		base = k.cfg.APIURL
	}
	return strings.TrimRight(base, "/") + "/cli-auth/" + id
}

func (k *Kernel) cliAuthGet(ctx context.Context, q queryRower, id string, forUpdate bool) (*cliAuthRow, error) {
	if !isUUID(id) {
		return nil, NotFound("CLI auth challenge not found")
	}
	sql := `SELECT ` + cliAuthColumns + ` FROM kernel.cli_auth_challenges WHERE id = $1`
	if forUpdate {
		sql += ` FOR UPDATE`
	}
	r, err := k.scanCLIAuth(q.QueryRow(ctx, sql, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, NotFound("CLI auth challenge not found")
	}
	if err != nil {
		return nil, fmt.Errorf("error reading CLI auth challenge %s: %w", id, err)
	}
	return r, nil
}

// tokenMatches compares a presented challenge token with the stored hash in constant time.
func (r *cliAuthRow) tokenMatches(token string) bool {
	return token != "" && subtle.ConstantTimeCompare([]byte(HashToken(token)), []byte(r.tokenHash)) == 1
}

// cliAuthTokenFrom finds a challenge token in the query (?token=) or the Authorization header.
func cliAuthTokenFrom(c *fiber.Ctx) string {
	if t := c.Query("token"); t != "" {
		return strings.Clone(t)
	}
	if t, ok := bearerToken(c.Get(fiber.HeaderAuthorization)); ok && strings.HasPrefix(t, CLIAuthTokenPrefix) {
		return strings.Clone(t)
	}
	return ""
}

type cliAuthCreateRequest struct {
	// ClientName names the CLI or machine asking for access; shown to the approver.
	ClientName string `json:"clientName"`
	// Command is the CLI command line being authorised (the reference product's CLI sends
	// it); shown to the approver.
	Command string `json:"command"`
	// RequestedAccess is "board" (default) or "instance_admin_required": then only an
	// instance admin can approve.
	RequestedAccess string `json:"requestedAccess" jsonschema:"enum=board,enum=instance_admin_required"`
	// RequestedCompanyID names a company the approver must have access to.
	RequestedCompanyID *string `json:"requestedCompanyId"`
}

type cliAuthCreateEndpoint struct{ k *Kernel }

func (e *cliAuthCreateEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "POST /api/cli-auth/challenges", Status: http.StatusCreated, Access: AccessPublic,
		Summary: "Create a CLI auth challenge; its token is shown only in this response"}
}

func (e *cliAuthCreateEndpoint) Execute(ctx context.Context, req *cliAuthCreateRequest) (*CLIAuthChallengeCreated, error) {
	clientName := strings.TrimSpace(req.ClientName)
	command := strings.TrimSpace(req.Command)
	access := strings.TrimSpace(req.RequestedAccess)
	if access == "" {
		access = CLIAuthAccessBoard
	}
	var details []ValidationDetail
	if len(clientName) > 200 {
		details = append(details, ValidationDetail{Path: "clientName", Message: "must be at most 200 characters"})
	}
	if len(command) > 4000 {
		details = append(details, ValidationDetail{Path: "command", Message: "must be at most 4000 characters"})
	}
	if access != CLIAuthAccessBoard && access != CLIAuthAccessInstanceAdmin {
		details = append(details, ValidationDetail{Path: "requestedAccess", Message: "must be board or instance_admin_required"})
	}
	var companyID *string
	if req.RequestedCompanyID != nil && *req.RequestedCompanyID != "" {
		if !isUUID(*req.RequestedCompanyID) {
			details = append(details, ValidationDetail{Path: "requestedCompanyId", Message: "must be a UUID"})
		}
		companyID = req.RequestedCompanyID
	}
	if len(details) > 0 {
		return nil, ValidationError(details...)
	}
	token := CLIAuthTokenPrefix + randomHex(24)
	boardKey := newBoardKeyToken()
	sealed, err := cliAuthSeal(token, boardKey)
	if err != nil {
		return nil, fmt.Errorf("error sealing CLI auth key: %w", err)
	}
	out := &CLIAuthChallengeCreated{ID: newID(), Token: token, BoardAPIToken: boardKey, Status: CLIAuthPending, ClientName: clientName,
		Command: command, RequestedAccess: access, RequestedCompanyID: companyID, SuggestedPollIntervalMs: 1000}
	err = e.k.Pool.QueryRow(ctx, `INSERT INTO kernel.cli_auth_challenges (id, token_hash, status, client_name, command, requested_access,
			requested_company_id, pending_key_hash, pending_key_sealed, expires_at)
		VALUES ($1, $2, 'pending', $3, $4, $5, $6, $7, $8, now() + make_interval(secs => $9)) RETURNING expires_at, created_at`,
		out.ID, HashToken(token), clientName, command, access, companyID, HashToken(boardKey), sealed,
		CLIAuthChallengeTTL.Seconds()).Scan(&out.ExpiresAt, &out.CreatedAt)
	if err != nil {
		return nil, fmt.Errorf("error creating CLI auth challenge: %w", err)
	}
	out.ApproveURL = e.k.cliAuthApproveURL(out.ID)
	out.ApprovalPath = "/cli-auth/" + out.ID + "?token=" + token
	out.ApprovalURL = out.ApproveURL + "?token=" + token
	out.PollPath = "/cli-auth/challenges/" + out.ID
	e.k.recordActivity(ctx, actorActivity(ctx, &ActivityInsertParams{
		Action: "cli_auth_challenge.created", EntityType: "cli_auth_challenge", EntityID: out.ID,
		Details: map[string]any{"clientName": clientName, "command": command, "requestedAccess": access},
	}))
	return out, nil
}

type cliAuthGetRequest struct {
	ID    string `json:"-"`
	token string
}

func (r *cliAuthGetRequest) Bind(c *fiber.Ctx, rc *RequestContext) error {
	r.ID = rc.Params["id"]
	r.token = cliAuthTokenFrom(c)
	return nil
}

type cliAuthGetEndpoint struct{ k *Kernel }

func (e *cliAuthGetEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "GET /api/cli-auth/challenges/{id}", Access: AccessPublic,
		Summary: "Read a CLI auth challenge; with its token (?token= or Bearer), the first read after approval carries the board API key"}
}

func (e *cliAuthGetEndpoint) Execute(ctx context.Context, req *cliAuthGetRequest) (*CLIAuthChallenge, error) {
	r, err := e.k.cliAuthGet(ctx, e.k.Pool, req.ID, false)
	if err != nil {
		return nil, err
	}
	if req.token == "" {
		return &r.CLIAuthChallenge, nil
	}
	if !r.tokenMatches(req.token) {
		return nil, Unauthorized("Invalid CLI auth challenge token")
	}
	if r.Status != CLIAuthApproved || r.deliveredAt != nil {
		return &r.CLIAuthChallenge, nil
	}
	key, err := e.k.cliAuthPickUp(ctx, r.ID, req.token)
	if err != nil {
		return nil, err
	}
	if key != nil {
		e.k.recordActivity(ctx, &ActivityInsertParams{
			ActorType: "user", ActorID: key.UserID, Action: "cli_auth_challenge.key_delivered", EntityType: "cli_auth_challenge", EntityID: r.ID,
			Details: map[string]any{"boardApiKeyId": key.ID},
		})
	}
	// Re-read so the view reflects the pickup; the key is attached only for this caller.
	view, err := e.k.cliAuthGet(ctx, e.k.Pool, r.ID, false)
	if err != nil {
		return nil, err
	}
	view.BoardAPIKey = key
	return &view.CLIAuthChallenge, nil
}

// cliAuthPickUp hands out the approved challenge's board API key exactly once: the sealed
// copy is opened and wiped in one transaction. A concurrent second pickup gets nil.
func (k *Kernel) cliAuthPickUp(ctx context.Context, id, token string) (*BoardAPIKeyCreated, error) {
	tx, err := k.Pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("error picking up CLI auth key: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	r, err := k.cliAuthGet(ctx, tx, id, true)
	if err != nil {
		return nil, err
	}
	if r.storedStatus != CLIAuthApproved || r.deliveredAt != nil || r.BoardAPIKeyID == nil || len(r.sealed) == 0 {
		return nil, nil
	}
	plain, err := cliAuthOpen(token, r.sealed)
	if err != nil {
		return nil, fmt.Errorf("error opening CLI auth key of challenge %s: %w", id, err)
	}
	b, err := scanBoardKey(tx.QueryRow(ctx, `SELECT `+boardKeyColumns+` FROM kernel.board_api_keys WHERE id = $1`, *r.BoardAPIKeyID))
	if err != nil {
		return nil, fmt.Errorf("error reading board API key of challenge %s: %w", id, err)
	}
	if _, err := tx.Exec(ctx, `UPDATE kernel.cli_auth_challenges SET pending_key_sealed = NULL, key_delivered_at = now(), updated_at = now() WHERE id = $1`, id); err != nil {
		return nil, fmt.Errorf("error recording CLI auth key pickup: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("error recording CLI auth key pickup: %w", err)
	}
	return &BoardAPIKeyCreated{BoardAPIKey: *b, Token: plain}, nil
}

type cliAuthIDRequest struct {
	ID string `path:"id" json:"-"`
}

type cliAuthApproveEndpoint struct{ k *Kernel }

func (e *cliAuthApproveEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "POST /api/cli-auth/challenges/{id}/approve", Access: AccessBoard,
		Summary: "Approve a CLI auth challenge, minting a board API key for the approving user"}
}

func (e *cliAuthApproveEndpoint) Execute(ctx context.Context, req *cliAuthIDRequest) (*CLIAuthChallenge, error) {
	k := e.k
	a := ActorFrom(ctx)
	if a.UserID == "" {
		return nil, Forbidden("Board access required")
	}
	tx, err := k.Pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("error approving CLI auth challenge: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	r, err := k.cliAuthGet(ctx, tx, req.ID, true)
	if err != nil {
		return nil, err
	}
	switch r.Status {
	case CLIAuthApproved:
		return nil, Conflict("CLI auth challenge is already approved").WithCode("cli_auth_already_approved")
	case CLIAuthCancelled:
		return nil, Conflict("CLI auth challenge was cancelled").WithCode("cli_auth_cancelled")
	case CLIAuthExpired:
		return nil, Conflict("CLI auth challenge has expired").WithCode("cli_auth_expired")
	}
	if r.pendingHash == nil {
		return nil, Conflict("CLI auth challenge has no key to approve").WithCode("cli_auth_invalid")
	}
	if r.RequestedAccess == CLIAuthAccessInstanceAdmin && !a.IsInstanceAdmin {
		return nil, Forbidden("This CLI auth challenge requires an instance admin")
	}
	if r.RequestedCompanyID != nil && !k.CanAccessCompany(a, *r.RequestedCompanyID) {
		return nil, Forbidden("You do not have access to the requested company")
	}
	name := "cli"
	if r.ClientName != "" {
		name = "cli: " + r.ClientName
	}
	b, err := boardKeyInsert(ctx, tx, a.UserID, name, *r.pendingHash, nil)
	if err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, `UPDATE kernel.cli_auth_challenges SET status = 'approved', approved_by = $2, approved_at = now(),
		board_key_id = $3, updated_at = now() WHERE id = $1`, r.ID, a.UserID, b.ID); err != nil {
		return nil, fmt.Errorf("error approving CLI auth challenge: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("error approving CLI auth challenge: %w", err)
	}
	k.recordActivity(ctx, actorActivity(ctx, &ActivityInsertParams{
		Action: "cli_auth_challenge.approved", EntityType: "cli_auth_challenge", EntityID: r.ID,
		Details: map[string]any{"boardApiKeyId": b.ID, "clientName": r.ClientName},
	}))
	view, err := k.cliAuthGet(ctx, k.Pool, r.ID, false)
	if err != nil {
		return nil, err
	}
	return &view.CLIAuthChallenge, nil
}

type cliAuthCancelRequest struct {
	ID string `json:"-"`
	// Token is the challenge token, when the CLI cancels (or pass ?token= or a Bearer).
	Token string `json:"token"`
}

func (r *cliAuthCancelRequest) Bind(c *fiber.Ctx, rc *RequestContext) error {
	if err := DecodeJSON(c, r); err != nil {
		return err
	}
	r.ID = rc.Params["id"]
	if r.Token == "" {
		r.Token = cliAuthTokenFrom(c)
	}
	return nil
}

type cliAuthCancelEndpoint struct{ k *Kernel }

func (e *cliAuthCancelEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "POST /api/cli-auth/challenges/{id}/cancel", Access: AccessPublic,
		Summary: "Cancel a pending CLI auth challenge (its CLI, with the token, or a board user)"}
}

func (e *cliAuthCancelEndpoint) Execute(ctx context.Context, req *cliAuthCancelRequest) (*CLIAuthChallenge, error) {
	k := e.k
	a := ActorFrom(ctx)
	tx, err := k.Pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("error cancelling CLI auth challenge: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	r, err := k.cliAuthGet(ctx, tx, req.ID, true)
	if err != nil {
		return nil, err
	}
	if !a.IsBoard() && !r.tokenMatches(req.Token) {
		if req.Token != "" {
			return nil, Unauthorized("Invalid CLI auth challenge token")
		}
		return nil, Unauthorized("Cancelling a CLI auth challenge needs its token or a board user")
	}
	switch r.storedStatus {
	case CLIAuthCancelled:
		return &r.CLIAuthChallenge, nil
	case CLIAuthApproved:
		return nil, Conflict("CLI auth challenge is already approved").WithCode("cli_auth_already_approved")
	}
	if _, err := tx.Exec(ctx, `UPDATE kernel.cli_auth_challenges SET status = 'cancelled', cancelled_at = now(),
		pending_key_sealed = NULL, updated_at = now() WHERE id = $1`, r.ID); err != nil {
		return nil, fmt.Errorf("error cancelling CLI auth challenge: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("error cancelling CLI auth challenge: %w", err)
	}
	k.recordActivity(ctx, actorActivity(ctx, &ActivityInsertParams{
		Action: "cli_auth_challenge.cancelled", EntityType: "cli_auth_challenge", EntityID: r.ID,
	}))
	view, err := k.cliAuthGet(ctx, k.Pool, r.ID, false)
	if err != nil {
		return nil, err
	}
	return &view.CLIAuthChallenge, nil
}

// CLIAuthMeUser is the user block of GET /api/cli-auth/me.
type CLIAuthMeUser struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Email string `json:"email"`
}

// CLIAuthMe is the resolved board caller (reference sample cli_auth_me.json).
type CLIAuthMe struct {
	User            CLIAuthMeUser `json:"user"`
	UserID          string        `json:"userId"`
	IsInstanceAdmin bool          `json:"isInstanceAdmin"`
	CompanyIDs      []string      `json:"companyIds"`
	Memberships     []Membership  `json:"memberships"`
	Source          string        `json:"source"`
	KeyID           *string       `json:"keyId"`
}

type cliAuthMeEndpoint struct{ k *Kernel }

func (e *cliAuthMeEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "GET /api/cli-auth/me", Access: AccessBoard,
		Summary: "The resolved board caller: user, companies, instance-admin status, auth source and key id"}
}

func (e *cliAuthMeEndpoint) Execute(ctx context.Context, _ *struct{}) (*CLIAuthMe, error) {
	a := ActorFrom(ctx)
	if a.IsLocalImplicit() {
		// The implicit local board carries no memberships; read them like any user's.
		loaded, err := e.k.boardUserActor(ctx, a.UserID, a.Source, "")
		if err != nil {
			return nil, Internal(err)
		}
		loaded.IsInstanceAdmin = true
		a = loaded
	}
	out := &CLIAuthMe{
		User: CLIAuthMeUser{ID: a.UserID}, UserID: a.UserID, IsInstanceAdmin: a.IsInstanceAdmin,
		CompanyIDs: a.CompanyIDs(), Memberships: a.Memberships, Source: a.Source, KeyID: nullable(a.KeyID),
	}
	if out.Memberships == nil {
		out.Memberships = []Membership{}
	}
	u, err := e.k.userGet(ctx, a.UserID)
	if err != nil {
		return nil, err
	}
	if u != nil {
		out.User.Name, out.User.Email = u.Name, u.Email
	}
	return out, nil
}

// CLIAuthRevoked is the answer of POST /api/cli-auth/revoke-current.
type CLIAuthRevoked struct {
	Revoked bool   `json:"revoked"`
	KeyID   string `json:"keyId"`
}

type cliAuthRevokeCurrentEndpoint struct{ k *Kernel }

func (e *cliAuthRevokeCurrentEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "POST /api/cli-auth/revoke-current", Access: AccessBoard,
		Summary: "Revoke the board API key this request is authenticated with"}
}

func (e *cliAuthRevokeCurrentEndpoint) Execute(ctx context.Context, _ *struct{}) (*CLIAuthRevoked, error) {
	a := ActorFrom(ctx)
	if a.Source != SourceBoardKey || a.KeyID == "" {
		return nil, BadRequest("Current credential is not a board API key")
	}
	b, revoked, err := e.k.boardKeyRevoke(ctx, a.UserID, a.KeyID)
	if err != nil {
		return nil, err
	}
	if revoked {
		e.k.recordActivity(ctx, actorActivity(ctx, &ActivityInsertParams{
			Action: "board_api_key.revoked", EntityType: "board_api_key", EntityID: b.ID,
			Details: map[string]any{"name": b.Name, "userId": b.UserID, "via": "revoke-current"},
		}))
	}
	return &CLIAuthRevoked{Revoked: true, KeyID: b.ID}, nil
}

func (k *Kernel) cliAuthRoutes() []*Route {
	return []*Route{
		Mount[cliAuthCreateRequest, CLIAuthChallengeCreated](&cliAuthCreateEndpoint{k}),
		Mount[cliAuthGetRequest, CLIAuthChallenge](&cliAuthGetEndpoint{k}),
		Mount[cliAuthIDRequest, CLIAuthChallenge](&cliAuthApproveEndpoint{k}),
		Mount[cliAuthCancelRequest, CLIAuthChallenge](&cliAuthCancelEndpoint{k}),
		Mount[struct{}, CLIAuthMe](&cliAuthMeEndpoint{k}),
		Mount[struct{}, CLIAuthRevoked](&cliAuthRevokeCurrentEndpoint{k}),
	}
}
