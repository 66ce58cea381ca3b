package e2e_test

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/adapters/localcli/clitest"
	"github.com/keelhq/keel/sdktest"
)

// cliCase is one adapter type's end-to-end run.
type cliCase struct {
	typ string
	// fake is the fake CLI, relative to adapters/.
	fake string
	// config is extra adapterConfig.
	config map[string]any
	// usage is the usage the fake's ok scenario reports.
	inputTokens, outputTokens, cachedInputTokens float64
	// resumeArgs returns the arguments that resume a session in the run log.
	resumeArgs func(session string) string
}

var cases = []cliCase{
	{typ: "alpha_local", fake: "alpha_local/testdata/claude", inputTokens: 210, outputTokens: 13, cachedInputTokens: 1500,
		resumeArgs: func(s string) string { return "[--resume] [" + s + "]" }},
	{typ: "beta_local", fake: "beta_local/testdata/codex", inputTokens: 24763, outputTokens: 122, cachedInputTokens: 24448,
		resumeArgs: func(s string) string { return "[resume] [" + s + "] [-]" }},
	{typ: "gamma_local", fake: "gamma_local/testdata/gemini", inputTokens: 5100, outputTokens: 130, cachedInputTokens: 2048,
		resumeArgs: func(s string) string { return "[--resume] [" + s + "]" }},
	{typ: "delta_local", fake: "delta_local/testdata/opencode", config: map[string]any{"model": "openai/gpt-5.4"}, inputTokens: 3200, outputTokens: 120, cachedInputTokens: 1024,
		resumeArgs: func(s string) string { return "[--session] [" + s + "]" }},
	{typ: "eta", fake: "eta/testdata/agent", inputTokens: 4100, outputTokens: 75, cachedInputTokens: 3000,
		resumeArgs: func(s string) string { return "[--resume] [" + s + "]" }},
	{typ: "epsilon_local", fake: "epsilon_local/testdata/pi", config: map[string]any{"model": "xai/grok-4"}, inputTokens: 2100, outputTokens: 64, cachedInputTokens: 512,
		resumeArgs: func(s string) string { return "[--session] [" + s + "]" }},
	{typ: "zeta_local", fake: "zeta_local/testdata/hermes", inputTokens: 1850, outputTokens: 210, cachedInputTokens: 0,
		resumeArgs: func(s string) string { return "[--resume] [" + s + "]" }},
}

func TestEndToEnd(t *testing.T) {
	t.Parallel()
	h := sdktest.Start(t, sdktest.Options{Builtins: true})
	for _, tc := range cases {
		t.Run(tc.typ, func(t *testing.T) {
			t.Parallel()
			runEndToEnd(t, h, tc)
		})
	}
}

// runEndToEnd assigns an issue to an agent of the case's type and comments on it: the
// first run reports usage and a session, the second resumes that session.
func runEndToEnd(t *testing.T, h *sdktest.Host, tc cliCase) {
	company := h.CreateCompany("E2E " + tc.typ)
	fake, err := filepath.Abs(filepath.Join("..", "..", tc.fake))
	require.NoError(t, err)
	// Each agent's CLI gets a HOME of its own (session files, skills).
	config := map[string]any{"command": fake, "timeoutSec": 120, "env": map[string]any{"HOME": clitest.OpenDir(t)}}
	for k, v := range tc.config {
		config[k] = v
	}
	res := h.Do("POST", "/api/companies/"+company+"/agents", map[string]any{
		"name": "Agent " + tc.typ, "role": "engineer", "adapterType": tc.typ, "adapterConfig": config})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	agentID := res.Map(t)["id"].(string)

	res = h.Do("POST", "/api/companies/"+company+"/issues", map[string]any{"title": "Ship " + tc.typ, "assigneeAgentId": agentID})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	issueID := res.Map(t)["id"].(string)

	first := waitRuns(t, h, company, agentID, 1)[0]
	require.Equal(t, "succeeded", first["status"], "%v", first)
	usage, _ := first["usageJson"].(map[string]any)
	require.NotNil(t, usage, "the run reports usage: %v", first)
	require.Equal(t, tc.inputTokens, usage["inputTokens"])
	require.Equal(t, tc.outputTokens, usage["outputTokens"])
	require.Equal(t, tc.cachedInputTokens, usage["cachedInputTokens"])
	session, _ := first["sessionIdAfter"].(string)
	require.NotEmpty(t, session, "the run reports a session: %v", first)
	log := runLog(t, h, first["id"].(string))
	require.Contains(t, log, "[service] "+fake, "the run log names the command line")
	// The CLI's output parsed into run events.
	var events []map[string]any
	h.Do("GET", "/api/heartbeat-runs/"+first["id"].(string)+"/events?limit=500", nil).JSON(t, &events)
	parsed := map[string]bool{}
	for _, ev := range events {
		if p, ok := ev["payload"].(map[string]any); ok && ev["eventType"] == "event" {
			parsed[fmt.Sprint(p["type"])] = true
		}
	}
	require.True(t, parsed["assistant"], "an assistant message among the run's events: %v", events)
	env := fakeEnv(log)
	// The run-context environment, variable by variable (REFERENCE.md 3 step 5).
	require.Equal(t, agentID, env["SERVICE_AGENT_ID"])
	require.Equal(t, company, env["SERVICE_COMPANY_ID"])
	require.Equal(t, first["id"], env["SERVICE_RUN_ID"])
	require.NotEmpty(t, env["SERVICE_API_KEY"], "the run's JWT")
	require.True(t, strings.HasPrefix(env["SERVICE_API_URL"], "http://"), "%q", env["SERVICE_API_URL"])
	require.False(t, strings.HasSuffix(env["SERVICE_API_URL"], "/api"), "no /api suffix: %q", env["SERVICE_API_URL"])
	require.Equal(t, issueID, env["SERVICE_TASK_ID"])
	require.Equal(t, "issue_assigned", env["SERVICE_WAKE_REASON"])
	require.Contains(t, env["SERVICE_WAKE_PAYLOAD_JSON"], issueID)
	// The issue has no project workspace: the run works in the agent's own directory, and
	// the workspace variables say so (REFERENCE.md 3 steps 4 and 5).
	require.Equal(t, "agent_home", env["SERVICE_WORKSPACE_SOURCE"])
	require.Equal(t, fakeCwd(log), env["SERVICE_WORKSPACE_CWD"])
	require.True(t, strings.HasSuffix(env["SERVICE_WORKSPACE_CWD"], "/"+agentID), "%q", env["SERVICE_WORKSPACE_CWD"])
	for _, k := range []string{"SERVICE_WORKSPACE_STRATEGY", "SERVICE_WORKSPACE_ID", "SERVICE_WORKSPACE_BRANCH", "SERVICE_WORKSPACE_WORKTREE_PATH"} {
		require.NotContains(t, env, k, "no project workspace, no %s", k)
	}

	res = h.Do("POST", "/api/issues/"+issueID+"/comments", map[string]any{"body": "One more thing."})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	second := waitRuns(t, h, company, agentID, 2)[0]
	require.Equal(t, "succeeded", second["status"], "%v", second)
	require.Equal(t, session, second["sessionIdBefore"], "the next run of the issue starts from its session")
	log = runLog(t, h, second["id"].(string))
	require.Contains(t, log, tc.resumeArgs(session), "the CLI was asked to resume the session")
	env = fakeEnv(log)
	require.Equal(t, "issue_commented", env["SERVICE_WAKE_REASON"])
	require.NotEmpty(t, env["SERVICE_WAKE_COMMENT_ID"])

	// The session is kept under the issue, and a reset forgets it.
	var sessions []map[string]any
	h.Do("GET", "/api/agents/"+agentID+"/task-sessions", nil).JSON(t, &sessions)
	require.Len(t, sessions, 1, "%v", sessions)
	require.Equal(t, issueID, sessions[0]["taskKey"])
	require.Equal(t, tc.typ, sessions[0]["adapterType"])
	require.Equal(t, second["sessionIdAfter"], sessions[0]["sessionId"])
	res = h.Do("POST", "/api/agents/"+agentID+"/runtime-state/reset-session", map[string]any{"taskKey": issueID})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, 1.0, res.Map(t)["cleared"])
	h.Do("GET", "/api/agents/"+agentID+"/task-sessions", nil).JSON(t, &sessions)
	require.Empty(t, sessions)
}

// TestAdapterConfigSchemas checks that every local CLI type serves its config schema and
// that agent create and patch refuse an adapterConfig of the wrong shape with a 400 naming
// the field, while an incomplete config is accepted.
func TestAdapterConfigSchemas(t *testing.T) {
	t.Parallel()
	h := sdktest.Start(t, sdktest.Options{Builtins: true})
	company := h.CreateCompany("Schemas Co")
	for _, tc := range cases {
		t.Run(tc.typ, func(t *testing.T) {
			t.Parallel()
			res := h.Do("GET", "/api/adapters/"+tc.typ+"/config-schema", nil)
			require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
			schema, _ := res.Map(t)["adapterConfigSchema"].(map[string]any)
			require.NotNil(t, schema, "%s", res.Body)
			props, _ := schema["properties"].(map[string]any)
			for _, k := range []string{"command", "cwd", "model", "extraArgs", "env", "timeoutSec", "instructionsFilePath", "promptTemplate"} {
				require.Contains(t, props, k)
			}
			res = h.Do("GET", "/api/adapters/"+tc.typ, nil)
			require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)

			res = h.Do("POST", "/api/companies/"+company+"/agents", map[string]any{"name": "Bad " + tc.typ, "role": "engineer",
				"adapterType": tc.typ, "adapterConfig": map[string]any{"extraArgs": "--yolo; rm -rf /", "timeoutSec": -1}})
			require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
			require.Contains(t, string(res.Body), "adapterConfig.extraArgs")
			require.Contains(t, string(res.Body), "adapterConfig.timeoutSec")

			res = h.Do("POST", "/api/companies/"+company+"/agents", map[string]any{"name": "Incomplete " + tc.typ, "role": "engineer",
				"adapterType": tc.typ, "adapterConfig": map[string]any{}})
			require.Equal(t, http.StatusCreated, res.Status, "an incomplete config is accepted: %s", res.Body)
			created := res.Map(t)
			id := created["id"].(string)
			var info struct {
				Models []struct {
					ID string `json:"id"`
				} `json:"models"`
			}
			h.Do("GET", "/api/adapters/"+tc.typ, nil).JSON(t, &info)
			cfg, _ := created["adapterConfig"].(map[string]any)
			switch tc.typ {
			case "gamma_local", "eta", "zeta_local":
				require.Equal(t, "auto", cfg["model"], "the type's default model is filled in on create")
				require.Equal(t, "auto", info.Models[0].ID)
			default:
				require.Nil(t, cfg["model"])
			}
			res = h.Do("PATCH", "/api/agents/"+id, map[string]any{"adapterConfig": map[string]any{"graceSec": "soon"}})
			require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
			require.Contains(t, string(res.Body), "adapterConfig.graceSec")
			res = h.Do("PATCH", "/api/agents/"+id, map[string]any{"adapterConfig": map[string]any{"graceSec": 5, "extraArgs": []string{"--x"}}})
			require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		})
	}
}

// waitRuns waits until the agent has n finished runs and returns them, newest first.
func waitRuns(t *testing.T, h *sdktest.Host, company, agentID string, n int) []map[string]any {
	t.Helper()
	var runs []map[string]any
	sdktest.WaitFor(t, 120*time.Second, func() bool {
		runs = nil
		res := h.Do("GET", "/api/companies/"+company+"/heartbeat-runs?agentId="+agentID, nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		var all []map[string]any
		res.JSON(t, &all)
		for _, r := range all {
			if r["finishedAt"] != nil && r["status"] != "queued" && r["status"] != "running" {
				runs = append(runs, r)
			}
		}
		return len(runs) >= n
	}, fmt.Sprintf("%d finished runs", n))
	return runs
}

func runLog(t *testing.T, h *sdktest.Host, runID string) string {
	t.Helper()
	res := h.Do("GET", "/api/heartbeat-runs/"+runID+"/log", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	return string(res.Body)
}

// fakeCwd reads the "cwd: " line a fake CLI printed into the run log.
func fakeCwd(log string) string {
	for _, line := range strings.Split(log, "\n") {
		if _, v, ok := strings.Cut(line, "cwd: "); ok {
			return v
		}
	}
	return ""
}

// fakeEnv reads the "env: K=V" lines a fake CLI printed into the run log.
func fakeEnv(log string) map[string]string {
	env := map[string]string{}
	for _, line := range strings.Split(log, "\n") {
		_, kv, ok := strings.Cut(line, "env: ")
		if !ok {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	return env
}
