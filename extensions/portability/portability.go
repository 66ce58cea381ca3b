// Package portability is the first-party `portability` extension (spec part 2 "Company
// administration"): company export and import packages. An export writes markdown-backed
// files (COMPANY.md, agents, projects, issues with their comments, documents, work products
// and routines, skills), a manifest.json and content-addressed binary assets (attachments
// under assets/sha256/<hash>). An import reads a package from a local directory, a zip or a
// code-forge repository, previews the plan, verifies every attachment against its hash
// before anything is written, and applies it with a collision mode (rename, skip, replace).
// The extension owns no tables: it gathers and writes through the owners' provided methods.
package portability

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/keelhq/keel/extensions"
	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/extkit"
)

// Key is the extension key.
const Key = "portability"

func init() { extensions.Register(Key, func() sdk.Extension { return New() }) }

// route and method are the table entries each area file adds in init.
type route = extkit.Route[*Portability]

var (
	table     extkit.Table[*Portability]
	builtOnce sync.Once
	built     *sdk.Manifest
)

func addRoutes(rs ...route) { table.AddRoutes(rs...) }

// uses are the owners' methods an export or import calls.
var uses = []string{
	"agents.list", "agents.create", "agents.update",
	"work.projects.list", "work.projects.create", "work.projects.update",
	"work.issues.list", "work.issues.update",
	"work.portability.issueDetails", "work.portability.attachmentContent", "work.portability.importIssues",
	"routines.list", "routines.create", "routines.update",
	"skills.list", "skills.upsert",
}

// manifest builds the extension's manifest from the table, once.
func manifest() *sdk.Manifest {
	builtOnce.Do(func() {
		built = table.Manifest(&sdk.Manifest{
			Key: Key, Version: "0.1.0", Kind: sdk.KindFeature, DisplayName: "Company portability",
			Description: "Company export and import packages: markdown-backed files, a manifest and content-addressed assets; " +
				"imports from a local directory, a zip or a code forge, verified against attachment hashes before any write.",
			Runtime:      sdk.Runtime{Kind: sdk.RuntimeProcess},
			Kernel:       ">=0.1 <1.0",
			Capabilities: []string{sdk.CapActivity, sdk.CapAuthz, sdk.CapCompanies, sdk.CapCalls},
			Uses:         uses,
			ConfigSchema: json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{}}`),
		})
	})
	return built
}

// Portability is the extension.
type Portability struct {
	host  *sdk.Host
	log   hclog.Logger
	mux   http.Handler
	fetch *fetcher
	ends  *endpoints
}

// New returns an unconfigured Portability.
func New() *Portability { return &Portability{log: hclog.NewNullLogger(), fetch: newFetcher()} }

// Manifest returns the manifest built from the route table.
func (x *Portability) Manifest() *sdk.Manifest { return manifest() }

// Configure keeps the host services and reads the forge endpoints.
func (x *Portability) Configure(_ context.Context, env *sdk.Env) error {
	x.host = env.Host
	if env.Logger != nil {
		x.log = env.Logger
	}
	ends, err := endpointsFromEnv()
	if err != nil {
		return err
	}
	x.ends = ends
	x.mux = table.Mux(x)
	return nil
}

// HTTPHandler serves the manifest routes.
func (x *Portability) HTTPHandler() http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if x.mux == nil {
			sdk.WriteError(rw, http.StatusServiceUnavailable, "portability extension is not configured")
			return
		}
		x.mux.ServeHTTP(rw, r)
	})
}

// call invokes an owner's provided method as the system actor in a company and decodes
// its output into out (when not nil).
func (x *Portability) call(ctx context.Context, method, companyID string, in, out any) error {
	if in == nil {
		in = map[string]any{}
	}
	if err := x.host.Call(ctx, method, sdk.SystemActor(), companyID, in, out); err != nil {
		var e *sdk.Error
		if errors.As(err, &e) {
			return e
		}
		return fmt.Errorf("error calling %s: %w", method, err)
	}
	return nil
}

// writeErr writes err; anything that is not an *sdk.Error is logged and answered with 500,
// and an owner's error wrapped with context keeps the owner's status.
func (x *Portability) writeErr(rw http.ResponseWriter, err error) {
	var e *sdk.Error
	if !errors.As(err, &e) || e.Status >= http.StatusInternalServerError {
		x.log.Error("request failed", "error", err)
	}
	if e != nil && error(e) != err {
		// An owner's answer wrapped with what the import was doing keeps its status.
		err = &sdk.Error{Status: e.Status, Code: e.Code, Message: err.Error(), Details: e.Details}
	}
	sdk.WriteErr(rw, err)
}

var (
	_ sdk.Configurer   = (*Portability)(nil)
	_ sdk.HTTPProvider = (*Portability)(nil)
)
