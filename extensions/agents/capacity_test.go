package agents_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
	"github.com/keelhq/keel/sdktest"
)

// TestLongRunsDoNotStarveTheQueue starts more long runs than the node has job-queue workers
// (16): each run is handed to the engine, so every one of them starts, one more agent's run
// starts beside them, and another extension job on the queue still completes.
func TestLongRunsDoNotStarveTheQueue(t *testing.T) {
	t.Parallel()
	h := startAgents(t)
	ctx := context.Background()
	company := h.CreateCompany("Busy Co")
	long := map[string]any{"command": "/bin/sleep", "args": []string{"600"}}
	const n = 20
	var runs []string
	for i := range n {
		ag := hbAgent(t, h, company, fmt.Sprintf("Coder %d", i), "process", long, nil)
		runs = append(runs, wake(t, h, ag.ID, nil)["id"].(string))
	}
	for _, id := range runs {
		run := waitRun(t, h, id, 60*time.Second, "running")
		require.NotNil(t, run["processPid"], "a running run has a process: %v", run)
		require.NotNil(t, run["processStartedAt"], "%v", run)
	}

	// One more agent starts while the twenty run.
	extra := hbAgent(t, h, company, "Latecomer", "process", long, nil)
	late := wake(t, h, extra.ID, nil)["id"].(string)
	run := waitRun(t, h, late, 30*time.Second, "running")
	require.NotNil(t, run["processPid"], "%v", run)

	// A job of the queue is worked beside them.
	res, err := h.Queue.Enqueue(ctx, "agents", &hostv1.EnqueueRequest{JobKey: "reap"})
	require.NoError(t, err)
	sdktest.WaitFor(t, 30*time.Second, func() bool {
		var state string
		err := h.Kernel.Pool.QueryRow(ctx, `SELECT state FROM river.river_job WHERE id = $1`, res.JobId).Scan(&state)
		return err == nil && state == "completed"
	}, "the queued job to complete while the runs hold no worker")

	// Every run is still running, with its process.
	for _, id := range append(runs, late) {
		require.Equal(t, "running", getRun(t, h, id)["status"])
	}
	for _, id := range append(runs, late) {
		res := h.Do("POST", "/api/heartbeat-runs/"+id+"/cancel", nil)
		require.Less(t, res.Status, 300, "%s", res.Body)
	}
	for _, id := range append(runs, late) {
		waitRun(t, h, id, 30*time.Second, "cancelled")
	}
}

// TestRunQueuedUntilItsProcessExists gives an agent a command that cannot start: the run goes
// from queued to failed without ever having a process, and never shows running.
func TestRunQueuedUntilItsProcessExists(t *testing.T) {
	t.Parallel()
	h := startAgents(t)
	company := h.CreateCompany("Spawn Co")
	ag := hbAgent(t, h, company, "Ghost", "process", map[string]any{"command": "/nonexistent/agent"}, nil)
	id := wake(t, h, ag.ID, nil)["id"].(string)
	run := waitRun(t, h, id, 30*time.Second, "failed")
	require.Nil(t, run["processPid"], "%v", run)
	require.Equal(t, "spawn_failed", run["errorCode"], "%v", run)
}

// TestRunChecksOutItsIssue wakes an agent for an issue: as the run starts, the issue is
// checked out for it (in_progress, checkoutRunId = executionRunId = the run, startedAt).
func TestRunChecksOutItsIssue(t *testing.T) {
	t.Parallel()
	h := startAgents(t)
	company := h.CreateCompany("Checkout Co")
	ag := hbAgent(t, h, company, "Taker", "process", map[string]any{"command": "/bin/sleep", "args": []string{"600"}}, nil)
	res := h.Do("POST", "/api/companies/"+company+"/issues", map[string]any{"title": "Fix the build", "status": "todo"})
	require.Less(t, res.Status, 300, "%s", res.Body)
	issueID := res.Map(t)["id"].(string)
	runID := wake(t, h, ag.ID, map[string]any{"payload": map[string]any{"issueId": issueID}})["id"].(string)
	waitRun(t, h, runID, 30*time.Second, "running")
	var iss map[string]any
	sdktest.WaitFor(t, 30*time.Second, func() bool {
		iss = h.Do("GET", "/api/issues/"+issueID, nil).Map(t)
		return iss["status"] == "in_progress"
	}, "the issue to be checked out")
	require.Equal(t, runID, iss["checkoutRunId"], "%v", iss)
	require.Equal(t, runID, iss["executionRunId"], "%v", iss)
	require.Equal(t, ag.ID, iss["assigneeAgentId"], "%v", iss)
	require.NotNil(t, iss["startedAt"], "%v", iss)
	require.Equal(t, http.StatusOK, h.Do("POST", "/api/heartbeat-runs/"+runID+"/cancel", nil).Status)
	waitRun(t, h, runID, 30*time.Second, "cancelled")
}
