package kernel

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// KeyFingerprint returns the fingerprint recorded for the key called name, or "" when none
// is recorded yet. Fingerprints let keel refuse a database whose encrypted data was made
// under a key this instance does not have.
func (k *Kernel) KeyFingerprint(ctx context.Context, name string) (string, error) {
	var fp *string
	err := k.Pool.QueryRow(ctx, `SELECT value->>$1 FROM kernel.instance_settings WHERE section = 'key_fingerprints'`, name).Scan(&fp)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("error reading the fingerprint of %s: %w", name, err)
	}
	if fp == nil {
		return "", nil
	}
	return *fp, nil
}

// RecordKeyFingerprint records fp as the fingerprint of the key called name unless one is
// already recorded, and returns the recorded one (fp, or the earlier one on a mismatch).
func (k *Kernel) RecordKeyFingerprint(ctx context.Context, name, fp string) (string, error) {
	if _, err := k.Pool.Exec(ctx, `INSERT INTO kernel.instance_settings (section, value)
		VALUES ('key_fingerprints', jsonb_build_object($1::text, $2::text))
		ON CONFLICT (section) DO UPDATE SET value = kernel.instance_settings.value || EXCLUDED.value, updated_at = now()
		WHERE NOT kernel.instance_settings.value ? $1::text`, name, fp); err != nil {
		return "", fmt.Errorf("error recording the fingerprint of %s: %w", name, err)
	}
	return k.KeyFingerprint(ctx, name)
}
