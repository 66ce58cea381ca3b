package kernel

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// BoardAPIKey is a board API key as the API lists it. The token itself is never stored;
// only its hash is, and the plaintext is shown once, when the key is minted.
type BoardAPIKey struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	UserID     string     `json:"userId"`
	LastUsedAt *time.Time `json:"lastUsedAt"`
	RevokedAt  *time.Time `json:"revokedAt"`
	ExpiresAt  *time.Time `json:"expiresAt"`
	CreatedAt  time.Time  `json:"createdAt"`
}

// BoardAPIKeyCreated is a freshly minted board API key with its plaintext token.
type BoardAPIKeyCreated struct {
	BoardAPIKey
	Token string `json:"token"`
}

// queryRower is what both a pool and a transaction offer for single-row statements.
type queryRower interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

const boardKeyColumns = `id::text, name, user_id, last_used_at, revoked_at, expires_at, created_at`

func scanBoardKey(row pgx.Row) (*BoardAPIKey, error) {
	var b BoardAPIKey
	if err := row.Scan(&b.ID, &b.Name, &b.UserID, &b.LastUsedAt, &b.RevokedAt, &b.ExpiresAt, &b.CreatedAt); err != nil {
		return nil, err
	}
	return &b, nil
}

// newBoardKeyToken returns a new board API key token: "pcp_board_" + 48 hex characters.
func newBoardKeyToken() string { return BoardKeyPrefix + randomHex(24) }

// boardKeyInsert stores a board API key by the hash of its token.
func boardKeyInsert(ctx context.Context, q queryRower, userID, name, keyHash string, expiresAt *time.Time) (*BoardAPIKey, error) {
	b, err := scanBoardKey(q.QueryRow(ctx, `INSERT INTO kernel.board_api_keys (id, user_id, name, key_hash, expires_at)
		VALUES ($1, $2, $3, $4, $5) RETURNING `+boardKeyColumns, newID(), userID, name, keyHash, expiresAt))
	if err != nil {
		return nil, fmt.Errorf("error storing board API key: %w", err)
	}
	return b, nil
}

// recordActivity appends an activity entry for a write that is already committed. A failure
// is logged, not returned: the write stands and its result (a token shown once, say) must
// still reach the caller.
func (k *Kernel) recordActivity(ctx context.Context, p *ActivityInsertParams) {
	if _, err := k.ActivityInsert(ctx, p); err != nil {
		k.log.Error("error recording activity", "action", p.Action, "error", err)
	}
}

// actorActivity fills the actor fields of activity params from the request's actor.
func actorActivity(ctx context.Context, p *ActivityInsertParams) *ActivityInsertParams {
	a := ActorFrom(ctx)
	p.ActorType, p.ActorID, p.AgentID = ActorFields(a)
	p.RunID = a.RunID
	return p
}

// requireBoardSession allows the signed-in board session user and the trusted local board.
func requireBoardSession(a *Actor) error {
	if a.IsBoard() && (a.Source == SourceSession || a.Source == SourceLocalImplicit) && a.UserID != "" {
		return nil
	}
	return Forbidden("Board API keys can only be managed from a signed-in board session")
}

type boardKeyListEndpoint struct{ k *Kernel }

func (e *boardKeyListEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "GET /api/board-api-keys", Access: AccessBoard, Summary: "List the caller's board API keys (tokens are never shown again)"}
}

func (e *boardKeyListEndpoint) Execute(ctx context.Context, _ *struct{}) (*[]*BoardAPIKey, error) {
	a := ActorFrom(ctx)
	if err := requireBoardSession(a); err != nil {
		return nil, err
	}
	rows, err := e.k.Pool.Query(ctx, `SELECT `+boardKeyColumns+` FROM kernel.board_api_keys WHERE user_id = $1 ORDER BY created_at DESC, id`, a.UserID)
	if err != nil {
		return nil, fmt.Errorf("error listing board API keys: %w", err)
	}
	defer rows.Close()
	out := []*BoardAPIKey{}
	for rows.Next() {
		b, err := scanBoardKey(rows)
		if err != nil {
			return nil, fmt.Errorf("error listing board API keys: %w", err)
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error listing board API keys: %w", err)
	}
	return &out, nil
}

type boardKeyCreateRequest struct {
	// Name labels the key; default "default".
	Name string `json:"name"`
	// ExpiresAt is an optional future expiry.
	ExpiresAt *time.Time `json:"expiresAt"`
}

type boardKeyCreateEndpoint struct{ k *Kernel }

func (e *boardKeyCreateEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "POST /api/board-api-keys", Status: http.StatusCreated, Access: AccessBoard, Summary: "Mint a board API key; the token is shown only in this response"}
}

func (e *boardKeyCreateEndpoint) Execute(ctx context.Context, req *boardKeyCreateRequest) (*BoardAPIKeyCreated, error) {
	a := ActorFrom(ctx)
	if err := requireBoardSession(a); err != nil {
		return nil, err
	}
	name := strings.TrimSpace(req.Name)
	if name == "" {
		name = "default"
	}
	if len(name) > 200 {
		return nil, ValidationError(ValidationDetail{Path: "name", Message: "must be at most 200 characters"})
	}
	if req.ExpiresAt != nil && !req.ExpiresAt.After(time.Now()) {
		return nil, ValidationError(ValidationDetail{Path: "expiresAt", Message: "must be in the future"})
	}
	token := newBoardKeyToken()
	b, err := boardKeyInsert(ctx, e.k.Pool, a.UserID, name, HashToken(token), req.ExpiresAt)
	if err != nil {
		return nil, err
	}
	e.k.recordActivity(ctx, actorActivity(ctx, &ActivityInsertParams{
		Action: "board_api_key.created", EntityType: "board_api_key", EntityID: b.ID,
		Details: map[string]any{"name": b.Name, "userId": b.UserID},
	}))
	return &BoardAPIKeyCreated{BoardAPIKey: *b, Token: token}, nil
}

type boardKeyRevokeRequest struct {
	KeyID string `path:"keyId"`
}

type boardKeyRevokeEndpoint struct{ k *Kernel }

func (e *boardKeyRevokeEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "DELETE /api/board-api-keys/{keyId}", Access: AccessBoard, Summary: "Revoke one of the caller's board API keys"}
}

func (e *boardKeyRevokeEndpoint) Execute(ctx context.Context, req *boardKeyRevokeRequest) (*BoardAPIKey, error) {
	a := ActorFrom(ctx)
	if err := requireBoardSession(a); err != nil {
		return nil, err
	}
	b, revoked, err := e.k.boardKeyRevoke(ctx, a.UserID, req.KeyID)
	if err != nil {
		return nil, err
	}
	if revoked {
		e.k.recordActivity(ctx, actorActivity(ctx, &ActivityInsertParams{
			Action: "board_api_key.revoked", EntityType: "board_api_key", EntityID: b.ID,
			Details: map[string]any{"name": b.Name, "userId": b.UserID},
		}))
	}
	return b, nil
}

// boardKeyRevoke revokes a board API key of a user. Revoking a revoked key returns it
// unchanged (revoked false); a key of another user or a missing one is a 404.
func (k *Kernel) boardKeyRevoke(ctx context.Context, userID, keyID string) (*BoardAPIKey, bool, error) {
	if !isUUID(keyID) {
		return nil, false, NotFound("Board API key not found")
	}
	b, err := scanBoardKey(k.Pool.QueryRow(ctx, `UPDATE kernel.board_api_keys SET revoked_at = now()
		WHERE id = $1 AND user_id = $2 AND revoked_at IS NULL RETURNING `+boardKeyColumns, keyID, userID))
	if err == nil {
		return b, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, false, fmt.Errorf("error revoking board API key %s: %w", keyID, err)
	}
	b, err = scanBoardKey(k.Pool.QueryRow(ctx, `SELECT `+boardKeyColumns+` FROM kernel.board_api_keys WHERE id = $1 AND user_id = $2`, keyID, userID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, NotFound("Board API key not found")
	}
	if err != nil {
		return nil, false, fmt.Errorf("error reading board API key %s: %w", keyID, err)
	}
	return b, false, nil
}

func (k *Kernel) boardKeyRoutes() []*Route {
	return []*Route{
		Mount[struct{}, []*BoardAPIKey](&boardKeyListEndpoint{k}),
		Mount[boardKeyCreateRequest, BoardAPIKeyCreated](&boardKeyCreateEndpoint{k}),
		Mount[boardKeyRevokeRequest, BoardAPIKey](&boardKeyRevokeEndpoint{k}),
	}
}
