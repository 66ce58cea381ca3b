package kernel

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/keelhq/keel/sdk"
)

// Access says who may call a route.
type Access string

// Route access policies, as a manifest declares them.
const (
	// AccessPublic routes take any caller, including unauthenticated webhook senders.
	AccessPublic Access = "public"
	// AccessBoard routes take board actors only.
	AccessBoard Access = "board"
	// AccessAgent routes take agent actors only.
	AccessAgent Access = "agent"
	// AccessEither routes take board or agent actors.
	AccessEither Access = "either"
	// AccessInstanceAdmin routes take instance admins (and the trusted local board).
	AccessInstanceAdmin Access = "instance_admin"
)

// Company resolution sources: where a route finds the company it is scoped to.
const (
	CompanyFromNone  = ""
	CompanyFromPath  = "path"
	CompanyFromQuery = "query"
	CompanyFromBody  = "body"
	CompanyFromActor = "actor"
)

// OwnerKernel is the owner name of the kernel's own routes.
const OwnerKernel = "kernel"

// SourceAPI is the source of activity entries a board user posts through the activity route:
// recorded as such and never delivered as domain events, so nobody can forge another
// owner's event ("issue.updated" for an issue, say) through the API.
const SourceAPI = "api"

// Route is one entry of the composed API: a method and pattern, its owner, its policy and
// its handler. Patterns are the spec's paths with {name} segments.
type Route struct {
	Method  string
	Pattern string
	Owner   string
	Access  Access
	// Permission is a permission key the caller must hold in the route's company.
	Permission string
	// CompanyFrom and CompanyKey say how the company is resolved for scoping.
	CompanyFrom string
	CompanyKey  string
	Summary     string
	// Personal routes write only the caller's own data in the company, so a viewer may
	// call them with a write method.
	Personal bool
	// Request and Response are example Go values documented in the OpenAPI document.
	Request  any
	Response any
	// Params is the kernel endpoint's request type, whose `query` fields are documented.
	Params any
	// RequestSchema is a JSON Schema of the request body, used instead of Request
	// (extension routes declare it in their manifest).
	RequestSchema json.RawMessage
	// ResponseSchema is a JSON Schema of the success answer, used instead of Response
	// (extension routes declare it in their manifest); its $defs become components.
	ResponseSchema json.RawMessage
	// Query documents query parameters beyond Params' (extension routes declare them).
	Query []sdk.QueryParam
	// Errors are error statuses the route answers beyond those implied by its access,
	// path parameters and body, for documentation.
	Errors []int
	// Status is the success status, for documentation.
	Status  int
	Handler HandlerFunc

	segments []string
}

// Key returns "METHOD pattern".
func (r *Route) Key() string { return r.Method + " " + r.Pattern }

// RouteMatch is a matched route with its path parameters.
type RouteMatch struct {
	Route  *Route
	Params map[string]string
}

// RouteTable is the composed route table. Reads are lock-free over an immutable snapshot;
// writes copy the snapshot, check for collisions and swap it in.
type RouteTable struct {
	mu   sync.Mutex
	snap atomic.Pointer[routeSnapshot]
}

type routeSnapshot struct {
	routes []*Route
	root   map[string]*routeNode // by method
}

type routeNode struct {
	static map[string]*routeNode
	param  *routeNode
	route  *Route
}

// NewRouteTable returns an empty table.
func NewRouteTable() *RouteTable {
	t := &RouteTable{}
	t.snap.Store(&routeSnapshot{root: map[string]*routeNode{}})
	return t
}

func splitPath(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

func isParam(seg string) bool {
	return len(seg) > 2 && seg[0] == '{' && seg[len(seg)-1] == '}'
}

// shape is the pattern with parameter names erased, used for collision checks.
func shape(method string, segs []string) string {
	var b strings.Builder
	b.WriteString(method)
	b.WriteByte(' ')
	for _, s := range segs {
		b.WriteByte('/')
		if isParam(s) {
			b.WriteString("{}")
		} else {
			b.WriteString(s)
		}
	}
	return b.String()
}

// ValidatePattern checks that a pattern is an absolute /api path with well-formed segments.
func ValidatePattern(method, pattern string) error {
	switch method {
	case "GET", "POST", "PUT", "PATCH", "DELETE":
	default:
		return fmt.Errorf("route %s %s: unsupported method", method, pattern)
	}
	if !strings.HasPrefix(pattern, "/api/") {
		return fmt.Errorf("route %s %s: path must start with /api/", method, pattern)
	}
	for _, s := range splitPath(pattern) {
		if s == "" {
			return fmt.Errorf("route %s %s: empty path segment", method, pattern)
		}
		if strings.ContainsAny(s, "{}") && !isParam(s) {
			return fmt.Errorf("route %s %s: malformed parameter segment %q", method, pattern, s)
		}
	}
	return nil
}

// Add adds routes atomically: either all are added or, on a collision or a bad pattern,
// none are and the error names the routes and owners involved.
func (t *RouteTable) Add(routes ...*Route) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.snap.Load()
	seen := make(map[string]*Route, len(old.routes)+len(routes))
	for _, r := range old.routes {
		seen[shape(r.Method, r.segments)] = r
	}
	next := append([]*Route(nil), old.routes...)
	for _, r := range routes {
		if err := ValidatePattern(r.Method, r.Pattern); err != nil {
			return err
		}
		r.segments = splitPath(r.Pattern)
		sh := shape(r.Method, r.segments)
		if prev, ok := seen[sh]; ok {
			return fmt.Errorf("route collision: %s %s (%s) conflicts with %s %s (%s)",
				r.Method, r.Pattern, r.Owner, prev.Method, prev.Pattern, prev.Owner)
		}
		seen[sh] = r
		next = append(next, r)
	}
	t.snap.Store(buildSnapshot(next))
	return nil
}

// ReplaceOwner swaps every route of one owner for routes in one atomic step: a request
// matches either the old set or the new one, never neither. On a collision with another
// owner's route or a bad pattern nothing changes.
func (t *RouteTable) ReplaceOwner(owner string, routes ...*Route) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.snap.Load()
	seen := make(map[string]*Route, len(old.routes)+len(routes))
	next := make([]*Route, 0, len(old.routes)+len(routes))
	for _, r := range old.routes {
		if r.Owner == owner {
			continue
		}
		seen[shape(r.Method, r.segments)] = r
		next = append(next, r)
	}
	for _, r := range routes {
		if r.Owner != owner {
			return fmt.Errorf("route %s %s is owned by %s, not %s", r.Method, r.Pattern, r.Owner, owner)
		}
		if err := ValidatePattern(r.Method, r.Pattern); err != nil {
			return err
		}
		r.segments = splitPath(r.Pattern)
		sh := shape(r.Method, r.segments)
		if prev, ok := seen[sh]; ok {
			return fmt.Errorf("route collision: %s %s (%s) conflicts with %s %s (%s)",
				r.Method, r.Pattern, r.Owner, prev.Method, prev.Pattern, prev.Owner)
		}
		seen[sh] = r
		next = append(next, r)
	}
	t.snap.Store(buildSnapshot(next))
	return nil
}

// RemoveOwner drops every route of one owner.
func (t *RouteTable) RemoveOwner(owner string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.snap.Load()
	next := make([]*Route, 0, len(old.routes))
	for _, r := range old.routes {
		if r.Owner != owner {
			next = append(next, r)
		}
	}
	t.snap.Store(buildSnapshot(next))
}

func buildSnapshot(routes []*Route) *routeSnapshot {
	s := &routeSnapshot{routes: routes, root: map[string]*routeNode{}}
	for _, r := range routes {
		n := s.root[r.Method]
		if n == nil {
			n = &routeNode{}
			s.root[r.Method] = n
		}
		for _, seg := range r.segments {
			if isParam(seg) {
				if n.param == nil {
					n.param = &routeNode{}
				}
				n = n.param
				continue
			}
			if n.static == nil {
				n.static = map[string]*routeNode{}
			}
			child := n.static[seg]
			if child == nil {
				child = &routeNode{}
				n.static[seg] = child
			}
			n = child
		}
		n.route = r
	}
	return s
}

// Routes returns every route, sorted by pattern then method.
func (t *RouteTable) Routes() []*Route {
	routes := append([]*Route(nil), t.snap.Load().routes...)
	sort.Slice(routes, func(i, j int) bool {
		if routes[i].Pattern != routes[j].Pattern {
			return routes[i].Pattern < routes[j].Pattern
		}
		return routes[i].Method < routes[j].Method
	})
	return routes
}

// Match finds the route for a method and path. Static segments win over parameters. The
// second result reports whether the path exists under another method (for 405 handling).
func (t *RouteTable) Match(method, path string) (*RouteMatch, bool) {
	s := t.snap.Load()
	segs := splitPath(path)
	if n := s.root[method]; n != nil {
		if r := matchNode(n, segs); r != nil {
			return &RouteMatch{Route: r, Params: routeParams(r, segs)}, true
		}
	}
	for m, n := range s.root {
		if m == method {
			continue
		}
		if matchNode(n, segs) != nil {
			return nil, true
		}
	}
	return nil, false
}

// routeParams names the path's parameter segments by the matched route's own pattern: two
// routes may name the parameter at one position differently ("/api/invites/{inviteId}/revoke"
// and "/api/invites/{token}/accept"), and the tree node keeps only one of the names.
func routeParams(r *Route, segs []string) map[string]string {
	params := make(map[string]string, 2)
	for i, seg := range r.segments {
		if isParam(seg) && i < len(segs) {
			params[seg[1:len(seg)-1]] = segs[i]
		}
	}
	return params
}

func matchNode(n *routeNode, segs []string) *Route {
	if len(segs) == 0 {
		return n.route
	}
	if child := n.static[segs[0]]; child != nil {
		if r := matchNode(child, segs[1:]); r != nil {
			return r
		}
	}
	if n.param != nil && segs[0] != "" {
		return matchNode(n.param, segs[1:])
	}
	return nil
}
