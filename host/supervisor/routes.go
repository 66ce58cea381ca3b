package supervisor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keelhq/keel/kernel"
	"github.com/keelhq/keel/sdk"
	extensionv1 "github.com/keelhq/keel/sdk/proto/extension/v1"
)

// LimitError is returned by a wasm module whose call broke a limit; the route answers
// with the status and code it carries.
type LimitError interface {
	error
	HTTPStatus() int
	Code() string
}

// routesFor turns a manifest's routes into route-table entries owned by the extension.
func (s *Supervisor) routesFor(m *managed) []*kernel.Route {
	mf := m.src.Manifest
	out := make([]*kernel.Route, 0, len(mf.Routes))
	for _, r := range mf.Routes {
		route := &kernel.Route{
			Method: r.Method, Pattern: r.Path, Owner: mf.Key, Access: kernel.Access(r.Access),
			Permission: r.Permission, Summary: r.Summary, RequestSchema: r.RequestSchema, Status: http.StatusOK,
			ResponseSchema: r.ResponseSchema, Query: r.Query, Errors: r.Errors,
		}
		if r.Status != 0 {
			route.Status = r.Status
		}
		if r.Company != nil {
			route.CompanyFrom, route.CompanyKey = r.Company.From, r.Company.Key
		}
		cacheable := r.Cache && r.Method == http.MethodGet && route.CompanyFrom != kernel.CompanyFromNone
		route.Handler = s.forward(m, route.Method+" "+route.Pattern, time.Duration(r.TimeoutSec)*time.Second, cacheable)
		out = append(out, route)
	}
	return out
}

// ProtoActor converts a kernel actor to its wire form.
func ProtoActor(a *kernel.Actor) *extensionv1.Actor {
	if a == nil {
		return &extensionv1.Actor{Type: string(kernel.ActorNone)}
	}
	return &extensionv1.Actor{
		Type: string(a.Type), UserId: a.UserID, AgentId: a.AgentID, CompanyId: a.CompanyID, RunId: a.RunID,
		Source: a.Source, IsInstanceAdmin: a.IsInstanceAdmin, CompanyIds: a.CompanyIDs(), KeyId: a.KeyID, KeyScope: a.KeyScope,
		ReadOnlyCompanyIds: a.ReadOnlyCompanyIDs(),
	}
}

func unavailable(key string) *kernel.APIError {
	return (&kernel.APIError{Status: http.StatusServiceUnavailable, Message: fmt.Sprintf("Extension %s is unavailable; it is restarting", key)}).WithCode("extension_unavailable")
}

// disabled is the answer of a disabled extension's routes and calls: a refusal by design,
// not a failure to retry (no Retry-After).
func disabled(key string) *kernel.APIError {
	return (&kernel.APIError{Status: http.StatusServiceUnavailable, Message: fmt.Sprintf("Extension %s is disabled; an instance admin can enable it", key)}).WithCode("extension_disabled")
}

// lostInFlight is the 503 of a request the extension received but did not answer: it may
// have committed, so the client is told the outcome is unknown and how to retry safely.
func lostInFlight(key string) *kernel.APIError {
	return (&kernel.APIError{Status: http.StatusServiceUnavailable, Message: fmt.Sprintf(
		"Extension %s stopped before answering; the outcome of the request is unknown. "+retryHint, key),
	}).WithCode("extension_unavailable")
}

// retryHint tells a client whose write has an unknown outcome how to retry it safely.
const retryHint = "Retrying with the same Idempotency-Key header is safe: it answers the original outcome or performs the request once"

// forward serves a route by one Handle call to the owning extension, bounded by the host's
// request timeout or the route's own longer one. A cacheable route's answers are kept in
// the kernel's read cache (kernel.ReadCache) and carry an ETag.
func (s *Supervisor) forward(m *managed, pattern string, routeTimeout time.Duration, cacheable bool) kernel.HandlerFunc {
	timeout := max(s.cfg.RequestTimeout, routeTimeout)
	handle := s.handle(m, pattern, timeout)
	if !cacheable {
		return func(c *fiber.Ctx, rc *kernel.RequestContext) error {
			_, err := handle(c, rc)
			return err
		}
	}
	return func(c *fiber.Ctx, rc *kernel.RequestContext) error {
		if rc.CompanyID == "" {
			_, err := handle(c, rc)
			return err
		}
		cache := s.k.ReadCache
		key := readCacheKey(c, rc, pattern)
		hit, tok := cache.Get(rc.CompanyID, key)
		if hit != nil {
			return sendCached(c, hit)
		}
		res, err := handle(c, rc)
		if err != nil || res == nil || (res.Status != 0 && res.Status != http.StatusOK) {
			return err
		}
		e := &kernel.CachedRead{Status: http.StatusOK, Body: bytes.Clone(res.Body)}
		for k, hv := range res.Headers {
			for _, v := range hv.Values {
				e.Headers = append(e.Headers, [2]string{k, v})
			}
		}
		e.ETag = kernel.ETagOf(e.Body)
		cache.Put(rc.CompanyID, key, tok, e)
		c.Set(fiber.HeaderETag, e.ETag)
		if kernel.ETagMatches(c.Get(fiber.HeaderIfNoneMatch), e.ETag) {
			c.Response().ResetBody()
			c.Status(http.StatusNotModified)
		}
		return nil
	}
}

// readCacheKey names a cacheable read: its route, path and query, and the actor it is
// answered for (an answer is never served to another actor).
func readCacheKey(c *fiber.Ctx, rc *kernel.RequestContext, pattern string) string {
	a := rc.Actor
	var b strings.Builder
	b.Grow(256)
	b.WriteString(pattern)
	b.WriteByte(0)
	b.WriteString(c.Path())
	b.WriteByte('?')
	b.Write(c.Request().URI().QueryString())
	if a != nil {
		for _, v := range []string{string(a.Type), a.UserID, a.AgentID, a.CompanyID, a.RunID, a.Source, a.KeyID, a.KeyScope,
			strconv.FormatBool(a.IsInstanceAdmin), strconv.FormatBool(a.CanWriteCompany(rc.CompanyID))} {
			b.WriteByte(0)
			b.WriteString(v)
		}
	}
	return b.String()
}

// sendCached answers a request from the read cache (304 when the client holds the same
// answer).
func sendCached(c *fiber.Ctx, e *kernel.CachedRead) error {
	for i, h := range e.Headers {
		if i == 0 || e.Headers[i-1][0] != h[0] {
			c.Set(h[0], h[1])
		} else {
			c.Response().Header.Add(h[0], h[1])
		}
	}
	c.Set(fiber.HeaderETag, e.ETag)
	if kernel.ETagMatches(c.Get(fiber.HeaderIfNoneMatch), e.ETag) {
		c.Status(http.StatusNotModified)
		return nil
	}
	c.Status(e.Status)
	return c.Send(e.Body)
}

// handle forwards a request to the extension and writes its answer, which it returns.
func (s *Supervisor) handle(m *managed, pattern string, timeout time.Duration) func(c *fiber.Ctx, rc *kernel.RequestContext) (*extensionv1.HTTPResponse, error) {
	return func(c *fiber.Ctx, rc *kernel.RequestContext) (*extensionv1.HTTPResponse, error) {
		m := m.enter()
		defer m.release()
		client, apiErr := s.clientFor(c.UserContext(), m)
		if apiErr != nil {
			if apiErr.Status == http.StatusServiceUnavailable && apiErr.Code != "extension_disabled" {
				c.Set(fiber.HeaderRetryAfter, "1")
			}
			return nil, apiErr
		}
		req := &extensionv1.HTTPRequest{
			Method: c.Method(), Path: c.Path(), Pattern: pattern, Params: rc.Params,
			RawQuery: string(c.Request().URI().QueryString()), Body: c.Body(),
			Actor: ProtoActor(rc.Actor), CompanyId: rc.CompanyID, RequestId: rc.RequestID,
			Headers: map[string]*extensionv1.HeaderValues{},
		}
		c.Request().Header.VisitAll(func(k, v []byte) {
			name := string(k)
			if strings.EqualFold(name, fiber.HeaderAuthorization) || strings.EqualFold(name, fiber.HeaderCookie) {
				if rc.Route.Access != kernel.AccessPublic {
					return // credentials stay in the kernel; the extension gets the resolved actor
				}
			}
			hv := req.Headers[name]
			if hv == nil {
				hv = &extensionv1.HeaderValues{}
				req.Headers[name] = hv
			}
			hv.Values = append(hv.Values, string(v))
		})
		ctx, cancel := context.WithTimeout(c.UserContext(), timeout)
		defer cancel()
		start := time.Now()
		res, err := client.Handle(ctx, req)
		s.cfg.Metrics.ObserveHop(m.key, "request", time.Since(start), err)
		if err != nil {
			err = s.callError(m, err)
			var apiErr *kernel.APIError
			if errors.As(err, &apiErr) {
				switch apiErr.Code {
				case "extension_unavailable":
					c.Set(fiber.HeaderRetryAfter, "1")
					if c.Method() != fiber.MethodGet {
						return nil, lostInFlight(m.key)
					}
				case "extension_timeout":
					if c.Method() != fiber.MethodGet {
						apiErr.Message += "; the outcome of the request is unknown (it may still complete). " + retryHint
					}
				}
			}
			return nil, err
		}
		for k, hv := range res.Headers {
			for i, v := range hv.Values {
				if i == 0 {
					c.Set(k, v)
				} else {
					c.Response().Header.Add(k, v)
				}
			}
		}
		st := int(res.Status)
		if st == 0 {
			st = http.StatusOK
		}
		c.Status(st)
		return res, c.Send(res.Body)
	}
}

// callError maps a failed Handle or Call to an API error.
func (s *Supervisor) callError(m *managed, err error) error {
	var le LimitError
	if errors.As(err, &le) {
		return (&kernel.APIError{Status: le.HTTPStatus(), Message: le.Error(), Internal: nil}).WithCode(le.Code())
	}
	st, ok := status.FromError(err)
	if ok {
		switch st.Code() {
		case codes.Unavailable, codes.Canceled:
			return unavailable(m.key)
		case codes.DeadlineExceeded:
			return (&kernel.APIError{Status: http.StatusGatewayTimeout, Message: fmt.Sprintf("Extension %s did not answer in time", m.key)}).WithCode("extension_timeout")
		case codes.Unimplemented:
			return (&kernel.APIError{Status: http.StatusNotImplemented, Message: st.Message()}).WithCode("extension_unimplemented")
		}
	}
	if client, _ := m.current(); client == nil {
		return unavailable(m.key)
	}
	return &kernel.APIError{Status: http.StatusBadGateway, Message: fmt.Sprintf("Extension %s failed to answer", m.key), Internal: err, Code: "extension_error"}
}

var _ = sdk.AccessPublic
