package work

import (
	"fmt"
	"slices"
	"time"
)

// issueStatuses lists every issue status in workflow order.
var issueStatuses = []string{StatusBacklog, StatusTodo, StatusInProgress, StatusInReview, StatusBlocked, StatusDone, StatusCancelled}

// isIssueStatus reports whether s is a valid issue status.
func isIssueStatus(s string) bool { return slices.Contains(issueStatuses, s) }

// isTerminalIssueStatus reports whether s is done or cancelled.
func isTerminalIssueStatus(s string) bool { return s == StatusDone || s == StatusCancelled }

// Texts of the refused status moves (the reference product's, REFERENCE.md 2.2).
const (
	msgInProgressNeedsAssignee = "in_progress issues require an assignee"
	msgBlockedNeedsReason      = "Entering blocked requires unresolved blockers, a pending interaction/approval, or unblockDescriptor"
)

// issueTransitionCheck reports whether an issue may move from one status to another. Like
// the reference product's PATCH route (REFERENCE.md 2.2), a move between any two statuses is
// allowed; only the target's precondition is checked, by issueTargetCheck once the rest of
// the patch is applied. An unknown target status is a 400 Validation error.
func issueTransitionCheck(from, to string) error {
	if !isIssueStatus(to) {
		return invalid("status", "must be one of backlog, todo, in_progress, in_review, blocked, done, cancelled")
	}
	if !isIssueStatus(from) {
		return unprocessable(fmt.Sprintf("Issue has an unknown status %q", from))
	}
	return nil
}

// issueTargetState is what the target's precondition looks at, after the patch: the
// assignees, whether unresolved blockers or a pending approval remain, the descriptor.
type issueTargetState struct {
	HasAssignee           bool
	HasUnresolvedBlockers bool
	HasPendingApproval    bool
	HasUnblockDescriptor  bool
}

// issueTargetCheck checks the precondition of entering a status (a 422 with the reference's
// text): in_progress needs an assignee; blocked needs unresolved blockers, a pending
// approval or an unblockDescriptor. Other statuses have none.
func issueTargetCheck(to string, st issueTargetState) error {
	switch to {
	case StatusInProgress:
		if !st.HasAssignee {
			return unprocessable(msgInProgressNeedsAssignee)
		}
	case StatusBlocked:
		if !st.HasUnresolvedBlockers && !st.HasPendingApproval && !st.HasUnblockDescriptor {
			return unprocessable(msgBlockedNeedsReason)
		}
	}
	return nil
}

// issueStatusStamps sets the timestamps a status entry records on iss, at now:
//
//   - startedAt is set when the issue first enters in_progress and kept afterwards (a
//     release and a later checkout, or in_review → in_progress, leave it alone): it is
//     "when work first started";
//   - completedAt is set on entering done and cancelledAt on entering cancelled, each time
//     (a reopened issue that is done again completed at the later time); leaving done or
//     cancelled keeps them, as the reference product does.
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
		iss.CompletedAt = &now
	case StatusCancelled:
		iss.CancelledAt = &now
	}
	if iss.Status == StatusBlocked && to != StatusBlocked {
		iss.UnblockDescriptor = nil
	}
	iss.Status = to
}
