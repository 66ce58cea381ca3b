package procrun

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

// groupGuardScript waits for its stdin to close and then kills the process group named by
// its first argument. The adapter holds the pipe's only write end, so the end of file comes
// when the adapter dies, however it dies (with keel, by SIGKILL): the guard then kills what
// the run left in its group, which the parent-death signal of the run's leader alone does
// not reach (a shell's background children, a tool's helpers).
const groupGuardScript = `read -r _; kill -9 "-$1"`

// GroupGuard is the watcher of one run's process group.
type GroupGuard struct {
	cmd *exec.Cmd
	w   *os.File
}

// StartGroupGuard starts the guard of a run's process group; nil when it cannot start (the
// run goes on; a restarted node still kills the group's survivors).
func StartGroupGuard(pgid int) *GroupGuard {
	r, w, err := os.Pipe()
	if err != nil {
		return nil
	}
	cmd := exec.Command("/bin/sh", "-c", groupGuardScript, "keel-group-guard", strconv.Itoa(pgid))
	cmd.Stdin = r
	// Its own group: a signal to the adapter's or the run's group does not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return nil
	}
	r.Close()
	return &GroupGuard{cmd: cmd, w: w}
}

// Stop ends the guard without letting it act: it is killed and reaped before the pipe
// closes, so it never signals a group id that may since have been reused.
func (g *GroupGuard) Stop() {
	if g == nil {
		return
	}
	_ = g.cmd.Process.Kill()
	_ = g.cmd.Wait()
	g.w.Close()
}
