package agents_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/kernel"
)

// TestIssueCreateConcurrentWakes creates many assigned issues at once, more than the work
// extension's pool has connections: each create's wake comes here, and the wake reads the
// issue back from work (work.issues.locks), so a work delivery that kept its connection
// while it called the host would wait forever for another. Every create answers 201 and
// records its activity entry.
func TestIssueCreateConcurrentWakes(t *testing.T) {
	t.Parallel()
	h := startAgents(t)
	companyID := h.CreateCompany("Concurrent Wakes Co")
	agent := createAgent(t, h, companyID, map[string]any{
		"name": "Busy Worker", "role": "engineer", "adapterType": "process", "adapterConfig": map[string]any{"command": "/bin/true"},
		"runtimeConfig": map[string]any{"heartbeat": map[string]any{"enabled": false, "maxConcurrentRuns": 1}}})
	const n = 24
	var wg sync.WaitGroup
	statuses := make([]int, n)
	ids := make([]string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := h.Do("POST", "/api/companies/"+companyID+"/issues", map[string]any{
				"title": fmt.Sprintf("Concurrent issue %d", i), "assigneeAgentId": agent["id"]})
			statuses[i] = res.Status
			var iss struct{ ID string }
			if json.Unmarshal(res.Body, &iss) == nil {
				ids[i] = iss.ID
			}
		}()
	}
	wg.Wait()
	for i, st := range statuses {
		require.Equal(t, http.StatusCreated, st, "create %d", i)
		entries, err := h.Kernel.ActivityList(context.Background(), &kernel.ActivityListParams{CompanyID: companyID, EntityID: ids[i], Limit: 50})
		require.NoError(t, err)
		found := false
		for _, e := range entries {
			found = found || e.Action == "issue.created"
		}
		require.True(t, found, "issue %d has its issue.created entry", i)
	}
}
