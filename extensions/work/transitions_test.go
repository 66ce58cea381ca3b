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

// TestTransitionAnyMove checks REFERENCE.md 2.2: every move between two statuses passes the
// transition check; the target's precondition is issueTargetCheck's.
func TestTransitionAnyMove(t *testing.T) {
	t.Parallel()
	for _, from := range issueStatuses {
		for _, to := range issueStatuses {
			require.NoError(t, issueTransitionCheck(from, to), "%s → %s", from, to)
		}
	}
	var e *sdk.Error
	require.True(t, errors.As(issueTransitionCheck("todo", "open"), &e))
	require.Equal(t, http.StatusBadRequest, e.Status)
	require.True(t, errors.As(issueTransitionCheck("weird", "todo"), &e))
	require.Equal(t, http.StatusUnprocessableEntity, e.Status)
	require.True(t, isTerminalIssueStatus("done") && isTerminalIssueStatus("cancelled") && !isTerminalIssueStatus("blocked"))
}

func TestTransitionTargetCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		to   string
		st   issueTargetState
		want string
	}{
		{"InProgressWithoutAssignee", StatusInProgress, issueTargetState{}, msgInProgressNeedsAssignee},
		{"InProgressWithAssignee", StatusInProgress, issueTargetState{HasAssignee: true}, ""},
		{"BlockedWithoutReason", StatusBlocked, issueTargetState{HasAssignee: true}, msgBlockedNeedsReason},
		{"BlockedByBlockers", StatusBlocked, issueTargetState{HasUnresolvedBlockers: true}, ""},
		{"BlockedByApproval", StatusBlocked, issueTargetState{HasPendingApproval: true}, ""},
		{"BlockedByDescriptor", StatusBlocked, issueTargetState{HasUnblockDescriptor: true}, ""},
		{"DoneAnyway", StatusDone, issueTargetState{}, ""},
		{"TodoAnyway", StatusTodo, issueTargetState{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := issueTargetCheck(tc.to, tc.st)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			var e *sdk.Error
			require.True(t, errors.As(err, &e), "%v", err)
			require.Equal(t, http.StatusUnprocessableEntity, e.Status)
			require.Equal(t, tc.want, e.Message)
		})
	}
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

// FuzzTransition walks the statuses with arbitrary moves (valid and not) and checks the
// invariants: every move to a known status passes and an unknown one changes nothing;
// startedAt is set iff the walk ever entered in_progress and never changes once set;
// completedAt is set while done (and kept after), cancelledAt likewise for cancelled.
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
			if err != nil {
				require.False(t, isIssueStatus(to), "move %d %s → %s refused: %v", i, iss.Status, to, err)
				require.Equal(t, before, *iss)
				continue
			}
			require.True(t, isIssueStatus(to), "move %d %s → %s allowed", i, iss.Status, to)
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
			if iss.Status == StatusDone {
				require.NotNil(t, iss.CompletedAt)
				if before.Status != StatusDone {
					require.Equal(t, now, *iss.CompletedAt, "entering done stamps completedAt")
				}
			}
			if iss.Status == StatusCancelled {
				require.NotNil(t, iss.CancelledAt)
				if before.Status != StatusCancelled {
					require.Equal(t, now, *iss.CancelledAt, "entering cancelled stamps cancelledAt")
				}
			}
			if before.CompletedAt != nil {
				require.NotNil(t, iss.CompletedAt, "completedAt is kept")
			}
		}
	})
}
