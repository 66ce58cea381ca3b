package epsilonlocal_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	epsilonlocal "github.com/keelhq/keel/adapters/epsilon_local"
	"github.com/keelhq/keel/adapters/localcli/clitest"
	"github.com/keelhq/keel/sdk/adapter"
)

// config is a runnable config: a provider/model and a HOME of the test's own for the
// session files.
func config(t *testing.T, fake, scenario string, extra map[string]any) json.RawMessage {
	c := map[string]any{"model": "xai/grok-4", "env": map[string]any{"HOME": clitest.OpenDir(t)}}
	for k, v := range extra {
		c[k] = v
	}
	return clitest.Config(fake, scenario, c)
}

func TestConformance(t *testing.T) {
	t.Parallel()
	clitest.Conformance(t, epsilonlocal.Type, clitest.Fake(t, "pi"),
		map[string]any{"model": "xai/grok-4", "env": map[string]any{"HOME": clitest.OpenDir(t)}})
}

func TestEpsilonLocal(t *testing.T) {
	t.Parallel()
	e := clitest.New(t, epsilonlocal.Type)
	fake := clitest.Fake(t, "pi")

	t.Run("Scenarios", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			scenario, status, code, message string
			usage                           *adapter.Usage
		}{
			{scenario: "ok", status: adapter.StatusSucceeded, usage: &adapter.Usage{InputTokens: 2100, CachedInputTokens: 512, OutputTokens: 64}},
			{scenario: "fail", status: adapter.StatusFailed, message: "429 Too Many Requests: rate limited"},
			{scenario: "auth", status: adapter.StatusFailed, code: "pi_auth_required", message: "Error: No API key found for xai. Set XAI_API_KEY or run /login."},
			{scenario: "crash", status: adapter.StatusFailed, message: "RangeError: Maximum call stack size exceeded"},
		} {
			t.Run(tc.scenario, func(t *testing.T) {
				t.Parallel()
				res := e.Execute(t, e.Request(config(t, fake, tc.scenario, nil)))
				require.Equal(t, tc.status, res.Status, "%+v", res)
				require.Equal(t, tc.code, res.ErrorCode, "%+v", res)
				if tc.message != "" {
					require.Equal(t, tc.message, res.ErrorMessage)
				}
				if tc.usage != nil {
					require.Equal(t, tc.usage, res.Usage)
				}
				require.True(t, strings.HasSuffix(res.SessionID, ".jsonl"), "the session is the file keel named: %q", res.SessionID)
			})
		}
	})

	t.Run("ArgumentsAndSessionFile", func(t *testing.T) {
		t.Parallel()
		dir := clitest.OpenDir(t)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "AGENTS.md"), []byte("Prefer small diffs."), 0o644))
		req := e.Request(config(t, fake, "ok", map[string]any{"cwd": dir, "instructionsFilePath": "AGENTS.md", "thinking": "high"}))
		res := e.Execute(t, req)
		require.Equal(t, adapter.StatusSucceeded, res.Status, "%+v", res)
		require.Equal(t, "Inbox checked; nothing to do.", res.Summary)
		require.NotNil(t, res.CostUSD)
		require.InDelta(t, 0.00274, *res.CostUSD, 1e-9)
		require.Equal(t, "xai", res.Provider)
		args := clitest.Argv(t, res)
		require.Equal(t, []string{"--mode", "json", "-p", "--append-system-prompt"}, args[:4])
		require.True(t, strings.HasPrefix(args[4], "Prefer small diffs."), "%q", args[4])
		require.True(t, clitest.HasArgs(args, "--provider", "xai", "--model", "grok-4", "--thinking", "high", "--tools", "read,bash,edit,write,grep,find,ls", "--session", res.SessionID))
		head, err := os.ReadFile(res.SessionID)
		require.NoError(t, err)
		require.Contains(t, string(head), `"cwd":"`+dir+`"`)
	})

	t.Run("ResumeAndUnknownSession", func(t *testing.T) {
		t.Parallel()
		home := clitest.OpenDir(t)
		cfg := config(t, fake, "ok", map[string]any{"env": map[string]any{"HOME": home}})
		firstReq := e.Request(cfg)
		first := e.Execute(t, firstReq)
		req := e.Request(cfg)
		req.AgentID = firstReq.AgentID
		req.Runtime = clitest.Runtime(first)
		res := e.Execute(t, req)
		require.Equal(t, first.SessionID, res.SessionID)
		require.True(t, clitest.HasArgs(clitest.Argv(t, res), "--session", first.SessionID))

		// A session pi no longer knows: a fresh session file and a successful retry.
		require.NoError(t, os.WriteFile(first.SessionID, []byte(`{"type":"session","cwd":"`+cwdOf(t, first)+`"}`+"\nstale\n"), 0o644))
		req = e.Request(cfg)
		req.AgentID = firstReq.AgentID
		req.Runtime = clitest.Runtime(first)
		res = e.Execute(t, req)
		require.Equal(t, adapter.StatusSucceeded, res.Status, "%+v", res)
		require.NotEqual(t, first.SessionID, res.SessionID)
	})
}

func cwdOf(t *testing.T, res *adapter.ExecuteResult) string {
	t.Helper()
	var sp struct {
		Cwd string `json:"cwd"`
	}
	require.NoError(t, json.Unmarshal(res.SessionParams, &sp))
	return sp.Cwd
}
