package zetalocal_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/adapters/localcli/clitest"
	zetalocal "github.com/keelhq/keel/adapters/zeta_local"
	"github.com/keelhq/keel/sdk/adapter"
)

const freshSession = "20261129_100000_a1b2c3"

func TestConformance(t *testing.T) {
	t.Parallel()
	clitest.Conformance(t, zetalocal.Type, clitest.Fake(t, "hermes"), nil)
}

func TestZetaLocal(t *testing.T) {
	t.Parallel()
	e := clitest.New(t, zetalocal.Type)
	fake := clitest.Fake(t, "hermes")

	t.Run("PlainTextOutput", func(t *testing.T) {
		t.Parallel()
		res := e.Execute(t, e.Request(clitest.Config(fake, "ok", map[string]any{"model": "anthropic/claude-sonnet-4", "maxTurnsPerRun": 40})))
		require.Equal(t, adapter.StatusSucceeded, res.Status, "%+v", res)
		require.Equal(t, freshSession, res.SessionID)
		require.Equal(t, &adapter.Usage{InputTokens: 1850, OutputTokens: 210}, res.Usage)
		require.NotNil(t, res.CostUSD)
		require.InDelta(t, 0.0142, *res.CostUSD, 1e-9)
		require.Contains(t, res.Summary, "Checked the inbox.\nInbox checked; nothing to do.")
		require.NotContains(t, res.Summary, "[tool]")
		require.NotContains(t, res.Summary, "💻")
		args := clitest.Argv(t, res)
		require.Equal(t, []string{"chat", "-q", clitest.Prompt(t, res), "-m", "anthropic/claude-sonnet-4", "--provider", "anthropic",
			"--max-turns", "40", "--source", "tool", "--yolo"}, args)
	})

	t.Run("QuietShape", func(t *testing.T) {
		t.Parallel()
		res := e.Execute(t, e.Request(clitest.Config(fake, "ok", map[string]any{"quiet": true})))
		require.Equal(t, adapter.StatusSucceeded, res.Status, "%+v", res)
		require.Equal(t, freshSession, res.SessionID)
		require.Equal(t, "Inbox checked; nothing to do.", res.Summary)
		require.True(t, clitest.HasArgs(clitest.Argv(t, res), "-Q", "-m", "auto"), "auto is passed, no provider")
	})

	t.Run("Failures", func(t *testing.T) {
		t.Parallel()
		res := e.Execute(t, e.Request(clitest.Config(fake, "fail", nil)))
		require.Equal(t, adapter.StatusFailed, res.Status, "%+v", res)
		// The error lines of stderr (the fake's own report of its prompt follows them).
		require.True(t, strings.HasPrefix(res.ErrorMessage, "Traceback (most recent call last):\nRuntimeError: provider request failed: 500 Internal Server Error"), "%q", res.ErrorMessage)
		res = e.Execute(t, e.Request(clitest.Config(fake, "crash", nil)))
		require.Equal(t, adapter.StatusFailed, res.Status, "%+v", res)
		require.Equal(t, "SIGKILL", res.Signal)
		require.True(t, strings.HasPrefix(res.ErrorMessage, "Fatal Python error: Segmentation fault"), "%q", res.ErrorMessage)
	})

	t.Run("ResumeUnlessSessionsAreOff", func(t *testing.T) {
		t.Parallel()
		firstReq := e.Request(clitest.Config(fake, "ok", nil))
		first := e.Execute(t, firstReq)
		req := e.Request(clitest.Config(fake, "ok", nil))
		req.AgentID = firstReq.AgentID
		req.Runtime = clitest.Runtime(first)
		res := e.Execute(t, req)
		require.True(t, clitest.HasArgs(clitest.Argv(t, res), "--resume", freshSession))

		req = e.Request(clitest.Config(fake, "ok", map[string]any{"persistSession": false}))
		req.AgentID = firstReq.AgentID
		req.Runtime = clitest.Runtime(first)
		res = e.Execute(t, req)
		require.NotContains(t, clitest.Argv(t, res), "--resume")
		require.Empty(t, res.SessionID)
	})
}
