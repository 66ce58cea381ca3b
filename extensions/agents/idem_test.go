package agents_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdk/idem"
	"github.com/keelhq/keel/sdktest"
)

// The host re-executes this test binary as the extensions, which then honour the test-only
// crash header.
func init() { idem.EnableCrashHeader() }

// TestIdempotentAgentCreate replays agent creates: a plain retry, and one after the agents
// extension committed the agent and died before answering.
func TestIdempotentAgentCreate(t *testing.T) {
	t.Parallel()
	h := startAgents(t)
	company := h.CreateCompany("Idem Agents Co")
	path := "/api/companies/" + company + "/agents"
	count := func(name string) (identities, configs int) {
		t.Helper()
		ctx := context.Background()
		require.NoError(t, h.Kernel.Pool.QueryRow(ctx, `SELECT count(*) FROM kernel.agents WHERE company_id = $1 AND name = $2`,
			company, name).Scan(&identities))
		require.NoError(t, h.Kernel.Pool.QueryRow(ctx, `SELECT count(*) FROM ext_agents.agent_configs c
			JOIN kernel.agents a ON a.id = c.agent_id WHERE a.company_id = $1 AND a.name = $2`, company, name).Scan(&configs))
		return identities, configs
	}

	t.Run("Replay", func(t *testing.T) {
		body := map[string]any{"name": "Replayed Agent", "role": "engineer"}
		first := h.Do("POST", path, body, idem.Header, "agent-1")
		require.Equal(t, http.StatusCreated, first.Status, "%s", first.Body)
		second := h.Do("POST", path, body, idem.Header, "agent-1")
		require.Equal(t, http.StatusCreated, second.Status, "%s", second.Body)
		require.Equal(t, "true", second.Header.Get(idem.ReplayedHeader))
		require.JSONEq(t, string(first.Body), string(second.Body))
		other := h.Do("POST", path, map[string]any{"name": "Another Agent"}, idem.Header, "agent-1")
		require.Equal(t, http.StatusConflict, other.Status, "%s", other.Body)
		ids, cfgs := count("Replayed Agent")
		require.Equal(t, 1, ids)
		require.Equal(t, 1, cfgs)
	})

	t.Run("AfterTheExtensionDied", func(t *testing.T) {
		body := map[string]any{"name": "Crash Agent", "role": "engineer", "title": "Survivor"}
		res := h.Do("POST", path, body, idem.Header, "agent-crash", idem.CrashHeader, "1")
		require.Equal(t, http.StatusServiceUnavailable, res.Status, "%s", res.Body)
		require.Contains(t, res.Map(t)["error"], "the outcome of the request is unknown")
		var replay *sdktest.Response
		sdktest.WaitFor(t, 60*time.Second, func() bool {
			replay = h.Do("POST", path, body, idem.Header, "agent-crash")
			return replay.Status != http.StatusServiceUnavailable
		}, "the restarted agents extension to answer the retry")
		require.Equal(t, http.StatusCreated, replay.Status, "%s", replay.Body)
		require.Equal(t, "true", replay.Header.Get(idem.ReplayedHeader))
		ag := replay.Map(t)
		require.Equal(t, "Crash Agent", ag["name"])
		require.Equal(t, "Survivor", ag["title"])
		ids, cfgs := count("Crash Agent")
		require.Equal(t, 1, ids)
		require.Equal(t, 1, cfgs)
	})
}
