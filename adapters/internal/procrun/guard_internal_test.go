package procrun

import (
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdk/adapter"
)

func TestGroupGuard(t *testing.T) {
	t.Parallel()
	group := func(t *testing.T) *exec.Cmd {
		t.Helper()
		cmd := exec.Command("/bin/sh", "-c", "sleep 300 & exec sleep 301")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if m, _ := adapter.ProcessGroupMembers(cmd.Process.Pid); len(m) >= 2 {
				return cmd
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Fatal("the shell did not start its background child")
		return nil
	}

	t.Run("KillsTheGroupWhenTheAdapterGoes", func(t *testing.T) {
		t.Parallel()
		cmd := group(t)
		g := StartGroupGuard(cmd.Process.Pid)
		require.NotNil(t, g)
		t.Cleanup(func() { _ = g.cmd.Wait() })
		g.w.Close() // what the adapter's death does
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if m, _ := adapter.ProcessGroupMembers(cmd.Process.Pid); len(m) == 0 {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Fatal("the group outlived its adapter")
	})

	t.Run("StopLeavesTheGroupAlone", func(t *testing.T) {
		t.Parallel()
		cmd := group(t)
		g := StartGroupGuard(cmd.Process.Pid)
		require.NotNil(t, g)
		g.Stop()
		m, err := adapter.ProcessGroupMembers(cmd.Process.Pid)
		require.NoError(t, err)
		require.Len(t, m, 2)
	})
}
