package statuscards

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDiffChangeKinds(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2027, 1, 1, 12, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Hour)
	agentA, agentB, user := "agent-a", "agent-b", "user-1"
	old := Fingerprint{
		"same":     {Status: "todo", UpdatedAt: t0, Identifier: "K-1"},
		"status":   {Status: "todo", UpdatedAt: t0, Identifier: "K-2"},
		"assignee": {Status: "todo", UpdatedAt: t0, Identifier: "K-3", AssigneeAgentID: &agentA},
		"comment":  {Status: "todo", UpdatedAt: t0, Identifier: "K-4"},
		"updated":  {Status: "todo", UpdatedAt: t0, Identifier: "K-5"},
		"removed":  {Status: "done", UpdatedAt: t0, Identifier: "K-6"},
		"two":      {Status: "todo", UpdatedAt: t0, Identifier: "K-8", AssigneeUserID: &user},
	}
	cur := Fingerprint{
		"same":     {Status: "todo", UpdatedAt: t0, Identifier: "K-1"},
		"status":   {Status: "in_progress", UpdatedAt: t1, Identifier: "K-2"},
		"assignee": {Status: "todo", UpdatedAt: t1, Identifier: "K-3", AssigneeAgentID: &agentB},
		"comment":  {Status: "todo", UpdatedAt: t1, Identifier: "K-4", LatestHumanCommentAt: &t1},
		"updated":  {Status: "todo", UpdatedAt: t1, Identifier: "K-5"},
		"new":      {Status: "backlog", UpdatedAt: t1, Identifier: "K-7"},
		"two":      {Status: "done", UpdatedAt: t1, Identifier: "K-8"},
	}
	var got []string
	for _, c := range diff(old, cur) {
		got = append(got, fmt.Sprintf("%s %s %v→%v", c.Identifier, c.ChangeKind, c.From, c.To))
	}
	require.Equal(t, []string{
		"K-2 status todo→in_progress",
		"K-3 assignee agent:agent-a→agent:agent-b",
		"K-4 human_comment <nil>→" + t1.String(),
		"K-5 updated " + t0.String() + "→" + t1.String(),
		"K-6 removed done→<nil>",
		"K-7 new <nil>→backlog",
		"K-8 assignee user:user-1→<nil>",
		"K-8 status todo→done",
	}, got)
	require.Empty(t, diff(cur, cur))
	require.Len(t, diff(nil, cur), len(cur), "everything is new against no fingerprint")
}

func TestTriggersCount(t *testing.T) {
	t.Parallel()
	p := defaultPolicy()
	changes := []Change{{ChangeKind: changeNew}, {ChangeKind: changeUpdated}, {ChangeKind: changeHumanComment}}
	require.Len(t, p.Triggers.relevant(changes), 2, "updated counts only with anyUpdate")
	p.Triggers.AnyUpdate = true
	require.Len(t, p.Triggers.relevant(changes), 3)
	p.Triggers = Triggers{StatusTransitions: true}
	require.Empty(t, p.Triggers.relevant(changes))
}

func TestActiveHoursWindow(t *testing.T) {
	t.Parallel()
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	require.NoError(t, err)
	night := &ActiveHours{Start: "22:00", End: "06:00", Timezone: "Asia/Tokyo"}
	day := &ActiveHours{Start: "09:00", End: "17:30", Timezone: "America/New_York"}
	for _, tc := range []struct {
		ah    *ActiveHours
		at    time.Time
		in    bool
		opens time.Time
	}{
		{night, time.Date(2027, 3, 1, 23, 0, 0, 0, tokyo), true, time.Time{}},
		{night, time.Date(2027, 3, 2, 5, 59, 0, 0, tokyo), true, time.Time{}},
		{night, time.Date(2027, 3, 2, 6, 0, 0, 0, tokyo), false, time.Date(2027, 3, 2, 22, 0, 0, 0, tokyo)},
		{night, time.Date(2027, 3, 2, 21, 59, 0, 0, tokyo), false, time.Date(2027, 3, 2, 22, 0, 0, 0, tokyo)},
		{day, time.Date(2027, 3, 13, 18, 0, 0, 0, time.UTC), true, time.Time{}},
		// The evening before the spring-forward Sunday: the window opens at 09:00 EDT.
		{day, time.Date(2027, 3, 13, 23, 0, 0, 0, time.UTC), false, time.Date(2027, 3, 14, 13, 0, 0, 0, time.UTC)},
	} {
		in, opens := tc.ah.inWindow(tc.at)
		require.Equal(t, tc.in, in, "%s at %s", tc.ah.Timezone, tc.at)
		require.True(t, tc.opens.Equal(opens), "%s at %s opens %s, want %s", tc.ah.Timezone, tc.at, opens, tc.opens)
	}
}

// BenchmarkDiff5000 diffs two fingerprints of 5,000 issues with 50 changed (the in-process
// part of change detection).
func BenchmarkDiff5000(b *testing.B) {
	t0 := time.Now().UTC()
	old, cur := Fingerprint{}, Fingerprint{}
	for i := range 5000 {
		id := fmt.Sprintf("issue-%05d", i)
		old[id] = &FPEntry{Status: "todo", UpdatedAt: t0, Identifier: fmt.Sprintf("K-%d", i)}
		e := *old[id]
		if i%100 == 0 {
			e.Status, e.UpdatedAt = "done", t0.Add(time.Minute)
		}
		cur[id] = &e
	}
	b.ResetTimer()
	for range b.N {
		if n := len(diff(old, cur)); n != 50 {
			b.Fatalf("%d changes", n)
		}
	}
}
