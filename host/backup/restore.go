package backup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"

	"github.com/keelhq/keel/host/pgembed"
)

// RestoreOptions configure Restore.
type RestoreOptions struct {
	// Dir is the backup directory (holding manifest.json).
	Dir string
	// Home is the data dir to restore into; it must be empty (or missing) unless Force.
	Home string
	// DatabaseURL is an external database to restore into, which must hold no tables;
	// empty restores into a new embedded cluster under Home/db.
	DatabaseURL string
	// Force empties a non-empty Home first (keeping its backups directory and Dir).
	Force bool
	// BinDir holds pg_restore and the server binaries (default as the embedded cluster).
	BinDir string
	// Logger receives the embedded cluster's messages.
	Logger hclog.Logger
	// Progress, when set, is told what the restore is doing.
	Progress func(Progress)
}

// RestoreResult reports a finished restore.
type RestoreResult struct {
	Home       string `json:"home"`
	Files      int    `json:"files"`
	Tables     int    `json:"tables"`
	Rows       int64  `json:"rows"`
	DurationMs int64  `json:"durationMs"`
}

func (o *RestoreOptions) progress(stage string, done, total int64) {
	if o.Progress != nil {
		o.Progress(Progress{Stage: stage, Done: done, Total: total})
	}
}

// ReadManifest reads and checks a backup directory's manifest.
func ReadManifest(dir string) (*Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s is not a keel backup: it has no manifest.json (an interrupted backup never gets one)", dir)
	}
	if err != nil {
		return nil, fmt.Errorf("error reading backup manifest: %w", err)
	}
	m := &Manifest{}
	if err := json.Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("error reading backup manifest %s: %w", filepath.Join(dir, "manifest.json"), err)
	}
	if m.Format != FormatVersion {
		return nil, fmt.Errorf("backup %s has format %d; this keel reads format %d", dir, m.Format, FormatVersion)
	}
	return m, nil
}

// Restore brings an instance back from a backup: it checks every file against the
// manifest's hashes, copies the data dir's files into Home, restores the dump (creating
// the roles it needs) into a new embedded cluster or the external database, and checks
// that every table has the row count the backup recorded.
func Restore(ctx context.Context, opts RestoreOptions) (*RestoreResult, error) {
	began := time.Now()
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("error resolving backup dir %s: %w", opts.Dir, err)
	}
	home, err := filepath.Abs(opts.Home)
	if err != nil {
		return nil, fmt.Errorf("error resolving data dir %s: %w", opts.Home, err)
	}
	m, err := ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	pgRestore, err := pgembed.Tool(opts.BinDir, "pg_restore")
	if err != nil {
		return nil, err
	}

	opts.progress("checking the backup", 0, 0)
	dump := filepath.Join(dir, m.Database.File)
	if sum, _, err := hashFile(dump); err != nil {
		return nil, err
	} else if sum != m.Database.SHA256 {
		return nil, fmt.Errorf("backup %s is damaged: %s does not match its sha256 in the manifest", dir, m.Database.File)
	}
	for _, f := range m.Files {
		sum, _, err := hashFile(filepath.Join(dir, "files", filepath.FromSlash(f.Path)))
		if err != nil {
			return nil, fmt.Errorf("backup %s is damaged: %w", dir, err)
		}
		if sum != f.SHA256 {
			return nil, fmt.Errorf("backup %s is damaged: files/%s does not match its sha256 in the manifest", dir, f.Path)
		}
	}

	if err := prepareHome(home, dir, opts.Force); err != nil {
		return nil, err
	}
	opts.progress("files: copying into "+home, 0, 0)
	var total int64
	for _, f := range m.Files {
		total += f.Size
	}
	var copied int64
	for i, f := range m.Files {
		dst := filepath.Join(home, filepath.FromSlash(f.Path))
		if err := os.RemoveAll(dst); err != nil {
			return nil, fmt.Errorf("error replacing %s: %w", dst, err)
		}
		if _, err := copyFile(filepath.Join(dir, "files", filepath.FromSlash(f.Path)), dst); err != nil {
			return nil, err
		}
		copied += f.Size
		if i == len(m.Files)-1 || i%200 == 0 {
			opts.progress(fmt.Sprintf("files: %d of %d", i+1, len(m.Files)), copied, total)
		}
	}

	dsn := opts.DatabaseURL
	if dsn == "" {
		if os.Geteuid() == 0 {
			// As keel serve does: the postgres user may traverse (not list or read) home, so
			// the cluster lives under it.
			if fi, err := os.Stat(home); err == nil && fi.Mode().Perm()&0o011 != 0o011 {
				if err := os.Chmod(home, fi.Mode().Perm()|0o011); err != nil {
					return nil, fmt.Errorf("error letting the postgres user traverse data dir %s: %w", home, err)
				}
			}
		}
		opts.progress("database: starting the embedded cluster", 0, 0)
		pg, err := pgembed.Start(ctx, pgembed.Config{DataDir: filepath.Join(home, "db"), BinDir: opts.BinDir, Logger: opts.Logger})
		if err != nil {
			return nil, err
		}
		defer pg.Stop() //nolint:errcheck
		if err := pg.EnsureDatabase(ctx, "keel"); err != nil {
			return nil, err
		}
		dsn = pg.DSN("keel")
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("error connecting to the database to restore into: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	existing, err := countRows(ctx, conn)
	if err != nil {
		return nil, err
	}
	if len(existing) > 0 {
		names := make([]string, 0, len(existing))
		for n := range existing {
			names = append(names, n)
		}
		sort.Strings(names)
		if len(names) > 3 {
			names = append(names[:3], "…")
		}
		return nil, fmt.Errorf("the database to restore into already holds tables (%s): restore into an empty database", strings.Join(names, ", "))
	}
	for _, role := range m.Database.Roles {
		var exists bool
		if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)`, role).Scan(&exists); err != nil {
			return nil, fmt.Errorf("error checking role %s: %w", role, err)
		}
		if exists {
			continue
		}
		// As the extension roles are made (keel sets their password at start).
		if _, err := conn.Exec(ctx, `CREATE ROLE `+pgx.Identifier{role}.Sanitize()+` LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT`); err != nil {
			return nil, fmt.Errorf("error creating role %s that owns objects in the backup: %w", role, err)
		}
	}
	opts.progress(fmt.Sprintf("database: restoring %d tables", len(m.Database.Tables)), 0, 0)
	if err := runPG(ctx, pgRestore, dsn, "--exit-on-error", "--single-transaction", dump); err != nil {
		return nil, fmt.Errorf("error restoring the database: %w", err)
	}
	opts.progress("database: checking row counts", 0, 0)
	got, err := countRows(ctx, conn)
	if err != nil {
		return nil, err
	}
	res := &RestoreResult{Home: home, Files: len(m.Files), Tables: len(got)}
	for table, want := range m.Database.Tables {
		if got[table] != want {
			return nil, fmt.Errorf("restored table %s has %d rows, the backup recorded %d", table, got[table], want)
		}
		res.Rows += want
	}
	res.DurationMs = time.Since(began).Milliseconds()
	opts.progress("done", 0, 0)
	return res, nil
}

// prepareHome makes sure home exists and is empty; with force it empties it, keeping its
// backups directory and the backup being restored when they lie inside it.
func prepareHome(home, backupDir string, force bool) error {
	if err := os.MkdirAll(home, 0o700); err != nil {
		return fmt.Errorf("error creating data dir %s: %w", home, err)
	}
	ents, err := os.ReadDir(home)
	if err != nil {
		return fmt.Errorf("error reading data dir %s: %w", home, err)
	}
	if len(ents) == 0 {
		return nil
	}
	if !force {
		return fmt.Errorf("data dir %s is not empty: restore into an empty data dir, or pass --force to replace its contents", home)
	}
	for _, e := range ents {
		p := filepath.Join(home, e.Name())
		if e.Name() == "backups" || p == backupDir || strings.HasPrefix(backupDir, p+string(filepath.Separator)) {
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			return fmt.Errorf("error emptying data dir %s: %w", home, err)
		}
	}
	return nil
}
