package work

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"github.com/keelhq/keel/sdk"
)

// IssueBlockersDiagnostics is GET /api/issues/{id}/diagnostics/blockers: the blockers with
// their resolved flag (only done resolves; cancelled stays unresolved) and the readiness.
type IssueBlockersDiagnostics struct {
	IssueID                   string               `json:"issueId"`
	Identifier                string               `json:"identifier"`
	Ready                     bool                 `json:"ready"`
	UnresolvedBlockerIssueIDs []string             `json:"unresolvedBlockerIssueIds"`
	Blockers                  []IssueBlockerStatus `json:"blockers"`
}

func init() {
	addRoutes(route{Method: "GET", Path: "/api/issues/{id}/diagnostics/blockers", Response: new(IssueBlockersDiagnostics),
		Summary: "List an issue's blockers with resolved flags (only done resolves a blocker)", Handle: (*Work).issueBlockersDiagnosticsRoute})
}

func (w *Work) issueBlockersDiagnosticsRoute(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	iss, err := w.issueByRef(ctx, r.PathValue("id"))
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	d, err := w.issueBlockersDiagnostics(ctx, iss)
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, d)
}

// issueBlockersDiagnostics reads an issue's blockers and readiness.
func (w *Work) issueBlockersDiagnostics(ctx context.Context, iss *Issue) (*IssueBlockersDiagnostics, error) {
	blockers, err := newIssueStore(w.db).IssueBlockersList(ctx, &IssueBlockersListParams{IssueID: iss.ID})
	if err != nil {
		return nil, err
	}
	d := &IssueBlockersDiagnostics{IssueID: iss.ID, Identifier: iss.Identifier, Blockers: blockers, UnresolvedBlockerIssueIDs: []string{}}
	for _, b := range blockers {
		if !b.Resolved {
			d.UnresolvedBlockerIssueIDs = append(d.UnresolvedBlockerIssueIDs, b.ID)
		}
	}
	d.Ready = len(d.UnresolvedBlockerIssueIDs) == 0
	return d, nil
}

// issueBlockerCycleCheck refuses (422 "Blocker cycle detected: A → … → A") a blocker set
// for iss that would close a cycle: a new blocker B closes one when iss already blocks B,
// directly or through other issues. It reads the graph downstream of iss with a recursive
// CTE and searches it breadth first, so the path named is a shortest one. Call it in the
// transaction holding IssueBlockersLock.
func (w *Work) issueBlockerCycleCheck(ctx context.Context, st *issueStore, iss *Issue, blockerIDs []string) error {
	if len(blockerIDs) == 0 {
		return nil
	}
	if slices.Contains(blockerIDs, iss.ID) {
		return unprocessable("Blocker cycle detected: " + iss.Identifier + " → " + iss.Identifier)
	}
	edges, err := st.IssueBlockerEdgesReachable(ctx, &IssueBlockerEdgesReachableParams{IssueID: iss.ID})
	if err != nil {
		return err
	}
	path := blockerCyclePath(iss.ID, blockerIDs, edges)
	if path == nil {
		return nil
	}
	names, err := w.issueIdentifiers(ctx, st, path)
	if err != nil {
		return err
	}
	return unprocessable("Blocker cycle detected: " + strings.Join(append(names, names[0]), " → "))
}

// blockerCyclePath returns a shortest path from issueID along "blocks" edges to one of the
// new blockers (issueID first), or nil when none is reachable.
func blockerCyclePath(issueID string, blockerIDs []string, edges []IssueBlockerEdge) []string {
	next := map[string][]string{}
	for _, e := range edges {
		next[e.BlockerID] = append(next[e.BlockerID], e.BlockedID)
	}
	prev := map[string]string{issueID: ""}
	queue := []string{issueID}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, n := range next[cur] {
			if _, seen := prev[n]; seen {
				continue
			}
			prev[n] = cur
			if slices.Contains(blockerIDs, n) {
				var path []string
				for at := n; at != ""; at = prev[at] {
					path = append([]string{at}, path...)
				}
				return path
			}
			queue = append(queue, n)
		}
	}
	return nil
}

// issueIdentifiers maps issue ids to identifiers, keeping the order (unknown ids stay ids).
func (w *Work) issueIdentifiers(ctx context.Context, st *issueStore, ids []string) ([]string, error) {
	byID, err := st.IssueIdentifiersList(ctx, &IssueIdentifiersListParams{IDs: ids})
	if err != nil {
		return nil, err
	}
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id
		if s, ok := byID[id]; ok {
			out[i] = s
		}
	}
	return out, nil
}
