package supervisor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/keelhq/keel/host/hostsvc"
	"github.com/keelhq/keel/kernel"
	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/migrate"
	extensionv1 "github.com/keelhq/keel/sdk/proto/extension/v1"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

// RoleEnv names the environment variable that tells a keel (or test) binary to run as a
// first-party extension instead of its usual role.
const RoleEnv = "KEEL_EXTENSION_ROLE"

// managed is one loaded extension and its current process or module.
type managed struct {
	s        *Supervisor
	key      string
	src      *Source
	rec      *kernel.ExtensionRecord
	services *hostsvc.Services

	mu          sync.Mutex
	status      string
	client      extensionv1.ExtensionClient
	pc          *plugin.Client
	wasm        WasmModule
	pid         int
	restarts    int
	lastErr     error
	stopped     bool
	watchCancel context.CancelFunc // set while the extension is meant to run

	startMu  sync.Mutex   // one start at a time (first use of a lazy extension, flag flips)
	lastUsed atomic.Int64 // unix nanoseconds of the last routed request, call, job or event
	inflight atomic.Int64 // requests, calls, jobs and events being served now
	// launching is set by Load before the background start of the extension is scheduled
	// and cleared when that start returns, so WaitReady never sees a gap between the two.
	launching atomic.Bool
	// quiet keeps status changes out of the registry and the activity log: set on an
	// upgrade candidate until it takes over, and on a retired version while it drains.
	quiet atomic.Bool
	// successor is the version that replaced this one (upgrade): requests that matched
	// this version's routes just before the switch are served by the successor.
	successor atomic.Pointer[managed]
}

// enter counts one in-flight use of the extension, following upgrades: it returns the
// version that serves the use, whose release must be called when the use is done. The
// counter is raised before the successor is read, and an upgrade sets the successor before
// it waits for the counter to drain, so a use is either seen by the drain or moved on.
func (m *managed) enter() *managed {
	for {
		m.inflight.Add(1)
		next := m.successor.Load()
		if next == nil {
			return m
		}
		m.release()
		m = next
	}
}

// release ends one in-flight use and counts it as the last use.
func (m *managed) release() {
	m.touch()
	m.inflight.Add(-1)
}

// active reports whether the extension is meant to be running (it may be restarting).
func (m *managed) active() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.watchCancel != nil
}

func (m *managed) touch() { m.lastUsed.Store(time.Now().UnixNano()) }

func (m *managed) lazy() bool { return m.src.Manifest.IsLazy() }

func (m *managed) idleStopAfter() time.Duration {
	if d, err := time.ParseDuration(m.src.Manifest.Runtime.IdleStopAfter); err == nil && d > 0 {
		return d
	}
	return 10 * time.Minute
}

func (m *managed) current() (extensionv1.ExtensionClient, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.client, m.status
}

func (m *managed) setStatus(ctx context.Context, status, action string, cause error) {
	m.mu.Lock()
	m.status = status
	if cause != nil {
		m.lastErr = cause
	} else if status == kernel.ExtensionReady {
		m.lastErr = nil
	}
	m.mu.Unlock()
	if m.quiet.Load() {
		if cause != nil {
			m.s.log.Debug("extension version state changed", "extension", m.key, "version", m.src.Manifest.Version, "status", status, "error", cause)
		}
		return
	}
	m.s.recordState(ctx, m.key, status, action, cause)
}

// start launches the extension and starts the watcher that keeps it running. Starting an
// extension that is already meant to run is a no-op.
func (m *managed) start(ctx context.Context) error {
	m.startMu.Lock()
	defer m.startMu.Unlock()
	return m.startLocked(ctx)
}

// startIf starts the extension when allowed() holds; allowed is evaluated under the start
// lock, so a concurrent flag flip cannot interleave between the check and the start.
func (m *managed) startIf(ctx context.Context, allowed func() bool) (bool, error) {
	m.startMu.Lock()
	defer m.startMu.Unlock()
	if !allowed() {
		return false, nil
	}
	return true, m.startLocked(ctx)
}

func (m *managed) startLocked(ctx context.Context) error {
	m.mu.Lock()
	if m.stopped || m.watchCancel != nil {
		m.mu.Unlock()
		return nil
	}
	watchCtx, cancel := context.WithCancel(m.s.ctx)
	m.watchCancel = cancel
	m.mu.Unlock()
	m.touch()
	err := m.launch(ctx)
	m.s.wg.Add(1)
	go m.watch(watchCtx)
	return err
}

// halt stops the extension's process or module and its watcher, leaving it loaded (its
// routes stay in the table) so it can start again.
func (m *managed) halt(ctx context.Context, status, action string, cause error) {
	m.mu.Lock()
	cancel := m.watchCancel
	m.watchCancel = nil
	pc, client, wasm := m.pc, m.client, m.wasm
	m.client, m.pc, m.wasm, m.pid = nil, nil, nil, 0
	m.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	if client != nil {
		sctx, cancelShutdown := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		_, _ = client.Shutdown(sctx, &extensionv1.ShutdownRequest{})
		cancelShutdown()
	}
	if pc != nil {
		pc.Kill()
	}
	if wasm != nil {
		_ = wasm.Close(ctx)
	}
	if client != nil || cancel != nil {
		m.setStatus(ctx, status, action, cause)
	}
}

func (m *managed) launch(ctx context.Context) error {
	mf := m.src.Manifest
	m.mu.Lock()
	if m.stopped {
		m.mu.Unlock()
		return errors.New("supervisor stopped")
	}
	m.mu.Unlock()
	var dbURL string
	if mf.HasCapability(sdk.CapDatabase) {
		if m.s.db == nil {
			err := errors.New("the database capability is not available on this host")
			m.setStatus(ctx, kernel.ExtensionError, "extension.failed", err)
			return err
		}
		u, err := m.s.db.ProvisionExtensionDatabase(ctx, m.key)
		if err != nil {
			m.setStatus(ctx, kernel.ExtensionError, "extension.failed", err)
			return err
		}
		dbURL = u
	}
	dataDir := m.s.dataDir(m.key)
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		err = fmt.Errorf("error creating data dir of %s: %w", m.key, err)
		m.setStatus(ctx, kernel.ExtensionError, "extension.failed", err)
		return err
	}
	m.mu.Lock()
	config := m.rec.Config
	m.mu.Unlock()
	configure := &extensionv1.ConfigureRequest{
		ConfigJson: config, DatabaseUrl: dbURL, DataDir: dataDir, InstanceId: m.s.k.InstanceID(),
		ApiUrl: m.s.cfg.APIURL, KernelVersion: kernel.Version,
	}
	if mf.Runtime.Kind == sdk.RuntimeWasm {
		return m.launchWasm(ctx, configure)
	}
	return m.launchProcess(ctx, configure)
}

func (m *managed) launchWasm(ctx context.Context, configure *extensionv1.ConfigureRequest) error {
	if m.s.wasm == nil {
		err := errors.New("wasm extensions are not supported on this host")
		m.setStatus(ctx, kernel.ExtensionError, "extension.failed", err)
		return err
	}
	mounts, err := m.s.wasmMounts(ctx, m)
	if err != nil {
		m.setStatus(ctx, kernel.ExtensionError, "extension.failed", err)
		return err
	}
	mod, err := m.s.wasm.LoadWasm(ctx, m.src, m.services, &WasmOptions{Output: m.s.feat.ring(m.key), Mounts: mounts})
	if err != nil {
		m.setStatus(ctx, kernel.ExtensionError, "extension.failed", err)
		return err
	}
	if _, err := mod.Configure(ctx, configure); err != nil {
		_ = mod.Close(ctx)
		err = fmt.Errorf("error configuring %s: %w", m.key, err)
		m.setStatus(ctx, kernel.ExtensionError, "extension.failed", err)
		return err
	}
	m.setStatus(ctx, kernel.ExtensionReady, "extension.ready", nil)
	m.mu.Lock()
	if m.stopped || m.watchCancel == nil {
		m.mu.Unlock()
		_ = mod.Close(ctx)
		return errors.New("extension was stopped while starting")
	}
	m.wasm, m.client = mod, mod
	m.mu.Unlock()
	m.s.k.ReadCache.Invalidate("") // a (re)started extension may answer differently
	return nil
}

func (m *managed) command() (*exec.Cmd, *plugin.SecureConfig, error) {
	mf := m.src.Manifest
	var cmd *exec.Cmd
	var secure *plugin.SecureConfig
	if m.src.Builtin {
		cmd = exec.Command(m.s.cfg.Executable, "extension", m.key)
		cmd.Env = append(extensionEnviron(), RoleEnv+"="+m.key)
	} else {
		exe, digest, ok := mf.Runtime.ExecutableFor(hostPlatform)
		if !ok {
			return nil, nil, fmt.Errorf("extension %s names no executable for %s", m.key, hostPlatform)
		}
		path := filepath.Join(m.src.Dir, filepath.Clean("/" + exe)[1:])
		if _, err := os.Stat(path); err != nil {
			return nil, nil, fmt.Errorf("executable of %s: %w", m.key, err)
		}
		if digest != "" {
			sum, err := hex.DecodeString(digest)
			if err != nil {
				return nil, nil, fmt.Errorf("sha256 of %s: %w", m.key, err)
			}
			secure = &plugin.SecureConfig{Checksum: sum, Hash: sha256.New()}
		}
		cmd = exec.Command(path)
		cmd.Dir = m.src.Dir
		cmd.Env = extensionEnviron()
	}
	if n := m.s.cfg.ExtensionGOMAXPROCS; n > 0 {
		cmd.Env = append(cmd.Env, "GOMAXPROCS="+strconv.Itoa(n))
	}
	if n := m.s.poolMaxConns.Load(); n > 0 {
		cmd.Env = append(cmd.Env, migrate.PoolMaxConnsEnv+"="+strconv.Itoa(int(n)))
	}
	if u := m.s.cfg.AgentUser; u != "" {
		cmd.Env = append(cmd.Env, "SERVICE_AGENT_USER="+u)
	}
	// The extension dies with the host, even when the host is killed with SIGKILL.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd, secure, nil
}

func (m *managed) launchProcess(ctx context.Context, configure *extensionv1.ConfigureRequest) error {
	fail := func(err error) error {
		m.setStatus(ctx, kernel.ExtensionError, "extension.failed", err)
		return err
	}
	cmd, secure, err := m.command()
	if err != nil {
		return fail(err)
	}
	pc := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  sdk.Handshake,
		Plugins:          plugin.PluginSet{sdk.PluginName: &sdk.GRPCPlugin{}},
		Cmd:              cmd,
		SecureConfig:     secure,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           m.s.log.Named(m.key),
		Stderr:           m.s.stderrFor(m.key),
		StartTimeout:     m.s.cfg.StartTimeout,
		GRPCDialOptions:  sdk.GRPCDialOptions(),
	})
	rpc, err := pc.Client()
	if err != nil {
		pc.Kill()
		return fail(fmt.Errorf("error launching %s: %w", m.key, err))
	}
	raw, err := rpc.Dispense(sdk.PluginName)
	if err != nil {
		pc.Kill()
		return fail(fmt.Errorf("error dispensing %s: %w", m.key, err))
	}
	c := raw.(*sdk.Client)
	desc, err := c.Describe(ctx, &extensionv1.DescribeRequest{})
	if err != nil {
		pc.Kill()
		return fail(fmt.Errorf("error describing %s: %w", m.key, err))
	}
	var got sdk.Manifest
	if err := json.Unmarshal(desc.ManifestJson, &got); err != nil || got.Key != m.key || got.Version != m.src.Manifest.Version {
		pc.Kill()
		return fail(fmt.Errorf("extension process describes itself as %s %s, expected %s %s", got.Key, got.Version, m.key, m.src.Manifest.Version))
	}
	brokerID := c.Broker.NextId()
	svc := m.services
	go c.Broker.AcceptAndServe(brokerID, func(opts []grpc.ServerOption) *grpc.Server {
		srv := grpc.NewServer(append(opts, sdk.GRPCServerOptions()...)...)
		hostv1.RegisterActivityServer(srv, svc.Activity)
		hostv1.RegisterAuthzServer(srv, svc.Authz)
		hostv1.RegisterPrincipalsServer(srv, svc.Principals)
		hostv1.RegisterCompaniesServer(srv, svc.Companies)
		hostv1.RegisterCallsServer(srv, svc.Calls)
		hostv1.RegisterJobsServer(srv, svc.Jobs)
		hostv1.RegisterEventsServer(srv, svc.Events)
		hostv1.RegisterSettingsServer(srv, svc.Settings)
		hostv1.RegisterSecretsServer(srv, svc.Secrets)
		hostv1.RegisterStorageServer(srv, svc.Storage)
		return srv
	})
	configure.HostBrokerId = brokerID
	if _, err := c.Configure(ctx, configure); err != nil {
		pc.Kill()
		return fail(fmt.Errorf("error configuring %s: %w", m.key, err))
	}
	// Record ready before publishing the client, so whoever sees a live client (WaitReady,
	// a request) also sees the registry say ready.
	m.setStatus(ctx, kernel.ExtensionReady, "extension.ready", nil)
	m.mu.Lock()
	if m.stopped || m.watchCancel == nil {
		m.mu.Unlock()
		pc.Kill()
		return errors.New("extension was stopped while starting")
	}
	m.pc, m.client = pc, c
	if cmd.Process != nil {
		m.pid = cmd.Process.Pid
	}
	m.mu.Unlock()
	m.s.k.ReadCache.Invalidate("") // a (re)started extension may answer differently
	return nil
}

// hostSecretEnv are environment variables of keel's own secrets that no extension
// process inherits.
var hostSecretEnv = []string{"SERVICE_NPM_TOKEN"}

// extensionEnviron is keel's environment without its own secrets.
func extensionEnviron() []string {
	env := os.Environ()
	out := env[:0:0]
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(hostSecretEnv, name) {
			out = append(out, kv)
		}
	}
	return out
}

// watch notices a dead process at once (and a hung one at the next failed health ping) and
// restarts it with exponential backoff, reset after a minute of good health.
func (m *managed) watch(ctx context.Context) {
	defer m.s.wg.Done()
	backoff := m.s.cfg.RestartMin
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	lastPing := time.Now()
	healthySince := time.Now()
	failedPings := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		m.mu.Lock()
		pc, client, wasm := m.pc, m.client, m.wasm
		m.mu.Unlock()
		if wasm != nil {
			continue // wasm modules live inside the host; a failed call discards its instance.
		}
		if m.lazy() && client != nil && m.inflight.Load() == 0 && time.Since(time.Unix(0, m.lastUsed.Load())) > m.idleStopAfter() {
			m.halt(ctx, kernel.ExtensionReady, "extension.idle_stopped", nil)
			return
		}
		down := client == nil
		var cause error
		if pc != nil && pc.Exited() {
			down, cause = true, errors.New("extension process exited")
		}
		if !down && time.Since(lastPing) >= m.s.cfg.HealthInterval {
			lastPing = time.Now()
			pingCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := client.Health(pingCtx, &extensionv1.HealthRequest{})
			cancel()
			if err != nil {
				failedPings++
				if failedPings >= 2 {
					down, cause = true, fmt.Errorf("extension failed two health pings: %w", err)
				}
			} else {
				failedPings = 0
			}
		}
		if !down {
			if time.Since(healthySince) > time.Minute {
				backoff = m.s.cfg.RestartMin
			}
			continue
		}
		if ctx.Err() != nil {
			return
		}
		if pc != nil {
			m.mu.Lock()
			m.client, m.pc, m.pid = nil, nil, 0
			m.restarts++
			m.mu.Unlock()
			pc.Kill()
			m.setStatus(ctx, kernel.ExtensionError, "extension.exited", cause)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		m.s.recordState(ctx, m.key, kernel.ExtensionError, "extension.restarting", nil)
		launchCtx, cancel := context.WithTimeout(ctx, m.s.cfg.StartTimeout+5*time.Second)
		err := m.launch(launchCtx)
		cancel()
		if err != nil {
			backoff = min(backoff*2, m.s.cfg.RestartMax)
			continue
		}
		healthySince, lastPing, failedPings = time.Now(), time.Now(), 0
	}
}

// dataDir is the directory an extension gets for its own files.
func (s *Supervisor) dataDir(key string) string {
	return filepath.Join(s.cfg.DataDir, "extensions", key)
}

// shutdown stops the extension for good (host shutdown).
func (m *managed) shutdown(ctx context.Context) {
	m.mu.Lock()
	m.stopped = true
	status := m.status
	m.mu.Unlock()
	m.halt(ctx, status, "extension.stopped", nil)
}
