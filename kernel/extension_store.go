package kernel

import (
	"context"
	"encoding/json"
	"fmt"
)

// ExtensionSetEnabled records whether an extension is meant to run (enable, disable).
func (k *Kernel) ExtensionSetEnabled(ctx context.Context, key string, enabled bool) error {
	if _, err := k.Pool.Exec(ctx, `UPDATE kernel.extensions SET enabled = $2, generation = generation + 1, updated_at = now() WHERE key = $1`, key, enabled); err != nil {
		return fmt.Errorf("error recording enabled state of extension %s: %w", key, err)
	}
	return nil
}

// ExtensionSetConfig stores an extension's config (validated by the caller).
func (k *Kernel) ExtensionSetConfig(ctx context.Context, key string, config json.RawMessage) error {
	if _, err := k.Pool.Exec(ctx, `UPDATE kernel.extensions SET config = $2, generation = generation + 1, updated_at = now() WHERE key = $1`, key, config); err != nil {
		return fmt.Errorf("error storing config of extension %s: %w", key, err)
	}
	return nil
}

// ExtensionSetLastError records an error without changing the status (a failed upgrade
// leaves the old version serving).
func (k *Kernel) ExtensionSetLastError(ctx context.Context, key string, lastErr error) error {
	var msg *string
	if lastErr != nil {
		s := lastErr.Error()
		msg = &s
	}
	if _, err := k.Pool.Exec(ctx, `UPDATE kernel.extensions SET last_error = $2, updated_at = now() WHERE key = $1`, key, msg); err != nil {
		return fmt.Errorf("error recording last error of extension %s: %w", key, err)
	}
	return nil
}

// ExtensionSetPending records an upgrade waiting for approval (nil clears it).
func (k *Kernel) ExtensionSetPending(ctx context.Context, key string, p *PendingUpgrade) error {
	var version, digest, path *string
	var manifest []byte
	if p != nil {
		version, digest, path, manifest = &p.Version, &p.Digest, &p.Path, p.Manifest
	}
	if _, err := k.Pool.Exec(ctx, `UPDATE kernel.extensions SET pending_version = $2, pending_digest = $3, pending_path = $4,
		pending_manifest = $5, generation = generation + 1, updated_at = now() WHERE key = $1`, key, version, digest, path, manifest); err != nil {
		return fmt.Errorf("error recording pending upgrade of extension %s: %w", key, err)
	}
	return nil
}

// ExtensionMarkUninstalled unregisters an extension and keeps its row, config and data
// for a reinstall.
func (k *Kernel) ExtensionMarkUninstalled(ctx context.Context, key string) error {
	if _, err := k.Pool.Exec(ctx, `UPDATE kernel.extensions SET status = 'uninstalled', enabled = false, last_error = NULL,
		pending_version = NULL, pending_manifest = NULL, pending_digest = NULL, pending_path = NULL,
		generation = generation + 1, updated_at = now() WHERE key = $1`, key); err != nil {
		return fmt.Errorf("error uninstalling extension %s: %w", key, err)
	}
	return nil
}

// ExtensionPurge deletes an extension's registry row (its config with it) and its
// key-value state.
func (k *Kernel) ExtensionPurge(ctx context.Context, key string) error {
	tx, err := k.Pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("error purging extension %s: %w", key, err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, `DELETE FROM kernel.extension_kv WHERE extension_key = $1`, key); err != nil {
		return fmt.Errorf("error purging state of extension %s: %w", key, err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM kernel.extensions WHERE key = $1`, key); err != nil {
		return fmt.Errorf("error purging extension %s: %w", key, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("error purging extension %s: %w", key, err)
	}
	return nil
}

// ExtensionListAll returns every registry row, uninstalled ones included, in install order
// (nodes reconcile against it).
func (k *Kernel) ExtensionListAll(ctx context.Context) ([]*ExtensionRecord, error) {
	rows, err := k.Pool.Query(ctx, `SELECT `+extensionColumns+` FROM kernel.extensions ORDER BY install_order`)
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
