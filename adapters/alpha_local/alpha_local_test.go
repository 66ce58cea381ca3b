package alphalocal_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	alphalocal "github.com/keelhq/keel/adapters/alpha_local"
	"github.com/keelhq/keel/adapters/localcli/clitest"
	"github.com/keelhq/keel/sdk/adapter"
)

const freshSession = "3f0e2c4a-8d1b-4b7e-9a51-2c6d8e0f1a23"

func TestConformance(t *testing.T) {
	t.Parallel()
	clitest.Conformance(t, alphalocal.Type, clitest.Fake(t, "claude"), nil)
}

func TestAlphaLocal(t *testing.T) {
	t.Parallel()
	e := clitest.New(t, alphalocal.Type)
	fake := clitest.Fake(t, "claude")

	t.Run("Scenarios", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			scenario, status, code, message string
			usage                           *adapter.Usage
		}{
			{scenario: "ok", status: adapter.StatusSucceeded, usage: &adapter.Usage{InputTokens: 210, CachedInputTokens: 1500, OutputTokens: 13}},
			{scenario: "fail", status: adapter.StatusFailed, message: "API Error: 500 Internal server error", usage: &adapter.Usage{InputTokens: 3}},
			{scenario: "auth", status: adapter.StatusFailed, code: "claude_auth_required", message: "Invalid API key · Please run /login"},
			{scenario: "max_turns", status: adapter.StatusFailed, code: "max_turns_exhausted", usage: &adapter.Usage{InputTokens: 1000, CachedInputTokens: 50000, OutputTokens: 4000}},
			{scenario: "refusal", status: adapter.StatusFailed, code: "claude_refusal", message: "I can not help with that."},
			{scenario: "crash", status: adapter.StatusFailed, message: "FATAL: V8 out of memory"},
		} {
			t.Run(tc.scenario, func(t *testing.T) {
				t.Parallel()
				res := e.Execute(t, e.Request(clitest.Config(fake, tc.scenario, nil)))
				require.Equal(t, tc.status, res.Status, "%+v", res)
				require.Equal(t, tc.code, res.ErrorCode, "%+v", res)
				if tc.message != "" {
					require.Equal(t, tc.message, res.ErrorMessage)
				}
				if tc.usage != nil {
					require.Equal(t, tc.usage, res.Usage)
				}
				require.Equal(t, freshSession, res.SessionID, "every scenario but auth reports its session before failing")
			})
		}
	})

	t.Run("SuccessReportsUsageCostSessionAndSummary", func(t *testing.T) {
		t.Parallel()
		req := e.Request(clitest.Config(fake, "ok", nil))
		res := e.Execute(t, req)
		require.Equal(t, adapter.StatusSucceeded, res.Status, "%+v", res)
		require.NotNil(t, res.CostUSD)
		require.InDelta(t, 0.0421, *res.CostUSD, 1e-9)
		require.Equal(t, "claude-opus-5", res.Model)
		require.Equal(t, "anthropic", res.Provider)
		require.Equal(t, "subscription", res.BillingType)
		require.Equal(t, "Checked my inbox; nothing left to do.", res.Summary)
		require.JSONEq(t, `{"sessionId":"`+freshSession+`","cwd":"`+cwdOf(t, res)+`"}`, string(res.SessionParams))

		args := clitest.Argv(t, res)
		require.Equal(t, []string{"--print", "--output-format", "stream-json", "--verbose"}, args[:4])
		require.True(t, clitest.HasArgs(args, "--model", "claude-opus-5"), "%q", args)
		require.True(t, clitest.HasArgs(args, "--max-turns", "300"), "%q", args)
		require.Contains(t, args, "--add-dir")
		require.NotContains(t, args, "--resume")
		if os.Geteuid() == 0 { // sdktest hosts run agent commands as keel's own user
			require.Contains(t, args, "--allowedTools")
		} else {
			require.Contains(t, args, "--dangerously-skip-permissions")
		}
		prompt := clitest.Prompt(t, res)
		require.True(t, strings.HasPrefix(prompt, "You are agent "+req.AgentID+" (Fake Agent). Continue your work."), "%q", prompt)
		env := clitest.RunEnv(t, res)
		require.Equal(t, req.AuthToken, env["SERVICE_API_KEY"])
		require.Equal(t, req.RunID, env["SERVICE_RUN_ID"])
	})

	t.Run("ConfigBecomesArguments", func(t *testing.T) {
		t.Parallel()
		dir := clitest.OpenDir(t)
		instr := filepath.Join(dir, "AGENTS.md")
		require.NoError(t, os.WriteFile(instr, []byte("Be careful."), 0o644))
		res := e.Execute(t, e.Request(clitest.Config(fake, "ok", map[string]any{
			"model": "claude-sonnet-4-6", "effort": "high", "maxTurnsPerRun": 12, "cwd": dir,
			"instructionsFilePath": "AGENTS.md", "extraArgs": []string{"--x-flag", "$(touch pwned); echo"},
			"mcpServers": map[string]any{"keel": map[string]any{"type": "http", "url": "http://127.0.0.1:1/mcp"}},
		})))
		require.Equal(t, adapter.StatusSucceeded, res.Status, "%+v", res)
		args := clitest.Argv(t, res)
		require.True(t, clitest.HasArgs(args, "--model", "claude-sonnet-4-6"), "%q", args)
		require.True(t, clitest.HasArgs(args, "--effort", "high"), "%q", args)
		require.True(t, clitest.HasArgs(args, "--max-turns", "12"), "%q", args)
		require.Contains(t, args, "--append-system-prompt-file")
		require.Contains(t, args, "--strict-mcp-config")
		require.Equal(t, []string{"--x-flag", "$(touch pwned); echo"}, args[len(args)-2:], "extra args pass as they are")
		_, err := os.Stat(filepath.Join(dir, "pwned"))
		require.True(t, os.IsNotExist(err), "nothing ran through a shell")
		require.Equal(t, dir, cwdOf(t, res))
	})

	t.Run("NextRunResumesTheSession", func(t *testing.T) {
		t.Parallel()
		firstReq := e.Request(clitest.Config(fake, "ok", nil))
		first := e.Execute(t, firstReq)
		require.Equal(t, freshSession, first.SessionID)
		req := e.Request(clitest.Config(fake, "ok", nil))
		req.AgentID = firstReq.AgentID // the same agent's directory: the session's cwd
		req.Runtime = clitest.Runtime(first)
		req.Env["SERVICE_WAKE_REASON"] = "issue_commented"
		req.Env["SERVICE_TASK_ID"] = "issue-1"
		second := e.Execute(t, req)
		require.Equal(t, adapter.StatusSucceeded, second.Status, "%+v", second)
		require.True(t, clitest.HasArgs(clitest.Argv(t, second), "--resume", freshSession))
		prompt := clitest.Prompt(t, second)
		require.Contains(t, prompt, "Wake reason: issue_commented")
		require.NotContains(t, prompt, "Continue your work", "a resumed session gets only the wake delta")
	})

	t.Run("SessionOfAnotherCwdIsNotResumed", func(t *testing.T) {
		t.Parallel()
		req := e.Request(clitest.Config(fake, "ok", map[string]any{"cwd": clitest.OpenDir(t)}))
		req.Runtime = &adapter.Runtime{SessionParams: []byte(`{"sessionId":"` + freshSession + `","cwd":"/somewhere/else"}`)}
		res := e.Execute(t, req)
		require.Equal(t, adapter.StatusSucceeded, res.Status, "%+v", res)
		require.NotContains(t, clitest.Argv(t, res), "--resume")
	})

	t.Run("UnknownSessionRetriesFresh", func(t *testing.T) {
		t.Parallel()
		req := e.Request(clitest.Config(fake, "ok", nil))
		req.Runtime = &adapter.Runtime{SessionID: "00000000-0000-4000-8000-000000000000"}
		res := e.Execute(t, req)
		require.Equal(t, adapter.StatusSucceeded, res.Status, "%+v", res)
		require.NotContains(t, clitest.Argv(t, res), "--resume", "the retry starts fresh")
		require.Equal(t, freshSession, res.SessionID)
		require.False(t, res.ClearSession)
	})

	t.Run("NotInstalled", func(t *testing.T) {
		t.Parallel()
		res := e.Execute(t, e.Request([]byte(`{"command":"claude-is-not-installed-here"}`)))
		require.Equal(t, adapter.StatusFailed, res.Status)
		require.Equal(t, "cli_not_installed", res.ErrorCode)
	})

	t.Run("TestEnvironment", func(t *testing.T) {
		t.Parallel()
		res := e.TestEnvironment(t, clitest.Config(fake, "", nil))
		require.True(t, res.OK, "%+v", res)
		require.Equal(t, "warn", res.Status, "installed but not logged in: %+v", res)
		checks := map[string]adapter.Check{}
		for _, c := range res.Checks {
			checks[c.Name] = c
		}
		require.Contains(t, checks, "claude_command_resolvable")
		require.Equal(t, "2.1.3 (Claude Code)", checks["claude_version"].Message)
		require.Equal(t, "warn", checks["claude_auth_missing"].Level)

		res = e.TestEnvironment(t, clitest.Config(fake, "", map[string]any{"env": map[string]any{"ANTHROPIC_API_KEY": "sk-test"}}))
		require.Equal(t, "pass", res.Status, "%+v", res)

		res = e.TestEnvironment(t, []byte(`{"command":"claude-is-not-installed-here"}`))
		require.False(t, res.OK)
		require.Equal(t, "fail", res.Status)
		require.Equal(t, "claude_command_unresolvable", res.Checks[len(res.Checks)-1].Name)
	})
}

// cwdOf returns the cwd the fake CLI reported.
func cwdOf(t *testing.T, res *adapter.ExecuteResult) string {
	t.Helper()
	_, stderr := clitest.Output(t, res)
	for _, line := range strings.Split(stderr, "\n") {
		if v, ok := strings.CutPrefix(line, "cwd: "); ok {
			return v
		}
	}
	t.Fatalf("no cwd in %q", stderr)
	return ""
}
