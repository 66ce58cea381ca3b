package cases

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
	route  = extkit.Route[*Cases]
	method = extkit.Method[*Cases]
)

var (
	table     extkit.Table[*Cases]
	builtOnce sync.Once
	built     *sdk.Manifest
)

func addRoutes(rs ...route) { table.AddRoutes(rs...) }

// Flag is the experimental instance setting that turns cases on.
const Flag = "enableCases"

// msgDisabled is every route's answer while Flag is off (spec part 2 "Errors").
const msgDisabled = "Cases are disabled"

// manifest builds the extension's manifest from the table, once.
func manifest() *sdk.Manifest {
	builtOnce.Do(func() {
		built = table.Manifest(&sdk.Manifest{
			Key: Key, Version: "0.1.0", Kind: sdk.KindFeature, DisplayName: "Cases",
			Description: "Document-heavy containers: typed cases with revisioned, lockable documents, annotation threads, " +
				"attachments, labels, typed issue links and an event timeline (experimental, behind enableCases).",
			Runtime: sdk.Runtime{Kind: sdk.RuntimeProcess},
			Kernel:  ">=0.1 <1.0",
			Capabilities: []string{sdk.CapActivity, sdk.CapAuthz, sdk.CapPrincipals, sdk.CapCompanies, sdk.CapCalls,
				sdk.CapEvents, sdk.CapDatabase},
			Uses: []string{"work.issues.get", "work.issues.briefs", "work.projects.get", "work.labels.list", "agents.runStatus"},
			// A deleted company's rows and files go with it.
			Events:       []string{"company.deleted"},
			Flag:         Flag,
			FlagOff:      &sdk.FlagOffResponse{Status: http.StatusForbidden, Error: msgDisabled, Code: "cases_disabled"},
			ConfigSchema: json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{}}`),
		})
	})
	return built
}
