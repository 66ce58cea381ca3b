package sdk

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"

	"github.com/hashicorp/go-hclog"

	"github.com/keelhq/keel/sdk/pgerr"
	extensionv1 "github.com/keelhq/keel/sdk/proto/extension/v1"
)

type ctxKey int

const (
	actorKey ctxKey = iota
	companyKey
	paramsKey
	patternKey
	loggerKey
)

// WithLogger returns ctx carrying the logger LoggerFrom returns.
func WithLogger(ctx context.Context, l hclog.Logger) context.Context {
	return context.WithValue(ctx, loggerKey, l)
}

// LoggerFrom returns the logger for a request: the extension's logger with the request's
// request_id, so every line an extension logs while serving a routed request carries the
// id of the access-log line. Outside a request it returns a logger that discards.
func LoggerFrom(ctx context.Context) hclog.Logger {
	if l, ok := ctx.Value(loggerKey).(hclog.Logger); ok && l != nil {
		return l
	}
	return hclog.NewNullLogger()
}

// ActorFrom returns the actor the kernel resolved for the request (never nil).
func ActorFrom(ctx context.Context) *Actor {
	if a, ok := ctx.Value(actorKey).(*Actor); ok && a != nil {
		return a
	}
	return &Actor{Type: "none"}
}

// CompanyIDFrom returns the company the kernel resolved and authorized for the route.
func CompanyIDFrom(ctx context.Context) string {
	s, _ := ctx.Value(companyKey).(string)
	return s
}

// ParamFrom returns a path parameter of the matched manifest route.
func ParamFrom(ctx context.Context, name string) string {
	m, _ := ctx.Value(paramsKey).(map[string]string)
	return m[name]
}

// PatternFrom returns the manifest route that matched, such as "GET /api/companies/{companyId}/notes".
func PatternFrom(ctx context.Context) string {
	s, _ := ctx.Value(patternKey).(string)
	return s
}

// WithRequestInfo returns ctx carrying what the kernel resolved for a request; the adapter
// uses it, and tests can too.
func WithRequestInfo(ctx context.Context, actor *Actor, companyID, pattern string, params map[string]string) context.Context {
	ctx = context.WithValue(ctx, actorKey, actor)
	ctx = context.WithValue(ctx, companyKey, companyID)
	ctx = context.WithValue(ctx, patternKey, pattern)
	return context.WithValue(ctx, paramsKey, params)
}

// ServeHTTPRequest runs one wire request through an ordinary http.Handler and returns the
// wire response. Handlers may route with http.ServeMux patterns identical to the manifest's.
func ServeHTTPRequest(ctx context.Context, h http.Handler, req *extensionv1.HTTPRequest) *extensionv1.HTTPResponse {
	u := &url.URL{Path: req.Path, RawQuery: req.RawQuery}
	r, err := http.NewRequestWithContext(
		WithRequestInfo(ctx, req.Actor, req.CompanyId, req.Pattern, req.Params),
		req.Method, u.String(), bytes.NewReader(req.Body))
	if err != nil {
		return errorResponse(http.StatusBadRequest, "malformed request: "+err.Error())
	}
	for k, v := range req.Headers {
		r.Header[k] = v.Values
	}
	r.RequestURI = u.RequestURI()
	for k, v := range req.Params {
		r.SetPathValue(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	res := rec.Result()
	out := &extensionv1.HTTPResponse{Status: int32(res.StatusCode), Body: rec.Body.Bytes(), Headers: map[string]*extensionv1.HeaderValues{}}
	for k, v := range res.Header {
		out.Headers[k] = &extensionv1.HeaderValues{Values: v}
	}
	return out
}

func errorResponse(status int, msg string) *extensionv1.HTTPResponse {
	b, _ := json.Marshal(map[string]string{"error": msg})
	return &extensionv1.HTTPResponse{Status: int32(status), Body: b,
		Headers: map[string]*extensionv1.HeaderValues{"Content-Type": {Values: []string{"application/json"}}}}
}

// WriteJSON writes v as a JSON response with the status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// WriteError writes the API error body {"error", "code"?, "details"?}.
func WriteError(w http.ResponseWriter, status int, message string) {
	WriteJSON(w, status, map[string]string{"error": message})
}

// WriteErr writes err as an API error: an *Error keeps its status, code and details; an
// error saying the database cannot be reached (see pgerr.Unavailable) is a 503 with the
// code database_unavailable; anything else is a 500 whose text is not leaked.
func WriteErr(w http.ResponseWriter, err error) {
	e, ok := err.(*Error)
	if !ok {
		if pgerr.Unavailable(err) {
			w.Header().Set("Retry-After", "1")
			WriteJSON(w, http.StatusServiceUnavailable, map[string]string{"error": pgerr.Message, "code": pgerr.Code})
			return
		}
		WriteError(w, http.StatusInternalServerError, "Internal server error")
		return
	}
	body := map[string]any{"error": e.Message}
	if e.Code != "" {
		body["code"] = e.Code
	}
	if e.Details != nil {
		body["details"] = e.Details
	}
	status := e.Status
	if status == 0 {
		status = http.StatusInternalServerError
	}
	WriteJSON(w, status, body)
}

// CanAccessCompany reports whether the actor may reach a company, by the kernel's rules:
// agents their own company; the trusted local board and instance admins every company;
// board users the companies of their active memberships. Use it for routes whose company
// comes from a resource the extension owns (an issue, a note) rather than the path.
func CanAccessCompany(a *Actor, companyID string) bool {
	if a == nil || companyID == "" {
		return false
	}
	switch a.Type {
	case "agent":
		return a.CompanyId == companyID
	case "board":
		if a.Source == "local_implicit" || a.IsInstanceAdmin {
			return true
		}
		for _, id := range a.CompanyIds {
			if id == companyID {
				return true
			}
		}
	case "system":
		return true
	}
	return false
}

// IsMethodNotProvided reports whether a Host.Call failed because no loaded extension
// provides the method (the owner is not installed), as opposed to the owner failing.
func IsMethodNotProvided(err error) bool {
	e, ok := err.(*Error)
	return ok && e.Code == "method_not_provided"
}
