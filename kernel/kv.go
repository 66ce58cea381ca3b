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

// IssueNumbersMax is the most issue numbers one CompanyNextIssueNumbers call reserves.
const IssueNumbersMax = 256

// CompanyNextIssueNumbers atomically advances a company's issue counter by count (1 to
// IssueNumbersMax) and returns its prefix and the reserved range first..last; numbers never
// repeat, even under concurrent creates. A caller that reserves several numbers at once (the
// work extension, for concurrent creates of one company) takes one counter row lock for all.
//
// The advance commits without waiting for its WAL flush: concurrent creates in a company
// queue on the counter's row lock, which a synchronous commit would hold through a disk
// flush each. It stays safe: the issue that takes the number commits later, synchronously,
// which flushes the WAL up to and including the advance, so no stored issue's number can be
// lost and handed out again by a crash; a number whose issue never committed is skipped.
func (k *Kernel) CompanyNextIssueNumbers(ctx context.Context, companyID string, count int) (prefix string, first, last int64, err error) {
	if count < 1 || count > IssueNumbersMax {
		return "", 0, 0, BadRequest(fmt.Sprintf("count must be between 1 and %d", IssueNumbersMax))
	}
	err = k.Pool.QueryRow(ctx, `UPDATE kernel.companies SET issue_counter = issue_counter + $2, updated_at = now()
		FROM (SELECT set_config('synchronous_commit', 'off', true)) AS async_commit
		WHERE id = $1 RETURNING issue_prefix, issue_counter`, companyID, count).Scan(&prefix, &last)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", 0, 0, NotFound("Company not found")
	}
	if err != nil {
		return "", 0, 0, fmt.Errorf("error advancing issue counter of %s by %d: %w", companyID, count, err)
	}
	return prefix, last - int64(count) + 1, last, nil
}
