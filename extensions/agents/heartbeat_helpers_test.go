package agents_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	_ "github.com/keelhq/keel/adapters/process"
	_ "github.com/keelhq/keel/extensions/agents/internal/fakeadapter"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
	"github.com/keelhq/keel/sdktest"
)

// hbAgent creates a kernel agent with an API key and inserts its agent_configs row
// directly (adapter type, adapterConfig, runtimeConfig), independent of the config routes.
func hbAgent(t *testing.T, h *sdktest.Host, companyID, name, adapterType string, adapterConfig, runtimeConfig map[string]any) *sdktest.Agent {
	t.Helper()
	ag := h.CreateAgent(companyID, name, "engineer")
	if adapterConfig == nil {
		adapterConfig = map[string]any{}
	}
	if runtimeConfig == nil {
		runtimeConfig = map[string]any{}
	}
	ac, err := json.Marshal(adapterConfig)
	require.NoError(t, err)
	rc, err := json.Marshal(runtimeConfig)
	require.NoError(t, err)
	_, err = h.Kernel.Pool.Exec(context.Background(), `INSERT INTO ext_agents.agent_configs (agent_id, company_id, adapter_type, adapter_config, runtime_config)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (agent_id) DO UPDATE SET adapter_type = excluded.adapter_type,
		adapter_config = excluded.adapter_config, runtime_config = excluded.runtime_config`, ag.ID, companyID, adapterType, ac, rc)
	require.NoError(t, err)
	return ag
}

// wake posts a wakeup as the board and returns the 202 body.
func wake(t *testing.T, h *sdktest.Host, agentID string, body map[string]any, headers ...string) map[string]any {
	t.Helper()
	res := h.Do("POST", "/api/agents/"+agentID+"/wakeup", body, headers...)
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
	return res.Map(t)
}

// getRun reads a run through the API.
func getRun(t *testing.T, h *sdktest.Host, runID string) map[string]any {
	t.Helper()
	res := h.Do("GET", "/api/heartbeat-runs/"+runID, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	return res.Map(t)
}

// waitRun waits until the run's status is one of statuses and returns it.
func waitRun(t *testing.T, h *sdktest.Host, runID string, timeout time.Duration, statuses ...string) map[string]any {
	t.Helper()
	var run map[string]any
	sdktest.WaitFor(t, timeout, func() bool {
		run = getRun(t, h, runID)
		for _, s := range statuses {
			if run["status"] == s {
				return true
			}
		}
		return false
	}, "run "+runID+" to reach "+joinStatuses(statuses)+" (last: "+stringOf(run["status"])+")")
	return run
}

func joinStatuses(s []string) string {
	out := ""
	for i, v := range s {
		if i > 0 {
			out += "|"
		}
		out += v
	}
	return out
}

func stringOf(v any) string {
	s, _ := v.(string)
	return s
}

// invoke calls a provided method of the agents extension as the kernel.
func invoke(t *testing.T, h *sdktest.Host, method, companyID string, in any) map[string]any {
	t.Helper()
	b, err := json.Marshal(in)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := h.Supervisor.Invoke(ctx, "kernel", &hostv1.InvokeRequest{Method: method, InputJson: b, CompanyId: companyID})
	require.NoError(t, err)
	require.Nil(t, res.Error, "%v", res.Error)
	var out map[string]any
	require.NoError(t, json.Unmarshal(res.OutputJson, &out), "%s", res.OutputJson)
	return out
}

// dbString reads one string through the superuser pool.
func dbString(t *testing.T, h *sdktest.Host, sql string, args ...any) string {
	t.Helper()
	var s *string
	require.NoError(t, h.Kernel.Pool.QueryRow(context.Background(), sql, args...).Scan(&s))
	if s == nil {
		return ""
	}
	return *s
}
