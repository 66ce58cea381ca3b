// Package clitest helps the CLI adapters' tests: it reaches an adapter through a real host,
// runs it against a recorded-output fake CLI, and reads back what the fake reported.
package clitest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/adapters/conformance"
	"github.com/keelhq/keel/sdk/adapter"
	extensionv1 "github.com/keelhq/keel/sdk/proto/extension/v1"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
	"github.com/keelhq/keel/sdktest"
)

// Fake returns the absolute path of a fake CLI under the calling test's testdata.
func Fake(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", name))
	require.NoError(t, err)
	return p
}

// Config returns an adapterConfig running the fake CLI at path in a scenario (FAKE_SCENARIO),
// with extra keys.
func Config(path, scenario string, extra map[string]any) json.RawMessage {
	c := map[string]any{"command": path}
	if scenario != "" {
		c["env"] = map[string]any{"FAKE_SCENARIO": scenario}
	}
	for k, v := range extra {
		if env, ok := v.(map[string]any); ok && k == "env" && c["env"] != nil {
			merged := map[string]any{}
			for ek, ev := range c["env"].(map[string]any) {
				merged[ek] = ev
			}
			for ek, ev := range env {
				merged[ek] = ev
			}
			v = merged
		}
		c[k] = v
	}
	b, _ := json.Marshal(c)
	return b
}

// Conformance runs the adapter conformance suite against the fake CLI at path, which must
// know the scenarios ok, fail and slow; extra are config keys every run needs.
func Conformance(t *testing.T, typ, path string, extra map[string]any) {
	t.Helper()
	slow := map[string]any{"graceSec": 2.0}
	for k, v := range extra {
		slow[k] = v
	}
	conformance.Run(t, conformance.Subject{
		Type:    typ,
		NewHost: func(t *testing.T) *sdktest.Host { return sdktest.Start(t, sdktest.Options{Builtins: true}) },
		Succeed: Config(path, "", extra),
		Fail:    Config(path, "fail", extra),
		Slow:    Config(path, "slow", slow),
	})
}

// Env is a host running one adapter type, for direct calls of its methods.
type Env struct {
	H       *sdktest.Host
	Type    string
	Company string
}

// New starts a host with the test binary's built-in extensions and warms the adapter up.
func New(t *testing.T, typ string) *Env {
	t.Helper()
	h := sdktest.Start(t, sdktest.Options{Builtins: true})
	conformance.WarmUp(t, h, typ)
	return &Env{H: h, Type: typ, Company: h.CreateCompany("CLI " + typ)}
}

func (e *Env) invoke(t *testing.T, method string, in, out any) {
	t.Helper()
	b, err := json.Marshal(in)
	require.NoError(t, err)
	res, err := e.H.Supervisor.Invoke(context.Background(), "kernel", &hostv1.InvokeRequest{
		Method: adapter.Method(e.Type, method), InputJson: b, CompanyId: e.Company,
		Actor: &extensionv1.Actor{Type: "system"},
	})
	require.NoError(t, err)
	require.Nil(t, res.Error, "%s: %v", method, res.Error)
	require.NoError(t, json.Unmarshal(res.OutputJson, out), "%s", res.OutputJson)
}

// Request returns an execute request for a fresh run of config with a run environment
// like the engine's.
func (e *Env) Request(config json.RawMessage) *adapter.ExecuteRequest {
	run := uuid.NewString()
	agent := uuid.NewString()
	return &adapter.ExecuteRequest{
		RunID: run, AgentID: agent, AgentName: "Fake Agent", CompanyID: e.Company, AdapterType: e.Type, Config: config,
		Env: map[string]string{
			"SERVICE_RUN_ID": run, "SERVICE_AGENT_ID": agent, "SERVICE_COMPANY_ID": e.Company,
			"SERVICE_API_URL": "http://127.0.0.1:3100", "SERVICE_API_KEY": "jwt-of-" + run,
		},
		AuthToken: "jwt-of-" + run,
	}
}

// Execute runs a request.
func (e *Env) Execute(t *testing.T, req *adapter.ExecuteRequest) *adapter.ExecuteResult {
	t.Helper()
	var res adapter.ExecuteResult
	e.invoke(t, adapter.MethodExecute, req, &res)
	return &res
}

// TestEnvironment checks a config.
func (e *Env) TestEnvironment(t *testing.T, config json.RawMessage) *adapter.TestEnvironmentResult {
	t.Helper()
	var res adapter.TestEnvironmentResult
	e.invoke(t, adapter.MethodTestEnvironment, &adapter.TestEnvironmentRequest{CompanyID: e.Company, Config: config}, &res)
	return &res
}

// Info describes the adapter.
func (e *Env) Info(t *testing.T) *adapter.Info {
	t.Helper()
	var res adapter.Info
	e.invoke(t, adapter.MethodInfo, struct{}{}, &res)
	return &res
}

// Output returns the stdout and stderr excerpts of a result.
func Output(t *testing.T, res *adapter.ExecuteResult) (stdout, stderr string) {
	t.Helper()
	var out struct {
		Stdout string `json:"stdout"`
		Stderr string `json:"stderr"`
	}
	require.NoError(t, json.Unmarshal(res.ResultJSON, &out), "%s", res.ResultJSON)
	return out.Stdout, out.Stderr
}

var argvRe = regexp.MustCompile(`(?m)^argv: (.*)$`)

// Argv returns the arguments the fake CLI reported on stderr (its "argv: [a] [b]" line,
// newlines inside an argument written as \x1e).
func Argv(t *testing.T, res *adapter.ExecuteResult) []string {
	t.Helper()
	_, stderr := Output(t, res)
	m := argvRe.FindAllStringSubmatch(stderr, -1)
	require.NotEmpty(t, m, "no argv line in %q", stderr)
	line := m[len(m)-1][1]
	var args []string
	line = strings.TrimSuffix(strings.TrimPrefix(line, "["), "]")
	for _, arg := range strings.Split(line, "] [") {
		args = append(args, strings.ReplaceAll(arg, "\x1e", "\n"))
	}
	return args
}

// Prompt returns the prompt the fake CLI reported (between prompt-begin and prompt-end).
func Prompt(t *testing.T, res *adapter.ExecuteResult) string {
	t.Helper()
	_, stderr := Output(t, res)
	_, after, ok := strings.Cut(stderr, "prompt-begin\n")
	require.True(t, ok, "no prompt in %q", stderr)
	before, _, _ := strings.Cut(after, "\nprompt-end")
	return before
}

// RunEnv returns the SERVICE_* environment the fake CLI reported ("env: K=V" lines).
func RunEnv(t *testing.T, res *adapter.ExecuteResult) map[string]string {
	t.Helper()
	_, stderr := Output(t, res)
	env := map[string]string{}
	for _, line := range strings.Split(stderr, "\n") {
		if kv, ok := strings.CutPrefix(line, "env: "); ok {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
	}
	return env
}

// Runtime returns the runtime of a run resuming the session a result saved.
func Runtime(res *adapter.ExecuteResult) *adapter.Runtime {
	return &adapter.Runtime{TaskKey: "task", SessionID: res.SessionID, SessionParams: res.SessionParams}
}

// HasArgs reports whether args holds want as consecutive elements.
func HasArgs(args []string, want ...string) bool {
	for i := 0; i+len(want) <= len(args); i++ {
		ok := true
		for j, w := range want {
			if args[i+j] != w {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// OpenDir returns a fresh directory the agent user can read and write (t.TempDir is
// private to the test's user), removed when the test ends.
func OpenDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "keel-clitest-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o777))
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}
