package routines

import (
	"encoding/json"
	"sync"

	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/extkit"
)

// route, method and the table they live in: each area file adds its routes, provided
// methods and jobs in init; the manifest, the mux and the method dispatcher are built
// from the table.
type (
	route  = extkit.Route[*Routines]
	method = extkit.Method[*Routines]
)

var (
	table     extkit.Table[*Routines]
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
			Key: Key, Version: "0.1.0", Kind: sdk.KindFeature, DisplayName: "Routines",
			Description: "Routines that create execution issues for an assigned agent, fired by schedule, webhook and api triggers " +
				"or by hand, with concurrency, catch-up and activity-gate policies.",
			Runtime: sdk.Runtime{Kind: sdk.RuntimeProcess},
			Kernel:  ">=0.1 <1.0",
			Capabilities: []string{sdk.CapActivity, sdk.CapAuthz, sdk.CapPrincipals, sdk.CapCalls, sdk.CapSecrets, sdk.CapJobs,
				sdk.CapEvents, sdk.CapDatabase},
			Uses: []string{"work.*", "agents.get", "agents.runStatus", "secrets.createManaged", "secrets.rotateManaged",
				"secrets.deleteManaged", "secrets.resolve", "folders.get"},
			// Execution issues finishing move their runs to completed or failed.
			Events: []string{"issue.updated", "company.deleted"},
			ConfigSchema: json.RawMessage(`{"type":"object","additionalProperties":false,
				"properties":{"scheduler":{"type":"string","enum":["on","off"]}}}`),
		})
	})
	return built
}
