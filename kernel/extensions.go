package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Extension statuses (spec part 2 "Plugin status").
const (
	ExtensionInstalled      = "installed"
	ExtensionReady          = "ready"
	ExtensionDisabled       = "disabled"
	ExtensionError          = "error"
	ExtensionUpgradePending = "upgrade_pending"
	// ExtensionUninstalled marks a row uninstalled without purge: hidden from the API, its
	// config and data kept for a reinstall.
	ExtensionUninstalled = "uninstalled"
)

// ExtensionRecord is the registry row of one installed extension.
type ExtensionRecord struct {
	ID          string          `json:"id"`
	PluginKey   string          `json:"pluginKey"`
	PackageName string          `json:"packageName"`
	Version     string          `json:"version"`
	Kind        string          `json:"kind"`
	Runtime     string          `json:"runtime"`
	Source      string          `json:"source"`
	Path        string          `json:"path,omitempty"`
	Status      string          `json:"status"`
	Enabled     bool            `json:"enabled"`
	LastError   *string         `json:"lastError"`
	Manifest    json.RawMessage `json:"manifest"`
	Config      json.RawMessage `json:"config"`
	// PackageDigest is the sha256 of the stored package an extension was installed from
	// through the API (empty for built-ins and extensions found on the extensions path).
	PackageDigest string `json:"packageDigest"`
	// GrantedCapabilities are the capabilities an admin granted (at install, or by
	// approving an upgrade that asked for more).
	GrantedCapabilities []string `json:"grantedCapabilities"`
	// PendingUpgrade is an upgrade waiting for an admin's approval (status upgrade_pending).
	PendingUpgrade *PendingUpgrade `json:"pendingUpgrade"`
	InstallOrder   int             `json:"installOrder"`
	InstalledAt    time.Time       `json:"installedAt"`
	UpdatedAt      time.Time       `json:"updatedAt"`
}

// PendingUpgrade is a verified package version whose capabilities exceed what was granted.
type PendingUpgrade struct {
	Version  string          `json:"version"`
	Digest   string          `json:"digest"`
	Path     string          `json:"-"`
	Manifest json.RawMessage `json:"-"`
	// NewCapabilities are the capabilities the upgrade asks for beyond those granted.
	NewCapabilities []string `json:"newCapabilities"`
}

// ExtensionHealth is the live state of an extension as its supervisor sees it.
type ExtensionHealth struct {
	PluginID  string    `json:"pluginId"`
	PluginKey string    `json:"pluginKey"`
	Status    string    `json:"status"`
	Healthy   bool      `json:"healthy"`
	Message   string    `json:"message,omitempty"`
	PID       int       `json:"pid,omitempty"`
	Restarts  int       `json:"restarts"`
	LastError *string   `json:"lastError"`
	CheckedAt time.Time `json:"checkedAt"`
}

// ExtensionDirectory is the host's live view of running extensions.
type ExtensionDirectory interface {
	// ExtensionHealth pings the extension now; an unknown key returns (nil, nil).
	ExtensionHealth(ctx context.Context, key string) (*ExtensionHealth, error)
}

// ExtensionUpsertParams records an extension found at start, installed or upgraded.
type ExtensionUpsertParams struct {
	Key, Version, Kind, Runtime, Source, Path string
	Manifest                                  json.RawMessage
	// PackageName and PackageDigest name the stored package (API installs only).
	PackageName, PackageDigest string
	// Granted are the capabilities granted (the manifest's when nil).
	Granted []string
}

// ExtensionUpsert inserts or refreshes an extension's registry row, keeping its id, config
// and enabled flag, and returns the row. A row uninstalled without purge is reinstalled
// (same id and config, enabled again).
func (k *Kernel) ExtensionUpsert(ctx context.Context, p *ExtensionUpsertParams) (*ExtensionRecord, error) {
	granted := p.Granted
	if granted == nil {
		var mf struct {
			Capabilities []string `json:"capabilities"`
		}
		_ = json.Unmarshal(p.Manifest, &mf)
		granted = mf.Capabilities
	}
	if granted == nil {
		granted = []string{}
	}
	grantedJSON, err := json.Marshal(granted)
	if err != nil {
		return nil, fmt.Errorf("error encoding capabilities of %s: %w", p.Key, err)
	}
	_, err = k.Pool.Exec(ctx, `INSERT INTO kernel.extensions (key, id, version, kind, runtime, source, path, manifest, status,
			package_name, package_digest, granted_capabilities)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'installed', $9, $10, $11)
		ON CONFLICT (key) DO UPDATE SET version = EXCLUDED.version, kind = EXCLUDED.kind, runtime = EXCLUDED.runtime,
			source = EXCLUDED.source, path = EXCLUDED.path, manifest = EXCLUDED.manifest,
			package_name = EXCLUDED.package_name, package_digest = EXCLUDED.package_digest,
			granted_capabilities = EXCLUDED.granted_capabilities,
			status = CASE WHEN kernel.extensions.status = 'uninstalled' THEN 'installed' ELSE kernel.extensions.status END,
			enabled = kernel.extensions.enabled OR kernel.extensions.status = 'uninstalled',
			generation = kernel.extensions.generation + 1, updated_at = now()`,
		p.Key, newID(), p.Version, p.Kind, p.Runtime, p.Source, p.Path, p.Manifest, p.PackageName, p.PackageDigest, grantedJSON)
	if err != nil {
		return nil, fmt.Errorf("error recording extension %s: %w", p.Key, err)
	}
	return k.ExtensionGet(ctx, p.Key)
}

// ExtensionSetStatus records a status change and its error (nil clears it).
func (k *Kernel) ExtensionSetStatus(ctx context.Context, key, status string, lastErr error) error {
	var msg *string
	if lastErr != nil {
		s := lastErr.Error()
		msg = &s
	}
	if _, err := k.Pool.Exec(ctx, `UPDATE kernel.extensions SET status = $2, last_error = COALESCE($3, CASE WHEN $2 = 'ready' THEN NULL ELSE last_error END), updated_at = now() WHERE key = $1 AND status <> 'uninstalled'`, key, status, msg); err != nil {
		return fmt.Errorf("error recording status of extension %s: %w", key, err)
	}
	return nil
}

const extensionColumns = `id::text, key, COALESCE(NULLIF(package_name, ''), key), version, kind, runtime, source, path, status, enabled,
	last_error, manifest, config, package_digest, granted_capabilities, pending_version, pending_digest, pending_path, pending_manifest,
	install_order, installed_at, updated_at`

func scanExtension(row pgx.Row) (*ExtensionRecord, error) {
	var r ExtensionRecord
	var pendingVersion, pendingDigest, pendingPath *string
	var pendingManifest []byte
	err := row.Scan(&r.ID, &r.PluginKey, &r.PackageName, &r.Version, &r.Kind, &r.Runtime, &r.Source, &r.Path,
		&r.Status, &r.Enabled, &r.LastError, &r.Manifest, &r.Config, &r.PackageDigest, &r.GrantedCapabilities,
		&pendingVersion, &pendingDigest, &pendingPath, &pendingManifest, &r.InstallOrder, &r.InstalledAt, &r.UpdatedAt)
	if err != nil {
		return nil, err
	}
	if pendingVersion != nil {
		r.PendingUpgrade = &PendingUpgrade{Version: *pendingVersion, Manifest: pendingManifest, NewCapabilities: []string{}}
		if pendingDigest != nil {
			r.PendingUpgrade.Digest = *pendingDigest
		}
		if pendingPath != nil {
			r.PendingUpgrade.Path = *pendingPath
		}
		var mf struct {
			Capabilities []string `json:"capabilities"`
		}
		_ = json.Unmarshal(pendingManifest, &mf)
		granted := map[string]bool{}
		for _, c := range r.GrantedCapabilities {
			granted[c] = true
		}
		for _, c := range mf.Capabilities {
			if !granted[c] {
				r.PendingUpgrade.NewCapabilities = append(r.PendingUpgrade.NewCapabilities, c)
			}
		}
		// The old version keeps serving while the upgrade waits: a ready extension with a
		// pending upgrade shows upgrade_pending.
		if r.Status == ExtensionReady {
			r.Status = ExtensionUpgradePending
		}
	}
	if r.GrantedCapabilities == nil {
		r.GrantedCapabilities = []string{}
	}
	return &r, nil
}

// ExtensionGet returns one registry row by key or id; a missing or uninstalled one is
// (nil, nil).
func (k *Kernel) ExtensionGet(ctx context.Context, keyOrID string) (*ExtensionRecord, error) {
	r, err := k.ExtensionGetAny(ctx, keyOrID)
	if r != nil && r.Status == ExtensionUninstalled {
		return nil, err
	}
	return r, err
}

// ExtensionGetAny returns one registry row by key or id, uninstalled ones included; a
// missing one is (nil, nil).
func (k *Kernel) ExtensionGetAny(ctx context.Context, keyOrID string) (*ExtensionRecord, error) {
	r, err := scanExtension(k.Pool.QueryRow(ctx, `SELECT `+extensionColumns+` FROM kernel.extensions WHERE key = $1 OR id::text = $1`, keyOrID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("error reading extension %s: %w", keyOrID, err)
	}
	return r, nil
}

// ExtensionList returns every registry row that is not uninstalled, in install order.
func (k *Kernel) ExtensionList(ctx context.Context) ([]*ExtensionRecord, error) {
	rows, err := k.Pool.Query(ctx, `SELECT `+extensionColumns+` FROM kernel.extensions WHERE status <> 'uninstalled' ORDER BY install_order`)
	if err != nil {
		return nil, fmt.Errorf("error listing extensions: %w", err)
	}
	defer rows.Close()
	out := []*ExtensionRecord{}
	for rows.Next() {
		r, err := scanExtension(rows)
		if err != nil {
			return nil, fmt.Errorf("error listing extensions: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// ExtensionSummaryList is ExtensionList without the weight: each manifest is cut to its
// displayName and description, and configs are left out (the manifests of the first-party
// extensions with their schemas are half a megabyte together).
func (k *Kernel) ExtensionSummaryList(ctx context.Context) ([]*ExtensionRecord, error) {
	cols := strings.Replace(extensionColumns, "manifest, config,",
		"jsonb_strip_nulls(jsonb_build_object('displayName', manifest->'displayName', 'description', manifest->'description')), '{}'::jsonb,", 1)
	rows, err := k.Pool.Query(ctx, `SELECT `+cols+` FROM kernel.extensions WHERE status <> 'uninstalled' ORDER BY install_order`)
	if err != nil {
		return nil, fmt.Errorf("error listing extensions: %w", err)
	}
	defer rows.Close()
	out := []*ExtensionRecord{}
	for rows.Next() {
		r, err := scanExtension(rows)
		if err != nil {
			return nil, fmt.Errorf("error listing extensions: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

type pluginListRequest struct {
	// Manifest false cuts each manifest to displayName and description and leaves the
	// configs out (a light list for pages).
	Manifest *bool `query:"manifest"`
}

type pluginListEndpoint struct{ k *Kernel }

func (e *pluginListEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "GET /api/plugins", Access: AccessInstanceAdmin,
		Summary: "List installed extensions (?manifest=false: manifests cut to displayName and description, no configs)"}
}

func (e *pluginListEndpoint) Execute(ctx context.Context, req *pluginListRequest) (*[]*ExtensionRecord, error) {
	list := e.k.ExtensionList
	if req.Manifest != nil && !*req.Manifest {
		list = e.k.ExtensionSummaryList
	}
	out, err := list(ctx)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

type pluginRequest struct {
	PluginID string `path:"pluginId"`
}

type pluginGetEndpoint struct{ k *Kernel }

func (e *pluginGetEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "GET /api/plugins/{pluginId}", Access: AccessInstanceAdmin, Summary: "Read one installed extension"}
}

func (e *pluginGetEndpoint) Execute(ctx context.Context, req *pluginRequest) (*ExtensionRecord, error) {
	r, err := e.k.ExtensionGet(ctx, req.PluginID)
	if err != nil {
		return nil, err
	}
	if r == nil {
		return nil, NotFound("Plugin not found")
	}
	return r, nil
}

type pluginHealthEndpoint struct{ k *Kernel }

func (e *pluginHealthEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "GET /api/plugins/{pluginId}/health", Access: AccessInstanceAdmin, Summary: "Ping one extension"}
}

func (e *pluginHealthEndpoint) Execute(ctx context.Context, req *pluginRequest) (*ExtensionHealth, error) {
	r, err := e.k.ExtensionGet(ctx, req.PluginID)
	if err != nil {
		return nil, err
	}
	if r == nil {
		return nil, NotFound("Plugin not found")
	}
	if e.k.extensions != nil {
		h, err := e.k.extensions.ExtensionHealth(ctx, r.PluginKey)
		if err != nil {
			return nil, Internal(err)
		}
		if h != nil {
			h.PluginID = r.ID
			return h, nil
		}
	}
	return &ExtensionHealth{PluginID: r.ID, PluginKey: r.PluginKey, Status: r.Status, LastError: r.LastError, CheckedAt: time.Now().UTC()}, nil
}

func (k *Kernel) pluginRoutes() []*Route {
	return []*Route{
		Mount[pluginListRequest, []*ExtensionRecord](&pluginListEndpoint{k}),
		Mount[pluginRequest, ExtensionRecord](&pluginGetEndpoint{k}),
		Mount[pluginRequest, ExtensionHealth](&pluginHealthEndpoint{k}),
	}
}
