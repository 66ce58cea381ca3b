package betalocal_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	betalocal "github.com/keelhq/keel/adapters/beta_local"
	"github.com/keelhq/keel/adapters/localcli/clitest"
	"github.com/keelhq/keel/sdk/adapter"
)

const freshThread = "0199a213-81c0-7800-8aa1-bbab2a035a53"

func TestConformance(t *testing.T) {
	t.Parallel()
	clitest.Conformance(t, betalocal.Type, clitest.Fake(t, "codex"), nil)
}

func TestBetaLocal(t *testing.T) {
	t.Parallel()
	e := clitest.New(t, betalocal.Type)
	fake := clitest.Fake(t, "codex")

	t.Run("Scenarios", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			scenario, status, code, message string
			usage                           *adapter.Usage
		}{
			{scenario: "ok", status: adapter.StatusSucceeded, usage: &adapter.Usage{InputTokens: 24763, CachedInputTokens: 24448, OutputTokens: 122}},
			{scenario: "fail", status: adapter.StatusFailed, message: "stream disconnected before completion: Transport error: error decoding response body"},
			{scenario: "auth", status: adapter.StatusFailed, code: "codex_auth_required"},
			{scenario: "crash", status: adapter.StatusFailed, code: "codex_harness_crash", message: "thread 'main' panicked at codex-rs/exec/src/lib.rs:412:9"},
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
				require.Equal(t, freshThread, res.SessionID)
			})
		}
	})

	t.Run("SuccessAndArguments", func(t *testing.T) {
		t.Parallel()
		dir := clitest.OpenDir(t)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "AGENTS.md"), []byte("Ship small changes."), 0o644))
		res := e.Execute(t, e.Request(clitest.Config(fake, "ok", map[string]any{
			"model": "gpt-5.4", "modelReasoningEffort": "high", "search": true, "cwd": dir,
			"instructionsFilePath": "AGENTS.md", "extraArgs": []string{"--x", "a b"},
		})))
		require.Equal(t, adapter.StatusSucceeded, res.Status, "%+v", res)
		require.Equal(t, "Inbox is empty; nothing to do.", res.Summary)
		require.Equal(t, "openai", res.Provider)
		require.Equal(t, "gpt-5.4", res.Model)
		require.Equal(t, []string{"--search", "exec", "--json", "-c", `sandbox_mode="workspace-write"`,
			"-c", "sandbox_workspace_write.network_access=true", "--model", "gpt-5.4",
			"-c", `model_reasoning_effort="high"`, "--x", "a b", "-"}, clitest.Argv(t, res))
		prompt := clitest.Prompt(t, res)
		require.Contains(t, prompt, "Ship small changes.\n\nThe above agent instructions were loaded from "+filepath.Join(dir, "AGENTS.md"))
		require.Contains(t, prompt, "Continue your work.")
	})

	t.Run("MCPServersBecomeConfigOverrides", func(t *testing.T) {
		t.Parallel()
		res := e.Execute(t, e.Request(clitest.Config(fake, "ok", map[string]any{"mcpServers": map[string]any{
			"keel":    map[string]any{"url": "http://127.0.0.1:3100/mcp", "headers": map[string]any{"Authorization": "Bearer x"}},
			"files":   map[string]any{"command": "mcp-files", "args": []string{"--root", "/srv"}},
			"bad key": map[string]any{"url": "http://x"},
		}})))
		args := clitest.Argv(t, res)
		for _, want := range []string{`mcp_servers.files.command="mcp-files"`, `mcp_servers.files.args=["--root","/srv"]`,
			`mcp_servers.keel.url="http://127.0.0.1:3100/mcp"`, `mcp_servers.keel.http_headers={ "Authorization" = "Bearer x" }`} {
			require.True(t, clitest.HasArgs(args, "-c", want), "%s in %q", want, args)
		}
		require.NotContains(t, strings.Join(args, " "), "bad key")
	})

	t.Run("BypassReplacesTheSandbox", func(t *testing.T) {
		t.Parallel()
		res := e.Execute(t, e.Request(clitest.Config(fake, "ok", map[string]any{"dangerouslyBypassApprovalsAndSandbox": true})))
		args := clitest.Argv(t, res)
		require.Contains(t, args, "--dangerously-bypass-approvals-and-sandbox")
		require.NotContains(t, args, `sandbox_mode="workspace-write"`)
	})

	t.Run("NextRunResumesTheThread", func(t *testing.T) {
		t.Parallel()
		firstReq := e.Request(clitest.Config(fake, "ok", nil))
		first := e.Execute(t, firstReq)
		req := e.Request(clitest.Config(fake, "ok", nil))
		req.AgentID = firstReq.AgentID
		req.Runtime = clitest.Runtime(first)
		res := e.Execute(t, req)
		require.Equal(t, adapter.StatusSucceeded, res.Status, "%+v", res)
		args := clitest.Argv(t, res)
		require.Equal(t, []string{"resume", freshThread, "-"}, args[len(args)-3:])
	})

	t.Run("UnknownThreadRetriesFresh", func(t *testing.T) {
		t.Parallel()
		req := e.Request(clitest.Config(fake, "ok", nil))
		req.Runtime = &adapter.Runtime{SessionID: "00000000-0000-4000-8000-000000000000"}
		res := e.Execute(t, req)
		require.Equal(t, adapter.StatusSucceeded, res.Status, "%+v", res)
		require.NotContains(t, clitest.Argv(t, res), "resume")
		require.Equal(t, freshThread, res.SessionID)
	})

	t.Run("TestEnvironment", func(t *testing.T) {
		t.Parallel()
		res := e.TestEnvironment(t, clitest.Config(fake, "", map[string]any{"env": map[string]any{"OPENAI_API_KEY": "sk-test"}}))
		require.Equal(t, "pass", res.Status, "%+v", res)
		var version string
		for _, c := range res.Checks {
			if c.Name == "codex_version" {
				version = c.Message
			}
		}
		require.Equal(t, "codex-cli 0.128.0", version)
	})
}
