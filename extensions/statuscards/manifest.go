package statuscards

import (
	"encoding/json"
	"net/http"
	"sync"

	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/extkit"
)

// route, method and the table they live in: each area file adds its routes, provided
// methods and jobs in init; the manifest, the mux and the method dispatcher are built
// from the table.
type (
	route  = extkit.Route[*StatusCards]
	method = extkit.Method[*StatusCards]
)

var (
	table     extkit.Table[*StatusCards]
	builtOnce sync.Once
	built     *sdk.Manifest
)

func addRoutes(rs ...route)           { table.AddRoutes(rs...) }
func addMethods(ms map[string]method) { table.AddMethods(ms) }
func addJobs(js ...sdk.Job)           { table.AddJobs(js...) }

// Flag is the experimental instance setting that turns status cards on.
const Flag = "enableStatusCards"

// msgDisabled is every route's answer while Flag is off (spec part 1 "Errors").
const msgDisabled = "Status cards are not enabled"

// manifest builds the extension's manifest from the table, once.
func manifest() *sdk.Manifest {
	builtOnce.Do(func() {
		built = table.Manifest(&sdk.Manifest{
			Key: Key, Version: "0.1.0", Kind: sdk.KindFeature, DisplayName: "Status cards",
			Description: "Standing questions about a company's work, compiled by a summarizer agent into company-search queries " +
				"and kept summarized as the watched issues change: manual, interval and reactive refresh policies, active hours, " +
				"daily token caps, an update ledger and summary revisions (experimental, behind enableStatusCards).",
			Runtime: sdk.Runtime{Kind: sdk.RuntimeProcess},
			Kernel:  ">=0.1 <1.0",
			Capabilities: []string{sdk.CapActivity, sdk.CapAuthz, sdk.CapPrincipals, sdk.CapCalls, sdk.CapJobs,
				sdk.CapEvents, sdk.CapDatabase},
			Uses: []string{"work.search", "work.issues.create", "work.issues.get", "work.issues.update", "work.issues.fingerprints",
				"agents.get", "agents.wakeup", "agents.runStatus", "costs.issueUsage", "builtinagents.resolve"},
			// Generation tasks finishing, watched issues changing, deleted companies.
			Events:       []string{"issue.created", "issue.updated", "issue.comment.created", "company.deleted"},
			Flag:         Flag,
			FlagOff:      &sdk.FlagOffResponse{Status: http.StatusNotFound, Error: msgDisabled},
			ConfigSchema: json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{"scheduler":{"type":"string","enum":["on","off"]}}}`),
		})
	})
	return built
}
