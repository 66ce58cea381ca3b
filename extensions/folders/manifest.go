package folders

import (
	"encoding/json"
	"sync"

	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/extkit"
)

// route and method are the table entries each area file adds in init; the manifest, the
// mux and the method dispatcher are built from the table.
type (
	route  = extkit.Route[*Folders]
	method = extkit.Method[*Folders]
)

var (
	table     extkit.Table[*Folders]
	builtOnce sync.Once
	built     *sdk.Manifest
)

func addRoutes(rs ...route)           { table.AddRoutes(rs...) }
func addMethods(ms map[string]method) { table.AddMethods(ms) }

// manifest builds the extension's manifest from the table, once.
func manifest() *sdk.Manifest {
	builtOnce.Do(func() {
		built = table.Manifest(&sdk.Manifest{
			Key: Key, Version: "0.1.0", Kind: sdk.KindFeature, DisplayName: "Folders",
			Description: "Nested folder trees that organise a company's routines and skills: slugs, system-managed and " +
				"personal folders, moves with positions, item filing and counts.",
			Runtime:      sdk.Runtime{Kind: sdk.RuntimeProcess},
			Kernel:       ">=0.1 <1.0",
			Capabilities: []string{sdk.CapActivity, sdk.CapPrincipals, sdk.CapCalls, sdk.CapDatabase},
			Uses: []string{"routines.folderItems.counts", "routines.folderItems.get", "routines.folderItems.set",
				"routines.folderItems.unfile", "skills.folderItems.counts", "skills.folderItems.get", "skills.folderItems.set",
				"skills.folderItems.unfile"},
			// A deleted company's folders go with it.
			Events:       []string{"company.deleted"},
			ConfigSchema: json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{}}`),
		})
	})
	return built
}
