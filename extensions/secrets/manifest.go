package secrets

import (
	"sync"

	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/extkit"
)

// route, method and the table they live in: each area file adds its routes, provided
// methods in init; the manifest, the mux and the method dispatcher are built
// from the table.
type (
	route  = extkit.Route[*Secrets]
	method = extkit.Method[*Secrets]
)

var (
	table     extkit.Table[*Secrets]
	builtOnce sync.Once
	built     *sdk.Manifest
)

func addRoutes(rs ...route)           { table.AddRoutes(rs...) }
func addMethods(ms map[string]method) { table.AddMethods(ms) }

// manifest builds the extension's manifest from the table, once.
func manifest() *sdk.Manifest {
	builtOnce.Do(func() {
		built = table.Manifest(&sdk.Manifest{
			Key: Key, Version: "0.1.0", Kind: sdk.KindFeature, DisplayName: "Secrets",
			Description:  "Company secrets with versions and rotation, encrypted at rest, granted to agents, resolved at run time and audited.",
			Runtime:      sdk.Runtime{Kind: sdk.RuntimeProcess},
			Kernel:       ">=0.1 <1.0",
			Events:       []string{eventCompanyDeleted},
			Capabilities: []string{sdk.CapActivity, sdk.CapAuthz, sdk.CapPrincipals, sdk.CapDatabase},
		})
	})
	return built
}
