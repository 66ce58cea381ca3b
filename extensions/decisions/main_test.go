package decisions_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	_ "github.com/keelhq/keel/extensions/agents"
	_ "github.com/keelhq/keel/extensions/decisions"
	_ "github.com/keelhq/keel/extensions/work"
	"github.com/keelhq/keel/host"
	"github.com/keelhq/keel/sdk"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
	"github.com/keelhq/keel/sdktest"
)

// TestMain runs the tests; when the host re-executes this binary as an extension,
// sdktest.Main serves it instead.
func TestMain(m *testing.M) { sdktest.Main(m) }

// startHost starts a host with the decisions, work and agents extensions and waits until
// all three are ready.
func startHost(t testing.TB) *sdktest.Host {
	t.Helper()
	h := sdktest.Start(t, sdktest.Options{Builtins: true, Configure: func(c *host.Config) { c.EnableCompanyDeletion = true }})
	waitReady(t, h)
	return h
}

// waitReady waits until the decisions, work and agents extensions are ready.
func waitReady(t testing.TB, h *sdktest.Host) {
	t.Helper()
	for _, key := range []string{"decisions", "work", "agents"} {
		sdktest.WaitFor(t, 60*time.Second, func() bool {
			res := h.Do("GET", "/api/plugins/"+key, nil)
			var m map[string]any
			return res.Status == http.StatusOK && json.Unmarshal(res.Body, &m) == nil && m["status"] == "ready"
		}, key+" to be ready")
	}
}

// fixture is a company with an agent in an issue-scoped run.
type fixture struct {
	h      *sdktest.Host
	co     string
	agent  *sdktest.Agent
	origin string // the run's issue
	runID  string
	// inRun authenticates as the agent with its run's JWT (the run need not be live).
	inRun []string
}

// newFixture creates a company, an agent and an issue assigned to it, and waits for the run
// the assignment starts.
func newFixture(t testing.TB, h *sdktest.Host, name string) *fixture {
	t.Helper()
	f := &fixture{h: h, co: h.CreateCompany(name)}
	f.agent = h.CreateAgent(f.co, name+" Worker", "engineer")
	f.origin = f.issue(t, map[string]any{"title": "origin work", "assigneeAgentId": f.agent.ID})["id"].(string)
	sdktest.WaitFor(t, 30*time.Second, func() bool {
		res := h.Do("GET", "/api/companies/"+f.co+"/heartbeat-runs?agentId="+f.agent.ID, nil)
		var runs []map[string]any
		if res.Status != http.StatusOK || json.Unmarshal(res.Body, &runs) != nil {
			return false
		}
		for _, r := range runs {
			if c, _ := r["contextSnapshot"].(map[string]any); c != nil && c["issueId"] == f.origin {
				f.runID = r["id"].(string)
				return true
			}
		}
		return false
	}, "the origin run")
	// Let the origin run end (its agent has no adapter), so that a later wake of this agent
	// for the same issue starts a run of its own instead of merging into the origin run.
	sdktest.WaitFor(t, 90*time.Second, func() bool {
		st, _ := h.Do("GET", "/api/heartbeat-runs/"+f.runID, nil).Map(t)["status"].(string)
		return st != "" && st != "queued" && st != "running" && st != "scheduled_retry"
	}, "the origin run to end")
	f.inRun = []string{"Authorization", "Bearer " + h.AgentJWT(f.agent, f.runID)}
	return f
}

// issue creates an issue as the board (201 required).
func (f *fixture) issue(t testing.TB, body map[string]any) map[string]any {
	t.Helper()
	res := f.h.Do("POST", "/api/companies/"+f.co+"/issues", body)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	return res.Map(t)
}

// getIssue reads an issue (200 required).
func (f *fixture) getIssue(t *testing.T, id string) map[string]any {
	t.Helper()
	res := f.h.Do("GET", "/api/issues/"+id, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	return res.Map(t)
}

// propose creates a decision as the agent in its run.
func (f *fixture) propose(body map[string]any) *sdktest.Response {
	return f.h.Do("POST", "/api/companies/"+f.co+"/decisions", body, f.inRun...)
}

// mustPropose creates a decision (201 required) and returns it.
func (f *fixture) mustPropose(t testing.TB, body map[string]any) map[string]any {
	t.Helper()
	res := f.propose(body)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	return res.Map(t)
}

// decide decides as the board.
func (f *fixture) decide(id string, body map[string]any) *sdktest.Response {
	return f.h.Do("POST", "/api/decisions/"+id+"/decide", body)
}

// simple is a create body with one comment option on the origin issue and one effect-free option.
func (f *fixture) simple(title string) map[string]any {
	return map[string]any{"title": title, "body": "pick one", "options": []any{
		map[string]any{"id": "yes", "label": "Yes", "effects": []any{
			map[string]any{"type": "comment_on_issue", "targetIssueId": f.origin, "bodyMarkdown": "approved"}}},
		map[string]any{"id": "no", "label": "No", "effects": []any{}},
	}}
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

// sweepOut is the output of decisions.sweep.
type sweepOut struct {
	Expired     []string `json:"expired"`
	Resumed     []string `json:"resumed"`
	PrunedItems int      `json:"prunedItems"`
}

// sweep runs decisions.sweep at now as the kernel would.
func sweep(t testing.TB, h *sdktest.Host, now time.Time) *sweepOut {
	t.Helper()
	in, err := json.Marshal(map[string]string{"now": now.UTC().Format(time.RFC3339Nano)})
	require.NoError(t, err)
	res, err := h.Supervisor.Invoke(context.Background(), "kernel", &hostv1.InvokeRequest{
		Method: "decisions.sweep", InputJson: in, Actor: sdk.SystemActor()})
	require.NoError(t, err)
	require.Nil(t, res.Error, "decisions.sweep: %v", res.Error)
	var out sweepOut
	require.NoError(t, json.Unmarshal(res.OutputJson, &out))
	return &out
}

// invoke calls a provided method as the kernel would, in a company.
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

// wakePayload waits for a heartbeat run of the agent whose wake payload names decisionID
// and returns that payload.
func (f *fixture) wakePayload(t *testing.T, decisionID string) map[string]any {
	t.Helper()
	// The wake request is what reaches the agents owner; it may start a run of its own or
	// merge into a queued run of the same agent and issue (a comment effect's wake, say).
	var payload map[string]any
	sdktest.WaitFor(t, 90*time.Second, func() bool {
		var raw []byte
		err := f.h.Kernel.Pool.QueryRow(context.Background(), `SELECT payload FROM ext_agents.agent_wakeup_requests
			WHERE agent_id = $1 AND payload->>'decisionId' = $2 LIMIT 1`, f.agent.ID, decisionID).Scan(&raw)
		return err == nil && json.Unmarshal(raw, &payload) == nil
	}, "the continuation wake of "+decisionID)
	return payload
}
