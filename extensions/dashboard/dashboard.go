// Package dashboard is the first-party `dashboard` extension: the one-call company health
// snapshot of GET /api/companies/{companyId}/dashboard (spec part 1 "Dashboard snapshot").
// It owns no tables. Each snapshot asks every owner once, concurrently: the agents owner
// for agent counts and run activity ("agents.dashboardCounts"), the work owner for task,
// approval and budget-paused project counts ("work.dashboardCounts") and the costs owner
// for the month's spend, budget and budget incidents ("costs.dashboardSummary"). An owner
// that is not installed contributes zeros; an owner that fails fails the snapshot (502).
// Concurrent requests for one company share rounds of calls (see coalescer), so a crowd
// of pollers does not multiply the owners' work.
package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/keelhq/keel/extensions"
	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/extkit"
)

// Key is the extension key.
const Key = "dashboard"

// The owners' methods a snapshot calls, once each.
const (
	MethodAgentsCounts = "agents.dashboardCounts"
	MethodWorkCounts   = "work.dashboardCounts"
	MethodCostsSummary = "costs.dashboardSummary"
)

func init() { extensions.Register(Key, func() sdk.Extension { return New() }) }

// route is one route of the extension's table.
type route = extkit.Route[*Dashboard]

var (
	table     extkit.Table[*Dashboard]
	builtOnce sync.Once
	built     *sdk.Manifest
)

// manifest builds the extension's manifest from the route table, once.
func manifest() *sdk.Manifest {
	builtOnce.Do(func() {
		built = table.Manifest(&sdk.Manifest{
			Key: Key, Version: "0.1.0", Kind: sdk.KindFeature, DisplayName: "Dashboard",
			Description:  "The one-call company health snapshot, composed from the agents, work and costs owners.",
			Runtime:      sdk.Runtime{Kind: sdk.RuntimeProcess},
			Kernel:       ">=0.1 <1.0",
			Capabilities: []string{sdk.CapCalls},
			Uses:         []string{MethodAgentsCounts, MethodWorkCounts, MethodCostsSummary},
		})
	})
	return built
}

// Dashboard is the extension.
type Dashboard struct {
	host *sdk.Host
	log  hclog.Logger
	mux  *http.ServeMux
	// rounds coalesces concurrent snapshots of one company.
	rounds coalescer[string, *Snapshot]
}

// New returns an unconfigured Dashboard.
func New() *Dashboard { return &Dashboard{log: hclog.NewNullLogger()} }

// Manifest returns the manifest built from the route table.
func (d *Dashboard) Manifest() *sdk.Manifest { return manifest() }

// Configure keeps the host services; the extension has no database and no config.
func (d *Dashboard) Configure(_ context.Context, env *sdk.Env) error {
	d.host = env.Host
	if env.Logger != nil {
		d.log = env.Logger
	}
	d.mux = table.Mux(d)
	return nil
}

// HTTPHandler serves the manifest routes.
func (d *Dashboard) HTTPHandler() http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if d.mux == nil {
			sdk.WriteError(rw, http.StatusServiceUnavailable, "dashboard extension is not configured")
			return
		}
		d.mux.ServeHTTP(rw, r)
	})
}

// Health reports whether the extension is configured.
func (d *Dashboard) Health(context.Context) error {
	if d.host == nil {
		return fmt.Errorf("not configured")
	}
	return nil
}

var (
	_ sdk.Configurer    = (*Dashboard)(nil)
	_ sdk.HTTPProvider  = (*Dashboard)(nil)
	_ sdk.HealthChecker = (*Dashboard)(nil)
)
