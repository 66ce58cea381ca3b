package gammalocal_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	gammalocal "github.com/keelhq/keel/adapters/gamma_local"
	"github.com/keelhq/keel/adapters/localcli/clitest"
	"github.com/keelhq/keel/sdk/adapter"
)

const freshSession = "7b5f2c1e-3d4a-4e8b-9c0d-1a2b3c4d5e6f"

func TestConformance(t *testing.T) {
	t.Parallel()
	clitest.Conformance(t, gammalocal.Type, clitest.Fake(t, "gemini"), nil)
}

func TestGammaLocal(t *testing.T) {
	t.Parallel()
	e := clitest.New(t, gammalocal.Type)
	fake := clitest.Fake(t, "gemini")

	t.Run("Scenarios", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			scenario, status, code, message, session string
			usage                                    *adapter.Usage
			clear                                    bool
		}{
			{scenario: "ok", status: adapter.StatusSucceeded, session: freshSession, usage: &adapter.Usage{InputTokens: 5100, CachedInputTokens: 2048, OutputTokens: 130}},
			{scenario: "fail", status: adapter.StatusFailed, session: freshSession, message: "Tool execution failed: run_shell_command"},
			{scenario: "auth", status: adapter.StatusFailed, code: "gemini_auth_required"},
			{scenario: "max_turns", status: adapter.StatusFailed, session: freshSession, code: "max_turns_exhausted", clear: true},
			{scenario: "crash", status: adapter.StatusFailed, session: freshSession, message: "FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory"},
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
				require.Equal(t, tc.session, res.SessionID)
				require.Equal(t, tc.clear, res.ClearSession)
			})
		}
	})

	t.Run("ArgumentsPromptAndEnvironment", func(t *testing.T) {
		t.Parallel()
		res := e.Execute(t, e.Request(clitest.Config(fake, "ok", map[string]any{"model": "gemini-2.5-pro", "extraArgs": []string{"--debug"},
			"env": map[string]any{"TERM": "dumb", "NO_COLOR": "1"}})))
		require.Equal(t, adapter.StatusSucceeded, res.Status, "%+v", res)
		require.Equal(t, "Inbox checked; nothing to do.", res.Summary)
		require.Equal(t, "google", res.Provider)
		args := clitest.Argv(t, res)
		prompt := clitest.Prompt(t, res)
		require.Equal(t, []string{"--output-format", "stream-json", "--model", "gemini-2.5-pro", "--approval-mode", "yolo",
			"--sandbox=none", "--debug", "--prompt", prompt}, args)
		require.Contains(t, prompt, "Continue your work.")
		require.Contains(t, prompt, "The following SERVICE_* environment variables are available in this run: SERVICE_AGENT_ID, SERVICE_API_KEY")
		_, stderr := clitest.Output(t, res)
		require.Contains(t, stderr, "term: xterm-256color truecolor 1")
	})

	t.Run("SkillsAreLinkedIntoTheCLIHome", func(t *testing.T) {
		t.Parallel()
		home, skill := clitest.OpenDir(t), clitest.OpenDir(t)
		require.NoError(t, os.WriteFile(filepath.Join(skill, "SKILL.md"), []byte("# Release"), 0o644))
		req := e.Request(clitest.Config(fake, "ok", map[string]any{"env": map[string]any{"HOME": home}}))
		req.Skills = []adapter.Skill{{Name: "release", Path: skill}, {Name: "../escape", Path: skill}}
		res := e.Execute(t, req)
		require.Equal(t, adapter.StatusSucceeded, res.Status, "%+v", res)
		b, err := os.ReadFile(filepath.Join(home, ".gemini", "skills", "release", "SKILL.md"))
		require.NoError(t, err)
		require.Equal(t, "# Release", string(b))
		_, err = os.Lstat(filepath.Join(home, ".gemini", "escape"))
		require.True(t, os.IsNotExist(err), "a skill name cannot leave the skills directory")
	})

	t.Run("AutoModelPassesNone", func(t *testing.T) {
		t.Parallel()
		res := e.Execute(t, e.Request(clitest.Config(fake, "ok", nil)))
		require.NotContains(t, clitest.Argv(t, res), "--model")
	})

	t.Run("NextRunResumesAndUnknownSessionRetries", func(t *testing.T) {
		t.Parallel()
		firstReq := e.Request(clitest.Config(fake, "ok", nil))
		first := e.Execute(t, firstReq)
		req := e.Request(clitest.Config(fake, "ok", nil))
		req.AgentID = firstReq.AgentID
		req.Runtime = clitest.Runtime(first)
		res := e.Execute(t, req)
		require.True(t, clitest.HasArgs(clitest.Argv(t, res), "--resume", freshSession))

		req = e.Request(clitest.Config(fake, "ok", nil))
		req.Runtime = &adapter.Runtime{SessionID: "00000000-0000-4000-8000-000000000000"}
		res = e.Execute(t, req)
		require.Equal(t, adapter.StatusSucceeded, res.Status, "%+v", res)
		require.NotContains(t, clitest.Argv(t, res), "--resume")
	})
}
