package workspaces

import (
	"encoding/json"
	"sync"

	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/extkit"
)

// route and method are the table entries each area file adds in init; the manifest, the
// mux and the method dispatcher are built from the table.
type (
	route  = extkit.Route[*Workspaces]
	method = extkit.Method[*Workspaces]
)

var (
	table     extkit.Table[*Workspaces]
	builtOnce sync.Once
	built     *sdk.Manifest
)

func addRoutes(rs ...route)           { table.AddRoutes(rs...) }
func addMethods(ms map[string]method) { table.AddMethods(ms) }

// manifest builds the extension's manifest from the table, once.
func manifest() *sdk.Manifest {
	builtOnce.Do(func() {
		built = table.Manifest(&sdk.Manifest{
			Key: Key, Version: "0.1.0", Kind: sdk.KindFeature, DisplayName: "Execution workspaces",
			Description: "The working directory of every issue run (the project workspace, or a git worktree on the issue's own " +
				"branch), close readiness, the workspace-operations log, and runtime services and commands.",
			Runtime:      sdk.Runtime{Kind: sdk.RuntimeProcess},
			Kernel:       ">=0.1 <1.0",
			Capabilities: []string{sdk.CapActivity, sdk.CapCalls, sdk.CapDatabase},
			Uses:         []string{"work.issues.get", "work.issues.briefs", "work.projects.get", "agents.runStatus"},
			Events:       []string{"company.deleted"},
			ConfigSchema: json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{}}`),
		})
	})
	return built
}
