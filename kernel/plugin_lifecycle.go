package kernel

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// ExtensionInstallRequest is the body of POST /api/plugins/install.
type ExtensionInstallRequest struct {
	// PackageName is an npm package name, or a local path when IsLocalPath is true.
	PackageName string `json:"packageName"`
	// Version is the npm version or dist-tag (default latest); ignored for local paths.
	Version string `json:"version,omitempty"`
	// IsLocalPath says PackageName is a directory (or .tgz/.zip) on the keel machine.
	IsLocalPath bool `json:"isLocalPath,omitempty"`
}

// ExtensionConfigTest is the answer of POST /api/plugins/{pluginId}/config/test.
type ExtensionConfigTest struct {
	// Valid is true when the config matches the manifest's config schema and the
	// extension's own validator (if it has one) accepts it.
	Valid bool `json:"valid"`
	// Supported says whether the extension has a validator of its own.
	Supported bool   `json:"supported"`
	Message   string `json:"message,omitempty"`
}

// ExtensionConfig is the config of one extension (GET and POST /api/plugins/{pluginId}/config).
type ExtensionConfig struct {
	PluginID   string          `json:"pluginId"`
	PluginKey  string          `json:"pluginKey"`
	ConfigJSON json.RawMessage `json:"configJson"`
	// ConfigSchema is the manifest's JSON Schema of the config (null when it declares none).
	ConfigSchema json.RawMessage `json:"configSchema"`
	UpdatedAt    time.Time       `json:"updatedAt"`
}

// ExtensionManager installs, enables, disables, upgrades, uninstalls and configures
// extensions while keel serves; the host sets it. The caller is ActorFrom(ctx). Errors
// meant for the client are *APIError.
type ExtensionManager interface {
	// InstallExtension resolves, verifies, stores and starts a package; it returns the
	// extension's key.
	InstallExtension(ctx context.Context, req *ExtensionInstallRequest) (string, error)
	EnableExtension(ctx context.Context, key string) error
	DisableExtension(ctx context.Context, key string) error
	// UpgradeExtension upgrades to version (empty: the latest, or the stored path's
	// current contents), or approves the pending upgrade.
	UpgradeExtension(ctx context.Context, key, version string) error
	UninstallExtension(ctx context.Context, key string, purge bool) error
	// ConfigureExtension validates, stores and delivers a config.
	ConfigureExtension(ctx context.Context, key string, config json.RawMessage) error
	// TestExtensionConfig validates a config without storing it.
	TestExtensionConfig(ctx context.Context, key string, config json.RawMessage) (*ExtensionConfigTest, error)
}

// SetExtensionManager sets what carries out the plugin lifecycle routes.
func (k *Kernel) SetExtensionManager(m ExtensionManager) { k.manager = m }

// manage returns the record of a plugin and the manager, or the API error.
func (k *Kernel) manage(ctx context.Context, pluginID string) (*ExtensionRecord, ExtensionManager, error) {
	if k.manager == nil {
		return nil, nil, NewAPIError(http.StatusNotImplemented, "Extension management is not available on this host")
	}
	r, err := k.ExtensionGet(ctx, pluginID)
	if err != nil {
		return nil, nil, err
	}
	if r == nil {
		return nil, nil, NotFound("Plugin not found")
	}
	return r, k.manager, nil
}

// invalidTransition is the 400 of a lifecycle move not allowed from the current status.
func invalidTransition(from, to, allowed string) *APIError {
	return BadRequest(fmt.Sprintf("Invalid lifecycle transition: %s → %s (%s)", from, to, allowed)).WithCode("invalid_transition")
}

// builtinRefusal is the refusal of a move a built-in extension cannot make.
func builtinRefusal(message string) *APIError {
	return BadRequest(message).WithCode("builtin_extension")
}

// reread returns the registry row after a move.
func (k *Kernel) reread(ctx context.Context, key string) (*ExtensionRecord, error) {
	r, err := k.ExtensionGetAny(ctx, key)
	if err != nil {
		return nil, err
	}
	if r == nil {
		return nil, NotFound("Plugin not found")
	}
	return r, nil
}

// npmNameInvalid holds the characters install rule 1 refuses in an npm package name.
const npmNameInvalid = `<>:"|?*`

type pluginInstallEndpoint struct{ k *Kernel }

func (e *pluginInstallEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "POST /api/plugins/install", Access: AccessInstanceAdmin,
		Summary: "Install a plugin from a local path or an npm registry and start it"}
}

func (e *pluginInstallEndpoint) Execute(ctx context.Context, req *ExtensionInstallRequest) (*ExtensionRecord, error) {
	if strings.TrimSpace(req.PackageName) == "" {
		return nil, ValidationError(ValidationDetail{Path: "packageName", Message: "required"})
	}
	if !req.IsLocalPath && strings.ContainsAny(req.PackageName, npmNameInvalid) {
		return nil, BadRequest("packageName contains invalid characters")
	}
	if e.k.manager == nil {
		return nil, NewAPIError(http.StatusNotImplemented, "Extension management is not available on this host")
	}
	key, err := e.k.manager.InstallExtension(ctx, req)
	if err != nil {
		return nil, err
	}
	return e.k.reread(ctx, key)
}

type pluginDeleteRequest struct {
	PluginID string `path:"pluginId"`
	// Purge also drops the plugin's schema, role, config, state and stored package.
	Purge bool `query:"purge"`
	// Force is the same as purge (the CLI's --force).
	Force bool `query:"force"`
}

type pluginDeleteEndpoint struct{ k *Kernel }

func (e *pluginDeleteEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "DELETE /api/plugins/{pluginId}", Access: AccessInstanceAdmin,
		Summary: "Uninstall a plugin (keeps its data; ?purge=true drops its schema, config, state and package)"}
}

func (e *pluginDeleteEndpoint) Execute(ctx context.Context, req *pluginDeleteRequest) (*ExtensionRecord, error) {
	purge := req.Purge || req.Force
	if e.k.manager == nil {
		return nil, NewAPIError(http.StatusNotImplemented, "Extension management is not available on this host")
	}
	r, err := e.k.ExtensionGetAny(ctx, req.PluginID)
	if err != nil {
		return nil, err
	}
	// An uninstalled plugin is gone from the API, but its kept data can still be purged.
	if r == nil || (r.Status == ExtensionUninstalled && !purge) {
		return nil, NotFound("Plugin not found")
	}
	if r.Source == "builtin" {
		return nil, builtinRefusal(fmt.Sprintf("%s is built into keel and cannot be uninstalled; disable it instead", r.PluginKey))
	}
	if err := e.k.manager.UninstallExtension(ctx, r.PluginKey, purge); err != nil {
		return nil, err
	}
	if purge {
		r.Status = "purged"
		r.Enabled = false
		return r, nil
	}
	return e.k.reread(ctx, r.PluginKey)
}

type pluginEnableEndpoint struct{ k *Kernel }

func (e *pluginEnableEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "POST /api/plugins/{pluginId}/enable", Access: AccessInstanceAdmin,
		Summary: "Enable a disabled plugin (or restart one in error): it starts and becomes ready"}
}

func (e *pluginEnableEndpoint) Execute(ctx context.Context, req *pluginRequest) (*ExtensionRecord, error) {
	r, m, err := e.k.manage(ctx, req.PluginID)
	if err != nil {
		return nil, err
	}
	switch r.Status {
	case ExtensionDisabled, ExtensionError, ExtensionInstalled:
	default:
		return nil, invalidTransition(r.Status, ExtensionReady, "enable is allowed from disabled or error")
	}
	if err := m.EnableExtension(ctx, r.PluginKey); err != nil {
		return nil, err
	}
	return e.k.reread(ctx, r.PluginKey)
}

type pluginDisableEndpoint struct{ k *Kernel }

func (e *pluginDisableEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "POST /api/plugins/{pluginId}/disable", Access: AccessInstanceAdmin,
		Summary: "Disable a plugin: it stops, its UI contributions are hidden, its config is kept"}
}

func (e *pluginDisableEndpoint) Execute(ctx context.Context, req *pluginRequest) (*ExtensionRecord, error) {
	r, m, err := e.k.manage(ctx, req.PluginID)
	if err != nil {
		return nil, err
	}
	if r.Status == ExtensionDisabled {
		return nil, invalidTransition(r.Status, ExtensionDisabled, "disable is allowed from ready, upgrade_pending or error")
	}
	if err := m.DisableExtension(ctx, r.PluginKey); err != nil {
		return nil, err
	}
	return e.k.reread(ctx, r.PluginKey)
}

type pluginUpgradeRequest struct {
	PluginID string `path:"pluginId" json:"-"`
	// Version is the npm version or dist-tag to upgrade to (default latest; ignored for
	// local paths, whose current contents are read again).
	Version string `json:"version,omitempty"`
}

type pluginUpgradeEndpoint struct{ k *Kernel }

func (e *pluginUpgradeEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "POST /api/plugins/{pluginId}/upgrade", Access: AccessInstanceAdmin,
		Summary: "Upgrade a plugin without downtime, or approve a pending upgrade that asks for more capabilities"}
}

func (e *pluginUpgradeEndpoint) Execute(ctx context.Context, req *pluginUpgradeRequest) (*ExtensionRecord, error) {
	r, m, err := e.k.manage(ctx, req.PluginID)
	if err != nil {
		return nil, err
	}
	if r.Source == "builtin" {
		return nil, builtinRefusal(fmt.Sprintf("%s is built into keel and is upgraded with keel itself", r.PluginKey))
	}
	if r.Source == "path" && r.PackageDigest == "" {
		return nil, BadRequest(fmt.Sprintf("%s was loaded from the extensions path at start; replace it there and restart keel, or uninstall it and install it through the API", r.PluginKey)).WithCode("not_installed_through_api")
	}
	if err := m.UpgradeExtension(ctx, r.PluginKey, strings.TrimSpace(req.Version)); err != nil {
		return nil, err
	}
	return e.k.reread(ctx, r.PluginKey)
}

type pluginConfigGetEndpoint struct{ k *Kernel }

func (e *pluginConfigGetEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "GET /api/plugins/{pluginId}/config", Access: AccessInstanceAdmin,
		Summary: "Read a plugin's config and its JSON Schema"}
}

func configOf(r *ExtensionRecord) *ExtensionConfig {
	var mf struct {
		ConfigSchema json.RawMessage `json:"configSchema"`
	}
	_ = json.Unmarshal(r.Manifest, &mf)
	schema := mf.ConfigSchema
	if len(schema) == 0 {
		schema = json.RawMessage("null")
	}
	cfg := r.Config
	if len(cfg) == 0 {
		cfg = json.RawMessage("{}")
	}
	return &ExtensionConfig{PluginID: r.ID, PluginKey: r.PluginKey, ConfigJSON: cfg, ConfigSchema: schema, UpdatedAt: r.UpdatedAt}
}

func (e *pluginConfigGetEndpoint) Execute(ctx context.Context, req *pluginRequest) (*ExtensionConfig, error) {
	r, err := e.k.ExtensionGet(ctx, req.PluginID)
	if err != nil {
		return nil, err
	}
	if r == nil {
		return nil, NotFound("Plugin not found")
	}
	return configOf(r), nil
}

type pluginConfigRequest struct {
	PluginID string `path:"pluginId" json:"-"`
	// ConfigJSON is the whole config (it replaces the stored one).
	ConfigJSON json.RawMessage `json:"configJson"`
}

// config returns the request's config, refusing a missing or non-object one.
func (r *pluginConfigRequest) config() (json.RawMessage, error) {
	trimmed := strings.TrimSpace(string(r.ConfigJSON))
	if trimmed == "" || trimmed == "null" {
		return nil, ValidationError(ValidationDetail{Path: "configJson", Message: "required"})
	}
	if !strings.HasPrefix(trimmed, "{") {
		return nil, ValidationError(ValidationDetail{Path: "configJson", Message: "expected an object"})
	}
	return json.RawMessage(trimmed), nil
}

type pluginConfigSetEndpoint struct{ k *Kernel }

func (e *pluginConfigSetEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "POST /api/plugins/{pluginId}/config", Access: AccessInstanceAdmin,
		Summary: "Replace a plugin's config (validated against its JSON Schema) and deliver it without a restart"}
}

func (e *pluginConfigSetEndpoint) Execute(ctx context.Context, req *pluginConfigRequest) (*ExtensionConfig, error) {
	r, m, err := e.k.manage(ctx, req.PluginID)
	if err != nil {
		return nil, err
	}
	cfg, err := req.config()
	if err != nil {
		return nil, err
	}
	if err := m.ConfigureExtension(ctx, r.PluginKey, cfg); err != nil {
		return nil, err
	}
	r, err = e.k.reread(ctx, r.PluginKey)
	if err != nil {
		return nil, err
	}
	return configOf(r), nil
}

type pluginConfigTestEndpoint struct{ k *Kernel }

func (e *pluginConfigTestEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "POST /api/plugins/{pluginId}/config/test", Access: AccessInstanceAdmin,
		Summary: "Validate a config against the plugin's JSON Schema and its own validator, without saving it"}
}

func (e *pluginConfigTestEndpoint) Execute(ctx context.Context, req *pluginConfigRequest) (*ExtensionConfigTest, error) {
	r, m, err := e.k.manage(ctx, req.PluginID)
	if err != nil {
		return nil, err
	}
	cfg, err := req.config()
	if err != nil {
		return nil, err
	}
	return m.TestExtensionConfig(ctx, r.PluginKey, cfg)
}

func (k *Kernel) pluginLifecycleRoutes() []*Route {
	return []*Route{
		Mount[ExtensionInstallRequest, ExtensionRecord](&pluginInstallEndpoint{k}),
		Mount[pluginDeleteRequest, ExtensionRecord](&pluginDeleteEndpoint{k}),
		Mount[pluginRequest, ExtensionRecord](&pluginEnableEndpoint{k}),
		Mount[pluginRequest, ExtensionRecord](&pluginDisableEndpoint{k}),
		Mount[pluginUpgradeRequest, ExtensionRecord](&pluginUpgradeEndpoint{k}),
		Mount[pluginRequest, ExtensionConfig](&pluginConfigGetEndpoint{k}),
		Mount[pluginConfigRequest, ExtensionConfig](&pluginConfigSetEndpoint{k}),
		Mount[pluginConfigRequest, ExtensionConfigTest](&pluginConfigTestEndpoint{k}),
	}
}
