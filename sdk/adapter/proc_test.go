package adapter_test

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdk/adapter"
)

func TestProcessIdentity(t *testing.T) {
	t.Parallel()

	t.Run("NamesThisProcess", func(t *testing.T) {
		t.Parallel()
		ticks, err := adapter.ProcessStartTicks(os.Getpid())
		require.NoError(t, err)
		require.Positive(t, ticks)
		pgid, err := adapter.ProcessGroup(os.Getpid())
		require.NoError(t, err)
		require.Equal(t, syscall.Getpgrp(), pgid)
		members, err := adapter.ProcessGroupMembers(pgid)
		require.NoError(t, err)
		require.Equal(t, ticks, members[os.Getpid()])
		require.NotEmpty(t, adapter.BootID())
		require.True(t, adapter.ProcessRunning(os.Getpid()))
	})

	t.Run("ChildStartsLaterInItsOwnGroup", func(t *testing.T) {
		t.Parallel()
		cmd := exec.Command("/bin/sleep", "30")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		self, err := adapter.ProcessStartTicks(os.Getpid())
		require.NoError(t, err)
		child, err := adapter.ProcessStartTicks(cmd.Process.Pid)
		require.NoError(t, err)
		require.GreaterOrEqual(t, child, self)
		members, err := adapter.ProcessGroupMembers(cmd.Process.Pid)
		require.NoError(t, err)
		require.Equal(t, map[int]uint64{cmd.Process.Pid: child}, members)
	})

	t.Run("ZombieAndReapedAreNotRunning", func(t *testing.T) {
		t.Parallel()
		cmd := exec.Command("/bin/true")
		require.NoError(t, cmd.Start())
		pid := cmd.Process.Pid
		// Until it is waited for, the exited child is a zombie: its /proc entry stays.
		deadline := time.Now().Add(30 * time.Second)
		for adapter.ProcessRunning(pid) && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		require.False(t, adapter.ProcessRunning(pid))
		_, err := os.Stat("/proc/" + strconv.Itoa(pid))
		require.NoError(t, err, "a zombie keeps its /proc entry")
		_ = cmd.Wait()
		require.False(t, adapter.ProcessRunning(pid))
		_, err = adapter.ProcessStartTicks(pid)
		require.Error(t, err)
	})
}
