package work

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"

	"github.com/uptrace/bun"

	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/outbox"
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
func (w *Work) writeErr(rw http.ResponseWriter, err error) {
	var e *sdk.Error
	if !errors.As(err, &e) {
		w.log.Error("request failed", "error", err)
	}
	sdk.WriteErr(rw, err)
}

// requirePermission checks a permission key through the kernel (403 naming it).
func (w *Work) requirePermission(ctx context.Context, companyID, permission string) error {
	return w.host.RequirePermission(ctx, companyID, permission)
}

// activity appends an activity entry attributed to the request's actor.
func (w *Work) activity(ctx context.Context, companyID, action, entityType, entityID string, details any) error {
	e := &sdk.ActivityEntry{
		CompanyID: companyID, Actor: sdk.ActorFrom(ctx), Action: action, EntityType: entityType, EntityID: entityID, Details: details,
	}
	err := w.host.LogActivity(ctx, e)
	if err == nil || w.outbox == nil {
		return err
	}
	// The host could not take it now: the outbox retries until it does.
	if _, oerr := w.outbox.LogActivity(ctx, w.pool, e); oerr != nil {
		return errors.Join(err, oerr)
	}
	w.outbox.Kick()
	return nil
}

// effects collects the outbox rows a write adds inside its transaction, to deliver once
// it committed.
type effects struct{ ids []string }

// activityTx adds an activity entry to the outbox inside the write's transaction, so the
// entry commits with the write and is delivered at least once (fx.deliver after the commit).
func (w *Work) activityTx(ctx context.Context, tx bun.Tx, fx *effects, companyID, action, entityType, entityID string, details any) error {
	return w.activityOn(ctx, tx.Tx, fx, companyID, action, entityType, entityID, details) // the *sql.Tx under bun: the outbox writes $n placeholders
}

// activityOn is activityTx through any writer the outbox takes: a transaction, or a
// *pgx.Batch that carries the write.
func (w *Work) activityOn(ctx context.Context, db any, fx *effects, companyID, action, entityType, entityID string, details any) error {
	e := &sdk.ActivityEntry{
		CompanyID: companyID, Actor: sdk.ActorFrom(ctx), Action: action, EntityType: entityType, EntityID: entityID, Details: details,
	}
	id, err := w.outbox.LogActivity(ctx, db, e)
	fx.ids = append(fx.ids, id)
	return err
}

// wakeTx adds an agent wake to the outbox inside the write's transaction (see activityTx).
func (w *Work) wakeTx(ctx context.Context, tx bun.Tx, fx *effects, req *WakeRequest) error {
	return w.wakeOn(ctx, tx.Tx, fx, req)
}

// wakeOn is wakeTx through any writer the outbox takes (see activityOn).
func (w *Work) wakeOn(ctx context.Context, db any, fx *effects, req *WakeRequest) error {
	if req.AgentID == "" {
		return nil
	}
	in, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("error encoding wake: %w", err)
	}
	id, err := w.outbox.AddCall(ctx, db, &outbox.Call{Method: "agents.wakeup", Actor: sdk.ActorFrom(ctx), CompanyID: req.CompanyID, Input: in})
	fx.ids = append(fx.ids, id)
	return err
}

// deliver delivers a committed write's outbox rows before its request answers.
func (w *Work) deliver(ctx context.Context, fx *effects) { w.outbox.Deliver(ctx, fx.ids) }

// WakeRequest asks the agents owner to wake an agent.
type WakeRequest struct {
	AgentID   string         `json:"agentId"`
	CompanyID string         `json:"companyId"`
	Source    string         `json:"source"`
	Reason    string         `json:"reason"`
	Payload   map[string]any `json:"payload,omitempty"`
	// IdempotencyKey coalesces repeated wakes for the same cause.
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
}

// wake asks the agents extension to wake an agent. It is harmless when no agents
// extension is loaded yet (the request is dropped and logged at debug level).
func (w *Work) wake(ctx context.Context, req *WakeRequest) {
	if req.AgentID == "" {
		return
	}
	err := w.host.Call(ctx, "agents.wakeup", sdk.ActorFrom(ctx), req.CompanyID, req, nil)
	switch {
	case err == nil:
	case sdk.IsMethodNotProvided(err):
		w.log.Debug("no agents extension to wake agent", "agent", req.AgentID, "reason", req.Reason)
	case w.outbox != nil:
		// The agents extension could not take it now (restarting, say): the outbox retries;
		// the wake's idempotency key keeps a repeat from waking twice.
		in, _ := json.Marshal(req)
		if _, oerr := w.outbox.AddCall(ctx, w.pool, &outbox.Call{Method: "agents.wakeup", Actor: sdk.ActorFrom(ctx),
			CompanyID: req.CompanyID, Input: in}); oerr != nil {
			w.log.Warn("error requesting wake", "agent", req.AgentID, "reason", req.Reason, "error", errors.Join(err, oerr))
		}
		w.outbox.Kick()
	default:
		w.log.Warn("error requesting wake", "agent", req.AgentID, "reason", req.Reason, "error", err)
	}
}

// attachmentMaxBytesFromEnv reads SERVICE_ATTACHMENT_MAX_BYTES (default 10 MiB).
func attachmentMaxBytesFromEnv() int64 {
	if v, err := strconv.ParseInt(os.Getenv("SERVICE_ATTACHMENT_MAX_BYTES"), 10, 64); err == nil && v > 0 {
		return v
	}
	return 10 << 20
}

// patchField is one field of a partial update (PATCH); see sdk.PatchField.
type patchField[T any] = sdk.PatchField[T]

// activityOrLog records activity after a committed write; a failure is logged, not
// returned, since the write it describes stands.
func (w *Work) activityOrLog(ctx context.Context, companyID, action, entityType, entityID string, details any) {
	if err := w.activity(ctx, companyID, action, entityType, entityID, details); err != nil {
		w.log.Error("error recording activity", "action", action, "entity", entityID, "error", err)
	}
}
