// Package supervisor loads, launches and watches extensions: process extensions through
// go-plugin (gRPC over a Unix socket, one OS process each) and wasm modules through wazero.
// It composes their manifest routes into the kernel's route table with collision checks,
// answers their routes with 503 while they are down, restarts crashed processes with
// backoff, pings them for health and writes every state change to the activity log.
package supervisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	goruntime "runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/keelhq/keel/host/hostsvc"
	"github.com/keelhq/keel/host/metrics"
	"github.com/keelhq/keel/kernel"
	"github.com/keelhq/keel/sdk"
	extensionv1 "github.com/keelhq/keel/sdk/proto/extension/v1"
)

// hostPlatform is the artifact key of this host's platform ("linux-amd64").
var hostPlatform = sdk.Platform(goruntime.GOOS, goruntime.GOARCH)

// Source is one extension the host should load.
type Source struct {
	Manifest *sdk.Manifest
	// ManifestJSON is the manifest as written, stored in the registry.
	ManifestJSON []byte
	// Dir holds the manifest and its executable or module (third-party extensions).
	Dir string
	// Builtin marks a first-party extension, launched as `keel extension <key>`.
	Builtin bool
	// Origin is where an installed package came from: "path" or "npm" (empty for
	// built-ins and extensions found on the extensions path, recorded as "builtin"/"path").
	Origin string
	// PackageName and Digest name the stored package an extension was installed from
	// through the API (empty otherwise).
	PackageName string
	Digest      string
	// Granted are the capabilities granted to it (nil grants what the manifest declares).
	Granted []string
}

// Config configures the supervisor.
type Config struct {
	// Executable is the keel binary that runs first-party extensions (`keel extension <key>`).
	Executable string
	// DataDir is where extensions get their own directories.
	DataDir string
	APIURL  string
	// HealthInterval is how often a running extension is pinged (default 5s).
	HealthInterval time.Duration
	// RestartMin and RestartMax bound the restart backoff (default 250ms and 30s).
	RestartMin time.Duration
	RestartMax time.Duration
	// RequestTimeout bounds one routed request (default 60s).
	RequestTimeout time.Duration
	// StartTimeout bounds a process launch (default 20s).
	StartTimeout time.Duration
	// ExtensionGOMAXPROCS, when positive, is the GOMAXPROCS of process extensions. One
	// processor per extension keeps a call's goroutine hand-offs on one thread, which
	// roughly halves the hop latency; the extensions together still use every core.
	ExtensionGOMAXPROCS int
	// AgentUser is passed to process extensions as SERVICE_AGENT_USER (the OS user the
	// process adapter runs agent commands as when keel runs as root); empty leaves the
	// inherited environment alone.
	AgentUser string
	Logger    hclog.Logger
	// Metrics records extension hops (nil records nothing).
	Metrics *metrics.Metrics
}

// Supervisor owns every loaded extension.
type Supervisor struct {
	cfg  Config
	k    *kernel.Kernel
	log  hclog.Logger
	deps hostsvc.Deps
	db   DatabaseProvisioner
	wasm WasmLoader

	mu   sync.RWMutex
	exts map[string]*managed
	// feat keeps log lines and stream subscribers for the plugin feature routes (features.go).
	feat features

	// adapters is the adapter registry's state (adapters.go).
	adapters adapterState

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// poolMaxConns is each process extension's share of the instance's database
	// connection budget (see SetExtensionPoolMaxConns); zero leaves it to the extension.
	poolMaxConns atomic.Int32
}

// SetExtensionPoolMaxConns sets each process extension's share of the instance's database
// connection budget, handed to the extensions launched from now on in the environment
// variable migrate.PoolMaxConnsEnv (sdk/migrate.Open applies it). Zero or less hands none.
func (s *Supervisor) SetExtensionPoolMaxConns(n int32) { s.poolMaxConns.Store(max(n, 0)) }

// DatabaseProvisioner creates an extension's schema and role and returns its database URL.
type DatabaseProvisioner interface {
	ProvisionExtensionDatabase(ctx context.Context, key string) (string, error)
}

// WasmLoader compiles a wasm extension and returns a client for it.
type WasmLoader interface {
	LoadWasm(ctx context.Context, src *Source, services *hostsvc.Services, opts *WasmOptions) (WasmModule, error)
}

// WasmOptions are what a wasm module gets from this node besides its package.
type WasmOptions struct {
	// Output receives the module's log lines (stdout, stderr, keel.log) as hclog JSON
	// lines: the plugin's log ring, as a process extension's stderr.
	Output io.Writer
	// Mounts are its companies' local folders, its only filesystem.
	Mounts []WasmMount
}

// WasmMount is one host directory a wasm module sees at a guest path.
type WasmMount struct {
	HostPath, GuestPath string
	ReadOnly            bool
}

// WasmMounter is implemented by wasm modules whose mounts can change while they run: new
// instances see the new folders.
type WasmMounter interface {
	SetMounts(mounts []WasmMount)
}

// WasmModule is a loaded wasm extension.
type WasmModule interface {
	extensionv1.ExtensionClient
	Close(ctx context.Context) error
}

// New returns a supervisor for the kernel. deps.Invoker and deps.Publisher default to the
// supervisor itself.
func New(k *kernel.Kernel, cfg Config, deps hostsvc.Deps, db DatabaseProvisioner, wasm WasmLoader) *Supervisor {
	if cfg.HealthInterval <= 0 {
		cfg.HealthInterval = 5 * time.Second
	}
	if cfg.RestartMin <= 0 {
		cfg.RestartMin = 250 * time.Millisecond
	}
	if cfg.RestartMax <= 0 {
		cfg.RestartMax = 30 * time.Second
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 60 * time.Second
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 20 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Supervisor{cfg: cfg, k: k, log: cfg.Logger, db: db, wasm: wasm, exts: map[string]*managed{}, ctx: ctx, cancel: cancel}
	deps.Kernel = k
	if deps.Invoker == nil {
		deps.Invoker = s
	}
	s.deps = deps
	return s
}

// SetEnqueuer sets the job queue used by the Jobs host service.
func (s *Supervisor) SetEnqueuer(e hostsvc.Enqueuer) { s.deps.Enqueuer = e }

// SetPublisher sets the event publisher used by the Events host service.
func (s *Supervisor) SetPublisher(p hostsvc.Publisher) { s.deps.Publisher = p }

// Load registers extensions (routes, registry rows) and starts them in the background;
// WaitReady waits for the starts. A refused extension (bad config, route collision,
// unsupported kernel) is recorded with status error and its reason; the others still load.
// The returned error joins every refusal.
func (s *Supervisor) Load(ctx context.Context, sources []*Source) error {
	var errs []error
	var started []*managed
	for _, src := range sources {
		m, err := s.register(ctx, src)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if m != nil {
			started = append(started, m)
		}
	}
	// Launch in the background: the API serves at once, and a request for an extension that
	// is still starting waits for that start (see clientFor) instead of failing.
	for _, m := range started {
		s.wg.Add(1)
		m.launching.Store(true)
		go func() {
			defer s.wg.Done()
			defer m.launching.Store(false)
			if err := m.start(s.ctx); err != nil {
				s.log.Warn("extension failed to start; retrying with backoff", "extension", m.key, "error", err)
			}
		}()
	}
	return errors.Join(errs...)
}

// origin is the registry's source column of src.
func (src *Source) origin() string {
	switch {
	case src.Builtin:
		return "builtin"
	case src.Origin != "":
		return src.Origin
	}
	return "path"
}

func (s *Supervisor) register(ctx context.Context, src *Source) (*managed, error) {
	mf := src.Manifest
	runtime := mf.Runtime.Kind
	rec, err := s.k.ExtensionUpsert(ctx, &kernel.ExtensionUpsertParams{
		Key: mf.Key, Version: mf.Version, Kind: mf.Kind, Runtime: runtime, Source: src.origin(), Path: src.Dir, Manifest: src.ManifestJSON,
		PackageName: src.PackageName, PackageDigest: src.Digest, Granted: src.Granted,
	})
	if err != nil {
		return nil, err
	}
	refuse := func(err error) (*managed, error) {
		s.recordState(ctx, mf.Key, kernel.ExtensionError, "extension.refused", err)
		return nil, fmt.Errorf("extension %s refused: %w", mf.Key, err)
	}
	if err := CheckKernelVersion(mf.Kernel, kernel.Version); err != nil {
		return refuse(err)
	}
	if err := mf.ValidateConfig(rec.Config); err != nil {
		return refuse(err)
	}
	s.mu.Lock()
	if _, dup := s.exts[mf.Key]; dup {
		s.mu.Unlock()
		return refuse(fmt.Errorf("an extension with key %s is already loaded", mf.Key))
	}
	m := &managed{s: s, key: mf.Key, src: src, rec: rec, services: hostsvc.New(mf, s.deps), status: kernel.ExtensionInstalled}
	s.exts[mf.Key] = m
	s.mu.Unlock()
	if err := s.k.Routes.Add(s.routesFor(m)...); err != nil {
		s.mu.Lock()
		delete(s.exts, mf.Key)
		s.mu.Unlock()
		return refuse(err)
	}
	if exe, _, ok := mf.Runtime.ExecutableFor(hostPlatform); !src.Builtin && runtime == sdk.RuntimeProcess && ok {
		// A missing executable will not appear by retrying: refuse it once, clearly (after
		// the route check, so a collision is reported as such).
		path := filepath.Join(src.Dir, filepath.Clean("/" + exe)[1:])
		if _, err := os.Stat(path); err != nil {
			s.k.Routes.RemoveOwner(mf.Key)
			s.mu.Lock()
			delete(s.exts, mf.Key)
			s.mu.Unlock()
			return refuse(fmt.Errorf("executable %s not found: build it there or fix runtime.executable in %s", path, filepath.Join(src.Dir, "manifest.json")))
		}
	}
	if !rec.Enabled {
		m.setStatus(ctx, kernel.ExtensionDisabled, "extension.disabled", nil)
		return nil, nil
	}
	if mf.Flag != "" {
		on, err := s.k.ExperimentalFlag(ctx, mf.Flag)
		if err != nil {
			return refuse(err)
		}
		if !on {
			m.setStatus(ctx, kernel.ExtensionDisabled, "extension.disabled", fmt.Errorf("instance setting %s is off", mf.Flag))
			return nil, nil
		}
	}
	if m.lazy() {
		// Adapters and other lazy extensions start on first use.
		m.setStatus(ctx, kernel.ExtensionReady, "extension.loaded", nil)
		return nil, nil
	}
	return m, nil
}

// flagOn reports whether a flag-gated extension's flag is on (true when not gated).
func (s *Supervisor) flagOn(ctx context.Context, m *managed) bool {
	if m.src.Manifest.Flag == "" {
		return true
	}
	on, err := s.k.ExperimentalFlag(ctx, m.src.Manifest.Flag)
	if err != nil {
		s.log.Warn("error reading flag", "flag", m.src.Manifest.Flag, "error", err)
		return false
	}
	return on
}

// flagOffError is the answer of a gated extension's routes while its flag is off.
func flagOffError(m *managed) *kernel.APIError {
	if fo := m.src.Manifest.FlagOff; fo != nil {
		return (&kernel.APIError{Status: fo.Status, Message: fo.Error}).WithCode(fo.Code)
	}
	return kernel.NotFound("Not found")
}

// clientFor returns a client for a request, call, job or event: it starts a lazy
// extension on first use and a gated one whose flag was just turned on; it answers the
// flag-off error while the flag is off and 503 while the extension is restarting.
func (s *Supervisor) clientFor(ctx context.Context, m *managed) (extensionv1.ExtensionClient, *kernel.APIError) {
	m.touch()
	if !m.enabled() {
		return nil, disabled(m.key)
	}
	if c, _ := m.current(); c != nil {
		return c, nil
	}
	if m.active() {
		// Another caller may be starting it right now: wait for that start to finish.
		m.startMu.Lock()
		m.startMu.Unlock() //nolint:staticcheck // an empty critical section waits for the start in progress
		if c, _ := m.current(); c != nil {
			return c, nil
		}
	} else {
		flagOff := false
		_, err := m.startIf(ctx, func() bool {
			if !s.flagOn(ctx, m) {
				flagOff = true
				return false
			}
			m.mu.Lock()
			defer m.mu.Unlock()
			return m.rec.Enabled && !m.stopped
		})
		if flagOff {
			return nil, flagOffError(m)
		}
		if err != nil {
			s.log.Warn("extension failed to start on demand", "extension", m.key, "error", err)
		}
		if c, _ := m.current(); c != nil {
			return c, nil
		}
	}
	return nil, unavailable(m.key)
}

// reconcile starts gated extensions whose flag was turned on and stops those whose flag
// was turned off. It runs after a settings change on this node and every few seconds, so
// every node follows a change made on another.
func (s *Supervisor) reconcile(ctx context.Context) {
	s.mu.RLock()
	list := make([]*managed, 0, len(s.exts))
	for _, m := range s.exts {
		if m.src.Manifest.Flag != "" {
			list = append(list, m)
		}
	}
	s.mu.RUnlock()
	for _, m := range list {
		s.reconcileOne(ctx, m)
	}
}

// reconcileOne brings one gated extension in line with its flag, reading the flag under
// the extension's start lock so that it cannot race with a start on first use.
func (s *Supervisor) reconcileOne(ctx context.Context, m *managed) {
	m.startMu.Lock()
	defer m.startMu.Unlock()
	on := s.flagOn(ctx, m)
	active := m.active()
	switch {
	case on && !active && !m.lazy() && m.enabled():
		if err := m.startLocked(ctx); err != nil {
			s.log.Warn("extension failed to start after its flag was turned on", "extension", m.key, "error", err)
		}
	case on && !active:
		m.mu.Lock()
		disabled := m.status == kernel.ExtensionDisabled
		m.mu.Unlock()
		if disabled {
			m.setStatus(ctx, kernel.ExtensionReady, "extension.enabled", nil)
		}
	case !on && active:
		m.halt(ctx, kernel.ExtensionDisabled, "extension.disabled", fmt.Errorf("instance setting %s is off", m.src.Manifest.Flag))
	}
}

// Run reconciles flag-gated extensions until the supervisor stops: on every settings
// change on this node and every interval for changes made on other nodes.
func (s *Supervisor) Run(interval time.Duration) {
	changed := make(chan struct{}, 1)
	s.k.OnSettingsChanged(func(section string) {
		if section == "experimental" {
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	})
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-s.ctx.Done():
				return
			case <-t.C:
			case <-changed:
			}
			s.reconcile(s.ctx)
		}
	}()
}

// Extension returns a client of a loaded extension, starting it if it is lazy or its flag
// was just turned on; nil while it is down, disabled or unknown. Calls made through it are
// not counted as in flight; prefer Acquire for long calls to lazy extensions.
func (s *Supervisor) Extension(ctx context.Context, key string) extensionv1.ExtensionClient {
	c, release, err := s.Acquire(ctx, key)
	if err != nil {
		return nil
	}
	release()
	return c
}

// Acquire returns a client of a loaded extension (starting a lazy one) and a release
// function to call when the call is done; a lazy extension is never stopped for idleness
// while a call is in flight.
func (s *Supervisor) Acquire(ctx context.Context, key string) (extensionv1.ExtensionClient, func(), error) {
	m := s.get(key)
	if m == nil {
		return nil, nil, fmt.Errorf("extension %s is not loaded", key)
	}
	m = m.enter()
	c, apiErr := s.clientFor(ctx, m)
	if apiErr != nil {
		m.release()
		return nil, nil, apiErr
	}
	return c, m.release, nil
}

func (s *Supervisor) get(key string) *managed {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.exts[key]
}

// Keys lists loaded extension keys, sorted.
func (s *Supervisor) Keys() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	keys := make([]string, 0, len(s.exts))
	for k := range s.exts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Subscribers implements queue.Extensions: the manifests of loaded extensions that declare
// event subscriptions and take events now, that is enabled and, when gated, with their flag
// on (the flag is read from the kernel's settings cache; an unreadable flag counts as on, so
// an event is never lost to a failed read).
func (s *Supervisor) Subscribers(ctx context.Context) []*sdk.Manifest {
	s.mu.RLock()
	list := make([]*managed, 0, len(s.exts))
	for _, m := range s.exts {
		if len(m.src.Manifest.Events) > 0 {
			list = append(list, m)
		}
	}
	s.mu.RUnlock()
	out := make([]*sdk.Manifest, 0, len(list))
	for _, m := range list {
		if !m.enabled() {
			continue
		}
		if flag := m.src.Manifest.Flag; flag != "" {
			if on, err := s.k.ExperimentalFlag(ctx, flag); err == nil && !on {
				continue
			}
		}
		out = append(out, m.src.Manifest)
	}
	return out
}

// PID returns the process id of a running process extension (0 otherwise).
func (s *Supervisor) PID(key string) int {
	m := s.get(key)
	if m == nil {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pid
}

// ExtensionHealth implements kernel.ExtensionDirectory: it pings the extension now.
func (s *Supervisor) ExtensionHealth(ctx context.Context, key string) (*kernel.ExtensionHealth, error) {
	m := s.get(key)
	if m == nil {
		return nil, nil
	}
	h := &kernel.ExtensionHealth{PluginKey: key, CheckedAt: time.Now().UTC()}
	m.mu.Lock()
	h.Status, h.PID, h.Restarts = m.status, m.pid, m.restarts
	if m.lastErr != nil {
		msg := m.lastErr.Error()
		h.LastError = &msg
	}
	client := m.client
	m.mu.Unlock()
	if client == nil {
		h.Message = "not running"
		return h, nil
	}
	pingCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	res, err := client.Health(pingCtx, &extensionv1.HealthRequest{})
	if err != nil {
		h.Message = err.Error()
		return h, nil
	}
	h.Healthy = res.Status == "ok"
	h.Message = res.Message
	return h, nil
}

// Stop shuts every extension down: a Shutdown call, then the process is killed. Idempotent.
func (s *Supervisor) Stop(ctx context.Context) {
	s.cancel()
	s.mu.RLock()
	list := make([]*managed, 0, len(s.exts))
	for _, m := range s.exts {
		list = append(list, m)
	}
	s.mu.RUnlock()
	var wg sync.WaitGroup
	for _, m := range list {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.shutdown(ctx)
		}()
	}
	wg.Wait()
	s.wg.Wait()
}

// recordState writes a registry status and an instance-level activity entry.
func (s *Supervisor) recordState(ctx context.Context, key, status, action string, cause error) {
	ctx = context.WithoutCancel(ctx)
	if err := s.k.ExtensionSetStatus(ctx, key, status, cause); err != nil {
		s.log.Error("error recording extension status", "extension", key, "error", err)
	}
	details := map[string]any{"status": status}
	if cause != nil {
		details["error"] = cause.Error()
	}
	if _, err := s.k.ActivityInsert(ctx, &kernel.ActivityInsertParams{
		ActorType: "system", ActorID: "supervisor", Action: action, EntityType: "extension", EntityID: key, Details: details,
	}); err != nil {
		s.log.Error("error recording extension activity", "extension", key, "error", err)
	}
	if cause != nil {
		s.log.Warn("extension state changed", "extension", key, "status", status, "action", action, "error", cause)
	} else {
		s.log.Info("extension state changed", "extension", key, "status", status, "action", action)
	}
}

// CheckKernelVersion checks a manifest's kernel range (">=0.1 <1.0", space-separated
// comparisons with >=, >, <=, <, = or a bare version) against the running kernel.
func CheckKernelVersion(constraint, version string) error {
	constraint = strings.TrimSpace(constraint)
	if constraint == "" {
		return nil
	}
	v := parseVersion(version)
	for _, part := range strings.Fields(constraint) {
		op := strings.TrimRight(part, "0123456789.")
		op = part[:len(part)-len(strings.TrimLeft(part, "<>=!"))]
		want := parseVersion(strings.TrimPrefix(part, op))
		c := compareVersions(v, want)
		ok := false
		switch op {
		case ">=":
			ok = c >= 0
		case ">":
			ok = c > 0
		case "<=":
			ok = c <= 0
		case "<":
			ok = c < 0
		case "=", "==", "":
			ok = c == 0
		default:
			return fmt.Errorf("malformed kernel constraint %q", constraint)
		}
		if !ok {
			return fmt.Errorf("kernel %s does not satisfy the extension's kernel range %q", version, constraint)
		}
	}
	return nil
}

func parseVersion(s string) [3]int {
	var v [3]int
	s = strings.SplitN(strings.SplitN(s, "-", 2)[0], "+", 2)[0]
	for i, p := range strings.SplitN(s, ".", 3) {
		n := 0
		for _, r := range p {
			if r < '0' || r > '9' {
				break
			}
			n = n*10 + int(r-'0')
		}
		v[i] = n
	}
	return v
}

func compareVersions(a, b [3]int) int {
	for i := range a {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}

// WaitReady waits until every extension that is meant to run has a live client (or the
// context ends). Start-up already waits for each first launch; this also covers the
// retries of one whose first launch failed.
func (s *Supervisor) WaitReady(ctx context.Context) error {
	for {
		pending := ""
		s.mu.RLock()
		for key, m := range s.exts {
			if c, _ := m.current(); c == nil && (m.active() || m.launching.Load()) {
				pending = key
				break
			}
		}
		s.mu.RUnlock()
		if pending == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("extension %s is not ready: %w", pending, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
