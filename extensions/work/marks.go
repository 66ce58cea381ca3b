package work

import (
	"net/http"

	"github.com/keelhq/keel/sdk"
)

// issueMarkKind is a per-principal bookkeeping mark on an issue: read or inbox-archived.
type issueMarkKind string

const (
	issueMarkRead    issueMarkKind = "read"
	issueMarkArchive issueMarkKind = "inbox_archive"
)

func (k issueMarkKind) table() string {
	if k == issueMarkRead {
		return "issue_read_marks"
	}
	return "issue_inbox_archives"
}

func (k issueMarkKind) column() string {
	if k == issueMarkRead {
		return "read_at"
	}
	return "archived_at"
}

// activityActions are the spec's activity actions for setting and removing the mark.
func (k issueMarkKind) activityActions() (set, unset string) {
	if k == issueMarkRead {
		return "issue.read_marked", "issue.read_unmarked"
	}
	return "issue.inbox_archived", "issue.inbox_unarchived"
}

// jsonField is the field of the mark's time in responses.
func (k issueMarkKind) jsonField() string {
	if k == issueMarkRead {
		return "readAt"
	}
	return "archivedAt"
}

func init() {
	addRoutes(
		route{Method: "POST", Path: "/api/issues/{id}/read", Response: new(map[string]any),
			Summary: "Mark an issue read for the calling user or agent", Handle: markHandler(issueMarkRead, true)},
		route{Method: "DELETE", Path: "/api/issues/{id}/read", Response: new(map[string]any),
			Summary: "Mark an issue unread for the calling user or agent", Handle: markHandler(issueMarkRead, false)},
		route{Method: "POST", Path: "/api/issues/{id}/inbox-archive", Response: new(map[string]any),
			Summary: "Archive an issue from the calling user's or agent's inbox", Handle: markHandler(issueMarkArchive, true)},
		route{Method: "DELETE", Path: "/api/issues/{id}/inbox-archive", Response: new(map[string]any),
			Summary: "Return an issue to the calling user's or agent's inbox", Handle: markHandler(issueMarkArchive, false)},
	)
}

// markPrincipal returns who a mark belongs to: the board user or the agent.
func markPrincipal(a *sdk.Actor) (principalType, principalID string, err error) {
	switch {
	case a.Type == "board" && a.UserId != "":
		return "user", a.UserId, nil
	case a.Type == "agent" && a.AgentId != "":
		return "agent", a.AgentId, nil
	}
	return "", "", forbidden("Read and inbox marks belong to a user or an agent")
}

// markHandler sets (set) or removes a mark of the calling principal and records the spec's
// activity action. Removing a mark that does not exist succeeds and records nothing.
func markHandler(kind issueMarkKind, set bool) func(w *Work, rw http.ResponseWriter, r *http.Request) {
	return func(w *Work, rw http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		iss, err := w.issueByRef(ctx, r.PathValue("id"))
		if err != nil {
			w.writeErr(rw, err)
			return
		}
		ptype, pid, err := markPrincipal(sdk.ActorFrom(ctx))
		if err != nil {
			w.writeErr(rw, err)
			return
		}
		// The response is the caller's mark: {issueId, userId, agentId, readAt|archivedAt},
		// the time null once removed.
		out := map[string]any{"issueId": iss.ID, "userId": nil, "agentId": nil, kind.jsonField(): nil}
		if ptype == "user" {
			out["userId"] = pid
		} else {
			out["agentId"] = pid
		}
		st := newIssueStore(w.db)
		setAction, unsetAction := kind.activityActions()
		if set {
			at, err := st.IssueMarkUpsert(ctx, &IssueMarkUpsertParams{Kind: kind, CompanyID: iss.CompanyID, IssueID: iss.ID, PrincipalType: ptype, PrincipalID: pid})
			if err != nil {
				w.writeErr(rw, err)
				return
			}
			out[kind.jsonField()] = at
			w.activityOrLog(ctx, iss.CompanyID, setAction, "issue", iss.ID, map[string]any{"identifier": iss.Identifier})
			sdk.WriteJSON(rw, http.StatusOK, out)
			return
		}
		removed, err := st.IssueMarkDelete(ctx, &IssueMarkDeleteParams{Kind: kind, IssueID: iss.ID, PrincipalType: ptype, PrincipalID: pid})
		if err != nil {
			w.writeErr(rw, err)
			return
		}
		if removed {
			w.activityOrLog(ctx, iss.CompanyID, unsetAction, "issue", iss.ID, map[string]any{"identifier": iss.Identifier})
		}
		sdk.WriteJSON(rw, http.StatusOK, out)
	}
}
