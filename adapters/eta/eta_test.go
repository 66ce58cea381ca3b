package eta_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/adapters/eta"
	"github.com/keelhq/keel/adapters/localcli/clitest"
	"github.com/keelhq/keel/sdk/adapter"
)

const freshSession = "c6b62c6f-7ead-4fd6-9922-e952131177ff"

func TestConformance(t *testing.T) {
	t.Parallel()
	clitest.Conformance(t, eta.Type, clitest.Fake(t, "agent"), nil)
}

func TestEta(t *testing.T) {
	t.Parallel()
	e := clitest.New(t, eta.Type)
	fake := clitest.Fake(t, "agent")

	t.Run("Scenarios", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			scenario, status, code, message, session string
			usage                                    *adapter.Usage
		}{
			{scenario: "ok", status: adapter.StatusSucceeded, session: freshSession, usage: &adapter.Usage{InputTokens: 4100, CachedInputTokens: 3000, OutputTokens: 75}},
			{scenario: "fail", status: adapter.StatusFailed, session: freshSession, message: "Model provider returned 503 Service Unavailable"},
			{scenario: "auth", status: adapter.StatusFailed, code: "cursor_auth_required"},
			{scenario: "crash", status: adapter.StatusFailed, session: freshSession},
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
			})
		}
	})

	t.Run("SuccessAndArguments", func(t *testing.T) {
		t.Parallel()
		dir := clitest.OpenDir(t)
		res := e.Execute(t, e.Request(clitest.Config(fake, "ok", map[string]any{"cwd": dir, "mode": "plan"})))
		require.Equal(t, adapter.StatusSucceeded, res.Status, "%+v", res)
		require.Equal(t, "Inbox checked; nothing to do.", res.Summary, "a stream-prefixed line is parsed too")
		require.NotNil(t, res.CostUSD)
		require.Equal(t, []string{"-p", "--output-format", "stream-json", "--workspace", dir, "--model", "auto", "--mode", "plan", "--yolo"},
			clitest.Argv(t, res))

		res = e.Execute(t, e.Request(clitest.Config(fake, "ok", map[string]any{"extraArgs": []string{"--trust"}})))
		require.NotContains(t, clitest.Argv(t, res), "--yolo")
	})

	t.Run("ResumeAndUnknownSession", func(t *testing.T) {
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
