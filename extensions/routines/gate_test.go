package routines_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

// gated is a routine with the activity gate on, ticking every minute of an injected clock.
type gated struct {
	f         *fixture
	id        string
	triggerID string
	now       time.Time
}

func newGated(t *testing.T, f *fixture, start time.Time, extra map[string]any) *gated {
	t.Helper()
	body := map[string]any{"title": "Gated", "activityGatePolicy": "require_external_activity", "concurrencyPolicy": "always_enqueue"}
	for k, v := range extra {
		body[k] = v
	}
	rt := f.routine(t, body)
	tr := f.schedule(t, rt["id"].(string), "* * * * *", "UTC")
	return &gated{f: f, id: rt["id"].(string), triggerID: tr["id"].(string), now: start}
}

// tick advances the clock a minute, ticks, and returns this routine's run of that tick.
func (g *gated) tick(t *testing.T) map[string]any {
	t.Helper()
	g.now = g.now.Add(time.Minute)
	res := tick(t, g.f.h, g.now)
	for _, r := range res.Runs {
		if r.RoutineID == g.id {
			for _, run := range g.f.runs(t, g.id) {
				if run["id"] == r.ID {
					return run
				}
			}
		}
	}
	t.Fatalf("tick at %s recorded no run of routine %s", g.now, g.id)
	return nil
}

// fires ticks and requires a dispatched run. The assignee's run on the new execution issue
// goes on in the background; its activity never counts for this routine, whenever it lands.
func (g *gated) fires(t *testing.T, why string) map[string]any {
	t.Helper()
	run := g.tick(t)
	require.Equal(t, "issue_created", run["status"], "%s: %v", why, run)
	return run
}

// quiet ticks and requires a gate-skipped run measured from windowStart.
func (g *gated) quiet(t *testing.T, why string, windowStart string) map[string]any {
	t.Helper()
	run := g.tick(t)
	require.Equal(t, "skipped", run["status"], "%s: %v", why, run)
	require.Equal(t, "no_external_activity", run["failureReason"], why)
	require.Nil(t, run["linkedIssueId"], why)
	gate := run["triggerPayload"].(map[string]any)["activityGate"].(map[string]any)
	require.Equal(t, "quiet", gate["verdict"], why)
	if windowStart != "" {
		ws, err := time.Parse(time.RFC3339Nano, gate["windowStart"].(string))
		require.NoError(t, err)
		want, err := time.Parse(time.RFC3339Nano, windowStart)
		require.NoError(t, err)
		require.True(t, ws.Equal(want), "%s: window starts at the last dispatched run (%s), got %s", why, windowStart, ws)
	}
	tr := g.f.triggerOf(t, g.id, g.triggerID)
	require.Equal(t, "skipped_no_activity", tr["lastResult"], why)
	require.Equal(t, g.now.Add(time.Minute).UTC().Format(time.RFC3339), tr["nextRunAt"], "%s: nextRunAt advances", why)
	return run
}

func TestActivityGate(t *testing.T) {
	t.Parallel()
	h := startHost(t, sdktest.Options{})

	t.Run("CompanyScope", func(t *testing.T) {
		f := newFixture(t, h, "Gate")
		res := h.Do("POST", "/api/companies/"+f.co+"/issues", map[string]any{"title": "Unrelated"})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		unrelated := res.Map(t)["id"].(string)
		g := newGated(t, f, ts("2028-04-01T09:00:00Z"), nil)

		first := g.fires(t, "the first ever tick always fires")
		exec := first["linkedIssueId"].(string)
		start := first["triggeredAt"].(string)
		g.quiet(t, "nothing happened but the routine's own work", start)

		// Bookkeeping actions do not count.
		for _, action := range []string{"issue.read_marked", "issue.read_unmarked", "issue.inbox_archived", "issue.inbox_unarchived"} {
			f.activity(t, map[string]any{"actorType": "user", "actorId": "local-board", "action": action, "entityType": "issue", "entityId": unrelated})
		}
		g.quiet(t, "bookkeeping actions", start)

		// Entries the routine scheduler wrote about this routine do not count.
		f.activity(t, map[string]any{"actorType": "system", "actorId": "routine-scheduler", "action": "routine.noted",
			"entityType": "routine_run", "entityId": exec, "details": map[string]any{"routineId": g.id}})
		f.activity(t, map[string]any{"actorType": "system", "actorId": "routine-scheduler", "action": "routine.noted",
			"entityType": "routine", "entityId": g.id})
		g.quiet(t, "the scheduler's own entries", start)

		// Activity on the routine's execution issue does not count.
		res = h.Do("POST", "/api/issues/"+exec+"/comments", map[string]any{"body": "progress"})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		g.quiet(t, "activity on an execution issue", start)

		// Nor do entries from the agent's run working on the execution issue: the run's own
		// entries, and what the agent does elsewhere within that run.
		var runID string
		sdktest.WaitFor(t, 15*time.Second, func() bool {
			if rs := f.runsForIssue(t, exec); len(rs) > 0 {
				runID = rs[0]["id"].(string)
			}
			return runID != ""
		}, "the assignee's run on the execution issue")
		f.activity(t, map[string]any{"actorType": "system", "actorId": "agents", "action": "heartbeat.noted",
			"entityType": "heartbeat_run", "entityId": runID})
		res = h.Do("POST", "/api/issues/"+unrelated+"/comments", map[string]any{"body": "seen from the routine run"},
			"Authorization", "Bearer "+h.AgentJWT(f.agent, runID), "X-Service-Run-Id", runID)
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		e := activityEntries(t, h, f.co, "issue.comment.created", unrelated)
		require.NotEmpty(t, e)
		require.NotNil(t, e[0].RunID, "the agent's comment carries its run")
		require.Equal(t, runID, *e[0].RunID)
		g.quiet(t, "the agent's run on the execution issue", start)

		// Anything else counts: a board comment elsewhere.
		res = h.Do("POST", "/api/issues/"+unrelated+"/comments", map[string]any{"body": "a human was here"})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		second := g.fires(t, "external activity")
		g.quiet(t, "the window moved to the new run", second["triggeredAt"].(string))

		// The scheduler's entries about another routine count.
		f.activity(t, map[string]any{"actorType": "system", "actorId": "routine-scheduler", "action": "routine.noted",
			"entityType": "routine", "entityId": "00000000-0000-0000-0000-00000000000a",
			"details": map[string]any{"routineId": "00000000-0000-0000-0000-00000000000a"}})
		g.fires(t, "scheduler entries about another routine")

		// Manual runs ignore the gate.
		res = h.Do("POST", "/api/routines/"+g.id+"/run", map[string]any{})
		require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
		require.Equal(t, "issue_created", res.Map(t)["status"])
		f.archive(t, g.id)
	})

	t.Run("ProjectScope", func(t *testing.T) {
		f := newFixture(t, h, "Gate Project")
		p := f.project(t, "Mine")
		q := f.project(t, "Theirs")
		g := newGated(t, f, ts("2028-05-01T09:00:00Z"), map[string]any{"projectId": p, "activityGateScope": "project"})
		start := g.fires(t, "first tick")["triggeredAt"].(string)
		g.quiet(t, "quiet", start)

		res := h.Do("POST", "/api/companies/"+f.co+"/issues", map[string]any{"title": "Elsewhere", "projectId": q})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		elsewhere := res.Map(t)["id"].(string)
		f.activity(t, map[string]any{"actorType": "user", "actorId": "local-board", "action": "note.added",
			"entityType": "note", "entityId": "n1", "details": map[string]any{"projectId": q}})
		g.quiet(t, "activity of another project", start)

		res = h.Do("POST", "/api/companies/"+f.co+"/issues", map[string]any{"title": "Here", "projectId": p})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		here := res.Map(t)["id"].(string)
		g.fires(t, "an issue of the project")
		g.quiet(t, "quiet again", "")

		f.activity(t, map[string]any{"actorType": "user", "actorId": "local-board", "action": "note.added",
			"entityType": "note", "entityId": "n2", "details": map[string]any{"projectId": p}})
		g.fires(t, "an entry carrying the project id")

		res = h.Do("PATCH", "/api/projects/"+p, map[string]any{"description": "renamed"})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		g.fires(t, "the project itself")

		// Agent runs on the project's issues count; on other projects' issues they do not.
		// Another agent works them, so its runs finish apart from the routine's.
		peer := &fixture{h: h, co: f.co, agent: h.CreateAgent(f.co, "Gate Peer", "engineer")}
		for _, iss := range []string{here, elsewhere} {
			res = h.Do("PATCH", "/api/issues/"+iss, map[string]any{"assigneeAgentId": peer.agent.ID})
			require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		}
		var hereRun, elsewhereRun string
		sdktest.WaitFor(t, 30*time.Second, func() bool {
			for _, iss := range []string{here, elsewhere} {
				rs := peer.runsForIssue(t, iss)
				if len(rs) == 0 || rs[0]["status"] == "queued" || rs[0]["status"] == "running" {
					return false
				}
			}
			hereRun, elsewhereRun = peer.runsForIssue(t, here)[0]["id"].(string), peer.runsForIssue(t, elsewhere)[0]["id"].(string)
			return true
		}, "the peer's runs on both issues to finish")
		g.fires(t, "assigning the project's issue")
		g.quiet(t, "settled", "")
		f.activity(t, map[string]any{"actorType": "system", "actorId": "agents", "action": "heartbeat.noted",
			"entityType": "heartbeat_run", "entityId": elsewhereRun})
		g.quiet(t, "a run on another project's issue", "")
		f.activity(t, map[string]any{"actorType": "system", "actorId": "agents", "action": "heartbeat.noted",
			"entityType": "heartbeat_run", "entityId": hereRun})
		g.fires(t, "a run on the project's issue")
		f.archive(t, g.id)

		// Project scope without a project never matches after the first tick.
		np := newGated(t, f, ts("2028-05-02T09:00:00Z"), map[string]any{"activityGateScope": "project"})
		npStart := np.fires(t, "first tick")["triggeredAt"].(string)
		res = h.Do("POST", "/api/companies/"+f.co+"/issues", map[string]any{"title": "Busy"})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		np.quiet(t, "no project, no match", npStart)
		f.archive(t, np.id)
	})
}
