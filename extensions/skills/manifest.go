package skills

import (
	"encoding/json"
	"sync"

	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/extkit"
)

// route and method are the table entries each area file adds in init; the manifest, the
// mux and the method dispatcher are built from the table.
type (
	route  = extkit.Route[*Skills]
	method = extkit.Method[*Skills]
)

var (
	table     extkit.Table[*Skills]
	builtOnce sync.Once
	built     *sdk.Manifest
)

func addRoutes(rs ...route)           { table.AddRoutes(rs...) }
func addMethods(ms map[string]method) { table.AddMethods(ms) }

// manifest builds the extension's manifest from the table, once.
func manifest() *sdk.Manifest {
	builtOnce.Do(func() {
		built = table.Manifest(&sdk.Manifest{
			Key: Key, Version: "0.1.0", Kind: sdk.KindFeature, DisplayName: "Skills",
			Description: "Company skills: imports from forges, registry sites, raw URLs and local folders, SKILL.md parsing, " +
				"trust levels, bundled and managed skills, updates, project scans and the public skill catalog.",
			Runtime:      sdk.Runtime{Kind: sdk.RuntimeProcess},
			Kernel:       ">=0.1 <1.0",
			Capabilities: []string{sdk.CapActivity, sdk.CapAuthz, sdk.CapPrincipals, sdk.CapCalls, sdk.CapDatabase},
			Uses:         []string{"agents.get", "agents.list", "work.projects.get", "work.projects.list", "folders.get", "folders.ensureSystem"},
			// A deleted company's skills go with it.
			Events:       []string{"company.deleted"},
			ConfigSchema: json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{}}`),
		})
	})
	return built
}
