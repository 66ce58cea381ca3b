package work_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
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

// TestIssueCreateConcurrentWakes creates many assigned issues at once, more than the work
// extension's pool has connections: each create's wake goes to the agents extension,
// which reads the issue back from work, so a delivery that kept its connection while the
// host was called would wait forever for one. Every create answers 201 with its activity.
func TestIssueCreateConcurrentWakes(t *testing.T) {
	t.Parallel()
	h := waitWorkReady(t, startWork(t))
	sdktest.WaitFor(t, time.Minute, func() bool {
		res := h.Do("GET", "/api/plugins/agents", nil)
		return res.Status == http.StatusOK && res.Map(t)["status"] == "ready"
	}, "the agents extension to be ready")
	companyID := h.CreateCompany("Concurrent Wakes Co")
	// An agent of the agents extension (not only a kernel principal), so that its wakes
	// reach the issue lookup.
	res := h.Do("POST", "/api/companies/"+companyID+"/agents", map[string]any{
		"name": "Busy Worker", "role": "engineer", "adapterType": "process", "adapterConfig": map[string]any{"command": "/bin/true"},
		"runtimeConfig": map[string]any{"heartbeat": map[string]any{"enabled": false, "wakeOnDemand": false}}})
	require.Equal(t, http.StatusCreated, res.Status, "create agent: %s", res.Body)
	var agent struct{ ID string }
	res.JSON(t, &agent)
	const n = 24
	var wg sync.WaitGroup
	statuses := make([]int, n)
	ids := make([]string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := h.Do("POST", "/api/companies/"+companyID+"/issues", map[string]any{
				"title": fmt.Sprintf("Concurrent issue %d", i), "assigneeAgentId": agent.ID})
			statuses[i] = res.Status
			if res.Status == http.StatusCreated {
				var iss areaIssue
				if json.Unmarshal(res.Body, &iss) == nil {
					ids[i] = iss.ID
				}
			}
		}()
	}
	wg.Wait()
	for i, st := range statuses {
		require.Equal(t, http.StatusCreated, st, "create %d", i)
		requireActivity(t, h, companyID, ids[i], "issue.created", "", "")
	}
}
