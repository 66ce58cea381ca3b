package kernel_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/host/pgembed/pgtest"
	"github.com/keelhq/keel/kernel"
)

// TestActivityInsertConcurrent appends many entries at once (the writer commits them in
// groups) and checks that each caller gets its own result and each entry is stored once.
func TestActivityInsertConcurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := ktStart(t, ktLocal())
	company := env.Company(t, map[string]any{"name": "Busy Co"})["id"].(string)
	missing := uuid.NewString()
	earlier, err := env.K.ActivityInsert(ctx, &kernel.ActivityInsertParams{CompanyID: company, Action: "burst.logged",
		ID: uuid.NewString(), EntityID: "earlier"})
	require.NoError(t, err)
	shared := []string{uuid.NewString(), uuid.NewString(), uuid.NewString()}

	// Each kind of entry, and what appending it gives.
	type kind struct {
		params  func(i int) *kernel.ActivityInsertParams
		wantErr error
	}
	kinds := []kind{
		{params: func(i int) *kernel.ActivityInsertParams {
			return &kernel.ActivityInsertParams{CompanyID: company, Details: map[string]any{"i": i}}
		}},
		{params: func(int) *kernel.ActivityInsertParams {
			return &kernel.ActivityInsertParams{CompanyID: company, CompanyMustExist: true}
		}},
		{params: func(int) *kernel.ActivityInsertParams {
			return &kernel.ActivityInsertParams{CompanyID: missing, CompanyMustExist: true}
		}, wantErr: kernel.ErrCompanyNotFound},
		{params: func(i int) *kernel.ActivityInsertParams { // one id from several callers at once
			return &kernel.ActivityInsertParams{CompanyID: company, ID: shared[i%len(shared)], CompanyMustExist: true}
		}},
		{params: func(int) *kernel.ActivityInsertParams {
			return &kernel.ActivityInsertParams{CompanyID: company, ID: uuid.NewString(), CompanyMustExist: true}
		}},
		{params: func(int) *kernel.ActivityInsertParams { // recorded before: a repeated outbox delivery
			return &kernel.ActivityInsertParams{CompanyID: company, ID: earlier.ID, EntityID: "earlier", CompanyMustExist: true}
		}},
		{params: func(int) *kernel.ActivityInsertParams {
			return &kernel.ActivityInsertParams{CompanyID: missing, ID: uuid.NewString(), CompanyMustExist: true}
		}, wantErr: kernel.ErrCompanyNotFound},
		{params: func(int) *kernel.ActivityInsertParams { return &kernel.ActivityInsertParams{} }}, // instance-level
	}
	const rounds = 40
	n := rounds * len(kinds)
	entries := make([]*kernel.ActivityEntry, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := kinds[i%len(kinds)].params(i / len(kinds))
			p.Action, p.EntityType = "burst.logged", "burst"
			if p.EntityID == "" {
				p.EntityID = fmt.Sprint(i)
			}
			<-start
			entries[i], errs[i] = env.K.ActivityInsert(ctx, p)
		}()
	}
	close(start)
	wg.Wait()

	stored := map[string]time.Time{}
	rows, err := env.K.Pool.Query(ctx, `SELECT id::text, created_at FROM kernel.activity_log WHERE action = 'burst.logged'`)
	require.NoError(t, err)
	for rows.Next() {
		var id string
		var at time.Time
		require.NoError(t, rows.Scan(&id, &at))
		_, dup := stored[id]
		require.False(t, dup, "entry %s stored twice", id)
		stored[id] = at
	}
	require.NoError(t, rows.Err())

	for i := range n {
		k := kinds[i%len(kinds)]
		if k.wantErr != nil {
			require.ErrorIs(t, errs[i], k.wantErr, "entry %d", i)
			require.Nil(t, entries[i])
			continue
		}
		require.NoError(t, errs[i], "entry %d", i)
		at, ok := stored[entries[i].ID]
		require.True(t, ok, "entry %d not stored", i)
		require.Equal(t, at, entries[i].CreatedAt, "entry %d", i)
	}
	for i := 5; i < n; i += len(kinds) {
		require.Equal(t, earlier.CreatedAt, entries[i].CreatedAt, "a repeat keeps the first created_at")
	}
	// Per round: plain, must-exist, fresh id and instance-level entries; plus the shared ids
	// and the earlier entry once.
	require.Len(t, stored, 4*rounds+len(shared)+1)

	// The company's log over HTTP shows them too (the instance-level ones are in no company).
	list := env.Do(t, "GET", "/api/companies/"+company+"/activity?action=burst.logged&limit=500", nil).
		RequireStatus(t, http.StatusOK).List(t)
	require.Len(t, list, 3*rounds+len(shared)+1)
}

// TestActivityInsertAfterClose checks that an append after the kernel closed fails at once
// instead of waiting for a stopped writer.
func TestActivityInsertAfterClose(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k, err := kernel.New(ctx, pgtest.NewDatabase(t), ktLocal())
	require.NoError(t, err)
	_, err = k.ActivityInsert(ctx, &kernel.ActivityInsertParams{Action: "before.close"})
	require.NoError(t, err)
	k.Close()
	k.Close() // idempotent
	_, err = k.ActivityInsert(ctx, &kernel.ActivityInsertParams{Action: "after.close"})
	require.ErrorContains(t, err, "error appending activity after.close")
}
