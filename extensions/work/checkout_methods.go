package work

import (
	"context"
	"strings"

	"github.com/keelhq/keel/sdk"
)

// The heartbeat engine checks a run's issue out as the run starts (REFERENCE 2.2 "A run
// woken for an issue checks it out"), through the checkout of POST /api/issues/{id}/checkout.
func init() {
	addMethods(map[string]method{
		"issues.checkoutForRun": {
			Description: "Check an issue of the call's company out for a heartbeat run as it starts, with the semantics of " +
				"POST /api/issues/{id}/checkout. Input: {id (UUID or identifier), agentId, runId, expectedStatuses}. Output: " +
				"{id, status, checkoutRunId, executionRunId}; the checkout's errors (404, 409 \"Issue checkout conflict\", 422) as on the route.",
			Call: (*Work).methodIssuesCheckoutForRun,
		},
	})
}

// checkoutForRunOutput is the output of work.issues.checkoutForRun.
type checkoutForRunOutput struct {
	ID             string  `json:"id"`
	Status         string  `json:"status"`
	CheckoutRunID  *string `json:"checkoutRunId"`
	ExecutionRunID *string `json:"executionRunId"`
}

func (w *Work) methodIssuesCheckoutForRun(ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in struct {
		ID               string   `json:"id"`
		AgentID          string   `json:"agentId"`
		RunID            string   `json:"runId"`
		ExpectedStatuses []string `json:"expectedStatuses"`
	}
	if err := issuesMethodDecode(call, &in); err != nil {
		return nil, err
	}
	companyID, err := routineMethodCompany(call)
	if err != nil {
		return nil, err
	}
	runID := strings.ToLower(strings.TrimSpace(in.RunID))
	if !isUUID(runID) {
		return nil, invalid("runId", "must be a UUID")
	}
	if call.Actor != nil && call.Actor.Type != "system" {
		return nil, forbidden("Only the heartbeat engine checks issues out for runs")
	}
	// The run comes from the caller, as the checkout route takes it from X-Service-Run-Id.
	ctx = sdk.WithRequestInfo(ctx, &sdk.Actor{Type: "system", RunId: runID}, companyID, "", nil)
	iss, err := w.issueByRef(ctx, strings.TrimSpace(in.ID))
	if err != nil {
		return nil, err
	}
	if !strings.EqualFold(iss.CompanyID, companyID) {
		return nil, notFound("Issue not found")
	}
	out, err := w.issueCheckout(ctx, iss, &IssueCheckoutBody{AgentID: in.AgentID, ExpectedStatuses: in.ExpectedStatuses})
	if err != nil {
		return nil, err
	}
	return &checkoutForRunOutput{ID: out.ID, Status: out.Status, CheckoutRunID: out.CheckoutRunID, ExecutionRunID: out.ExecutionRunID}, nil
}
