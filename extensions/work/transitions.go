package work

import (
	"fmt"
	"slices"
	"time"
)

// issueStatuses lists every issue status in workflow order.
var issueStatuses = []string{StatusBacklog, StatusTodo, StatusInProgress, StatusInReview, StatusBlocked, StatusDone, StatusCancelled}

// issueTransitions is the status machine of REFERENCE.md 2.2: the statuses each status may
// move to. done and cancelled are terminal.
var issueTransitions = map[string][]string{
	StatusBacklog:    {StatusTodo, StatusCancelled},
	StatusTodo:       {StatusInProgress, StatusBlocked, StatusCancelled},
	StatusInProgress: {StatusInReview, StatusBlocked, StatusDone, StatusCancelled},
	StatusInReview:   {StatusInProgress, StatusDone, StatusCancelled},
	StatusBlocked:    {StatusTodo, StatusInProgress, StatusCancelled},
	StatusDone:       {},
	StatusCancelled:  {},
}

// isIssueStatus reports whether s is a valid issue status.
func isIssueStatus(s string) bool { return slices.Contains(issueStatuses, s) }

// isTerminalIssueStatus reports whether s is done or cancelled.
func isTerminalIssueStatus(s string) bool { return s == StatusDone || s == StatusCancelled }

// issueTransitionCheck reports whether an issue may move from one status to another. Staying
// in the same status is always allowed (a no-op). A refused move is a 422 naming both
// statuses; an unknown status is a 400 Validation error.
func issueTransitionCheck(from, to string) error {
	if !isIssueStatus(to) {
		return invalid("status", "must be one of backlog, todo, in_progress, in_review, blocked, done, cancelled")
	}
	if !isIssueStatus(from) {
		return unprocessable(fmt.Sprintf("Issue has an unknown status %q", from))
	}
	if from == to || slices.Contains(issueTransitions[from], to) {
		return nil
	}
	return unprocessable(fmt.Sprintf("Invalid status transition: %s → %s", from, to))
}

// issueStatusStamps sets the timestamps a status entry records on iss, at now:
//
//   - startedAt is set when the issue first enters in_progress and kept afterwards (a
//     release and a later checkout, or in_review → in_progress, leave it alone): it is
//     "when work first started";
//   - completedAt is set on entering done and cancelledAt on entering cancelled; both
//     statuses are terminal, so these are set once and never cleared.
//
// Staying in the same status changes nothing. It also drops the unblock descriptor when the
// issue leaves blocked, since the descriptor only means something while blocked.
func issueStatusStamps(iss *Issue, to string, now time.Time) {
	if iss.Status == to {
		return
	}
	switch to {
	case StatusInProgress:
		if iss.StartedAt == nil {
			iss.StartedAt = &now
		}
	case StatusDone:
		if iss.CompletedAt == nil {
			iss.CompletedAt = &now
		}
	case StatusCancelled:
		if iss.CancelledAt == nil {
			iss.CancelledAt = &now
		}
	}
	if iss.Status == StatusBlocked && to != StatusBlocked {
		iss.UnblockDescriptor = nil
	}
	iss.Status = to
}
