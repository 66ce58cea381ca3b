package work

import (
	"encoding/json"
	"sync"

	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/extkit"
)

// route, method and the table they live in: each area file adds its routes, provided
// methods in init; the manifest, the mux and the method dispatcher are built
// from the table.
type (
	route  = extkit.Route[*Work]
	method = extkit.Method[*Work]
)

var (
	table     extkit.Table[*Work]
	builtOnce sync.Once
	built     *sdk.Manifest
)

func addRoutes(rs ...route)           { table.AddRoutes(rs...) }
func addMethods(ms map[string]method) { table.AddMethods(ms) }

// manifest builds the extension's manifest from the table, once.
func manifest() *sdk.Manifest {
	builtOnce.Do(func() {
		built = table.Manifest(&sdk.Manifest{
			Key: Key, Version: "0.1.0", Kind: sdk.KindFeature, DisplayName: "Work graph",
			Description: "Issues, comments, blockers, labels, documents, work products, attachments, projects, goals, approvals and company search.",
			Runtime:     sdk.Runtime{Kind: sdk.RuntimeProcess},
			Kernel:      ">=0.1 <1.0",
			Events:      []string{eventCompanyDeleted},
			Capabilities: []string{sdk.CapActivity, sdk.CapAuthz, sdk.CapPrincipals, sdk.CapCompanies, sdk.CapCalls,
				sdk.CapEvents, sdk.CapDatabase, sdk.CapSettings},
			Uses: []string{"agents.wakeup", "agents.approveHire", "agents.runStatus", "agents.runStatuses"},
			ConfigSchema: json.RawMessage(`{"type":"object","additionalProperties":false,
				"properties":{"attachmentMaxBytes":{"type":"integer","minimum":1,"maximum":1073741824}}}`),
		})
	})
	return built
}
