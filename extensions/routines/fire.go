package routines

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/keelhq/keel/sdk"
)

func init() {
	addRoutes(route{Method: "POST", Path: "/api/routine-triggers/public/{publicId}/fire", Status: http.StatusAccepted, Response: new(Run), Access: sdk.AccessPublic,
		Summary: "Fire a webhook trigger from an external system (202 with the run); the request must satisfy the trigger's signing mode",
		Handle:  (*Routines).fireRoute})
}

// maxWebhookBody bounds a public fire request body.
const maxWebhookBody = 1 << 20

// secretCache keeps resolved webhook secrets by (secret id, version), so the hot fire path
// does not ask the secrets extension every time. A trigger row names the version that
// signs; after a rotation it names a new one, so an old cached value is never looked up
// again, on any host.
type secretCache struct {
	mu  sync.RWMutex
	m   map[secretKey]string
	max int
}

type secretKey struct {
	id      string
	version int
}

func newSecretCache(max int) *secretCache {
	return &secretCache{m: map[secretKey]string{}, max: max}
}

func (c *secretCache) get(id string, version int) (string, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	v, ok := c.m[secretKey{id, version}]
	return v, ok
}

func (c *secretCache) put(id string, version int, value string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.max {
		clear(c.m)
	}
	// Older versions of the same secret are dead once a newer one is in use.
	for k := range c.m {
		if k.id == id && k.version < version {
			delete(c.m, k)
		}
	}
	c.m[secretKey{id, version}] = value
}

// forget drops every cached version of a secret.
func (c *secretCache) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.m {
		if k.id == id {
			delete(c.m, k)
		}
	}
}

// webhookSecret returns the value of the secret version the trigger signs with.
func (x *Routines) webhookSecret(ctx context.Context, t *Trigger) (string, error) {
	if t.SecretID == nil || t.secretVersion == nil {
		return "", fmt.Errorf("webhook trigger %s has no secret", t.ID)
	}
	if v, ok := x.secrets.get(*t.SecretID, *t.secretVersion); ok {
		return v, nil
	}
	var out struct {
		Value   string `json:"value"`
		Version int    `json:"version"`
	}
	if err := x.call(ctx, "secrets.resolve", t.CompanyID, map[string]any{"companyId": t.CompanyID, "secretId": *t.SecretID,
		"version": *t.secretVersion, "requester": Key}, &out); err != nil {
		return "", fmt.Errorf("error resolving webhook secret of trigger %s: %w", t.ID, err)
	}
	x.secrets.put(*t.SecretID, *t.secretVersion, out.Value)
	return out.Value, nil
}

func (x *Routines) fireRoute(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	publicID := strings.ToLower(strings.TrimSpace(r.PathValue("publicId")))
	t, rt, err := triggerByPublicID(ctx, x.pool, publicID)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	if t == nil || t.Kind != kindWebhook {
		x.writeErr(rw, notFound(msgTriggerNotFound))
		return
	}
	if !t.Enabled || rt.Status != statusActive {
		x.writeErr(rw, conflict(msgTriggerNotActive))
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxWebhookBody+1))
	if err != nil {
		x.writeErr(rw, invalid("", "unreadable body"))
		return
	}
	if len(body) > maxWebhookBody {
		x.writeErr(rw, &sdk.Error{Status: http.StatusRequestEntityTooLarge, Message: "Webhook body is too large"})
		return
	}
	mode := deref(t.SigningMode)
	secret := ""
	if mode != signingNone {
		if secret, err = x.webhookSecret(ctx, t); err != nil {
			x.log.Error("webhook secret unavailable", "trigger", t.ID, "error", err)
			x.writeErr(rw, &sdk.Error{Status: http.StatusServiceUnavailable, Message: "Webhook secret is unavailable"})
			return
		}
	}
	window := replayWindowDefault
	if t.ReplayWindowSec != nil {
		window = *t.ReplayWindowSec
	}
	if err := verifyWebhook(&webhookRequest{Mode: mode, Secret: secret, Header: r.Header, Body: body,
		ReplayWindow: time.Duration(window) * time.Second, Now: time.Now()}); err != nil {
		sdk.WriteErr(rw, &sdk.Error{Status: http.StatusUnauthorized, Message: err.Error()})
		return
	}
	key := strings.TrimSpace(r.Header.Get("Idempotency-Key"))
	if len(key) > maxIdempotencyKey {
		x.writeErr(rw, invalid("Idempotency-Key", fmt.Sprintf("must be at most %d characters", maxIdempotencyKey)))
		return
	}
	if mode == signingHMACSHA256 {
		// A timestamped signature identifies one delivery: the same request retried inside
		// the window returns the run it fired; the captured request replayed with another
		// idempotency key is refused.
		sum := sha256.Sum256([]byte(strings.TrimSpace(r.Header.Get(headerServiceTimestamp)) + "." +
			firstHeader(r.Header, headerServiceSignature, headerHubSignature)))
		digest := hex.EncodeToString(sum[:])
		if key == "" {
			key = "webhook-hmac:" + digest
		}
		if err := x.rememberDelivery(ctx, t.ID, digest, key, time.Duration(window)*time.Second); err != nil {
			x.writeErr(rw, err)
			return
		}
	}
	if !json.Valid(body) && (bytes.IndexByte(body, 0) >= 0 || !utf8.Valid(body)) {
		// Stored as {"rawBody": text}; PostgreSQL refuses a NUL in it.
		x.writeErr(rw, invalid("body", "a body that is not JSON must be UTF-8 text without NUL characters"))
		return
	}
	payload, variables := webhookPayload(body)
	if paused, err := x.projectPaused(ctx, rt); err != nil {
		x.writeErr(rw, err)
		return
	} else if paused {
		run, err := x.recordSkip(ctx, rt, t, sourceWebhook, nil, reasonProjectPaused, nil)
		if err != nil {
			x.writeErr(rw, err)
			return
		}
		sdk.WriteJSON(rw, http.StatusAccepted, run)
		return
	}
	run, _, err := x.dispatch(ctx, &dispatchInput{routine: rt, trigger: t, source: sourceWebhook, payload: payload,
		variables: variables, idempotencyKey: key, systemID: actorWebhook, now: time.Now()})
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusAccepted, run)
}

// webhookPayload reads a fire request body: JSON is stored as the run's trigger payload
// (anything else as {"rawBody": text}); a "variables" object at the top level, or inside a
// top-level "payload" object, supplies the run's variables.
func webhookPayload(body []byte) (json.RawMessage, map[string]json.RawMessage) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil, nil
	}
	if !json.Valid(body) {
		raw, _ := json.Marshal(map[string]string{"rawBody": string(body)})
		return raw, nil
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return body, nil
	}
	var vars map[string]json.RawMessage
	if v, ok := top["variables"]; ok && json.Unmarshal(v, &vars) == nil && vars != nil {
		return body, vars
	}
	var inner map[string]json.RawMessage
	if p, ok := top["payload"]; ok && json.Unmarshal(p, &inner) == nil {
		if v, ok := inner["variables"]; ok && json.Unmarshal(v, &vars) == nil && vars != nil {
			return body, vars
		}
	}
	return body, nil
}

// msgWebhookReplay refuses a timestamped delivery seen before under another idempotency key.
const msgWebhookReplay = "Webhook delivery was already received"

// rememberDelivery records a timestamped signature for the trigger's replay window. The
// first request with the signature owns it; a later one inside the window passes only with
// the same idempotency key (a retry, answered with the run already fired), otherwise it is a
// replay: 409. Expired records are taken over, and now and then swept.
func (x *Routines) rememberDelivery(ctx context.Context, triggerID, digest, key string, window time.Duration) error {
	var owner string
	err := x.pool.QueryRow(ctx, `INSERT INTO webhook_deliveries (trigger_id, digest, idempotency_key, expires_at)
		VALUES ($1, $2, $3, now() + make_interval(secs => $4))
		ON CONFLICT (trigger_id, digest) DO UPDATE SET
			idempotency_key = CASE WHEN webhook_deliveries.expires_at < now() THEN EXCLUDED.idempotency_key ELSE webhook_deliveries.idempotency_key END,
			expires_at = CASE WHEN webhook_deliveries.expires_at < now() THEN EXCLUDED.expires_at ELSE webhook_deliveries.expires_at END
		RETURNING idempotency_key`, triggerID, digest, key, window.Seconds()).Scan(&owner)
	if err != nil {
		return fmt.Errorf("error recording webhook delivery: %w", err)
	}
	if owner != key {
		return &sdk.Error{Status: http.StatusConflict, Message: msgWebhookReplay, Code: "webhook_replay"}
	}
	if rand.IntN(64) == 0 {
		if _, err := x.pool.Exec(ctx, `DELETE FROM webhook_deliveries WHERE expires_at < now()`); err != nil {
			x.log.Warn("error sweeping webhook deliveries", "error", err)
		}
	}
	return nil
}
