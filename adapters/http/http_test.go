package httpadapter_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/adapters/conformance"
	httpadapter "github.com/keelhq/keel/adapters/http"
	"github.com/keelhq/keel/sdk/adapter"
	extensionv1 "github.com/keelhq/keel/sdk/proto/extension/v1"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
	"github.com/keelhq/keel/sdktest"
)

func startHost(t *testing.T) *sdktest.Host {
	t.Helper()
	return sdktest.Start(t, sdktest.Options{Builtins: true})
}

// received is one request the test server saw.
type received struct {
	Method string
	Path   string
	Header http.Header
	Body   map[string]any
}

// agentServer is a remote agent: /ok answers 202, /fail 500, /slow waits for the client to
// go away; every request is recorded.
type agentServer struct {
	*httptest.Server
	mu   sync.Mutex
	seen []received
}

func newAgentServer(t *testing.T) *agentServer {
	s := &agentServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rec := received{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone()}
		_ = json.Unmarshal(b, &rec.Body)
		s.mu.Lock()
		s.seen = append(s.seen, rec)
		s.mu.Unlock()
		switch r.URL.Path {
		case "/ok":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusAccepted)
			_, _ = w.Write([]byte(`{"accepted":true}`))
		case "/report":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"ok":true,"usage":{"inputTokens":50,"outputTokens":7},"provider":"openai","model":"m-small",` +
				`"cacheAdjustedCostUsd":0.031}`))
		case "/fail":
			http.Error(w, "agent is down", http.StatusInternalServerError)
		case "/slow":
			select {
			case <-r.Context().Done():
			case <-time.After(time.Minute):
			}
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *agentServer) find(runID string) *received {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.seen {
		if s.seen[i].Body["runId"] == runID {
			return &s.seen[i]
		}
	}
	return nil
}

func TestConformance(t *testing.T) {
	t.Parallel()
	srv := newAgentServer(t)
	conformance.Run(t, conformance.Subject{
		Type:    httpadapter.Type,
		NewHost: startHost,
		Succeed: json.RawMessage(fmt.Sprintf(`{"url":%q}`, srv.URL+"/ok")),
		Fail:    json.RawMessage(fmt.Sprintf(`{"url":%q}`, srv.URL+"/fail")),
		Slow:    json.RawMessage(fmt.Sprintf(`{"url":%q}`, srv.URL+"/slow")),
	})
}

type env struct {
	h       *sdktest.Host
	company string
}

func (e *env) invoke(t *testing.T, method string, in, out any) {
	t.Helper()
	b, err := json.Marshal(in)
	require.NoError(t, err)
	res, err := e.h.Supervisor.Invoke(context.Background(), "kernel", &hostv1.InvokeRequest{
		Method: adapter.Method(httpadapter.Type, method), InputJson: b, CompanyId: e.company,
		Actor: &extensionv1.Actor{Type: "system"},
	})
	require.NoError(t, err)
	require.Nil(t, res.Error, "%s: %v", method, res.Error)
	require.NoError(t, json.Unmarshal(res.OutputJson, out), "%s", res.OutputJson)
}

func (e *env) execute(t *testing.T, runID string, config any, wake map[string]any) *adapter.ExecuteResult {
	t.Helper()
	cfg, err := json.Marshal(config)
	require.NoError(t, err)
	var res adapter.ExecuteResult
	e.invoke(t, adapter.MethodExecute, &adapter.ExecuteRequest{
		RunID: runID, AgentID: "agent-1", CompanyID: e.company, AdapterType: httpadapter.Type,
		Config: cfg, Context: wake,
	}, &res)
	return &res
}

func TestHTTP(t *testing.T) {
	t.Parallel()
	h := startHost(t)
	conformance.WarmUp(t, h, httpadapter.Type)
	e := &env{h: h, company: h.CreateCompany("HTTP adapter")}
	srv := newAgentServer(t)

	t.Run("body, headers and summary", func(t *testing.T) {
		t.Parallel()
		runID := uuid.NewString()
		res := e.execute(t, runID, map[string]any{
			"url": srv.URL + "/ok", "headers": map[string]string{"Authorization": "Bearer remote", "X-Extra": "1"},
			"payloadTemplate": map[string]any{"kind": "heartbeat", "runId": "overridden"},
		}, map[string]any{"issueId": "i-1", "wakeReason": "assignment"})
		require.Equal(t, adapter.StatusSucceeded, res.Status, "%+v", res)
		require.NotNil(t, res.ExitCode)
		require.Zero(t, *res.ExitCode)
		require.Equal(t, "HTTP POST "+srv.URL+"/ok", res.Summary)
		require.JSONEq(t, `{"status":202,"body":{"accepted":true}}`, string(res.ResultJSON))
		got := srv.find(runID)
		require.NotNil(t, got, "the agent saw the run")
		require.Equal(t, http.MethodPost, got.Method)
		require.Equal(t, "application/json", got.Header.Get("Content-Type"))
		require.Equal(t, "Bearer remote", got.Header.Get("Authorization"))
		require.Equal(t, "1", got.Header.Get("X-Extra"))
		require.Equal(t, map[string]any{
			"kind": "heartbeat", "agentId": "agent-1", "runId": runID,
			"context": map[string]any{"issueId": "i-1", "wakeReason": "assignment"},
		}, got.Body)
	})

	t.Run("method", func(t *testing.T) {
		t.Parallel()
		runID := uuid.NewString()
		res := e.execute(t, runID, map[string]any{"url": srv.URL + "/ok", "method": "put"}, nil)
		require.Equal(t, adapter.StatusSucceeded, res.Status)
		require.Equal(t, "HTTP PUT "+srv.URL+"/ok", res.Summary)
		got := srv.find(runID)
		require.NotNil(t, got)
		require.Equal(t, http.MethodPut, got.Method)
		require.Equal(t, map[string]any{}, got.Body["context"], "context is always an object")
	})

	t.Run("a JSON answer reports usage and cost", func(t *testing.T) {
		t.Parallel()
		res := e.execute(t, uuid.NewString(), map[string]any{"url": srv.URL + "/report"}, nil)
		require.Equal(t, adapter.StatusSucceeded, res.Status)
		require.Equal(t, &adapter.Usage{InputTokens: 50, OutputTokens: 7}, res.Usage)
		require.Equal(t, "openai", res.Provider)
		require.Equal(t, "m-small", res.Model)
		require.Equal(t, 0.031, *res.CacheAdjustedCostUSD)
		res = e.execute(t, uuid.NewString(), map[string]any{"url": srv.URL + "/ok"}, nil)
		require.Nil(t, res.Usage, "an answer without report fields reports nothing")
	})

	t.Run("non-2xx", func(t *testing.T) {
		t.Parallel()
		for _, path := range []string{"/fail", "/missing"} {
			res := e.execute(t, uuid.NewString(), map[string]any{"url": srv.URL + path}, nil)
			require.Equal(t, adapter.StatusFailed, res.Status)
			want := map[string]int{"/fail": 500, "/missing": 404}[path]
			require.Equal(t, fmt.Sprintf("HTTP invoke failed with status %d", want), res.ErrorMessage)
		}
	})

	t.Run("unreachable", func(t *testing.T) {
		t.Parallel()
		closed := httptest.NewServer(http.NotFoundHandler())
		closed.Close()
		res := e.execute(t, uuid.NewString(), map[string]any{"url": closed.URL}, nil)
		require.Equal(t, adapter.StatusFailed, res.Status)
		require.Contains(t, res.ErrorMessage, "HTTP invoke failed")
	})

	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		for _, cfg := range []map[string]any{
			{"url": srv.URL + "/slow", "timeoutMs": 300},
			{"url": srv.URL + "/slow", "timeoutSec": 0.3},
		} {
			start := time.Now()
			res := e.execute(t, uuid.NewString(), cfg, nil)
			require.Equal(t, adapter.StatusTimedOut, res.Status, "%+v", res)
			require.True(t, res.TimedOut)
			require.Equal(t, "timeout", res.ErrorCode)
			require.Less(t, time.Since(start), 5*time.Second)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		t.Parallel()
		runID := uuid.NewString()
		done := make(chan *adapter.ExecuteResult, 1)
		go func() { done <- e.execute(t, runID, map[string]any{"url": srv.URL + "/slow"}, nil) }()
		sdktest.WaitFor(t, 10*time.Second, func() bool {
			var out adapter.CancelResult
			e.invoke(t, adapter.MethodCancel, &adapter.CancelRequest{RunID: runID}, &out)
			return out.Cancelled
		}, "the request to be in flight")
		select {
		case res := <-done:
			require.Equal(t, adapter.StatusCancelled, res.Status)
		case <-time.After(10 * time.Second):
			t.Fatal("cancelled run did not return")
		}
	})

	t.Run("bad configs", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			config any
			msg    string
		}{
			{map[string]any{}, "HTTP adapter missing url"},
			{map[string]any{"url": "ftp://x"}, "must be an absolute http or https URL"},
			{map[string]any{"url": "/relative"}, "must be an absolute http or https URL"},
			{map[string]any{"url": 5}, "Invalid HTTP adapter config"},
		} {
			res := e.execute(t, uuid.NewString(), tc.config, nil)
			require.Equal(t, adapter.StatusFailed, res.Status)
			require.Contains(t, res.ErrorMessage, tc.msg)
		}
	})

	t.Run("testEnvironment and info", func(t *testing.T) {
		t.Parallel()
		var res adapter.TestEnvironmentResult
		e.invoke(t, adapter.MethodTestEnvironment, &adapter.TestEnvironmentRequest{Config: json.RawMessage(`{"url":"https://agent.example/run"}`)}, &res)
		require.True(t, res.OK)
		e.invoke(t, adapter.MethodTestEnvironment, &adapter.TestEnvironmentRequest{Config: json.RawMessage(`{"url":"nope"}`)}, &res)
		require.False(t, res.OK)
		var info adapter.Info
		e.invoke(t, adapter.MethodInfo, struct{}{}, &info)
		require.False(t, info.SupportsLocalAgentJWT)
	})
}
