package decisions

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
	route  = extkit.Route[*Decisions]
	method = extkit.Method[*Decisions]
)

var (
	table     extkit.Table[*Decisions]
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
			Key: Key, Version: "0.1.0", Kind: sdk.KindFeature, DisplayName: "Decisions",
			Description: "Agent-proposed questions with signed options whose effects run on issues when the board picks one.",
			Runtime:     sdk.Runtime{Kind: sdk.RuntimeProcess},
			Kernel:      ">=0.1 <1.0",
			Capabilities: []string{sdk.CapActivity, sdk.CapAuthz, sdk.CapPrincipals, sdk.CapCalls, sdk.CapJobs,
				sdk.CapEvents, sdk.CapDatabase},
			Uses: []string{"work.targets.read", "work.issues.get", "work.issues.create", "work.issues.update",
				"work.comments.add", "work.issues.cancelTree", "agents.runStatus", "agents.wakeup"},
			// A deleted company's rows go with it.
			Events:       []string{"company.deleted"},
			ConfigSchema: json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{}}`),
		})
	})
	return built
}
