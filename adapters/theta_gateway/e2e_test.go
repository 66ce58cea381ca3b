package thetagateway_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

// TestEndToEnd assigns an issue to a theta_gateway agent: the agent gets a generated
// device key kept as a secret reference (never read back), its run on the in-test gateway
// is signed with that key and reports usage and a session, and the run a comment wakes
// resumes the session, signed by the same device.
func TestEndToEnd(t *testing.T) {
	t.Parallel()
	h := sdktest.Start(t, sdktest.Options{Builtins: true})
	gw := newGatewayServer(t)
	company := h.CreateCompany("Gateway Co")

	res := h.Do("GET", "/api/adapters/theta_gateway", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, true, res.Map(t)["loaded"], "the built-in adapter serves the type: %s", res.Body)
	res = h.Do("GET", "/api/adapters/theta_gateway/config-schema", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	schema, _ := res.Map(t)["adapterConfigSchema"].(map[string]any)
	props, _ := schema["properties"].(map[string]any)
	for _, k := range []string{"url", "authToken", "devicePrivateKeyPem", "disableDeviceAuth", "sessionKeyStrategy", "waitTimeoutMs"} {
		require.Contains(t, props, k)
	}
	res = h.Do("POST", "/api/companies/"+company+"/agents", map[string]any{"name": "Bad Gateway", "role": "engineer",
		"adapterType": "theta_gateway", "adapterConfig": map[string]any{"url": gw.url("ok"), "sessionKeyStrategy": "agent", "scopes": 5}})
	require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
	require.Contains(t, string(res.Body), "adapterConfig.sessionKeyStrategy")

	// The gateway token is a company secret the config references.
	res = h.Do("POST", "/api/companies/"+company+"/secrets", map[string]any{"name": "Gateway token", "value": "gw-token"})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	tokenID := res.Map(t)["id"].(string)

	res = h.Do("POST", "/api/companies/"+company+"/agents", map[string]any{"name": "Gateway Gus", "role": "engineer",
		"adapterType": "theta_gateway", "adapterConfig": map[string]any{"url": gw.url("ok"), "timeoutSec": 60,
			"authToken": map[string]any{"type": "secret_ref", "secretId": tokenID, "version": "latest"}}})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	require.NotContains(t, string(res.Body), "PRIVATE KEY", "the device key is never returned")
	agent := res.Map(t)
	agentID := agent["id"].(string)
	ref, _ := agent["adapterConfig"].(map[string]any)["devicePrivateKeyPem"].(map[string]any)
	require.Equal(t, "secret_ref", ref["type"], "the generated device key is a secret reference: %v", agent["adapterConfig"])

	res = h.Do("POST", "/api/companies/"+company+"/issues", map[string]any{"title": "Ship it through the gateway", "assigneeAgentId": agentID})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	issueID := res.Map(t)["id"].(string)

	first := waitRuns(t, h, company, agentID, 1)[0]
	require.Equal(t, "succeeded", first["status"], "%v", first)
	usage, _ := first["usageJson"].(map[string]any)
	require.NotNil(t, usage, "the run reports usage: %v", first)
	require.Equal(t, 900.0, usage["inputTokens"])
	require.Equal(t, 45.0, usage["outputTokens"])
	require.Equal(t, 120.0, usage["cachedInputTokens"])
	session, _ := first["sessionIdAfter"].(string)
	require.Equal(t, "service:issue:"+issueID, session, "the run reports its session: %v", first)
	seen := gw.run(first["id"].(string))
	require.True(t, seen.SignatureOK, "the run is signed with the agent's device key")
	require.NotEmpty(t, seen.DeviceID)
	require.Equal(t, "Bearer gw-token", seen.Auth, "the token reference resolved")
	log := h.Do("GET", "/api/heartbeat-runs/"+first["id"].(string)+"/log", nil)
	require.Contains(t, string(log.Body), "Hello from the gateway.")
	require.NotContains(t, string(log.Body), "gw-token")

	res = h.Do("POST", "/api/issues/"+issueID+"/comments", map[string]any{"body": "One more thing."})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	second := waitRuns(t, h, company, agentID, 2)[0]
	require.Equal(t, "succeeded", second["status"], "%v", second)
	require.Equal(t, session, second["sessionIdBefore"], "the next run of the issue starts from its session")
	again := gw.run(second["id"].(string))
	require.Equal(t, session, again.Params["sessionKey"], "the gateway was asked for the same session")
	require.Equal(t, seen.DeviceID, again.DeviceID, "the stored device key signs every run")
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
