package environments

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/keelhq/keel/sdk"
)

// localDriverKey is the built-in driver: leases are directories on this host and commands
// run as processes here.
const localDriverKey = "local"

// localConfigSchema is the JSON Schema of a local environment's config.
const localConfigSchema = `{"type":"object","additionalProperties":false,"properties":{
 "workspaceRoot":{"type":"string","description":"Absolute directory that holds the environment's leases and workspaces (default: under the extension's data directory)."},
 "env":{"type":"object","additionalProperties":{"type":"string"},"description":"Environment variables every command in the environment gets."}}}`

// localConfig is a local environment's config.
type localConfig struct {
	WorkspaceRoot string            `json:"workspaceRoot,omitempty"`
	Env           map[string]string `json:"env,omitempty"`
}

// localExecTimeout bounds a command that names no timeout.
const localExecTimeout = 30 * time.Minute

// localDriver is the built-in local driver.
type localDriver struct {
	// root is the extension's data directory; environments without a workspaceRoot keep
	// their leases under root/local/<environmentId>.
	root string
}

func decodeLocalConfig(raw json.RawMessage) (*localConfig, []string) {
	var c localConfig
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return &c, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, []string{"config must be an object with workspaceRoot (string) and env (object of strings): " + err.Error()}
	}
	var problems []string
	if c.WorkspaceRoot != "" && !filepath.IsAbs(c.WorkspaceRoot) {
		problems = append(problems, "workspaceRoot must be an absolute path")
	}
	for k := range c.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			problems = append(problems, fmt.Sprintf("env name %q is invalid", k))
		}
	}
	sort.Strings(problems)
	return &c, problems
}

// envRoot is the directory of an environment.
func (d *localDriver) envRoot(ref *sdk.EnvironmentRef) (string, *localConfig, error) {
	c, problems := decodeLocalConfig(ref.Config)
	if len(problems) > 0 {
		return "", nil, sdk.Unprocessable(strings.Join(problems, "; "))
	}
	if c.WorkspaceRoot != "" {
		return filepath.Clean(c.WorkspaceRoot), c, nil
	}
	base, err := defaultRoot(d.root)
	if err != nil {
		return "", nil, err
	}
	if !sdk.IsUUID(ref.EnvironmentID) {
		return filepath.Join(base, "candidate"), c, nil
	}
	return filepath.Join(base, ref.EnvironmentID), c, nil
}

// leaseDir is the directory of a lease.
func (d *localDriver) leaseDir(ref *sdk.EnvLeaseRef) (string, *localConfig, error) {
	root, c, err := d.envRoot(&ref.EnvironmentRef)
	if err != nil {
		return "", nil, err
	}
	if !sdk.IsUUID(ref.LeaseID) {
		return "", nil, sdk.Invalid("leaseId", "must be a UUID")
	}
	return filepath.Join(root, "leases", ref.LeaseID), c, nil
}

// ValidateConfig checks the config's shape.
func (d *localDriver) ValidateConfig(_ context.Context, ref *sdk.EnvironmentRef) (*sdk.EnvValidateResult, error) {
	_, problems := decodeLocalConfig(ref.Config)
	return &sdk.EnvValidateResult{OK: len(problems) == 0, Errors: problems}, nil
}

// Probe checks that the environment's directory can be made and written.
func (d *localDriver) Probe(_ context.Context, ref *sdk.EnvironmentRef) (*sdk.EnvProbeResult, error) {
	root, _, err := d.envRoot(ref)
	if err != nil {
		return &sdk.EnvProbeResult{Status: "fail", Message: err.Error()}, nil
	}
	if err := mkdirOwned(root); err != nil {
		return &sdk.EnvProbeResult{Status: "fail", Message: "The workspace root cannot be created: " + err.Error(),
			Details: map[string]any{"workspaceRoot": root}}, nil
	}
	f, err := os.CreateTemp(root, ".probe-*")
	if err != nil {
		return &sdk.EnvProbeResult{Status: "fail", Message: "The workspace root is not writable: " + err.Error(),
			Details: map[string]any{"workspaceRoot": root}}, nil
	}
	_ = f.Close()
	_ = os.Remove(f.Name())
	host, _ := os.Hostname()
	return &sdk.EnvProbeResult{Status: "pass", Message: "The local environment is ready",
		Details: map[string]any{"workspaceRoot": root, "hostname": host}}, nil
}

// AcquireLease makes the lease's directory.
func (d *localDriver) AcquireLease(_ context.Context, req *sdk.EnvLeaseRequest) (*sdk.EnvLease, error) {
	dir, _, err := d.leaseDir(&sdk.EnvLeaseRef{EnvironmentRef: req.EnvironmentRef, LeaseID: req.LeaseID})
	if err != nil {
		return nil, err
	}
	if err := mkdirOwned(dir); err != nil {
		return nil, fmt.Errorf("error making lease directory %s: %w", dir, err)
	}
	meta, _ := json.Marshal(map[string]string{"path": dir})
	return &sdk.EnvLease{ProviderLeaseID: req.LeaseID, Metadata: meta}, nil
}

// ResumeLease finds the lease's directory again.
func (d *localDriver) ResumeLease(_ context.Context, ref *sdk.EnvLeaseRef) (*sdk.EnvLease, error) {
	dir, _, err := d.leaseDir(ref)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(dir); err != nil {
		return nil, sdk.Conflict("The lease's directory is gone")
	}
	meta, _ := json.Marshal(map[string]string{"path": dir})
	return &sdk.EnvLease{ProviderLeaseID: ref.LeaseID, Metadata: meta}, nil
}

// ReleaseLease keeps the lease's directory for reuse.
func (d *localDriver) ReleaseLease(context.Context, *sdk.EnvLeaseRef) error { return nil }

// DestroyLease removes the lease's directory.
func (d *localDriver) DestroyLease(_ context.Context, ref *sdk.EnvLeaseRef) error {
	dir, _, err := d.leaseDir(ref)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("error removing lease directory %s: %w", dir, err)
	}
	return nil
}

// workspaceKeyOK accepts keys that stay one path element.
func workspaceKeyOK(key string) bool {
	return key != "." && key != ".." && !strings.ContainsAny(key, "/\\\x00")
}

// RealizeWorkspace makes a directory inside the lease.
func (d *localDriver) RealizeWorkspace(_ context.Context, req *sdk.EnvWorkspaceRequest) (*sdk.EnvWorkspace, error) {
	dir, _, err := d.leaseDir(&req.EnvLeaseRef)
	if err != nil {
		return nil, err
	}
	key := req.Key
	if key == "" {
		key = "workspace"
	}
	if !workspaceKeyOK(key) {
		return nil, sdk.Invalid("key", "must be a single path element")
	}
	path := filepath.Join(dir, key)
	if err := mkdirOwned(path); err != nil {
		return nil, fmt.Errorf("error making workspace %s: %w", path, err)
	}
	return &sdk.EnvWorkspace{Path: path}, nil
}

// baseEnv are the host variables a command keeps; everything else comes from the
// environment's config and the request.
var baseEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TMPDIR", "TERM", "SHELL", "TZ"}

// Execute runs the command in the lease's directory (or the request's cwd), as a process
// group, streaming its lines to OnOutput, and waits for it.
func (d *localDriver) Execute(ctx context.Context, req *sdk.EnvExecRequest) (*sdk.EnvExecResult, error) {
	if len(req.Argv) == 0 || req.Argv[0] == "" {
		return nil, sdk.Invalid("argv", "must name a command")
	}
	dir, c, err := d.leaseDir(&req.EnvLeaseRef)
	if err != nil {
		return nil, err
	}
	cwd := req.Cwd
	if cwd == "" {
		cwd = dir
		if err := mkdirOwned(cwd); err != nil {
			return nil, fmt.Errorf("error making lease directory %s: %w", cwd, err)
		}
	}
	timeout := localExecTimeout
	if req.TimeoutSec > 0 {
		timeout = time.Duration(req.TimeoutSec * float64(time.Second))
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.Command(req.Argv[0], req.Argv[1:]...)
	cmd.Dir = cwd
	env := map[string]string{}
	for _, k := range baseEnv {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}
	for k, v := range c.Env {
		env[k] = v
	}
	for k, v := range req.Env {
		env[k] = v
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := asAgentUser(cmd, env); err != nil {
		return nil, err
	}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if req.Stdin != "" {
		cmd.Stdin = strings.NewReader(req.Stdin)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("error opening stdout of %s: %w", req.Argv[0], err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, fmt.Errorf("error opening stderr of %s: %w", req.Argv[0], err)
	}
	if err := cmd.Start(); err != nil {
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return nil, sdk.Unprocessable(fmt.Sprintf("Command not found: %s", req.Argv[0]))
		}
		return nil, fmt.Errorf("error starting %s: %w", req.Argv[0], err)
	}
	var outBuf, errBuf limitedBuffer
	var wg sync.WaitGroup
	var mu sync.Mutex
	read := func(r io.Reader, stream string, buf *limitedBuffer) {
		defer wg.Done()
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			mu.Lock()
			buf.WriteLine(line)
			if req.OnOutput != nil {
				req.OnOutput(stream, line)
			}
			mu.Unlock()
		}
	}
	wg.Add(2)
	go read(stdout, "stdout", &outBuf)
	go read(stderr, "stderr", &errBuf)
	waited := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			// The whole group goes: a CLI's children hold the pipes open otherwise.
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			select {
			case <-waited:
			case <-time.After(5 * time.Second):
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			}
		case <-waited:
		}
	}()
	wg.Wait()
	werr := cmd.Wait()
	close(waited)
	res := &sdk.EnvExecResult{ExitCode: cmd.ProcessState.ExitCode(), Stdout: outBuf.String(), Stderr: errBuf.String()}
	if ctx.Err() != nil {
		res.TimedOut = errors.Is(ctx.Err(), context.DeadlineExceeded)
		if res.ExitCode == 0 {
			res.ExitCode = -1
		}
		return res, nil
	}
	var exitErr *exec.ExitError
	if werr != nil && !errors.As(werr, &exitErr) {
		return nil, fmt.Errorf("error waiting for %s: %w", req.Argv[0], werr)
	}
	return res, nil
}

// limitedBuffer keeps the last 64 KiB of a stream's lines.
type limitedBuffer struct{ b []byte }

func (l *limitedBuffer) WriteLine(s string) {
	l.b = append(l.b, s...)
	l.b = append(l.b, '\n')
	if over := len(l.b) - 64<<10; over > 0 {
		l.b = l.b[over:]
	}
}

func (l *limitedBuffer) String() string { return string(l.b) }

var _ sdk.EnvironmentDriver = (*localDriver)(nil)
