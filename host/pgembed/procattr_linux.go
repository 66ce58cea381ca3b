//go:build linux

package pgembed

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// serverProcAttr returns the process attributes for the long-running server:
// its own process group, the given credentials and SIGKILL when the forking
// thread dies.
func serverProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Credential: cred, Pdeathsig: syscall.SIGKILL}
}

// toolProcAttr returns the process attributes for short-lived tools such as
// initdb. They deliberately have no parent-death signal: an initdb that
// outlives keel finishes its work instead of leaving a half-made cluster.
func toolProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Credential: cred}
}

// procIsPostgresIn reports whether the live process pid is a postgres process
// whose working directory is dir (the postmaster chdirs into its data dir).
// known is false when the answer cannot be determined.
func procIsPostgresIn(pid int, dir string) (isServer, known bool) {
	p := "/proc/" + strconv.Itoa(pid)
	comm, err := os.ReadFile(p + "/comm")
	if err != nil {
		// The process vanished in between: it is not running our server.
		return false, true
	}
	name := strings.TrimSpace(string(comm))
	if name != "postgres" && name != "postmaster" {
		return false, true
	}
	cwd, err := os.Readlink(p + "/cwd")
	if err != nil {
		// We cannot inspect another user's process. A server for dir would
		// run as dir's owner, which is us (or we are root and could read
		// it), so this is some other user's server.
		return false, true
	}
	return cwd == dir, true
}

// reapOrphans waits for processes of a dead server that still run in dir:
// backends notice the postmaster's death and exit on their own, but until
// they have, they keep the old shared memory attached and a new postmaster
// refuses to start. Processes still there after grace are killed.
func reapOrphans(dir string, grace time.Duration) {
	deadline := time.Now().Add(grace)
	killed := false
	for {
		pids := orphanBackendsIn(dir)
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			if killed {
				return // let postgres report whatever is left
			}
			for _, pid := range pids {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			killed = true
			deadline = time.Now().Add(grace)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// orphanBackendsIn lists postgres child processes (whose process title
// starts with "postgres: ") working in dir.
func orphanBackendsIn(dir string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		p := "/proc/" + e.Name()
		if cwd, err := os.Readlink(p + "/cwd"); err != nil || cwd != dir {
			continue
		}
		cmdline, err := os.ReadFile(p + "/cmdline")
		if err == nil && bytes.HasPrefix(cmdline, []byte("postgres: ")) {
			pids = append(pids, pid)
		}
	}
	return pids
}
