package secrets

import (
	"context"
	"net/http"
	"sort"
	"sync"

	"github.com/invopop/jsonschema"

	"github.com/keelhq/keel/sdk"
)

// route is one HTTP route of the extension: its manifest entry and its handler. Each area
// file adds its routes in init with addRoutes.
type route struct {
	Method string
	Path   string
	// Access is public, board, agent, either or instance_admin (default either).
	Access string
	// Permission is a permission key the kernel checks in the path's company.
	Permission string
	// CompanyFromPath makes the kernel resolve and authorize {companyId} before the handler
	// runs; routes keyed by a secret id check access themselves.
	CompanyFromPath bool
	Summary         string
	// Body is a value of the request body type, documented in /api/openapi.json.
	Body   any
	Handle func(s *Secrets, rw http.ResponseWriter, r *http.Request)
}

// method is one provided method.
type method struct {
	Description string
	Call        func(s *Secrets, ctx context.Context, call *sdk.MethodCall) (any, error)
}

var (
	routesMu  sync.Mutex
	routes    []route
	methods   = map[string]method{}
	builtOnce sync.Once
	built     *sdk.Manifest
)

func addRoutes(rs ...route) {
	routesMu.Lock()
	defer routesMu.Unlock()
	routes = append(routes, rs...)
}

func addMethods(ms map[string]method) {
	routesMu.Lock()
	defer routesMu.Unlock()
	for k, v := range ms {
		methods[k] = v
	}
}

func routeTable() []route {
	routesMu.Lock()
	defer routesMu.Unlock()
	return append([]route(nil), routes...)
}

func methodTable() map[string]method {
	routesMu.Lock()
	defer routesMu.Unlock()
	return methods
}

// manifest builds the extension's manifest from the route and method tables.
func manifest() *sdk.Manifest {
	builtOnce.Do(func() {
		m := &sdk.Manifest{
			Key: Key, Version: "0.1.0", Kind: sdk.KindFeature, DisplayName: "Secrets",
			Description:  "Company secrets with versions and rotation, encrypted at rest, granted to agents, resolved at run time and audited.",
			Runtime:      sdk.Runtime{Kind: sdk.RuntimeProcess},
			Kernel:       ">=0.1 <1.0",
			Capabilities: []string{sdk.CapActivity, sdk.CapAuthz, sdk.CapPrincipals, sdk.CapDatabase},
		}
		r := &jsonschema.Reflector{DoNotReference: true, ExpandedStruct: true}
		for _, rt := range routeTable() {
			access := rt.Access
			if access == "" {
				access = sdk.AccessEither
			}
			sr := sdk.Route{Method: rt.Method, Path: rt.Path, Access: access, Permission: rt.Permission, Summary: rt.Summary}
			if rt.CompanyFromPath {
				sr.Company = &sdk.CompanyResolution{From: "path"}
			}
			if rt.Body != nil {
				if b, err := r.Reflect(rt.Body).MarshalJSON(); err == nil {
					sr.RequestSchema = b
				}
			}
			m.Routes = append(m.Routes, sr)
		}
		sort.Slice(m.Routes, func(i, j int) bool {
			if m.Routes[i].Path != m.Routes[j].Path {
				return m.Routes[i].Path < m.Routes[j].Path
			}
			return m.Routes[i].Method < m.Routes[j].Method
		})
		names := make([]string, 0, len(methodTable()))
		for name := range methodTable() {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			m.Provides = append(m.Provides, sdk.Method{Name: name, Description: methodTable()[name].Description})
		}
		built = m
	})
	return built
}
