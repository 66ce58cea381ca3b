package decisions

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/jackc/pgx/v5"

	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/outbox"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

// The request helpers are the SDK's; these names keep the area files short.
var (
	notFound      = sdk.NotFound
	forbidden     = sdk.Forbidden
	unprocessable = sdk.Unprocessable
	isUUID        = sdk.IsUUID
)

type detail = sdk.ValidationDetail

// Error texts (spec part 1 "Errors").
const (
	msgNotFound          = "Decision not found"
	msgRunRequired       = "Agent run context required"
	msgProvenance        = "Decision provenance requires the origin run"
	msgRunNotIssue       = "Origin run is not issue-scoped"
	msgVisibility        = "Decision target is outside the origin visibility boundary"
	msgAuthority         = "Decision effect exceeds the origin authority boundary"
	msgIdemConflict      = "Decision idempotency key already used with a different payload"
	msgTargetsMissing    = "All referenced issues must exist in the company"
	msgExpiresWindow     = "expiresAt must be within 30 days"
	msgOpenCap           = "Open decision cap reached"
	msgInvalidFilters    = "Invalid decision filters"
	msgInvalidStats      = "Invalid decision stats filters"
	msgStatsOwnOnly      = "Agents may only read their own decision stats"
	msgReadOwnOnly       = "Only the origin agent may read this decision"
	msgCancelOwnOnly     = "Only the origin agent may cancel"
	msgSignature         = "Decision signature verification failed"
	msgReplayOtherUser   = "Decision replay belongs to a different user"
	codeAlreadyResolved  = "decision_already_resolved"
	codeExpired          = "decision_expired"
	msgUnknownOption     = "Unknown optionId"
	reasonTargetChanged  = "target_changed"
	wakeReasonResolved   = "decision_resolved"
	activityEntityType   = "decision"
	bundleEntityType     = "decision_bundle"
	systemActorExpirer   = "decision-expirer"
	systemActorExecution = "decision-executor"
)

// alreadyResolved is the 409 of deciding or cancelling a resolved decision.
func alreadyResolved() *sdk.Error {
	return &sdk.Error{Status: http.StatusConflict, Message: codeAlreadyResolved, Code: codeAlreadyResolved}
}

// expired is the 409 of deciding an aged-out decision.
func expired() *sdk.Error {
	return &sdk.Error{Status: http.StatusConflict, Message: codeExpired, Code: codeExpired}
}

// validation is the 400 "Validation error" with details, or nil without any.
func validation(d []detail) error {
	if len(d) == 0 {
		return nil
	}
	return sdk.ValidationError(d...)
}

// activity appends an activity entry attributed to the actor (the system, named by
// systemID, when nil) and returns its id; a failure is logged, not returned: the write it
// records has already happened.
func (x *Decisions) activity(ctx context.Context, actor *sdk.Actor, systemID, companyID, action, entityType, entityID string,
	details map[string]any) string {
	req := &hostv1.AppendActivityRequest{CompanyId: companyID, Action: action, EntityType: entityType, EntityId: entityID}
	switch {
	case actor != nil && actor.Type == "agent":
		req.ActorType, req.ActorId, req.AgentId, req.RunId = "agent", actor.AgentId, actor.AgentId, actor.RunId
	case actor != nil && actor.Type == "board":
		req.ActorType, req.ActorId = "user", actor.UserId
	default:
		req.ActorType, req.ActorId = "system", systemID
	}
	if details != nil {
		b, err := json.Marshal(details)
		if err != nil {
			x.log.Error("error encoding activity details", "action", action, "error", err)
			return ""
		}
		req.DetailsJson = b
	}
	res, errs := x.host.AppendActivity(ctx, req)
	if err := errs[0]; err != nil {
		x.log.Warn("error appending activity", "action", action, "entity", entityID, "error", err)
		return ""
	}
	return res[0].GetId()
}

// wakeTx adds the continuation wake of a resolved decision to the outbox inside the
// transaction that resolved it, when the decision asks for one; the wake's idempotency key
// keeps a repeated delivery from waking twice. It returns the outbox row id ("" for none).
func (x *Decisions) wakeTx(ctx context.Context, tx pgx.Tx, d *Decision, outcome string) (string, error) {
	if d.ContinuationPolicy != policyWake {
		return "", nil
	}
	in, err := json.Marshal(map[string]any{
		"agentId": d.OriginAgentID, "companyId": d.CompanyID, "source": "automation", "reason": wakeReasonResolved,
		"payload":        map[string]any{"issueId": d.OriginIssueID, "decisionId": d.ID, "outcome": outcome},
		"idempotencyKey": "decision:" + d.ID + ":" + outcome,
	})
	if err != nil {
		return "", fmt.Errorf("error encoding wake: %w", err)
	}
	id, err := x.outbox.AddCall(ctx, tx, &outbox.Call{Method: "agents.wakeup", Actor: sdk.SystemActor(), CompanyID: d.CompanyID, Input: in})
	if err != nil {
		return "", fmt.Errorf("error adding wake to the outbox: %w", err)
	}
	return id, nil
}

// deliver delivers committed outbox rows now (the drainer retries what fails).
func (x *Decisions) deliver(ctx context.Context, ids ...string) { x.outbox.Deliver(ctx, ids) }

// call invokes another extension's method with an actor.
func (x *Decisions) call(ctx context.Context, actor *sdk.Actor, method, companyID string, in, out any) error {
	return x.host.Call(ctx, method, actor, companyID, in, out)
}

// ptr returns a pointer to v.
func ptr[T any](v T) *T { return &v }

// deref returns *p or "".
func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
