package builtinagents

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAdapterComplete checks the completeness rule per adapter type (spec part 2 "Built-in
// agent lifecycle state").
func TestAdapterComplete(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		adapterType, config string
		complete            bool
	}{
		{"process", `{}`, false},
		{"process", `{"command":"/bin/true"}`, true},
		{"process", `{"script":"echo hi"}`, true},
		{"process", `{"command":"  "}`, false},
		{"process", `{"model":"m"}`, false},
		{"http", `{"url":"https://x"}`, true},
		{"http", `{"endpoint":"https://x"}`, true},
		{"http", `{"webhookUrl":"https://x"}`, true},
		{"http", `{"model":"m"}`, false},
		{"theta_gateway", `{"baseUrl":"wss://x"}`, true},
		{"zeta_gateway", `{"url":"https://x"}`, true},
		{"zeta_gateway", `{"model":"m"}`, false},
		{"alpha_local", `{"model":"m"}`, true},
		{"beta_local", `{"command":"x"}`, false},
		{"delta_local", `{"model":""}`, false},
	} {
		got, _ := adapterComplete(tc.adapterType, json.RawMessage(tc.config))
		require.Equal(t, tc.complete, got, "%s %s", tc.adapterType, tc.config)
	}
}

// TestStateOf checks the state computed from an agent.
func TestStateOf(t *testing.T) {
	t.Parallel()
	done := json.RawMessage(`{"model":"m"}`)
	require.Equal(t, StateNotProvisioned, stateOf(nil))
	require.Equal(t, StatePendingApproval, stateOf(&agent{Status: "pending_approval", AdapterType: "alpha_local", AdapterConfig: done}))
	require.Equal(t, StateNeedsSetup, stateOf(&agent{Status: "idle", AdapterType: "alpha_local", AdapterConfig: json.RawMessage(`{}`)}))
	require.Equal(t, StateNeedsSetup, stateOf(&agent{Status: "paused", AdapterType: "alpha_local", AdapterConfig: json.RawMessage(`{}`)}))
	require.Equal(t, StatePaused, stateOf(&agent{Status: "paused", AdapterType: "alpha_local", AdapterConfig: done}))
	require.Equal(t, StateReady, stateOf(&agent{Status: "running", AdapterType: "alpha_local", AdapterConfig: done}))
}
