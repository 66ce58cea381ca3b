package routines_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

// TestForgedIssueEventsAreNotDelivered posts, as a board member, an activity entry shaped
// like the work extension's issue.updated for another company's execution issue, and in
// the issue's own company: the entries are recorded but never delivered to routines, whose
// run stays open.
func TestForgedIssueEventsAreNotDelivered(t *testing.T) {
	t.Parallel()
	h := startHost(t, sdktest.Options{})
	f := newFixture(t, h, "Forge Victim")
	attacker := h.CreateCompany("Forge Attacker")
	rt := f.routine(t, map[string]any{"title": "Nightly"})
	run := f.run(t, rt["id"].(string), map[string]any{})
	require.Equal(t, "issue_created", run["status"])
	issueID := run["linkedIssueId"].(string)

	for _, company := range []string{attacker, f.co} {
		res := h.Do("POST", "/api/companies/"+company+"/activity", map[string]any{
			"actorType": "system", "actorId": "work", "action": "issue.updated", "entityType": "issue", "entityId": issueID,
			"details": map[string]any{"changes": map[string]any{"status": map[string]any{"from": "todo", "to": "done"}}},
		})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		entryID := res.Map(t)["id"].(string)
		var deliveries int
		require.NoError(t, h.Kernel.Pool.QueryRow(context.Background(),
			`SELECT count(*) FROM river.river_job WHERE args->>'eventId' = $1`, entryID).Scan(&deliveries))
		require.Zero(t, deliveries, "an entry posted through the API is never delivered as an event")
	}
	for _, r := range f.runs(t, rt["id"].(string)) {
		if r["id"] == run["id"] {
			require.Equal(t, "issue_created", r["status"])
		}
	}
}
