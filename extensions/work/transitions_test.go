package work

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdk"
)

// transitionsWant is REFERENCE.md 2.2's table, written out independently of issueTransitions.
var transitionsWant = map[[2]string]bool{
	{"backlog", "todo"}: true, {"backlog", "cancelled"}: true,
	{"todo", "in_progress"}: true, {"todo", "blocked"}: true, {"todo", "cancelled"}: true,
	{"in_progress", "in_review"}: true, {"in_progress", "blocked"}: true, {"in_progress", "done"}: true, {"in_progress", "cancelled"}: true,
	{"in_review", "in_progress"}: true, {"in_review", "done"}: true, {"in_review", "cancelled"}: true,
	{"blocked", "todo"}: true, {"blocked", "in_progress"}: true, {"blocked", "cancelled"}: true,
}

func TestTransitionTable(t *testing.T) {
	t.Parallel()
	for _, from := range issueStatuses {
		for _, to := range issueStatuses {
			err := issueTransitionCheck(from, to)
			if from == to || transitionsWant[[2]string{from, to}] {
				require.NoError(t, err, "%s → %s", from, to)
				continue
			}
			var e *sdk.Error
			require.True(t, errors.As(err, &e), "%s → %s: %v", from, to, err)
			require.Equal(t, http.StatusUnprocessableEntity, e.Status)
			require.Equal(t, fmt.Sprintf("Invalid status transition: %s → %s", from, to), e.Message)
		}
	}
	var e *sdk.Error
	require.True(t, errors.As(issueTransitionCheck("todo", "open"), &e))
	require.Equal(t, http.StatusBadRequest, e.Status)
	require.True(t, errors.As(issueTransitionCheck("weird", "todo"), &e))
	require.Equal(t, http.StatusUnprocessableEntity, e.Status)
	require.True(t, isTerminalIssueStatus("done") && isTerminalIssueStatus("cancelled") && !isTerminalIssueStatus("blocked"))
}

func TestTransitionStamps(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	iss := &Issue{Status: StatusTodo}
	issueStatusStamps(iss, StatusInProgress, t0)
	require.Equal(t, t0, *iss.StartedAt)
	issueStatusStamps(iss, StatusInReview, t0.Add(time.Hour))
	issueStatusStamps(iss, StatusInProgress, t0.Add(2*time.Hour))
	require.Equal(t, t0, *iss.StartedAt, "startedAt keeps the first entry")
	issueStatusStamps(iss, StatusDone, t0.Add(3*time.Hour))
	require.Equal(t, t0.Add(3*time.Hour), *iss.CompletedAt)
	require.Nil(t, iss.CancelledAt)

	blocked := &Issue{Status: StatusBlocked, UnblockDescriptor: []byte(`{"owner":"board","action":"x"}`)}
	issueStatusStamps(blocked, StatusBlocked, t0)
	require.NotNil(t, blocked.UnblockDescriptor, "staying blocked keeps the descriptor")
	issueStatusStamps(blocked, StatusCancelled, t0)
	require.Nil(t, blocked.UnblockDescriptor)
	require.Equal(t, t0, *blocked.CancelledAt)
	require.Nil(t, blocked.StartedAt)
}

// FuzzTransition walks the status machine with arbitrary moves (valid and not) and checks
// its invariants: only table moves pass; a refused move changes nothing; terminal statuses
// are never left; completedAt is set exactly when done and cancelledAt exactly when
// cancelled; startedAt is set iff the walk ever entered in_progress and never changes once set.
func FuzzTransition(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 2, 5})
	f.Add([]byte{1, 4, 1, 2, 6, 2})
	f.Add([]byte{0, 6, 0, 1})
	f.Add([]byte{200, 13, 7, 2, 2, 4, 2, 5})
	f.Fuzz(func(t *testing.T, moves []byte) {
		iss := &Issue{Status: StatusBacklog}
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		var firstStart *time.Time
		for i, m := range moves {
			to := fmt.Sprintf("bogus-%d", m)
			if k := int(m) % (len(issueStatuses) + 2); k < len(issueStatuses) {
				to = issueStatuses[k]
			}
			before := *iss
			now = now.Add(time.Minute)
			err := issueTransitionCheck(iss.Status, to)
			allowed := iss.Status == to || transitionsWant[[2]string{iss.Status, to}]
			if err != nil {
				require.False(t, allowed, "move %d %s → %s refused: %v", i, iss.Status, to, err)
				require.Equal(t, before, *iss)
				continue
			}
			require.True(t, allowed, "move %d %s → %s allowed", i, iss.Status, to)
			require.False(t, isTerminalIssueStatus(before.Status) && before.Status != to, "left terminal %s", before.Status)
			issueStatusStamps(iss, to, now)
			require.Equal(t, to, iss.Status)
			if to == StatusInProgress && firstStart == nil {
				firstStart = iss.StartedAt
			}
			if firstStart != nil {
				require.NotNil(t, iss.StartedAt)
				require.Equal(t, *firstStart, *iss.StartedAt)
			} else {
				require.Nil(t, iss.StartedAt)
			}
			require.Equal(t, iss.Status == StatusDone, iss.CompletedAt != nil)
			require.Equal(t, iss.Status == StatusCancelled, iss.CancelledAt != nil)
		}
	})
}
