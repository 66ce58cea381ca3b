package work

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keelhq/keel/sdk"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

// IssueCheckoutBody is the body of POST /api/issues/{id}/checkout. The run comes only from
// the caller (X-Service-Run-Id or the agent JWT), never from the body.
type IssueCheckoutBody struct {
	// AgentID is the agent taking the issue: the calling agent itself, or any agent of the
	// company when the board checks out for it.
	AgentID string `json:"agentId" jsonschema:"format=uuid"`
	// ExpectedStatuses are the statuses the caller expects the issue to be in (non-empty).
	ExpectedStatuses []string `json:"expectedStatuses" jsonschema:"minItems=1"`
}

// issueCheckoutConflictDetails are the details of 409 "Issue checkout conflict".
type issueCheckoutConflictDetails struct {
	IssueID         string  `json:"issueId"`
	Status          string  `json:"status"`
	AssigneeAgentID *string `json:"assigneeAgentId"`
	CheckoutRunID   *string `json:"checkoutRunId"`
	ExecutionRunID  *string `json:"executionRunId"`
}

func init() {
	addRoutes(
		route{Method: "POST", Path: "/api/issues/{id}/checkout", Response: new(IssueView), Body: IssueCheckoutBody{},
			Summary: "Check an issue out for a run of an agent (atomic; 409 on conflict, 422 while blockers are unresolved)",
			Handle:  (*Work).issueCheckoutRoute},
		route{Method: "POST", Path: "/api/issues/{id}/release", Response: new(IssueView),
			Summary: "Release an issue: in_progress goes back to todo; the agent assignee and run locks are cleared",
			Handle:  (*Work).issueReleaseRoute},
		route{Method: "POST", Path: "/api/issues/{id}/admin/force-release", Response: new(IssueView),
			Summary: "Release an issue regardless of its assignee and run (needs tasks:manage_active_checkouts)",
			Handle:  (*Work).issueForceReleaseRoute},
	)
}

// terminalRunStatuses are heartbeat-run statuses after which a run holds nothing.
var terminalRunStatuses = []string{"succeeded", "failed", "cancelled", "timed_out"}

// issueRunStale reports whether a run is known to be over, so its checkout may be adopted.
// It asks the agents extension (method agents.runStatus with {runId}); a run it reports
// missing (404, or found=false) or in a terminal status is stale. When the method is not
// provided or the call fails, the run's state is unknown and it is treated as live: nothing
// is adopted from it. (Until the agents extension provides the method and this extension
// declares it in its uses, every run is "unknown".)
func (w *Work) issueRunStale(ctx context.Context, companyID, runID string) bool {
	if runID == "" {
		return false
	}
	var out struct {
		Status string `json:"status"`
		Found  *bool  `json:"found"`
	}
	err := w.host.Call(ctx, "agents.runStatus", sdk.ActorFrom(ctx), companyID, map[string]string{"runId": runID}, &out)
	if err != nil {
		var e *sdk.Error
		if errors.As(err, &e) && e.Status == http.StatusNotFound && e.Code != "method_not_provided" {
			return true
		}
		w.log.Debug("run liveness unknown; not adopting", "run", runID, "error", err)
		return false
	}
	if out.Found != nil && !*out.Found {
		return true
	}
	return slices.Contains(terminalRunStatuses, out.Status)
}

func (w *Work) issueCheckoutRoute(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	iss, err := w.issueByRef(ctx, r.PathValue("id"))
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	var body IssueCheckoutBody
	if err := decodeBody(r, &body); err != nil {
		w.writeErr(rw, err)
		return
	}
	out, err := w.issueCheckout(ctx, iss, &body)
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	v, err := w.issueView(ctx, out)
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, v)
}

// issueCheckout implements REFERENCE.md 2.2 "Checkout":
//
//  1. unresolved blockers → 422 "Issue is blocked by unresolved blockers";
//  2. one conditional UPDATE … RETURNING (IssueCheckout);
//  3. when it matches nothing: succeed idempotently if this run already holds the issue;
//     adopt an in_progress issue of the agent with no checkout run; adopt one whose checkout
//     run is stale; clear an execution lock held by a stale run and retry once;
//  4. otherwise 409 "Issue checkout conflict" with the issue's lock state.
func (w *Work) issueCheckout(ctx context.Context, iss *Issue, body *IssueCheckoutBody) (*Issue, error) {
	actor := sdk.ActorFrom(ctx)
	var d []validationDetail
	agentID := strings.ToLower(strings.TrimSpace(body.AgentID))
	if !isUUID(agentID) {
		d = append(d, validationDetail{Path: "agentId", Message: "must be a UUID"})
	}
	if len(body.ExpectedStatuses) == 0 {
		d = append(d, validationDetail{Path: "expectedStatuses", Message: "must list at least one status"})
	}
	for i, s := range body.ExpectedStatuses {
		if !isIssueStatus(s) {
			d = append(d, validationDetail{Path: fmt.Sprintf("expectedStatuses.%d", i), Message: "must be one of " + strings.Join(issueStatuses, ", ")})
		}
	}
	if len(d) > 0 {
		return nil, validationError(d...)
	}
	runID := actor.RunId
	if runID == "" {
		return nil, &sdk.Error{Status: http.StatusUnprocessableEntity, Code: "run_id_required",
			Message: "Run id required for checkout (send X-Service-Run-Id or use a run's agent JWT)"}
	}
	switch actor.Type {
	case "agent":
		if agentID != actor.AgentId {
			return nil, forbidden("Agents can only check out issues for themselves")
		}
	case "board", "system":
	default:
		return nil, forbidden("Only agents and the board can check out issues")
	}
	ag, err := w.host.Principals.GetAgent(ctx, &hostv1.GetAgentRequest{AgentId: agentID})
	if err != nil && status.Code(err) != codes.NotFound {
		return nil, fmt.Errorf("error reading agent %s: %w", agentID, err)
	}
	if ag == nil || ag.CompanyId != iss.CompanyID {
		return nil, unprocessable("Agent not found in company")
	}
	if ag.Status == "terminated" || ag.Status == "pending_approval" {
		return nil, unprocessable("Agent cannot check out issues while " + ag.Status)
	}
	nameKey := strings.ToLower(ag.Name)
	st := newIssueStore(w.db)
	if err := w.issueCheckoutBlocked(ctx, st, iss.ID); err != nil {
		return nil, err
	}
	p := &IssueCheckoutParams{IssueID: iss.ID, AgentID: agentID, RunID: runID, AgentNameKey: &nameKey, ExpectedStatuses: body.ExpectedStatuses}
	out, how, err := w.issueCheckoutAttempt(ctx, st, p)
	if err != nil {
		return nil, err
	}
	if out == nil {
		if err := w.issueCheckoutBlocked(ctx, st, iss.ID); err != nil {
			return nil, err
		}
		cur, err := st.IssueGet(ctx, &IssueGetParams{ID: iss.ID})
		if err != nil {
			return nil, err
		}
		if cur == nil {
			return nil, notFound("Issue not found")
		}
		return nil, &sdk.Error{Status: http.StatusConflict, Message: "Issue checkout conflict", Details: issueCheckoutConflictDetails{
			IssueID: cur.ID, Status: cur.Status, AssigneeAgentID: cur.AssigneeAgentID, CheckoutRunID: cur.CheckoutRunID, ExecutionRunID: cur.ExecutionRunID}}
	}
	if how != "idempotent" {
		w.activityOrLog(ctx, out.CompanyID, "issue.checked_out", "issue", out.ID, map[string]any{
			"identifier": out.Identifier, "agentId": agentID, "runId": runID, "mode": how,
			"previousStatus": iss.Status, "status": out.Status})
	}
	return out, nil
}

// issueCheckoutBlocked returns 422 with the unresolved blockers, or nil.
func (w *Work) issueCheckoutBlocked(ctx context.Context, st *issueStore, issueID string) error {
	ids, err := st.IssueUnresolvedBlockers(ctx, &IssueUnresolvedBlockersParams{IssueID: issueID})
	if err != nil {
		return err
	}
	if len(ids) > 0 {
		return &sdk.Error{Status: http.StatusUnprocessableEntity, Message: "Issue is blocked by unresolved blockers",
			Details: map[string]any{"unresolvedBlockerIssueIds": ids}}
	}
	return nil
}

// issueCheckoutAttempt runs steps 2 and 3 of issueCheckout and says how it succeeded
// (checkout, idempotent, adopted_unowned, adopted_stale_run, cleared_stale_execution), or
// returns nil for a conflict.
func (w *Work) issueCheckoutAttempt(ctx context.Context, st *issueStore, p *IssueCheckoutParams) (*Issue, string, error) {
	clearedStale := false
	for {
		out, err := st.IssueCheckout(ctx, p)
		if err != nil || out != nil {
			how := "checkout"
			if clearedStale {
				how = "cleared_stale_execution"
			}
			return out, how, err
		}
		cur, err := st.IssueGet(ctx, &IssueGetParams{ID: p.IssueID})
		if err != nil || cur == nil {
			return nil, "", err
		}
		mine := cur.AssigneeAgentID != nil && *cur.AssigneeAgentID == p.AgentID
		switch {
		case mine && cur.CheckoutRunID != nil && *cur.CheckoutRunID == p.RunID:
			return cur, "idempotent", nil
		case mine && cur.Status == StatusInProgress && cur.CheckoutRunID == nil:
			if cur.ExecutionRunID != nil && *cur.ExecutionRunID != p.RunID && !w.issueRunStale(ctx, cur.CompanyID, *cur.ExecutionRunID) {
				return nil, "", nil
			}
			prev := issueDeref(cur.ExecutionRunID)
			if prev == p.RunID {
				prev = ""
			}
			out, err := st.IssueCheckoutAdopt(ctx, &IssueCheckoutAdoptParams{IssueCheckoutParams: *p, PreviousRunID: ""})
			if err == nil && out == nil && prev != "" {
				// The stale execution lock blocks the adoption; clear it and retry.
				if _, err := st.IssueExecutionLockClear(ctx, &IssueExecutionLockClearParams{IssueID: p.IssueID, RunID: prev}); err != nil {
					return nil, "", err
				}
				out, err = st.IssueCheckoutAdopt(ctx, &IssueCheckoutAdoptParams{IssueCheckoutParams: *p, PreviousRunID: ""})
			}
			return out, "adopted_unowned", err
		case mine && cur.Status == StatusInProgress && cur.CheckoutRunID != nil && w.issueRunStale(ctx, cur.CompanyID, *cur.CheckoutRunID):
			out, err := st.IssueCheckoutAdopt(ctx, &IssueCheckoutAdoptParams{IssueCheckoutParams: *p, PreviousRunID: *cur.CheckoutRunID})
			return out, "adopted_stale_run", err
		case !clearedStale && cur.ExecutionRunID != nil && *cur.ExecutionRunID != p.RunID &&
			(cur.CheckoutRunID == nil || *cur.CheckoutRunID == *cur.ExecutionRunID || mine) &&
			w.issueRunStale(ctx, cur.CompanyID, *cur.ExecutionRunID):
			if _, err := st.IssueExecutionLockClear(ctx, &IssueExecutionLockClearParams{IssueID: p.IssueID, RunID: *cur.ExecutionRunID}); err != nil {
				return nil, "", err
			}
			clearedStale = true
			continue
		}
		return nil, "", nil
	}
}

func (w *Work) issueReleaseRoute(rw http.ResponseWriter, r *http.Request) {
	w.issueReleaseServe(rw, r, false)
}

func (w *Work) issueForceReleaseRoute(rw http.ResponseWriter, r *http.Request) {
	w.issueReleaseServe(rw, r, true)
}

func (w *Work) issueReleaseServe(rw http.ResponseWriter, r *http.Request, force bool) {
	ctx := r.Context()
	iss, err := w.issueByRef(ctx, r.PathValue("id"))
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	if err := decodeBody(r, &struct{}{}); err != nil {
		w.writeErr(rw, err)
		return
	}
	out, err := w.issueRelease(ctx, iss, force)
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	v, err := w.issueView(ctx, out)
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, v)
}

// issueRelease implements release and force-release: in_progress goes back to todo (other
// statuses stay) and the agent assignee, checkout run and execution lock are cleared (a user
// assignee is kept). An agent may release only its own issue (409 "Only assignee can release
// issue") and only from the checkout run, unless that run is known to be stale (409 "Only
// checkout run can release issue"); the board may release any issue. Force-release needs
// tasks:manage_active_checkouts and skips these checks.
func (w *Work) issueRelease(ctx context.Context, iss *Issue, force bool) (*Issue, error) {
	actor := sdk.ActorFrom(ctx)
	if force {
		if err := w.requirePermission(ctx, iss.CompanyID, "tasks:manage_active_checkouts"); err != nil {
			return nil, err
		}
	} else if actor.Type == "agent" {
		if iss.AssigneeAgentID == nil || *iss.AssigneeAgentID != actor.AgentId {
			return nil, conflict("Only assignee can release issue")
		}
		if iss.CheckoutRunID != nil && *iss.CheckoutRunID != actor.RunId && !w.issueRunStale(ctx, iss.CompanyID, *iss.CheckoutRunID) {
			return nil, conflict("Only checkout run can release issue")
		}
	}
	out, err := newIssueStore(w.db).IssueRelease(ctx, &IssueReleaseParams{IssueID: iss.ID,
		SeenAssigneeAgentID: iss.AssigneeAgentID, SeenCheckoutRunID: iss.CheckoutRunID})
	if err != nil {
		return nil, err
	}
	if out == nil {
		cur, err := newIssueStore(w.db).IssueGet(ctx, &IssueGetParams{ID: iss.ID})
		if err != nil {
			return nil, err
		}
		if cur == nil {
			return nil, notFound("Issue not found")
		}
		return nil, &sdk.Error{Status: http.StatusConflict, Message: "Issue checkout conflict", Details: issueCheckoutConflictDetails{
			IssueID: cur.ID, Status: cur.Status, AssigneeAgentID: cur.AssigneeAgentID, CheckoutRunID: cur.CheckoutRunID, ExecutionRunID: cur.ExecutionRunID}}
	}
	w.activityOrLog(ctx, out.CompanyID, "issue.released", "issue", out.ID, map[string]any{
		"identifier": out.Identifier, "forced": force, "previousAssigneeAgentId": iss.AssigneeAgentID,
		"previousCheckoutRunId": iss.CheckoutRunID, "previousStatus": iss.Status, "status": out.Status})
	return out, nil
}
