package work_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

// issCheckout checks an issue out as the given headers.
func issCheckout(h *sdktest.Host, ref, agentID string, expected []string, headers ...string) *sdktest.Response {
	return h.Do("POST", "/api/issues/"+ref+"/checkout", map[string]any{"agentId": agentID, "expectedStatuses": expected}, headers...)
}

func TestIssueCheckout(t *testing.T) {
	t.Parallel()
	h := issStart(t)
	company := h.CreateCompany("Checkout Co")
	other := h.CreateCompany("Elsewhere Co")
	alice := h.CreateAgent(company, "Alice", "engineer")
	bob := h.CreateAgent(company, "Bob", "engineer")
	outsider := h.CreateAgent(other, "Outsider", "engineer")
	todo := []string{"todo"}

	t.Run("Success", func(t *testing.T) {
		iss := issCreate(t, h, company, map[string]any{"title": "Take me", "status": "todo"})
		id := iss["id"].(string)
		res := issCheckout(h, iss["identifier"].(string), alice.ID, todo, alice.As("run-a1")...)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		m := res.Map(t)
		require.Equal(t, "in_progress", m["status"])
		require.Equal(t, alice.ID, m["assigneeAgentId"])
		require.Equal(t, "run-a1", m["checkoutRunId"])
		require.Equal(t, "run-a1", m["executionRunId"])
		require.Equal(t, "alice", m["executionAgentNameKey"])
		require.NotNil(t, m["executionLockedAt"])
		require.NotNil(t, m["startedAt"])
		d := issActivity(t, h, company, id, "issue.checked_out")
		require.Equal(t, "run-a1", d["runId"])
		require.Equal(t, alice.ID, d["agentId"])

		// The same run again is idempotent and records nothing new.
		res = issCheckout(h, id, alice.ID, todo, alice.As("run-a1")...)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, "run-a1", res.Map(t)["checkoutRunId"])
		require.Equal(t, m["startedAt"], res.Map(t)["startedAt"])
		require.Equal(t, 1, issActivityCount(t, h, company, id, "issue.checked_out"))

		// Another run of the same agent conflicts while the first holds it.
		res = issCheckout(h, id, alice.ID, []string{"todo", "in_progress"}, alice.As("run-a2")...)
		m = issWantErr(t, res, http.StatusConflict, "Issue checkout conflict")
		require.Equal(t, map[string]any{"issueId": id, "status": "in_progress", "assigneeAgentId": alice.ID,
			"checkoutRunId": "run-a1", "executionRunId": "run-a1"}, m["details"])
	})

	t.Run("JWTRunAndBoardForAgent", func(t *testing.T) {
		iss := issCreate(t, h, company, map[string]any{"title": "JWT", "status": "todo"})
		res := issCheckout(h, iss["id"].(string), bob.ID, todo, "Authorization", "Bearer "+h.AgentJWT(bob, "run-jwt"))
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, "run-jwt", res.Map(t)["checkoutRunId"])

		iss = issCreate(t, h, company, map[string]any{"title": "Board assigns", "status": "todo"})
		res = issCheckout(h, iss["id"].(string), bob.ID, todo, "X-Service-Run-Id", "run-board")
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, bob.ID, res.Map(t)["assigneeAgentId"])
	})

	t.Run("Errors", func(t *testing.T) {
		iss := issCreate(t, h, company, map[string]any{"title": "Guarded", "status": "todo"})
		id := iss["id"].(string)
		m := issWantErr(t, issCheckout(h, id, alice.ID, todo, alice.As("")...), http.StatusUnprocessableEntity,
			"Run id required for checkout (send X-Service-Run-Id or use a run's agent JWT)")
		require.Equal(t, "run_id_required", m["code"])
		issWantErr(t, issCheckout(h, id, bob.ID, todo, alice.As("run-x")...), http.StatusForbidden, "Agents can only check out issues for themselves")
		issWantValidation(t, issCheckout(h, id, alice.ID, []string{}, alice.As("run-x")...), "expectedStatuses")
		issWantValidation(t, issCheckout(h, id, alice.ID, []string{"open"}, alice.As("run-x")...), "expectedStatuses.0")
		issWantValidation(t, issCheckout(h, id, "alice", todo, alice.As("run-x")...), "agentId")
		issWantErr(t, issCheckout(h, id, outsider.ID, todo, "X-Service-Run-Id", "run-b"), http.StatusUnprocessableEntity, "Agent not found in company")
		issWantErr(t, issCheckout(h, uuid.NewString(), alice.ID, todo, alice.As("run-x")...), http.StatusNotFound, "Issue not found")
		res := issCheckout(h, id, outsider.ID, todo, outsider.As("run-o")...)
		require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
		// Unexpected status.
		m = issWantErr(t, issCheckout(h, id, alice.ID, []string{"backlog"}, alice.As("run-x")...), http.StatusConflict, "Issue checkout conflict")
		require.Equal(t, "todo", m["details"].(map[string]any)["status"])
		// Terminal issues cannot be checked out even when expected.
		done := issCreate(t, h, company, map[string]any{"title": "Over", "status": "done"})
		issWantErr(t, issCheckout(h, done["id"].(string), alice.ID, []string{"done"}, alice.As("run-x")...), http.StatusConflict, "Issue checkout conflict")
	})

	t.Run("AdoptsInProgressWithoutRun", func(t *testing.T) {
		iss := issCreate(t, h, company, map[string]any{"title": "Started by the board", "assigneeAgentId": alice.ID, "status": "in_progress"})
		require.Nil(t, iss["checkoutRunId"])
		res := issCheckout(h, iss["id"].(string), alice.ID, todo, alice.As("run-adopt")...)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, "run-adopt", res.Map(t)["checkoutRunId"])
		require.Equal(t, "adopted_unowned", issActivity(t, h, company, iss["id"].(string), "issue.checked_out")["mode"])
		// Someone else's in-progress issue is not adopted.
		theirs := issCreate(t, h, company, map[string]any{"title": "Bob's", "assigneeAgentId": bob.ID, "status": "in_progress"})
		issWantErr(t, issCheckout(h, theirs["id"].(string), alice.ID, []string{"in_progress"}, alice.As("run-adopt")...), http.StatusConflict,
			"Issue checkout conflict")
	})

	t.Run("ConcurrentCheckoutOneWinner", func(t *testing.T) {
		for round := range 5 {
			iss := issCreate(t, h, company, map[string]any{"title": fmt.Sprintf("Race %d", round), "status": "todo"})
			id := iss["id"].(string)
			var wg sync.WaitGroup
			results := make([]*sdktest.Response, 2)
			for i, a := range []*sdktest.Agent{alice, bob} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					results[i] = issCheckout(h, id, a.ID, todo, a.As(fmt.Sprintf("race-%d-%d", round, i))...)
				}()
			}
			wg.Wait()
			var won, lost int
			for _, r := range results {
				switch r.Status {
				case http.StatusOK:
					won++
				case http.StatusConflict:
					lost++
					m := r.Map(t)
					require.Equal(t, "Issue checkout conflict", m["error"])
					d := m["details"].(map[string]any)
					require.Equal(t, id, d["issueId"])
					require.Equal(t, "in_progress", d["status"])
					require.NotNil(t, d["assigneeAgentId"])
					require.NotNil(t, d["checkoutRunId"])
					require.Equal(t, d["checkoutRunId"], d["executionRunId"])
				default:
					t.Fatalf("unexpected %d %s", r.Status, r.Body)
				}
			}
			require.Equal(t, 1, won)
			require.Equal(t, 1, lost)
			require.Equal(t, 1, issActivityCount(t, h, company, id, "issue.checked_out"))
		}
	})

	t.Run("Release", func(t *testing.T) {
		iss := issCreate(t, h, company, map[string]any{"title": "Give back", "status": "todo"})
		id := iss["id"].(string)
		res := issCheckout(h, id, alice.ID, todo, alice.As("run-r1")...)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		issWantErr(t, h.Do("POST", "/api/issues/"+id+"/release", nil, bob.As("run-b")...), http.StatusConflict, "Only assignee can release issue")
		issWantErr(t, h.Do("POST", "/api/issues/"+id+"/release", nil, alice.As("run-other")...), http.StatusConflict, "Only checkout run can release issue")
		issWantErr(t, h.Do("POST", "/api/issues/"+id+"/release", nil, alice.As("")...), http.StatusConflict, "Only checkout run can release issue")
		res = h.Do("POST", "/api/issues/"+id+"/release", nil, alice.As("run-r1")...)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		m := res.Map(t)
		require.Equal(t, "todo", m["status"])
		for _, k := range []string{"assigneeAgentId", "checkoutRunId", "executionRunId", "executionLockedAt", "executionAgentNameKey"} {
			require.Nil(t, m[k], k)
		}
		require.NotNil(t, m["startedAt"], "startedAt keeps the first start")
		d := issActivity(t, h, company, id, "issue.released")
		require.Equal(t, false, d["forced"])
		require.Equal(t, "in_progress", d["previousStatus"])
		// Released work can be taken by someone else.
		res = issCheckout(h, id, bob.ID, todo, bob.As("run-b1")...)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		// The board may release, and other statuses stay.
		res = issPatch(t, h, id, map[string]any{"status": "in_review"})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		res = h.Do("POST", "/api/issues/"+id+"/release", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, "in_review", res.Map(t)["status"])
		require.Nil(t, res.Map(t)["assigneeAgentId"])
		issWantErr(t, h.Do("POST", "/api/issues/"+uuid.NewString()+"/release", nil), http.StatusNotFound, "Issue not found")
		require.Equal(t, http.StatusForbidden, h.Do("POST", "/api/issues/"+id+"/release", nil, outsider.As("run-o")...).Status)
	})

	t.Run("ForceRelease", func(t *testing.T) {
		iss := issCreate(t, h, company, map[string]any{"title": "Stuck", "status": "todo"})
		id := iss["id"].(string)
		require.Equal(t, http.StatusOK, issCheckout(h, id, alice.ID, todo, alice.As("run-stuck")...).Status)
		res := h.Do("POST", "/api/issues/"+id+"/admin/force-release", nil, bob.As("run-b")...)
		require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
		require.Contains(t, res.Map(t)["error"], "tasks:manage_active_checkouts")
		res = h.Do("POST", "/api/issues/"+id+"/admin/force-release", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		m := res.Map(t)
		require.Equal(t, "todo", m["status"])
		require.Nil(t, m["checkoutRunId"])
		require.Equal(t, true, issActivity(t, h, company, id, "issue.released")["forced"])
		// A grant lets an agent force-release.
		_, err := h.Kernel.Pool.Exec(context.Background(), `INSERT INTO kernel.principal_permission_grants
			(id, company_id, principal_type, principal_id, permission_key) VALUES ($1, $2, 'agent', $3, 'tasks:manage_active_checkouts')`,
			uuid.NewString(), company, bob.ID)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, issCheckout(h, id, alice.ID, todo, alice.As("run-stuck2")...).Status)
		res = h.Do("POST", "/api/issues/"+id+"/admin/force-release", nil, bob.As("run-b")...)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	})
}
