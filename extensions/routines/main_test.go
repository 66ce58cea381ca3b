package routines_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	_ "github.com/keelhq/keel/extensions/agents"
	_ "github.com/keelhq/keel/extensions/folders"
	"github.com/keelhq/keel/extensions/routines"
	_ "github.com/keelhq/keel/extensions/secrets"
	_ "github.com/keelhq/keel/extensions/work"
	"github.com/keelhq/keel/kernel"
	"github.com/keelhq/keel/sdk"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
	"github.com/keelhq/keel/sdktest"
)

// TestMain runs the tests; when the host re-executes this binary as an extension,
// sdktest.Main serves it instead. The automatic ticker is off in every process of this
// binary: tests drive schedules through routines.tick with their own clock.
func TestMain(m *testing.M) {
	_ = os.Setenv(routines.SchedulerEnv, "off")
	sdktest.Main(m)
}

// startHost starts a host with the routines, work, agents and secrets extensions and waits
// until all four are ready (hosts started in parallel on the shared cluster can race
// provisioning extension roles; the supervisor retries).
func startHost(t testing.TB, opts sdktest.Options) *sdktest.Host {
	t.Helper()
	opts.Builtins = true
	h := sdktest.Start(t, opts)
	for _, key := range []string{"routines", "work", "agents", "secrets"} {
		sdktest.WaitFor(t, 60*time.Second, func() bool {
			res := h.Do("GET", "/api/plugins/"+key, nil)
			var m map[string]any
			return res.Status == http.StatusOK && json.Unmarshal(res.Body, &m) == nil && m["status"] == "ready"
		}, key+" to be ready")
	}
	return h
}

// fixture is a company with an agent, on a host.
type fixture struct {
	h     *sdktest.Host
	co    string
	agent *sdktest.Agent
}

func newFixture(t *testing.T, h *sdktest.Host, name string) *fixture {
	t.Helper()
	co := h.CreateCompany(name)
	return &fixture{h: h, co: co, agent: h.CreateAgent(co, name+" Worker", "engineer")}
}

// routine creates a routine assigned to the fixture's agent (201 required).
func (f *fixture) routine(t *testing.T, body map[string]any) map[string]any {
	t.Helper()
	if _, ok := body["assigneeAgentId"]; !ok {
		body["assigneeAgentId"] = f.agent.ID
	}
	res := f.h.Do("POST", "/api/companies/"+f.co+"/routines", body)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	return res.Map(t)
}

// trigger adds a trigger to a routine (201 required) and returns the whole answer.
func (f *fixture) trigger(t *testing.T, routineID string, body map[string]any) map[string]any {
	t.Helper()
	res := f.h.Do("POST", "/api/routines/"+routineID+"/triggers", body)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	return res.Map(t)
}

// schedule adds an enabled schedule trigger and returns the trigger.
func (f *fixture) schedule(t *testing.T, routineID, cron, tz string) map[string]any {
	t.Helper()
	return f.trigger(t, routineID, map[string]any{"kind": "schedule", "cronExpression": cron, "timezone": tz})["trigger"].(map[string]any)
}

// runs lists a routine's runs (200 required), newest first.
func (f *fixture) runs(t *testing.T, routineID string) []map[string]any {
	t.Helper()
	res := f.h.Do("GET", "/api/routines/"+routineID+"/runs?limit=200", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var out []map[string]any
	res.JSON(t, &out)
	return out
}

// get reads a routine (200 required).
func (f *fixture) get(t *testing.T, routineID string) map[string]any {
	t.Helper()
	res := f.h.Do("GET", "/api/routines/"+routineID, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	return res.Map(t)
}

// triggerOf returns a trigger of a routine read.
func (f *fixture) triggerOf(t *testing.T, routineID, triggerID string) map[string]any {
	t.Helper()
	for _, tr := range f.get(t, routineID)["triggers"].([]any) {
		if m := tr.(map[string]any); m["id"] == triggerID {
			return m
		}
	}
	t.Fatalf("trigger %s not on routine %s", triggerID, routineID)
	return nil
}

// activity appends an activity entry through the board API.
func (f *fixture) activity(t *testing.T, body map[string]any) {
	t.Helper()
	res := f.h.Do("POST", "/api/companies/"+f.co+"/activity", body)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
}

// tickResult is the output of routines.tick.
type tickResult struct {
	Claimed int `json:"claimed"`
	Runs    []struct {
		ID           string    `json:"id"`
		RoutineID    string    `json:"routineId"`
		TriggerID    string    `json:"triggerId"`
		Status       string    `json:"status"`
		ScheduledFor time.Time `json:"scheduledFor"`
	} `json:"runs"`
}

// tick runs the schedule ticker at now through routines.tick, as the kernel would.
func tick(t testing.TB, h *sdktest.Host, now time.Time) *tickResult {
	t.Helper()
	in, err := json.Marshal(map[string]string{"now": now.UTC().Format(time.RFC3339Nano)})
	require.NoError(t, err)
	res, err := h.Supervisor.Invoke(context.Background(), "kernel", &hostv1.InvokeRequest{
		Method: "routines.tick", InputJson: in, Actor: sdk.SystemActor()})
	require.NoError(t, err)
	require.Nil(t, res.Error, "routines.tick: %v", res.Error)
	var out tickResult
	require.NoError(t, json.Unmarshal(res.OutputJson, &out))
	return &out
}

// invoke calls a provided method as the kernel would and returns its output or error.
func invoke(t testing.TB, h *sdktest.Host, method, companyID string, input any) (json.RawMessage, *sdk.Error) {
	t.Helper()
	in, err := json.Marshal(input)
	require.NoError(t, err)
	res, err := h.Supervisor.Invoke(context.Background(), "kernel", &hostv1.InvokeRequest{
		Method: method, InputJson: in, CompanyId: companyID, Actor: sdk.SystemActor()})
	require.NoError(t, err)
	if res.Error != nil {
		return nil, sdk.FromProtoError(res.Error).(*sdk.Error)
	}
	return res.OutputJson, nil
}

// activityEntries lists a company's activity entries with an action, newest first.
func activityEntries(t testing.TB, h *sdktest.Host, companyID, action, entityID string) []*kernel.ActivityEntry {
	t.Helper()
	entries, err := h.Kernel.ActivityList(context.Background(), &kernel.ActivityListParams{
		CompanyID: companyID, Action: action, EntityID: entityID, Limit: 500})
	require.NoError(t, err)
	return entries
}

// details decodes an activity entry's details.
func details(t testing.TB, e *kernel.ActivityEntry) map[string]any {
	t.Helper()
	var d map[string]any
	require.NoError(t, json.Unmarshal(e.Details, &d))
	return d
}

// wantErr checks an API error's status and text and returns the body.
func wantErr(t testing.TB, res *sdktest.Response, status int, message string) map[string]any {
	t.Helper()
	require.Equal(t, status, res.Status, "%s", res.Body)
	m := res.Map(t)
	if message != "" {
		require.Equal(t, message, m["error"], "%s", res.Body)
	}
	return m
}

// wantValidation checks a 400 Validation error naming path.
func wantValidation(t testing.TB, res *sdktest.Response, path string) {
	t.Helper()
	m := wantErr(t, res, http.StatusBadRequest, "Validation error")
	var paths []string
	for _, d := range m["details"].([]any) {
		paths = append(paths, d.(map[string]any)["path"].(string))
	}
	require.Contains(t, paths, path, "%s", res.Body)
}

// issue reads an issue (200 required).
func issue(t testing.TB, h *sdktest.Host, id string) map[string]any {
	t.Helper()
	res := h.Do("GET", "/api/issues/"+id, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	return res.Map(t)
}

// project creates a project (201 required) and returns its id.
func (f *fixture) project(t *testing.T, name string) string {
	t.Helper()
	res := f.h.Do("POST", "/api/companies/"+f.co+"/projects", map[string]any{"name": name})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	return res.Map(t)["id"].(string)
}

// heartbeatRuns lists the agent's heartbeat runs.
func (f *fixture) heartbeatRuns(t *testing.T) []map[string]any {
	t.Helper()
	res := f.h.Do("GET", "/api/companies/"+f.co+"/heartbeat-runs?agentId="+f.agent.ID+"&limit=200", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var out []map[string]any
	res.JSON(t, &out)
	return out
}

// runsForIssue returns the agent's heartbeat runs whose context issue is issueID.
func (f *fixture) runsForIssue(t *testing.T, issueID string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, r := range f.heartbeatRuns(t) {
		if ctx, _ := r["contextSnapshot"].(map[string]any); ctx != nil && ctx["issueId"] == issueID {
			out = append(out, r)
		}
	}
	return out
}
