package routines_test

import (
	"encoding/json"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

// The scheduler tests tick with an injected clock in 2027 (after the wall clock, which
// computed the triggers' first nextRunAt). Every tick evaluates every due trigger of the
// host, so the subtests of one host run in order and archive their routines when done.

func ts(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// scheduledRuns returns a routine's runs from source schedule, oldest tick first.
func (f *fixture) scheduledRuns(t *testing.T, routineID string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, r := range f.runs(t, routineID) {
		if r["source"] == "schedule" {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i]["scheduledFor"].(string) < out[j]["scheduledFor"].(string) })
	return out
}

func scheduledFor(t *testing.T, run map[string]any) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, run["scheduledFor"].(string))
	require.NoError(t, err)
	return v.UTC()
}

// archive stops a routine from firing again on this host.
func (f *fixture) archive(t *testing.T, routineID string) {
	t.Helper()
	res := f.h.Do("PATCH", "/api/routines/"+routineID, map[string]any{"status": "archived"})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
}

func TestScheduler(t *testing.T) {
	t.Parallel()
	h := startHost(t, sdktest.Options{})
	f := newFixture(t, h, "Scheduler")

	t.Run("EveryMinuteAcrossDST", func(t *testing.T) {
		rt := f.routine(t, map[string]any{"title": "Minutely"})
		id := rt["id"].(string)
		tr := f.schedule(t, id, "* * * * *", "America/New_York")
		for _, day := range []struct{ from, to string }{
			{"2027-03-14T06:30:00Z", "2027-03-14T07:30:00Z"}, // 01:30 EST → 03:30 EDT; 02:xx does not exist
			{"2027-11-07T05:30:00Z", "2027-11-07T06:30:00Z"}, // 01:30 EDT → 01:30 EST; 01:xx happens twice
		} {
			from, to := ts(day.from), ts(day.to)
			first := tick(t, h, from) // absorbs the time since the previous day (skip_missed: one run)
			require.Equal(t, 1, first.Claimed)
			require.Equal(t, 1, len(first.Runs))
			require.Equal(t, from, first.Runs[0].ScheduledFor)
			for now := from.Add(time.Minute); !now.After(to); now = now.Add(time.Minute) {
				res := tick(t, h, now)
				require.Equal(t, 1, res.Claimed, "tick at %s", now)
				require.Equal(t, 1, len(res.Runs), "tick at %s", now)
				require.Equal(t, now, res.Runs[0].ScheduledFor)
				// A second tick at the same instant finds nothing due.
				require.Zero(t, tick(t, h, now.Add(30*time.Second)).Claimed)
			}
			next, err := time.Parse(time.RFC3339, f.triggerOf(t, id, tr["id"].(string))["nextRunAt"].(string))
			require.NoError(t, err)
			require.Equal(t, to.Add(time.Minute), next.UTC())
		}
		runs := f.scheduledRuns(t, id)
		require.Equal(t, 122, len(runs), "one run per real minute, 61 each day")
		seen := map[time.Time]bool{}
		for _, r := range runs {
			at := scheduledFor(t, r)
			require.False(t, seen[at], "tick %s recorded twice", at)
			seen[at] = true
		}
		// The first run created the execution issue; the rest coalesced into it.
		require.Equal(t, "issue_created", runs[0]["status"])
		require.Equal(t, "coalesced", runs[1]["status"])
		require.Equal(t, runs[0]["id"], runs[1]["coalescedIntoRunId"])
		e := activityEntries(t, h, f.co, "routine_run.created", runs[1]["id"].(string))
		require.Equal(t, "system", e[0].ActorType)
		require.Equal(t, "routine-scheduler", e[0].ActorID)
		require.Equal(t, id, details(t, e[0])["routineId"])
		f.archive(t, id)
	})

	t.Run("PinnedTimesAcrossDST", func(t *testing.T) {
		spring := f.routine(t, map[string]any{"title": "Spring", "concurrencyPolicy": "always_enqueue"})
		fall := f.routine(t, map[string]any{"title": "Fall", "concurrencyPolicy": "always_enqueue"})
		f.schedule(t, spring["id"].(string), "30 2 * * *", "America/New_York")
		f.schedule(t, fall["id"].(string), "30 1 * * *", "America/New_York")
		tick(t, h, ts("2027-03-14T04:55:00Z")) // absorb both (the fall routine is not due again before November)
		for now := ts("2027-03-14T05:00:00Z"); now.Before(ts("2027-03-14T12:00:00Z")); now = now.Add(15 * time.Minute) {
			tick(t, h, now)
		}
		runs := f.scheduledRuns(t, spring["id"].(string))
		require.Equal(t, 2, len(runs))
		require.Equal(t, ts("2027-03-14T07:00:00Z"), scheduledFor(t, runs[1]), "02:30 does not exist: it runs at 03:00 EDT, once")

		tick(t, h, ts("2027-11-07T03:55:00Z"))
		before := len(f.scheduledRuns(t, fall["id"].(string)))
		for now := ts("2027-11-07T04:00:00Z"); now.Before(ts("2027-11-07T09:00:00Z")); now = now.Add(15 * time.Minute) {
			tick(t, h, now)
		}
		runs = f.scheduledRuns(t, fall["id"].(string))
		require.Equal(t, before+1, len(runs), "01:30 happens twice: it runs once")
		require.Equal(t, ts("2027-11-07T05:30:00Z"), scheduledFor(t, runs[len(runs)-1]), "at the first 01:30 (EDT)")
		f.archive(t, spring["id"].(string))
		f.archive(t, fall["id"].(string))
	})

	t.Run("CatchUpAfterDowntime", func(t *testing.T) {
		skip := f.routine(t, map[string]any{"title": "Skip missed"})
		capped := f.routine(t, map[string]any{"title": "Enqueue missed", "catchUpPolicy": "enqueue_missed_with_cap"})
		f.schedule(t, skip["id"].(string), "* * * * *", "UTC")
		ctr := f.schedule(t, capped["id"].(string), "* * * * *", "UTC")
		t0 := ts("2028-01-10T10:00:00Z")
		// The first tick catches up from the trigger's creation (the wall clock, months
		// before t0): one run, or the latest 25 ticks.
		tick(t, h, t0)
		require.Equal(t, 1, len(f.scheduledRuns(t, skip["id"].(string))))
		capRuns := f.scheduledRuns(t, capped["id"].(string))
		require.Equal(t, 25, len(capRuns))
		require.Equal(t, t0.Add(-24*time.Minute), scheduledFor(t, capRuns[0]))
		require.Equal(t, t0, scheduledFor(t, capRuns[24]))
		// A 90-minute downtime collapses into one run (skip_missed), or the latest 25 ticks.
		res := tick(t, h, t0.Add(90*time.Minute))
		require.Equal(t, 2, res.Claimed)
		skipRuns := f.scheduledRuns(t, skip["id"].(string))
		require.Equal(t, 2, len(skipRuns))
		require.Equal(t, t0.Add(90*time.Minute), scheduledFor(t, skipRuns[1]))
		capRuns = f.scheduledRuns(t, capped["id"].(string))
		require.Equal(t, 25+25, len(capRuns))
		require.Equal(t, t0.Add(66*time.Minute), scheduledFor(t, capRuns[25]))
		require.Equal(t, t0.Add(90*time.Minute), scheduledFor(t, capRuns[49]))
		// A short one is caught up in full.
		tick(t, h, t0.Add(100*time.Minute))
		require.Equal(t, 25+25+10, len(f.scheduledRuns(t, capped["id"].(string))))
		require.Equal(t, 3, len(f.scheduledRuns(t, skip["id"].(string))))
		next, err := time.Parse(time.RFC3339, f.triggerOf(t, capped["id"].(string), ctr["id"].(string))["nextRunAt"].(string))
		require.NoError(t, err)
		require.Equal(t, t0.Add(101*time.Minute), next.UTC())
		f.archive(t, skip["id"].(string))
		f.archive(t, capped["id"].(string))
	})

	t.Run("PausedArchivedAndPausedProjects", func(t *testing.T) {
		projectID := f.project(t, "Paused project")
		paused := f.routine(t, map[string]any{"title": "Paused", "status": "paused"})
		archived := f.routine(t, map[string]any{"title": "Archived"})
		inProject := f.routine(t, map[string]any{"title": "In project", "projectId": projectID})
		ptr := f.schedule(t, paused["id"].(string), "* * * * *", "UTC")
		f.schedule(t, archived["id"].(string), "* * * * *", "UTC")
		jtr := f.schedule(t, inProject["id"].(string), "* * * * *", "UTC")
		f.archive(t, archived["id"].(string))
		res := h.Do("PATCH", "/api/projects/"+projectID, map[string]any{"pauseReason": "manual"})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)

		t0 := ts("2028-02-01T08:00:00Z")
		tick(t, h, t0)
		tick(t, h, t0.Add(time.Minute))
		require.Empty(t, f.runs(t, paused["id"].(string)), "paused routines never fire")
		require.Empty(t, f.runs(t, archived["id"].(string)), "archived routines never fire")
		pausedNext := f.triggerOf(t, paused["id"].(string), ptr["id"].(string))["nextRunAt"]
		require.Equal(t, ptr["nextRunAt"], pausedNext, "a paused routine's schedule waits")

		runs := f.scheduledRuns(t, inProject["id"].(string))
		require.Equal(t, 2, len(runs))
		for _, r := range runs {
			require.Equal(t, "skipped", r["status"])
			require.Equal(t, "paused", r["failureReason"])
			require.Nil(t, r["linkedIssueId"])
		}
		jt := f.triggerOf(t, inProject["id"].(string), jtr["id"].(string))
		require.Equal(t, "skipped_paused", jt["lastResult"])
		require.Equal(t, t0.Add(2*time.Minute).Format(time.RFC3339), jt["nextRunAt"], "nextRunAt advances past skipped ticks")

		// Resuming the routine catches up once (skip_missed); resuming the project fires again.
		res = h.Do("PATCH", "/api/routines/"+paused["id"].(string), map[string]any{"status": "active"})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		res = h.Do("PATCH", "/api/projects/"+projectID, map[string]any{"pauseReason": nil})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		tick(t, h, t0.Add(2*time.Minute))
		require.Equal(t, 1, len(f.scheduledRuns(t, paused["id"].(string))))
		runs = f.scheduledRuns(t, inProject["id"].(string))
		require.Equal(t, "issue_created", runs[len(runs)-1]["status"])
		f.archive(t, paused["id"].(string))
		f.archive(t, inProject["id"].(string))
	})

	t.Run("TickWithoutAnInstantUsesTheWallClock", func(t *testing.T) {
		out, e := invoke(t, h, "routines.tick", "", map[string]any{})
		require.Nil(t, e)
		var res struct {
			Now time.Time `json:"now"`
		}
		require.NoError(t, json.Unmarshal(out, &res))
		require.WithinDuration(t, time.Now(), res.Now, 5*time.Second)
		_, e = invoke(t, h, "routines.tick", "", map[string]any{"now": "yesterday"})
		require.NotNil(t, e)
		require.Equal(t, http.StatusBadRequest, e.Status)
	})
}

// Two hosts on one database ticking the same schedule at the same instants record each
// tick once.
func TestTwoHostsTickEachScheduleOnce(t *testing.T) {
	t.Parallel()
	h1 := startHost(t, sdktest.Options{})
	h2 := startHost(t, sdktest.Options{DatabaseURL: h1.DatabaseURL})
	f := newFixture(t, h1, "Two Hosts")
	rt := f.routine(t, map[string]any{"title": "Shared", "catchUpPolicy": "enqueue_missed_with_cap"})
	id := rt["id"].(string)
	f.schedule(t, id, "* * * * *", "UTC")
	other := f.routine(t, map[string]any{"title": "Shared too", "concurrencyPolicy": "always_enqueue"})
	f.schedule(t, other["id"].(string), "*/2 * * * *", "UTC")

	t0 := ts("2028-03-01T12:00:00Z")
	tick(t, h1, t0)
	base := len(f.scheduledRuns(t, id))
	require.Equal(t, 25, base, "the first tick catches up the latest 25 ticks since creation")
	baseOther := len(f.scheduledRuns(t, other["id"].(string)))
	const minutes = 20
	claimed := 0
	for i := 1; i <= minutes; i++ {
		now := t0.Add(time.Duration(i) * time.Minute)
		var wg sync.WaitGroup
		results := make([]*tickResult, 4)
		for j, h := range []*sdktest.Host{h1, h2, h1, h2} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[j] = tick(t, h, now)
			}()
		}
		wg.Wait()
		for _, r := range results {
			claimed += r.Claimed
		}
	}
	require.Equal(t, minutes+minutes/2, claimed, "each due tick claimed by exactly one caller")
	runs := f.scheduledRuns(t, id)
	require.Equal(t, base+minutes, len(runs))
	seen := map[time.Time]bool{}
	for _, r := range runs[base:] {
		at := scheduledFor(t, r)
		require.False(t, seen[at], "tick %s fired twice", at)
		seen[at] = true
	}
	require.Equal(t, minutes, len(seen))
	require.Equal(t, baseOther+minutes/2, len(f.scheduledRuns(t, other["id"].(string))))
	// The second host serves the same routines.
	res := h2.Do("GET", "/api/routines/"+id+"/runs?limit=200", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
}
