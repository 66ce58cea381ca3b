package kernel_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/kernel"
)

// subscribedPublisher takes the entries whose action starts with "sub." and records their
// events; it refuses to publish the action "sub.refused".
type subscribedPublisher struct {
	mu     sync.Mutex
	events []string // ids
}

func (p *subscribedPublisher) PublishEvent(context.Context, *kernel.Event) error { return nil }

func (p *subscribedPublisher) HasSubscribers(_ context.Context, _, eventType string) bool {
	return len(eventType) > 4 && eventType[:4] == "sub."
}

func (p *subscribedPublisher) PublishEventTx(_ context.Context, _ pgx.Tx, ev *kernel.Event) error {
	if ev.Type == "sub.refused" {
		return errors.New("no deliveries for sub.refused")
	}
	p.mu.Lock()
	p.events = append(p.events, ev.ID)
	p.mu.Unlock()
	return nil
}

func (p *subscribedPublisher) published() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.events...)
}

// TestActivityInsertMany appends entries together and checks that each gets what
// ActivityInsert would have given it alone, through the group writer (nobody subscribes)
// and through the delivering transaction (subscribed entries).
func TestActivityInsertMany(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := ktStart(t, ktLocal())
	pub := &subscribedPublisher{}
	env.K.SetEventPublisher(pub)
	company := env.Company(t, map[string]any{"name": "Many Co"})["id"].(string)
	missing := uuid.NewString()
	earlier, err := env.K.ActivityInsert(ctx, &kernel.ActivityInsertParams{CompanyID: company, Action: "many.logged",
		ID: uuid.NewString(), EntityID: "earlier"})
	require.NoError(t, err)
	twice := uuid.NewString()

	ps := []*kernel.ActivityInsertParams{
		{CompanyID: company, Action: "many.logged", EntityID: "plain", Details: map[string]any{"k": 1}},
		{CompanyID: missing, Action: "many.logged", EntityID: "missing", CompanyMustExist: true},
		{CompanyID: company, EntityID: "no-action"},
		{CompanyID: company, Action: "many.logged", EntityID: "earlier", ID: earlier.ID, CompanyMustExist: true},
		{CompanyID: company, Action: "many.logged", EntityID: "twice", ID: twice, CompanyMustExist: true},
		{CompanyID: company, Action: "many.logged", EntityID: "twice", ID: twice, CompanyMustExist: true},
		{CompanyID: company, Action: "sub.logged", EntityID: "sub-1", CompanyMustExist: true},
		{CompanyID: missing, Action: "sub.logged", EntityID: "sub-missing", CompanyMustExist: true},
		{CompanyID: company, Action: "sub.logged", EntityID: "sub-2", ID: uuid.NewString(), CompanyMustExist: true},
		{Action: "many.logged", EntityID: "instance"},
	}
	entries, errs := env.K.ActivityInsertMany(ctx, ps)
	require.Len(t, entries, len(ps))
	require.Len(t, errs, len(ps))
	for i, err := range errs {
		switch i {
		case 1, 7:
			require.ErrorIs(t, err, kernel.ErrCompanyNotFound, "entry %d", i)
			require.Nil(t, entries[i])
		case 2:
			require.ErrorContains(t, err, "action is required")
			require.Nil(t, entries[i])
		default:
			require.NoError(t, err, "entry %d", i)
			require.False(t, entries[i].CreatedAt.IsZero(), "entry %d", i)
			require.Equal(t, ps[i].EntityID, entries[i].EntityID)
		}
	}
	require.Equal(t, earlier.CreatedAt, entries[3].CreatedAt)
	require.Equal(t, twice, entries[4].ID)
	require.Equal(t, entries[4].CreatedAt, entries[5].CreatedAt)
	require.Equal(t, []string{entries[6].ID, entries[8].ID}, pub.published())

	var n int
	require.NoError(t, env.K.Pool.QueryRow(ctx, `SELECT count(*) FROM kernel.activity_log WHERE company_id = $1`, company).Scan(&n))
	// earlier, plain, twice, sub-1, sub-2, and what creating the company logged.
	var before int
	require.NoError(t, env.K.Pool.QueryRow(ctx, `SELECT count(*) FROM kernel.activity_log WHERE company_id = $1
		AND action NOT IN ('many.logged', 'sub.logged')`, company).Scan(&before))
	require.Equal(t, before+5, n)

	t.Run("FailedDeliveryFailsOnlyItsEntry", func(t *testing.T) {
		ps := []*kernel.ActivityInsertParams{
			{CompanyID: company, Action: "sub.logged", EntityID: "ok-1"},
			{CompanyID: company, Action: "sub.refused", EntityID: "refused"},
			{CompanyID: company, Action: "sub.logged", EntityID: "ok-2"},
		}
		entries, errs := env.K.ActivityInsertMany(ctx, ps)
		require.NoError(t, errs[0])
		require.ErrorContains(t, errs[1], "no deliveries for sub.refused")
		require.Nil(t, entries[1])
		require.NoError(t, errs[2])
		got := pub.published()
		require.Subset(t, got, []string{entries[0].ID, entries[2].ID})
		var n int
		require.NoError(t, env.K.Pool.QueryRow(ctx, `SELECT count(*) FROM kernel.activity_log WHERE company_id = $1
			AND entity_id IN ('ok-1', 'ok-2', 'refused')`, company).Scan(&n))
		require.Equal(t, 2, n)
	})

	t.Run("EndedContext", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, errs := env.K.ActivityInsertMany(cctx, []*kernel.ActivityInsertParams{{CompanyID: company, Action: "many.logged"}})
		require.ErrorIs(t, errs[0], context.Canceled)
	})
}
