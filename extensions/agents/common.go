package agents

import (
	"context"
	"errors"
	"net/http"

	"github.com/keelhq/keel/sdk"
)

// The request helpers are the SDK's; these names keep the area files short.
var (
	apiError             = sdk.NewError
	notFound             = sdk.NotFound
	conflict             = sdk.Conflict
	forbidden            = sdk.Forbidden
	unprocessable        = sdk.Unprocessable
	validationError      = sdk.ValidationError
	invalid              = sdk.Invalid
	decodeBody           = sdk.DecodeJSON
	page                 = sdk.Page
	isUUID               = sdk.IsUUID
	requireCompanyAccess = sdk.RequireCompanyAccess
)

type validationDetail = sdk.ValidationDetail

// writeErr writes err; anything that is not an *sdk.Error is logged and answered with 500.
func (a *Agents) writeErr(rw http.ResponseWriter, err error) {
	var e *sdk.Error
	if !errors.As(err, &e) {
		a.log.Error("request failed", "error", err)
	}
	sdk.WriteErr(rw, err)
}

// requirePermission checks a permission key through the kernel (403 naming it).
func (a *Agents) requirePermission(ctx context.Context, companyID, permission string) error {
	return a.host.RequirePermission(ctx, companyID, permission)
}

// activity appends an activity entry attributed to the request's actor.
func (a *Agents) activity(ctx context.Context, companyID, action, entityType, entityID string, details any) error {
	return a.host.LogActivity(ctx, &sdk.ActivityEntry{
		CompanyID: companyID, Actor: sdk.ActorFrom(ctx), Action: action, EntityType: entityType, EntityID: entityID, Details: details,
	})
}

// WakeRequest is the input of the provided method agents.wakeup (the work extension and
// others send it to wake an agent).
type WakeRequest struct {
	AgentID   string         `json:"agentId"`
	CompanyID string         `json:"companyId"`
	Source    string         `json:"source"`
	Reason    string         `json:"reason"`
	Payload   map[string]any `json:"payload,omitempty"`
	// IdempotencyKey coalesces repeated wakes for the same cause.
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
}
