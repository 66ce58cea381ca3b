//go:build !linux

package pgembed

import (
	"syscall"
	"time"
)

// serverProcAttr returns the process attributes for the long-running server.
// Outside Linux there is no parent-death signal.
func serverProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Credential: cred}
}

// toolProcAttr returns the process attributes for short-lived tools such as
// initdb.
func toolProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Credential: cred}
}

// procIsPostgresIn cannot inspect processes outside Linux.
func procIsPostgresIn(pid int, dir string) (isServer, known bool) {
	return false, false
}

// reapOrphans cannot find leftover server processes outside Linux.
func reapOrphans(dir string, grace time.Duration) {}
