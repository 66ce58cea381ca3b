package builtinagents

import (
	"encoding/json"
	"net/http"
	"sync"

	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/extkit"
)

// route and method are the table entries each area file adds in init; the manifest, the
// mux and the method dispatcher are built from the table.
type (
	route  = extkit.Route[*BuiltInAgents]
	method = extkit.Method[*BuiltInAgents]
)

var (
	table     extkit.Table[*BuiltInAgents]
	builtOnce sync.Once
	built     *sdk.Manifest
)

func addRoutes(rs ...route)           { table.AddRoutes(rs...) }
func addMethods(ms map[string]method) { table.AddMethods(ms) }

// Flag is the experimental instance setting that turns built-in agents on.
const Flag = "enableBuiltInAgents"

// msgDisabled is every route's answer while Flag is off (spec part 2 "Errors").
const msgDisabled = "Built-in agents are not enabled"

// manifest builds the extension's manifest from the table, once.
func manifest() *sdk.Manifest {
	builtOnce.Do(func() {
		built = table.Manifest(&sdk.Manifest{
			Key: Key, Version: "0.1.0", Kind: sdk.KindFeature, DisplayName: "Built-in agents",
			Description: "First-party agents provisioned per company from the builtins registry: lifecycle states, provisioning " +
				"(under board approval when the company requires it), reconcile, reset and the bundled routines " +
				"(experimental, behind enableBuiltInAgents).",
			Runtime: sdk.Runtime{Kind: sdk.RuntimeProcess},
			Kernel:  ">=0.1 <1.0",
			Capabilities: []string{sdk.CapActivity, sdk.CapAuthz, sdk.CapPrincipals, sdk.CapCompanies, sdk.CapCalls,
				sdk.CapEvents, sdk.CapDatabase},
			Uses: []string{"agents.get", "agents.list", "agents.createBuiltIn", "agents.updateBuiltIn", "work.approvals.create",
				"work.approvals.get", "routines.invokeRoute"},
			// A deleted company's rows go with it; a decided hire approval finishes or
			// abandons a provision under approval.
			Events:       []string{"company.deleted", "approval.decided"},
			Flag:         Flag,
			FlagOff:      &sdk.FlagOffResponse{Status: http.StatusNotFound, Error: msgDisabled, Code: "built_in_agents_disabled"},
			ConfigSchema: json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{}}`),
		})
	})
	return built
}
