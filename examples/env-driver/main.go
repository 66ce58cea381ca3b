// Command env-driver is an example plugin that declares an environment driver,
// example.dirbox, and implements the SDK's driver contract (sdk.EnvironmentDriver): the
// environments owner validates configs, probes, holds leases and runs commands through it
// (the host relays the reserved keel.environment.* calls to it). Each lease is a directory
// under the environment's root; each command runs there as a process (an argument list,
// never a shell string) with BOX_LEASE_ID set.
package main

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/keelhq/keel/sdk"
)

//go:embed manifest.json
var manifestJSON []byte

// Plugin is the example plugin.
type Plugin struct{ manifest *sdk.Manifest }

func newPlugin() *Plugin {
	m, err := sdk.ParseManifest(manifestJSON)
	if err != nil {
		panic(err)
	}
	return &Plugin{manifest: m}
}

// Manifest returns the embedded manifest.
func (p *Plugin) Manifest() *sdk.Manifest { return p.manifest }

// EnvironmentDriver returns the driver the manifest declares.
func (p *Plugin) EnvironmentDriver() sdk.EnvironmentDriver { return dirbox{} }

// dirbox is the example.dirbox driver.
type dirbox struct{}

type boxConfig struct {
	Root string `json:"root"`
}

func config(ref *sdk.EnvironmentRef) (*boxConfig, error) {
	var c boxConfig
	if err := json.Unmarshal(ref.Config, &c); err != nil {
		return nil, sdk.Unprocessable("config must be an object")
	}
	if !filepath.IsAbs(c.Root) {
		return nil, sdk.Unprocessable("root must be an absolute path")
	}
	return &c, nil
}

func leaseDir(ref *sdk.EnvLeaseRef) (string, error) {
	c, err := config(&ref.EnvironmentRef)
	if err != nil {
		return "", err
	}
	if !sdk.IsUUID(ref.LeaseID) {
		return "", sdk.Invalid("leaseId", "must be a UUID")
	}
	return filepath.Join(c.Root, "box-"+ref.LeaseID), nil
}

// ValidateConfig requires an absolute root.
func (dirbox) ValidateConfig(_ context.Context, ref *sdk.EnvironmentRef) (*sdk.EnvValidateResult, error) {
	if _, err := config(ref); err != nil {
		return &sdk.EnvValidateResult{OK: false, Errors: []string{err.Error()}}, nil
	}
	return &sdk.EnvValidateResult{OK: true}, nil
}

// Probe checks that the root exists and is a directory.
func (dirbox) Probe(_ context.Context, ref *sdk.EnvironmentRef) (*sdk.EnvProbeResult, error) {
	c, err := config(ref)
	if err != nil {
		return &sdk.EnvProbeResult{Status: "fail", Message: err.Error()}, nil
	}
	if st, err := os.Stat(c.Root); err != nil || !st.IsDir() {
		return &sdk.EnvProbeResult{Status: "fail", Message: "root " + c.Root + " is not a directory"}, nil
	}
	return &sdk.EnvProbeResult{Status: "pass", Message: "dirbox ready at " + c.Root}, nil
}

// AcquireLease makes the lease's directory.
func (dirbox) AcquireLease(_ context.Context, req *sdk.EnvLeaseRequest) (*sdk.EnvLease, error) {
	dir, err := leaseDir(&sdk.EnvLeaseRef{EnvironmentRef: req.EnvironmentRef, LeaseID: req.LeaseID})
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("error making box %s: %w", dir, err)
	}
	meta, _ := json.Marshal(map[string]string{"dir": dir})
	return &sdk.EnvLease{ProviderLeaseID: "box-" + req.LeaseID, Metadata: meta}, nil
}

// ResumeLease finds the lease's directory again.
func (d dirbox) ResumeLease(_ context.Context, ref *sdk.EnvLeaseRef) (*sdk.EnvLease, error) {
	dir, err := leaseDir(ref)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(dir); err != nil {
		return nil, sdk.Conflict("the box is gone")
	}
	return &sdk.EnvLease{ProviderLeaseID: "box-" + ref.LeaseID}, nil
}

// ReleaseLease keeps the directory.
func (dirbox) ReleaseLease(context.Context, *sdk.EnvLeaseRef) error { return nil }

// DestroyLease removes the directory.
func (dirbox) DestroyLease(_ context.Context, ref *sdk.EnvLeaseRef) error {
	dir, err := leaseDir(ref)
	if err != nil {
		return err
	}
	return os.RemoveAll(dir)
}

// RealizeWorkspace makes a directory inside the box.
func (dirbox) RealizeWorkspace(_ context.Context, req *sdk.EnvWorkspaceRequest) (*sdk.EnvWorkspace, error) {
	dir, err := leaseDir(&req.EnvLeaseRef)
	if err != nil {
		return nil, err
	}
	key := req.Key
	if key == "" {
		key = "workspace"
	}
	if strings.ContainsAny(key, "/\\") || key == ".." || key == "." {
		return nil, sdk.Invalid("key", "must be a single path element")
	}
	path := filepath.Join(dir, key)
	if err := os.MkdirAll(path, 0o700); err != nil {
		return nil, fmt.Errorf("error making workspace %s: %w", path, err)
	}
	return &sdk.EnvWorkspace{Path: path}, nil
}

// Execute runs the command in the box and returns its output when it ends.
func (dirbox) Execute(ctx context.Context, req *sdk.EnvExecRequest) (*sdk.EnvExecResult, error) {
	if len(req.Argv) == 0 {
		return nil, sdk.Invalid("argv", "must name a command")
	}
	dir, err := leaseDir(&req.EnvLeaseRef)
	if err != nil {
		return nil, err
	}
	if req.TimeoutSec > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.TimeoutSec*float64(time.Second)))
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, req.Argv[0], req.Argv[1:]...)
	cmd.Dir = dir
	if req.Cwd != "" {
		cmd.Dir = req.Cwd
	}
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "BOX_LEASE_ID=" + req.LeaseID}
	for k, v := range req.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdin = strings.NewReader(req.Stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	res := &sdk.EnvExecResult{Stdout: out.String(), Stderr: errOut.String()}
	var exitErr *exec.ExitError
	switch {
	case ctx.Err() != nil:
		res.ExitCode, res.TimedOut = -1, errors.Is(ctx.Err(), context.DeadlineExceeded)
	case errors.As(err, &exitErr):
		res.ExitCode = exitErr.ExitCode()
	case err != nil:
		return nil, sdk.Unprocessable("Command not found: " + req.Argv[0])
	}
	return res, nil
}

func main() { sdk.Serve(newPlugin()) }

var (
	_ sdk.EnvironmentDriverProvider = (*Plugin)(nil)
	_ sdk.EnvironmentDriver         = dirbox{}
)
