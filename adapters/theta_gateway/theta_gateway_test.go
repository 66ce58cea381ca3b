package thetagateway_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/adapters/conformance"
	thetagateway "github.com/keelhq/keel/adapters/theta_gateway"
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
		Method: adapter.Method(thetagateway.Type, method), InputJson: b, CompanyId: e.company,
		Actor: &extensionv1.Actor{Type: "system"},
	})
	require.NoError(t, err)
	require.Nil(t, res.Error, "%s: %v", method, res.Error)
	require.NoError(t, json.Unmarshal(res.OutputJson, out), "%s", res.OutputJson)
}

const agentID = "00000000-0000-4000-8000-0000000000b2"

func (e *env) execute(t *testing.T, runID string, config map[string]any, rt *adapter.Runtime) *adapter.ExecuteResult {
	t.Helper()
	cfg, err := json.Marshal(config)
	require.NoError(t, err)
	var res adapter.ExecuteResult
	e.invoke(t, adapter.MethodExecute, &adapter.ExecuteRequest{
		RunID: runID, AgentID: agentID, AgentName: "Gateway Gus", CompanyID: e.company, AdapterType: thetagateway.Type,
		Config: cfg, Context: map[string]any{"issueId": "issue-7", "wakeReason": "issue_assigned"}, Runtime: rt,
		Env: map[string]string{"SERVICE_RUN_ID": runID, "SERVICE_AGENT_ID": agentID, "SERVICE_COMPANY_ID": e.company,
			"SERVICE_API_URL": "http://127.0.0.1:3100", "SERVICE_TASK_ID": "issue-7", "SERVICE_WAKE_REASON": "issue_assigned"},
	}, &res)
	return &res
}

// devicePEM returns a fresh Ed25519 key as PKCS#8 PEM and its device id.
func devicePEM(t *testing.T) (string, string) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	require.NoError(t, err)
	sum := sha256.Sum256(pub)
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), hex.EncodeToString(sum[:])
}

func TestThetaGateway(t *testing.T) {
	t.Parallel()
	h := sdktest.Start(t, sdktest.Options{Builtins: true})
	gw := newGatewayServer(t)
	cfg := func(scenario string, extra ...any) map[string]any {
		c := map[string]any{"url": gw.url(scenario), "authToken": "gw-token"}
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
			Type:    thetagateway.Type,
			NewHost: func(*testing.T) *sdktest.Host { return h },
			Succeed: raw(cfg("ok")),
			Fail:    raw(cfg("waiterror")),
			Slow:    raw(cfg("slow")),
		})
	})

	conformance.WarmUp(t, h, thetagateway.Type)
	e := &env{h: h, company: h.CreateCompany("Theta gateway")}

	t.Run("a signed device runs the agent and reports usage and a session", func(t *testing.T) {
		t.Parallel()
		key, deviceID := devicePEM(t)
		runID := uuid.NewString()
		c := cfg("ok", "devicePrivateKeyPem", key, "deviceFamily", "server",
			"payloadTemplate", map[string]any{"text": "dropped", "thinking": "low", "service": map[string]any{"x": 1}})
		res := e.execute(t, runID, c, nil)
		require.Equal(t, adapter.StatusSucceeded, res.Status, "%+v", res)
		require.Equal(t, &adapter.Usage{InputTokens: 900, OutputTokens: 45, CachedInputTokens: 120}, res.Usage)
		require.Equal(t, "anthropic", res.Provider)
		require.Equal(t, "claude-sonnet-4", res.Model)
		require.Equal(t, 0.02, *res.CostUSD)
		require.Equal(t, "Hello from the gateway.", res.Summary, "only this run's deltas")
		require.Equal(t, "service:issue:issue-7", res.SessionID)
		require.JSONEq(t, `{"sessionKey":"service:issue:issue-7","strategy":"issue"}`, string(res.SessionParams))

		seen := gw.run(runID)
		require.Equal(t, "Bearer gw-token", seen.Auth, "the token is sent as a Bearer header in the handshake")
		require.Equal(t, deviceID, seen.DeviceID, "the device id is the sha256 of the configured key's public key")
		require.True(t, seen.SignatureOK, "the v3 device payload is signed")
		client, _ := seen.Connect["client"].(map[string]any)
		require.Equal(t, "gateway-client", client["id"])
		require.Equal(t, "backend", client["mode"])
		require.Equal(t, "server", client["deviceFamily"])
		require.Equal(t, 4.0, seen.Connect["minProtocol"])
		require.Equal(t, "operator", seen.Connect["role"])
		require.Equal(t, []any{"operator.admin"}, seen.Connect["scopes"])
		require.Equal(t, runID, seen.Params["idempotencyKey"])
		require.Equal(t, "service:issue:issue-7", seen.Params["sessionKey"])
		require.Equal(t, "low", seen.Params["thinking"])
		require.NotContains(t, seen.Params, "text")
		require.NotContains(t, seen.Params, "service")
		require.Equal(t, 120000.0, seen.Params["timeout"])
		msg, _ := seen.Params["message"].(string)
		require.Contains(t, msg, "You are Gateway Gus")
		require.Contains(t, msg, "SERVICE_TASK_ID=issue-7")
		require.Contains(t, msg, "Load SERVICE_API_KEY from ~/.openclaw/workspace/service-claimed-api-key.json")

		// The same key signs the next run, which keeps the session.
		next := uuid.NewString()
		res2 := e.execute(t, next, c, &adapter.Runtime{TaskKey: "issue-7", SessionID: res.SessionID, SessionParams: res.SessionParams})
		require.Equal(t, adapter.StatusSucceeded, res2.Status, "%+v", res2)
		require.Equal(t, deviceID, gw.run(next).DeviceID)
		require.Equal(t, res.SessionID, gw.run(next).Params["sessionKey"])
	})

	t.Run("session key strategies", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name  string
			extra []any
			want  func(runID string) string
		}{
			{"issue", nil, func(string) string { return "service:issue:issue-7" }},
			{"run", []any{"sessionKeyStrategy", "run"}, func(r string) string { return "service:run:" + r }},
			{"fixed default", []any{"sessionKeyStrategy", "fixed"}, func(string) string { return "service" }},
			{"fixed", []any{"sessionKeyStrategy", "fixed", "sessionKey", "ops-desk"}, func(string) string { return "ops-desk" }},
			{"agent prefix", []any{"agentId", "main"}, func(string) string { return "agent:main:service:issue:issue-7" }},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				runID := uuid.NewString()
				res := e.execute(t, runID, cfg("ok", append(tc.extra, "disableDeviceAuth", true)...), nil)
				require.Equal(t, adapter.StatusSucceeded, res.Status, "%+v", res)
				seen := gw.run(runID)
				require.Equal(t, tc.want(runID), seen.Params["sessionKey"])
				require.Empty(t, seen.DeviceID, "no device block with device auth disabled")
			})
		}
	})

	t.Run("a dropped first connection is retried", func(t *testing.T) {
		t.Parallel()
		runID := uuid.NewString()
		res := e.execute(t, runID, cfg("flaky"), nil)
		require.Equal(t, adapter.StatusSucceeded, res.Status, "%+v", res)
		require.GreaterOrEqual(t, gw.run(runID).ConnectsTotal, 2)
	})

	t.Run("an unpaired device is approved once", func(t *testing.T) {
		t.Parallel()
		runID := uuid.NewString()
		key, deviceID := devicePEM(t)
		res := e.execute(t, runID, cfg("pair", "devicePrivateKeyPem", key), nil)
		require.Equal(t, adapter.StatusSucceeded, res.Status, "%+v", res)
		require.Equal(t, deviceID, gw.run(runID).DeviceID)
		key2, _ := devicePEM(t)
		res = e.execute(t, uuid.NewString(), cfg("pair", "devicePrivateKeyPem", key2, "autoPairOnFirstConnect", false), nil)
		require.Equal(t, adapter.StatusFailed, res.Status)
		require.Equal(t, "openclaw_gateway_pairing_required", res.ErrorCode)
		require.Contains(t, res.ErrorMessage, "pairing required")
	})

	t.Run("failures are classified", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			scenario string
			extra    []any
			status   string
			code     string
			text     string
		}{
			{"badauth", nil, adapter.StatusFailed, "openclaw_gateway_request_failed", "token mismatch"},
			{"agenterror", nil, adapter.StatusFailed, "openclaw_gateway_agent_error", "agent refused the task"},
			{"lifecycle-error", nil, adapter.StatusFailed, "openclaw_gateway_agent_error", "model crashed"},
			{"waittimeout", nil, adapter.StatusTimedOut, "openclaw_gateway_wait_timeout", "did not finish"},
			{"waiterror", nil, adapter.StatusFailed, "openclaw_gateway_wait_error", "agent crashed"},
			{"slow", []any{"timeoutSec", 2, "waitTimeoutMs", 1000}, adapter.StatusTimedOut, "openclaw_gateway_timeout", "timeout"},
		} {
			t.Run(tc.scenario, func(t *testing.T) {
				t.Parallel()
				res := e.execute(t, uuid.NewString(), cfg(tc.scenario, tc.extra...), nil)
				require.Equal(t, tc.status, res.Status, "%+v", res)
				require.Equal(t, tc.code, res.ErrorCode)
				require.Contains(t, res.ErrorMessage, tc.text)
				require.NotContains(t, res.ErrorMessage, "gw-token")
			})
		}
		res := e.execute(t, uuid.NewString(), map[string]any{"url": "https://gw.example.com"}, nil)
		require.Equal(t, "openclaw_gateway_url_protocol", res.ErrorCode)
	})

	t.Run("testEnvironment probes the handshake", func(t *testing.T) {
		t.Parallel()
		names := func(c map[string]any) (*adapter.TestEnvironmentResult, []string) {
			var out adapter.TestEnvironmentResult
			e.invoke(t, adapter.MethodTestEnvironment, &adapter.TestEnvironmentRequest{CompanyID: e.company, Config: raw(c)}, &out)
			var n []string
			for _, ch := range out.Checks {
				n = append(n, ch.Name)
			}
			return &out, n
		}
		out, n := names(cfg("ok"))
		require.True(t, out.OK, "%+v", out)
		require.Contains(t, n, "openclaw_gateway_probe_ok")
		require.Contains(t, n, "openclaw_gateway_auth_present")
		out, n = names(cfg("badauth"))
		require.Contains(t, n, "openclaw_gateway_probe_challenge_only", "%+v", out)
		out, n = names(map[string]any{"url": "wss://gw.example.com:1", "authToken": "x"})
		_ = out
		require.Contains(t, n, "openclaw_gateway_url_valid")
		out, n = names(map[string]any{"url": "ws://gw.example.com"})
		require.Contains(t, n, "openclaw_gateway_plaintext_remote_ws")
		require.Contains(t, n, "openclaw_gateway_auth_missing")
		out, n = names(map[string]any{"url": "http://gw.example.com"})
		require.False(t, out.OK)
		require.Equal(t, []string{"openclaw_gateway_url_protocol_invalid"}, n)
	})
}
