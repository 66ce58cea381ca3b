package zetagateway_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

// TestEndToEnd assigns an issue to a zeta_gateway agent: its run on the in-test run server
// reports usage and a session, and the run a comment wakes resumes that session. The
// agent's apiKey is kept as a secret reference and never read back.
func TestEndToEnd(t *testing.T) {
	t.Parallel()
	h := sdktest.Start(t, sdktest.Options{Builtins: true})
	srv := newRunServer(t)
	company := h.CreateCompany("Remote Runs Co")

	res := h.Do("GET", "/api/adapters/zeta_gateway", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, true, res.Map(t)["loaded"], "the built-in adapter serves the type: %s", res.Body)
	res = h.Do("GET", "/api/adapters/zeta_gateway/config-schema", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	schema, _ := res.Map(t)["adapterConfigSchema"].(map[string]any)
	props, _ := schema["properties"].(map[string]any)
	for _, k := range []string{"apiBaseUrl", "apiKey", "dangerouslyAllowInsecureRemoteHttp", "sessionKeyStrategy", "timeoutSec", "eventReconnectMs"} {
		require.Contains(t, props, k)
	}
	res = h.Do("POST", "/api/companies/"+company+"/agents", map[string]any{"name": "Bad Remote", "role": "engineer",
		"adapterType": "zeta_gateway", "adapterConfig": map[string]any{"apiBaseUrl": srv.base("ok"), "sessionKeyStrategy": "forever", "timeoutSec": -1}})
	require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
	require.Contains(t, string(res.Body), "adapterConfig.sessionKeyStrategy")
	require.Contains(t, string(res.Body), "adapterConfig.timeoutSec")

	res = h.Do("POST", "/api/companies/"+company+"/agents", map[string]any{"name": "Remote Rita", "role": "engineer",
		"adapterType": "zeta_gateway", "adapterConfig": map[string]any{"apiBaseUrl": srv.base("ok"), "apiKey": "remote-key", "timeoutSec": 120}})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	require.NotContains(t, string(res.Body), "remote-key", "the key is never returned")
	agent := res.Map(t)
	agentID := agent["id"].(string)
	ref, _ := agent["adapterConfig"].(map[string]any)["apiKey"].(map[string]any)
	require.Equal(t, "secret_ref", ref["type"], "apiKey is stored as a secret reference: %v", agent["adapterConfig"])
	require.NotEmpty(t, ref["secretId"])
	res = h.Do("GET", "/api/agents/"+agentID, nil)
	require.NotContains(t, string(res.Body), "remote-key")

	res = h.Do("POST", "/api/companies/"+company+"/issues", map[string]any{"title": "Ship it remotely", "assigneeAgentId": agentID})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	issueID := res.Map(t)["id"].(string)

	first := waitRuns(t, h, company, agentID, 1)[0]
	require.Equal(t, "succeeded", first["status"], "%v", first)
	usage, _ := first["usageJson"].(map[string]any)
	require.NotNil(t, usage, "the run reports usage: %v", first)
	require.Equal(t, 1200.0, usage["inputTokens"])
	require.Equal(t, 80.0, usage["outputTokens"])
	require.Equal(t, 300.0, usage["cachedInputTokens"])
	session, _ := first["sessionIdAfter"].(string)
	require.NotEmpty(t, session, "the run reports a session: %v", first)
	remote := srv.snapshot(first["id"].(string))
	require.Equal(t, "Bearer remote-key", remote.Header.Get("Authorization"), "the secret reference resolved to the key")
	require.Equal(t, "service:company:"+company+":agent:"+agentID+":issue:"+issueID, remote.Header.Get("X-Hermes-Session-Key"))
	log := h.Do("GET", "/api/heartbeat-runs/"+first["id"].(string)+"/log", nil)
	require.Contains(t, string(log.Body), "Hello world.", "the streamed deltas are in the run log")
	require.NotContains(t, string(log.Body), "remote-key")

	res = h.Do("POST", "/api/issues/"+issueID+"/comments", map[string]any{"body": "One more thing."})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	second := waitRuns(t, h, company, agentID, 2)[0]
	require.Equal(t, "succeeded", second["status"], "%v", second)
	require.Equal(t, session, second["sessionIdBefore"], "the next run of the issue starts from its session")
	require.Equal(t, session, srv.snapshot(second["id"].(string)).Body["session_id"], "the run server was asked to resume it")
	require.Equal(t, session, second["sessionIdAfter"])

	// A new key given on patch is moved into a secret of its own as well.
	res = h.Do("PATCH", "/api/agents/"+agentID, map[string]any{"adapterConfig": map[string]any{
		"apiBaseUrl": srv.base("ok"), "apiKey": "rotated-remote-key", "timeoutSec": 120}})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.NotContains(t, string(res.Body), "rotated-remote-key")
	patched, _ := res.Map(t)["adapterConfig"].(map[string]any)["apiKey"].(map[string]any)
	require.Equal(t, "secret_ref", patched["type"], "%s", res.Body)
	require.NotEqual(t, ref["secretId"], patched["secretId"])
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
