package kernel

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// BoardClaimPrefix starts every board claim token.
const BoardClaimPrefix = "pcp_board_claim_"

// BoardClaimTTL is how long a board claim stays usable.
const BoardClaimTTL = 24 * time.Hour

// BoardClaimChallenge is a new one-time board claim; its token and code are shown only here
// (and in the log line that announces it).
type BoardClaimChallenge struct {
	ID    string
	Token string
	Code  string
	// Path is the browser path of the claim, with the code: /board-claim/<token>?code=<code>.
	Path      string
	ExpiresAt time.Time
}

// BoardClaimCreate opens a one-time board claim, replacing any unused one: the signed-in
// browser user who presents its token and code becomes instance admin and takes over the
// companies of the local board. An instance that ran local_trusted and now runs
// authenticated opens one at start (see announceBoardClaim).
func (k *Kernel) BoardClaimCreate(ctx context.Context) (*BoardClaimChallenge, error) {
	c := &BoardClaimChallenge{ID: newID(), Token: BoardClaimPrefix + randomHex(24), Code: randomHex(4),
		ExpiresAt: time.Now().Add(BoardClaimTTL).UTC().Truncate(time.Millisecond)}
	c.Path = "/board-claim/" + c.Token + "?code=" + c.Code
	tx, err := k.Pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("error creating board claim: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, `DELETE FROM kernel.board_claims WHERE claimed_at IS NULL`); err != nil {
		return nil, fmt.Errorf("error creating board claim: %w", err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO kernel.board_claims (id, token_hash, code_hash, expires_at) VALUES ($1, $2, $3, $4)`,
		c.ID, HashToken(c.Token), HashToken(c.Code), c.ExpiresAt); err != nil {
		return nil, fmt.Errorf("error creating board claim: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("error creating board claim: %w", err)
	}
	return c, nil
}

// announceBoardClaim opens a board claim when an authenticated instance's only instance
// admin is the local board of an earlier local_trusted run (nobody could administer it
// otherwise), and logs its URL.
func (k *Kernel) announceBoardClaim(ctx context.Context) error {
	if k.cfg.DeploymentMode != ModeAuthenticated {
		return nil
	}
	var localAdmin bool
	var others int
	if err := k.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM kernel.instance_user_roles WHERE user_id = $1 AND role = 'instance_admin'),
			(SELECT count(*) FROM kernel.instance_user_roles WHERE user_id <> $1 AND role = 'instance_admin')`, LocalBoardUserID).
		Scan(&localAdmin, &others); err != nil {
		return fmt.Errorf("error checking instance admins: %w", err)
	}
	if !localAdmin || others > 0 {
		return nil
	}
	c, err := k.BoardClaimCreate(ctx)
	if err != nil {
		return err
	}
	k.log.Warn("this instance has no instance admin who can sign in; sign in and open the board claim URL to become its admin",
		"url", strings.TrimRight(k.cfg.PublicBaseURL, "/")+c.Path, "expiresAt", c.ExpiresAt)
	return nil
}

// BoardClaimStatus is what a board claim token shows.
type BoardClaimStatus struct {
	Status    string     `json:"status" jsonschema:"enum=available,enum=claimed"`
	ExpiresAt time.Time  `json:"expiresAt"`
	ClaimedAt *time.Time `json:"claimedAt"`
	// RequiresSignIn is true when the caller has no browser session to claim with.
	RequiresSignIn bool `json:"requiresSignIn"`
	// CodeValid says whether the code query parameter matches (null when none was given).
	CodeValid *bool `json:"codeValid"`
}

type boardClaimRow struct {
	id, codeHash string
	expires      time.Time
	claimedAt    *time.Time
}

// errBoardClaimNotFound answers unknown and expired claim tokens alike.
var errBoardClaimNotFound = NotFound("Board claim not found")

func (k *Kernel) boardClaimByToken(ctx context.Context, q queryRower, token string, lock bool) (*boardClaimRow, error) {
	if !strings.HasPrefix(token, BoardClaimPrefix) || len(token) > 200 {
		return nil, errBoardClaimNotFound
	}
	suffix := ""
	if lock {
		suffix = " FOR UPDATE"
	}
	var r boardClaimRow
	err := q.QueryRow(ctx, `SELECT id::text, code_hash, expires_at, claimed_at FROM kernel.board_claims WHERE token_hash = $1`+suffix,
		HashToken(token)).Scan(&r.id, &r.codeHash, &r.expires, &r.claimedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errBoardClaimNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("error reading board claim: %w", err)
	}
	if r.claimedAt == nil && !r.expires.After(time.Now()) {
		return nil, errBoardClaimNotFound
	}
	return &r, nil
}

func codeMatches(code, hash string) bool {
	return subtle.ConstantTimeCompare([]byte(HashToken(code)), []byte(hash)) == 1
}

type boardClaimGetRequest struct {
	Token string `path:"token"`
	Code  string `query:"code"`
}

type boardClaimGetEndpoint struct{ k *Kernel }

func (e *boardClaimGetEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "GET /api/board-claim/{token}", Access: AccessPublic,
		Summary: "Read a one-time board claim: available or claimed, its expiry, and whether the caller must sign in first"}
}

func (e *boardClaimGetEndpoint) Execute(ctx context.Context, req *boardClaimGetRequest) (*BoardClaimStatus, error) {
	r, err := e.k.boardClaimByToken(ctx, e.k.Pool, req.Token, false)
	if err != nil {
		return nil, err
	}
	a := ActorFrom(ctx)
	s := &BoardClaimStatus{Status: "available", ExpiresAt: r.expires.UTC(), ClaimedAt: r.claimedAt,
		RequiresSignIn: !(a.IsBoard() && a.Source == SourceSession)}
	if r.claimedAt != nil {
		s.Status = "claimed"
	}
	if req.Code != "" {
		ok := codeMatches(req.Code, r.codeHash)
		s.CodeValid = &ok
	}
	return s, nil
}

type boardClaimRequest struct {
	Token string `path:"token" json:"-"`
	// Code is the code of the claim URL; it may also come as the code query parameter.
	Code      string `json:"code"`
	QueryCode string `query:"code" json:"-"`
}

// BoardClaimResult answers a successful board claim.
type BoardClaimResult struct {
	Claimed bool   `json:"claimed"`
	UserID  string `json:"userId"`
	// CompanyIDs are the local board's companies the user now owns.
	CompanyIDs []string `json:"companyIds"`
}

type boardClaimEndpoint struct{ k *Kernel }

func (e *boardClaimEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "POST /api/board-claim/{token}/claim", Access: AccessPublic,
		Summary: "Use a one-time board claim: the signed-in browser user becomes instance admin and owner of the local board's companies",
		Errors:  []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusConflict}}
}

func (e *boardClaimEndpoint) Execute(ctx context.Context, req *boardClaimRequest) (*BoardClaimResult, error) {
	k := e.k
	a := ActorFrom(ctx)
	code := req.Code
	if code == "" {
		code = req.QueryCode
	}
	tx, err := k.Pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("error claiming board: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	r, err := k.boardClaimByToken(ctx, tx, req.Token, true)
	if err != nil {
		return nil, err
	}
	if r.claimedAt != nil {
		return nil, Conflict("This board claim has already been used").WithCode("board_claim_used")
	}
	if !a.IsBoard() || a.Source != SourceSession || a.UserID == "" || a.UserID == LocalBoardUserID {
		return nil, Unauthorized("Sign in from a browser session before claiming this board")
	}
	if !codeMatches(code, r.codeHash) {
		return nil, Forbidden("Invalid board claim code").WithCode("invalid_board_claim_code")
	}
	if _, err := tx.Exec(ctx, `UPDATE kernel.board_claims SET claimed_at = now(), claimed_by_user_id = $2 WHERE id = $1`, r.id, a.UserID); err != nil {
		return nil, fmt.Errorf("error claiming board: %w", err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO kernel.instance_user_roles (user_id, role) VALUES ($1, 'instance_admin') ON CONFLICT DO NOTHING`, a.UserID); err != nil {
		return nil, fmt.Errorf("error promoting user: %w", err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM kernel.instance_user_roles WHERE user_id = $1`, LocalBoardUserID); err != nil {
		return nil, fmt.Errorf("error demoting the local board: %w", err)
	}
	rows, err := tx.Query(ctx, `INSERT INTO kernel.company_memberships (id, company_id, principal_type, principal_id, status, membership_role)
		SELECT gen_random_uuid(), m.company_id, 'user', $1, 'active', 'owner' FROM kernel.company_memberships m
		WHERE m.principal_type = 'user' AND m.principal_id = $2 AND m.status = 'active'
		ON CONFLICT (company_id, principal_type, principal_id) DO UPDATE SET status = 'active', membership_role = 'owner', updated_at = now()
		RETURNING company_id::text`, a.UserID, LocalBoardUserID)
	if err != nil {
		return nil, fmt.Errorf("error transferring companies: %w", err)
	}
	out := &BoardClaimResult{Claimed: true, UserID: a.UserID, CompanyIDs: []string{}}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, fmt.Errorf("error transferring companies: %w", err)
		}
		out.CompanyIDs = append(out.CompanyIDs, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error transferring companies: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("error claiming board: %w", err)
	}
	k.recordActivity(ctx, actorActivity(ctx, &ActivityInsertParams{Action: "instance.board_claimed", EntityType: "user", EntityID: a.UserID,
		Details: map[string]any{"companyIds": out.CompanyIDs}}))
	return out, nil
}

func (k *Kernel) boardClaimRoutes() []*Route {
	return []*Route{
		Mount[boardClaimGetRequest, BoardClaimStatus](&boardClaimGetEndpoint{k}),
		Mount[boardClaimRequest, BoardClaimResult](&boardClaimEndpoint{k}),
	}
}
