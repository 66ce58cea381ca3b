package kernel

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5"

	"github.com/keelhq/keel/sdk"
)

// Webhook delivery statuses.
const (
	DeliveryPending = "pending"
	DeliverySuccess = "success"
	DeliveryFailed  = "failed"
)

// WebhookDelivery is one recorded inbound webhook.
type WebhookDelivery struct {
	ID         string     `json:"id"`
	PluginKey  string     `json:"pluginKey"`
	WebhookKey string     `json:"webhookKey"`
	Status     string     `json:"status"`
	RequestID  string     `json:"requestId,omitempty"`
	BodyBytes  int        `json:"bodyBytes"`
	DurationMs *int       `json:"durationMs"`
	Error      *string    `json:"error"`
	StartedAt  time.Time  `json:"startedAt"`
	FinishedAt *time.Time `json:"finishedAt"`
	CreatedAt  time.Time  `json:"createdAt"`
}

// WebhookDeliveryList returns a plugin's most recent deliveries, newest first.
func (k *Kernel) WebhookDeliveryList(ctx context.Context, pluginKey string, limit int) ([]*WebhookDelivery, error) {
	rows, err := k.Pool.Query(ctx, `SELECT id::text, extension_key, endpoint_key, status, request_id, body_bytes, duration_ms, error, started_at, finished_at, created_at
		FROM kernel.plugin_webhook_deliveries WHERE extension_key = $1 ORDER BY created_at DESC, id DESC LIMIT $2`, pluginKey, limit)
	if err != nil {
		return nil, fmt.Errorf("error listing webhook deliveries of %s: %w", pluginKey, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*WebhookDelivery, error) {
		var d WebhookDelivery
		err := r.Scan(&d.ID, &d.PluginKey, &d.WebhookKey, &d.Status, &d.RequestID, &d.BodyBytes, &d.DurationMs, &d.Error, &d.StartedAt, &d.FinishedAt, &d.CreatedAt)
		return &d, err
	})
	if err != nil {
		return nil, fmt.Errorf("error listing webhook deliveries of %s: %w", pluginKey, err)
	}
	return out, nil
}

// webhookRequest binds itself (Bind): the body is any bytes, not a JSON document.
type webhookRequest struct {
	PluginID    string              `json:"-"`
	EndpointKey string              `json:"-"`
	Body        []byte              `json:"-"`
	Headers     map[string][]string `json:"-"`
	RequestID   string              `json:"-"`
}

// Bind keeps the body byte for byte and every header: the plugin checks signatures.
func (r *webhookRequest) Bind(c *fiber.Ctx, rc *RequestContext) error {
	r.PluginID, r.EndpointKey, r.RequestID = rc.Params["pluginId"], rc.Params["endpointKey"], rc.RequestID
	r.Body = append([]byte(nil), c.Body()...)
	r.Headers = map[string][]string{}
	c.Request().Header.VisitAll(func(k, v []byte) {
		name := string(k)
		r.Headers[name] = append(r.Headers[name], string(v))
	})
	return nil
}

type webhookResponse struct {
	DeliveryID string `json:"deliveryId"`
	Status     string `json:"status"`
	Error      string `json:"error,omitempty"`
	Result     any    `json:"result,omitempty"`
}

// WriteResponse answers 200 for a delivered webhook and 502 for one the plugin failed.
func (r *webhookResponse) WriteResponse(c *fiber.Ctx, status int) error {
	if r.Status == DeliveryFailed {
		status = http.StatusBadGateway
	}
	return WriteJSON(c, status, r)
}

type webhookEndpoint struct{ k *Kernel }

func (e *webhookEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "POST /api/plugins/{pluginId}/webhooks/{endpointKey}", Access: AccessPublic,
		Summary: "Inbound webhook to a plugin (unauthenticated; raw body and headers delivered; every delivery recorded)"}
}

func (e *webhookEndpoint) Execute(ctx context.Context, req *webhookRequest) (*webhookResponse, error) {
	p, err := e.k.pluginByID(ctx, req.PluginID)
	if err != nil {
		return nil, err
	}
	if p.mf.Webhook(req.EndpointKey) == nil {
		return nil, NotFound(fmt.Sprintf("Webhook endpoint %q is not declared by this plugin", req.EndpointKey))
	}
	if !p.ready() {
		return nil, p.notReady()
	}
	e.k.sweepPluginHistory(ctx)
	id := newID()
	start := time.Now()
	if _, err := e.k.Pool.Exec(ctx, `INSERT INTO kernel.plugin_webhook_deliveries (id, extension_key, endpoint_key, request_id, body_bytes, started_at)
		VALUES ($1, $2, $3, $4, $5, $6)`, id, p.rec.PluginKey, req.EndpointKey, req.RequestID, len(req.Body), start); err != nil {
		return nil, Internal(fmt.Errorf("error recording webhook delivery to %s: %w", p.rec.PluginKey, err))
	}
	var result any
	in := &sdk.WebhookDelivery{DeliveryID: id, EndpointKey: req.EndpointKey, Headers: req.Headers, RawBody: req.Body, RequestID: req.RequestID}
	callErr := e.k.pluginCall(ctx, p, sdk.WebhookMethod, "", in, &result)
	status, msg := DeliverySuccess, (*string)(nil)
	if callErr != nil {
		status = DeliveryFailed
		s := AsAPIError(callErr).Message
		msg = &s
	}
	if _, err := e.k.Pool.Exec(context.WithoutCancel(ctx), `UPDATE kernel.plugin_webhook_deliveries SET status = $2, error = $3,
		duration_ms = $4, finished_at = now() WHERE id = $1`, id, status, msg, int(time.Since(start).Milliseconds())); err != nil {
		return nil, Internal(fmt.Errorf("error recording webhook delivery to %s: %w", p.rec.PluginKey, err))
	}
	if callErr != nil {
		var apiErr *APIError
		if errors.As(callErr, &apiErr) && apiErr.Internal != nil {
			e.k.log.Warn("webhook delivery failed", "plugin", p.rec.PluginKey, "endpoint", req.EndpointKey, "error", apiErr.Internal)
		}
		return &webhookResponse{DeliveryID: id, Status: DeliveryFailed, Error: *msg}, nil
	}
	return &webhookResponse{DeliveryID: id, Status: DeliverySuccess, Result: result}, nil
}
