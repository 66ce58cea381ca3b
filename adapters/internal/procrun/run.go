package procrun

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/adapter"
)

// Output bounds.
const (
	// ExcerptBytes is how much of each stream a result keeps (the tail).
	ExcerptBytes = 64 << 10
	// chunkBytes is the longest log chunk read at once when a line has no end in sight.
	chunkBytes = 32 << 10
	// maxLineBytes is the longest line handed to a line callback; longer lines are logged
	// but not parsed.
	maxLineBytes = 8 << 20
	// drainTimeout bounds the wait for the output pipes to close after the command exits
	// (a process that left the group may still hold them).
	drainTimeout = 5 * time.Second
)

// Why a run was stopped.
const (
	ReasonNone = iota
	ReasonTimedOut
	ReasonCancelled
)

// Proc is one live run of an agent command. A run may spawn its command more than once (a
// fresh-session retry); a stop applies to whichever attempt is live and to any later one.
type Proc struct {
	// Grace is the time between SIGTERM and SIGKILL of a cancel.
	Grace time.Duration

	mu           sync.Mutex
	pgid         int
	reason       int
	pendingGrace time.Duration
	killer       *time.Timer
}

// Terminate sends SIGTERM to the run's process group and SIGKILL after grace. The first
// reason wins; later calls do nothing.
func (p *Proc) Terminate(reason int, grace time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reason != ReasonNone {
		return
	}
	p.reason, p.pendingGrace = reason, grace
	if p.pgid > 0 {
		p.signalLocked()
	}
}

// Reason reports why the run was stopped (ReasonNone while it was not).
func (p *Proc) Reason() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reason
}

func (p *Proc) started(pgid int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pgid = pgid
	if p.reason != ReasonNone {
		p.signalLocked()
	}
}

func (p *Proc) exited() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pgid = 0
	if p.killer != nil {
		p.killer.Stop()
		p.killer = nil
	}
}

// signalLocked sends SIGTERM and arms SIGKILL. The group id is never 0 here: kill(0) would
// signal the adapter's own group.
func (p *Proc) signalLocked() {
	pgid := p.pgid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	p.killer = time.AfterFunc(p.pendingGrace, func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
}

// Registry is an adapter's live runs by run id, for cancel and stop.
type Registry struct {
	mu   sync.Mutex
	runs map[string]*Proc
}

// Begin registers a run; the returned func removes it. A run id already live is a 409.
func (r *Registry) Begin(runID string, grace time.Duration) (*Proc, func(), error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.runs == nil {
		r.runs = map[string]*Proc{}
	}
	if _, dup := r.runs[runID]; dup {
		return nil, nil, &sdk.Error{Status: http.StatusConflict, Code: "run_executing", Message: fmt.Sprintf("run %s is already executing", runID)}
	}
	p := &Proc{Grace: grace}
	r.runs[runID] = p
	return p, func() {
		r.mu.Lock()
		delete(r.runs, runID)
		r.mu.Unlock()
	}, nil
}

// Cancel stops a live run with its grace and reports whether one was found.
func (r *Registry) Cancel(runID string) bool {
	r.mu.Lock()
	p := r.runs[runID]
	r.mu.Unlock()
	if p == nil {
		return false
	}
	p.Terminate(ReasonCancelled, p.Grace)
	return true
}

// StopAll stops every live run with a one-second grace.
func (r *Registry) StopAll() {
	r.mu.Lock()
	live := make([]*Proc, 0, len(r.runs))
	for _, p := range r.runs {
		live = append(live, p)
	}
	r.mu.Unlock()
	for _, p := range live {
		p.Terminate(ReasonCancelled, time.Second)
	}
}

// Command is one spawn of an agent command: a program and its arguments as a list (never a
// shell string), its directory, environment and standard input.
type Command struct {
	Path string
	Args []string
	Dir  string
	Env  []string
	// Stdin is written to the command's standard input, which is then closed.
	Stdin string
	// Credential runs the command as another user (the agent user under root).
	Credential *syscall.Credential
	// Timeout stops the command with SIGTERM, then SIGKILL after the Proc's grace; 0 is none.
	Timeout time.Duration
	// OnLine is called with each complete line of output (without its newline), in order,
	// one call at a time. Output is logged to the run log either way.
	OnLine func(stream, line string)
}

// Exit is how one spawn ended.
type Exit struct {
	PID      int
	ExitCode *int
	Signal   string
	// Stdout and Stderr are the tails of the streams.
	Stdout, Stderr string
	// StartErr is set when the command could not start (nothing ran).
	StartErr error
	// WaitErr is set when waiting for the command failed for another reason than its exit.
	WaitErr error
	// TimedOut is set when this spawn was stopped by its Timeout.
	TimedOut bool
}

// Failed reports whether the command ran and did not exit 0.
func (x *Exit) Failed() bool {
	return x.StartErr == nil && (x.Signal != "" || x.WaitErr != nil || (x.ExitCode != nil && *x.ExitCode != 0))
}

// Run spawns c in its own process group that dies with the adapter, reports the spawn to
// the run log (the run turns running on it), streams stdout and stderr to the run log and
// to c.OnLine, and waits for the command to exit. ctx ending stops the command like a
// cancel. What is left of the group when the leader exits is killed.
func Run(ctx context.Context, p *Proc, ev *Emitter, c *Command) *Exit {
	x := &Exit{}
	if p.Reason() != ReasonNone {
		x.StartErr = errors.New("the run was stopped before the command started")
		return x
	}
	cmd := exec.Command(c.Path, c.Args...)
	cmd.Dir, cmd.Env = c.Dir, c.Env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: c.Credential}
	outR, outW, err := os.Pipe()
	if err != nil {
		x.StartErr = fmt.Errorf("error creating stdout pipe: %w", err)
		return x
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(outR, outW)
		x.StartErr = fmt.Errorf("error creating stderr pipe: %w", err)
		return x
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	var stdin io.WriteCloser
	if c.Stdin != "" {
		if stdin, err = cmd.StdinPipe(); err != nil {
			closeAll(outR, outW, errR, errW)
			x.StartErr = fmt.Errorf("error creating stdin pipe: %w", err)
			return x
		}
	}
	if err := cmd.Start(); err != nil {
		closeAll(outR, outW, errR, errW)
		x.StartErr = err
		return x
	}
	outW.Close()
	errW.Close()
	pid := cmd.Process.Pid
	x.PID = pid
	p.started(pid)
	defer p.exited()
	guard := StartGroupGuard(pid)
	defer guard.Stop()
	ticks, _ := adapter.ProcessStartTicks(pid)
	ev.Add(adapter.RunEvent{Kind: "spawn", PID: pid, PGID: pid, StartTicks: ticks})
	ev.Wake()
	if stdin != nil {
		go func() {
			_, _ = io.WriteString(stdin, c.Stdin)
			_ = stdin.Close()
		}()
	}

	var stdout, stderr Tail
	var lineMu sync.Mutex
	onLine := func(stream, line string) {
		if c.OnLine == nil {
			return
		}
		lineMu.Lock()
		defer lineMu.Unlock()
		c.OnLine(stream, line)
	}
	var readers sync.WaitGroup
	readers.Add(2)
	go pump(&readers, outR, "stdout", &stdout, ev, onLine)
	go pump(&readers, errR, "stderr", &stderr, ev, onLine)

	var timedOut atomic.Bool
	if c.Timeout > 0 {
		t := time.AfterFunc(c.Timeout, func() {
			ev.LogText("system", fmt.Sprintf("Run timed out after %s; sending SIGTERM to the process group\n", c.Timeout))
			timedOut.Store(p.Reason() == ReasonNone)
			p.Terminate(ReasonTimedOut, p.Grace)
		})
		defer t.Stop()
	}
	watchDone := make(chan struct{})
	defer close(watchDone)
	go func() {
		select {
		case <-ctx.Done():
			p.Terminate(ReasonCancelled, p.Grace)
		case <-watchDone:
		}
	}()

	waitErr := cmd.Wait()
	_ = syscall.Kill(-pid, syscall.SIGKILL)
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
	x.Stdout, x.Stderr = stdout.String(), stderr.String()
	x.TimedOut = timedOut.Load() && p.Reason() == ReasonTimedOut
	var exitErr *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exitErr) {
		x.WaitErr = waitErr
		return x
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		x.Signal = SignalName(ws.Signal())
	} else {
		code := cmd.ProcessState.ExitCode()
		x.ExitCode = &code
	}
	return x
}

// pump reads one output stream in chunks into the run log and the excerpt, and hands each
// complete line to onLine.
func pump(wg *sync.WaitGroup, rd io.Reader, stream string, t *Tail, ev *Emitter, onLine func(stream, line string)) {
	defer wg.Done()
	br := bufio.NewReaderSize(rd, chunkBytes)
	var line []byte
	overlong := false
	for {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 {
			t.Write(chunk)
			ev.LogText(stream, string(chunk))
			if !overlong {
				line = append(line, chunk...)
				if len(line) > maxLineBytes {
					line, overlong = line[:0], true
				}
			}
			if chunk[len(chunk)-1] == '\n' {
				if !overlong {
					onLine(stream, strings.TrimRight(string(line), "\r\n"))
				}
				line, overlong = line[:0], false
			}
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			if len(line) > 0 && !overlong {
				onLine(stream, string(line))
			}
			return
		}
	}
}

// Tail keeps the last ExcerptBytes written to it.
type Tail struct {
	mu  sync.Mutex
	buf []byte
}

// Write appends p, compacting to the tail once the buffer holds twice the excerpt, so the
// cost stays linear in the output.
func (t *Tail) Write(p []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(p) >= ExcerptBytes {
		t.buf = append(t.buf[:0], p[len(p)-ExcerptBytes:]...)
		return
	}
	if len(t.buf)+len(p) > 2*ExcerptBytes {
		n := copy(t.buf, t.buf[len(t.buf)-ExcerptBytes:])
		t.buf = t.buf[:n]
	}
	t.buf = append(t.buf, p...)
}

// String returns the last ExcerptBytes written.
func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.buf) > ExcerptBytes {
		return string(t.buf[len(t.buf)-ExcerptBytes:])
	}
	return string(t.buf)
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		_ = f.Close()
	}
}

var signalNames = map[syscall.Signal]string{
	syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT",
	syscall.SIGILL: "SIGILL", syscall.SIGABRT: "SIGABRT", syscall.SIGBUS: "SIGBUS",
	syscall.SIGFPE: "SIGFPE", syscall.SIGKILL: "SIGKILL", syscall.SIGSEGV: "SIGSEGV",
	syscall.SIGPIPE: "SIGPIPE", syscall.SIGALRM: "SIGALRM", syscall.SIGTERM: "SIGTERM",
	syscall.SIGUSR1: "SIGUSR1", syscall.SIGUSR2: "SIGUSR2",
}

// SignalName names a signal the way a result reports it ("SIGTERM").
func SignalName(s syscall.Signal) string {
	if n, ok := signalNames[s]; ok {
		return n
	}
	return "SIG" + strconv.Itoa(int(s))
}
