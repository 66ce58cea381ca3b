// Package migrate applies embedded SQL migrations, one line of migrations per owner. The
// kernel applies line "main" from migrations/; each extension applies its own line in its own
// schema with the same code. Files are named NNNN_description.up.sql and applied in name
// order, each in its own transaction, under a PostgreSQL advisory lock so that several keel
// nodes starting at once apply each migration exactly once. Re-running is a no-op.
package migrate

import (
	"context"
	"database/sql"
	"fmt"
	"hash/fnv"
	"io/fs"
	"path"
	"sort"
	"strings"
)

// Migration is one SQL file of a line.
type Migration struct {
	Name string
	SQL  string
}

// Load reads the *.up.sql files of fsys (at dir) sorted by name.
func Load(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("error reading migrations in %s: %w", dir, err)
	}
	var out []Migration
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".up.sql") {
			continue
		}
		b, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("error reading migration %s: %w", e.Name(), err)
		}
		out = append(out, Migration{Name: strings.TrimSuffix(e.Name(), ".up.sql"), SQL: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Params configures one Apply.
type Params struct {
	// Line names the migration line, such as "main" or an extension key.
	Line string
	// Table is the bookkeeping table, schema-qualified, created if missing.
	Table string
	// Migrations are applied in order.
	Migrations []Migration
}

// Result lists the migrations applied by one Apply.
type Result struct {
	Applied []string
}

// Apply applies the migrations of a line that are not yet recorded in its table.
func Apply(ctx context.Context, db *sql.DB, p Params) (*Result, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("error opening connection for migrations of %s: %w", p.Line, err)
	}
	defer conn.Close()

	h := fnv.New64a()
	h.Write([]byte("keel-migrate:" + p.Line))
	lockID := int64(h.Sum64() >> 1)
	if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock($1)", lockID); err != nil {
		return nil, fmt.Errorf("error locking migrations of %s: %w", p.Line, err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", lockID) //nolint:errcheck

	if schema, _, ok := strings.Cut(p.Table, "."); ok {
		// Extension roles own their schema but may not create schemas, so create only when missing.
		var exists bool
		if err := conn.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", schema).Scan(&exists); err != nil {
			return nil, fmt.Errorf("error checking schema %s: %w", schema, err)
		}
		if !exists {
			if _, err := conn.ExecContext(ctx, "CREATE SCHEMA IF NOT EXISTS "+schema); err != nil {
				return nil, fmt.Errorf("error creating schema %s: %w", schema, err)
			}
		}
	}
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+p.Table+` (
		line text NOT NULL, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now(),
		PRIMARY KEY (line, name))`); err != nil {
		return nil, fmt.Errorf("error creating migrations table %s: %w", p.Table, err)
	}
	done := map[string]bool{}
	rows, err := conn.QueryContext(ctx, "SELECT name FROM "+p.Table+" WHERE line = $1", p.Line)
	if err != nil {
		return nil, fmt.Errorf("error reading applied migrations of %s: %w", p.Line, err)
	}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return nil, fmt.Errorf("error reading applied migrations of %s: %w", p.Line, err)
		}
		done[name] = true
	}
	rows.Close()

	res := &Result{}
	for _, m := range p.Migrations {
		if done[m.Name] {
			continue
		}
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return res, fmt.Errorf("error starting migration %s/%s: %w", p.Line, m.Name, err)
		}
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			tx.Rollback() //nolint:errcheck
			return res, fmt.Errorf("error applying migration %s/%s: %w", p.Line, m.Name, err)
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO "+p.Table+" (line, name) VALUES ($1, $2)", p.Line, m.Name); err != nil {
			tx.Rollback() //nolint:errcheck
			return res, fmt.Errorf("error recording migration %s/%s: %w", p.Line, m.Name, err)
		}
		if err := tx.Commit(); err != nil {
			return res, fmt.Errorf("error committing migration %s/%s: %w", p.Line, m.Name, err)
		}
		res.Applied = append(res.Applied, m.Name)
	}
	return res, nil
}
