package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/keelhq/keel/host/hostsvc"
	"github.com/keelhq/keel/kernel"
	"github.com/keelhq/keel/sdk"
	extensionv1 "github.com/keelhq/keel/sdk/proto/extension/v1"
)

// ConfigChangedMethod is the reserved Call method with which the host delivers a new config
// to a running process extension; the SDK answers it (see sdk.ConfigChangeHandler).
const ConfigChangedMethod = sdk.ConfigChangedMethod

// ConfigValidateMethod is the reserved Call method with which the host asks a process
// extension's optional validator about a config (see sdk.ConfigValidator).
const ConfigValidateMethod = sdk.ConfigValidateMethod

// DatabaseDropper drops an extension's schema and role (uninstall with purge). The host's
// DatabaseProvisioner implements it.
type DatabaseDropper interface {
	DropExtensionDatabase(ctx context.Context, key string) error
}

// ErrNotLoaded is returned by a lifecycle move on an extension this supervisor has not
// loaded.
var ErrNotLoaded = errors.New("extension is not loaded")

// ApprovalRequiredError is returned by Upgrade when the new version asks for capabilities
// that were not granted: the upgrade is recorded as pending (status upgrade_pending) and
// the old version keeps serving until an admin approves it.
type ApprovalRequiredError struct {
	Key             string
	Version         string
	NewCapabilities []string
}

func (e *ApprovalRequiredError) Error() string {
	return fmt.Sprintf("upgrade of %s to %s asks for capabilities that need approval: %v", e.Key, e.Version, e.NewCapabilities)
}

// UpgradeFailedError is returned by Upgrade when the new version did not start, did not
// pass its health check or could not take over the routes: the old version keeps serving
// and the reason is recorded as the extension's lastError.
type UpgradeFailedError struct {
	Key, Version string
	Err          error
}

func (e *UpgradeFailedError) Error() string {
	return fmt.Sprintf("upgrade of %s to %s failed (the old version keeps serving): %v", e.Key, e.Version, e.Err)
}

func (e *UpgradeFailedError) Unwrap() error { return e.Err }

// Move says who asked for a lifecycle move and whether this node only follows it.
type Move struct {
	// By is the admin who asked (nil for the system); the activity log records them.
	By *kernel.Actor
	// Follow applies on this node a move another node made: the registry already says so,
	// so nothing is written to it, nothing is recorded and no approval is checked.
	Follow bool
}

// record writes one lifecycle entry (instance-level) in the activity log.
func (s *Supervisor) record(ctx context.Context, mv Move, kind, key, action string, details map[string]any) {
	if mv.Follow {
		return
	}
	if kind == "" {
		kind = sdk.KindPlugin
	}
	actorType, actorID, agentID := kernel.ActorFields(mv.By)
	if actorType == "system" {
		actorID = "supervisor"
	}
	if _, err := s.k.ActivityInsert(context.WithoutCancel(ctx), &kernel.ActivityInsertParams{
		ActorType: actorType, ActorID: actorID, AgentID: agentID, Action: kind + "." + action,
		EntityType: kind, EntityID: key, Details: details,
	}); err != nil {
		s.log.Error("error recording extension lifecycle activity", "extension", key, "action", action, "error", err)
	}
}

// LoadedState is what this node runs of one extension.
type LoadedState struct {
	Source  *Source
	Enabled bool
	Config  json.RawMessage
}

// Loaded returns what this node runs of an extension (false when it is not loaded here).
func (s *Supervisor) Loaded(key string) (*LoadedState, bool) {
	m := s.get(key)
	if m == nil {
		return nil, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return &LoadedState{Source: m.src, Enabled: m.rec.Enabled, Config: m.rec.Config}, true
}

// Install registers an extension from a materialised package while keel serves and starts
// it (a lazy one, an adapter, is ready to start on first use). Its routes join the route
// table at once. A refusal (route collision, unsupported kernel, bad config, key already
// loaded) leaves the registry row in status error with the reason; a failed first start
// leaves it in status error and the supervisor retries with backoff, as at start-up.
func (s *Supervisor) Install(ctx context.Context, src *Source, mv Move) error {
	m, err := s.register(ctx, src)
	if err != nil {
		return err
	}
	s.record(ctx, mv, src.Manifest.Kind, src.Manifest.Key, "installed", map[string]any{
		"version": src.Manifest.Version, "source": src.origin(), "packageName": src.PackageName, "capabilities": src.Manifest.Capabilities,
	})
	if m == nil {
		return nil // disabled, flag off, or lazy
	}
	if err := m.start(ctx); err != nil {
		return fmt.Errorf("extension %s failed to start: %w", src.Manifest.Key, err)
	}
	return nil
}

func (m *managed) enabled() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rec.Enabled
}

func (m *managed) setEnabled(on bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rec.Enabled = on
}

// Enable lets an extension run again and starts it (status ready); a lazy one becomes
// ready to start on first use. Enabling one that is in error restarts it at once instead of
// waiting for its backoff.
func (s *Supervisor) Enable(ctx context.Context, key string, mv Move) error {
	defer s.k.ReadCache.Invalidate("") // the extension's answers may change
	m := s.get(key)
	if m == nil {
		return ErrNotLoaded
	}
	if !mv.Follow {
		if err := s.k.ExtensionSetEnabled(ctx, key, true); err != nil {
			return err
		}
	}
	m.setEnabled(true)
	s.record(ctx, mv, m.src.Manifest.Kind, key, "enabled", map[string]any{"version": m.src.Manifest.Version})
	if !s.flagOn(ctx, m) {
		m.setStatus(ctx, kernel.ExtensionDisabled, "extension.disabled", fmt.Errorf("instance setting %s is off", m.src.Manifest.Flag))
		return nil
	}
	m.startMu.Lock()
	defer m.startMu.Unlock()
	if c, _ := m.current(); c != nil {
		m.setStatus(ctx, kernel.ExtensionReady, "extension.enabled", nil)
		return nil
	}
	if m.active() {
		// Restarting with backoff: start over now.
		m.halt(ctx, kernel.ExtensionError, "extension.restarting", nil)
	}
	if m.lazy() {
		m.setStatus(ctx, kernel.ExtensionReady, "extension.enabled", nil)
		return nil
	}
	if err := m.startLocked(ctx); err != nil {
		return fmt.Errorf("extension %s failed to start: %w", key, err)
	}
	return nil
}

// Disable stops an extension and keeps it loaded (status disabled): its routes answer 503
// extension_disabled, its calls, jobs and events are refused, its config is kept. Requests
// already in flight finish first (up to the request timeout).
func (s *Supervisor) Disable(ctx context.Context, key string, mv Move) error {
	defer s.k.ReadCache.Invalidate("") // the extension's answers may change
	m := s.get(key)
	if m == nil {
		return ErrNotLoaded
	}
	if !mv.Follow {
		if err := s.k.ExtensionSetEnabled(ctx, key, false); err != nil {
			return err
		}
	}
	m.setEnabled(false)
	s.record(ctx, mv, m.src.Manifest.Kind, key, "disabled", map[string]any{"version": m.src.Manifest.Version})
	s.drain(ctx, m)
	m.startMu.Lock()
	defer m.startMu.Unlock()
	m.halt(ctx, kernel.ExtensionDisabled, "extension.disabled", nil)
	if _, st := m.current(); st != kernel.ExtensionDisabled {
		m.setStatus(ctx, kernel.ExtensionDisabled, "extension.disabled", nil)
	}
	return nil
}

// drain waits until no request, call, job or event is being served by m (up to the
// request timeout). New uses must already be refused or sent elsewhere.
func (s *Supervisor) drain(ctx context.Context, m *managed) {
	deadline := time.Now().Add(s.cfg.RequestTimeout)
	for m.inflight.Load() > 0 && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Uninstall unloads an extension: its routes leave the table, requests in flight finish,
// then it stops. Without purge the registry row, config and the extension's data are kept
// (status uninstalled, hidden from the API); with purge its schema and role, key-value
// state, config and row are deleted. Built-ins are refused (the caller checks). An
// extension that is not loaded on this node is only purged or marked in the registry.
func (s *Supervisor) Uninstall(ctx context.Context, key string, purge bool, mv Move) error {
	s.mu.Lock()
	m := s.exts[key]
	delete(s.exts, key)
	s.mu.Unlock()
	kind := sdk.KindPlugin
	version := ""
	if m != nil {
		kind, version = m.src.Manifest.Kind, m.src.Manifest.Version
		s.k.Routes.RemoveOwner(key)
		m.setEnabled(false) // a request that matched a route just before sees "disabled"
		s.drain(ctx, m)
		m.quiet.Store(true)
		m.shutdown(ctx)
	}
	if mv.Follow {
		return nil
	}
	if purge {
		if d, ok := s.db.(DatabaseDropper); ok {
			if err := d.DropExtensionDatabase(ctx, key); err != nil {
				return err
			}
		}
		if err := s.k.ExtensionPurge(ctx, key); err != nil {
			return err
		}
	} else if err := s.k.ExtensionMarkUninstalled(ctx, key); err != nil {
		return err
	}
	s.record(ctx, mv, kind, key, "uninstalled", map[string]any{"version": version, "purge": purge})
	return nil
}

// NewCapabilities returns the capabilities of mf that are not among granted.
func NewCapabilities(mf *sdk.Manifest, granted []string) []string {
	var out []string
	for _, c := range mf.Capabilities {
		if !slices.Contains(granted, c) {
			out = append(out, c)
		}
	}
	return out
}

// Upgrade replaces a running extension with a new version of it without failing requests:
// the new version starts beside the old one (migrating its schema as it configures),
// passes a health check, the route table switches to it in one atomic step, requests in
// flight on the old version finish there (drain), then the old version stops. Calls, jobs
// and events follow the switch the same way.
//
// A new version that asks for capabilities beyond those granted is recorded as pending
// (status upgrade_pending) and refused with *ApprovalRequiredError unless approve is set;
// approving grants them. A version that fails to start, fails its health check or cannot
// take over the routes is refused with *UpgradeFailedError: the old version keeps serving
// and the reason becomes lastError. A disabled extension is upgraded in place and stays
// disabled.
func (s *Supervisor) Upgrade(ctx context.Context, key string, src *Source, approve bool, mv Move) error {
	old := s.get(key)
	if old == nil {
		return ErrNotLoaded
	}
	mf := src.Manifest
	if mf.Key != key {
		return fmt.Errorf("the new package is extension %s, not %s", mf.Key, key)
	}
	rec, err := s.k.ExtensionGetAny(ctx, key)
	if err != nil {
		return err
	}
	if rec == nil {
		return ErrNotLoaded
	}
	granted := rec.GrantedCapabilities
	if !mv.Follow {
		if added := NewCapabilities(mf, granted); len(added) > 0 {
			if !approve {
				if err := s.k.ExtensionSetPending(ctx, key, &kernel.PendingUpgrade{
					Version: mf.Version, Digest: src.Digest, Path: src.Dir, Manifest: src.ManifestJSON,
				}); err != nil {
					return err
				}
				s.record(ctx, mv, mf.Kind, key, "upgrade_pending", map[string]any{
					"fromVersion": old.src.Manifest.Version, "toVersion": mf.Version, "newCapabilities": added,
				})
				return &ApprovalRequiredError{Key: key, Version: mf.Version, NewCapabilities: added}
			}
			granted = append(slices.Clone(granted), added...)
		}
	}
	fail := func(err error) error {
		if !mv.Follow {
			if serr := s.k.ExtensionSetLastError(ctx, key, err); serr != nil {
				s.log.Error("error recording failed upgrade", "extension", key, "error", serr)
			}
			s.record(ctx, mv, mf.Kind, key, "upgrade_failed", map[string]any{
				"fromVersion": old.src.Manifest.Version, "toVersion": mf.Version, "error": err.Error(),
			})
		}
		return &UpgradeFailedError{Key: key, Version: mf.Version, Err: err}
	}
	if err := CheckKernelVersion(mf.Kernel, kernel.Version); err != nil {
		return fail(err)
	}
	if err := mf.ValidateConfig(rec.Config); err != nil {
		return fail(err)
	}
	next := &managed{s: s, key: key, src: src, services: hostsvc.New(mf, s.deps), status: kernel.ExtensionInstalled}
	recCopy := *rec
	next.rec = &recCopy
	next.quiet.Store(true)
	runs := old.enabled() && s.flagOn(ctx, old)
	if runs {
		if err := next.startCandidate(ctx); err != nil {
			return fail(err)
		}
	}
	// The switch: routes first (atomically), then calls and jobs (the map), then
	// requests that matched the old routes just before (the successor).
	if err := s.k.Routes.ReplaceOwner(key, s.routesFor(next)...); err != nil {
		next.shutdown(ctx)
		return fail(err)
	}
	s.mu.Lock()
	s.exts[key] = next
	s.mu.Unlock()
	old.quiet.Store(true)
	old.successor.Store(next)
	s.k.ReadCache.Invalidate("") // the new version may answer differently
	if !mv.Follow {
		if _, err := s.k.ExtensionUpsert(ctx, &kernel.ExtensionUpsertParams{
			Key: key, Version: mf.Version, Kind: mf.Kind, Runtime: mf.Runtime.Kind, Source: src.origin(), Path: src.Dir,
			Manifest: src.ManifestJSON, PackageName: src.PackageName, PackageDigest: src.Digest, Granted: granted,
		}); err != nil {
			s.log.Error("error recording upgraded extension", "extension", key, "error", err)
		}
		if err := s.k.ExtensionSetLastError(ctx, key, nil); err != nil {
			s.log.Error("error clearing last error", "extension", key, "error", err)
		}
		if err := s.k.ExtensionSetPending(ctx, key, nil); err != nil {
			s.log.Error("error clearing pending upgrade", "extension", key, "error", err)
		}
	}
	next.quiet.Store(false)
	switch {
	case runs:
		next.setStatus(ctx, kernel.ExtensionReady, "extension.ready", nil)
	default:
		next.setStatus(ctx, kernel.ExtensionDisabled, "extension.disabled", nil)
	}
	s.record(ctx, mv, mf.Kind, key, "upgraded", map[string]any{
		"fromVersion": old.src.Manifest.Version, "toVersion": mf.Version, "approved": approve,
	})
	s.drain(ctx, old)
	old.shutdown(ctx)
	return nil
}

// startCandidate launches an upgrade candidate and checks its health. Unlike start, a
// failure is final: the candidate is stopped, not retried.
func (m *managed) startCandidate(ctx context.Context) error {
	m.startMu.Lock()
	defer m.startMu.Unlock()
	m.mu.Lock()
	watchCtx, cancel := context.WithCancel(m.s.ctx)
	m.watchCancel = cancel
	m.mu.Unlock()
	m.touch()
	err := m.launch(ctx)
	if err == nil {
		err = m.healthCheck(ctx)
	}
	if err != nil {
		m.mu.Lock()
		m.stopped = true
		m.mu.Unlock()
		m.halt(ctx, kernel.ExtensionError, "extension.failed", err)
		return err
	}
	m.s.wg.Add(1)
	go m.watch(watchCtx)
	return nil
}

// healthCheck asks a freshly launched extension for its health once.
func (m *managed) healthCheck(ctx context.Context) error {
	c, _ := m.current()
	if c == nil {
		return errors.New("the new version has no client after its start")
	}
	pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	res, err := c.Health(pingCtx, &extensionv1.HealthRequest{})
	if err != nil {
		return fmt.Errorf("health check of the new version failed: %w", err)
	}
	if res.Status != "ok" {
		return fmt.Errorf("health check of the new version failed: status %s: %s", res.Status, res.Message)
	}
	return nil
}

// Reconfigure stores a new config (validated against the manifest's config schema by the
// caller) and delivers it to the running extension without a restart: a process extension
// gets the reserved call ConfigChangedMethod, a wasm module is configured again. An
// extension that is not running gets it at its next start.
func (s *Supervisor) Reconfigure(ctx context.Context, key string, config json.RawMessage, mv Move) error {
	defer s.k.ReadCache.Invalidate("") // the extension's answers may change
	m := s.get(key)
	if m == nil {
		return ErrNotLoaded
	}
	if !mv.Follow {
		if err := s.k.ExtensionSetConfig(ctx, key, config); err != nil {
			return err
		}
	}
	m.mu.Lock()
	m.rec.Config = config
	client, wasm := m.client, m.wasm
	m.mu.Unlock()
	s.record(ctx, mv, m.src.Manifest.Kind, key, "config.updated", map[string]any{"version": m.src.Manifest.Version})
	if client == nil {
		return nil
	}
	if wasm != nil {
		// A wasm module's instances are configured again from the new request.
		dataDir := s.dataDir(key)
		if _, err := wasm.Configure(ctx, &extensionv1.ConfigureRequest{
			ConfigJson: config, DataDir: dataDir, InstanceId: s.k.InstanceID(), ApiUrl: s.cfg.APIURL, KernelVersion: kernel.Version,
		}); err != nil {
			return fmt.Errorf("error delivering config to %s: %w", key, err)
		}
		return nil
	}
	res, err := client.Call(ctx, &extensionv1.CallRequest{Method: ConfigChangedMethod, InputJson: config, Caller: "host", Actor: sdk.SystemActor()})
	if err != nil {
		return fmt.Errorf("error delivering config to %s: %w", key, err)
	}
	if res.Error != nil {
		return fmt.Errorf("extension %s refused its new config: %s", key, res.Error.Message)
	}
	return nil
}

// ConfigVerdict is an extension validator's answer about a config.
type ConfigVerdict struct {
	// Supported is false when the extension has no validator (or is not running).
	Supported bool
	Valid     bool
	Message   string
}

// TestConfig asks a running extension's optional validator about a config, without
// storing or delivering it.
func (s *Supervisor) TestConfig(ctx context.Context, key string, config json.RawMessage) (*ConfigVerdict, error) {
	m := s.get(key)
	if m == nil {
		return nil, ErrNotLoaded
	}
	client, release, err := s.Acquire(ctx, key)
	if err != nil {
		return &ConfigVerdict{Supported: false, Message: err.Error()}, nil
	}
	defer release()
	if m.wasmModule() != nil {
		return &ConfigVerdict{}, nil
	}
	res, err := client.Call(ctx, &extensionv1.CallRequest{Method: ConfigValidateMethod, InputJson: config, Caller: "host", Actor: sdk.SystemActor()})
	if err != nil {
		return nil, fmt.Errorf("error asking %s to validate its config: %w", key, err)
	}
	if res.Error != nil {
		if res.Error.Code == sdk.CodeNotSupported {
			return &ConfigVerdict{}, nil
		}
		return &ConfigVerdict{Supported: true, Valid: false, Message: res.Error.Message}, nil
	}
	var out struct {
		Warnings []string `json:"warnings"`
	}
	_ = json.Unmarshal(res.OutputJson, &out)
	v := &ConfigVerdict{Supported: true, Valid: true}
	if len(out.Warnings) > 0 {
		v.Message = "Warnings: " + joinSemi(out.Warnings)
	}
	return v, nil
}

func joinSemi(list []string) string {
	out := ""
	for i, s := range list {
		if i > 0 {
			out += "; "
		}
		out += s
	}
	return out
}
