package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/adapter"
)

// engine is the heartbeat engine: wakeups, the run scheduler (jobs on the kernel's queue,
// so two keel nodes never start the same run twice), run execution through adapters, run
// logs and the reaper.
type engine struct {
	a *Agents
	// id names this engine instance on the runs it executes: "<host>:<pid>:<random>".
	id       string
	hostname string
	// bootID names this machine's boot, recorded with the processes of runs it starts.
	bootID string
	// startTicks is this process's start time in clock ticks since boot: processes of a
	// crashed node's runs started before it.
	startTicks uint64
	logLocks   runLogLocks
	// secrets holds the secret values of executing runs, redacted from their logs.
	secrets runSecrets

	mu        sync.Mutex
	executing map[string]context.CancelFunc

	// kicks holds the agents whose start-runs pass runs in this process; true asks for one
	// more pass when it ends.
	kickMu sync.Mutex
	kicks  map[string]bool

	// pins holds the adapter extension key each executing run resolved at its start (run
	// id → key), so its cancel reaches the adapter it runs on.
	pins sync.Map

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newEngine(a *Agents) *engine {
	hn, _ := os.Hostname()
	ctx, cancel := context.WithCancel(context.Background())
	e := &engine{
		a: a, hostname: hn, id: fmt.Sprintf("%s:%d:%s", hn, os.Getpid(), uuid.NewString()[:8]), bootID: adapter.BootID(),
		executing: map[string]context.CancelFunc{}, ctx: ctx, cancel: cancel,
	}
	e.startTicks, _ = adapter.ProcessStartTicks(os.Getpid())
	// After a crash or restart: runs left running by a dead executor are process-lost (with
	// their one retry) and queued runs resume. It runs in the background so Configure returns
	// promptly; the host connection is up by the time it runs.
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
		if err := e.recover(ctx); err != nil && ctx.Err() == nil {
			a.log.Warn("error recovering heartbeat runs", "error", err)
		}
	}()
	return e
}

// runJob runs one of the engine's declared jobs.
func (e *engine) runJob(ctx context.Context, job *sdk.JobRun) error {
	var args struct {
		AgentID string `json:"agentId"`
		RunID   string `json:"runId"`
	}
	if len(job.Args) > 0 {
		if err := json.Unmarshal(job.Args, &args); err != nil {
			return fmt.Errorf("error decoding args of job %s: %w", job.Key, err)
		}
	}
	switch job.Key {
	case jobStartRuns:
		return e.startRunsJob(ctx, args.AgentID)
	case jobExecuteRun:
		return e.executeRunJob(ctx, args.RunID)
	case jobTimerTick:
		return e.timerTick(ctx)
	case jobReap:
		if _, err := e.reap(ctx); err != nil {
			return err
		}
		return e.sweepQueued(ctx)
	}
	return fmt.Errorf("unknown job %s", job.Key)
}

// stop cancels the background work and the runs this engine executes (their adapters are
// told to cancel; the runs are left for the reaper of the next engine to settle).
func (e *engine) stop(ctx context.Context) {
	e.mu.Lock()
	e.cancel()
	for _, c := range e.executing {
		c()
	}
	e.mu.Unlock()
	done := make(chan struct{})
	go func() { e.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// track registers a run this engine executes; false once the engine is stopping. A
// tracked run counts in the wait group stop waits for, until untrack.
func (e *engine) track(runID string, cancel context.CancelFunc) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ctx.Err() != nil {
		return false
	}
	e.wg.Add(1)
	e.executing[runID] = cancel
	return true
}

func (e *engine) untrack(runID string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.executing[runID]; ok {
		delete(e.executing, runID)
		e.wg.Done()
	}
}

func (e *engine) isExecuting(runID string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.executing[runID]
	return ok
}

func (e *engine) cancelLocal(runID string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	c, ok := e.executing[runID]
	if ok {
		c()
	}
	return ok
}

// pidAlive reports whether a process with the pid runs on this machine (a zombie does not).
func pidAlive(pid int) bool { return adapter.ProcessRunning(pid) }

// executorGone reports whether the engine instance named by an executor id is known to be
// gone: it ran on this machine and its process no longer exists (or it is this process,
// which no longer executes the run).
func (e *engine) executorGone(executorID, runID string) bool {
	parts := strings.SplitN(executorID, ":", 3)
	if len(parts) != 3 || parts[0] != e.hostname {
		return false
	}
	pid, err := strconv.Atoi(parts[1])
	if err != nil {
		return false
	}
	if pid == os.Getpid() {
		return executorID != e.id || !e.isExecuting(runID)
	}
	return !pidAlive(pid)
}

// heartbeatPolicy is runtimeConfig.heartbeat (REFERENCE 3 step 2).
type heartbeatPolicy struct {
	Enabled           bool  `json:"enabled"`
	IntervalSec       int   `json:"intervalSec"`
	WakeOnDemand      *bool `json:"wakeOnDemand"`
	MaxConcurrentRuns int   `json:"maxConcurrentRuns"`
}

// agentRuntimeConfig is the part of runtimeConfig the engine reads.
type agentRuntimeConfig struct {
	Heartbeat heartbeatPolicy `json:"heartbeat"`
}

// maxConcurrent is maxConcurrentRuns: default 20, clamped to 1..50.
func (p heartbeatPolicy) maxConcurrent() int {
	switch n := p.MaxConcurrentRuns; {
	case n <= 0:
		return 20
	case n > 50:
		return 50
	default:
		return n
	}
}

// agentConfig is the agent configuration row the executor needs.
type agentConfig struct {
	AgentID       string
	CompanyID     string
	AdapterType   string
	AdapterConfig map[string]any
	Runtime       agentRuntimeConfig
	// DesiredSkills are the names (key, slug or name) of the skills the agent wants.
	DesiredSkills []string
}

// agentConfigGet loads an agent's configuration; nil when it has none.
func (a *Agents) agentConfigGet(ctx context.Context, agentID string) (*agentConfig, error) {
	c := &agentConfig{}
	var adapterCfg, runtimeCfg, skills []byte
	err := a.pool.QueryRow(ctx, `SELECT agent_id, company_id, adapter_type, adapter_config, runtime_config, desired_skills
		FROM agent_configs WHERE agent_id = $1`, agentID).Scan(&c.AgentID, &c.CompanyID, &c.AdapterType, &adapterCfg, &runtimeCfg, &skills)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("error loading config of agent %s: %w", agentID, err)
	}
	c.AdapterConfig = map[string]any{}
	_ = json.Unmarshal(adapterCfg, &c.AdapterConfig)
	_ = json.Unmarshal(runtimeCfg, &c.Runtime)
	_ = json.Unmarshal(skills, &c.DesiredSkills)
	return c, nil
}

// runtimeConfig returns the agent's runtime config; nil when the agent has no config.
func (a *Agents) runtimeConfig(ctx context.Context, agentID string) (*agentRuntimeConfig, error) {
	c, err := a.agentConfigGet(ctx, agentID)
	if err != nil || c == nil {
		return nil, err
	}
	return &c.Runtime, nil
}
