package agents

import (
	"math"
	"os"
	"syscall"

	"github.com/keelhq/keel/sdk/adapter"
)

// killSurvivors kills what is left on this machine of a run's process before the run is
// settled as lost and retried, so an agent never works the same task twice. The process is
// the one the adapter reported at spawn, named by pid, start time and boot: a pid now held
// by a later process is never signalled. Left-over members of its process group die too:
// those started no earlier than the run's process and, for a run of another engine (a node
// that crashed), no later than this engine (a group id is not reused while any member
// lives, so these are the run's own). It returns how many processes it signalled.
func (e *engine) killSurvivors(run *heartbeatRun) int {
	if run.ProcessPID == nil || *run.ProcessPID <= 0 || run.processStartTicks == nil || run.processBootID == nil ||
		e.bootID == "" || *run.processBootID != e.bootID || (run.executorHost != nil && *run.executorHost != e.hostname) {
		return 0
	}
	pid, ticks := *run.ProcessPID, uint64(*run.processStartTicks)
	pgid := pid
	if run.processGroup != nil && *run.processGroup > 0 {
		pgid = *run.processGroup
	}
	if pid == os.Getpid() || pgid == syscall.Getpgrp() {
		return 0
	}
	before := uint64(math.MaxUint64)
	if run.executorID == nil || *run.executorID != e.id {
		before = e.startTicks
	}
	killed := 0
	if t, err := adapter.ProcessStartTicks(pid); err == nil {
		if t != ticks {
			// The pid belongs to a later process now; with it went the run's group id.
			if pgid == pid {
				return 0
			}
		} else if syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed++
		}
	}
	members, err := adapter.ProcessGroupMembers(pgid)
	if err != nil {
		e.a.log.Warn("error listing survivors of run", "run", run.ID, "error", err)
		return killed
	}
	for p, t := range members {
		if p == pid || t < ticks || t > before {
			continue
		}
		if syscall.Kill(p, syscall.SIGKILL) == nil {
			killed++
		}
	}
	if killed > 0 {
		e.a.log.Info("killed survivors of a lost run", "run", run.ID, "pid", pid, "pgid", pgid, "killed", killed)
		e.a.systemEvent(e.ctx, run.ID, "killed the run's surviving processes before settling it")
	}
	return killed
}
