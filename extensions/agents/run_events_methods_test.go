package agents_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	extensionv1 "github.com/keelhq/keel/sdk/proto/extension/v1"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

// TestRunEventsListMethod reads a finished process run's events through
// agents.runEventsList: its stdout among them, in sequence, paged by afterSeq, finished set;
// a run of another company is not found and a bad page size is a 400.
func TestRunEventsListMethod(t *testing.T) {
	t.Parallel()
	h := startAgents(t)
	company := h.CreateCompany("Run Events Co")
	other := h.CreateCompany("Run Events Other")
	ag := hbAgent(t, h, company, "Talker", "process", map[string]any{"command": "/bin/sh", "args": []string{"-c", "echo first line; echo second line"}}, nil)
	run := wake(t, h, ag.ID, map[string]any{"source": "on_demand"})
	runID := run["id"].(string)
	waitRun(t, h, runID, 60*time.Second, "succeeded")

	call := func(companyID string, in map[string]any) (map[string]any, *extensionv1.Error) {
		b, err := json.Marshal(in)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := h.Supervisor.Invoke(ctx, "kernel", &hostv1.InvokeRequest{Method: "agents.runEventsList", InputJson: b,
			CompanyId: companyID, Actor: &extensionv1.Actor{Type: "system"}})
		require.NoError(t, err)
		if res.Error != nil {
			return nil, res.Error
		}
		var out map[string]any
		require.NoError(t, json.Unmarshal(res.OutputJson, &out))
		return out, nil
	}
	all, e := call(company, map[string]any{"runId": runID})
	require.Nil(t, e, "%v", e)
	require.Equal(t, true, all["finished"])
	require.Equal(t, "succeeded", all["status"])
	events := all["events"].([]any)
	var stdout strings.Builder
	last := -1.0
	for _, ev := range events {
		m := ev.(map[string]any)
		require.Greater(t, m["seq"].(float64), last, "events come in sequence")
		last = m["seq"].(float64)
		if m["stream"] == "stdout" && m["message"] != nil {
			stdout.WriteString(m["message"].(string))
		}
	}
	require.Contains(t, stdout.String(), "first line\nsecond line")

	first := events[0].(map[string]any)["seq"].(float64)
	page, e := call(company, map[string]any{"runId": runID, "afterSeq": first, "limit": 1})
	require.Nil(t, e, "%v", e)
	require.Len(t, page["events"], 1)
	require.Equal(t, events[1].(map[string]any)["seq"], page["events"].([]any)[0].(map[string]any)["seq"])

	for name, tc := range map[string]struct {
		company string
		in      map[string]any
		status  int32
	}{
		"other company": {other, map[string]any{"runId": runID}, http.StatusNotFound},
		"no company":    {"", map[string]any{"runId": runID}, http.StatusNotFound},
		"unknown run":   {company, map[string]any{"runId": uuid.NewString()}, http.StatusNotFound},
		"bad run id":    {company, map[string]any{"runId": "x"}, http.StatusNotFound},
		"bad limit":     {company, map[string]any{"runId": runID, "limit": 501}, http.StatusBadRequest},
		"text afterSeq": {company, map[string]any{"runId": runID, "afterSeq": "one"}, http.StatusBadRequest},
	} {
		_, e := call(tc.company, tc.in)
		require.NotNil(t, e, name)
		require.EqualValues(t, tc.status, e.Status, "%s: %v", name, e)
	}
}
