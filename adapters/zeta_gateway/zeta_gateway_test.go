package zetagateway_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/adapters/conformance"
	zetagateway "github.com/keelhq/keel/adapters/zeta_gateway"
	"github.com/keelhq/keel/sdk/adapter"
	extensionv1 "github.com/keelhq/keel/sdk/proto/extension/v1"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
	"github.com/keelhq/keel/sdktest"
)

// env calls the adapter through a real host, as the heartbeat engine does.
type env struct {
	h       *sdktest.Host
	company string
}

func (e *env) invoke(t *testing.T, method string, in, out any) {
	t.Helper()
	b, err := json.Marshal(in)
	require.NoError(t, err)
	res, err := e.h.Supervisor.Invoke(context.Background(), "kernel", &hostv1.InvokeRequest{
		Method: adapter.Method(zetagateway.Type, method), InputJson: b, CompanyId: e.company,
		Actor: &extensionv1.Actor{Type: "system"},
	})
	require.NoError(t, err)
	require.Nil(t, res.Error, "%s: %v", method, res.Error)
	require.NoError(t, json.Unmarshal(res.OutputJson, out), "%s", res.OutputJson)
}

const agentID = "00000000-0000-4000-8000-0000000000a1"

func (e *env) execute(t *testing.T, runID string, config map[string]any, wake map[string]any, rt *adapter.Runtime) *adapter.ExecuteResult {
	t.Helper()
	cfg, err := json.Marshal(config)
	require.NoError(t, err)
	var res adapter.ExecuteResult
	e.invoke(t, adapter.MethodExecute, &adapter.ExecuteRequest{
		RunID: runID, AgentID: agentID, AgentName: "Remote Rita", CompanyID: e.company, AdapterType: zetagateway.Type,
		Config: cfg, Context: wake, Runtime: rt,
		Env: map[string]string{"SERVICE_RUN_ID": runID, "SERVICE_AGENT_ID": agentID, "SERVICE_COMPANY_ID": e.company,
			"SERVICE_API_URL": "http://127.0.0.1:3100", "SERVICE_TASK_ID": "issue-1", "SERVICE_WAKE_REASON": "issue_assigned"},
	}, &res)
	return &res
}

func TestZetaGateway(t *testing.T) {
	t.Parallel()
	h := sdktest.Start(t, sdktest.Options{Builtins: true})
	srv := newRunServer(t)
	cfg := func(scenario string, extra ...any) map[string]any {
		c := map[string]any{"apiBaseUrl": srv.base(scenario), "apiKey": "remote-key"}
		for i := 0; i+1 < len(extra); i += 2 {
			c[extra[i].(string)] = extra[i+1]
		}
		return c
	}
	raw := func(c map[string]any) json.RawMessage {
		b, _ := json.Marshal(c)
		return b
	}

	t.Run("conformance", func(t *testing.T) {
		conformance.Run(t, conformance.Subject{
			Type:    zetagateway.Type,
			NewHost: func(*testing.T) *sdktest.Host { return h },
			Succeed: raw(cfg("ok")),
			Fail:    raw(cfg("status-failed")),
			Slow:    raw(cfg("slow")),
		})
	})

	conformance.WarmUp(t, h, zetagateway.Type)
	e := &env{h: h, company: h.CreateCompany("Zeta gateway")}

	t.Run("a run streams, reports usage and a session, and the next run resumes it", func(t *testing.T) {
		t.Parallel()
		runID := uuid.NewString()
		c := cfg("ok", "headers", map[string]any{"X-Extra": "1", "Authorization": "Bearer stolen", "idempotency-key": "mine"},
			"payloadTemplate", map[string]any{"metadata": map[string]any{"team": "core"}})
		res := e.execute(t, runID, c, map[string]any{"issueId": "issue-1", "wakeReason": "issue_assigned"}, nil)
		require.Equal(t, adapter.StatusSucceeded, res.Status, "%+v", res)
		require.Zero(t, *res.ExitCode)
		require.Equal(t, &adapter.Usage{InputTokens: 1200, OutputTokens: 80, CachedInputTokens: 300}, res.Usage)
		require.Equal(t, 0.0125, *res.CostUSD)
		require.Equal(t, "hermes-4-405b", res.Model)
		require.Equal(t, "hermes_gateway", res.Provider)
		require.Equal(t, "All done.", res.Summary)
		got := srv.snapshot(runID)
		require.Equal(t, "sess-"+got.ID, res.SessionID)
		require.JSONEq(t, `{"hermesRunId":"`+got.ID+`","hermesSessionId":"sess-`+got.ID+`","strategy":"issue"}`, string(res.SessionParams))
		var result map[string]any
		require.NoError(t, json.Unmarshal(res.ResultJSON, &result))
		require.Equal(t, got.ID, result["run_id"])
		require.Equal(t, "completed", result["status"])
		require.Equal(t, "run.completed", result["last_event"])

		// The generated headers win over config headers; extra ones pass.
		key := "service:company:" + e.company + ":agent:" + agentID + ":issue:issue-1"
		require.Equal(t, "Bearer remote-key", got.Header.Get("Authorization"))
		require.Equal(t, runID, got.Header.Get("Idempotency-Key"))
		require.Equal(t, key, got.Header.Get("X-Hermes-Session-Key"))
		require.Equal(t, "application/json", got.Header.Get("Accept"))
		require.Equal(t, "application/json", got.Header.Get("Content-Type"))
		require.Equal(t, "1", got.Header.Get("X-Extra"))
		require.Equal(t, key, got.Body["session_id"])
		require.Equal(t, map[string]any{"team": "core"}, got.Body["metadata"])
		input, _ := got.Body["input"].(string)
		require.Contains(t, input, "You are Remote Rita")
		require.Contains(t, input, "SERVICE_TASK_ID=issue-1")
		require.Contains(t, input, "Structured wake payload JSON:")
		require.Contains(t, got.Body["instructions"], "Do not expose secrets")

		// The next run of the task resumes the session the server reported.
		next := uuid.NewString()
		res2 := e.execute(t, next, c, map[string]any{"issueId": "issue-1"}, &adapter.Runtime{TaskKey: "issue-1", SessionID: res.SessionID, SessionParams: res.SessionParams})
		require.Equal(t, adapter.StatusSucceeded, res2.Status, "%+v", res2)
		require.Equal(t, res.SessionID, srv.snapshot(next).Body["session_id"], "the second run asks for the first run's session")
		require.Equal(t, res.SessionID, res2.SessionID)
	})

	t.Run("the stream drops mid-run and is reconnected", func(t *testing.T) {
		t.Parallel()
		runID := uuid.NewString()
		res := e.execute(t, runID, cfg("drop", "eventReconnectMs", 300, "pollIntervalMs", 10000), nil, nil)
		require.Equal(t, adapter.StatusSucceeded, res.Status, "%+v", res)
		got := srv.snapshot(runID)
		require.GreaterOrEqual(t, got.Streams, 2, "the stream was reconnected")
		require.Equal(t, "1", got.LastEventIDs[1], "the reconnect resumes after the last event seen")
		require.Equal(t, "All done.", res.Summary)
		require.NotNil(t, res.Usage)
	})

	t.Run("polling finishes a run whose stream never answers", func(t *testing.T) {
		t.Parallel()
		runID := uuid.NewString()
		res := e.execute(t, runID, cfg("poll", "eventReconnectMs", 250, "pollIntervalMs", 250), nil, nil)
		require.Equal(t, adapter.StatusSucceeded, res.Status, "%+v", res)
		require.Equal(t, int64(1200), res.Usage.InputTokens)
		got := srv.snapshot(runID)
		require.GreaterOrEqual(t, got.Polls, 3)
		require.GreaterOrEqual(t, got.Streams, 1)
	})

	t.Run("a slow run times out and is stopped", func(t *testing.T) {
		t.Parallel()
		runID := uuid.NewString()
		res := e.execute(t, runID, cfg("slow", "timeoutSec", 3, "sessionKeyStrategy", "run"), nil, nil)
		require.Equal(t, adapter.StatusTimedOut, res.Status, "%+v", res)
		require.True(t, res.TimedOut)
		require.Equal(t, "hermes_gateway_timeout", res.ErrorCode)
		got := srv.snapshot(runID)
		require.Equal(t, 1, got.Stops, "POST /v1/runs/{id}/stop on timeout")
		require.Equal(t, "Bearer remote-key", got.StopHeader.Get("Authorization"))
		require.Equal(t, "service:run:"+runID, got.Header.Get("X-Hermes-Session-Key"))
		var result map[string]any
		require.NoError(t, json.Unmarshal(res.ResultJSON, &result))
		require.Equal(t, "stopped", result["final_status"])
		require.Equal(t, got.ID, result["run_id"])
	})

	t.Run("each terminal state", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct{ status, want, code, signal string }{
			{"completed", adapter.StatusSucceeded, "", ""},
			{"failed", adapter.StatusFailed, "hermes_gateway_run_failed", ""},
			{"error", adapter.StatusFailed, "hermes_gateway_run_failed", ""},
			{"cancelled", adapter.StatusFailed, "hermes_gateway_cancelled", "SIGTERM"},
			{"canceled", adapter.StatusFailed, "hermes_gateway_cancelled", "SIGTERM"},
			{"stopped", adapter.StatusFailed, "hermes_gateway_cancelled", "SIGTERM"},
			{"interrupted", adapter.StatusFailed, "hermes_gateway_cancelled", "SIGTERM"},
		} {
			t.Run(tc.status, func(t *testing.T) {
				t.Parallel()
				res := e.execute(t, uuid.NewString(), cfg("status-"+tc.status, "sessionKeyStrategy", "none"), nil, nil)
				require.Equal(t, tc.want, res.Status, "%+v", res)
				require.Equal(t, tc.code, res.ErrorCode)
				require.Equal(t, tc.signal, res.Signal)
				require.Equal(t, &adapter.Usage{InputTokens: 10, OutputTokens: 2}, res.Usage)
				if tc.want == adapter.StatusFailed {
					require.Equal(t, "remote said "+tc.status, res.ErrorMessage)
				}
			})
		}
	})

	t.Run("refused requests are classified", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			scenario, code, text string
			key                  string
		}{
			{"ok", "hermes_gateway_auth_failed", "API_SERVER_KEY", "wrong-key"},
			{"http-404", "hermes_gateway_runs_unsupported", "HTTP 404", ""},
			{"http-429", "hermes_gateway_rate_limited", "retry after 30", ""},
			{"http-502", "hermes_gateway_upstream_error", "HTTP 502", ""},
			{"http-400", "hermes_gateway_protocol_error", "HTTP 400", ""},
			{"noid", "hermes_gateway_protocol_error", "no run_id", ""},
		} {
			c := cfg(tc.scenario)
			if tc.key != "" {
				c["apiKey"] = tc.key
			}
			res := e.execute(t, uuid.NewString(), c, nil, nil)
			require.Equal(t, adapter.StatusFailed, res.Status, "%s: %+v", tc.scenario, res)
			require.Equal(t, tc.code, res.ErrorCode, "%s", tc.scenario)
			require.Contains(t, res.ErrorMessage, tc.text, "%s", tc.scenario)
			require.NotContains(t, res.ErrorMessage, "wrong-key", "the key is never echoed")
		}
		closed := newRunServer(t)
		closed.Close()
		res := e.execute(t, uuid.NewString(), map[string]any{"apiBaseUrl": closed.URL, "apiKey": "remote-key"}, nil, nil)
		require.Equal(t, "hermes_gateway_connect_failed", res.ErrorCode, "%+v", res)
	})

	t.Run("plain HTTP to a remote host is refused", func(t *testing.T) {
		t.Parallel()
		res := e.execute(t, uuid.NewString(), map[string]any{"apiBaseUrl": "http://runs.example.com:8642", "apiKey": "k"}, nil, nil)
		require.Equal(t, adapter.StatusFailed, res.Status)
		require.Equal(t, "hermes_gateway_plain_http_remote_denied", res.ErrorCode)
		require.Contains(t, res.ErrorMessage, "dangerouslyAllowInsecureRemoteHttp")
		var env adapter.TestEnvironmentResult
		e.invoke(t, adapter.MethodTestEnvironment, &adapter.TestEnvironmentRequest{CompanyID: e.company,
			Config: raw(map[string]any{"apiBaseUrl": "http://runs.example.com:8642", "apiKey": "k"})}, &env)
		require.False(t, env.OK)
		require.Equal(t, "hermes_gateway_plain_http_remote_denied", env.Checks[0].Name)
	})

	t.Run("testEnvironment probes health", func(t *testing.T) {
		t.Parallel()
		var env adapter.TestEnvironmentResult
		e.invoke(t, adapter.MethodTestEnvironment, &adapter.TestEnvironmentRequest{CompanyID: e.company, Config: raw(cfg("ok"))}, &env)
		require.True(t, env.OK, "%+v", env)
		names := []string{}
		for _, c := range env.Checks {
			names = append(names, c.Name)
		}
		require.Contains(t, names, "hermes_gateway_loopback_http_allowed")
		require.Contains(t, names, "hermes_gateway_health_ok")
	})
}

func TestParseConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, url, base, code string
		allow, mapped         bool
	}{
		{name: "https", url: "https://runs.example.com/api/", base: "https://runs.example.com/api"},
		{name: "dashboard root", url: "http://127.0.0.1:9119/", base: "http://127.0.0.1:9119/api", mapped: true},
		{name: "chat URL", url: "https://hermes.example.com:9119/chat", base: "https://hermes.example.com:9119/api", mapped: true},
		{name: "other path on the dashboard port", url: "https://hermes.example.com:9119/v2", base: "https://hermes.example.com:9119/v2"},
		{name: "loopback http", url: "http://localhost:8642", base: "http://localhost:8642"},
		{name: "ipv6 loopback", url: "http://[::1]:8642", base: "http://[::1]:8642"},
		{name: "remote http", url: "http://10.0.0.5:8642", code: "hermes_gateway_plain_http_remote_denied"},
		{name: "remote http allowed", url: "http://10.0.0.5:8642", base: "http://10.0.0.5:8642", allow: true},
		{name: "ftp", url: "ftp://runs.example.com", code: "hermes_gateway_api_base_url_invalid"},
		{name: "missing", url: "", code: "hermes_gateway_api_base_url_missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, _ := json.Marshal(map[string]any{"apiBaseUrl": tc.url, "apiKey": "k", "dangerouslyAllowInsecureRemoteHttp": tc.allow})
			c, err := zetagateway.ParseConfig(b)
			if tc.code != "" {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.base, c.BaseURL)
			require.Equal(t, tc.mapped, c.DashboardMapped)
			require.Equal(t, 600.0, c.Timeout.Seconds())
			require.Equal(t, 2000.0, float64(c.Reconnect.Milliseconds()))
			require.Equal(t, "issue", c.SessionKeyStrategy)
		})
	}
	c, err := zetagateway.ParseConfig(json.RawMessage(`{"url":"https://x.example.com","token":{"type":"secret_ref","secretId":"s-1","version":"latest"},` +
		`"eventReconnectMs":5,"headers":"{\"Accept\":\"text/html\",\"X-Team\":\"core\"}"}`))
	require.NoError(t, err)
	require.True(t, c.APIKey.IsRef())
	require.Equal(t, 250.0, float64(c.Reconnect.Milliseconds()), "eventReconnectMs is clamped")
	require.Equal(t, map[string]string{"X-Team": "core"}, c.Headers)
	require.Equal(t, []string{"Accept"}, c.IgnoredHeaders)
	_, err = zetagateway.ParseConfig(json.RawMessage(`{"apiBaseUrl":"https://x.example.com"}`))
	require.ErrorContains(t, err, "apiKey")
	_, err = zetagateway.ParseConfig(json.RawMessage(`{"apiBaseUrl":"https://x.example.com","apiKey":"k","sessionKeyStrategy":"forever"}`))
	require.ErrorContains(t, err, "sessionKeyStrategy")
	require.False(t, strings.Contains(zetagateway.ConfigSchema, "\t"))
}
