package process_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/adapters/conformance"
	"github.com/keelhq/keel/adapters/process"
	"github.com/keelhq/keel/sdk/adapter"
	extensionv1 "github.com/keelhq/keel/sdk/proto/extension/v1"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
	"github.com/keelhq/keel/sdktest"
)

func startHost(t *testing.T) *sdktest.Host {
	t.Helper()
	return sdktest.Start(t, sdktest.Options{Builtins: true})
}

func TestConformance(t *testing.T) {
	t.Parallel()
	conformance.Run(t, conformance.Subject{
		Type:    process.Type,
		NewHost: startHost,
		Succeed: json.RawMessage(`{"command":"sh","args":["-c","echo hello"]}`),
		Fail:    json.RawMessage(`{"command":"sh","args":["-c","echo boom >&2; exit 3"]}`),
		Slow:    json.RawMessage(`{"command":"sleep","args":["60"],"graceSec":2}`),
	})
}

// env is a host shared by the specific tests, with helpers to run the adapter.
type env struct {
	h       *sdktest.Host
	company string
}

func newEnv(t *testing.T) *env {
	h := startHost(t)
	conformance.WarmUp(t, h, process.Type)
	return &env{h: h, company: h.CreateCompany("Process adapter")}
}

func (e *env) invoke(t *testing.T, method string, in, out any) {
	t.Helper()
	b, err := json.Marshal(in)
	require.NoError(t, err)
	res, err := e.h.Supervisor.Invoke(context.Background(), "kernel", &hostv1.InvokeRequest{
		Method: adapter.Method(process.Type, method), InputJson: b, CompanyId: e.company,
		Actor: &extensionv1.Actor{Type: "system"},
	})
	require.NoError(t, err)
	require.Nil(t, res.Error, "%s: %v", method, res.Error)
	require.NoError(t, json.Unmarshal(res.OutputJson, out), "%s", res.OutputJson)
}

func (e *env) execute(t *testing.T, runID string, config any, reqEnv map[string]string) *adapter.ExecuteResult {
	t.Helper()
	cfg, err := json.Marshal(config)
	require.NoError(t, err)
	var res adapter.ExecuteResult
	e.invoke(t, adapter.MethodExecute, &adapter.ExecuteRequest{
		RunID: runID, AgentID: uuid.NewString(), CompanyID: e.company, AdapterType: process.Type,
		Config: cfg, Env: reqEnv,
	}, &res)
	return &res
}

func outputs(t *testing.T, res *adapter.ExecuteResult) (stdout, stderr string) {
	t.Helper()
	var out struct{ Stdout, Stderr string }
	require.NoError(t, json.Unmarshal(res.ResultJSON, &out), "%s", res.ResultJSON)
	return out.Stdout, out.Stderr
}

func alive(pid int) bool {
	// A zombie still answers kill(0); treat it as dead.
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		if f := strings.Fields(string(b)); len(f) > 2 && f[2] == "Z" {
			return false
		}
	}
	return syscall.Kill(pid, 0) == nil
}

func TestProcess(t *testing.T) {
	t.Parallel()
	e := newEnv(t)

	t.Run("exit codes and excerpts", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name, script, status, message string
			code                          int
		}{
			{"zero", "echo out; echo err >&2", adapter.StatusSucceeded, "", 0},
			{"one", "echo out; echo err >&2; exit 1", adapter.StatusFailed, "Process exited with code 1", 1},
			{"forty-two", "echo out; echo err >&2; exit 42", adapter.StatusFailed, "Process exited with code 42", 42},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				res := e.execute(t, uuid.NewString(), map[string]any{"command": "sh", "args": []string{"-c", tc.script}}, nil)
				require.Equal(t, tc.status, res.Status)
				require.Equal(t, tc.message, res.ErrorMessage)
				require.NotNil(t, res.ExitCode)
				require.Equal(t, tc.code, *res.ExitCode)
				require.Positive(t, res.PID)
				stdout, stderr := outputs(t, res)
				require.Equal(t, "out\n", stdout)
				require.Equal(t, "err\n", stderr)
			})
		}
	})

	t.Run("the command reports usage and cost in the report file", func(t *testing.T) {
		t.Parallel()
		script := `printf '%s' '{"usage":{"inputTokens":1200,"outputTokens":300,"cachedInputTokens":100},"provider":"anthropic",` +
			`"model":"m-large","costUsd":0.42,"sessionId":"sess-9"}' > "$SERVICE_RUN_REPORT_FILE"`
		res := e.execute(t, uuid.NewString(), map[string]any{"command": "sh", "args": []string{"-c", script}}, nil)
		require.Equal(t, adapter.StatusSucceeded, res.Status)
		require.Equal(t, &adapter.Usage{InputTokens: 1200, OutputTokens: 300, CachedInputTokens: 100}, res.Usage)
		require.Equal(t, "anthropic", res.Provider)
		require.Equal(t, "m-large", res.Model)
		require.Equal(t, 0.42, *res.CostUSD)
		require.Equal(t, "sess-9", res.SessionID)

		// A broken report is ignored, and the run still succeeds.
		res = e.execute(t, uuid.NewString(), map[string]any{"command": "sh", "args": []string{"-c",
			`echo 'not json' > "$SERVICE_RUN_REPORT_FILE"`}}, nil)
		require.Equal(t, adapter.StatusSucceeded, res.Status)
		require.Nil(t, res.Usage)
	})

	t.Run("excerpt keeps the last 64 KiB", func(t *testing.T) {
		t.Parallel()
		// 200,000 bytes of numbered lines; the excerpt is the tail.
		res := e.execute(t, uuid.NewString(), map[string]any{"command": "sh", "args": []string{"-c",
			`i=0; while [ $i -lt 20000 ]; do printf '%09d\n' $i; i=$((i+1)); done`}}, nil)
		require.Equal(t, adapter.StatusSucceeded, res.Status)
		stdout, _ := outputs(t, res)
		require.Len(t, stdout, 64<<10)
		require.True(t, strings.HasSuffix(stdout, "000019999\n"))
	})

	t.Run("missing command", func(t *testing.T) {
		t.Parallel()
		res := e.execute(t, uuid.NewString(), map[string]any{"args": []string{"x"}}, nil)
		require.Equal(t, adapter.StatusFailed, res.Status)
		require.Equal(t, "Process adapter missing command", res.ErrorMessage)
	})

	t.Run("command not found", func(t *testing.T) {
		t.Parallel()
		res := e.execute(t, uuid.NewString(), map[string]any{"command": "keel-no-such-command"}, nil)
		require.Equal(t, adapter.StatusFailed, res.Status)
		require.Contains(t, res.ErrorMessage, "keel-no-such-command")
	})

	t.Run("cwd", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		res := e.execute(t, uuid.NewString(), map[string]any{"command": "pwd", "cwd": dir}, nil)
		require.Equal(t, adapter.StatusSucceeded, res.Status)
		stdout, _ := outputs(t, res)
		want, err := filepath.EvalSymlinks(dir)
		require.NoError(t, err)
		require.Equal(t, want+"\n", stdout)

		res = e.execute(t, uuid.NewString(), map[string]any{"command": "pwd"}, nil)
		require.Equal(t, adapter.StatusSucceeded, res.Status)
		stdout, _ = outputs(t, res)
		require.Contains(t, stdout, filepath.Join("extensions", process.Key, "workspaces"), "the default cwd is a per-agent dir under the data dir")

		res = e.execute(t, uuid.NewString(), map[string]any{"command": "pwd", "cwd": filepath.Join(dir, "missing")}, nil)
		require.Equal(t, adapter.StatusFailed, res.Status)
		require.Contains(t, res.ErrorMessage, "is not an existing directory")
	})

	t.Run("environment", func(t *testing.T) {
		t.Parallel()
		runID := uuid.NewString()
		res := e.execute(t, runID, map[string]any{
			"command": "sh", "args": []string{"-c", "env"},
			"env": map[string]any{"SERVICE_RUN_ID": "from-config", "FROM_CONFIG": "c", "BOTH": "config",
				"SECRET_BINDING": map[string]any{"type": "plain", "value": "resolved"}},
		}, map[string]string{"SERVICE_RUN_ID": runID, "SERVICE_API_KEY": "jwt", "BOTH": "request"})
		require.Equal(t, adapter.StatusSucceeded, res.Status, "%+v", res)
		stdout, _ := outputs(t, res)
		vars := map[string]string{}
		for _, line := range strings.Split(stdout, "\n") {
			if k, v, ok := strings.Cut(line, "="); ok {
				vars[k] = v
			}
		}
		require.Equal(t, runID, vars["SERVICE_RUN_ID"], "the request's SERVICE_* win over config env")
		require.Equal(t, "jwt", vars["SERVICE_API_KEY"])
		require.Equal(t, "c", vars["FROM_CONFIG"])
		require.Equal(t, "request", vars["BOTH"])
		require.Equal(t, "resolved", vars["SECRET_BINDING"])
		require.NotContains(t, vars, "KEEL_EXTENSION_ROLE", "the extension's launch variables do not leak")
	})

	t.Run("timeout kills the whole tree", func(t *testing.T) {
		t.Parallel()
		pidFile := filepath.Join(t.TempDir(), "child.pid")
		start := time.Now()
		res := e.execute(t, uuid.NewString(), map[string]any{
			"command": "sh", "args": []string{"-c", `sleep 300 & echo $! > "$1"; echo started; wait`, "sh", pidFile},
			"timeoutSec": 1, "graceSec": 1,
		}, nil)
		require.Equal(t, adapter.StatusTimedOut, res.Status, "%+v", res)
		require.True(t, res.TimedOut)
		require.Equal(t, "timeout", res.ErrorCode)
		require.Less(t, time.Since(start), 10*time.Second)
		stdout, _ := outputs(t, res)
		require.Equal(t, "started\n", stdout)
		b, err := os.ReadFile(pidFile)
		require.NoError(t, err)
		child, err := strconv.Atoi(strings.TrimSpace(string(b)))
		require.NoError(t, err)
		sdktest.WaitFor(t, 5*time.Second, func() bool { return !alive(res.PID) && !alive(child) }, "the run's process tree to be gone")
	})

	t.Run("grace period is honoured", func(t *testing.T) {
		t.Parallel()
		// The script traps TERM, takes a moment to clean up, and exits on its own within the grace.
		res := e.execute(t, uuid.NewString(), map[string]any{
			"command": "sh", "args": []string{"-c", `trap 'echo cleaning; sleep 0.5; echo cleaned; exit 0' TERM; echo ready; while :; do sleep 0.1; done`},
			"timeoutSec": 1, "graceSec": 10,
		}, nil)
		require.Equal(t, adapter.StatusTimedOut, res.Status)
		stdout, _ := outputs(t, res)
		require.Equal(t, "ready\ncleaning\ncleaned\n", stdout)
		require.NotNil(t, res.ExitCode, "the process exited by itself: %+v", res)
		require.Zero(t, *res.ExitCode)
	})

	t.Run("SIGKILL after the grace period", func(t *testing.T) {
		t.Parallel()
		start := time.Now()
		res := e.execute(t, uuid.NewString(), map[string]any{
			"command": "sh", "args": []string{"-c", `trap '' TERM; echo ready; while :; do sleep 0.1; done`},
			"timeoutSec": 1, "graceSec": 1,
		}, nil)
		elapsed := time.Since(start)
		require.Equal(t, adapter.StatusTimedOut, res.Status)
		require.Equal(t, "SIGKILL", res.Signal)
		require.Nil(t, res.ExitCode)
		require.GreaterOrEqual(t, elapsed, 2*time.Second, "SIGKILL waits for the grace")
		require.Less(t, elapsed, 10*time.Second)
	})

	t.Run("cancel", func(t *testing.T) {
		t.Parallel()
		runID := uuid.NewString()
		done := make(chan *adapter.ExecuteResult, 1)
		go func() {
			done <- e.execute(t, runID, map[string]any{"command": "sh", "args": []string{"-c", "echo started; sleep 300"}}, nil)
		}()
		sdktest.WaitFor(t, 10*time.Second, func() bool {
			var out adapter.CancelResult
			e.invoke(t, adapter.MethodCancel, &adapter.CancelRequest{RunID: runID}, &out)
			return out.Cancelled
		}, "the run to be cancellable")
		select {
		case res := <-done:
			require.Equal(t, adapter.StatusCancelled, res.Status)
			require.Equal(t, "SIGTERM", res.Signal)
			require.False(t, alive(res.PID))
		case <-time.After(10 * time.Second):
			t.Fatal("cancelled run did not return")
		}
		var out adapter.CancelResult
		e.invoke(t, adapter.MethodCancel, &adapter.CancelRequest{RunID: runID}, &out)
		require.False(t, out.Cancelled, "a finished run is no longer cancellable")
	})

	t.Run("testEnvironment", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name   string
			config string
			ok     bool
		}{
			{"resolves", `{"command":"sh"}`, true},
			{"absolute", `{"command":"/bin/sh","cwd":"/"}`, true},
			{"missing command", `{"command":"keel-no-such-command"}`, false},
			{"missing cwd", `{"command":"sh","cwd":"/keel/no/such/dir"}`, false},
			{"no command", `{}`, false},
		} {
			var res adapter.TestEnvironmentResult
			e.invoke(t, adapter.MethodTestEnvironment, &adapter.TestEnvironmentRequest{Config: json.RawMessage(tc.config)}, &res)
			require.Equal(t, tc.ok, res.OK, "%s: %+v", tc.name, res)
		}
	})

	t.Run("info", func(t *testing.T) {
		t.Parallel()
		var info adapter.Info
		e.invoke(t, adapter.MethodInfo, struct{}{}, &info)
		require.True(t, info.SupportsLocalAgentJWT)
	})
}
