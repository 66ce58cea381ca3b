package agents_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

// helperHostEnv names the database a helper host serves (TestHelperHost).
const helperHostEnv = "KEEL_AGENTS_HELPER_HOST_DSN"

// TestHelperHost is not a real test: TestHostKillLeavesNoAgentRunning runs this binary with
// it as a keel node of its own, prints the node's URL and waits to be killed.
func TestHelperHost(t *testing.T) {
	dsn := os.Getenv(helperHostEnv)
	if dsn == "" {
		t.Skip("helper process for TestHostKillLeavesNoAgentRunning")
	}
	h := sdktest.Start(t, sdktest.Options{Builtins: true, DatabaseURL: dsn})
	fmt.Printf("HELPER-URL %s\n", h.URL)
	select {}
}

// TestHostKillLeavesNoAgentRunning SIGKILLs a keel node while an agent's run executes (a
// shell that left a background child in its group): every process of the run's group dies
// with the node (the leader by its parent-death signal, the rest by the adapter's group
// guard); the restarted node fails the run as process_lost and runs its one retry, so the
// agent never works twice at once.
func TestHostKillLeavesNoAgentRunning(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills a node")
	}
	t.Parallel()
	ctx := context.Background()
	h0 := startAgents(t)
	company := h0.CreateCompany("Crash Co")
	ag := hbAgent(t, h0, company, "Survivor", "process",
		map[string]any{"command": "/bin/sh", "args": []string{"-c", "sleep 600 & exec sleep 601"}}, nil)
	dsn := h0.DatabaseURL
	h0.Stop(ctx)

	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, "-test.run=^TestHelperHost$")
	cmd.Env = append(os.Environ(), helperHostEnv+"="+dsn)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "HELPER-URL "); ok {
				urls <- u
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	var url string
	select {
	case url = <-urls:
	case <-time.After(2 * time.Minute):
		t.Fatal("the helper node did not start")
	}

	runID := postWake(t, url, ag.ID)
	var pid int
	sdktest.WaitFor(t, 60*time.Second, func() bool {
		run := getJSON(t, url+"/api/heartbeat-runs/"+runID)
		p, ok := run["processPid"].(float64)
		pid = int(p)
		return ok && run["status"] == "running"
	}, "the run to be running with its process")
	var group []int
	sdktest.WaitFor(t, 10*time.Second, func() bool {
		group = groupMembers(pid)
		return len(group) >= 2
	}, "the agent's shell to start its background child")

	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	sdktest.WaitFor(t, 15*time.Second, func() bool {
		for _, p := range group {
			if alive(p) {
				return false
			}
		}
		return true
	}, fmt.Sprintf("every process of the agent's group (%v) to die with its node", group))

	h2 := sdktest.Start(t, sdktest.Options{Builtins: true, DatabaseURL: dsn})
	lost := waitRun(t, h2, runID, 60*time.Second, "failed")
	require.Equal(t, "process_lost", lost["errorCode"], "%v", lost)
	for _, p := range group {
		require.False(t, alive(p), "process %d of the lost run survived the restart", p)
	}
	var retryID string
	sdktest.WaitFor(t, 30*time.Second, func() bool {
		retryID = dbString(t, h2, `SELECT max(id::text) FROM ext_agents.heartbeat_runs WHERE retry_of_run_id = $1`, runID)
		return retryID != ""
	}, "the retry")
	retry := waitRun(t, h2, retryID, 60*time.Second, "running")
	require.NotEqual(t, float64(pid), retry["processPid"])
	var live int
	require.NoError(t, h2.Kernel.Pool.QueryRow(ctx, `SELECT count(*) FROM ext_agents.heartbeat_runs WHERE agent_id = $1
		AND status IN ('queued', 'running')`, ag.ID).Scan(&live))
	require.Equal(t, 1, live, "one run of the agent at a time")
	require.Equal(t, http.StatusOK, h2.Do("POST", "/api/heartbeat-runs/"+retryID+"/cancel", nil).Status)
	waitRun(t, h2, retryID, 30*time.Second, "cancelled")
}

func postWake(t *testing.T, base, agentID string) string {
	t.Helper()
	res, err := http.Post(base+"/api/agents/"+agentID+"/wakeup", "application/json", strings.NewReader(`{}`))
	require.NoError(t, err)
	defer res.Body.Close()
	var body map[string]any
	require.NoError(t, json.NewDecoder(res.Body).Decode(&body))
	require.Equal(t, http.StatusAccepted, res.StatusCode, "%v", body)
	id, _ := body["id"].(string)
	require.NotEmpty(t, id, "%v", body)
	return id
}

func getJSON(t *testing.T, url string) map[string]any {
	t.Helper()
	res, err := http.Get(url)
	require.NoError(t, err)
	defer res.Body.Close()
	var body map[string]any
	require.NoError(t, json.NewDecoder(res.Body).Decode(&body))
	return body
}

// alive reports whether a process exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && !strings.HasPrefix(strings.TrimSpace(string(b[i+1:])), "Z")
}

// groupMembers lists the live processes of a process group.
func groupMembers(pgid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(b), ')')
		f := strings.Fields(string(b[i+1:]))
		if len(f) > 2 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" {
			out = append(out, pid)
		}
	}
	return out
}

// TestReapKillsOnlyTheRunsOwnProcess leaves two runs of a dead engine of this machine
// running: one whose recorded process (pid and start time) still lives, one whose pid is
// now held by another process (a different start time). The reaper kills the first run's
// process and never signals the second pid; both runs are process_lost.
func TestReapKillsOnlyTheRunsOwnProcess(t *testing.T) {
	t.Parallel()
	h := startAgents(t)
	ctx := context.Background()
	company := h.CreateCompany("Reaper Co")
	ag := hbAgent(t, h, company, "Reaped", "fake", nil, nil)
	host, err := os.Hostname()
	require.NoError(t, err)
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	require.NoError(t, err)
	dead := exec.Command("/bin/true")
	require.NoError(t, dead.Run())
	deadEngine := fmt.Sprintf("%s:%d:gone0000", host, dead.Process.Pid)

	start := func() *exec.Cmd {
		c := exec.Command("/bin/sleep", "300")
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		require.NoError(t, c.Start())
		t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
		return c
	}
	ticks := func(pid int) int64 {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		require.NoError(t, err)
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		n, err := strconv.ParseInt(f[19], 10, 64)
		require.NoError(t, err)
		return n
	}
	insert := func(pid int, startTicks int64) string {
		id := uuid.NewString()
		_, err := h.Kernel.Pool.Exec(ctx, `INSERT INTO ext_agents.heartbeat_runs (id, company_id, agent_id, status, started_at,
			process_pid, process_group_id, process_start_ticks, process_boot_id, executor_id, executor_host, executor_seen_at, claimed_at)
			VALUES ($1, $2, $3, 'running', now(), $4, $4, $5, $6, $7, $8, now(), now())`,
			id, company, ag.ID, pid, startTicks, strings.TrimSpace(string(boot)), deadEngine, host)
		require.NoError(t, err)
		return id
	}
	own := start()
	ownRun := insert(own.Process.Pid, ticks(own.Process.Pid))
	other := start()
	recycledRun := insert(other.Process.Pid, ticks(other.Process.Pid)-1)

	// The engine's own minute reap job may take one of them first: what matters is that both
	// runs are reaped by now, whoever did it.
	invoke(t, h, "agents.reap", company, map[string]any{})
	for _, id := range []string{ownRun, recycledRun} {
		require.Equal(t, "failed", getRun(t, h, id)["status"], "run %s is reaped", id)
	}
	waited := make(chan error, 1)
	go func() { waited <- own.Wait() }()
	select {
	case <-waited:
	case <-time.After(30 * time.Second):
		t.Fatal("the run's own process was not killed")
	}
	require.True(t, alive(other.Process.Pid), "a process that merely holds the recorded pid was signalled")
	for _, id := range []string{ownRun, recycledRun} {
		require.Equal(t, "process_lost", getRun(t, h, id)["errorCode"])
	}
}
