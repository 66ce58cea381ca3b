package kernel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/keelhq/keel/sdk/pgerr"
)

// HandlerFunc serves one matched route after the kernel has resolved and checked the actor.
type HandlerFunc func(c *fiber.Ctx, rc *RequestContext) error

// RequestContext is what the dispatcher learned about a request before calling its handler.
type RequestContext struct {
	Actor     *Actor
	Params    map[string]string
	CompanyID string
	Route     *Route
	RequestID string
}

// Context returns the request's context carrying the actor.
func (rc *RequestContext) Context(c *fiber.Ctx) context.Context {
	return WithActor(c.UserContext(), rc.Actor)
}

// HeaderRunID is the header carrying an agent's heartbeat run id.
const HeaderRunID = "X-Service-Run-Id"

// SessionCookie is the name of the board session cookie of authenticated mode.
const SessionCookie = "keel_session"

// Dispatch is the Fiber handler that serves every /api request from the route table.
func (k *Kernel) Dispatch(c *fiber.Ctx) error {
	reqID := requestID(c)
	path := c.Path()
	match, exists := k.Routes.Match(c.Method(), path)
	if match == nil {
		if exists {
			return WriteError(c, NewAPIError(http.StatusMethodNotAllowed, "Method not allowed"))
		}
		return WriteError(c, NotFound("Not found"))
	}
	route := match.Route
	if apiErr := k.checkInput(c, match.Params); apiErr != nil {
		return WriteError(c, apiErr)
	}
	if apiErr := checkCrossOrigin(c); apiErr != nil {
		return WriteError(c, apiErr)
	}
	ctx := c.UserContext()
	if k.observer != nil {
		noteRoute(c, reqID, route, nil)
	}
	actor, apiErr := k.ResolveActor(ctx, RequestCredentials{
		Authorization: c.Get(fiber.HeaderAuthorization),
		SessionToken:  c.Cookies(SessionCookie),
		RunID:         c.Get(HeaderRunID),
	}, route.Access == AccessPublic)
	if apiErr != nil {
		return WriteError(c, apiErr)
	}
	if k.observer != nil {
		noteRoute(c, reqID, route, actor)
	}
	rc := &RequestContext{Actor: actor, Params: match.Params, Route: route, RequestID: reqID}
	if err := checkAccess(route.Access, actor); err != nil {
		return WriteError(c, err)
	}
	if route.CompanyFrom != CompanyFromNone {
		companyID, err := resolveCompany(c, route, match.Params, actor)
		if err != nil {
			return WriteError(c, err)
		}
		if companyID != "" {
			if err := k.AuthorizeCompany(ctx, actor, companyID, route.Permission); err != nil {
				return WriteError(c, err)
			}
			if IsWriteMethod(c.Method()) && !route.Personal && !actor.CanWriteCompany(companyID) {
				return WriteError(c, ReadOnlyMember())
			}
			rc.CompanyID = companyID
		}
	}
	c.SetUserContext(WithActor(ctx, actor))
	if IsWriteMethod(c.Method()) {
		// Whatever the write changed, cached reads of its company (of every company when
		// the route names none) are forgotten before its answer leaves.
		defer k.ReadCache.Invalidate(rc.CompanyID)
	}
	if honoursIdempotencyKey(c, route) {
		if err := k.serveIdempotent(c, rc); err != nil {
			return WriteError(c, err)
		}
		return nil
	}
	if err := route.Handler(c, rc); err != nil {
		return WriteError(c, err)
	}
	return nil
}

// requestID returns the request's X-Request-Id, generating one when the client sent none,
// and echoes it on the response.
func requestID(c *fiber.Ctx) string {
	reqID := c.Get("X-Request-Id")
	if reqID == "" {
		reqID = uuid.NewString()
	}
	c.Set("X-Request-Id", reqID)
	return reqID
}

func checkAccess(access Access, actor *Actor) *APIError {
	switch access {
	case AccessPublic:
		return nil
	case AccessAgent:
		if !actor.IsAgent() {
			return Unauthorized("Agent authentication required")
		}
	case AccessBoard:
		if actor.Type == ActorNone {
			return Unauthorized("Unauthorized")
		}
		if !actor.IsBoard() {
			return Forbidden("Board access required")
		}
	case AccessInstanceAdmin:
		if actor.Type == ActorNone {
			return Unauthorized("Unauthorized")
		}
		if !actor.IsBoard() || !actor.IsInstanceAdmin {
			return Forbidden("Instance admin access required")
		}
	default: // AccessEither and anything unset
		if actor.Type == ActorNone {
			return Unauthorized("Unauthorized")
		}
	}
	return nil
}

func resolveCompany(c *fiber.Ctx, route *Route, params map[string]string, actor *Actor) (string, *APIError) {
	key := route.CompanyKey
	if key == "" {
		key = "companyId"
	}
	var id string
	switch route.CompanyFrom {
	case CompanyFromPath:
		id = params[key]
	case CompanyFromQuery:
		id = c.Query(key)
	case CompanyFromBody:
		var body map[string]json.RawMessage
		if len(c.Body()) > 0 && json.Unmarshal(c.Body(), &body) == nil {
			_ = json.Unmarshal(body[key], &id)
		}
	case CompanyFromActor:
		if actor.IsAgent() {
			id = actor.CompanyID
		} else {
			id = c.Query(key)
		}
	}
	if id == "" && route.CompanyFrom == CompanyFromPath {
		return "", BadRequest("Missing company id")
	}
	if id != "" && !isUUID(id) {
		return "", NotFound("Company not found")
	}
	return id, nil
}

func isUUID(s string) bool {
	_, err := uuid.Parse(s)
	return err == nil && len(s) == 36
}

// WriteError writes err as the JSON error body; internal errors are logged by the caller's
// error handler and answered with a generic 500.
func WriteError(c *fiber.Ctx, err error) error {
	apiErr := AsAPIError(err)
	if apiErr.Status == http.StatusInternalServerError && pgerr.Unavailable(apiErr.Internal) {
		apiErr = &APIError{Status: http.StatusServiceUnavailable, Message: pgerr.Message, Code: pgerr.Code, Internal: apiErr.Internal}
		c.Set(fiber.HeaderRetryAfter, "1")
	}
	if apiErr.Status >= 500 && apiErr.Internal != nil {
		if lg, ok := c.Locals("logger").(interface{ Error(string, ...any) }); ok {
			lg.Error("request failed", "path", c.Path(), "error", apiErr.Internal)
		}
	}
	b, _ := json.Marshal(apiErr)
	c.Status(apiErr.Status)
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSONCharsetUTF8)
	return c.Send(b)
}

// WriteJSON writes v as a JSON body with the status.
func WriteJSON(c *fiber.Ctx, status int, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return Internal(err)
	}
	c.Status(status)
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSONCharsetUTF8)
	return c.Send(bytes.TrimRight(buf.Bytes(), "\n"))
}

// DecodeJSON decodes a JSON request body into v, ignoring unknown fields as the reference
// product does: bad types and malformed JSON are a 400 Validation error naming the problem.
// An empty body decodes as {}.
func DecodeJSON(c *fiber.Ctx, v any) error { return decodeJSON(c, v, false) }

// DecodeJSONStrict is DecodeJSON that also refuses unknown fields (400 naming the field), for
// configuration and for routes the spec marks "unknown fields rejected".
func DecodeJSONStrict(c *fiber.Ctx, v any) error { return decodeJSON(c, v, true) }

func decodeJSON(c *fiber.Ctx, v any, strict bool) error {
	body := c.Body()
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		var typeErr *json.UnmarshalTypeError
		msg := err.Error()
		path := ""
		if errors.As(err, &typeErr) {
			path = typeErr.Field
			msg = "expected " + typeErr.Type.String()
		} else if strings.HasPrefix(msg, "json: unknown field ") {
			path = strings.Trim(strings.TrimPrefix(msg, "json: unknown field "), `"`)
			msg = "unknown field"
		}
		return ValidationError(ValidationDetail{Path: path, Message: msg})
	}
	return nil
}

// NewApp returns the Fiber app that serves the kernel's composed API. bodyLimit caps the
// bytes read off the wire (0 takes MaxBodyBytes); the route-level limits, which count
// decompressed bytes and depend on the media type, are checked in Dispatch.
func (k *Kernel) NewApp(bodyLimit int) *fiber.App {
	if bodyLimit <= 0 {
		bodyLimit = k.MaxBodyBytes()
	}
	app := fiber.New(fiber.Config{
		DisableStartupMessage: true,
		BodyLimit:             bodyLimit,
		ReadTimeout:           5 * time.Minute,
		WriteTimeout:          5 * time.Minute,
		IdleTimeout:           2 * time.Minute,
		ErrorHandler: func(c *fiber.Ctx, err error) error {
			var fe *fiber.Error
			if errors.As(err, &fe) {
				if fe.Code == http.StatusRequestEntityTooLarge {
					return WriteError(c, bodyTooLarge(bodyLimit))
				}
				return WriteError(c, NewAPIError(fe.Code, fe.Message))
			}
			k.log.Error("request failed", "path", c.Path(), "error", err)
			return WriteError(c, err)
		},
	})
	k.mountObservability(app)
	app.Use(func(c *fiber.Ctx) error {
		c.Locals("logger", k.log)
		return c.Next()
	})
	app.All("/api/*", k.Dispatch)
	app.All("/api", k.Dispatch)
	return app
}
