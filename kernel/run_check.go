package kernel

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"
)

// RunState is what the kernel needs to know of a heartbeat run to accept it as the run an
// agent request acts for.
type RunState struct {
	Found   bool
	AgentID string
	Status  string
}

// RunDirectory answers for heartbeat runs, which the agents extension owns; the host wires
// it to that extension's runStatus method.
type RunDirectory interface {
	// RunStatus reads a run; a run that does not exist is Found false, not an error, and
	// nil means no run owner is loaded (nothing to check against).
	RunStatus(ctx context.Context, runID string) (*RunState, error)
}

// SetRunDirectory sets who answers for runs. Without one, a run header is not checked.
func (k *Kernel) SetRunDirectory(d RunDirectory) { k.runs.dir = d }

// runChecks verifies run headers and remembers live runs for a moment, so an agent process
// that calls keel many times a second costs one lookup a second.
type runChecks struct {
	dir   RunDirectory
	mu    sync.Mutex
	cache map[string]runCacheEntry
}

type runCacheEntry struct {
	agentID string
	until   time.Time
}

// runCacheTTL bounds how long a run stays accepted after it stopped being live.
const runCacheTTL = time.Second

// liveRunStatuses are the statuses in which a run may act: it exists and has not ended.
var liveRunStatuses = map[string]bool{"queued": true, "running": true}

// checkRunHeader refuses an X-Service-Run-Id that does not name a live run of the agent:
// a run id is what checkouts and comments are attributed to, so an agent key may not claim
// another agent's run, or an ended or made-up one.
func (k *Kernel) checkRunHeader(ctx context.Context, agentID, runID string) *APIError {
	if runID == "" || k.runs.dir == nil {
		return nil
	}
	refused := (&APIError{Status: http.StatusForbidden, Message: "X-Service-Run-Id does not name a live run of this agent"}).WithCode("agent_run_not_live")
	now := time.Now()
	k.runs.mu.Lock()
	e, ok := k.runs.cache[runID]
	k.runs.mu.Unlock()
	if ok && now.Before(e.until) {
		if e.agentID == agentID {
			return nil
		}
		return refused
	}
	st, err := k.runs.dir.RunStatus(ctx, runID)
	if err != nil {
		return (&APIError{Status: http.StatusServiceUnavailable, Message: "Could not check the run named by X-Service-Run-Id", Internal: err}).WithCode("run_check_unavailable")
	}
	if st == nil {
		return nil // no run owner is loaded: there are no runs to check against
	}
	if !st.Found || !liveRunStatuses[st.Status] {
		return refused
	}
	k.runs.mu.Lock()
	if k.runs.cache == nil || len(k.runs.cache) > 4096 {
		k.runs.cache = map[string]runCacheEntry{}
	}
	// The key is copied: runID may alias a request buffer the server reuses.
	k.runs.cache[strings.Clone(runID)] = runCacheEntry{agentID: st.AgentID, until: now.Add(runCacheTTL)}
	k.runs.mu.Unlock()
	if st.AgentID != agentID {
		return refused
	}
	return nil
}
