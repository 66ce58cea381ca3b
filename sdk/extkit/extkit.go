// Package extkit is the route, method and job table a first-party-style extension builds
// its manifest and its handlers from: each area file of an extension adds its routes and
// provided methods in init, and the extension turns the table into its manifest (request
// schemas reflected from Go body types), an http.ServeMux and a method dispatcher. E is the
// extension type the handlers receive.
package extkit

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"sync"

	"github.com/invopop/jsonschema"

	"github.com/keelhq/keel/sdk"
	extensionv1 "github.com/keelhq/keel/sdk/proto/extension/v1"
)

// Route is one HTTP route: its manifest entry and its handler.
type Route[E any] struct {
	Method string
	Path   string
	// Access is public, board, agent, either or instance_admin (default either).
	Access string
	// Permission is a permission key the kernel checks in the path's company.
	Permission string
	// CompanyFromPath makes the kernel resolve and authorize {companyId} before the handler
	// runs; routes keyed by an id the extension owns check access themselves.
	CompanyFromPath bool
	Summary         string
	// Body is a value of the request body type, documented in /api/openapi.json.
	Body any
	// Status is the success status (default 200; 201 where the route creates).
	Status int
	// Response is a value of the success answer's type, documented in /api/openapi.json.
	Response any
	// Query is a struct value whose `query:"name"` fields document the query parameters
	// (a `doc:"..."` tag describes one; `jsonschema` tags constrain it).
	Query any
	// Errors are error statuses the route answers beyond those implied by its access, path
	// parameters and body (such as 409 for a conflict).
	Errors []int
	// TimeoutSec raises the host's request timeout for this route (sdk.Route.TimeoutSec).
	TimeoutSec int
	// Cache lets the host answer repeats of this GET from its read cache (sdk.Route.Cache).
	Cache  bool
	Handle func(e E, rw http.ResponseWriter, r *http.Request)
}

// Method is one provided method.
type Method[E any] struct {
	Description string
	// Requires are capabilities the caller must declare (sdk.Method.Requires).
	Requires []string
	// ReadOnly declares that the method changes nothing (sdk.Method.ReadOnly).
	ReadOnly bool
	Call     func(e E, ctx context.Context, call *sdk.MethodCall) (any, error)
}

// Table collects an extension's routes, provided methods and jobs. The zero value is ready.
type Table[E any] struct {
	mu      sync.Mutex
	routes  []Route[E]
	methods map[string]Method[E]
	jobs    []sdk.Job
}

// AddRoutes adds routes (call from init).
func (t *Table[E]) AddRoutes(rs ...Route[E]) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.routes = append(t.routes, rs...)
}

// AddMethods adds provided methods by name (call from init).
func (t *Table[E]) AddMethods(ms map[string]Method[E]) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.methods == nil {
		t.methods = map[string]Method[E]{}
	}
	for k, v := range ms {
		t.methods[k] = v
	}
}

// AddJobs adds declared jobs (call from init).
func (t *Table[E]) AddJobs(js ...sdk.Job) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.jobs = append(t.jobs, js...)
}

// Routes returns a copy of the routes.
func (t *Table[E]) Routes() []Route[E] {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Route[E](nil), t.routes...)
}

// Methods returns the provided methods by name.
func (t *Table[E]) Methods() map[string]Method[E] {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]Method[E], len(t.methods))
	for k, v := range t.methods {
		out[k] = v
	}
	return out
}

// Jobs returns a copy of the declared jobs.
func (t *Table[E]) Jobs() []sdk.Job {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]sdk.Job(nil), t.jobs...)
}

// Manifest completes base with the table: routes (sorted, request schemas reflected from
// Body), provided methods (sorted, with descriptions) and jobs.
func (t *Table[E]) Manifest(base *sdk.Manifest) *sdk.Manifest {
	m := *base
	reflector := &jsonschema.Reflector{DoNotReference: true, ExpandedStruct: true}
	for _, rt := range t.Routes() {
		access := rt.Access
		if access == "" {
			access = sdk.AccessEither
		}
		sr := sdk.Route{Method: rt.Method, Path: rt.Path, Access: access, Permission: rt.Permission, Summary: rt.Summary}
		if rt.CompanyFromPath {
			sr.Company = &sdk.CompanyResolution{From: "path"}
		}
		if rt.Body != nil {
			if b, err := json.Marshal(reflector.Reflect(rt.Body)); err == nil {
				sr.RequestSchema = b
			}
		}
		sr.Status, sr.Errors, sr.TimeoutSec, sr.Cache = rt.Status, rt.Errors, rt.TimeoutSec, rt.Cache
		if rt.Response != nil {
			sr.ResponseSchema = ResponseSchema(rt.Response)
		}
		if rt.Query != nil {
			sr.Query = QueryParams(rt.Query)
		}
		m.Routes = append(m.Routes, sr)
	}
	sort.Slice(m.Routes, func(i, j int) bool {
		if m.Routes[i].Path != m.Routes[j].Path {
			return m.Routes[i].Path < m.Routes[j].Path
		}
		return m.Routes[i].Method < m.Routes[j].Method
	})
	methods := t.Methods()
	names := make([]string, 0, len(methods))
	for name := range methods {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		m.Provides = append(m.Provides, sdk.Method{Name: name, Description: methods[name].Description, Requires: methods[name].Requires,
			ReadOnly: methods[name].ReadOnly})
	}
	m.Jobs = append(m.Jobs, t.Jobs()...)
	return &m
}

// Mux returns a ServeMux serving every route for e, with the manifest's own patterns.
func (t *Table[E]) Mux(e E) *http.ServeMux {
	mux := http.NewServeMux()
	for _, r := range t.Routes() {
		handle := r.Handle
		mux.HandleFunc(r.Method+" "+r.Path, func(rw http.ResponseWriter, req *http.Request) { handle(e, rw, req) })
	}
	return mux
}

// Call dispatches a provided method; an unknown one is 501 method_not_provided.
func (t *Table[E]) Call(e E, key string, ctx context.Context, call *sdk.MethodCall) (any, error) {
	m, ok := t.Methods()[call.Method]
	if !ok {
		return nil, &sdk.Error{Status: http.StatusNotImplemented, Code: "method_not_provided", Message: key + " does not provide " + call.Method}
	}
	return m.Call(e, ctx, call)
}

// ResponseSchema reflects an answer type into a JSON Schema whose named types are under
// $defs (so recursive types stay finite); nil when the type cannot be reflected.
func ResponseSchema(v any) (out json.RawMessage) {
	defer func() {
		if recover() != nil {
			out = nil
		}
	}()
	r := &jsonschema.Reflector{Anonymous: true, AllowAdditionalProperties: true}
	s := r.Reflect(v)
	s.Version, s.ID = "", ""
	b, err := json.Marshal(s)
	if err != nil {
		return nil
	}
	return b
}

// QueryParams documents the `query:"name"` fields of a struct value: each field's schema
// (from its type and `jsonschema` tag), its `doc` tag as the description, and required when
// the jsonschema tag says so.
func QueryParams(v any) []sdk.QueryParam {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	r := &jsonschema.Reflector{FieldNameTag: "query", DoNotReference: true, ExpandedStruct: true, RequiredFromJSONSchemaTags: true}
	s := r.ReflectFromType(t)
	required := map[string]bool{}
	for _, name := range s.Required {
		required[name] = true
	}
	var out []sdk.QueryParam
	for _, f := range reflect.VisibleFields(t) {
		name, _, _ := strings.Cut(f.Tag.Get("query"), ",")
		if name == "" || name == "-" || !f.IsExported() || f.Anonymous {
			continue
		}
		p := sdk.QueryParam{Name: name, Description: f.Tag.Get("doc"), Required: required[name]}
		if s.Properties != nil {
			if ps, ok := s.Properties.Get(name); ok && ps != nil {
				if p.Description == "" {
					p.Description = ps.Description
				}
				ps.Description = ""
				if b, err := json.Marshal(ps); err == nil {
					p.Schema = b
				}
			}
		}
		out = append(out, p)
	}
	return out
}

// ServeRoute answers a provided method with one of the extension's own routes: it runs a
// request (method, path, JSON body) through h as the call's actor (the system actor when
// none) in the call's company, and returns the answer's body, or an *sdk.Error carrying the
// route's error status, text, code and details. Owners use it to offer a route's exact
// validation and side effects to other extensions without a second code path. pattern is
// the route's manifest pattern ("POST /api/companies/{companyId}/agents").
func ServeRoute(ctx context.Context, h http.Handler, call *sdk.MethodCall, pattern, path string, body any) (json.RawMessage, error) {
	method, _, _ := strings.Cut(pattern, " ")
	var raw []byte
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, &sdk.Error{Status: http.StatusBadRequest, Message: "undecodable input: " + err.Error()}
		}
		raw = b
	}
	actor := call.Actor
	if actor == nil || actor.Type == "" || actor.Type == "none" {
		actor = sdk.SystemActor()
	}
	res := sdk.ServeHTTPRequest(ctx, h, &extensionv1.HTTPRequest{Method: method, Path: path, Body: raw, Actor: actor,
		CompanyId: call.CompanyID, Pattern: pattern,
		Headers: map[string]*extensionv1.HeaderValues{"Content-Type": {Values: []string{"application/json"}}}})
	if res.Status >= 200 && res.Status < 300 {
		return res.Body, nil
	}
	var e struct {
		Error   string          `json:"error"`
		Code    string          `json:"code"`
		Details json.RawMessage `json:"details"`
	}
	_ = json.Unmarshal(res.Body, &e)
	if e.Error == "" {
		e.Error = http.StatusText(int(res.Status))
	}
	out := &sdk.Error{Status: int(res.Status), Message: e.Error, Code: e.Code}
	if len(e.Details) > 0 {
		out.Details = e.Details
	}
	return nil, out
}
