package builtinagents_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	_ "github.com/keelhq/keel/extensions/agents"
	_ "github.com/keelhq/keel/extensions/builtinagents"
	_ "github.com/keelhq/keel/extensions/routines"
	_ "github.com/keelhq/keel/extensions/work"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
	"github.com/keelhq/keel/sdktest"
)

// TestMain runs the tests; when the host re-executes this binary as an extension,
// sdktest.Main serves it instead.
func TestMain(m *testing.M) { sdktest.Main(m) }

// startHost starts a host with the work, agents, routines and builtinagents extensions and
// waits for the owners; with on, it also turns enableBuiltInAgents on and waits for the
// extension.
func startHost(t testing.TB, on bool) *sdktest.Host {
	t.Helper()
	h := sdktest.Start(t, sdktest.Options{Builtins: true})
	for _, key := range []string{"work", "agents", "routines"} {
		waitStatus(t, h, key, "ready")
	}
	if on {
		setFlag(t, h, true)
		waitStatus(t, h, "builtinagents", "ready")
	}
	return h
}

// waitStatus waits until an extension reports a status.
func waitStatus(t testing.TB, h *sdktest.Host, key, status string) {
	t.Helper()
	sdktest.WaitFor(t, 60*time.Second, func() bool {
		res := h.Do("GET", "/api/plugins/"+key, nil)
		var m map[string]any
		return res.Status == http.StatusOK && json.Unmarshal(res.Body, &m) == nil && m["status"] == status
	}, key+" to be "+status)
}

// setFlag turns enableBuiltInAgents on or off.
func setFlag(t testing.TB, h *sdktest.Host, on bool) {
	t.Helper()
	res := h.Do("PATCH", "/api/instance/settings/experimental", map[string]any{"enableBuiltInAgents": on})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
}

// company creates a company, requiring board approval for new agents when approval is set.
func company(t *testing.T, h *sdktest.Host, name string, approval bool) string {
	t.Helper()
	res := h.Do("POST", "/api/companies", map[string]any{"name": name, "requireBoardApprovalForNewAgents": approval})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	return res.Map(t)["id"].(string)
}

// ok requires a status and decodes an object.
func ok(t testing.TB, res *sdktest.Response, want int) map[string]any {
	t.Helper()
	require.Equal(t, want, res.Status, "%s", res.Body)
	return res.Map(t)
}

// builtIn is the part of the status answer the tests read.
type builtIn struct {
	Key                  string   `json:"key"`
	State                string   `json:"state"`
	Configured           bool     `json:"configured"`
	Paused               bool     `json:"paused"`
	AgentID              *string  `json:"agentId"`
	ApprovalID           *string  `json:"approvalId"`
	DefaultAdapterType   string   `json:"defaultAdapterType"`
	MissingAdapterFields []string `json:"missingAdapterFields"`
	Changes              []string `json:"changes"`
	Agent                *struct {
		Name               string         `json:"name"`
		Status             string         `json:"status"`
		AdapterType        string         `json:"adapterType"`
		AdapterConfig      map[string]any `json:"adapterConfig"`
		BudgetMonthlyCents int64          `json:"budgetMonthlyCents"`
		DesiredSkills      []string       `json:"desiredSkills"`
		Marker             map[string]any `json:"serviceBuiltInAgent"`
	} `json:"agent"`
	Resources struct {
		Instructions *struct {
			Present  bool `json:"present"`
			Modified bool `json:"modified"`
		} `json:"instructions"`
		Skills []struct {
			Name     string `json:"name"`
			Present  bool   `json:"present"`
			Attached bool   `json:"attached"`
			Modified bool   `json:"modified"`
		} `json:"skills"`
		Routines []struct {
			Key       string  `json:"key"`
			RoutineID *string `json:"routineId"`
			TriggerID *string `json:"triggerId"`
		} `json:"routines"`
	} `json:"resources"`
}

func decode(t testing.TB, res *sdktest.Response, want int) *builtIn {
	t.Helper()
	require.Equal(t, want, res.Status, "%s", res.Body)
	b := new(builtIn)
	res.JSON(t, b)
	return b
}

// path is the built-in agents route of a company.
func path(co string, rest string) string { return "/api/companies/" + co + "/built-in-agents" + rest }

// status reads one built-in's status.
func status(t testing.TB, h *sdktest.Host, co, key string) *builtIn {
	t.Helper()
	return decode(t, h.Do("GET", path(co, "/"+key+"/status"), nil), http.StatusOK)
}

// provision posts a provision body and requires a status.
func provision(t testing.TB, h *sdktest.Host, co, key string, body any, want int) *builtIn {
	t.Helper()
	return decode(t, h.Do("POST", path(co, "/"+key+"/provision"), body), want)
}

// processAdapter is a complete process adapter config.
var processAdapter = map[string]any{"adapterType": "process", "adapterConfig": map[string]any{"command": "/bin/true"}}

// agentRecord reads an agent through the agents owner's route.
func agentRecord(t testing.TB, h *sdktest.Host, id string) map[string]any {
	t.Helper()
	return ok(t, h.Do("GET", "/api/agents/"+id, nil), http.StatusOK)
}

// routine reads a routine with its triggers.
func routine(t testing.TB, h *sdktest.Host, id string) map[string]any {
	t.Helper()
	return ok(t, h.Do("GET", "/api/routines/"+id, nil), http.StatusOK)
}

// scheduleEnabled is the enabled flag of a routine's schedule trigger.
func scheduleEnabled(t testing.TB, rt map[string]any) bool {
	t.Helper()
	for _, tr := range rt["triggers"].([]any) {
		if m := tr.(map[string]any); m["kind"] == "schedule" {
			return m["enabled"].(bool)
		}
	}
	t.Fatalf("routine %v has no schedule trigger", rt["id"])
	return false
}

// invoke calls a provided method as caller and returns the raw output or the error.
func invoke(t testing.TB, h *sdktest.Host, caller, method, companyID string, in any) (json.RawMessage, *hostv1.InvokeResponse) {
	t.Helper()
	b, err := json.Marshal(in)
	require.NoError(t, err)
	res, err := h.Supervisor.Invoke(context.Background(), caller, &hostv1.InvokeRequest{Method: method, InputJson: b, CompanyId: companyID})
	require.NoError(t, err)
	return res.OutputJson, res
}
