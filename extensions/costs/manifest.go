package costs

import (
	"sync"

	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/extkit"
)

// route, method and the table they live in: each area file adds its routes, provided
// methods and jobs in init; the manifest, the mux and the method dispatcher are built
// from the table.
type (
	route  = extkit.Route[*Costs]
	method = extkit.Method[*Costs]
)

var (
	table     extkit.Table[*Costs]
	builtOnce sync.Once
	built     *sdk.Manifest
)

func addRoutes(rs ...route)           { table.AddRoutes(rs...) }
func addMethods(ms map[string]method) { table.AddMethods(ms) }
func addJobs(js ...sdk.Job)           { table.AddJobs(js...) }

// manifest builds the extension's manifest from the table, once.
func manifest() *sdk.Manifest {
	builtOnce.Do(func() {
		built = table.Manifest(&sdk.Manifest{
			Key: Key, Version: "0.1.0", Kind: sdk.KindFeature, DisplayName: "Costs and budgets",
			Description: "Cost events, spend reads, rolling window spend, finance events, budget policies, incidents and hard stops.",
			Runtime:     sdk.Runtime{Kind: sdk.RuntimeProcess},
			Kernel:      ">=0.1 <1.0",
			Events:      []string{eventCompanyDeleted},
			Capabilities: []string{sdk.CapActivity, sdk.CapPrincipals, sdk.CapCompanies, sdk.CapCalls,
				sdk.CapJobs, sdk.CapDatabase},
			Uses: []string{"agents.*", "work.*"},
		})
	})
	return built
}
