package routines

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/keelhq/keel/sdk"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

// The request helpers are the SDK's; these names keep the area files short.
var (
	notFound             = sdk.NotFound
	conflict             = sdk.Conflict
	forbidden            = sdk.Forbidden
	unprocessable        = sdk.Unprocessable
	validationError      = sdk.ValidationError
	invalid              = sdk.Invalid
	decodeBody           = sdk.DecodeJSON
	isUUID               = sdk.IsUUID
	requireCompanyAccess = sdk.RequireCompanyAccess
)

type detail = sdk.ValidationDetail

// Error texts (spec part 1 and REFERENCE.md 5 where they give one).
const (
	msgRoutineNotFound    = "Routine not found"
	msgTriggerNotFound    = "Routine trigger not found"
	msgTriggerNotActive   = "Routine trigger is not active"
	msgAgentOwnOnly       = "Agents can only manage routines assigned to themselves"
	msgAgentCreateOwnOnly = "Agents can only create routines assigned to themselves"
	msgAgentNoReassign    = "Agents cannot reassign routines to another agent"
	msgRoutineArchived    = "Archived routines cannot be changed back or fired"
)

// System actor ids of the routines engine's own activity entries: the activity gate
// recognises the scheduler's entries about a routine by actorId and details.routineId.
const (
	actorScheduler = "routine-scheduler"
	actorWebhook   = "routine-webhook"
)

// writeErr writes err; anything that is not an *sdk.Error is logged and answered with 500.
func (x *Routines) writeErr(rw http.ResponseWriter, err error) {
	var e *sdk.Error
	if !errors.As(err, &e) {
		x.log.Error("request failed", "error", err)
	}
	sdk.WriteErr(rw, err)
}

// activityBy appends an activity entry. A request actor is recorded as itself; systemID
// names the engine part ("routine-scheduler", "routine-webhook") when the system acts. A
// failure is logged, not returned: the write it records has already happened.
func (x *Routines) activityBy(ctx context.Context, actor *sdk.Actor, systemID, companyID, action, entityType, entityID string, details map[string]any) {
	req := &hostv1.AppendActivityRequest{CompanyId: companyID, Action: action, EntityType: entityType, EntityId: entityID}
	switch {
	case actor != nil && actor.Type == "agent":
		req.ActorType, req.ActorId, req.AgentId, req.RunId = "agent", actor.AgentId, actor.AgentId, actor.RunId
	case actor != nil && actor.Type == "board":
		req.ActorType, req.ActorId = "user", actor.UserId
	default:
		req.ActorType, req.ActorId = "system", systemID
		if req.ActorId == "" {
			req.ActorId = actorScheduler
		}
	}
	if details != nil {
		b, err := json.Marshal(details)
		if err != nil {
			x.log.Error("error encoding activity details", "action", action, "error", err)
			return
		}
		req.DetailsJson = b
	}
	if _, errs := x.host.AppendActivity(ctx, req); errs[0] != nil {
		x.log.Warn("error appending activity", "action", action, "entity", entityID, "error", errs[0])
	}
}

// call invokes another extension's method as the system.
func (x *Routines) call(ctx context.Context, method, companyID string, in, out any) error {
	return x.host.Call(ctx, method, sdk.SystemActor(), companyID, in, out)
}

// patchField is one field of a partial update (PATCH); see sdk.PatchField.
type patchField[T any] = sdk.PatchField[T]

// ptr returns a pointer to v.
func ptr[T any](v T) *T { return &v }

// strOrNil returns nil for "".
func strOrNil(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// deref returns *p or "".
func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// actorIDs returns the agent and user ids of an actor for the *_by_* columns.
func actorIDs(a *sdk.Actor) (agentID, userID *string) {
	switch {
	case a == nil:
	case a.Type == "agent":
		agentID = strOrNil(a.AgentId)
	case a.Type == "board":
		userID = strOrNil(a.UserId)
	}
	return agentID, userID
}

// errorText returns the client-facing text of an error: an *sdk.Error's message, or the
// error itself (used for failure reasons recorded on runs).
func errorText(err error) string {
	var e *sdk.Error
	if errors.As(err, &e) {
		return e.Message
	}
	return fmt.Sprint(err)
}
