package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"

	"github.com/keelhq/keel/host/packages"
	"github.com/keelhq/keel/host/queue"
	"github.com/keelhq/keel/host/supervisor"
	"github.com/keelhq/keel/kernel"
	"github.com/keelhq/keel/sdk"
)

// extensionManager carries out the plugin lifecycle routes (kernel.ExtensionManager): it
// resolves packages through the Installer and moves extensions through the supervisor,
// one move at a time. Its reconcile loop makes this node follow moves made on another
// node sharing the database.
type extensionManager struct {
	k     *kernel.Kernel
	sup   *supervisor.Supervisor
	inst  packages.Installer
	queue *queue.Queue
	log   hclog.Logger

	mu sync.Mutex // one lifecycle move (or reconcile pass) at a time
}

func (x *extensionManager) move(ctx context.Context) supervisor.Move {
	return supervisor.Move{By: kernel.ActorFrom(ctx)}
}

// sourceOf turns an installed package into a supervisor source.
func sourceOf(pkg *packages.Package, granted []string) *supervisor.Source {
	origin := pkg.Source
	if origin == "" {
		origin = "path"
	}
	return &supervisor.Source{Manifest: pkg.Manifest, ManifestJSON: pkg.ManifestJSON, Dir: pkg.Dir, Origin: origin,
		PackageName: pkg.PackageName, Digest: pkg.Digest, Granted: granted}
}

// installError turns an Installer failure into a client error: its own API errors pass
// through; anything else is a package that could not be installed.
func installError(err error) error {
	var apiErr *kernel.APIError
	if errors.As(err, &apiErr) {
		return err
	}
	return (&kernel.APIError{Status: http.StatusUnprocessableEntity, Message: "Package could not be installed: " + err.Error()}).WithCode("install_failed")
}

// InstallExtension implements kernel.ExtensionManager.
func (x *extensionManager) InstallExtension(ctx context.Context, req *kernel.ExtensionInstallRequest) (string, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	pkg, err := x.inst.Install(ctx, packages.Request{PackageName: req.PackageName, Version: req.Version, IsLocalPath: req.IsLocalPath})
	if err != nil {
		return "", installError(err)
	}
	mf := pkg.Manifest
	if mf.Kind == sdk.KindAdapter {
		return "", kernel.BadRequest(fmt.Sprintf("%s is an adapter package; install it with POST /api/adapters/install", mf.Key)).WithCode("wrong_kind")
	}
	existing, err := x.k.ExtensionGetAny(ctx, mf.Key)
	if err != nil {
		return "", err
	}
	if _, loaded := x.sup.Loaded(mf.Key); loaded || (existing != nil && existing.Status != kernel.ExtensionUninstalled) {
		return "", kernel.Conflict("Plugin already installed").WithCode("already_installed")
	}
	err = x.sup.Install(ctx, sourceOf(pkg, nil), x.move(ctx))
	if _, loaded := x.sup.Loaded(mf.Key); !loaded {
		// Refused before it joined the route table: leave no trace but a kept uninstalled row.
		if existing == nil {
			if perr := x.k.ExtensionPurge(ctx, mf.Key); perr != nil {
				x.log.Error("error removing refused extension", "extension", mf.Key, "error", perr)
			}
		} else if merr := x.k.ExtensionMarkUninstalled(ctx, mf.Key); merr != nil {
			x.log.Error("error removing refused extension", "extension", mf.Key, "error", merr)
		}
		if err == nil {
			err = errors.New("not loaded")
		}
		return "", (&kernel.APIError{Status: http.StatusUnprocessableEntity, Message: fmt.Sprintf("Plugin %s was refused: %v", mf.Key, err)}).WithCode("install_refused")
	}
	x.schedule(mf)
	if err != nil {
		return "", (&kernel.APIError{Status: http.StatusUnprocessableEntity, Message: fmt.Sprintf(
			"Plugin %s is installed but failed to start (status error; keel retries it): %v", mf.Key, err)}).WithCode("start_failed")
	}
	x.sup.ReconcileManagedEverywhere(mf.Key)
	return mf.Key, nil
}

func (x *extensionManager) schedule(mf *sdk.Manifest) {
	if x.queue == nil {
		return
	}
	x.queue.Unschedule(mf)
	if err := x.queue.Schedule(mf); err != nil {
		x.log.Warn("extension jobs not scheduled", "extension", mf.Key, "error", err)
	}
}

// EnableExtension implements kernel.ExtensionManager.
func (x *extensionManager) EnableExtension(ctx context.Context, key string) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	err := x.sup.Enable(ctx, key, x.move(ctx))
	if errors.Is(err, supervisor.ErrNotLoaded) {
		// Not loaded at this start (its package failed to load): load it now.
		rec, gerr := x.k.ExtensionGet(ctx, key)
		if gerr != nil {
			return gerr
		}
		if rec == nil || rec.PackageDigest == "" {
			msg := "not loaded on this node"
			if rec != nil && rec.LastError != nil {
				msg = *rec.LastError
			}
			return kernel.Conflict(fmt.Sprintf("Plugin %s cannot be enabled: %s", key, msg)).WithCode("not_loaded")
		}
		if err := x.k.ExtensionSetEnabled(ctx, key, true); err != nil {
			return err
		}
		pkg, merr := x.inst.Materialise(ctx, rec.PackageDigest)
		if merr != nil {
			return installError(merr)
		}
		err = x.sup.Install(ctx, sourceOf(pkg, rec.GrantedCapabilities), x.move(ctx))
	}
	if err != nil {
		return (&kernel.APIError{Status: http.StatusUnprocessableEntity, Message: fmt.Sprintf("Plugin %s failed to start: %v", key, err)}).WithCode("start_failed")
	}
	x.sup.ReconcileManagedEverywhere(key)
	return nil
}

// DisableExtension implements kernel.ExtensionManager.
func (x *extensionManager) DisableExtension(ctx context.Context, key string) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	err := x.sup.Disable(ctx, key, x.move(ctx))
	if errors.Is(err, supervisor.ErrNotLoaded) {
		if err := x.k.ExtensionSetEnabled(ctx, key, false); err != nil {
			return err
		}
		return x.k.ExtensionSetStatus(ctx, key, kernel.ExtensionDisabled, nil)
	}
	return err
}

// UpgradeExtension implements kernel.ExtensionManager.
func (x *extensionManager) UpgradeExtension(ctx context.Context, key, version string) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	rec, err := x.k.ExtensionGet(ctx, key)
	if err != nil {
		return err
	}
	if rec == nil {
		return kernel.NotFound("Plugin not found")
	}
	var pkg *packages.Package
	approve := false
	if p := rec.PendingUpgrade; p != nil && (version == "" || version == p.Version) {
		// Asking again approves the pending upgrade and the capabilities it adds.
		pkg, err = x.inst.Materialise(ctx, p.Digest)
		approve = true
	} else {
		req := packages.Request{PackageName: rec.PackageName, Version: version, IsLocalPath: rec.Source != "npm"}
		pkg, err = x.inst.Install(ctx, req)
	}
	if err != nil {
		return installError(err)
	}
	if pkg.Manifest.Key != key {
		return kernel.BadRequest(fmt.Sprintf("The package %s now holds extension %s, not %s", rec.PackageName, pkg.Manifest.Key, key)).WithCode("wrong_package")
	}
	oldDigest := rec.PackageDigest
	loaded, ok := x.sup.Loaded(key)
	if ok && loaded.Source.Digest == pkg.Digest && !approve {
		return nil // the same bytes: nothing to do
	}
	src := sourceOf(pkg, nil)
	if !ok {
		// Not loaded on this node (it failed at start): installing the new version is the upgrade.
		src.Granted = rec.GrantedCapabilities
		if added := supervisor.NewCapabilities(pkg.Manifest, rec.GrantedCapabilities); len(added) > 0 && !approve {
			if err := x.k.ExtensionSetPending(ctx, key, &kernel.PendingUpgrade{Version: pkg.Manifest.Version, Digest: pkg.Digest, Path: pkg.Dir, Manifest: pkg.ManifestJSON}); err != nil {
				return err
			}
			return nil
		}
		if approve {
			src.Granted = append(append([]string(nil), rec.GrantedCapabilities...), supervisor.NewCapabilities(pkg.Manifest, rec.GrantedCapabilities)...)
		}
		if err := x.sup.Install(ctx, src, x.move(ctx)); err != nil {
			return (&kernel.APIError{Status: http.StatusUnprocessableEntity, Message: fmt.Sprintf("Upgrade of %s failed: %v", key, err)}).WithCode("upgrade_failed")
		}
		_ = x.k.ExtensionSetPending(ctx, key, nil)
		x.schedule(pkg.Manifest)
		x.sup.ReconcileManagedEverywhere(key)
		return nil
	}
	err = x.sup.Upgrade(ctx, key, src, approve, x.move(ctx))
	var pending *supervisor.ApprovalRequiredError
	var failed *supervisor.UpgradeFailedError
	switch {
	case errors.As(err, &pending):
		return nil // the record says upgrade_pending and which capabilities it adds
	case errors.As(err, &failed):
		return (&kernel.APIError{Status: http.StatusUnprocessableEntity, Message: fmt.Sprintf(
			"Upgrade of %s to %s failed; version %s keeps serving: %v", key, failed.Version, loaded.Source.Manifest.Version, failed.Err)}).WithCode("upgrade_failed")
	case err != nil:
		return err
	}
	if x.queue != nil {
		x.queue.Unschedule(loaded.Source.Manifest)
	}
	x.schedule(pkg.Manifest)
	if oldDigest != "" && oldDigest != pkg.Digest {
		if err := x.inst.Remove(ctx, oldDigest); err != nil {
			x.log.Warn("error removing the replaced package", "extension", key, "digest", oldDigest, "error", err)
		}
	}
	x.sup.ReconcileManagedEverywhere(key)
	return nil
}

// UninstallExtension implements kernel.ExtensionManager.
func (x *extensionManager) UninstallExtension(ctx context.Context, key string, purge bool) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	rec, err := x.k.ExtensionGetAny(ctx, key)
	if err != nil {
		return err
	}
	if loaded, ok := x.sup.Loaded(key); ok && x.queue != nil {
		x.queue.Unschedule(loaded.Source.Manifest)
	}
	if purge {
		// The owners remove what the plugin made before its bindings go with its row.
		if err := x.sup.PurgeManaged(ctx, key); err != nil {
			return (&kernel.APIError{Status: http.StatusBadGateway, Message: fmt.Sprintf(
				"Plugin %s was not purged: its managed resources could not all be removed: %v", key, err), Internal: err}).WithCode("managed_purge_failed")
		}
	}
	if err := x.sup.Uninstall(ctx, key, purge, x.move(ctx)); err != nil {
		return err
	}
	if purge && rec != nil {
		for _, d := range []string{rec.PackageDigest, pendingDigest(rec)} {
			if d == "" {
				continue
			}
			if err := x.inst.Remove(ctx, d); err != nil {
				x.log.Warn("error removing the stored package", "extension", key, "digest", d, "error", err)
			}
		}
	}
	return nil
}

func pendingDigest(rec *kernel.ExtensionRecord) string {
	if rec.PendingUpgrade == nil {
		return ""
	}
	return rec.PendingUpgrade.Digest
}

// manifestOf returns the manifest an extension runs with on this node, or the registry's.
func (x *extensionManager) manifestOf(ctx context.Context, key string) (*sdk.Manifest, error) {
	if loaded, ok := x.sup.Loaded(key); ok {
		return loaded.Source.Manifest, nil
	}
	rec, err := x.k.ExtensionGet(ctx, key)
	if err != nil {
		return nil, err
	}
	if rec == nil {
		return nil, kernel.NotFound("Plugin not found")
	}
	var mf sdk.Manifest
	if err := json.Unmarshal(rec.Manifest, &mf); err != nil {
		return nil, fmt.Errorf("error reading manifest of %s: %w", key, err)
	}
	return &mf, nil
}

// checkConfig validates a config against the manifest's config schema: 400 with one
// detail per failing field.
func checkConfig(mf *sdk.Manifest, config json.RawMessage) error {
	fields, err := mf.ConfigFieldErrors(config)
	if err != nil {
		return err
	}
	if len(fields) == 0 {
		return nil
	}
	details := make([]kernel.ValidationDetail, 0, len(fields))
	for _, f := range fields {
		details = append(details, kernel.ValidationDetail{Path: f.Field, Message: f.Message})
	}
	return (&kernel.APIError{Status: http.StatusBadRequest, Message: "Configuration does not match the plugin's config schema", Details: details}).WithCode("invalid_config")
}

// ConfigureExtension implements kernel.ExtensionManager.
func (x *extensionManager) ConfigureExtension(ctx context.Context, key string, config json.RawMessage) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	mf, err := x.manifestOf(ctx, key)
	if err != nil {
		return err
	}
	if err := checkConfig(mf, config); err != nil {
		return err
	}
	err = x.sup.Reconfigure(ctx, key, config, x.move(ctx))
	if errors.Is(err, supervisor.ErrNotLoaded) {
		return x.k.ExtensionSetConfig(ctx, key, config)
	}
	if err != nil {
		return (&kernel.APIError{Status: http.StatusBadGateway, Message: fmt.Sprintf("The config was saved, but %s did not take it: %v", key, err), Internal: err}).WithCode("config_not_delivered")
	}
	return nil
}

// TestExtensionConfig implements kernel.ExtensionManager.
func (x *extensionManager) TestExtensionConfig(ctx context.Context, key string, config json.RawMessage) (*kernel.ExtensionConfigTest, error) {
	mf, err := x.manifestOf(ctx, key)
	if err != nil {
		return nil, err
	}
	if err := checkConfig(mf, config); err != nil {
		return nil, err
	}
	v, err := x.sup.TestConfig(ctx, key, config)
	if errors.Is(err, supervisor.ErrNotLoaded) || (err == nil && !v.Supported) {
		msg := "The config matches the plugin's config schema; the plugin has no validator of its own"
		if err == nil && v.Message != "" {
			msg += " (" + v.Message + ")"
		}
		return &kernel.ExtensionConfigTest{Valid: true, Supported: false, Message: msg}, nil
	}
	if err != nil {
		return nil, (&kernel.APIError{Status: http.StatusBadGateway, Message: fmt.Sprintf("%s did not answer the config test", key), Internal: err}).WithCode("extension_error")
	}
	return &kernel.ExtensionConfigTest{Valid: v.Valid, Supported: true, Message: v.Message}, nil
}

// installedSources returns the extensions installed through the API (a stored package)
// that this start should load beside the built-ins and the extensions path, and the
// failures to materialise, by key.
func installedSources(ctx context.Context, k *kernel.Kernel, inst packages.Installer, loaded []*supervisor.Source) ([]*supervisor.Source, map[string]error, error) {
	have := map[string]bool{}
	for _, src := range loaded {
		have[src.Manifest.Key] = true
	}
	recs, err := k.ExtensionList(ctx)
	if err != nil {
		return nil, nil, err
	}
	var out []*supervisor.Source
	failed := map[string]error{}
	for _, rec := range recs {
		if rec.PackageDigest == "" || have[rec.PluginKey] {
			continue
		}
		pkg, err := inst.Materialise(ctx, rec.PackageDigest)
		if err != nil {
			failed[rec.PluginKey] = fmt.Errorf("package of %s could not be materialised: %w", rec.PluginKey, err)
			continue
		}
		out = append(out, sourceOf(pkg, rec.GrantedCapabilities))
	}
	return out, failed, nil
}

// reconcile makes this node follow moves another node made: it loads what was installed,
// upgrades what was upgraded, unloads what was uninstalled, and follows enabled and config.
func (x *extensionManager) reconcile(ctx context.Context) {
	x.mu.Lock()
	defer x.mu.Unlock()
	recs, err := x.k.ExtensionListAll(ctx)
	if err != nil {
		x.log.Warn("error reading the extension registry", "error", err)
		return
	}
	follow := supervisor.Move{Follow: true}
	inRegistry := map[string]bool{}
	for _, rec := range recs {
		key := rec.PluginKey
		loaded, ok := x.sup.Loaded(key)
		if rec.Status == kernel.ExtensionUninstalled {
			if ok && loaded.Source.Digest != "" {
				x.queue.Unschedule(loaded.Source.Manifest)
				if err := x.sup.Uninstall(ctx, key, false, follow); err != nil {
					x.log.Warn("error following an uninstall", "extension", key, "error", err)
				}
			}
			continue
		}
		inRegistry[key] = true
		if rec.PackageDigest != "" && (!ok || loaded.Source.Digest != rec.PackageDigest) {
			pkg, err := x.inst.Materialise(ctx, rec.PackageDigest)
			if err != nil {
				x.log.Warn("error materialising a package installed on another node", "extension", key, "error", err)
				continue
			}
			src := sourceOf(pkg, rec.GrantedCapabilities)
			if !ok {
				if err := x.sup.Install(ctx, src, follow); err != nil {
					x.log.Warn("error following an install", "extension", key, "error", err)
				}
				x.schedule(pkg.Manifest)
				continue
			}
			if err := x.sup.Upgrade(ctx, key, src, true, follow); err != nil {
				x.log.Warn("error following an upgrade", "extension", key, "error", err)
				continue
			}
			x.queue.Unschedule(loaded.Source.Manifest)
			x.schedule(pkg.Manifest)
			loaded, ok = x.sup.Loaded(key)
		}
		if !ok {
			continue
		}
		if loaded.Enabled != rec.Enabled {
			if rec.Enabled {
				err = x.sup.Enable(ctx, key, follow)
			} else {
				err = x.sup.Disable(ctx, key, follow)
			}
			if err != nil {
				x.log.Warn("error following an enable or disable", "extension", key, "error", err)
			}
		}
		if !jsonEqual(loaded.Config, rec.Config) {
			if err := x.sup.Reconfigure(ctx, key, rec.Config, follow); err != nil {
				x.log.Warn("error following a config change", "extension", key, "error", err)
			}
		}
	}
	x.sup.RefreshWasmMounts(ctx)
	for _, key := range x.sup.Keys() {
		if loaded, ok := x.sup.Loaded(key); ok && loaded.Source.Digest != "" && !inRegistry[key] {
			x.queue.Unschedule(loaded.Source.Manifest)
			if err := x.sup.Uninstall(ctx, key, false, follow); err != nil {
				x.log.Warn("error following a purge", "extension", key, "error", err)
			}
		}
	}
}

// jsonEqual compares two JSON documents by value (an empty one counts as {}).
func jsonEqual(a, b json.RawMessage) bool {
	norm := func(r json.RawMessage) string {
		if len(bytes.TrimSpace(r)) == 0 {
			return "{}"
		}
		var v any
		if err := json.Unmarshal(r, &v); err != nil {
			return string(r)
		}
		out, _ := json.Marshal(v)
		return string(out)
	}
	return norm(a) == norm(b)
}

// extensionsChannel is the NOTIFY channel on which the registry announces a move (see
// migration 0010): the payload names the table, extensions or instance_settings.
const extensionsChannel = "keel_extensions"

// run follows moves made on other nodes until ctx ends: at once when the registry announces
// one (LISTEN), and every interval as the fallback for a notice missed while the listening
// connection was down.
func (x *extensionManager) run(ctx context.Context, interval time.Duration) {
	wake := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		x.listen(ctx, wake)
	}()
	defer func() { <-done }()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-wake:
		}
		x.reconcile(ctx)
	}
}

// listen holds a LISTEN connection on the registry's channel, reconnecting after a failure,
// and wakes the reconcile loop for each move; an experimental flag change is handed to the
// settings listeners (the supervisor starts or stops gated extensions).
func (x *extensionManager) listen(ctx context.Context, wake chan<- struct{}) {
	for ctx.Err() == nil {
		err := x.listenOnce(ctx, wake)
		if ctx.Err() != nil {
			return
		}
		x.log.Warn("registry listener failed; reconnecting (moves are still followed every interval)", "error", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

func (x *extensionManager) listenOnce(ctx context.Context, wake chan<- struct{}) error {
	conn, err := pgx.ConnectConfig(ctx, x.k.Pool.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("error connecting: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+extensionsChannel); err != nil {
		return fmt.Errorf("error listening: %w", err)
	}
	// A move made while this connection was down is caught up at once.
	select {
	case wake <- struct{}{}:
	default:
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return fmt.Errorf("error waiting for registry notices: %w", err)
		}
		if n.Payload == "instance_settings" {
			x.k.SettingsChangedElsewhere("experimental")
			continue
		}
		select {
		case wake <- struct{}{}:
		default:
		}
	}
}

var _ kernel.ExtensionManager = (*extensionManager)(nil)
