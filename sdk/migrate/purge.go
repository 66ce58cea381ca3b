package migrate

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PurgeCompany deletes every row of a company from an extension's own schema: each base
// table with a company_id column, in one transaction. Tables are tried in passes, so a
// row referenced by another table's row goes once the referencing row has gone; rows
// reached only through foreign keys go with their parents (ON DELETE CASCADE). It returns
// the number of rows deleted. Extensions call it when the kernel reports a company deleted
// ("company.deleted" from "kernel"), and delete the company's files themselves.
func PurgeCompany(ctx context.Context, pool *pgxpool.Pool, schema, companyID string) (int64, error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("error purging company %s from %s: %w", companyID, schema, err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	rows, err := tx.Query(ctx, `SELECT c.table_name FROM information_schema.columns c
		JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
		WHERE c.table_schema = $1 AND c.column_name = 'company_id' AND t.table_type = 'BASE TABLE'
		ORDER BY c.table_name`, schema)
	if err != nil {
		return 0, fmt.Errorf("error listing the tables of %s: %w", schema, err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, fmt.Errorf("error listing the tables of %s: %w", schema, err)
	}
	var deleted int64
	for pass := 0; len(tables) > 0; pass++ {
		var blocked []string
		var lastErr error
		for _, table := range tables {
			n, err := deleteCompanyRows(ctx, tx, pgx.Identifier{schema, table}.Sanitize(), companyID)
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == "23503" { // foreign_key_violation: try after the others
				blocked, lastErr = append(blocked, table), err
				continue
			}
			if err != nil {
				return 0, fmt.Errorf("error purging company %s from %s.%s: %w", companyID, schema, table, err)
			}
			deleted += n
		}
		if len(blocked) == len(tables) {
			return 0, fmt.Errorf("error purging company %s from %s: %w", companyID, schema, lastErr)
		}
		tables = blocked
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("error purging company %s from %s: %w", companyID, schema, err)
	}
	return deleted, nil
}

// deleteCompanyRows deletes a company's rows of one table inside a savepoint, so a refused
// delete leaves the transaction usable.
func deleteCompanyRows(ctx context.Context, tx pgx.Tx, table, companyID string) (int64, error) {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return 0, err
	}
	tag, err := sp.Exec(ctx, `DELETE FROM `+table+` WHERE company_id::text = $1`, companyID)
	if err != nil {
		_ = sp.Rollback(ctx)
		return 0, err
	}
	return tag.RowsAffected(), sp.Commit(ctx)
}
