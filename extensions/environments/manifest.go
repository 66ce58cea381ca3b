package environments

import (
	"encoding/json"
	"sync"

	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/adapter"
	"github.com/keelhq/keel/sdk/extkit"
)

// route and method are the table entries each area file adds in init.
type (
	route  = extkit.Route[*Environments]
	method = extkit.Method[*Environments]
)

var (
	table     extkit.Table[*Environments]
	builtOnce sync.Once
	built     *sdk.Manifest
)

func addRoutes(rs ...route) { table.AddRoutes(rs...) }

// manifest builds the extension's manifest from the table, once.
func manifest() *sdk.Manifest {
	builtOnce.Do(func() {
		built = table.Manifest(&sdk.Manifest{
			Key: Key, Version: "0.1.0", Kind: sdk.KindFeature, DisplayName: "Environments",
			Description: "Execution environments (the built-in local driver and drivers plugins declare), their leases, " +
				"and adapter device logins run inside a lease.",
			Runtime:      sdk.Runtime{Kind: sdk.RuntimeProcess},
			Kernel:       ">=0.1 <1.0",
			Capabilities: []string{sdk.CapActivity, sdk.CapAuthz, sdk.CapCalls, sdk.CapEvents, sdk.CapDatabase},
			Uses: []string{sdk.EnvironmentDriversMethod, sdk.EnvironmentDriverCallMethod, adapter.ResolveMethod,
				adapter.ListMethod, "adapter.*"},
			Events:       []string{"company.deleted"},
			ConfigSchema: json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{}}`),
		})
	})
	return built
}
