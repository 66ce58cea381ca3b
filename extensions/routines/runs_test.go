package routines_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

// run fires a manual run (202 required) and returns it.
func (f *fixture) run(t *testing.T, routineID string, body map[string]any, headers ...string) map[string]any {
	t.Helper()
	res := f.h.Do("POST", "/api/routines/"+routineID+"/run", body, headers...)
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
	return res.Map(t)
}

func TestManualRuns(t *testing.T) {
	t.Parallel()
	h := startHost(t, sdktest.Options{})
	f := newFixture(t, h, "Manual")
	projectID := f.project(t, "Ops")
	res := h.Do("POST", "/api/companies/"+f.co+"/goals", map[string]any{"title": "Grow"})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	goalID := res.Map(t)["id"].(string)
	res = h.Do("POST", "/api/companies/"+f.co+"/issues", map[string]any{"title": "Parent"})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	parentID := res.Map(t)["id"].(string)

	t.Run("CreatesTheExecutionIssueAndWakesTheAssigneeOnce", func(t *testing.T) {
		rt := f.routine(t, map[string]any{"title": "Review {{team}} on {{date}}", "description": "Ticket {{ticket}}; {{payload.ref}}",
			"projectId": projectID, "goalId": goalID, "parentIssueId": parentID, "priority": "high",
			"variables": []map[string]any{{"name": "team", "defaultValue": "core"}, {"name": "ticket", "required": true}}})
		id := rt["id"].(string)
		run := f.run(t, id, map[string]any{"payload": map[string]any{"ref": "main"}, "variables": map[string]any{"ticket": "T-7"}})
		require.Equal(t, "issue_created", run["status"])
		require.Equal(t, "manual", run["source"])
		require.Nil(t, run["triggerId"])
		require.Equal(t, map[string]any{"ref": "main"}, run["triggerPayload"])
		require.Nil(t, run["completedAt"])
		for _, k := range []string{"id", "companyId", "routineId", "triggeredAt", "idempotencyKey", "linkedIssueId",
			"coalescedIntoRunId", "failureReason", "createdAt", "updatedAt"} {
			require.Contains(t, run, k)
		}
		iss := issue(t, h, run["linkedIssueId"].(string))
		require.Equal(t, "Review core on "+time.Now().UTC().Format(time.DateOnly), iss["title"])
		require.Equal(t, "Ticket T-7; main", iss["description"])
		require.Equal(t, "routine_execution", iss["originKind"])
		require.Equal(t, id, iss["originId"])
		require.Equal(t, run["id"], iss["originRunId"])
		require.Equal(t, f.agent.ID, iss["assigneeAgentId"])
		require.Equal(t, projectID, iss["projectId"])
		require.Equal(t, goalID, iss["goalId"])
		require.Equal(t, parentID, iss["parentId"])
		require.Equal(t, "high", iss["priority"])

		// Work woke the assignee for the new issue, exactly once.
		sdktest.WaitFor(t, 60*time.Second, func() bool { return len(f.runsForIssue(t, iss["id"].(string))) > 0 }, "the assignee's wake")
		time.Sleep(300 * time.Millisecond)
		require.Len(t, f.runsForIssue(t, iss["id"].(string)), 1, "one wake per execution issue")

		e := activityEntries(t, h, f.co, "routine_run.created", run["id"].(string))
		require.Len(t, e, 1)
		require.Equal(t, "user", e[0].ActorType)
		d := details(t, e[0])
		require.Equal(t, id, d["routineId"])
		require.Equal(t, projectID, d["projectId"])

		got := f.get(t, id)
		require.NotNil(t, got["lastTriggeredAt"])
		require.NotNil(t, got["lastEnqueuedAt"])
		require.Equal(t, iss["id"], got["activeIssue"].(map[string]any)["id"])
		recent := got["recentRuns"].([]any)
		require.Len(t, recent, 1)
		li := recent[0].(map[string]any)["linkedIssue"].(map[string]any)
		require.Equal(t, iss["identifier"], li["identifier"])
		require.Equal(t, "high", li["priority"])
	})

	t.Run("Overrides", func(t *testing.T) {
		peer := h.CreateAgent(f.co, "Override Peer", "engineer")
		other := f.project(t, "Other")
		rt := f.routine(t, map[string]any{"title": "Override", "projectId": projectID, "concurrencyPolicy": "always_enqueue"})
		run := f.run(t, rt["id"].(string), map[string]any{"projectId": other, "assigneeAgentId": peer.ID})
		iss := issue(t, h, run["linkedIssueId"].(string))
		require.Equal(t, other, iss["projectId"])
		require.Equal(t, peer.ID, iss["assigneeAgentId"])
		res := h.Do("POST", "/api/routines/"+rt["id"].(string)+"/run", map[string]any{"assigneeAgentId": peer.ID}, f.agent.As("")...)
		wantErr(t, res, http.StatusForbidden, "Agents cannot reassign routines to another agent")
		wantErr(t, h.Do("POST", "/api/routines/"+rt["id"].(string)+"/run", map[string]any{"projectId": "00000000-0000-0000-0000-000000000003"}),
			http.StatusUnprocessableEntity, "Project not found in this company")
		// The assignee may run its own routine.
		mine := f.run(t, rt["id"].(string), map[string]any{}, f.agent.As("")...)
		require.Equal(t, "issue_created", mine["status"])
	})

	t.Run("IdempotencyAndValidation", func(t *testing.T) {
		rt := f.routine(t, map[string]any{"title": "Idem", "concurrencyPolicy": "always_enqueue",
			"variables": []map[string]any{{"name": "n", "type": "number"}}})
		id := rt["id"].(string)
		a := f.run(t, id, map[string]any{"idempotencyKey": "k-1"})
		b := f.run(t, id, map[string]any{"idempotencyKey": "k-1"})
		require.Equal(t, a["id"], b["id"], "same key, same run")
		require.Equal(t, "k-1", b["idempotencyKey"])
		c := f.run(t, id, map[string]any{"idempotencyKey": "k-1", "source": "api"})
		require.NotEqual(t, a["id"], c["id"], "keys deduplicate per source")
		require.Len(t, f.runs(t, id), 2)

		base := "/api/routines/" + id + "/run"
		wantValidation(t, h.Do("POST", base, map[string]any{"idempotencyKey": strings.Repeat("k", 256)}), "idempotencyKey")
		wantValidation(t, h.Do("POST", base, map[string]any{"source": "schedule"}), "source")
		wantValidation(t, h.Do("POST", base, map[string]any{"variables": map[string]any{"nope": 1}}), "variables.nope")
		wantValidation(t, h.Do("POST", base, map[string]any{"variables": map[string]any{"n": "many"}}), "variables.n")
		wantValidation(t, h.Do("POST", base, map[string]any{"triggerId": "x"}), "triggerId")
		wantValidation(t, h.Do("POST", base, map[string]any{"executionWorkspaceSettings": "x"}), "executionWorkspaceSettings")
		req := f.routine(t, map[string]any{"title": "{{who}}", "variables": []map[string]any{{"name": "who", "required": true}}})
		wantErr(t, h.Do("POST", "/api/routines/"+req["id"].(string)+"/run", map[string]any{}), http.StatusUnprocessableEntity,
			"Missing required variables: who")
		require.Empty(t, f.runs(t, req["id"].(string)), "a refused run records nothing")
	})

	t.Run("TriggersOfTheRun", func(t *testing.T) {
		rt := f.routine(t, map[string]any{"title": "Api run", "concurrencyPolicy": "always_enqueue"})
		id := rt["id"].(string)
		api := f.trigger(t, id, map[string]any{"kind": "api", "label": "ci"})["trigger"].(map[string]any)
		run := f.run(t, id, map[string]any{"source": "api", "triggerId": api["id"], "payload": map[string]any{"via": "ci"}})
		require.Equal(t, "api", run["source"])
		require.Equal(t, api["id"], run["triggerId"])
		tr := f.triggerOf(t, id, api["id"].(string))
		require.NotNil(t, tr["lastFiredAt"])
		require.Equal(t, "Created execution issue "+run["linkedIssueId"].(string), tr["lastResult"])
		views := f.runs(t, id)
		require.Equal(t, "ci", views[0]["trigger"].(map[string]any)["label"])

		otherRt := f.routine(t, map[string]any{"title": "Other"})
		otherTr := f.trigger(t, otherRt["id"].(string), map[string]any{"kind": "api"})["trigger"].(map[string]any)
		wantErr(t, h.Do("POST", "/api/routines/"+id+"/run", map[string]any{"triggerId": otherTr["id"]}), http.StatusForbidden, "")
		res := h.Do("PATCH", "/api/routine-triggers/"+api["id"].(string), map[string]any{"enabled": false})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		wantErr(t, h.Do("POST", "/api/routines/"+id+"/run", map[string]any{"triggerId": api["id"]}), http.StatusConflict,
			"Routine trigger is not active")
	})

	t.Run("ConcurrencyPolicies", func(t *testing.T) {
		co := f.routine(t, map[string]any{"title": "Coalesce"})
		first := f.run(t, co["id"].(string), map[string]any{})
		require.Equal(t, "issue_created", first["status"])
		second := f.run(t, co["id"].(string), map[string]any{})
		require.Equal(t, "coalesced", second["status"])
		require.Equal(t, first["linkedIssueId"], second["linkedIssueId"], "linked to the live execution issue")
		require.Equal(t, first["id"], second["coalescedIntoRunId"])
		require.NotNil(t, second["completedAt"])
		tr := f.get(t, co["id"].(string))
		require.Equal(t, first["linkedIssueId"], tr["activeIssue"].(map[string]any)["id"])

		// The issue finishing completes its run; the next run creates a new issue.
		for _, st := range []string{"in_progress", "done"} {
			res := h.Do("PATCH", "/api/issues/"+first["linkedIssueId"].(string), map[string]any{"status": st})
			require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		}
		sdktest.WaitFor(t, 60*time.Second, func() bool {
			for _, r := range f.runs(t, co["id"].(string)) {
				if r["id"] == first["id"] {
					return r["status"] == "completed" && r["completedAt"] != nil
				}
			}
			return false
		}, "the first run to complete")
		third := f.run(t, co["id"].(string), map[string]any{})
		require.Equal(t, "issue_created", third["status"])
		require.NotEqual(t, first["linkedIssueId"], third["linkedIssueId"])
		res := h.Do("PATCH", "/api/issues/"+third["linkedIssueId"].(string), map[string]any{"status": "cancelled"})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		sdktest.WaitFor(t, 60*time.Second, func() bool {
			for _, r := range f.runs(t, co["id"].(string)) {
				if r["id"] == third["id"] {
					return r["status"] == "failed" && r["failureReason"] == "execution_issue_cancelled"
				}
			}
			return false
		}, "the cancelled run to fail")
		// The activity entry is appended right after the run's status changes.
		sdktest.WaitFor(t, 60*time.Second, func() bool {
			return len(activityEntries(t, h, f.co, "routine_run.updated", third["id"].(string))) > 0
		}, "the routine_run.updated entry")

		skip := f.routine(t, map[string]any{"title": "Skip", "concurrencyPolicy": "skip_if_active"})
		a := f.run(t, skip["id"].(string), map[string]any{})
		b := f.run(t, skip["id"].(string), map[string]any{})
		require.Equal(t, "skipped", b["status"])
		require.Equal(t, a["linkedIssueId"], b["linkedIssueId"])

		always := f.routine(t, map[string]any{"title": "Always", "concurrencyPolicy": "always_enqueue"})
		x := f.run(t, always["id"].(string), map[string]any{})
		y := f.run(t, always["id"].(string), map[string]any{})
		require.Equal(t, "issue_created", y["status"])
		require.NotEqual(t, x["linkedIssueId"], y["linkedIssueId"])
	})

	t.Run("ConcurrentRunsCoalesceIntoOneIssue", func(t *testing.T) {
		rt := f.routine(t, map[string]any{"title": "Race"})
		id := rt["id"].(string)
		done := make(chan map[string]any, 6)
		for range 6 {
			go func() {
				res := h.Do("POST", "/api/routines/"+id+"/run", map[string]any{})
				if res.Status != http.StatusAccepted {
					done <- map[string]any{"error": string(res.Body)}
					return
				}
				done <- res.Map(t)
			}()
		}
		created := 0
		for range 6 {
			r := <-done
			require.NotContains(t, r, "error")
			if r["status"] == "issue_created" {
				created++
			} else {
				require.Equal(t, "coalesced", r["status"])
			}
		}
		require.Equal(t, 1, created, "one execution issue for concurrent runs")
	})

	t.Run("RunsList", func(t *testing.T) {
		rt := f.routine(t, map[string]any{"title": "Listed", "concurrencyPolicy": "always_enqueue"})
		id := rt["id"].(string)
		var ids []string
		for range 3 {
			ids = append(ids, f.run(t, id, map[string]any{})["id"].(string))
		}
		res := h.Do("GET", "/api/routines/"+id+"/runs?limit=2", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		var page []map[string]any
		res.JSON(t, &page)
		require.Len(t, page, 2)
		require.Equal(t, ids[2], page[0]["id"], "newest first")
		require.NotNil(t, page[0]["linkedIssue"])
		require.Len(t, f.runs(t, id), 3)
		for _, q := range []string{"0", "201", "x", "-1"} {
			wantValidation(t, h.Do("GET", "/api/routines/"+id+"/runs?limit="+q, nil), "limit")
		}
		require.Equal(t, http.StatusOK, h.Do("GET", "/api/routines/"+id+"/runs?limit=200", nil).Status)
		res = h.Do("GET", "/api/routines/"+id+"/runs", nil)
		res.JSON(t, &page)
		require.Len(t, page, 3)
	})

	t.Run("ArchivedRoutinesDoNotRun", func(t *testing.T) {
		rt := f.routine(t, map[string]any{"title": "Old", "status": "archived"})
		wantErr(t, h.Do("POST", "/api/routines/"+rt["id"].(string)+"/run", map[string]any{}), http.StatusConflict, "Routine is archived")
		paused := f.routine(t, map[string]any{"title": "Paused", "status": "paused"})
		require.Equal(t, "issue_created", f.run(t, paused["id"].(string), map[string]any{})["status"], "a paused routine still runs by hand")
	})
}
