package statuscards_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

// waitDirty waits until an issue change made at or after since has reached a reactive card
// (the event pushed its evaluation to since + debounce) and returns the new nextEvalAt.
func (f *fixture) waitDirty(t *testing.T, id string, since time.Time, debounce time.Duration) time.Time {
	t.Helper()
	var next time.Time
	sdktest.WaitFor(t, 60*time.Second, func() bool {
		next = f.nextEvalAt(t, id)
		// The event sets it to its own wall-clock time plus the debounce; an evaluation
		// scheduled later (an hour's sweep) is not the event.
		return !next.Before(since.Add(debounce).Truncate(time.Second)) && next.Before(since.Add(debounce+5*time.Minute))
	}, "the issue event to reach the reactive card")
	return next
}

// setStatus moves an issue as the board.
func (f *fixture) setStatus(t *testing.T, issueID, status string) {
	t.Helper()
	ok(t, f.h.Do("PATCH", "/api/issues/"+issueID, map[string]any{"status": status}), http.StatusOK)
}

// testReactiveDebounceAndHourlyCap: a reactive card waits for the debounce after the last
// change, queues one incremental update per quiet period, and holds updates past
// maxUpdatesPerHour until the oldest of the hour is an hour old.
func testReactiveDebounceAndHourlyCap(t *testing.T, h *sdktest.Host) {
	f := newFixture(t, h, "Reactive Co")
	alpha := f.issue(t, map[string]any{"title": "Alpha"})["id"].(string)
	id := f.activeCard(t, map[string]any{"mode": "reactive", "debounceSeconds": 60, "maxUpdatesPerHour": 2})
	const debounce = 60 * time.Second

	change := func(status string) time.Time {
		at := time.Now().UTC()
		f.setStatus(t, alpha, status)
		return f.waitDirty(t, id, at, debounce)
	}
	n1 := change("todo")
	require.Equal(t, "", f.tick(t, n1.Add(-2*time.Second), id), "not due inside the debounce")
	require.Equal(t, "enqueued", f.tickWhenDue(t, id))
	n1 = ts(f.updates(t, id)[0]["startedAt"].(string))
	up := f.updates(t, id)[0]
	require.Equal(t, "incremental", up["kind"])
	require.Equal(t, "reactive", up["trigger"])
	require.Equal(t, "running", up["status"])
	changes := up["changes"].([]any)
	require.Len(t, changes, 1)
	ch := changes[0].(map[string]any)
	require.Equal(t, "status", ch["changeKind"])
	require.Equal(t, alpha, ch["issueId"])
	require.Equal(t, "backlog", ch["from"])
	require.Equal(t, "todo", ch["to"])
	f.summarize(t, id, "# Second")

	change("done")
	require.Equal(t, "enqueued", f.tickWhenDue(t, id))
	f.summarize(t, id, "# Third")

	change("cancelled")
	require.Equal(t, "capped", f.tickWhenDue(t, id), "two reactive updates this hour already")
	reopen := f.nextEvalAt(t, id)
	require.WithinDuration(t, n1.Add(time.Hour), reopen, time.Millisecond, "waits until the oldest is an hour old")
	require.Equal(t, "", f.tick(t, reopen.Add(-time.Second), id))
	require.Equal(t, "enqueued", f.tick(t, reopen.Add(time.Second), id))
	require.Equal(t, "cancelled", f.updates(t, id)[0]["changes"].([]any)[0].(map[string]any)["to"])
}

// testActiveHoursAcrossMidnight: an interval card with active hours 22:00-06:00 in Tokyo
// pauses outside the window, batches the changes made meanwhile into one update when the
// window opens, keeps running past local midnight and pauses again in the morning.
func testActiveHoursAcrossMidnight(t *testing.T, h *sdktest.Host) {
	f := newFixture(t, h, "Night Owl Co")
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	require.NoError(t, err)
	id := f.activeCard(t, map[string]any{"mode": "interval", "intervalMinutes": 60,
		"activeHours": map[string]any{"start": "22:00", "end": "06:00", "timezone": "Asia/Tokyo"}})
	d := time.Now().In(tokyo).AddDate(0, 0, 2)
	at := func(day, hour, minute int) time.Time {
		return time.Date(d.Year(), d.Month(), d.Day()+day, hour, minute, 0, 0, tokyo)
	}

	require.Equal(t, "paused_hours", f.tick(t, at(0, 12, 0), id))
	c := f.card(t, id)
	require.Equal(t, "paused_hours", c["state"])
	require.WithinDuration(t, at(0, 22, 0), ts(c["nextEvalAt"].(string)), 0, "evaluated again when the window opens")

	// Two changes while paused become one update when the window opens.
	f.issue(t, map[string]any{"title": "Night one"})
	f.issue(t, map[string]any{"title": "Night two"})
	require.Equal(t, "", f.tick(t, at(0, 21, 59), id))
	require.Equal(t, "enqueued", f.tick(t, at(0, 23, 30), id))
	up := f.updates(t, id)[0]
	require.Equal(t, "interval", up["trigger"])
	require.Len(t, up["changes"].([]any), 2)
	require.Equal(t, "new", up["changes"].([]any)[0].(map[string]any)["changeKind"])
	require.Equal(t, "active", f.card(t, id)["state"])
	f.summarize(t, id, "# Night")

	// Past local midnight the window is still open.
	f.issue(t, map[string]any{"title": "After midnight"})
	require.Equal(t, "enqueued", f.tick(t, at(1, 3, 0), id))
	f.summarize(t, id, "# Early")
	require.Equal(t, "paused_hours", f.tick(t, at(1, 7, 0), id))
	require.WithinDuration(t, at(1, 22, 0), f.nextEvalAt(t, id), 0)
}

// testDailyTokenCap: the costs owner's events of a card's generation tasks since midnight
// UTC count against dailyTokenCap; automatic updates pause at the cap, a manual refresh
// still runs, and the next UTC day resumes.
func testDailyTokenCap(t *testing.T, h *sdktest.Host) {
	f := newFixture(t, h, "Budget Co")
	issue := f.issue(t, map[string]any{"title": "Watched"})["id"].(string)
	id := f.activeCard(t, map[string]any{"mode": "interval", "intervalMinutes": 1, "dailyTokenCap": 1000})
	first := f.updates(t, id)[0]
	task := first["generationIssueId"].(string)
	now := time.Now().UTC()
	ok(t, h.Do("POST", "/api/companies/"+f.co+"/cost-events", map[string]any{"agentId": f.summarizer.ID, "provider": "test",
		"model": "test-model", "costCents": 12, "inputTokens": 700, "outputTokens": 400, "issueId": task,
		"heartbeatRunId": first["runId"], "occurredAt": now.Format(time.RFC3339Nano)}), http.StatusCreated)

	c := f.card(t, id)
	require.Equal(t, float64(1100), c["todayTokens"])
	require.Equal(t, float64(12), c["todayCostCents"])
	led := f.updates(t, id)[0]
	require.Equal(t, float64(700), led["inputTokens"])
	require.Equal(t, float64(400), led["outputTokens"])
	require.Equal(t, float64(12), led["costCents"])

	f.setStatus(t, issue, "todo")
	evalAt := now.Add(2 * time.Minute)
	if midnight := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC); !evalAt.Before(midnight) {
		evalAt = now.Add(time.Minute + time.Second) // the cost event must stay on the same UTC day
	}
	require.Equal(t, "paused_budget", f.tick(t, evalAt, id))
	require.Equal(t, "paused_budget", f.card(t, id)["state"])

	// A manual refresh still runs.
	res := ok(t, h.Do("POST", "/api/status-cards/"+id+"/refresh", map[string]any{}), http.StatusAccepted)
	require.Equal(t, true, res["enqueued"])
	require.Equal(t, "incremental", res["kind"])
	require.Len(t, res["changes"].([]any), 1)
	f.summarize(t, id, "# Manual")
	require.Equal(t, "active", f.card(t, id)["state"])

	// The next UTC day starts from zero.
	f.setStatus(t, issue, "done")
	tomorrow := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 1, 0, 0, time.UTC)
	require.Equal(t, "enqueued", f.tick(t, tomorrow, id))
	require.Equal(t, "active", f.card(t, id)["state"])
}

// tick evaluates the fixture's due cards at now and returns the outcome for one card.
func (f *fixture) tick(t *testing.T, now time.Time, cardID string) string {
	t.Helper()
	return tickIn(t, f.h, now, f.co, cardID)
}

// tickWhenDue ticks a card at its nextEvalAt plus a second; a later event may have pushed
// the debounce on in between (delivery is at least once and asynchronous), so it reads and
// tries again a few times.
func (f *fixture) tickWhenDue(t *testing.T, id string) string {
	t.Helper()
	for range 5 {
		if out := f.tick(t, f.nextEvalAt(t, id).Add(time.Second), id); out != "" {
			return out
		}
	}
	t.Fatalf("card %s was never due", id)
	return ""
}

// testConcurrentTicksGenerateOnce: two schedulers evaluating the same due card at the same
// instant (two nodes) queue its update once.
func testConcurrentTicksGenerateOnce(t *testing.T, h *sdktest.Host) {
	f := newFixture(t, h, "Two Nodes Co")
	id := f.activeCard(t, map[string]any{"mode": "interval", "intervalMinutes": 5})
	f.issue(t, map[string]any{"title": "A change"})
	at := f.nextEvalAt(t, id).Add(time.Second)
	type result struct {
		out string
		err error
	}
	outs := make(chan result, 4)
	for range 4 {
		go func() {
			out, err := tickRaw(h, at, f.co, id)
			outs <- result{out, err}
		}()
	}
	enqueued := 0
	for range 4 {
		r := <-outs
		require.NoError(t, r.err)
		if r.out == "enqueued" {
			enqueued++
		}
	}
	require.Equal(t, 1, enqueued)
	running := 0
	for _, u := range f.updates(t, id) {
		if u["status"] == "running" {
			running++
		}
	}
	require.Equal(t, 1, running, "one update in flight")
}

// testTriggerBooleans: a reactive card whose triggers leave out status transitions lets a
// status change pass and updates for a new issue.
func testTriggerBooleans(t *testing.T, h *sdktest.Host) {
	f := newFixture(t, h, "Triggers Co")
	watched := f.issue(t, map[string]any{"title": "Watched"})["id"].(string)
	id := f.activeCard(t, map[string]any{"mode": "reactive", "debounceSeconds": 30,
		"triggers": map[string]any{"statusTransitions": false}})
	at := time.Now().UTC()
	f.setStatus(t, watched, "todo")
	f.waitDirty(t, id, at, 30*time.Second)
	require.Equal(t, "no_changes", f.tickWhenDue(t, id))
	require.Equal(t, float64(0), f.card(t, id)["pendingChangeCount"])
	at = time.Now().UTC()
	f.issue(t, map[string]any{"title": "Newcomer"})
	f.waitDirty(t, id, at, 30*time.Second)
	require.Equal(t, "enqueued", f.tickWhenDue(t, id))
	kinds := map[string]bool{}
	for _, c := range f.updates(t, id)[0]["changes"].([]any) {
		kinds[c.(map[string]any)["changeKind"].(string)] = true
	}
	require.Equal(t, map[string]bool{"new": true, "status": true}, kinds, "the update carries every change")
}
