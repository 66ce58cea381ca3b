package workspaces

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/keelhq/keel/internal/agentuser"
)

// Runtime service kinds and statuses.
const (
	kindService = "service"
	kindCommand = "command"

	svcRunning   = "running"
	svcStopped   = "stopped"
	svcFailed    = "failed"
	svcSucceeded = "succeeded"
)

// stopGrace is how long a stopped service has between SIGTERM and SIGKILL.
const stopGrace = 5 * time.Second

// runtimeSpec is a workspace's declared runtime (config.workspaceRuntime, taken from the
// project's executionWorkspacePolicy.workspaceRuntime or the project workspace's
// runtimeConfig): long-running services and one-off commands.
type runtimeSpec struct {
	Services []*serviceSpec `json:"services,omitempty"`
	Commands []*serviceSpec `json:"commands,omitempty"`
}

// serviceSpec is one declared service or command.
type serviceSpec struct {
	Name string `json:"name"`
	// Command is an argument list, or a string the workspace runs with sh -c (the way the
	// project declared it, like its setup command).
	Command json.RawMessage   `json:"command"`
	Cwd     string            `json:"cwd,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Port    int               `json:"port,omitempty"`
	URL     string            `json:"url,omitempty"`
}

// argv is the spec's command as an argument list; nil when it has none.
func (s *serviceSpec) argv() []string {
	var list []string
	if json.Unmarshal(s.Command, &list) == nil && len(list) > 0 && list[0] != "" {
		return list
	}
	var str string
	if json.Unmarshal(s.Command, &str) == nil && strings.TrimSpace(str) != "" {
		return []string{"sh", "-c", str}
	}
	return nil
}

// display is the command as the API shows it.
func (s *serviceSpec) display() string {
	var str string
	if json.Unmarshal(s.Command, &str) == nil {
		return str
	}
	return strings.Join(s.argv(), " ")
}

// url is the service's URL: the declared one, else http://127.0.0.1:<port>.
func (s *serviceSpec) url() string {
	if s.URL != "" {
		return strings.ReplaceAll(s.URL, "{{port}}", strconv.Itoa(s.Port))
	}
	if s.Port > 0 {
		return "http://127.0.0.1:" + strconv.Itoa(s.Port)
	}
	return ""
}

// parseRuntime reads the runtime of a workspace config.
func parseRuntime(config json.RawMessage) *runtimeSpec {
	var c workspaceConfig
	_ = json.Unmarshal(config, &c)
	rs := &runtimeSpec{}
	if len(c.WorkspaceRuntime) > 0 {
		_ = json.Unmarshal(c.WorkspaceRuntime, rs)
	}
	for i, s := range rs.Services {
		if s.Name == "" {
			s.Name = "service-" + strconv.Itoa(i+1)
		}
	}
	for i, s := range rs.Commands {
		if s.Name == "" {
			s.Name = "command-" + strconv.Itoa(i+1)
		}
	}
	return rs
}

// minimalEnv is what keel hands a command it runs: PATH, HOME and locale.
func minimalEnv() []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "LANG", "LC_ALL", "TZ"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// agentUser returns the agent user (internal/agentuser) when this process is root and one
// applies, as the adapters do; nil otherwise, or when it cannot be resolved (the run then
// fails in the adapter with the reason).
func agentUser() *agentuser.User {
	u, err := agentuser.Get()
	if err != nil {
		return nil
	}
	return u
}

// chownTree hands a folder and what it holds to the agent user.
func chownTree(root string, u *agentuser.User) error {
	return filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return u.Chown(p)
	})
}

// procAttr starts a command in its own process group, dying with this extension, as the
// agent user when one applies.
func procAttr() *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if u := agentUser(); u != nil {
		a.Credential = u.Credential()
	}
	return a
}

// tailBuffer keeps the last excerptMax bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > excerptMax {
		b.buf = append([]byte(nil), b.buf[len(b.buf)-excerptMax:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// proc is a runtime service or command this node started.
type proc struct {
	id, companyID, workspaceID string
	cmd                        *exec.Cmd
	done                       chan struct{}
	stopped                    bool
}

// procTable holds this node's runtime processes by runtime service id.
type procTable struct {
	mu sync.Mutex
	m  map[string]*proc
}

func newProcTable() *procTable { return &procTable{m: map[string]*proc{}} }

func (t *procTable) add(p *proc) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.m[p.id] = p
}

func (t *procTable) remove(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.m, id)
}

func (t *procTable) get(id string) *proc {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[id]
}

// stop signals a process group (SIGTERM, then SIGKILL after stopGrace) and waits for it;
// false when the id is not running here.
func (t *procTable) stop(id string) bool {
	p := t.get(id)
	if p == nil {
		return false
	}
	t.mu.Lock()
	p.stopped = true
	t.mu.Unlock()
	pid := p.cmd.Process.Pid
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(stopGrace):
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-p.done
	}
	return true
}

func (t *procTable) ids(match func(*proc) bool) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for id, p := range t.m {
		if match(p) {
			out = append(out, id)
		}
	}
	return out
}

func (t *procTable) stopCompany(companyID string) {
	for _, id := range t.ids(func(p *proc) bool { return p.companyID == companyID }) {
		t.stop(id)
	}
}

func (t *procTable) stopAll() {
	var wg sync.WaitGroup
	for _, id := range t.ids(func(*proc) bool { return true }) {
		wg.Add(1)
		go func() { defer wg.Done(); t.stop(id) }()
	}
	wg.Wait()
}

// workDirOf resolves a spec's cwd against the workspace's.
func workDirOf(w *ExecutionWorkspace, cwd string) string {
	switch {
	case cwd == "":
		return w.Cwd
	case filepath.IsAbs(cwd):
		return filepath.Clean(cwd)
	default:
		return filepath.Join(w.Cwd, cwd)
	}
}

// commandEnv is a runtime process's environment: the minimal one, the workspace's
// variables, the spec's env and PORT.
func commandEnv(w *ExecutionWorkspace, s *serviceSpec) []string {
	env := minimalEnv()
	env = append(env, "SERVICE_WORKSPACE_CWD="+w.Cwd, "SERVICE_EXECUTION_WORKSPACE_ID="+w.ID)
	if w.BranchName != nil {
		env = append(env, "SERVICE_WORKSPACE_BRANCH="+*w.BranchName)
	}
	for k, v := range s.Env {
		if k != "" && !strings.ContainsAny(k, "=\x00") {
			env = append(env, k+"="+v)
		}
	}
	if s.Port > 0 {
		env = append(env, "PORT="+strconv.Itoa(s.Port))
	}
	return env
}

// startRuntime starts a declared service or command in the workspace and records it; a
// command's outcome is also a workspace operation (phase runtime_command).
func (x *Workspaces) startRuntime(ctx context.Context, w *ExecutionWorkspace, s *serviceSpec, kind string) (*RuntimeService, error) {
	argv := s.argv()
	if argv == nil {
		return nil, fmt.Errorf("runtime %s %s declares no command", kind, s.Name)
	}
	dir := workDirOf(w, s.Cwd)
	id := uuid.Must(uuid.NewV7()).String()
	phase := "runtime_service_start"
	if kind == kindCommand {
		phase = "runtime_command"
	}
	op, err := x.operationStart(ctx, &opParams{Workspace: w, Phase: phase, Command: s.display(), Cwd: dir,
		Metadata: map[string]any{"runtimeServiceId": id, "name": s.Name}})
	if err != nil {
		return nil, err
	}
	var stdout, stderr tailBuffer
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, commandEnv(w, s), &stdout, &stderr
	cmd.SysProcAttr = procAttr()
	var port *int
	if s.Port > 0 {
		port = &s.Port
	}
	var url *string
	if u := s.url(); u != "" {
		url = &u
	}
	if err := cmd.Start(); err != nil {
		code := -1
		x.operationFinish(ctx, op, "failed", &code, "", err.Error())
		_, _ = x.pool.Exec(ctx, `INSERT INTO runtime_services (id, company_id, execution_workspace_id, service_name, kind, status,
			command, cwd, port, url, host, stopped_at) VALUES ($1, $2, $3, $4, $5, 'failed', $6, $7, $8, $9, $10, now())`,
			id, w.CompanyID, w.ID, s.Name, kind, s.display(), dir, port, url, x.hostname)
		return x.serviceGet(ctx, id)
	}
	pid := cmd.Process.Pid
	if _, err := x.pool.Exec(ctx, `INSERT INTO runtime_services (id, company_id, execution_workspace_id, service_name, kind, status,
		command, cwd, port, url, pid, host) VALUES ($1, $2, $3, $4, $5, 'running', $6, $7, $8, $9, $10, $11)`,
		id, w.CompanyID, w.ID, s.Name, kind, s.display(), dir, port, url, pid, x.hostname); err != nil {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = cmd.Wait()
		return nil, fmt.Errorf("error recording runtime %s %s: %w", kind, s.Name, err)
	}
	p := &proc{id: id, companyID: w.CompanyID, workspaceID: w.ID, cmd: cmd, done: make(chan struct{})}
	x.procs.add(p)
	if kind == kindService {
		zero := 0
		x.operationFinish(ctx, op, "succeeded", &zero, "", "")
	}
	go func() {
		werr := cmd.Wait()
		code := 0
		if werr != nil {
			code = -1
			if ee, ok := werr.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
		}
		x.procs.mu.Lock()
		stopped := p.stopped
		x.procs.mu.Unlock()
		status := svcStopped
		switch {
		case stopped:
		case kind == kindCommand && code == 0:
			status = svcSucceeded
		case kind == kindCommand || code != 0:
			status = svcFailed
		}
		bctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// The operation first: a reader that sees the command finished finds its output.
		if kind == kindCommand {
			opStatus := "succeeded"
			if status != svcSucceeded {
				opStatus = "failed"
			}
			x.operationFinish(bctx, op, opStatus, &code, stdout.String(), stderr.String())
		}
		if _, err := x.pool.Exec(bctx, `UPDATE runtime_services SET status = $2, exit_code = $3, stopped_at = now(), updated_at = now()
			WHERE id = $1`, id, status, code); err != nil {
			x.log.Warn("error recording the end of a runtime process", "id", id, "error", err)
		}
		x.procs.remove(id)
		close(p.done)
	}()
	return x.serviceGet(ctx, id)
}

// serviceGet reads one runtime service row.
func (x *Workspaces) serviceGet(ctx context.Context, id string) (*RuntimeService, error) {
	s := &RuntimeService{}
	err := x.pool.QueryRow(ctx, `SELECT `+serviceColumns+` FROM runtime_services WHERE id = $1`, id).Scan(&s.ID, &s.CompanyID,
		&s.ExecutionWorkspaceID, &s.ServiceName, &s.Kind, &s.Status, &s.Command, &s.Cwd, &s.Port, &s.URL, &s.PID, &s.ExitCode,
		&s.StartedAt, &s.StoppedAt, &s.UpdatedAt)
	if err != nil {
		return nil, fmt.Errorf("error reading runtime service %s: %w", id, err)
	}
	return s, nil
}

// stopRuntime stops a running service or command of this node (one another node started is
// only marked stopped when that node is gone, by its next start) and records the stop.
func (x *Workspaces) stopRuntime(ctx context.Context, w *ExecutionWorkspace, s *RuntimeService) (*RuntimeService, error) {
	op, err := x.operationStart(ctx, &opParams{Workspace: w, Phase: "runtime_service_stop", Command: s.Command, Cwd: s.Cwd,
		Metadata: map[string]any{"runtimeServiceId": s.ID, "name": s.ServiceName}})
	if err != nil {
		return nil, err
	}
	if !x.procs.stop(s.ID) {
		// Not running here: a row left by a process that is gone.
		_, _ = x.pool.Exec(ctx, `UPDATE runtime_services SET status = 'stopped', stopped_at = now(), updated_at = now()
			WHERE id = $1 AND status = 'running' AND host = $2`, s.ID, x.hostname)
	}
	zero := 0
	x.operationFinish(ctx, op, "succeeded", &zero, "", "")
	return x.serviceGet(ctx, s.ID)
}

// runShellOperation runs a workspace's declared shell command (setup, provision, cleanup)
// to completion in dir, recording it as an operation; an error when it fails.
func (x *Workspaces) runShellOperation(ctx context.Context, w *ExecutionWorkspace, runID, phase, command, dir string) error {
	op, err := x.operationStart(ctx, &opParams{Workspace: w, RunID: runID, Phase: phase, Command: command, Cwd: dir})
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, "sh", "-c", command)
	var stdout, stderr bytes.Buffer
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, commandEnv(w, &serviceSpec{}), &stdout, &stderr
	cmd.SysProcAttr = procAttr()
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	err = cmd.Run()
	code := 0
	if err != nil {
		code = -1
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		x.operationFinish(ctx, op, "failed", &code, stdout.String(), stderr.String())
		return fmt.Errorf("%s exited with code %d: %s", command, code, strings.TrimSpace(stderr.String()))
	}
	x.operationFinish(ctx, op, "succeeded", &code, stdout.String(), stderr.String())
	return nil
}
