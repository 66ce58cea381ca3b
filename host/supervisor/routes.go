package supervisor

import (
	"context"
	"errors"
	"fmt"
	"net/http"
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
		route.Handler = s.forward(m, route.Method+" "+route.Pattern, time.Duration(r.TimeoutSec)*time.Second)
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
// request timeout or the route's own longer one.
func (s *Supervisor) forward(m *managed, pattern string, routeTimeout time.Duration) kernel.HandlerFunc {
	timeout := max(s.cfg.RequestTimeout, routeTimeout)
	return func(c *fiber.Ctx, rc *kernel.RequestContext) error {
		m := m.enter()
		defer m.release()
		client, apiErr := s.clientFor(c.UserContext(), m)
		if apiErr != nil {
			if apiErr.Status == http.StatusServiceUnavailable && apiErr.Code != "extension_disabled" {
				c.Set(fiber.HeaderRetryAfter, "1")
			}
			return apiErr
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
						return lostInFlight(m.key)
					}
				case "extension_timeout":
					if c.Method() != fiber.MethodGet {
						apiErr.Message += "; the outcome of the request is unknown (it may still complete). " + retryHint
					}
				}
			}
			return err
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
		return c.Send(res.Body)
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
