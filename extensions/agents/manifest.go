package agents

import (
	"sync"

	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/extkit"
)

// route, method and the table they live in: each area file adds its routes, provided
// methods and jobs in init; the manifest, the mux and the method dispatcher are built
// from the table.
type (
	route  = extkit.Route[*Agents]
	method = extkit.Method[*Agents]
)

var (
	table     extkit.Table[*Agents]
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
			Key: Key, Version: "0.1.0", Kind: sdk.KindFeature, DisplayName: "Agents",
			Description: "Agent configuration and lifecycle, hires, permissions, config revisions, skills, wakeups, heartbeat runs and their logs, the run scheduler, inbox-lite and granted secrets.",
			Runtime:     sdk.Runtime{Kind: sdk.RuntimeProcess},
			Kernel:      ">=0.1 <1.0",
			Events:      []string{eventCompanyDeleted},
			Capabilities: []string{sdk.CapActivity, sdk.CapAuthz, sdk.CapPrincipals, sdk.CapCompanies, sdk.CapCalls, sdk.CapSecrets,
				sdk.CapEvents, sdk.CapJobs, sdk.CapSettings, sdk.CapDatabase},
			Uses: []string{"work.*", "secrets.*", "costs.*", "adapter.*", "keel.adapters.*", "skills.list", "skills.get", "workspaces.*"},
		})
	})
	return built
}
