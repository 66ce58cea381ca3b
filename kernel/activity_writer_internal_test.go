package kernel

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/host/pgembed/pgtest"
)

// TestActivityWriterGroup hands entries straight to the flusher's group write, so that
// every case below is one group for sure, and checks what each caller gets and which rows
// are stored.
func TestActivityWriterGroup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k, err := New(ctx, pgtest.NewDatabase(t), Config{DeploymentMode: ModeLocalTrusted})
	require.NoError(t, err)
	t.Cleanup(k.Close)
	c, err := k.CompanyInsert(ctx, &CompanyInsertParams{Name: "Group Co"})
	require.NoError(t, err)
	// A writer whose flusher never runs: the test flushes its groups itself.
	w := &activityWriter{k: k}

	prepare := func(t *testing.T, p *ActivityInsertParams) *activityAppend {
		t.Helper()
		e, err := newActivityEntry(p)
		require.NoError(t, err)
		return &activityAppend{p: p, e: e, done: make(chan struct{})}
	}
	count := func(t *testing.T, id string) int {
		t.Helper()
		var n int
		require.NoError(t, k.Pool.QueryRow(ctx, `SELECT count(*) FROM kernel.activity_log WHERE id = $1`, id).Scan(&n))
		return n
	}
	stored := func(t *testing.T, id string) time.Time {
		t.Helper()
		var at time.Time
		require.NoError(t, k.Pool.QueryRow(ctx, `SELECT created_at FROM kernel.activity_log WHERE id = $1`, id).Scan(&at))
		return at
	}

	t.Run("Results", func(t *testing.T) {
		earlier, err := k.ActivityInsert(ctx, &ActivityInsertParams{CompanyID: c.ID, Action: "issue.created", ID: uuid.NewString()})
		require.NoError(t, err)
		twice := uuid.NewString()
		missing := uuid.NewString()
		cases := []struct {
			name     string
			p        *ActivityInsertParams
			wantErr  error
			wantRows int
		}{
			{"Plain", &ActivityInsertParams{CompanyID: c.ID, Action: "issue.created", Details: map[string]any{"n": 1}}, nil, 1},
			{"MustExist", &ActivityInsertParams{CompanyID: c.ID, Action: "issue.created", CompanyMustExist: true}, nil, 1},
			{"IDOnce", &ActivityInsertParams{CompanyID: c.ID, Action: "issue.created", ID: uuid.NewString(), CompanyMustExist: true}, nil, 1},
			{"IDTwiceFirst", &ActivityInsertParams{CompanyID: c.ID, Action: "issue.created", ID: twice}, nil, 1},
			{"IDTwiceSecond", &ActivityInsertParams{CompanyID: c.ID, Action: "issue.created", ID: twice}, nil, 1},
			{"IDUpperCase", &ActivityInsertParams{CompanyID: c.ID, Action: "issue.created", ID: "A1B2C3D4-0000-4000-8000-" + uuid.NewString()[24:]}, nil, 1},
			{"IDRecordedEarlier", &ActivityInsertParams{CompanyID: c.ID, Action: "issue.created", ID: earlier.ID}, nil, 1},
			{"NoCompany", &ActivityInsertParams{CompanyID: missing, Action: "issue.created", CompanyMustExist: true}, ErrCompanyNotFound, 0},
			{"NoCompanyWithID", &ActivityInsertParams{CompanyID: missing, Action: "issue.created", ID: uuid.NewString(), CompanyMustExist: true}, ErrCompanyNotFound, 0},
			{"NoCompanyNotChecked", &ActivityInsertParams{CompanyID: missing, Action: "issue.created"}, nil, 1},
			{"Instance", &ActivityInsertParams{Action: "extension.installed", AgentID: uuid.NewString(), RunID: "run-1", ResponsibleUserID: "u-1"}, nil, 1},
		}
		group := make([]*activityAppend, len(cases))
		for i, tc := range cases {
			group[i] = prepare(t, tc.p)
		}
		w.flush(group)
		for i, tc := range cases {
			a := group[i]
			require.True(t, a.result == activityWritten || a.result == activityUnresolved, "%s: %d", tc.name, a.result)
			err := w.finish(ctx, a)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr, tc.name)
			} else {
				require.NoError(t, err, tc.name)
				require.Equal(t, stored(t, a.e.ID), a.e.CreatedAt, tc.name)
			}
			require.Equal(t, tc.wantRows, count(t, a.e.ID), tc.name)
		}
		require.Equal(t, earlier.CreatedAt, group[6].e.CreatedAt, "a repeat takes the earlier created_at")
		require.Equal(t, group[3].e.CreatedAt, group[4].e.CreatedAt, "one id twice in a group is one row")

		var instance ActivityEntry
		require.NoError(t, k.Pool.QueryRow(ctx, `SELECT company_id, agent_id::text, run_id, responsible_user_id, details
			FROM kernel.activity_log WHERE id = $1`, group[10].e.ID).
			Scan(&instance.CompanyID, &instance.AgentID, &instance.RunID, &instance.ResponsibleUserID, &instance.Details))
		require.Nil(t, instance.CompanyID)
		require.Equal(t, cases[10].p.AgentID, *instance.AgentID)
		require.Equal(t, "run-1", *instance.RunID)
		require.Equal(t, "u-1", *instance.ResponsibleUserID)
		require.JSONEq(t, `{}`, string(instance.Details))
		var details []byte
		require.NoError(t, k.Pool.QueryRow(ctx, `SELECT details FROM kernel.activity_log WHERE id = $1`, group[0].e.ID).Scan(&details))
		require.JSONEq(t, `{"n": 1}`, string(details))
	})

	t.Run("FailedGroupWritesEachAlone", func(t *testing.T) {
		good := prepare(t, &ActivityInsertParams{CompanyID: c.ID, Action: "issue.created"})
		bad := prepare(t, &ActivityInsertParams{CompanyID: c.ID, Action: "issue.created", AgentID: "not-a-uuid"})
		goodID := prepare(t, &ActivityInsertParams{CompanyID: c.ID, Action: "issue.created", ID: uuid.NewString()})
		badID := prepare(t, &ActivityInsertParams{CompanyID: c.ID, Action: "issue.created", ID: uuid.NewString(), AgentID: "not-a-uuid"})
		w.flush([]*activityAppend{good, bad, goodID, badID})
		for _, a := range []*activityAppend{good, bad, goodID, badID} {
			require.Equal(t, activityFailed, a.result)
		}
		for _, a := range []*activityAppend{good, goodID} {
			require.NoError(t, w.finish(ctx, a))
			require.Equal(t, stored(t, a.e.ID), a.e.CreatedAt)
		}
		for _, a := range []*activityAppend{bad, badID} {
			require.ErrorContains(t, w.finish(ctx, a), "error appending activity issue.created")
			require.Zero(t, count(t, a.e.ID))
		}
	})

	t.Run("OutboxGroupCommitsAsynchronously", func(t *testing.T) {
		for _, tc := range []struct {
			q    string
			want string
		}{{activityGroupAsyncSQL, "off"}, {activityGroupSyncSQL, "on"}} {
			tx, err := k.Pool.Begin(ctx)
			require.NoError(t, err)
			_, err = tx.Exec(ctx, tc.q, []string{uuid.NewString()}, []*string{&c.ID}, []string{"system"}, []string{""},
				[]string{"issue.created"}, []string{""}, []string{""}, []*string{nil}, []*string{nil}, []*string{nil},
				[]string{"{}"}, []bool{true})
			require.NoError(t, err)
			var setting string
			require.NoError(t, tx.QueryRow(ctx, `SELECT current_setting('synchronous_commit')`).Scan(&setting))
			require.Equal(t, tc.want, setting)
			require.NoError(t, tx.Rollback(ctx))
		}
	})

	t.Run("WithdrawnEntriesAreLeftOut", func(t *testing.T) {
		kept := prepare(t, &ActivityInsertParams{CompanyID: c.ID, Action: "issue.created"})
		gone := prepare(t, &ActivityInsertParams{CompanyID: c.ID, Action: "issue.created"})
		gone.withdrawn = true
		w.queue = []*activityAppend{gone, kept}
		group := w.take()
		require.Equal(t, []*activityAppend{kept}, group)
		require.Empty(t, w.queue)
	})

	t.Run("OneOutboxGroupInFlight", func(t *testing.T) {
		fromOutbox := prepare(t, &ActivityInsertParams{CompanyID: c.ID, Action: "issue.created", ID: uuid.NewString()})
		next := prepare(t, &ActivityInsertParams{CompanyID: c.ID, Action: "issue.created"})
		w.queue = []*activityAppend{fromOutbox}
		require.Equal(t, []*activityAppend{fromOutbox}, w.take())
		require.True(t, w.outboxBusy)
		w.queue = []*activityAppend{next}
		require.Empty(t, w.take(), "the next group waits for the outbox group")
		w.flush([]*activityAppend{fromOutbox})
		require.False(t, w.outboxBusy)
		require.NoError(t, w.finish(ctx, fromOutbox))
		require.Equal(t, []*activityAppend{next}, w.take())
		require.False(t, w.outboxBusy)
	})
}
