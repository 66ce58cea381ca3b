package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/adapter"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

// runOutcome is what the executor stores when a run finishes.
type runOutcome struct {
	// Adapter is the adapter type that ran it, empty when none was reached.
	Adapter   string
	Status    string
	Error     string
	ErrorCode string
	ExitCode  *int
	Signal    string
	PID       int
	Usage     map[string]any
	Result    json.RawMessage
	SessionID string
	// SessionParams, SessionDisplayID and ClearSession are the adapter's word on the task
	// session (saveTaskSession).
	SessionParams    json.RawMessage
	SessionDisplayID string
	ClearSession     bool
	CostEvent        map[string]any
	BilledCent       int64
	// AdapterLost says the adapter's process went away mid-run (the run is process-lost).
	AdapterLost bool
}

// executeRunJob takes an admitted run for this engine, hands it to a supervised goroutine
// of the engine and returns: the job holds a queue worker for milliseconds, not for the
// run's life, so wakes, schedules, event delivery and other extensions' jobs never wait for
// runs. Run capacity is the run caps start-runs applies (maxConcurrentRuns and
// SERVICE_HEARTBEAT_MAX_CONCURRENT_RUNS). The run row is the truth: executor_id names this
// engine (so exactly one engine executes the run, across nodes) and executor_seen_at beats
// while it executes, so the reaper and a restarted node's recovery settle it if the engine
// goes away. A run another engine already took is left alone.
func (e *engine) executeRunJob(ctx context.Context, runID string) error {
	a := e.a
	if !isUUID(runID) {
		return nil
	}
	run, err := scanRun(a.pool.QueryRow(ctx, `UPDATE heartbeat_runs SET executor_id = $2, executor_host = $3, executor_seen_at = now(),
		updated_at = now() WHERE id = $1 AND status = 'queued' AND claimed_at IS NOT NULL AND executor_id IS NULL
		RETURNING `+runColumns, runID, e.id, e.hostname))
	if err != nil {
		a.log.Debug("execute-run: run not claimable", "run", runID, "error", err)
		return nil
	}
	runCtx, cancel := context.WithCancel(e.ctx)
	if !e.track(run.ID, cancel) {
		cancel()
		// Stopping: give the run back for the next engine to start.
		e.unclaim(context.WithoutCancel(ctx), run.ID)
		return nil
	}
	go func() {
		defer e.untrack(run.ID)
		defer cancel()
		e.execute(runCtx, run, func() bool { return e.ctx.Err() != nil })
	}()
	return nil
}

// unclaim hands an admitted run that has not started back to the queue (it no longer
// counts against the caps) and kicks start-runs for its agent.
func (e *engine) unclaim(ctx context.Context, runID string) bool {
	a := e.a
	var agentID string
	err := a.pool.QueryRow(ctx, `UPDATE heartbeat_runs SET claimed_at = NULL, executor_id = NULL, executor_host = NULL,
		executor_seen_at = NULL, updated_at = now() WHERE id = $1 AND status = 'queued' RETURNING agent_id::text`, runID).Scan(&agentID)
	if err != nil {
		return false
	}
	_, _ = a.pool.Exec(ctx, `UPDATE agent_wakeup_requests SET status = 'queued', claimed_at = NULL WHERE run_id = $1 AND status = 'claimed'`, runID)
	e.enqueueStart(ctx, agentID)
	return true
}

// execute runs one claimed run to completion and stores its outcome. When shuttingDown
// reports true once the adapter call returns, the engine is stopping: the run is left
// running for the next engine's recovery to fail as process-lost (and retry), rather than
// being recorded as cancelled.
func (e *engine) execute(ctx context.Context, run *heartbeatRun, shuttingDown func() bool) {
	a := e.a
	// While the run executes: beat executor_seen_at, and watch for a cancel recorded by
	// another node (which cannot reach this node's adapter), stopping the run here.
	beatCtx, stopBeat := context.WithCancel(ctx)
	go e.watchRun(beatCtx, run)
	out := e.invokeAdapter(ctx, run)
	stopBeat()
	defer e.secrets.forget(run.ID)
	if len(out.Result) > 0 {
		out.Result = e.secrets.redactJSON(run.ID, out.Result)
	}
	out.Error = e.secrets.redact(run.ID, out.Error)
	if out.AdapterLost {
		// The adapter died under the run: during a shutdown the engine stops next, so wait
		// a moment to tell the two apart.
		deadline := time.Now().Add(3 * time.Second)
		for !shuttingDown() && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if shuttingDown() {
		e.interrupt(run, out.Adapter)
		return
	}
	// Store the outcome even when the run's context was cancelled.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if out.AdapterLost {
		if fresh, err := a.runGet(sctx, a.pool, run.ID); err == nil && fresh != nil {
			run = fresh
			e.killSurvivors(run)
		}
		if _, err := e.markLost(sctx, run, "the adapter process is gone"); err != nil {
			a.log.Warn("error failing lost run", "run", run.ID, "error", err)
		}
		return
	}
	e.finish(sctx, run, out)
}

// cancelPoll is how often an executing run is checked for a cancel recorded elsewhere.
const cancelPoll = time.Second

// watchRun beats executor_seen_at every executorBeat and, every cancelPoll, looks for the
// run turned cancelled by a cancel served on another node; it then tells this node's
// adapter to stop the run and cancels the adapter call.
func (e *engine) watchRun(ctx context.Context, run *heartbeatRun) {
	a := e.a
	t := time.NewTicker(cancelPoll)
	defer t.Stop()
	lastBeat := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if time.Since(lastBeat) >= executorBeat {
			lastBeat = time.Now()
			_, _ = a.pool.Exec(ctx, `UPDATE heartbeat_runs SET executor_seen_at = now() WHERE id = $1 AND executor_id = $2`, run.ID, e.id)
		}
		var status string
		if err := a.pool.QueryRow(ctx, `SELECT status FROM heartbeat_runs WHERE id = $1`, run.ID).Scan(&status); err != nil || status != runCancelled {
			continue
		}
		a.log.Info("run cancelled elsewhere; stopping it here", "run", run.ID)
		e.signalAdapterCancel(ctx, run)
		e.cancelLocal(run.ID)
		return
	}
}

// signalAdapterCancel asks the run's adapter on this node to stop the run.
func (e *engine) signalAdapterCancel(ctx context.Context, run *heartbeatRun) bool {
	a := e.a
	adapterType := ""
	if run.AdapterType != nil {
		adapterType = *run.AdapterType
	} else if err := a.pool.QueryRow(ctx, `SELECT coalesce(adapter_type, '') FROM heartbeat_runs WHERE id = $1`, run.ID).Scan(&adapterType); err != nil {
		return false
	}
	if adapterType == "" {
		return false
	}
	key := adapter.ExtensionKey(adapterType)
	if pinned, ok := e.pins.Load(run.ID); ok {
		key = pinned.(string) // the adapter the run started on, whatever the registry says now
	}
	var res adapter.CancelResult
	err := a.host.Call(ctx, adapter.MethodOf(key, adapter.MethodCancel), sdk.SystemActor(), run.CompanyID,
		adapter.CancelRequest{RunID: run.ID}, &res)
	if err != nil {
		a.log.Warn("error cancelling run in adapter", "run", run.ID, "error", err)
		return false
	}
	return res.Cancelled
}

// interrupt records a run that keel stopped under it (a graceful shutdown cancelled its
// adapter call) as interrupted and schedules its one retry, which the next engine to start
// picks up. If the database is already unreachable the run stays running and the next
// engine's recovery fails it as process-lost instead.
func (e *engine) interrupt(run *heartbeatRun, adapterType string) {
	a := e.a
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if e.unclaim(ctx, run.ID) {
		a.log.Info("engine stopping before the run started; handed it back to the queue", "run", run.ID)
		return
	}
	msg := "Interrupted: keel stopped while the run was executing"
	tag, err := a.pool.Exec(ctx, `UPDATE heartbeat_runs SET status = 'interrupted', error = $2, error_code = 'interrupted',
		finished_at = now(), updated_at = now() WHERE id = $1 AND status = 'running'`, run.ID, msg)
	if err != nil || tag.RowsAffected() == 0 {
		a.log.Info("engine stopping; leaving run for recovery", "run", run.ID, "error", err)
		return
	}
	a.log.Info("heartbeat run interrupted by shutdown", "run", run.ID)
	a.metrics.runFinished("interrupted", adapterType)
	_, _ = a.pool.Exec(ctx, `UPDATE agent_wakeup_requests SET status = 'failed', finished_at = now(), error = 'interrupted'
		WHERE run_id = $1 AND status IN ('queued', 'claimed')`, run.ID)
	a.systemEvent(ctx, run.ID, msg)
	a.finalizeLog(ctx, run.ID)
	if err := a.host.LogActivity(ctx, &sdk.ActivityEntry{CompanyID: run.CompanyID, Action: "heartbeat.run_finished",
		EntityType: "heartbeat_run", EntityID: run.ID,
		Details: map[string]any{"agentId": run.AgentID, "status": runInterrupted, "errorCode": "interrupted"}}); err != nil {
		a.log.Debug("error logging heartbeat.run_finished during shutdown", "error", err)
	}
	if err := e.scheduleRetry(ctx, run, "interrupted", 0); err != nil {
		a.log.Warn("error scheduling the retry of an interrupted run", "run", run.ID, "error", err)
	}
	e.settleAgentStatus(ctx, run.AgentID, false)
}

// adapterGone reports whether a call failed because the adapter extension's process went
// away (the host answers extension_unavailable or extension_error).
func adapterGone(err error) bool {
	var e *sdk.Error
	return errors.As(err, &e) && (e.Code == "extension_unavailable" || e.Code == "extension_error")
}

// invokeAdapter prepares the run (config, agent status, JWT, env, secrets) and calls the
// adapter's execute.
func (e *engine) invokeAdapter(ctx context.Context, run *heartbeatRun) (out *runOutcome) {
	a := e.a
	fail := func(code, msg string) *runOutcome { return &runOutcome{Status: runFailed, ErrorCode: code, Error: msg} }
	cfg, err := a.agentConfigGet(ctx, run.AgentID)
	if err != nil {
		return fail("internal_error", err.Error())
	}
	if cfg == nil {
		return fail("agent_not_configured", "Agent has no adapter configuration")
	}
	defer func() { out.Adapter = cfg.AdapterType }()
	defer a.metrics.executingRun(cfg.AdapterType)()
	_, _ = a.pool.Exec(ctx, `UPDATE heartbeat_runs SET adapter_type = $2 WHERE id = $1`, run.ID, cfg.AdapterType)
	agent, err := a.agentIdentity(ctx, run.AgentID)
	if err != nil {
		return fail("agent_not_found", "Agent not found")
	}
	// Only an agent that may work turns running: one paused or terminated meanwhile keeps
	// its status (the change is conditional in the kernel, under the agent's row lock).
	if _, err := a.host.Principals.SetAgentStatus(ctx, &hostv1.SetAgentStatusRequest{AgentId: run.AgentID, Status: "running",
		OnlyFrom: []string{"idle", "active", "error", "running"}}); err != nil {
		a.log.Warn("error setting agent running", "agent", run.AgentID, "error", err)
	}
	// The run resolves its adapter once and keeps it: an override installed, paused or
	// removed meanwhile changes the runs that start afterwards, never this one.
	key, err := a.resolveAdapter(ctx, run.CompanyID, cfg.AdapterType)
	if err != nil {
		return fail("adapter_failed", err.Error())
	}
	e.pins.Store(run.ID, key)
	defer e.pins.Delete(run.ID)
	if err := a.host.LogActivity(ctx, &sdk.ActivityEntry{CompanyID: run.CompanyID, Action: "heartbeat.run_started",
		EntityType: "heartbeat_run", EntityID: run.ID, Details: map[string]any{"agentId": run.AgentID, "adapterType": cfg.AdapterType, "adapterKey": key}}); err != nil {
		a.log.Warn("error logging heartbeat.run_started", "error", err)
	}
	started := fmt.Sprintf("run %s started (adapter %s)", run.ID, cfg.AdapterType)
	if key != adapter.ExtensionKey(cfg.AdapterType) {
		started = fmt.Sprintf("run %s started (adapter %s, served by %s)", run.ID, cfg.AdapterType, key)
	}
	a.systemEvent(ctx, run.ID, started)

	var info adapter.Info
	if err := e.adapterCall(ctx, ctx, run, cfg.AdapterType, &key, adapter.MethodInfo, struct{}{}, &info); err != nil {
		if sdk.IsMethodNotProvided(err) {
			return fail("adapter_not_found", fmt.Sprintf("Adapter %s is not installed", cfg.AdapterType))
		}
		return fail("adapter_failed", fmt.Sprintf("error describing adapter %s: %v", cfg.AdapterType, err))
	}
	jwt := ""
	if info.SupportsLocalAgentJWT {
		tok, err := a.host.Principals.MintAgentToken(ctx, &hostv1.MintAgentTokenRequest{AgentId: run.AgentID, RunId: run.ID, AdapterType: cfg.AdapterType})
		if err != nil {
			a.systemEvent(ctx, run.ID, "warning: could not mint the run's agent JWT; SERVICE_API_KEY is not set")
		} else {
			jwt = tok.Token
		}
	}
	config, err := a.resolveConfig(ctx, run, cfg.AdapterConfig)
	if err != nil {
		return fail("secret_resolution_failed", err.Error())
	}
	rawConfig, _ := json.Marshal(config)
	req := &adapter.ExecuteRequest{
		RunID: run.ID, AgentID: run.AgentID, AgentName: agent.Name, CompanyID: run.CompanyID, AdapterType: cfg.AdapterType,
		Config: rawConfig, Env: runtimeEnv(a.env.APIURL, run, jwt), Context: run.ContextSnapshot, AuthToken: jwt,
	}
	if err := a.runWorkspace(ctx, run, req); err != nil {
		return fail("workspace_failed", err.Error())
	}
	req.Skills = a.runSkills(ctx, run, cfg.DesiredSkills)
	if req.Runtime, err = a.taskSession(ctx, run, cfg.AdapterType); err != nil {
		return fail("internal_error", err.Error())
	}
	if req.Runtime.SessionID != "" {
		_, _ = a.pool.Exec(ctx, `UPDATE heartbeat_runs SET session_id_before = $2 WHERE id = $1`, run.ID, req.Runtime.SessionID)
	}
	if issueID, _ := run.ContextSnapshot["issueId"].(string); issueID != "" {
		e.checkoutIssue(ctx, run, issueID)
	}
	if !info.SupportsLocalAgentJWT {
		// A remote adapter reports no process: its run exists once execute is called. A
		// local adapter's run turns running on its spawn event (appendRunEvents).
		if _, err := a.pool.Exec(ctx, `UPDATE heartbeat_runs SET status = 'running', started_at = now(), updated_at = now()
			WHERE id = $1 AND status = 'queued'`, run.ID); err != nil {
			return fail("internal_error", fmt.Sprintf("error starting run %s: %v", run.ID, err))
		}
	}
	callCtx := ctx
	if bound := runBound(config); bound > 0 {
		var cancel context.CancelFunc
		callCtx, cancel = context.WithTimeout(ctx, bound)
		defer cancel()
	}
	var res adapter.ExecuteResult
	err = e.adapterCall(ctx, callCtx, run, cfg.AdapterType, &key, adapter.MethodExecute, req, &res)
	if err != nil {
		switch {
		case errors.Is(callCtx.Err(), context.DeadlineExceeded):
			return &runOutcome{Status: runTimedOut, ErrorCode: "timeout", Error: "Run timed out"}
		case ctx.Err() != nil:
			return &runOutcome{Status: runCancelled, ErrorCode: "cancelled", Error: "Run cancelled"}
		case sdk.IsMethodNotProvided(err):
			return fail("adapter_not_found", fmt.Sprintf("Adapter %s is not installed", cfg.AdapterType))
		case adapterGone(err):
			return &runOutcome{Status: runFailed, ErrorCode: "process_lost", Error: err.Error(), AdapterLost: true}
		default:
			return fail("adapter_failed", err.Error())
		}
	}
	out = outcomeOf(&res)
	if out.Usage != nil {
		out.Usage["persistedSessionId"] = nullable(res.SessionID)
		out.Usage["sessionReused"] = req.Runtime.SessionID != "" && res.SessionID == req.Runtime.SessionID
		out.Usage["freshSession"] = req.Runtime.SessionID == "" || res.SessionID != req.Runtime.SessionID
	}
	return out
}

// adapterCall calls a method of the adapter the run is pinned to (*key). When the pinned
// extension left before the call reached it (an override removed or disabled between the
// run's resolution and this call: method_not_provided or extension_disabled), nothing ran
// there, so the run resolves its type again once, pins what serves it now and calls that.
func (e *engine) adapterCall(ctx, callCtx context.Context, run *heartbeatRun, adapterType string, key *string, method string, in, out any) error {
	a := e.a
	err := a.host.Call(callCtx, adapter.MethodOf(*key, method), sdk.SystemActor(), run.CompanyID, in, out)
	if err == nil || !adapterNotReached(err) {
		return err
	}
	next, rerr := a.resolveAdapter(ctx, run.CompanyID, adapterType)
	if rerr != nil || next == *key {
		return err
	}
	a.systemEvent(ctx, run.ID, fmt.Sprintf("adapter %s left before the run reached it; the run goes to %s", *key, next))
	*key = next
	e.pins.Store(run.ID, next)
	return a.host.Call(callCtx, adapter.MethodOf(next, method), sdk.SystemActor(), run.CompanyID, in, out)
}

// adapterNotReached reports whether a call failed before any adapter received it.
func adapterNotReached(err error) bool {
	var e *sdk.Error
	return sdk.IsMethodNotProvided(err) || (errors.As(err, &e) && e.Code == "extension_disabled")
}

// checkoutStatuses are the issue statuses a starting run checks its issue out from.
var checkoutStatuses = []string{"backlog", "todo", "in_progress", "in_review", "blocked"}

// checkoutIssue checks the run's issue out for the run as it starts (REFERENCE 2.2: status
// in_progress, checkoutRunId = executionRunId = the run, startedAt), through the work
// extension's checkout, the code path of POST /api/issues/{id}/checkout. A refusal (the
// issue is done, blocked, or held by another run) is noted in the run log; the run goes on.
func (e *engine) checkoutIssue(ctx context.Context, run *heartbeatRun, issueID string) {
	a := e.a
	in := map[string]any{"id": issueID, "agentId": run.AgentID, "runId": run.ID, "expectedStatuses": checkoutStatuses}
	err := a.host.Call(ctx, "work.issues.checkoutForRun", sdk.SystemActor(), run.CompanyID, in, nil)
	switch {
	case err == nil:
	case sdk.IsMethodNotProvided(err):
	default:
		a.log.Info("issue not checked out for run", "run", run.ID, "issue", issueID, "error", err)
		a.systemEvent(ctx, run.ID, fmt.Sprintf("issue %s not checked out: %v", issueID, err))
	}
}

// runBound is the execute call's bound: timeoutSec + graceSec (default 15) + 30 s, or none
// when timeoutSec is 0.
func runBound(config map[string]any) time.Duration {
	num := func(k string) float64 {
		if v, ok := config[k].(float64); ok {
			return v
		}
		return 0
	}
	timeout := num("timeoutSec")
	if timeout <= 0 {
		return 0
	}
	grace := num("graceSec")
	if _, set := config["graceSec"]; !set {
		grace = 15
	}
	return time.Duration((timeout + grace + 30) * float64(time.Second))
}

// outcomeOf turns an adapter result into the stored outcome, applying the billing rules of
// spec part 1 (billed cost of an adapter run) and REFERENCE 3 step 7.
func outcomeOf(res *adapter.ExecuteResult) *runOutcome {
	out := &runOutcome{Status: res.Status, ExitCode: res.ExitCode, Signal: res.Signal, PID: res.PID, Result: res.ResultJSON,
		Error: res.ErrorMessage, ErrorCode: res.ErrorCode, SessionID: res.SessionID, SessionParams: res.SessionParams,
		SessionDisplayID: res.SessionDisplayID, ClearSession: res.ClearSession}
	switch out.Status {
	case runSucceeded, runFailed, runTimedOut, runCancelled:
	default:
		out.Status = runSucceeded
		if res.TimedOut {
			out.Status = runTimedOut
		} else if res.ExitCode != nil && *res.ExitCode != 0 || res.ErrorMessage != "" {
			out.Status = runFailed
		}
	}
	if out.Status == runFailed && out.Error == "" && res.ExitCode != nil && *res.ExitCode != 0 {
		out.Error = fmt.Sprintf("Process exited with code %d", *res.ExitCode)
	}
	if out.Status == runTimedOut && out.ErrorCode == "" {
		out.ErrorCode = "timeout"
	}
	if len(out.Result) == 0 && res.Summary != "" {
		out.Result, _ = json.Marshal(map[string]string{"summary": res.Summary})
	}
	out.Usage, out.CostEvent, out.BilledCent = usageOf(res)
	return out
}

// normalizeBillingType maps api→metered_api and subscription→subscription_included.
func normalizeBillingType(t string) string {
	switch t {
	case "api":
		return "metered_api"
	case "subscription":
		return "subscription_included"
	case "metered_api", "subscription_included", "subscription_overage", "credits", "fixed":
		return t
	}
	return "unknown"
}

func finiteNonNeg(f *float64) bool {
	return f != nil && !math.IsNaN(*f) && !math.IsInf(*f, 0) && *f >= 0
}

// usageOf builds usageJson (nil when there is neither usage nor cost), the cost event and
// the billed cents: cacheAdjustedCostUsd when finite and ≥ 0, else costUsd, rounded to
// cents; 0 for subscription_included; costStatus unpriced when tokens come without a price.
func usageOf(res *adapter.ExecuteResult) (map[string]any, map[string]any, int64) {
	var in, outT, cached int64
	if res.Usage != nil {
		in, outT, cached = res.Usage.InputTokens, res.Usage.OutputTokens, res.Usage.CachedInputTokens
	}
	hasTokens := in > 0 || outT > 0 || cached > 0
	priced := finiteNonNeg(res.CacheAdjustedCostUSD) || finiteNonNeg(res.CostUSD)
	if !hasTokens && !priced {
		return nil, nil, 0
	}
	billing := normalizeBillingType(res.BillingType)
	biller := res.Biller
	if biller == "" {
		biller = res.Provider
	}
	usage := map[string]any{
		"inputTokens": in, "outputTokens": outT, "cachedInputTokens": cached,
		"rawInputTokens": in, "rawOutputTokens": outT, "rawCachedInputTokens": cached, "usageSource": "per_run",
		"provider": nullable(res.Provider), "biller": nullable(biller), "model": nullable(res.Model), "billingType": billing,
	}
	var cents int64
	status := "reported"
	switch {
	case finiteNonNeg(res.CacheAdjustedCostUSD):
		cents = int64(math.Round(*res.CacheAdjustedCostUSD * 100))
	case finiteNonNeg(res.CostUSD):
		cents = int64(math.Round(*res.CostUSD * 100))
	default:
		status = "unpriced"
	}
	if finiteNonNeg(res.CostUSD) {
		usage["costUsd"] = *res.CostUSD
	}
	if finiteNonNeg(res.CacheAdjustedCostUSD) {
		usage["cacheAdjustedCostUsd"] = *res.CacheAdjustedCostUSD
	} else if finiteNonNeg(res.CostUSD) {
		usage["cacheAdjustedCostUsd"] = *res.CostUSD
	}
	if billing == "subscription_included" {
		cents = 0
	}
	usage["costStatus"] = status
	usage["costCents"] = cents
	event := map[string]any{
		"provider": orDefault(res.Provider, "unknown"), "biller": orDefault(biller, orDefault(res.Provider, "unknown")),
		"billingType": billing, "costStatus": status, "model": orDefault(res.Model, "unknown"),
		"inputTokens": in, "cachedInputTokens": cached, "outputTokens": outT, "costCents": cents,
	}
	return usage, event, cents
}

// finish stores a run's outcome, records its cost, settles the agent's status and starts
// the agent's next queued run. A run cancelled meanwhile keeps its cancelled status.
func (e *engine) finish(ctx context.Context, run *heartbeatRun, out *runOutcome) {
	a := e.a
	var usage []byte
	if out.Usage != nil {
		usage, _ = json.Marshal(out.Usage)
	}
	var result []byte
	if len(out.Result) > 0 && json.Valid(out.Result) {
		result = out.Result
	}
	var pid *int
	if out.PID > 0 {
		pid = &out.PID
	}
	if out.Status != runSucceeded && out.Error != "" {
		a.systemEvent(ctx, run.ID, "run "+out.Status+": "+out.Error)
	} else {
		a.systemEvent(ctx, run.ID, "run "+out.Status)
	}
	// The log is complete now: record its size and digest before the run turns terminal, so
	// a reader that sees the final status also sees the final log.
	a.finalizeLog(ctx, run.ID)
	var final string
	// A run still queued here ends without its adapter having reported a process (a spawn
	// that failed, or an adapter that reports none).
	err := a.pool.QueryRow(ctx, `UPDATE heartbeat_runs SET
			status = CASE WHEN status IN ('running', 'queued') THEN $2 ELSE status END,
			error = CASE WHEN status IN ('running', 'queued') THEN $3 ELSE error END,
			error_code = CASE WHEN status IN ('running', 'queued') THEN $4 ELSE error_code END,
			exit_code = $5, signal = $6, process_pid = coalesce($7, process_pid), usage_json = $8, result_json = $9,
			session_id_after = $10, started_at = coalesce(started_at, now()), finished_at = coalesce(finished_at, now()),
			updated_at = now()
		WHERE id = $1 AND (status IN ('running', 'cancelled') OR (status = 'queued' AND executor_id = $11)) RETURNING status`,
		run.ID, out.Status, nullable(out.Error), nullable(out.ErrorCode), out.ExitCode, nullable(out.Signal), pid, usage, result,
		nullable(out.SessionID), e.id).Scan(&final)
	if err != nil {
		a.log.Warn("error storing run outcome (the run was settled elsewhere)", "run", run.ID, "error", err)
		final = out.Status
	}
	a.metrics.runFinished(final, out.Adapter)
	a.saveTaskSession(ctx, run, out)
	wakeStatus := "completed"
	if final != runSucceeded {
		wakeStatus = "failed"
	}
	_, _ = a.pool.Exec(ctx, `UPDATE agent_wakeup_requests SET status = $2, finished_at = now(), error = $3
		WHERE run_id = $1 AND status IN ('queued', 'claimed')`, run.ID, wakeStatus, nullable(out.ErrorCode))
	if out.CostEvent != nil {
		ev := out.CostEvent
		ev["companyId"], ev["agentId"], ev["heartbeatRunId"] = run.CompanyID, run.AgentID, run.ID
		ev["occurredAt"] = time.Now().UTC().Format(time.RFC3339Nano)
		if issueID, ok := run.ContextSnapshot["issueId"].(string); ok {
			ev["issueId"] = issueID
		}
		if err := a.host.Call(ctx, "costs.recordRunCost", sdk.SystemActor(), run.CompanyID, ev, nil); err != nil && !sdk.IsMethodNotProvided(err) {
			a.log.Warn("error recording run cost", "run", run.ID, "error", err)
		}
	}
	if _, err := a.pool.Exec(ctx, `UPDATE agent_configs SET last_heartbeat_at = now() WHERE agent_id = $1`, run.AgentID); err != nil {
		a.log.Warn("error updating last heartbeat", "agent", run.AgentID, "error", err)
	}
	if err := a.host.LogActivity(ctx, &sdk.ActivityEntry{CompanyID: run.CompanyID, Action: "heartbeat.run_finished",
		EntityType: "heartbeat_run", EntityID: run.ID, Details: map[string]any{"agentId": run.AgentID, "status": final}}); err != nil {
		a.log.Warn("error logging heartbeat.run_finished", "error", err)
	}
	e.settleAgentStatus(ctx, run.AgentID, final == runFailed || final == runTimedOut)
	e.enqueueStart(ctx, run.AgentID)
}

// settleAgentStatus moves a running agent back to idle (or error after a failed run) once
// it has no running run left. Paused or terminated agents keep their status.
func (e *engine) settleAgentStatus(ctx context.Context, agentID string, failed bool) {
	a := e.a
	var running int
	if err := a.pool.QueryRow(ctx, `SELECT count(*) FROM heartbeat_runs WHERE agent_id = $1
		AND (status = 'running' OR (status = 'queued' AND executor_id IS NOT NULL))`, agentID).Scan(&running); err != nil || running > 0 {
		return
	}
	ag, err := a.agentIdentity(ctx, agentID)
	if err != nil || ag.Status != "running" {
		return
	}
	next := "idle"
	if failed {
		next = "error"
	}
	if _, err := a.host.Principals.SetAgentStatus(ctx, &hostv1.SetAgentStatusRequest{AgentId: agentID, Status: next,
		OnlyFrom: []string{"running"}}); err != nil {
		a.log.Warn("error settling agent status", "agent", agentID, "error", err)
	}
}

// cancelRunResult is the answer to a cancel.
type cancelRunResult = heartbeatRun

// cancelRun cancels a queued run, or tells the adapter of a running run to stop it and
// marks it cancelled.
func (e *engine) cancelRun(ctx context.Context, runID string) (*cancelRunResult, error) {
	a := e.a
	run, err := a.runGet(ctx, a.pool, runID)
	if err != nil {
		return nil, err
	}
	if run == nil {
		return nil, notFound("Heartbeat run not found")
	}
	switch run.Status {
	case runQueued, runScheduledRetry:
		if _, err := a.pool.Exec(ctx, `UPDATE heartbeat_runs SET status = 'cancelled', error = 'Run cancelled', error_code = 'cancelled',
			finished_at = now(), updated_at = now() WHERE id = $1 AND status IN ('queued', 'scheduled_retry')`, run.ID); err != nil {
			return nil, fmt.Errorf("error cancelling run %s: %w", run.ID, err)
		}
		adapterType := ""
		if run.AdapterType != nil {
			adapterType = *run.AdapterType
		}
		a.metrics.runFinished(runCancelled, adapterType)
		_, _ = a.pool.Exec(ctx, `UPDATE agent_wakeup_requests SET status = 'cancelled', finished_at = now()
			WHERE run_id = $1 AND status IN ('queued', 'claimed')`, run.ID)
		if run.claimedAt != nil {
			// Admitted and perhaps starting: stop it where it executes (an engine on another
			// node sees the cancel within cancelPoll) and free its place under the caps.
			if run.executorID != nil {
				if !e.signalAdapterCancel(ctx, run) {
					e.cancelLocal(run.ID)
				}
			}
			e.settleAgentStatus(ctx, run.AgentID, false)
			e.enqueueStart(ctx, run.AgentID)
		}
	case runRunning:
		if _, err := a.pool.Exec(ctx, `UPDATE heartbeat_runs SET status = 'cancelled', error = 'Run cancelled', error_code = 'cancelled',
			updated_at = now() WHERE id = $1 AND status = 'running'`, run.ID); err != nil {
			return nil, fmt.Errorf("error cancelling run %s: %w", run.ID, err)
		}
		a.systemEvent(ctx, run.ID, "cancel requested")
		if !e.signalAdapterCancel(ctx, run) {
			e.cancelLocal(run.ID)
		}
		if run.executorID == nil && !e.isExecuting(run.ID) {
			// Nobody executes it yet: settle it here.
			_, _ = a.pool.Exec(ctx, `UPDATE heartbeat_runs SET finished_at = coalesce(finished_at, now()) WHERE id = $1`, run.ID)
			e.settleAgentStatus(ctx, run.AgentID, false)
			e.enqueueStart(ctx, run.AgentID)
		}
	}
	return a.runGet(ctx, a.pool, run.ID)
}

// cancelAgentRuns cancels every queued and running run of an agent (for pause, terminate
// and budget stops) and returns how many it cancelled.
func (e *engine) cancelAgentRuns(ctx context.Context, agentID string) (int, error) {
	rows, err := e.a.pool.Query(ctx, `SELECT id::text FROM heartbeat_runs WHERE agent_id = $1 AND status IN ('queued', 'scheduled_retry', 'running')`, agentID)
	if err != nil {
		return 0, fmt.Errorf("error listing live runs of agent %s: %w", agentID, err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, fmt.Errorf("error listing live runs of agent %s: %w", agentID, err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	for _, id := range ids {
		if _, err := e.cancelRun(ctx, id); err != nil {
			return 0, err
		}
	}
	return len(ids), nil
}
