package process

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/keelhq/keel/adapters/internal/procrun"
	"github.com/keelhq/keel/internal/agentuser"
	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/adapter"
)

// Output bounds.
const (
	// chunkBytes is the longest log chunk read at once when a line has no end in sight.
	chunkBytes = 32 << 10
	// drainTimeout bounds the wait for the output pipes to close after the command exits
	// (a process that left the group may still hold them).
	drainTimeout = 5 * time.Second
)

// Why a run was stopped.
const (
	reasonNone = iota
	reasonTimedOut
	reasonCancelled
)

// run is one live execution.
type run struct {
	grace time.Duration
	// exited is closed when the command's leader has exited.
	exited chan struct{}

	mu           sync.Mutex
	pgid         int
	reason       int
	pendingGrace time.Duration
	killer       *time.Timer
}

// terminate sends SIGTERM to the run's process group and SIGKILL after grace. The first
// reason wins; later calls do nothing.
func (r *run) terminate(reason int, grace time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reason != reasonNone {
		return
	}
	r.reason, r.pendingGrace = reason, grace
	if r.pgid > 0 {
		r.signalLocked()
	}
}

// started records the process group; a stop requested before the spawn is sent now.
func (r *run) started(pgid int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pgid = pgid
	if r.reason != reasonNone {
		r.signalLocked()
	}
}

// signalLocked sends SIGTERM and arms SIGKILL. The group id is never 0 here: kill(0) would
// signal the adapter's own group.
func (r *run) signalLocked() {
	pgid := r.pgid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	r.killer = time.AfterFunc(r.pendingGrace, func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
}

func (r *run) stopReason() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reason
}

// Execute runs the command to completion (adapter.Runner). Problems with the config or the
// spawn are a failed result, not an error, so the engine records them on the run.
func (a *Adapter) Execute(ctx context.Context, req *adapter.ExecuteRequest) (*adapter.ExecuteResult, error) {
	c, err := ParseConfig(req.Config)
	if err != nil {
		return failed(err), nil
	}
	// A configured cwd wins; otherwise the run's workspace (SERVICE_WORKSPACE_CWD), else the
	// agent's own directory.
	if ws := req.Env["SERVICE_WORKSPACE_CWD"]; c.Cwd == "" && ws != "" {
		c.Cwd = ws
	}
	dir, err := a.workDir(c, req.AgentID)
	if err != nil {
		return failed(err), nil
	}
	cmd := exec.Command(c.Command, c.Args...)
	cmd.Dir = dir
	cmd.Env = BuildEnv(os.Environ(), c.Env, req.Env, req.AuthToken)
	// The command may report its model usage, cost and session in a JSON file.
	reportPath := filepath.Join(os.TempDir(), "keel-run-"+req.RunID+".report.json")
	_ = os.Remove(reportPath)
	defer os.Remove(reportPath)
	cmd.Env = append(cmd.Env, adapter.ReportFileEnv+"="+reportPath)
	// Its own process group, so a stop reaches everything it starts; and it dies with the
	// adapter (which dies with keel), like PostgreSQL and the extensions do.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// Under root, the command runs as the unprivileged agent user, with its own HOME.
	au, err := agentuser.Get()
	if err != nil {
		return failed(err), nil
	}
	if au != nil {
		cmd.SysProcAttr.Credential = au.Credential()
		cmd.Env = append(cmd.Env, "HOME="+au.Home, "USER="+au.Name, "LOGNAME="+au.Name)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("error creating stdout pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("error creating stderr pipe: %w", err)
	}
	cmd.Stdout, cmd.Stderr = outW, errW

	r := &run{grace: c.grace(), exited: make(chan struct{})}
	a.mu.Lock()
	if _, dup := a.runs[req.RunID]; dup {
		a.mu.Unlock()
		closeAll(outR, outW, errR, errW)
		return nil, &sdk.Error{Status: http.StatusConflict, Code: "run_executing", Message: fmt.Sprintf("run %s is already executing", req.RunID)}
	}
	a.runs[req.RunID] = r
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(a.runs, req.RunID)
		a.mu.Unlock()
	}()

	ev := procrun.NewEmitter(a.host, a.log, req.RunID, req.CompanyID)
	defer ev.Close()
	if err := cmd.Start(); err != nil {
		closeAll(outR, outW, errR, errW)
		close(r.exited)
		msg := fmt.Sprintf("Failed to start command %q: %v", c.Command, err)
		ev.LogText("system", msg+"\n")
		return &adapter.ExecuteResult{Status: adapter.StatusFailed, ErrorMessage: msg, ErrorCode: "spawn_failed"}, nil
	}
	outW.Close()
	errW.Close()
	pid := cmd.Process.Pid
	r.started(pid)
	// The leader dies with the adapter (Pdeathsig); the guard kills the rest of its group.
	guard := procrun.StartGroupGuard(pid)
	defer guard.Stop()
	// The start time names this process for good: a restarted node that finds the run
	// unfinished kills what is left of the group, and never a recycled pid.
	ticks, _ := adapter.ProcessStartTicks(pid)
	ev.Add(adapter.RunEvent{Kind: "spawn", PID: pid, PGID: pid, StartTicks: ticks})
	ev.Wake() // the run turns running on this event: deliver it now

	var stdout, stderr procrun.Tail
	var readers sync.WaitGroup
	readers.Add(2)
	go pump(&readers, outR, "stdout", &stdout, ev)
	go pump(&readers, errR, "stderr", &stderr, ev)

	if d := c.timeout(); d > 0 {
		t := time.AfterFunc(d, func() {
			ev.LogText("system", fmt.Sprintf("Run timed out after %s; sending SIGTERM to the process group\n", d))
			r.terminate(reasonTimedOut, r.grace)
		})
		defer t.Stop()
	}
	watchDone := make(chan struct{})
	defer close(watchDone)
	go func() {
		select {
		case <-ctx.Done():
			r.terminate(reasonCancelled, r.grace)
		case <-watchDone:
		}
	}()

	waitErr := cmd.Wait()
	close(r.exited)
	// The run is over: whatever is left of its process group dies with it.
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	r.mu.Lock()
	if r.killer != nil {
		r.killer.Stop()
	}
	r.mu.Unlock()
	drained := make(chan struct{})
	go func() { readers.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(drainTimeout):
		outR.Close()
		errR.Close()
		<-drained
	}
	outR.Close()
	errR.Close()

	res := &adapter.ExecuteResult{PID: pid}
	res.ResultJSON, _ = json.Marshal(map[string]string{"stdout": stdout.String(), "stderr": stderr.String()})
	applyReport(reportPath, res, ev)
	st := cmd.ProcessState
	var exitErr *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exitErr) {
		res.Status, res.ErrorMessage = adapter.StatusFailed, fmt.Sprintf("Error waiting for the process: %v", waitErr)
		return res, nil
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		res.Signal = procrun.SignalName(ws.Signal())
	} else {
		code := st.ExitCode()
		res.ExitCode = &code
	}
	switch r.stopReason() {
	case reasonTimedOut:
		res.Status, res.TimedOut, res.ErrorCode = adapter.StatusTimedOut, true, "timeout"
		res.ErrorMessage = fmt.Sprintf("Timed out after %s", c.timeout())
	case reasonCancelled:
		res.Status, res.ErrorCode, res.ErrorMessage = adapter.StatusCancelled, "cancelled", "Run cancelled"
	default:
		switch {
		case res.Signal != "":
			res.Status, res.ErrorMessage = adapter.StatusFailed, "Process terminated by signal "+res.Signal
		case *res.ExitCode != 0:
			res.Status, res.ErrorMessage = adapter.StatusFailed, fmt.Sprintf("Process exited with code %d", *res.ExitCode)
		default:
			res.Status = adapter.StatusSucceeded
		}
	}
	return res, nil
}

// applyReport reads the run report the command left at path, if any, into res. A report
// that cannot be used is noted in the run log and otherwise ignored.
func applyReport(path string, res *adapter.ExecuteResult, ev *procrun.Emitter) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, adapter.MaxReportBytes+1))
	if err == nil {
		var r *adapter.Report
		if r, err = adapter.ParseReport(data); err == nil {
			r.Apply(res)
			return
		}
	}
	ev.LogText("system", fmt.Sprintf("Ignoring the run report in $%s: %v\n", adapter.ReportFileEnv, err))
}

// pump reads one output stream in line chunks into the run log and the excerpt.
func pump(wg *sync.WaitGroup, rd io.Reader, stream string, t *procrun.Tail, ev *procrun.Emitter) {
	defer wg.Done()
	br := bufio.NewReaderSize(rd, chunkBytes)
	for {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 {
			t.Write(chunk)
			ev.LogText(stream, string(chunk))
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}

func failed(err error) *adapter.ExecuteResult {
	res := &adapter.ExecuteResult{Status: adapter.StatusFailed, ErrorMessage: err.Error()}
	var ce *configError
	if errors.As(err, &ce) {
		res.ErrorCode = "invalid_config"
	}
	return res
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		_ = f.Close()
	}
}
