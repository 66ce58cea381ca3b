package agents_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	_ "github.com/keelhq/keel/extensions/secrets"
	"github.com/keelhq/keel/sdktest"
)

// TestGrantedSecretsThroughRun walks the granted-secret routes with the secrets extension
// loaded: an agent in a live run lists its granted secrets and reads a granted value (no-store,
// audited in the activity log, never in its details); an ungranted alias is forbidden; the
// value is encrypted at rest.
func TestGrantedSecretsThroughRun(t *testing.T) {
	t.Parallel()
	h := startAgents(t)
	company := h.CreateCompany("Granted Secrets")
	agent := createAgent(t, h, company, map[string]any{"name": "Sleeper", "role": "engineer", "adapterType": "process",
		"adapterConfig": map[string]any{"command": "/bin/sh", "args": []string{"-c", "sleep 30"}, "timeoutSec": 60, "graceSec": 1}})
	agentID := agent["id"].(string)
	key := agentKey(t, h, agentID)

	const plaintext = "sk-test-granted-0123456789"
	res := h.Do("POST", "/api/companies/"+company+"/secrets", map[string]any{"name": "Provider key", "key": "PROVIDER_KEY", "value": plaintext})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	secretID := res.Map(t)["id"].(string)
	res = h.Do("POST", "/api/companies/"+company+"/secrets", map[string]any{"name": "Other", "key": "OTHER_KEY", "value": "not-for-you"})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	res = h.Do("POST", "/api/secrets/"+secretID+"/bindings", map[string]any{"targetType": "agent", "targetId": agentID})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)

	res = h.Do("POST", "/api/agents/"+agentID+"/wakeup", map[string]any{"source": "on_demand"})
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
	runID := res.Map(t)["id"].(string)
	sdktest.WaitFor(t, 30*time.Second, func() bool {
		return h.Do("GET", "/api/heartbeat-runs/"+runID, nil).Map(t)["status"] == "running"
	}, "the run to be running")
	inRun := append(append([]string{}, key...), "X-Service-Run-Id", runID)

	res = h.Do("GET", "/api/agents/me/secrets", nil, inRun...)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var listed struct {
		Secrets []map[string]any `json:"secrets"`
	}
	res.JSON(t, &listed)
	require.Len(t, listed.Secrets, 1)
	require.Equal(t, "PROVIDER_KEY", listed.Secrets[0]["key"])
	require.NotContains(t, string(res.Body), plaintext)

	res = h.Do("POST", "/api/agents/me/secrets/PROVIDER_KEY/value", nil, inRun...)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, "no-store", res.Header.Get("Cache-Control"))
	require.Equal(t, plaintext, res.Map(t)["value"])

	res = h.Do("POST", "/api/agents/me/secrets/OTHER_KEY/value", nil, inRun...)
	require.Equal(t, http.StatusForbidden, res.Status, "an ungranted alias: %s", res.Body)

	res = h.Do("POST", "/api/agents/"+agentID+"/keys", map[string]any{"name": "skill test", "scope": map[string]any{"kind": "skill_test"}})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	lowTrust := []string{"Authorization", "Bearer " + res.Map(t)["token"].(string), "X-Service-Run-Id", runID}
	res = h.Do("POST", "/api/agents/me/secrets/PROVIDER_KEY/value", nil, lowTrust...)
	require.Equal(t, http.StatusForbidden, res.Status, "a low-trust (skill_test) token: %s", res.Body)

	var entries []map[string]any
	h.Do("GET", "/api/companies/"+company+"/activity?limit=200", nil).JSON(t, &entries)
	var sawRead bool
	for _, e := range entries {
		sawRead = sawRead || e["action"] == "secret.value_read"
	}
	require.True(t, sawRead, "the value read is in the activity log")
	var trail strings.Builder
	rows, err := h.Kernel.Pool.Query(t.Context(), `SELECT details::text FROM kernel.activity_log`)
	require.NoError(t, err)
	for rows.Next() {
		var d string
		require.NoError(t, rows.Scan(&d))
		trail.WriteString(d)
	}
	require.NotContains(t, trail.String(), plaintext, "no secret value in activity details")

	var material string
	require.NoError(t, h.Kernel.Pool.QueryRow(t.Context(), `SELECT string_agg(material::text, '') FROM ext_secrets.company_secret_versions`).Scan(&material))
	require.NotContains(t, material, plaintext, "encrypted at rest")

	require.Equal(t, http.StatusOK, h.Do("POST", "/api/heartbeat-runs/"+runID+"/cancel", nil).Status)
}

// TestGrantedSecretsFromAdapterConfigEnv checks the reference behaviour that a secret bound
// in the agent's adapterConfig.env as a secret_ref is a granted secret: listed under the
// secret's key (not the env name) and readable by the agent's runs, without an explicit
// binding; a secret of the company that the config does not name stays refused.
func TestGrantedSecretsFromAdapterConfigEnv(t *testing.T) {
	t.Parallel()
	h := startAgents(t)
	company := h.CreateCompany("Config Secrets")
	const plaintext = "sk-config-bound-0123456789"
	res := h.Do("POST", "/api/companies/"+company+"/secrets", map[string]any{"name": "Config key", "key": "CONFIG_KEY", "value": plaintext})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	secretID := res.Map(t)["id"].(string)
	res = h.Do("POST", "/api/companies/"+company+"/secrets", map[string]any{"name": "Unbound", "key": "UNBOUND_KEY", "value": "nope"})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)

	agent := createAgent(t, h, company, map[string]any{"name": "Configured", "role": "engineer", "adapterType": "process",
		"adapterConfig": map[string]any{"command": "/bin/sh", "args": []string{"-c", "sleep 30"}, "timeoutSec": 60, "graceSec": 1,
			"env": map[string]any{
				"MY_TOKEN": map[string]any{"type": "secret_ref", "secretId": secretID, "version": "latest"},
				"PLAIN":    "not a secret",
			}}})
	agentID := agent["id"].(string)
	key := agentKey(t, h, agentID)

	res = h.Do("POST", "/api/agents/"+agentID+"/wakeup", map[string]any{"source": "on_demand"})
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
	runID := res.Map(t)["id"].(string)
	sdktest.WaitFor(t, 30*time.Second, func() bool {
		return h.Do("GET", "/api/heartbeat-runs/"+runID, nil).Map(t)["status"] == "running"
	}, "the run to be running")
	inRun := append(append([]string{}, key...), "X-Service-Run-Id", runID)

	res = h.Do("GET", "/api/agents/me/secrets", nil, inRun...)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var listed struct {
		Secrets []map[string]any `json:"secrets"`
	}
	res.JSON(t, &listed)
	require.Len(t, listed.Secrets, 1, "%s", res.Body)
	require.Equal(t, "CONFIG_KEY", listed.Secrets[0]["key"])
	require.Equal(t, "env", listed.Secrets[0]["delivery"])
	require.Equal(t, "latest", listed.Secrets[0]["versionSelector"])
	require.NotContains(t, string(res.Body), plaintext)

	res = h.Do("POST", "/api/agents/me/secrets/CONFIG_KEY/value", nil, inRun...)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, plaintext, res.Map(t)["value"])
	res = h.Do("POST", "/api/agents/me/secrets/UNBOUND_KEY/value", nil, inRun...)
	require.Equal(t, http.StatusForbidden, res.Status, "a secret the config does not name: %s", res.Body)

	require.Equal(t, http.StatusOK, h.Do("POST", "/api/heartbeat-runs/"+runID+"/cancel", nil).Status)
}

// TestRunLogsRedactSecrets runs an agent that prints the secret its env resolved: neither
// its log nor its result shows the value.
func TestRunLogsRedactSecrets(t *testing.T) {
	t.Parallel()
	h := startAgents(t)
	company := h.CreateCompany("Redaction Co")
	const value = "sk-live-redact-me-0123456789"
	res := h.Do("POST", "/api/companies/"+company+"/secrets", map[string]any{"name": "Provider key", "key": "PROVIDER", "value": value})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	secretID := res.Map(t)["id"].(string)
	agent := createAgent(t, h, company, map[string]any{"name": "Leaky", "role": "engineer", "adapterType": "process",
		"adapterConfig": map[string]any{"command": "/bin/sh", "args": []string{"-c", `echo "token=$TOKEN"; echo "err $TOKEN" >&2`},
			"env": map[string]any{"TOKEN": map[string]any{"type": "secret_ref", "secretId": secretID}}}})
	res = h.Do("POST", "/api/agents/"+agent["id"].(string)+"/wakeup", map[string]any{"source": "on_demand"})
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
	runID := res.Map(t)["id"].(string)
	var run map[string]any
	sdktest.WaitFor(t, 60*time.Second, func() bool {
		run = h.Do("GET", "/api/heartbeat-runs/"+runID, nil).Map(t)
		return run["status"] == "succeeded" || run["status"] == "failed"
	}, "the run to finish")
	require.Equal(t, "succeeded", run["status"], "%v", run)
	logRes := h.Do("GET", "/api/heartbeat-runs/"+runID+"/log", nil)
	require.Equal(t, http.StatusOK, logRes.Status, "%s", logRes.Body)
	for name, body := range map[string]string{"log": string(logRes.Body), "run": string(h.Do("GET", "/api/heartbeat-runs/"+runID, nil).Body),
		"events": string(h.Do("GET", "/api/heartbeat-runs/"+runID+"/events", nil).Body)} {
		require.NotContains(t, body, value, name)
	}
	require.Contains(t, string(logRes.Body), "token=***REDACTED***")
}
