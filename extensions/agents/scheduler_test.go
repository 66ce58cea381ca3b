package agents_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

// TestConcurrencyCap wakes an agent with maxConcurrentRuns 1 three times (distinct issues,
// so nothing coalesces): the runs execute one at a time, in order.
func TestConcurrencyCap(t *testing.T) {
	t.Parallel()
	h := startAgents(t)
	company := h.CreateCompany("Cap Co")
	ag := hbAgent(t, h, company, "Serial", "fake", map[string]any{"sleepMs": 700},
		map[string]any{"heartbeat": map[string]any{"maxConcurrentRuns": 1}})
	var ids []string
	for range 3 {
		ids = append(ids, wake(t, h, ag.ID, map[string]any{"payload": map[string]any{"issueId": uuid.NewString()}})["id"].(string))
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var running, finished int
		require.NoError(t, h.Kernel.Pool.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE status = 'running'),
			count(*) FILTER (WHERE status = 'succeeded') FROM ext_agents.heartbeat_runs WHERE agent_id = $1`, ag.ID).Scan(&running, &finished))
		require.LessOrEqual(t, running, 1)
		if finished == 3 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	var prevFinish time.Time
	for _, id := range ids {
		run := waitRun(t, h, id, time.Second, "succeeded")
		started, err := time.Parse(time.RFC3339Nano, run["startedAt"].(string))
		require.NoError(t, err)
		finished, err := time.Parse(time.RFC3339Nano, run["finishedAt"].(string))
		require.NoError(t, err)
		require.False(t, started.Before(prevFinish), "run %s started before the previous one finished", id)
		prevFinish = finished
	}
}

// TestQueuedRunResumesAfterRestart stops a host, leaves a queued run in the database, and
// starts a new host on the same database: the run proceeds.
func TestQueuedRunResumesAfterRestart(t *testing.T) {
	t.Parallel()
	h := startAgents(t)
	company := h.CreateCompany("Restart Co")
	ag := hbAgent(t, h, company, "Phoenix", "fake", nil, nil)
	// A first run migrates nothing new but proves the agent works.
	first := wake(t, h, ag.ID, nil)
	waitRun(t, h, first["id"].(string), 20*time.Second, "succeeded")
	h.Stop(context.Background())

	runID := uuid.NewString()
	conn, err := pgx.Connect(context.Background(), h.DatabaseURL)
	require.NoError(t, err)
	_, err = conn.Exec(context.Background(), `INSERT INTO ext_agents.heartbeat_runs (id, company_id, agent_id, invocation_source, status, context_snapshot)
		VALUES ($1, $2, $3, 'on_demand', 'queued', '{"wakeReason":"left_behind"}')`, runID, company, ag.ID)
	require.NoError(t, err)
	require.NoError(t, conn.Close(context.Background()))

	h2 := sdktest.Start(t, sdktest.Options{Builtins: true, DatabaseURL: h.DatabaseURL})
	done := waitRun(t, h2, runID, 30*time.Second, "succeeded", "failed")
	require.Equal(t, "succeeded", done["status"], "%v", done)
}

// TestProcessLossRetry puts a running run with a dead pid in the table and runs the reaper:
// the run fails with process_lost and gets one retry; a lost retry is not retried again.
func TestProcessLossRetry(t *testing.T) {
	t.Parallel()
	h := startAgents(t)
	ctx := context.Background()
	company := h.CreateCompany("Reap Co")
	ag := hbAgent(t, h, company, "Lazarus", "fake", nil, nil)

	cmd := exec.Command("/bin/true")
	require.NoError(t, cmd.Run())
	deadPID := cmd.Process.Pid
	issueID := uuid.NewString()

	insertLost := func(retryCount int) string {
		id := uuid.NewString()
		snap, _ := json.Marshal(map[string]any{"issueId": issueID, "wakeReason": "issue_assigned"})
		_, err := h.Kernel.Pool.Exec(ctx, `INSERT INTO ext_agents.heartbeat_runs (id, company_id, agent_id, invocation_source, status,
			started_at, process_pid, context_snapshot, process_loss_retry_count) VALUES ($1, $2, $3, 'assignment', 'running', now(), $4, $5, $6)`,
			id, company, ag.ID, deadPID, snap, retryCount)
		require.NoError(t, err)
		return id
	}

	lost := insertLost(0)
	out := invoke(t, h, "agents.reap", company, map[string]any{})
	require.Contains(t, out["reaped"], lost)
	run := getRun(t, h, lost)
	require.Equal(t, "failed", run["status"])
	require.Equal(t, "process_lost", run["errorCode"])
	retryID := dbString(t, h, `SELECT id::text FROM ext_agents.heartbeat_runs WHERE retry_of_run_id = $1`, lost)
	require.NotEmpty(t, retryID)
	scheduled := getRun(t, h, retryID)
	require.Equal(t, "scheduled_retry", scheduled["status"], "the retry waits for its time")
	require.Equal(t, "process_lost", scheduled["scheduledRetryReason"])
	require.EqualValues(t, 1, scheduled["scheduledRetryAttempt"])
	require.NotNil(t, scheduled["scheduledRetryAt"])
	retry := waitRun(t, h, retryID, 20*time.Second, "succeeded")
	require.EqualValues(t, 1, retry["processLossRetryCount"])
	require.Equal(t, "process_lost_retry", retry["contextSnapshot"].(map[string]any)["wakeReason"])
	require.Equal(t, issueID, retry["contextSnapshot"].(map[string]any)["issueId"])

	// A lost retry is failed without another retry.
	lostAgain := insertLost(1)
	out = invoke(t, h, "agents.reap", company, map[string]any{})
	require.Contains(t, out["reaped"], lostAgain)
	require.Equal(t, "", dbString(t, h, `SELECT max(id::text) FROM ext_agents.heartbeat_runs WHERE retry_of_run_id = $1`, lostAgain))

	// A running run whose process is alive is left alone.
	alive := exec.Command("/bin/sleep", "30")
	require.NoError(t, alive.Start())
	t.Cleanup(func() { _ = alive.Process.Kill(); _ = alive.Wait() })
	liveID := uuid.NewString()
	_, err := h.Kernel.Pool.Exec(ctx, `INSERT INTO ext_agents.heartbeat_runs (id, company_id, agent_id, status, started_at, process_pid)
		VALUES ($1, $2, $3, 'running', now(), $4)`, liveID, company, ag.ID, alive.Process.Pid)
	require.NoError(t, err)
	out = invoke(t, h, "agents.reap", company, map[string]any{})
	require.NotContains(t, out["reaped"], liveID)
	require.Equal(t, "running", getRun(t, h, liveID)["status"])
}

// TestTimerWakes enables a 1 s heartbeat: the timer tick (every 30 s) wakes the agent.
func TestTimerWakes(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the 30 s timer tick")
	}
	t.Parallel()
	h := startAgents(t)
	company := h.CreateCompany("Timer Co")
	ag := hbAgent(t, h, company, "Ticker", "fake", nil, map[string]any{"heartbeat": map[string]any{"enabled": true, "intervalSec": 1}})
	sdktest.WaitFor(t, 75*time.Second, func() bool {
		return dbString(t, h, `SELECT max(status) FROM ext_agents.heartbeat_runs WHERE agent_id = $1 AND invocation_source = 'timer'`, ag.ID) == "succeeded"
	}, "a timer run")
}

// TestRunningRunInterruptedOnRestart stops a host while a run executes: the run is
// recorded as interrupted with its one retry scheduled, which the next host runs.
func TestRunningRunInterruptedOnRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the host to stop")
	}
	t.Parallel()
	h := startAgents(t)
	company := h.CreateCompany("Crash Co")
	ag := hbAgent(t, h, company, "Crasher", "fake", map[string]any{"sleepMs": 120000}, nil)
	run := wake(t, h, ag.ID, nil)
	runID := run["id"].(string)
	waitRun(t, h, runID, 20*time.Second, "running")
	// Wait until the adapter executes it (its spawn event recorded the pid).
	sdktest.WaitFor(t, 20*time.Second, func() bool { return getRun(t, h, runID)["processPid"] != nil }, "the run to execute")
	h.Stop(context.Background())

	conn, err := pgx.Connect(context.Background(), h.DatabaseURL)
	require.NoError(t, err)
	var status, code, retryStatus, retryReason string
	require.NoError(t, conn.QueryRow(context.Background(), `SELECT status, error_code FROM ext_agents.heartbeat_runs WHERE id = $1`,
		runID).Scan(&status, &code))
	require.Equal(t, "interrupted", status)
	require.Equal(t, "interrupted", code)
	require.NoError(t, conn.QueryRow(context.Background(), `SELECT status, scheduled_retry_reason FROM ext_agents.heartbeat_runs
		WHERE retry_of_run_id = $1`, runID).Scan(&retryStatus, &retryReason))
	require.Equal(t, "scheduled_retry", retryStatus)
	require.Equal(t, "interrupted", retryReason)
	_, err = conn.Exec(context.Background(), `UPDATE ext_agents.agent_configs SET adapter_config = '{}' WHERE agent_id = $1`, ag.ID)
	require.NoError(t, err)
	require.NoError(t, conn.Close(context.Background()))

	h2 := sdktest.Start(t, sdktest.Options{Builtins: true, DatabaseURL: h.DatabaseURL})
	var retryID string
	sdktest.WaitFor(t, 10*time.Second, func() bool {
		retryID = dbString(t, h2, `SELECT max(id::text) FROM ext_agents.heartbeat_runs WHERE retry_of_run_id = $1`, runID)
		return retryID != ""
	}, "the retry")
	waitRun(t, h2, retryID, 30*time.Second, "succeeded")
}

// TestAdapterDeathIsProcessLoss kills the adapter's process under a run: the run fails as
// process_lost and its one retry runs on a restarted adapter.
func TestAdapterDeathIsProcessLoss(t *testing.T) {
	t.Parallel()
	h := startAgents(t)
	company := h.CreateCompany("Kill Co")
	ag := hbAgent(t, h, company, "Victim", "fake", map[string]any{"sleepMs": 60000}, nil)
	run := wake(t, h, ag.ID, nil)
	runID := run["id"].(string)
	var pid int
	sdktest.WaitFor(t, 20*time.Second, func() bool {
		p, ok := getRun(t, h, runID)["processPid"].(float64)
		pid = int(p)
		return ok
	}, "the adapter's pid")
	_, err := h.Kernel.Pool.Exec(context.Background(), `UPDATE ext_agents.agent_configs SET adapter_config = '{}' WHERE agent_id = $1`, ag.ID)
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	lost := waitRun(t, h, runID, 20*time.Second, "failed")
	require.Equal(t, "process_lost", lost["errorCode"])
	var retryID string
	sdktest.WaitFor(t, 10*time.Second, func() bool {
		retryID = dbString(t, h, `SELECT max(id::text) FROM ext_agents.heartbeat_runs WHERE retry_of_run_id = $1`, runID)
		return retryID != ""
	}, "the retry")
	waitRun(t, h, retryID, 30*time.Second, "succeeded")
}
