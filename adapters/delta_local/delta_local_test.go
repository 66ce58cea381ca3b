package deltalocal_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	deltalocal "github.com/keelhq/keel/adapters/delta_local"
	"github.com/keelhq/keel/adapters/localcli/clitest"
	"github.com/keelhq/keel/sdk/adapter"
)

const freshSession = "ses_5a1f0c9e2ffeQk3Jd8Lr7Wm2Xb"

// config is a runnable config: OpenCode needs a provider/model.
func config(fake, scenario string, extra map[string]any) json.RawMessage {
	c := map[string]any{"model": "openai/gpt-5.4"}
	for k, v := range extra {
		c[k] = v
	}
	return clitest.Config(fake, scenario, c)
}

func TestConformance(t *testing.T) {
	t.Parallel()
	fake := clitest.Fake(t, "opencode")
	clitest.Conformance(t, deltalocal.Type, fake, map[string]any{"model": "openai/gpt-5.4"})
}

func TestDeltaLocal(t *testing.T) {
	t.Parallel()
	e := clitest.New(t, deltalocal.Type)
	fake := clitest.Fake(t, "opencode")

	t.Run("Scenarios", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			scenario, status, code, message string
			usage                           *adapter.Usage
		}{
			{scenario: "ok", status: adapter.StatusSucceeded, usage: &adapter.Usage{InputTokens: 3200, CachedInputTokens: 1024, OutputTokens: 120}},
			{scenario: "fail", status: adapter.StatusFailed, message: "Upstream returned 500: internal error"},
			{scenario: "auth", status: adapter.StatusFailed, code: "opencode_auth_required", message: "Invalid API key. Run opencode auth login."},
			{scenario: "crash", status: adapter.StatusFailed, message: "Segmentation fault (core dumped)"},
		} {
			t.Run(tc.scenario, func(t *testing.T) {
				t.Parallel()
				res := e.Execute(t, e.Request(config(fake, tc.scenario, nil)))
				require.Equal(t, tc.status, res.Status, "%+v", res)
				require.Equal(t, tc.code, res.ErrorCode, "%+v", res)
				if tc.message != "" {
					require.Equal(t, tc.message, res.ErrorMessage)
				}
				if tc.usage != nil {
					require.Equal(t, tc.usage, res.Usage)
				}
				require.Equal(t, freshSession, res.SessionID)
			})
		}
	})

	t.Run("SuccessArgumentsAndConfig", func(t *testing.T) {
		t.Parallel()
		res := e.Execute(t, e.Request(config(fake, "ok", map[string]any{"variant": "high"})))
		require.Equal(t, adapter.StatusSucceeded, res.Status, "%+v", res)
		require.NotNil(t, res.CostUSD)
		require.InDelta(t, 0.0183, *res.CostUSD, 1e-9)
		require.Equal(t, "openai", res.Provider)
		require.Equal(t, "Inbox checked; nothing to do.", res.Summary)
		require.Equal(t, []string{"run", "--format", "json", "--model", "openai/gpt-5.4", "--variant", "high"}, clitest.Argv(t, res))
		_, stderr := clitest.Output(t, res)
		require.Contains(t, stderr, "project-config: true")
		require.Contains(t, stderr, `"external_directory":"allow"`)
	})

	t.Run("ModelIsRequired", func(t *testing.T) {
		t.Parallel()
		res := e.Execute(t, e.Request(clitest.Config(fake, "ok", nil)))
		require.Equal(t, adapter.StatusFailed, res.Status)
		require.Equal(t, "OpenCode requires `adapterConfig.model` in provider/model format.", res.ErrorMessage)
	})

	t.Run("ResumeAndStaleSession", func(t *testing.T) {
		t.Parallel()
		firstReq := e.Request(config(fake, "ok", nil))
		first := e.Execute(t, firstReq)
		req := e.Request(config(fake, "ok", nil))
		req.AgentID = firstReq.AgentID
		req.Runtime = clitest.Runtime(first)
		res := e.Execute(t, req)
		require.True(t, clitest.HasArgs(clitest.Argv(t, res), "--session", freshSession))

		req = e.Request(config(fake, "ok", nil))
		req.Runtime = &adapter.Runtime{SessionID: "ses_stale01"}
		res = e.Execute(t, req)
		require.Equal(t, adapter.StatusSucceeded, res.Status, "%+v", res)
		require.NotContains(t, clitest.Argv(t, res), "--session")
		require.Equal(t, freshSession, res.SessionID)
	})
}
