package statuscards

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/keelhq/keel/sdk"
)

// queryer is a pool or a transaction.
type queryer interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// cardGet reads a card; nil when it does not exist.
func cardGet(ctx context.Context, q queryer, id string) (*Card, error) {
	if !sdk.IsUUID(id) {
		return nil, nil
	}
	c, err := scanCard(q.QueryRow(ctx, `SELECT `+cardCols+` FROM status_cards WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("error reading status card %s: %w", id, err)
	}
	return c, nil
}

// cardForUpdate reads and locks a card inside a transaction; nil when it does not exist.
func cardForUpdate(ctx context.Context, tx pgx.Tx, id string) (*Card, error) {
	c, err := scanCard(tx.QueryRow(ctx, `SELECT `+cardCols+` FROM status_cards WHERE id = $1 FOR UPDATE`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("error locking status card %s: %w", id, err)
	}
	return c, nil
}

// entryGet reads a ledger entry; nil when it does not exist.
func entryGet(ctx context.Context, q queryer, id string) (*Entry, error) {
	e, err := scanEntry(q.QueryRow(ctx, `SELECT `+entryCols+` FROM status_card_updates WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("error reading status card update %s: %w", id, err)
	}
	return e, nil
}

// readCard reads a card the request's actor may reach (404 otherwise).
func (x *StatusCards) readCard(ctx context.Context, id string) (*Card, error) {
	c, err := cardGet(ctx, x.pool, id)
	if err != nil {
		return nil, err
	}
	if c == nil || !sdk.CanAccessCompany(sdk.ActorFrom(ctx), c.CompanyID) {
		return nil, sdk.NotFound(msgCardNotFound)
	}
	return c, nil
}

// manageCard reads a card the request's actor may manage: company access, tasks:assign in
// its company, and for agents only cards they authored.
func (x *StatusCards) manageCard(ctx context.Context, id string) (*Card, error) {
	c, err := x.readCard(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := sdk.RequireCompanyAccess(ctx, c.CompanyID); err != nil {
		return nil, err
	}
	if err := x.host.RequirePermission(ctx, c.CompanyID, "tasks:assign"); err != nil {
		return nil, err
	}
	if a := sdk.ActorFrom(ctx); isAgent(a) && deref(c.CreatedByAgentID) != a.AgentId {
		return nil, sdk.Forbidden(msgAgentsOwnCards)
	}
	return c, nil
}
