package statuscards_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	_ "github.com/keelhq/keel/adapters/process"
	_ "github.com/keelhq/keel/extensions/agents"
	_ "github.com/keelhq/keel/extensions/builtinagents"
	_ "github.com/keelhq/keel/extensions/costs"
	_ "github.com/keelhq/keel/extensions/routines"
	"github.com/keelhq/keel/extensions/statuscards"
	_ "github.com/keelhq/keel/extensions/work"
	"github.com/keelhq/keel/sdk"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
	"github.com/keelhq/keel/sdktest"
)

// TestMain runs the tests; when the host re-executes this binary as an extension,
// sdktest.Main serves it instead. The automatic evaluation job is off in every process of
// this binary: tests drive policies through statuscards.tick with their own clock.
func TestMain(m *testing.M) {
	_ = os.Setenv(statuscards.SchedulerEnv, "off")
	sdktest.Main(m)
}

// startHost starts a host with the statuscards, work, agents and costs extensions, turns
// enableStatusCards on when asked, and waits until they are ready.
func startHost(t testing.TB, on bool) *sdktest.Host {
	t.Helper()
	h := sdktest.Start(t, sdktest.Options{Builtins: true})
	for _, key := range []string{"work", "agents", "costs", "routines"} {
		waitStatus(t, h, key, "ready")
	}
	if on {
		setFlag(t, h, true)
		waitStatus(t, h, statuscards.Key, "ready")
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

// setFlag turns enableStatusCards on or off.
func setFlag(t testing.TB, h *sdktest.Host, on bool) {
	t.Helper()
	res := h.Do("PATCH", "/api/instance/settings/experimental", map[string]any{statuscards.Flag: on})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
}

// fixture is a company with a summarizer agent (the cards' agentId override).
type fixture struct {
	h          *sdktest.Host
	co         string
	summarizer *sdktest.Agent
}

func newFixture(t *testing.T, h *sdktest.Host, name string) *fixture {
	t.Helper()
	co := h.CreateCompany(name)
	return &fixture{h: h, co: co, summarizer: h.CreateAgent(co, name+" Summarizer", "general")}
}

// issue creates an issue as the board (201 required).
func (f *fixture) issue(t *testing.T, body map[string]any) map[string]any {
	t.Helper()
	res := f.h.Do("POST", "/api/companies/"+f.co+"/issues", body)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	return res.Map(t)
}

// create creates a card summarized by the fixture's agent (201 required).
func (f *fixture) create(t *testing.T, body map[string]any, headers ...string) map[string]any {
	t.Helper()
	if _, ok := body["agentId"]; !ok {
		body["agentId"] = f.summarizer.ID
	}
	res := f.h.Do("POST", "/api/companies/"+f.co+"/status-cards", body, headers...)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	return res.Map(t)
}

// card reads a card (200 required).
func (f *fixture) card(t *testing.T, id string) map[string]any {
	t.Helper()
	return ok(t, f.h.Do("GET", "/api/status-cards/"+id, nil), http.StatusOK)
}

// updates reads a card's ledger (200 required), newest first.
func (f *fixture) updates(t *testing.T, id string) []map[string]any {
	t.Helper()
	return list(t, f.h.Do("GET", "/api/status-cards/"+id+"/updates", nil))
}

// runFor waits for the summarizer's run on an issue and returns its id.
func (f *fixture) runFor(t *testing.T, agent *sdktest.Agent, issueID string) string {
	t.Helper()
	var runID string
	sdktest.WaitFor(t, 60*time.Second, func() bool {
		res := f.h.Do("GET", "/api/companies/"+f.co+"/heartbeat-runs?agentId="+agent.ID, nil)
		var runs []map[string]any
		if res.Status != http.StatusOK || json.Unmarshal(res.Body, &runs) != nil {
			return false
		}
		for _, r := range runs {
			if c, _ := r["contextSnapshot"].(map[string]any); c != nil && c["issueId"] == issueID {
				runID = r["id"].(string)
				return true
			}
		}
		return false
	}, "the summarizer's run on its generation task")
	return runID
}

// inRun returns the headers of the summarizer acting in its run on the card's generation task.
func (f *fixture) inRun(t *testing.T, cardID string) (string, []string) {
	t.Helper()
	task, _ := f.card(t, cardID)["generatingIssueId"].(string)
	require.NotEmpty(t, task, "the card has a generation task")
	run := f.runFor(t, f.summarizer, task)
	return task, []string{"Authorization", "Bearer " + f.h.AgentJWT(f.summarizer, run)}
}

// compile writes queries from the card's generation task as the summarizer.
func (f *fixture) compile(t *testing.T, cardID string, queries ...map[string]any) (string, []string) {
	t.Helper()
	task, as := f.inRun(t, cardID)
	if len(queries) == 0 {
		queries = []map[string]any{{"q": "", "scope": "issues", "limit": 50}}
	}
	ok(t, f.h.Do("PUT", "/api/status-cards/"+cardID+"/query", map[string]any{"queries": queries, "title": "Compiled title",
		"changeSummary": "compiled", "generationIssueId": task}, as...), http.StatusOK)
	return task, as
}

// summarize writes a summary from the card's generation task as the summarizer.
func (f *fixture) summarize(t *testing.T, cardID, markdown string) map[string]any {
	t.Helper()
	task, as := f.inRun(t, cardID)
	return ok(t, f.h.Do("PUT", "/api/status-cards/"+cardID+"/summary", map[string]any{"markdown": markdown,
		"changeSummary": "summarized", "generationIssueId": task, "model": "test-model"}, as...), http.StatusOK)
}

// activeCard creates a card with a policy, compiles it and writes its first summary.
func (f *fixture) activeCard(t *testing.T, policy map[string]any) string {
	t.Helper()
	body := map[string]any{"interestPrompt": "What is going on?"}
	if policy != nil {
		body["refreshPolicy"] = policy
	}
	id := f.create(t, body)["id"].(string)
	task, as := f.compile(t, id)
	c := ok(t, f.h.Do("PUT", "/api/status-cards/"+id+"/summary", map[string]any{"markdown": "# First", "changeSummary": "first",
		"generationIssueId": task}, as...), http.StatusOK)
	require.Equal(t, "active", c["state"])
	return id
}

// tickResult is the output of statuscards.tick.
type tickResult struct {
	Evaluated []struct {
		CardID  string `json:"cardId"`
		Outcome string `json:"outcome"`
		State   string `json:"state"`
		Kind    string `json:"kind"`
		Changes int    `json:"changes"`
		Error   string `json:"error"`
	} `json:"evaluated"`
}

// tickIn evaluates one company's due cards at now through statuscards.tick, as the kernel
// would, and returns the outcome for one card ("" when it was not due). Tests sharing a
// host tick their own company only.
func tickIn(t testing.TB, h *sdktest.Host, now time.Time, companyID, cardID string) string {
	t.Helper()
	out, err := tickRaw(h, now, companyID, cardID)
	require.NoError(t, err)
	return out
}

// tickRaw is tickIn answering an error instead of failing the test (for goroutines).
func tickRaw(h *sdktest.Host, now time.Time, companyID, cardID string) (string, error) {
	in, err := json.Marshal(map[string]string{"now": now.UTC().Format(time.RFC3339Nano), "companyId": companyID})
	if err != nil {
		return "", err
	}
	res, err := h.Supervisor.Invoke(context.Background(), "kernel", &hostv1.InvokeRequest{
		Method: "statuscards.tick", InputJson: in, Actor: sdk.SystemActor()})
	if err != nil {
		return "", err
	}
	if res.Error != nil {
		return "", fmt.Errorf("statuscards.tick: %v", res.Error)
	}
	var out tickResult
	if err := json.Unmarshal(res.OutputJson, &out); err != nil {
		return "", err
	}
	for _, e := range out.Evaluated {
		if e.CardID == cardID {
			if e.Error != "" {
				return "", fmt.Errorf("evaluating card %s: %s", cardID, e.Error)
			}
			return e.Outcome, nil
		}
	}
	return "", nil
}

// ok requires a status and decodes an object.
func ok(t testing.TB, res *sdktest.Response, want int) map[string]any {
	t.Helper()
	require.Equal(t, want, res.Status, "%s", res.Body)
	return res.Map(t)
}

// list decodes an array answer (200 required).
func list(t testing.TB, res *sdktest.Response) []map[string]any {
	t.Helper()
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var out []map[string]any
	res.JSON(t, &out)
	return out
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

// ts parses an RFC 3339 time.
func ts(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// nextEvalAt reads a card's nextEvalAt.
func (f *fixture) nextEvalAt(t *testing.T, id string) time.Time {
	t.Helper()
	s, _ := f.card(t, id)["nextEvalAt"].(string)
	require.NotEmpty(t, s, "card %s has a nextEvalAt", id)
	return ts(s)
}

// newUUID returns a random UUID.
func newUUID(t testing.TB) string {
	t.Helper()
	return uuid.NewString()
}
