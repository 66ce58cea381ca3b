package agents

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/keelhq/keel/sdk"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

// The engine's jobs, all on the kernel's queue.
const (
	jobStartRuns  = "start-runs"
	jobExecuteRun = "execute-run"
	jobTimerTick  = "timer-tick"
	jobReap       = "reap"
)

// Liveness limits of the reaper.
const (
	// executorBeat is how often an executing engine touches executor_seen_at.
	executorBeat = 10 * time.Second
	// executorStale is how long without a beat makes a running run process-lost.
	executorStale = 90 * time.Second
	// unclaimedStale is how long an admitted run may wait for its execute-run job before it
	// goes back to the queue.
	unclaimedStale = 2 * time.Minute
)

func init() {
	addJobs(
		sdk.Job{Key: jobStartRuns, Description: "Start an agent's queued heartbeat runs up to its maxConcurrentRuns and the global cap. " +
			"Args {agentId}; enqueued with unique key start:<agentId> when a run is queued or finishes."},
		sdk.Job{Key: jobExecuteRun, Description: "Hand one admitted heartbeat run to this node's engine, which executes it through its " +
			"adapter; the job returns at once and holds no worker for the run's life. Args {runId}; unique key run:<runId>."},
		sdk.Job{Key: jobTimerTick, Every: "30s", Description: "Wake agents whose runtimeConfig.heartbeat interval elapsed, and " +
			"re-enqueue start-runs for agents with queued runs."},
		sdk.Job{Key: jobReap, Every: "1m", Description: "Fail running runs whose process or executor is gone (process_lost), with one automatic retry."},
	)
}

// globalMaxRuns is SERVICE_HEARTBEAT_MAX_CONCURRENT_RUNS (default 50).
func globalMaxRuns() int {
	if n, err := strconv.Atoi(os.Getenv("SERVICE_HEARTBEAT_MAX_CONCURRENT_RUNS")); err == nil && n > 0 {
		return n
	}
	return 50
}

// enqueueStart starts the agent's queued runs as soon as the caps allow. It runs
// start-runs in this process rather than through a queued job: claiming runs is already
// serialized across nodes by a database lock, and only the execution of a claimed run needs
// the queue's exactly-once delivery (execute-run). Concurrent calls for one agent coalesce
// into one more pass. Runs queued but never started here (a crash in between) are picked up
// by the reaper's sweep and by the next engine's recovery.
func (e *engine) enqueueStart(_ context.Context, agentID string) {
	e.kickMu.Lock()
	if e.kicks == nil {
		e.kicks = map[string]bool{}
	}
	if _, running := e.kicks[agentID]; running {
		e.kicks[agentID] = true // run once more when the current pass ends
		e.kickMu.Unlock()
		return
	}
	e.kicks[agentID] = false
	e.kickMu.Unlock()
	e.mu.Lock()
	if e.ctx.Err() != nil {
		e.mu.Unlock()
		e.kickMu.Lock()
		delete(e.kicks, agentID)
		e.kickMu.Unlock()
		return
	}
	e.wg.Add(1)
	e.mu.Unlock()
	go func() {
		defer e.wg.Done()
		for {
			if err := e.startRunsJob(e.ctx, agentID); err != nil && e.ctx.Err() == nil {
				e.a.log.Warn("error starting runs", "agent", agentID, "error", err)
			}
			e.kickMu.Lock()
			if again := e.kicks[agentID]; again && e.ctx.Err() == nil {
				e.kicks[agentID] = false
				e.kickMu.Unlock()
				continue
			}
			delete(e.kicks, agentID)
			e.kickMu.Unlock()
			return
		}
	}()
}

// startRunsJob runs start-runs until nothing more starts, then looks once more after a
// short pause, for a run that becomes startable just then (a run of the agent finishing).
func (e *engine) startRunsJob(ctx context.Context, agentID string) error {
	rechecked := false
	for range 100 {
		n, err := e.startRuns(ctx, agentID)
		if err != nil {
			return err
		}
		if n > 0 {
			rechecked = false
			continue
		}
		if rechecked {
			return nil
		}
		rechecked = true
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// startRuns admits the agent's oldest queued runs while the agent has fewer than
// maxConcurrentRuns live runs and the instance fewer than the global cap, then enqueues an
// execute-run job for each. A live run is a running one or a queued one already admitted
// (claimed_at set), which stays queued until its adapter has started it. The admission is
// one conditional UPDATE under a transaction-scoped advisory lock, so concurrent workers
// never over-start.
func (e *engine) startRuns(ctx context.Context, agentID string) (int, error) {
	a := e.a
	if !isUUID(agentID) {
		return 0, nil
	}
	rc, err := a.runtimeConfig(ctx, agentID)
	if err != nil {
		return 0, err
	}
	limit := heartbeatPolicy{}.maxConcurrent()
	if rc != nil {
		limit = rc.Heartbeat.maxConcurrent()
	}
	tx, err := a.pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("error starting runs: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('agents.start-runs'))`); err != nil {
		return 0, fmt.Errorf("error locking run starts: %w", err)
	}
	if err := e.promoteDueRetries(ctx, tx, agentID); err != nil {
		return 0, err
	}
	var agentLive, allLive int
	if err := tx.QueryRow(ctx, `SELECT count(*) FILTER (WHERE agent_id = $1), count(*) FROM heartbeat_runs
		WHERE status = 'running' OR (status = 'queued' AND claimed_at IS NOT NULL)`,
		agentID).Scan(&agentLive, &allLive); err != nil {
		return 0, fmt.Errorf("error counting live runs: %w", err)
	}
	n := min(limit-agentLive, globalMaxRuns()-allLive)
	if n <= 0 {
		return 0, nil
	}
	rows, err := tx.Query(ctx, `UPDATE heartbeat_runs SET claimed_at = now(), updated_at = now()
		WHERE id IN (SELECT id FROM heartbeat_runs WHERE agent_id = $1 AND status = 'queued' AND claimed_at IS NULL
			ORDER BY created_at, id LIMIT $2)
		AND status = 'queued' AND claimed_at IS NULL RETURNING id`, agentID, n)
	if err != nil {
		return 0, fmt.Errorf("error starting runs: %w", err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, fmt.Errorf("error starting runs: %w", err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("error starting runs: %w", err)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	if _, err := tx.Exec(ctx, `UPDATE agent_wakeup_requests SET status = 'claimed', claimed_at = now()
		WHERE run_id = ANY($1) AND status = 'queued'`, ids); err != nil {
		return 0, fmt.Errorf("error claiming wakes: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("error starting runs: %w", err)
	}
	for _, id := range ids {
		args, _ := json.Marshal(map[string]string{"runId": id})
		if _, err := a.host.Jobs.Enqueue(ctx, &hostv1.EnqueueRequest{JobKey: jobExecuteRun, ArgsJson: args, UniqueKey: "run:" + id, MaxAttempts: 1}); err != nil {
			// The reaper hands the run back to the queue once it has waited unclaimedStale.
			a.log.Warn("error enqueueing execute-run", "run", id, "error", err)
		}
	}
	return len(ids), nil
}

// timerTick wakes agents whose heartbeat timer is due and sweeps agents with queued runs.
func (e *engine) timerTick(ctx context.Context) error {
	a := e.a
	rows, err := a.pool.Query(ctx, `SELECT agent_id, company_id, runtime_config, last_heartbeat_at FROM agent_configs
		WHERE coalesce(runtime_config->'heartbeat'->>'enabled', 'false') = 'true'`)
	if err != nil {
		return fmt.Errorf("error listing timed agents: %w", err)
	}
	type due struct{ agentID, companyID string }
	var wakes []due
	for rows.Next() {
		var agentID, companyID string
		var raw []byte
		var last *time.Time
		if err := rows.Scan(&agentID, &companyID, &raw, &last); err != nil {
			rows.Close()
			return fmt.Errorf("error reading timed agent: %w", err)
		}
		var rc agentRuntimeConfig
		_ = json.Unmarshal(raw, &rc)
		if rc.Heartbeat.IntervalSec <= 0 {
			continue
		}
		if last == nil || time.Since(*last) >= time.Duration(rc.Heartbeat.IntervalSec)*time.Second {
			wakes = append(wakes, due{agentID, companyID})
		}
	}
	rows.Close()
	for _, w := range wakes {
		if _, err := e.wakeup(ctx, &wakeInput{AgentID: w.agentID, CompanyID: w.companyID, Source: "timer", TriggerDetail: "system",
			Reason: "heartbeat_timer", Actor: sdk.SystemActor()}); err != nil {
			a.log.Warn("error waking agent on timer", "agent", w.agentID, "error", err)
		}
	}
	return e.sweepQueued(ctx)
}

// sweepQueued enqueues start-runs for every agent with queued runs or due scheduled retries.
func (e *engine) sweepQueued(ctx context.Context) error {
	rows, err := e.a.pool.Query(ctx, `SELECT DISTINCT agent_id::text FROM heartbeat_runs
		WHERE status = 'queued' OR (status = 'scheduled_retry' AND scheduled_retry_at <= now())`)
	if err != nil {
		return fmt.Errorf("error listing agents with queued runs: %w", err)
	}
	var agents []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err == nil {
			agents = append(agents, id)
		}
	}
	rows.Close()
	for _, id := range agents {
		e.enqueueStart(ctx, id)
	}
	return rows.Err()
}

// lostReason says why a running run is process-lost, or "" when it is not.
func (e *engine) lostReason(run *heartbeatRun) string {
	if e.isExecuting(run.ID) {
		return ""
	}
	if run.executorID != nil && e.executorGone(*run.executorID, run.ID) {
		return "the engine executing it is gone"
	}
	if run.executorSeenAt != nil && time.Since(*run.executorSeenAt) > executorStale {
		return "its executor stopped reporting"
	}
	if run.executorID == nil && run.ProcessPID != nil && *run.ProcessPID > 0 &&
		(run.executorHost == nil || *run.executorHost == e.hostname) && !pidAlive(*run.ProcessPID) {
		return fmt.Sprintf("process %d is gone", *run.ProcessPID)
	}
	if run.executorID == nil && (run.ProcessPID == nil || *run.ProcessPID == 0) && run.StartedAt != nil && time.Since(*run.StartedAt) > unclaimedStale {
		return "no executor picked it up"
	}
	return ""
}

// strandedReason says why an admitted run that has not started (queued, claimed_at set) will
// not start where it is, or "" when it may: its engine is gone, or no engine took it.
func (e *engine) strandedReason(run *heartbeatRun) string {
	switch {
	case e.isExecuting(run.ID):
		return ""
	case run.executorID != nil && e.executorGone(*run.executorID, run.ID):
		return "the engine starting it is gone"
	case run.executorSeenAt != nil && time.Since(*run.executorSeenAt) > executorStale:
		return "its executor stopped reporting"
	case run.executorID == nil && run.claimedAt != nil && time.Since(*run.claimedAt) > unclaimedStale:
		return "no executor picked it up"
	}
	return ""
}

// reap fails running runs whose process is gone (after killing what is left of their
// process on this machine) and returns their ids. Admitted runs that never started and
// whose engine is gone go back to the queue: no process existed, so no retry is spent.
func (e *engine) reap(ctx context.Context) ([]string, error) {
	runs, err := e.a.runsQuery(ctx, `SELECT `+runColumns+` FROM heartbeat_runs
		WHERE status = 'running' OR (status = 'queued' AND claimed_at IS NOT NULL) ORDER BY started_at, created_at`)
	if err != nil {
		return nil, err
	}
	reaped := []string{}
	for _, run := range runs {
		if run.Status == runQueued {
			if reason := e.strandedReason(run); reason != "" {
				e.a.log.Info("admitted run never started; back to the queue", "run", run.ID, "reason", reason)
				e.unclaim(ctx, run.ID)
			}
			continue
		}
		reason := e.lostReason(run)
		if reason == "" {
			continue
		}
		e.killSurvivors(run)
		ok, err := e.markLost(ctx, run, reason)
		if err != nil {
			return reaped, err
		}
		if ok {
			reaped = append(reaped, run.ID)
		}
	}
	return reaped, nil
}

// markLost fails a running run with error_code process_lost and, for a run that was not
// itself a process-loss retry, queues its one automatic retry (wake reason process_lost_retry).
func (e *engine) markLost(ctx context.Context, run *heartbeatRun, reason string) (bool, error) {
	a := e.a
	msg := "Process lost: " + reason
	tag, err := a.pool.Exec(ctx, `UPDATE heartbeat_runs SET status = 'failed', error = $2, error_code = 'process_lost',
		started_at = coalesce(started_at, now()), finished_at = now(), updated_at = now()
		WHERE id = $1 AND (status = 'running' OR (status = 'queued' AND claimed_at IS NOT NULL))`, run.ID, msg)
	if err != nil {
		return false, fmt.Errorf("error failing lost run %s: %w", run.ID, err)
	}
	if tag.RowsAffected() == 0 {
		return false, nil
	}
	a.log.Info("heartbeat run process lost", "run", run.ID, "reason", reason)
	_, _ = a.pool.Exec(ctx, `UPDATE agent_wakeup_requests SET status = 'failed', finished_at = now(), error = 'process_lost'
		WHERE run_id = $1 AND status IN ('queued', 'claimed')`, run.ID)
	a.systemEvent(ctx, run.ID, msg)
	a.finalizeLog(ctx, run.ID)
	if err := a.host.LogActivity(ctx, &sdk.ActivityEntry{CompanyID: run.CompanyID, Action: "heartbeat.run_finished",
		EntityType: "heartbeat_run", EntityID: run.ID,
		Details: map[string]any{"agentId": run.AgentID, "status": runFailed, "errorCode": "process_lost"}}); err != nil {
		a.log.Warn("error logging heartbeat.run_finished", "error", err)
	}
	if err := e.scheduleRetry(ctx, run, "process_lost", processLossRetryDelay); err != nil {
		return true, err
	}
	e.settleAgentStatus(ctx, run.AgentID, false)
	e.enqueueStart(ctx, run.AgentID)
	return true, nil
}

// processLossRetryDelay is how long the retry of a process-lost run waits.
const processLossRetryDelay = 2 * time.Second

// scheduleRetry gives a process-lost or interrupted run its one automatic retry (wake
// reason process_lost_retry): a run in scheduled_retry that joins the queue after delay.
// A run that is itself a retry gets none.
func (e *engine) scheduleRetry(ctx context.Context, run *heartbeatRun, reason string, delay time.Duration) error {
	if run.ProcessLossRetryCount >= 1 {
		return nil
	}
	payload := map[string]any{}
	if p, ok := run.ContextSnapshot["payload"].(map[string]any); ok {
		payload = p
	}
	issueID, _ := run.ContextSnapshot["issueId"].(string)
	if issueID != "" {
		payload["issueId"] = issueID
	}
	detail := ""
	if run.TriggerDetail != nil {
		detail = *run.TriggerDetail
	}
	at := time.Now().Add(delay).UTC()
	retry, err := e.queueRun(ctx, &wakeInput{AgentID: run.AgentID, CompanyID: run.CompanyID, Source: run.InvocationSource,
		TriggerDetail: detail, Reason: "process_lost_retry", Payload: payload, Actor: sdk.SystemActor(),
		RetryOf: run.ID, RetryCount: run.ProcessLossRetryCount + 1, RetryAt: at, RetryReason: reason}, issueID)
	if err != nil {
		return fmt.Errorf("error scheduling the retry of run %s: %w", run.ID, err)
	}
	e.a.log.Info("scheduled retry", "run", run.ID, "retry", retry.ID, "reason", reason, "at", at)
	args, _ := json.Marshal(map[string]string{"agentId": run.AgentID})
	if _, err := e.a.host.Jobs.Enqueue(ctx, &hostv1.EnqueueRequest{JobKey: jobStartRuns, ArgsJson: args,
		UniqueKey: "retry:" + retry.ID, RunAt: at.Add(50 * time.Millisecond).Format(time.RFC3339Nano)}); err != nil {
		// The reaper's sweep promotes it later.
		e.a.log.Warn("error enqueueing the retry's start", "retry", retry.ID, "error", err)
	}
	return nil
}

// promoteDueRetries moves an agent's scheduled retries whose time has come into the queue.
func (e *engine) promoteDueRetries(ctx context.Context, q interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, agentID string) error {
	if _, err := q.Exec(ctx, `UPDATE heartbeat_runs SET status = 'queued', updated_at = now()
		WHERE agent_id = $1 AND status = 'scheduled_retry' AND scheduled_retry_at <= now()`, agentID); err != nil {
		return fmt.Errorf("error promoting scheduled retries: %w", err)
	}
	return nil
}

// recover runs at engine start: it reaps runs left running by a dead executor and resumes
// queued runs.
func (e *engine) recover(ctx context.Context) error {
	if _, err := e.reap(ctx); err != nil {
		return err
	}
	return e.sweepQueued(ctx)
}
