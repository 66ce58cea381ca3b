package adapter

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// ProcessStartTicks returns the start time of a local process in clock ticks since boot
// (field 22 of /proc/<pid>/stat). Together with the pid and BootID it names one process
// for good: a recycled pid has a later start time.
func ProcessStartTicks(pid int) (uint64, error) {
	st, err := readStat(pid)
	if err != nil {
		return 0, err
	}
	return st.startTicks, nil
}

// ProcessGroup returns the process group of a local process (field 5 of /proc/<pid>/stat).
func ProcessGroup(pid int) (int, error) {
	st, err := readStat(pid)
	if err != nil {
		return 0, err
	}
	return st.pgrp, nil
}

// BootID names the running boot of this machine (/proc/sys/kernel/random/boot_id); "" when
// unknown.
func BootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// ProcessGroupMembers lists the live processes of a process group with their start ticks.
func ProcessGroupMembers(pgid int) (map[int]uint64, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("error listing processes: %w", err)
	}
	out := map[int]uint64{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := readStat(pid)
		if err != nil || st.pgrp != pgid {
			continue
		}
		out[pid] = st.startTicks
	}
	return out, nil
}

type procStat struct {
	pgrp       int
	startTicks uint64
}

// readStat parses /proc/<pid>/stat. The command name (field 2) may hold spaces and
// parentheses, so fields are counted from the last ')'.
func readStat(pid int) (*procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	// After ")": field 3 (state) is index 0, field 5 (pgrp) index 2, field 22 (starttime) index 19.
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return nil, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	pgrp, err := strconv.Atoi(f[2])
	if err != nil {
		return nil, fmt.Errorf("malformed /proc/%d/stat: %w", pid, err)
	}
	ticks, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("malformed /proc/%d/stat: %w", pid, err)
	}
	if f[0] == "Z" {
		return nil, fmt.Errorf("process %d is a zombie", pid)
	}
	return &procStat{pgrp: pgrp, startTicks: ticks}, nil
}

// ProcessRunning reports whether a local process exists and has not exited: a zombie (an
// exited process nobody reaped, such as an orphan of a killed node) is not running.
func ProcessRunning(pid int) bool {
	if pid <= 0 {
		return false
	}
	if _, err := readStat(pid); err == nil {
		return true
	} else if _, statErr := os.Stat("/proc/self/stat"); statErr == nil {
		return false // /proc works: the process is gone or a zombie
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
