package kernel

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// KVGet reads one key of an extension's key-value state in a company ("" for instance-wide).
func (k *Kernel) KVGet(ctx context.Context, extension, companyID, key string) ([]byte, bool, error) {
	var v []byte
	err := k.Pool.QueryRow(ctx, `SELECT value FROM kernel.extension_kv WHERE extension_key = $1 AND company_id = $2 AND key = $3`,
		extension, companyID, key).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("error reading state %s/%s of %s: %w", companyID, key, extension, err)
	}
	return v, true, nil
}

// KVSet writes one key of an extension's key-value state.
func (k *Kernel) KVSet(ctx context.Context, extension, companyID, key string, value []byte) error {
	if value == nil {
		value = []byte{}
	}
	_, err := k.Pool.Exec(ctx, `INSERT INTO kernel.extension_kv (extension_key, company_id, key, value) VALUES ($1, $2, $3, $4)
		ON CONFLICT (extension_key, company_id, key) DO UPDATE SET value = EXCLUDED.value, updated_at = now()`,
		extension, companyID, key, value)
	if err != nil {
		return fmt.Errorf("error writing state %s/%s of %s: %w", companyID, key, extension, err)
	}
	return nil
}

// KVDelete removes one key of an extension's key-value state.
func (k *Kernel) KVDelete(ctx context.Context, extension, companyID, key string) (bool, error) {
	tag, err := k.Pool.Exec(ctx, `DELETE FROM kernel.extension_kv WHERE extension_key = $1 AND company_id = $2 AND key = $3`, extension, companyID, key)
	if err != nil {
		return false, fmt.Errorf("error deleting state %s/%s of %s: %w", companyID, key, extension, err)
	}
	return tag.RowsAffected() > 0, nil
}
