package agents_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

func TestExecutorEnvAndConfig(t *testing.T) {
	t.Parallel()
	h := startAgents(t)
	company := h.CreateCompany("Env Co")
	ag := hbAgent(t, h, company, "Envy", "fake", map[string]any{"env": map[string]any{
		"PLAIN": "one", "TYPED": map[string]any{"type": "plain", "value": "two"}, "SERVICE_API_KEY": "sneaky",
	}}, nil)
	issue, comment, approval := uuid.NewString(), uuid.NewString(), uuid.NewString()
	run := wake(t, h, ag.ID, map[string]any{"source": "automation", "reason": "issue_commented", "payload": map[string]any{
		"issueId": issue, "commentId": comment, "approvalId": approval, "approvalStatus": "approved",
		"linkedIssueIds": []string{issue, "x"},
	}})
	done := waitRun(t, h, run["id"].(string), 20*time.Second, "succeeded", "failed")
	require.Equal(t, "succeeded", done["status"], "%v", done)
	echo := done["resultJson"].(map[string]any)
	env := echo["env"].(map[string]any)
	require.Equal(t, ag.ID, env["SERVICE_AGENT_ID"])
	require.Equal(t, company, env["SERVICE_COMPANY_ID"])
	require.Equal(t, run["id"], env["SERVICE_RUN_ID"])
	require.Equal(t, h.URL, env["SERVICE_API_URL"])
	require.False(t, strings.HasSuffix(env["SERVICE_API_URL"].(string), "/api"))
	require.Equal(t, issue, env["SERVICE_TASK_ID"])
	require.Equal(t, "issue_commented", env["SERVICE_WAKE_REASON"])
	require.Equal(t, comment, env["SERVICE_WAKE_COMMENT_ID"])
	require.Equal(t, approval, env["SERVICE_APPROVAL_ID"])
	require.Equal(t, "approved", env["SERVICE_APPROVAL_STATUS"])
	require.Equal(t, issue+",x", env["SERVICE_LINKED_ISSUE_IDS"])
	require.Contains(t, env["SERVICE_WAKE_PAYLOAD_JSON"], comment)
	require.Equal(t, true, echo["authToken"])
	require.Equal(t, "Envy", echo["agentName"])

	// SERVICE_API_KEY is the run's JWT, for this agent and run.
	claims := jwt.MapClaims{}
	_, _, err := jwt.NewParser().ParseUnverified(env["SERVICE_API_KEY"].(string), claims)
	require.NoError(t, err)
	require.Equal(t, ag.ID, claims["sub"])
	require.Equal(t, run["id"], claims["run_id"])
	require.Equal(t, "fake", claims["adapter_type"])

	// Config env is resolved to plain strings; SERVICE_API_KEY from config is dropped.
	cfgEnv := echo["config"].(map[string]any)["env"].(map[string]any)
	require.Equal(t, map[string]any{"PLAIN": "one", "TYPED": "two"}, cfgEnv)

	// The JWT works against the API in the run's context.
	res := h.Do("POST", "/api/agents/"+ag.ID+"/wakeup", nil, "Authorization", "Bearer "+env["SERVICE_API_KEY"].(string),
		"X-Service-Run-Id", run["id"].(string))
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
}

func TestExecutorFailures(t *testing.T) {
	t.Parallel()
	h := startAgents(t)
	company := h.CreateCompany("Fail Co")
	cases := []struct {
		name, adapterType string
		config            map[string]any
		wantCode, wantErr string
	}{
		{"non-zero exit", "fake", map[string]any{"exitCode": 3}, "", "Process exited with code 3"},
		{"unresolvable secret ref", "fake", map[string]any{"env": map[string]any{
			"TOKEN": map[string]any{"type": "secret_ref", "secretId": uuid.NewString()}}}, "secret_resolution_failed", "TOKEN"},
		{"adapter not installed", "nonexistent", nil, "adapter_not_found", "Adapter nonexistent is not installed"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ag := hbAgent(t, h, company, fmt.Sprintf("Failer %d", i), tc.adapterType, tc.config, nil)
			run := wake(t, h, ag.ID, nil)
			done := waitRun(t, h, run["id"].(string), 20*time.Second, "failed", "succeeded")
			require.Equal(t, "failed", done["status"])
			require.Contains(t, done["error"], tc.wantErr)
			if tc.wantCode != "" {
				require.Equal(t, tc.wantCode, done["errorCode"])
			}
			sdktest.WaitFor(t, 5*time.Second, func() bool {
				return dbString(t, h, `SELECT status FROM kernel.agents WHERE id = $1`, ag.ID) == "error"
			}, "agent in error")
		})
	}
	t.Run("an agent without configuration fails its run", func(t *testing.T) {
		ag := h.CreateAgent(company, "Unconfigured", "general")
		run := wake(t, h, ag.ID, nil)
		done := waitRun(t, h, run["id"].(string), 20*time.Second, "failed")
		require.Equal(t, "agent_not_configured", done["errorCode"])
	})
}

func TestExecutorBilling(t *testing.T) {
	t.Parallel()
	h := startAgents(t)
	company := h.CreateCompany("Bill Co")
	usage := map[string]any{"inputTokens": 1000, "outputTokens": 200, "cachedInputTokens": 50}
	cases := []struct {
		name       string
		config     map[string]any
		wantNull   bool
		wantCents  float64
		wantStatus string
		wantType   string
	}{
		{"no usage no cost", map[string]any{}, true, 0, "", ""},
		{"cache adjusted wins", map[string]any{"usage": usage, "costUsd": 0.5, "cacheAdjustedCostUsd": 0.123, "billingType": "api",
			"provider": "anthropic", "model": "m1"}, false, 12, "reported", "metered_api"},
		{"cost alone", map[string]any{"usage": usage, "costUsd": 0.255, "provider": "openai"}, false, 26, "reported", "unknown"},
		{"subscription is free", map[string]any{"usage": usage, "costUsd": 2.0, "billingType": "subscription"}, false, 0, "reported", "subscription_included"},
		{"tokens without price", map[string]any{"usage": usage, "billingType": "metered_api"}, false, 0, "unpriced", "metered_api"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ag := hbAgent(t, h, company, fmt.Sprintf("Biller %d", i), "fake", tc.config, nil)
			run := wake(t, h, ag.ID, nil)
			done := waitRun(t, h, run["id"].(string), 20*time.Second, "succeeded")
			if tc.wantNull {
				require.Nil(t, done["usageJson"])
				return
			}
			u := done["usageJson"].(map[string]any)
			require.EqualValues(t, tc.wantCents, u["costCents"])
			require.Equal(t, tc.wantStatus, u["costStatus"])
			require.Equal(t, tc.wantType, u["billingType"])
			require.EqualValues(t, 1000, u["inputTokens"])
			require.EqualValues(t, 200, u["outputTokens"])
			require.EqualValues(t, 50, u["cachedInputTokens"])
		})
	}
}

// TestProcessAdapterEndToEnd runs real process agents: output and SERVICE_RUN_ID, the
// timeout, and cancel killing the whole process tree.
func TestProcessAdapterEndToEnd(t *testing.T) {
	t.Parallel()
	h := startAgents(t)
	company := h.CreateCompany("Proc Co")

	t.Run("echoes output and reads SERVICE_RUN_ID", func(t *testing.T) {
		ag := hbAgent(t, h, company, "Echoer", "process", map[string]any{"command": "/bin/sh",
			"args": []string{"-c", `echo "run=$SERVICE_RUN_ID agent=$SERVICE_AGENT_ID"; echo oops >&2`}}, nil)
		run := wake(t, h, ag.ID, nil)
		runID := run["id"].(string)
		done := waitRun(t, h, runID, 30*time.Second, "succeeded", "failed")
		require.Equal(t, "succeeded", done["status"], "%v", done)
		require.EqualValues(t, 0, done["exitCode"])
		res := h.Do("GET", "/api/heartbeat-runs/"+runID+"/log", nil)
		require.Contains(t, string(res.Body), "run="+runID+" agent="+ag.ID)
		require.Contains(t, string(res.Body), "oops")
		require.NotNil(t, done["processPid"])
	})

	t.Run("times out", func(t *testing.T) {
		ag := hbAgent(t, h, company, "Slowpoke", "process", map[string]any{"command": "/bin/sh",
			"args": []string{"-c", "sleep 30"}, "timeoutSec": 1, "graceSec": 1}, nil)
		run := wake(t, h, ag.ID, nil)
		done := waitRun(t, h, run["id"].(string), 20*time.Second, "timed_out", "failed", "succeeded")
		require.Equal(t, "timed_out", done["status"], "%v", done)
	})

	t.Run("cancel kills the process tree", func(t *testing.T) {
		ag := hbAgent(t, h, company, "Forker", "process", map[string]any{"command": "/bin/sh",
			"args": []string{"-c", `sleep 60 & echo "child=$!"; wait`}}, nil)
		run := wake(t, h, ag.ID, nil)
		runID := run["id"].(string)
		waitRun(t, h, runID, 20*time.Second, "running")
		var child int
		sdktest.WaitFor(t, 10*time.Second, func() bool {
			body := string(h.Do("GET", "/api/heartbeat-runs/"+runID+"/log", nil).Body)
			i := strings.Index(body, "child=")
			if i < 0 {
				return false
			}
			rest := body[i+len("child="):]
			if j := strings.IndexByte(rest, '\n'); j > 0 {
				child, _ = strconv.Atoi(rest[:j])
			}
			return child > 0
		}, "child pid in the log")
		require.NoError(t, syscall.Kill(child, 0))
		res := h.Do("POST", "/api/heartbeat-runs/"+runID+"/cancel", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		done := waitRun(t, h, runID, 20*time.Second, "cancelled")
		require.Equal(t, "cancelled", done["status"])
		sdktest.WaitFor(t, 20*time.Second, func() bool { return syscall.Kill(child, 0) != nil }, "child process to be killed")
	})
}
