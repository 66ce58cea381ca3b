package kernel

import (
	"net/http"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/keelhq/keel/sdk/idem"
)

// idemTable is the kernel's Idempotency-Key table (migrations/0004).
const idemTable = "kernel.idempotency_keys"

// idemSkip lists kernel routes whose answer carries a secret shown once (an API key's
// token): they ignore Idempotency-Key, so the token is never stored.
var idemSkip = map[string]bool{
	"POST /api/agents/{agentId}/keys": true,
	"POST /api/board-api-keys":        true,
}

// honoursIdempotencyKey reports whether a kernel route serves Idempotency-Key: an
// authenticated POST whose answer holds no secret.
func honoursIdempotencyKey(c *fiber.Ctx, route *Route) bool {
	return route.Owner == OwnerKernel && route.Method == fiber.MethodPost && route.Access != AccessPublic &&
		!idemSkip[route.Key()] && c.Request().Header.Peek(idem.Header) != nil
}

// serveIdempotent serves a kernel route for a request carrying Idempotency-Key: a
// remembered answer is replayed, a key reused with another request is a 409, a malformed
// key a 400; otherwise the route runs and a 2xx answer is remembered (in the route's own
// transaction when it calls idem.Record or idem.RecordAnswer).
func (k *Kernel) serveIdempotent(c *fiber.Ctx, rc *RequestContext) error {
	key := string(c.Request().Header.Peek(idem.Header))
	if msg := idem.CheckKey(key); msg != "" {
		return ValidationError(ValidationDetail{Path: idem.Header, Message: msg})
	}
	principal := idem.Principal(string(rc.Actor.Type), rc.Actor.UserID, rc.Actor.AgentID)
	if principal == "" {
		return rc.Route.Handler(c, rc)
	}
	ctx := c.UserContext()
	store := &idem.Store{DB: k.Pool, Table: idemTable}
	k.sweepIdempotencyKeys(c, store)
	fp := idem.Fingerprint(c.Method(), c.Path(), string(c.Request().URI().QueryString()), c.Body())
	prev, err := store.Lookup(ctx, principal, key)
	if err != nil {
		return Internal(err)
	}
	if prev != nil {
		return replayIdempotent(c, fp, prev)
	}
	hctx, pending := idem.Begin(ctx, store, principal, key, fp)
	c.SetUserContext(hctx)
	if err := rc.Route.Handler(c, rc); err != nil {
		if err := WriteError(c, err); err != nil {
			return err
		}
	}
	c.SetUserContext(ctx)
	if pending.InUse() {
		if prev, err := store.Lookup(ctx, principal, key); err == nil && prev != nil {
			c.Response().Reset()
			c.Set("X-Request-Id", rc.RequestID)
			return replayIdempotent(c, fp, prev)
		}
	}
	st := c.Response().StatusCode()
	if st < 200 || st > 299 {
		return nil
	}
	a := &idem.Answer{Fingerprint: fp, Status: st, ContentType: string(c.Response().Header.ContentType()),
		Body: append([]byte{}, c.Response().Body()...)}
	done := false
	if pending.Recorded() {
		done, err = store.Complete(ctx, principal, key, a)
	}
	if !done && err == nil {
		_, err = store.Save(ctx, principal, key, a)
	}
	if err != nil {
		k.log.Warn("error remembering an idempotent answer", "key", key, "error", err)
	}
	return nil
}

// replayIdempotent answers a request whose key is remembered.
func replayIdempotent(c *fiber.Ctx, fingerprint string, prev *idem.Answer) error {
	if prev.Fingerprint != fingerprint {
		return (&APIError{Status: http.StatusConflict, Message: idem.ReusedMessage}).WithCode(idem.ReusedCode)
	}
	c.Status(prev.Status)
	if prev.ContentType != "" {
		c.Set(fiber.HeaderContentType, prev.ContentType)
	}
	c.Set(idem.ReplayedHeader, "true")
	return c.Send(prev.Body)
}

// sweepIdempotencyKeys deletes expired keys, at most every ten minutes per node.
func (k *Kernel) sweepIdempotencyKeys(c *fiber.Ctx, store *idem.Store) {
	now := time.Now().UnixNano()
	last := k.idemSweep.Load()
	if now-last < int64(10*time.Minute) || !k.idemSweep.CompareAndSwap(last, now) {
		return
	}
	if _, err := store.Sweep(c.UserContext()); err != nil {
		k.log.Warn("error deleting expired idempotency keys", "error", err)
	}
}
