package work_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

// TestOutboxDeliversLeftovers plays a crash between a write's commit and the delivery of
// its activity entry and wake: the rows it left in the work extension's outbox are
// delivered by the drainer, and delivering one again records nothing twice.
func TestOutboxDeliversLeftovers(t *testing.T) {
	t.Parallel()
	h := waitWorkReady(t, startWork(t))
	companyID := h.CreateCompany("Outbox Co")
	iss := newAreaIssue(t, h, companyID, "")
	ctx := context.Background()
	leftover := func(id string) {
		_, err := h.Kernel.Pool.Exec(ctx, `INSERT INTO ext_work.outbox (id, kind, payload) VALUES ($1, 'activity', $2)`, id,
			`{"companyId":"`+companyID+`","action":"issue.outbox_test","entityType":"issue","entityId":"`+iss.ID+`","details":{"n":1}}`)
		require.NoError(t, err)
	}
	count := func(id string) (entries, pending int) {
		require.NoError(t, h.Kernel.Pool.QueryRow(ctx, `SELECT count(*) FROM kernel.activity_log WHERE id = $1`, id).Scan(&entries))
		require.NoError(t, h.Kernel.Pool.QueryRow(ctx, `SELECT count(*) FROM ext_work.outbox WHERE id = $1`, id).Scan(&pending))
		return entries, pending
	}
	id := uuid.NewString()
	leftover(id)
	sdktest.WaitFor(t, 30*time.Second, func() bool { e, p := count(id); return e == 1 && p == 0 }, "the drainer to deliver the leftover")
	requireActivity(t, h, companyID, iss.ID, "issue.outbox_test", "", "")

	// The same row delivered again (a crash after the append, before the delete) is
	// recorded once.
	leftover(id)
	sdktest.WaitFor(t, 30*time.Second, func() bool { _, p := count(id); return p == 0 }, "the drainer to deliver the repeat")
	entries, _ := count(id)
	require.Equal(t, 1, entries)
}
