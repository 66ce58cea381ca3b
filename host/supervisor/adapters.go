package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/keelhq/keel/host/packages"
	"github.com/keelhq/keel/kernel"
	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/adapter"
	extensionv1 "github.com/keelhq/keel/sdk/proto/extension/v1"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

// The adapter registry. An adapter is an extension of kind adapter keyed "adapter.<type>"
// (the built-ins compiled into keel, or an installed adapter of a new type) or
// "adapter.<type>.<name>" (an installed adapter of an existing type). An installed adapter
// whose type has a built-in is an override: new runs of the type go to it, unless the
// operator paused it (kernel.adapter_settings), in which case they go to the built-in.
// Runs resolve their adapter once (adapter.ResolveMethod) and keep it, so a run in flight
// finishes on the extension it started with whatever the registry does meanwhile.

// adapterState is the supervisor's adapter registry state on this node.
type adapterState struct {
	mu        sync.Mutex
	installer packages.Installer
	// moves serialises registry changes (install, reload, reinstall, delete) with the
	// host's other extension lifecycle moves; nil serialises them among themselves.
	moves sync.Locker
	own   sync.Mutex
	// info caches each loaded adapter version's answer to info (models, label, schema).
	info map[*managed]*adapter.Info
}

// SetInstaller sets the package installer POST /api/adapters/install and reinstall use,
// and the lock that keeps adapter moves one at a time with the host's other lifecycle
// moves (nil: a lock of the registry's own).
func (s *Supervisor) SetInstaller(i packages.Installer, moves sync.Locker) {
	s.adapters.mu.Lock()
	defer s.adapters.mu.Unlock()
	s.adapters.installer = i
	s.adapters.moves = moves
}

// lockMoves takes the lifecycle move lock and returns its release.
func (s *Supervisor) lockMoves() func() {
	s.adapters.mu.Lock()
	l := s.adapters.moves
	s.adapters.mu.Unlock()
	if l == nil {
		l = &s.adapters.own
	}
	l.Lock()
	return l.Unlock
}

func (s *Supervisor) installer() packages.Installer {
	s.adapters.mu.Lock()
	defer s.adapters.mu.Unlock()
	return s.adapters.installer
}

// adapterSet is what is loaded for one adapter type.
type adapterSet struct {
	typ string
	// builtin is the compiled-in adapter of the type (key adapter.<type>), if any.
	builtin *managed
	// installed are the installed adapters of the type, by key.
	installed []*managed
}

// override is the installed adapter that overrides the built-in, if any: the first enabled
// one (the registry allows one override per type; extensions path duplicates sort by key).
func (a *adapterSet) override() *managed {
	if a.builtin == nil {
		return nil
	}
	for _, m := range a.installed {
		if m.enabled() {
			return m
		}
	}
	return nil
}

func isAdapter(m *managed) bool {
	return m.src.Manifest.Kind == sdk.KindAdapter && adapter.TypeOf(m.key) != ""
}

// adapterSets returns what is loaded for every adapter type, by type.
func (s *Supervisor) adapterSets() map[string]*adapterSet {
	s.mu.RLock()
	list := make([]*managed, 0, len(s.exts))
	for _, m := range s.exts {
		if isAdapter(m) {
			list = append(list, m)
		}
	}
	s.mu.RUnlock()
	sort.Slice(list, func(i, j int) bool { return list[i].key < list[j].key })
	out := map[string]*adapterSet{}
	for _, m := range list {
		typ := adapter.TypeOf(m.key)
		set := out[typ]
		if set == nil {
			set = &adapterSet{typ: typ}
			out[typ] = set
		}
		if m.src.Builtin && m.key == adapter.ExtensionKey(typ) {
			set.builtin = m
		} else {
			set.installed = append(set.installed, m)
		}
	}
	return out
}

func (s *Supervisor) adapterSet(typ string) *adapterSet {
	if set := s.adapterSets()[typ]; set != nil {
		return set
	}
	return &adapterSet{typ: typ}
}

// isBuiltinType reports whether a type is built in: named by the spec or served by a
// compiled-in adapter.
func isBuiltinType(set *adapterSet) bool {
	return set.builtin != nil || slices.Contains(adapter.SpecTypes, set.typ)
}

// ResolveAdapter returns the extension that serves new runs of an adapter type now: the
// override unless paused, else the built-in, else the installed adapter of that type. It
// returns nil when nothing loaded serves the type.
func (s *Supervisor) ResolveAdapter(ctx context.Context, typ string) (*adapter.Resolution, error) {
	set := s.adapterSet(typ)
	if o := set.override(); o != nil {
		st, err := s.k.AdapterSettingGet(ctx, typ)
		if err != nil {
			return nil, err
		}
		if !st.OverridePaused {
			return &adapter.Resolution{Type: typ, Key: o.key, Override: true}, nil
		}
	}
	if set.builtin != nil {
		return &adapter.Resolution{Type: typ, Key: set.builtin.key}, nil
	}
	for _, m := range set.installed {
		if m.enabled() {
			return &adapter.Resolution{Type: typ, Key: m.key}, nil
		}
	}
	if len(set.installed) > 0 {
		return &adapter.Resolution{Type: typ, Key: set.installed[0].key}, nil
	}
	return nil, nil
}

// AdapterTypes lists the adapter types agents may name: the spec's and every loaded one.
func (s *Supervisor) AdapterTypes() []string {
	types := slices.Clone(adapter.SpecTypes)
	for typ := range s.adapterSets() {
		if !slices.Contains(types, typ) {
			types = append(types, typ)
		}
	}
	sort.Strings(types)
	return types
}

// adapterRegistryPrefix is the prefix of the reserved adapter registry methods.
const adapterRegistryPrefix = "keel.adapters."

// invokeAdapterRegistry answers the reserved adapter registry methods (adapter.ResolveMethod,
// adapter.ListMethod) for any caller; the calls service has checked the caller's uses.
func (s *Supervisor) invokeAdapterRegistry(ctx context.Context, req *hostv1.InvokeRequest) *hostv1.InvokeResponse {
	fail := func(status int, code, msg string) *hostv1.InvokeResponse {
		return &hostv1.InvokeResponse{Error: &extensionv1.Error{Status: int32(status), Code: code, Message: msg, Source: "downstream"}}
	}
	var out any
	switch req.Method {
	case adapter.ListMethod:
		out = &adapter.TypeList{Types: s.AdapterTypes()}
	case adapter.ResolveMethod:
		var in adapter.ResolveRequest
		if err := json.Unmarshal(req.InputJson, &in); err != nil || in.Type == "" {
			return fail(http.StatusBadRequest, "", "type is required")
		}
		res, err := s.ResolveAdapter(ctx, in.Type)
		if err != nil {
			return fail(http.StatusInternalServerError, "", err.Error())
		}
		if res == nil {
			return fail(http.StatusNotImplemented, "method_not_provided", fmt.Sprintf("no loaded extension provides adapter type %s", in.Type))
		}
		out = res
	default:
		return fail(http.StatusNotImplemented, "method_not_provided", fmt.Sprintf("no loaded extension provides %s", req.Method))
	}
	b, err := json.Marshal(out)
	if err != nil {
		return fail(http.StatusInternalServerError, "", err.Error())
	}
	return &hostv1.InvokeResponse{OutputJson: b}
}

// adapterInfo asks a loaded adapter to describe itself (starting it if it is lazy) and
// caches the answer for that version. A failure is not cached.
func (s *Supervisor) adapterInfo(ctx context.Context, m *managed) (*adapter.Info, error) {
	s.adapters.mu.Lock()
	if info := s.adapters.info[m]; info != nil {
		s.adapters.mu.Unlock()
		return info, nil
	}
	s.adapters.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := s.Invoke(ctx, "kernel", &hostv1.InvokeRequest{Method: adapter.MethodOf(m.key, adapter.MethodInfo), InputJson: []byte("{}"), Actor: sdk.SystemActor()})
	if err != nil {
		return nil, fmt.Errorf("error describing adapter %s: %w", m.key, err)
	}
	if res.Error != nil {
		return nil, fmt.Errorf("error describing adapter %s: %s", m.key, res.Error.Message)
	}
	info := &adapter.Info{}
	if err := json.Unmarshal(res.OutputJson, info); err != nil {
		return nil, fmt.Errorf("error decoding info of adapter %s: %w", m.key, err)
	}
	s.adapters.mu.Lock()
	if s.adapters.info == nil {
		s.adapters.info = map[*managed]*adapter.Info{}
	}
	s.adapters.info[m] = info
	s.adapters.mu.Unlock()
	return info, nil
}

// forgetAdapterInfo drops cached descriptions of versions no longer loaded.
func (s *Supervisor) forgetAdapterInfo() {
	s.mu.RLock()
	loaded := map[*managed]bool{}
	for _, m := range s.exts {
		loaded[m] = true
	}
	s.mu.RUnlock()
	s.adapters.mu.Lock()
	defer s.adapters.mu.Unlock()
	for m := range s.adapters.info {
		if !loaded[m] {
			delete(s.adapters.info, m)
		}
	}
}

// AdapterBuiltin names the built-in an override replaces.
type AdapterBuiltin struct {
	Key     string `json:"key"`
	Version string `json:"version"`
}

// AdapterInfo is one adapter type in the registry (GET /api/adapters).
type AdapterInfo struct {
	Type  string `json:"type"`
	Label string `json:"label"`
	// Source is builtin, path (a local directory or archive, or the extensions path) or npm:
	// where the adapter that the type's entry describes comes from (the override's, when
	// one is installed).
	Source  string `json:"source"`
	Version string `json:"version,omitempty"`
	// Key is the extension that describes the type (the override when one is installed).
	Key string `json:"key,omitempty"`
	// ActiveKey is the extension new runs of the type go to now (the built-in while an
	// override is paused); empty when nothing loaded serves the type.
	ActiveKey   string `json:"activeKey,omitempty"`
	PackageName string `json:"packageName,omitempty"`
	// Loaded is false for a spec type that no loaded adapter serves (its runs fail).
	Loaded bool `json:"loaded"`
	// Override is true when an installed adapter overrides the built-in Overrides.
	Override  bool            `json:"override"`
	Overrides *AdapterBuiltin `json:"overrides,omitempty"`
	// Paused is true while the override is paused (new runs go to the built-in).
	Paused   bool `json:"paused"`
	Disabled bool `json:"disabled"`
	// Status is the describing extension's status (ready, running, error…).
	Status string          `json:"status,omitempty"`
	Models []adapter.Model `json:"models"`
}

// AdapterList returns the registry: built-in and installed adapter types, sorted by type.
func (s *Supervisor) AdapterList(ctx context.Context) ([]*AdapterInfo, error) {
	settings, err := s.k.AdapterSettingList(ctx)
	if err != nil {
		return nil, err
	}
	sets := s.adapterSets()
	for _, typ := range adapter.SpecTypes {
		if sets[typ] == nil {
			sets[typ] = &adapterSet{typ: typ}
		}
	}
	out := make([]*AdapterInfo, 0, len(sets))
	for _, set := range sets {
		out = append(out, s.describe(ctx, set, settings[set.typ]))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	return out, nil
}

// AdapterGet returns one registry entry, or a 404 for a type nothing knows.
func (s *Supervisor) AdapterGet(ctx context.Context, typ string) (*AdapterInfo, error) {
	set, err := s.registered(typ)
	if err != nil {
		return nil, err
	}
	st, err := s.k.AdapterSettingGet(ctx, typ)
	if err != nil {
		return nil, err
	}
	return s.describe(ctx, set, st), nil
}

func notRegistered(typ string) *kernel.APIError {
	return kernel.NotFound(fmt.Sprintf("Adapter %q is not registered.", typ))
}

// registered returns what is loaded for a type the registry knows (404 otherwise).
func (s *Supervisor) registered(typ string) (*adapterSet, error) {
	set := s.adapterSet(typ)
	if set.builtin == nil && len(set.installed) == 0 && !slices.Contains(adapter.SpecTypes, typ) {
		return nil, notRegistered(typ)
	}
	return set, nil
}

func (s *Supervisor) describe(ctx context.Context, set *adapterSet, st *kernel.AdapterSetting) *AdapterInfo {
	if st == nil {
		st = &kernel.AdapterSetting{Type: set.typ}
	}
	info := &AdapterInfo{Type: set.typ, Label: set.typ, Source: "builtin", Disabled: st.Disabled, Models: []adapter.Model{}}
	var m *managed
	switch o := set.override(); {
	case o != nil:
		m = o
		info.Override, info.Paused = true, st.OverridePaused
		info.Overrides = &AdapterBuiltin{Key: set.builtin.key, Version: set.builtin.src.Manifest.Version}
	case set.builtin != nil:
		m = set.builtin
	case len(set.installed) > 0:
		m = set.installed[0]
	}
	if m == nil {
		return info
	}
	info.Loaded = true
	info.Key, info.Version, info.Source, info.PackageName = m.key, m.src.Manifest.Version, m.src.origin(), m.src.PackageName
	if res, err := s.ResolveAdapter(ctx, set.typ); err == nil && res != nil {
		info.ActiveKey = res.Key
	}
	m.mu.Lock()
	info.Status = m.status
	m.mu.Unlock()
	if m.src.Manifest.DisplayName != "" {
		info.Label = m.src.Manifest.DisplayName
	}
	if !m.enabled() || info.Status == kernel.ExtensionError || info.Status == kernel.ExtensionDisabled {
		return info // not asked to start just to describe itself
	}
	if ai, err := s.adapterInfo(ctx, m); err != nil {
		s.log.Debug("adapter did not describe itself", "adapter", m.key, "error", err)
	} else {
		if ai.Label != "" {
			info.Label = ai.Label
		}
		if ai.Models != nil {
			info.Models = ai.Models
		}
	}
	return info
}

// AdapterOverrideState is the answer of PATCH /api/adapters/{type}/override.
type AdapterOverrideState struct {
	Type   string `json:"type"`
	Paused bool   `json:"paused"`
	// Changed is false when nothing changed (no override installed, or already so).
	Changed bool `json:"changed"`
	// ActiveKey is the extension new runs of the type go to now.
	ActiveKey string `json:"activeKey,omitempty"`
}

// AdapterSetPaused pauses or resumes the override of a built-in type: while paused, new
// runs of the type go to the built-in; runs in flight finish where they started. The
// state is kept in the database, so it survives restarts and holds on every node.
func (s *Supervisor) AdapterSetPaused(ctx context.Context, typ string, paused bool, by *kernel.Actor) (*AdapterOverrideState, error) {
	set := s.adapterSet(typ)
	if !isBuiltinType(set) {
		return nil, kernel.BadRequest(fmt.Sprintf("Type %q is not a builtin adapter.", typ))
	}
	out := &AdapterOverrideState{Type: typ, Paused: paused}
	if o := set.override(); o != nil {
		changed, err := s.k.AdapterSettingSetPaused(ctx, typ, paused)
		if err != nil {
			return nil, err
		}
		out.Changed = changed
		if changed {
			action := "override_resumed"
			if paused {
				action = "override_paused"
			}
			s.record(ctx, Move{By: by}, sdk.KindAdapter, typ, action, map[string]any{"override": o.key})
		}
	} else {
		st, err := s.k.AdapterSettingGet(ctx, typ)
		if err != nil {
			return nil, err
		}
		out.Paused = st.OverridePaused
	}
	if res, err := s.ResolveAdapter(ctx, typ); err == nil && res != nil {
		out.ActiveKey = res.Key
	}
	return out, nil
}

// AdapterRemoved is the answer of DELETE /api/adapters/{type}.
type AdapterRemoved struct {
	Type    string `json:"type"`
	Removed bool   `json:"removed"`
	// Restored is the built-in that serves the type again (empty for a type without one).
	Restored string `json:"restored,omitempty"`
}

// AdapterDelete removes the installed adapters of a type: the extension leaves this node
// after the runs in flight on it finish (up to the request timeout), its registry row is
// marked uninstalled, and a built-in it overrode serves new runs again (its pause is
// cleared). A built-in type with nothing installed is refused.
func (s *Supervisor) AdapterDelete(ctx context.Context, typ string, by *kernel.Actor) (*AdapterRemoved, error) {
	defer s.lockMoves()()
	set, err := s.registered(typ)
	if err != nil {
		return nil, err
	}
	if len(set.installed) == 0 {
		return nil, kernel.Forbidden(fmt.Sprintf("Cannot remove built-in adapter %q.", typ))
	}
	for _, m := range set.installed {
		if err := s.Uninstall(ctx, m.key, false, Move{By: by}); err != nil {
			return nil, fmt.Errorf("error removing adapter %s: %w", m.key, err)
		}
	}
	if _, err := s.k.AdapterSettingSetPaused(ctx, typ, false); err != nil {
		return nil, err
	}
	s.forgetAdapterInfo()
	out := &AdapterRemoved{Type: typ, Removed: true}
	if set.builtin != nil {
		out.Restored = set.builtin.key
	}
	return out, nil
}

// AdapterInstallRequest is the body of POST /api/adapters/install.
type AdapterInstallRequest struct {
	// PackageName is an npm package name (name@version is split), or a local path when
	// IsLocalPath is true.
	PackageName string `json:"packageName"`
	Version     string `json:"version,omitempty"`
	IsLocalPath bool   `json:"isLocalPath,omitempty"`
}

// AdapterInstalled is the answer of POST /api/adapters/install.
type AdapterInstalled struct {
	Type        string    `json:"type"`
	Key         string    `json:"key"`
	PackageName string    `json:"packageName"`
	Version     string    `json:"version"`
	InstalledAt time.Time `json:"installedAt"`
	// Override is true when the adapter overrides a built-in type.
	Override bool `json:"override"`
	// RequiresRestart is always false: keel swaps adapters while serving (a reinstall of
	// an installed adapter is an upgrade in place, see README "Adapters").
	RequiresRestart bool `json:"requiresRestart"`
	// Reinstalled is true when an adapter with this key was already installed.
	Reinstalled bool `json:"reinstalled"`
}

// AdapterInstall installs an adapter package while keel serves. A new type is registered;
// a package whose type has a built-in becomes its override at once (runs that start
// afterwards use it; runs in flight finish on the built-in); a package whose key is
// already installed replaces it in place (the upgrade path: zero failed calls).
func (s *Supervisor) AdapterInstall(ctx context.Context, req *AdapterInstallRequest, by *kernel.Actor) (*AdapterInstalled, error) {
	req.PackageName = strings.TrimSpace(req.PackageName)
	if req.PackageName == "" {
		return nil, kernel.BadRequest("packageName is required")
	}
	if !req.IsLocalPath && req.Version == "" {
		if i := strings.LastIndex(req.PackageName, "@"); i > 0 {
			req.PackageName, req.Version = req.PackageName[:i], req.PackageName[i+1:]
		}
	}
	inst := s.installer()
	if inst == nil {
		return nil, kernel.NewAPIError(http.StatusServiceUnavailable, "No package installer is configured on this instance")
	}
	defer s.lockMoves()()
	pkg, err := inst.Install(ctx, packages.Request{PackageName: req.PackageName, Version: req.Version, IsLocalPath: req.IsLocalPath})
	if err != nil {
		return nil, err
	}
	return s.installPackage(ctx, pkg, by)
}

func (s *Supervisor) installPackage(ctx context.Context, pkg *packages.Package, by *kernel.Actor) (*AdapterInstalled, error) {
	mf := pkg.Manifest
	if mf.Kind != sdk.KindAdapter {
		return nil, kernel.BadRequest(fmt.Sprintf("Package %s is a %s, not an adapter; install it with POST /api/plugins/install", pkg.PackageName, mf.Kind))
	}
	typ := adapter.TypeOf(mf.Key)
	if typ == "" {
		return nil, kernel.BadRequest(fmt.Sprintf("Adapter key %s must be adapter.<type> or adapter.<type>.<name>", mf.Key))
	}
	set := s.adapterSet(typ)
	if set.builtin != nil && set.builtin.key == mf.Key {
		return nil, kernel.Conflict(fmt.Sprintf("%s is the built-in %s adapter; an override of it is keyed %s.<name>", mf.Key, typ, mf.Key))
	}
	src := &Source{Manifest: mf, ManifestJSON: pkg.ManifestJSON, Dir: pkg.Dir, Origin: pkg.Source, PackageName: pkg.PackageName, Digest: pkg.Digest}
	out := &AdapterInstalled{Type: typ, Key: mf.Key, PackageName: pkg.PackageName, Version: mf.Version, InstalledAt: time.Now().UTC(), Override: set.builtin != nil}
	if s.get(mf.Key) != nil {
		if err := s.Upgrade(ctx, mf.Key, src, true, Move{By: by}); err != nil {
			return nil, upgradeError(err)
		}
		s.forgetAdapterInfo()
		out.Reinstalled = true
		return out, nil
	}
	for _, m := range set.installed {
		return nil, kernel.Conflict(fmt.Sprintf("Adapter type %s is already provided by installed adapter %s; delete it first (DELETE /api/adapters/%s)", typ, m.key, typ))
	}
	existing, err := s.k.ExtensionGetAny(ctx, mf.Key)
	if err != nil {
		return nil, err
	}
	if err := s.Install(ctx, src, Move{By: by}); err != nil {
		if s.get(mf.Key) == nil {
			// Refused before it joined the registry: leave no row but a kept uninstalled one.
			if existing == nil {
				err = errors.Join(err, s.k.ExtensionPurge(ctx, mf.Key))
			} else {
				err = errors.Join(err, s.k.ExtensionMarkUninstalled(ctx, mf.Key))
			}
			return nil, (&kernel.APIError{Status: http.StatusUnprocessableEntity, Message: fmt.Sprintf("Failed to install adapter: %v", err)}).WithCode("install_refused")
		}
		s.log.Warn("installed adapter failed its first start; it is retried on use", "adapter", mf.Key, "error", err)
	}
	return out, nil
}

func upgradeError(err error) error {
	var failed *UpgradeFailedError
	if errors.As(err, &failed) {
		return kernel.NewAPIError(http.StatusBadGateway, err.Error())
	}
	return err
}

// installedOf returns the installed adapter of a type (the override when there is one),
// with the reference product's refusals for a built-in and an unknown type.
func (s *Supervisor) installedOf(typ, builtinMsg string) (*managed, error) {
	set, err := s.registered(typ)
	if err != nil {
		return nil, err
	}
	if len(set.installed) == 0 {
		return nil, kernel.BadRequest(builtinMsg)
	}
	if o := set.override(); o != nil {
		return o, nil
	}
	return set.installed[0], nil
}

// AdapterReloaded is the answer of reload and reinstall.
type AdapterReloaded struct {
	Type        string `json:"type"`
	Key         string `json:"key"`
	Version     string `json:"version"`
	Reloaded    bool   `json:"reloaded,omitempty"`
	Reinstalled bool   `json:"reinstalled,omitempty"`
}

// AdapterReload reloads an installed adapter in place from its directory: its manifest is
// read again and the new process replaces the old one without failing calls (runs in
// flight finish on the old one, up to the request timeout).
func (s *Supervisor) AdapterReload(ctx context.Context, typ string, by *kernel.Actor) (*AdapterReloaded, error) {
	defer s.lockMoves()()
	m, err := s.installedOf(typ, "Cannot reload built-in adapter.")
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(m.src.Dir, "manifest.json"))
	if err != nil {
		return nil, kernel.NewAPIError(http.StatusConflict, fmt.Sprintf("Failed to reload adapter: %v", err))
	}
	mf, err := sdk.ParseManifest(b)
	if err != nil {
		return nil, kernel.BadRequest(fmt.Sprintf("Failed to reload adapter: %v", err))
	}
	src := *m.src
	src.Manifest, src.ManifestJSON = mf, b
	if err := s.Upgrade(ctx, m.key, &src, true, Move{By: by}); err != nil {
		return nil, upgradeError(err)
	}
	s.forgetAdapterInfo()
	return &AdapterReloaded{Type: typ, Key: m.key, Version: mf.Version, Reloaded: true}, nil
}

// AdapterReinstall runs the install flow again for an installed adapter (an npm package
// resolves its latest version; a local path is read again) and replaces it in place.
func (s *Supervisor) AdapterReinstall(ctx context.Context, typ string, by *kernel.Actor) (*AdapterReloaded, error) {
	defer s.lockMoves()()
	m, err := s.installedOf(typ, "Cannot reinstall built-in adapter.")
	if err != nil {
		return nil, err
	}
	req := packages.Request{PackageName: m.src.PackageName, IsLocalPath: m.src.Origin != "npm"}
	if req.PackageName == "" {
		req.PackageName = m.src.Dir // found on the extensions path
	}
	inst := s.installer()
	if inst == nil {
		return nil, kernel.NewAPIError(http.StatusServiceUnavailable, "No package installer is configured on this instance")
	}
	pkg, err := inst.Install(ctx, req)
	if err != nil {
		return nil, err
	}
	if pkg.Manifest.Key != m.key {
		return nil, kernel.Conflict(fmt.Sprintf("Reinstall failed: the package is now %s, not %s", pkg.Manifest.Key, m.key))
	}
	src := &Source{Manifest: pkg.Manifest, ManifestJSON: pkg.ManifestJSON, Dir: pkg.Dir, Origin: pkg.Source, PackageName: pkg.PackageName, Digest: pkg.Digest}
	if err := s.Upgrade(ctx, m.key, src, true, Move{By: by}); err != nil {
		return nil, upgradeError(err)
	}
	s.forgetAdapterInfo()
	return &AdapterReloaded{Type: typ, Key: m.key, Version: pkg.Manifest.Version, Reinstalled: true}, nil
}

// AdapterPatch is the body of PATCH /api/adapters/{type}: the type's instance settings.
type AdapterPatch struct {
	// Disabled hides the type from creation menus; agents on it still run.
	Disabled *bool `json:"disabled,omitempty"`
	// Config is the instance config of the adapter that serves the type, validated
	// against its manifest's configSchema and delivered to it without a restart.
	Config json.RawMessage `json:"config,omitempty"`
}

// AdapterConfigure applies PATCH /api/adapters/{type}.
func (s *Supervisor) AdapterConfigure(ctx context.Context, typ string, p *AdapterPatch, by *kernel.Actor) (*AdapterInfo, error) {
	if p.Disabled == nil && len(p.Config) == 0 {
		return nil, kernel.BadRequest(`Provide "disabled" (boolean) or "config" (object)`)
	}
	if _, err := s.registered(typ); err != nil {
		return nil, err
	}
	if len(p.Config) > 0 {
		var obj map[string]any
		if err := json.Unmarshal(p.Config, &obj); err != nil || obj == nil {
			return nil, kernel.ValidationError(kernel.ValidationDetail{Path: "config", Message: "must be an object"})
		}
		res, err := s.ResolveAdapter(ctx, typ)
		if err != nil {
			return nil, err
		}
		if res == nil {
			return nil, kernel.Conflict(fmt.Sprintf("No loaded adapter serves %q; there is nothing to configure", typ))
		}
		m := s.get(res.Key)
		if m == nil {
			return nil, notRegistered(typ)
		}
		if len(m.src.Manifest.ConfigSchema) == 0 {
			return nil, kernel.BadRequest(fmt.Sprintf("Adapter %s takes no instance config", res.Key))
		}
		if err := m.src.Manifest.ValidateConfig(p.Config); err != nil {
			return nil, kernel.ValidationError(kernel.ValidationDetail{Path: "config", Message: err.Error()})
		}
		if err := s.Reconfigure(ctx, res.Key, p.Config, Move{By: by}); err != nil {
			return nil, err
		}
	}
	if p.Disabled != nil {
		changed, err := s.k.AdapterSettingSetDisabled(ctx, typ, *p.Disabled)
		if err != nil {
			return nil, err
		}
		if changed {
			action := "enabled"
			if *p.Disabled {
				action = "disabled"
			}
			s.record(ctx, Move{By: by}, sdk.KindAdapter, typ, "type_"+action, nil)
		}
	}
	return s.AdapterGet(ctx, typ)
}

// AdapterConfigSchema is the answer of GET /api/adapters/{type}/config-schema.
type AdapterConfigSchema struct {
	Type string `json:"type"`
	// Key is the adapter the schemas come from: the one serving new runs (the built-in
	// while an override is paused).
	Key string `json:"key"`
	// ConfigSchema is the adapter's instance config schema, from its manifest.
	ConfigSchema json.RawMessage `json:"configSchema,omitempty"`
	// AdapterConfigSchema is the JSON Schema of an agent's adapterConfig for this type,
	// as the adapter describes it (info).
	AdapterConfigSchema json.RawMessage `json:"adapterConfigSchema,omitempty"`
}

// AdapterSchema returns the config schemas of the adapter serving a type now.
func (s *Supervisor) AdapterSchema(ctx context.Context, typ string) (*AdapterConfigSchema, error) {
	if _, err := s.registered(typ); err != nil {
		return nil, err
	}
	res, err := s.ResolveAdapter(ctx, typ)
	if err != nil {
		return nil, err
	}
	var m *managed
	if res != nil {
		m = s.get(res.Key)
	}
	if m == nil {
		return nil, kernel.NotFound(fmt.Sprintf("Adapter %q has no config schema.", typ))
	}
	out := &AdapterConfigSchema{Type: typ, Key: m.key, ConfigSchema: m.src.Manifest.ConfigSchema}
	if info, err := s.adapterInfo(ctx, m); err == nil && len(info.ConfigSchema) > 0 && string(info.ConfigSchema) != "null" {
		out.AdapterConfigSchema = info.ConfigSchema
	}
	if len(out.ConfigSchema) == 0 && len(out.AdapterConfigSchema) == 0 {
		return nil, kernel.NotFound(fmt.Sprintf("Adapter %q has no config schema.", typ))
	}
	return out, nil
}

// uiParserFiles are where a package keeps its adapter UI parser, in order.
var uiParserFiles = []string{"ui-parser.js", filepath.Join("ui", "ui-parser.js")}

// AdapterUIParser returns the browser-side output parser of the installed adapter serving
// a type (the override's while it is not paused): ui-parser.js at the package root or in
// ui/, which must resolve inside the package directory.
func (s *Supervisor) AdapterUIParser(ctx context.Context, typ string) ([]byte, error) {
	none := kernel.NotFound(fmt.Sprintf("No UI parser available for adapter %q.", typ))
	if _, err := s.registered(typ); err != nil {
		return nil, err
	}
	res, err := s.ResolveAdapter(ctx, typ)
	if err != nil {
		return nil, err
	}
	if res == nil {
		return nil, none
	}
	m := s.get(res.Key)
	if m == nil || m.src.Dir == "" {
		return nil, none
	}
	root, err := filepath.EvalSymlinks(m.src.Dir)
	if err != nil {
		return nil, none
	}
	for _, name := range uiParserFiles {
		p, err := filepath.EvalSymlinks(filepath.Join(root, name))
		if err != nil {
			continue
		}
		if rel, err := filepath.Rel(root, p); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			continue // a link out of the package is not served
		}
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		return b, nil
	}
	return nil, none
}
