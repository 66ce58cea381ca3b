package statuscards

import (
	"sort"
	"time"
)

// Change kinds of the update ledger (spec part 1 "Update-history entry").
const (
	changeNew          = "new"
	changeRemoved      = "removed"
	changeStatus       = "status"
	changeAssignee     = "assignee"
	changeHumanComment = "human_comment"
	changeUpdated      = "updated"
)

// Fingerprint is the snapshot of a card's watched issues that change detection diffs
// against, by issue id (REFERENCE.md 5 "Fingerprint entry").
type Fingerprint map[string]*FPEntry

// FPEntry is one watched issue's fingerprint.
type FPEntry struct {
	Status               string     `json:"status"`
	UpdatedAt            time.Time  `json:"updatedAt"`
	LatestHumanCommentAt *time.Time `json:"latestHumanCommentAt,omitempty"`
	Identifier           string     `json:"identifier,omitempty"`
	Title                string     `json:"title,omitempty"`
	AssigneeAgentID      *string    `json:"assigneeAgentId,omitempty"`
	AssigneeUserID       *string    `json:"assigneeUserId,omitempty"`
}

// assignee is the entry's assignee as one comparable value ("agent:<id>", "user:<id>" or nil).
func (e *FPEntry) assignee() any {
	switch {
	case e.AssigneeAgentID != nil:
		return "agent:" + *e.AssigneeAgentID
	case e.AssigneeUserID != nil:
		return "user:" + *e.AssigneeUserID
	}
	return nil
}

// diff compares the stored fingerprint with the current one and returns the changes, ordered
// by identifier then kind. An issue that joined is new and one that left is removed; an
// issue in both yields one change per kind that moved (status, assignee, a later human
// comment), or updated when only its updatedAt moved.
func diff(old, cur Fingerprint) []Change {
	out := []Change{}
	for id, c := range cur {
		o, ok := old[id]
		if !ok {
			out = append(out, Change{IssueID: id, Identifier: c.Identifier, From: nil, To: c.Status, ChangeKind: changeNew})
			continue
		}
		n := len(out)
		if o.Status != c.Status {
			out = append(out, Change{IssueID: id, Identifier: c.Identifier, From: o.Status, To: c.Status, ChangeKind: changeStatus})
		}
		if oa, ca := o.assignee(), c.assignee(); oa != ca {
			out = append(out, Change{IssueID: id, Identifier: c.Identifier, From: oa, To: ca, ChangeKind: changeAssignee})
		}
		if c.LatestHumanCommentAt != nil && (o.LatestHumanCommentAt == nil || c.LatestHumanCommentAt.After(*o.LatestHumanCommentAt)) {
			out = append(out, Change{IssueID: id, Identifier: c.Identifier, From: timeOrNil(o.LatestHumanCommentAt),
				To: c.LatestHumanCommentAt.UTC(), ChangeKind: changeHumanComment})
		}
		if len(out) == n && !o.UpdatedAt.Equal(c.UpdatedAt) {
			out = append(out, Change{IssueID: id, Identifier: c.Identifier, From: o.UpdatedAt.UTC(), To: c.UpdatedAt.UTC(),
				ChangeKind: changeUpdated})
		}
	}
	for id, o := range old {
		if _, ok := cur[id]; !ok {
			out = append(out, Change{IssueID: id, Identifier: o.Identifier, From: o.Status, To: nil, ChangeKind: changeRemoved})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Identifier != out[j].Identifier {
			return out[i].Identifier < out[j].Identifier
		}
		if out[i].IssueID != out[j].IssueID {
			return out[i].IssueID < out[j].IssueID
		}
		return out[i].ChangeKind < out[j].ChangeKind
	})
	return out
}

// timeOrNil is t in UTC, or nil.
func timeOrNil(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UTC()
}
