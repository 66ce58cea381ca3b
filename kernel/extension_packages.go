package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ExtensionPackage is one stored extension package: its canonical archive and what it holds.
type ExtensionPackage struct {
	// Digest is the sha256 (hex) of Archive, the package's content address.
	Digest      string
	PluginKey   string
	Version     string
	Source      string
	PackageName string
	Manifest    json.RawMessage
	Archive     []byte
	CreatedAt   time.Time
}

// ExtensionPackageInsertParams stores a package.
type ExtensionPackageInsertParams struct {
	Digest, PluginKey, Version, Source, PackageName string
	Manifest                                        json.RawMessage
	Archive                                         []byte
}

// ExtensionPackageInsert stores a package unless one with the same digest is stored already
// (the same bytes: installing twice is a no-op).
func (k *Kernel) ExtensionPackageInsert(ctx context.Context, p *ExtensionPackageInsertParams) error {
	_, err := k.Pool.Exec(ctx, `INSERT INTO kernel.extension_packages (digest, plugin_key, version, source, package_name, manifest, archive, size_bytes)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (digest) DO NOTHING`,
		p.Digest, p.PluginKey, p.Version, p.Source, p.PackageName, p.Manifest, p.Archive, len(p.Archive))
	if err != nil {
		return fmt.Errorf("error storing package %s: %w", p.Digest, err)
	}
	return nil
}

// ExtensionPackageGet returns the stored package with this digest; a missing one is (nil, nil).
func (k *Kernel) ExtensionPackageGet(ctx context.Context, digest string) (*ExtensionPackage, error) {
	var p ExtensionPackage
	err := k.Pool.QueryRow(ctx, `SELECT digest, plugin_key, version, source, package_name, manifest, archive, created_at
		FROM kernel.extension_packages WHERE digest = $1`, digest).
		Scan(&p.Digest, &p.PluginKey, &p.Version, &p.Source, &p.PackageName, &p.Manifest, &p.Archive, &p.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("error reading package %s: %w", digest, err)
	}
	return &p, nil
}

// ExtensionPackageDelete removes the stored package with this digest (a missing one is not
// an error).
func (k *Kernel) ExtensionPackageDelete(ctx context.Context, digest string) error {
	if _, err := k.Pool.Exec(ctx, `DELETE FROM kernel.extension_packages WHERE digest = $1`, digest); err != nil {
		return fmt.Errorf("error deleting package %s: %w", digest, err)
	}
	return nil
}

// ExtensionPackageGetInfo returns what is stored about a package without its archive
// (Archive is nil); a missing one is (nil, nil).
func (k *Kernel) ExtensionPackageGetInfo(ctx context.Context, digest string) (*ExtensionPackage, error) {
	var p ExtensionPackage
	err := k.Pool.QueryRow(ctx, `SELECT digest, plugin_key, version, source, package_name, manifest, created_at
		FROM kernel.extension_packages WHERE digest = $1`, digest).
		Scan(&p.Digest, &p.PluginKey, &p.Version, &p.Source, &p.PackageName, &p.Manifest, &p.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("error reading package %s: %w", digest, err)
	}
	return &p, nil
}
