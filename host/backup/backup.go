// Package backup takes and restores backups of a whole keel instance: the database (the
// embedded cluster's or an external one) through pg_dump of every schema, taken in one
// exported snapshot whose row counts the backup records, plus the data dir's files
// (attachments, instance keys, installed extension packages). A backup is a timestamped
// directory holding manifest.json, database.dump (pg_dump's custom format) and files/.
package backup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/keelhq/keel/host/pgembed"
)

// Defaults of the retention policy.
const (
	DefaultKeepLast   = 7
	DefaultMaxAgeDays = 30
)

// FormatVersion is the layout version written into manifest.json.
const FormatVersion = 1

// namePrefix starts the name of every backup directory; retention only ever touches
// directories named so that hold a manifest.
const namePrefix = "keel-backup-"

// nameLayout is the timestamp of a backup directory's name (UTC, sortable).
const nameLayout = "20060102T150405.000Z"

// skipTop are the data dir's top-level entries a backup leaves out: the embedded cluster
// (dumped instead) and its password, backups themselves, and caches rebuilt at start.
var skipTop = map[string]bool{"db": true, "db.password": true, "backups": true, "wasm-cache": true}

// Options configure Run.
type Options struct {
	// Home is the data dir (SERVICE_HOME) whose files are backed up.
	Home string
	// DatabaseURL is the keel database: the embedded cluster's DSN or DATABASE_URL.
	DatabaseURL string
	// Root is where backup directories are made (default Home/backups).
	Root string
	// KeepLast keeps this many newest backups (default DefaultKeepLast; negative keeps all).
	KeepLast int
	// MaxAgeDays removes backups older than this many days (default DefaultMaxAgeDays;
	// negative keeps them whatever their age). The backup just taken is always kept.
	MaxAgeDays int
	// BinDir holds pg_dump (default: beside the embedded cluster's binaries).
	BinDir string
	// KeelVersion is recorded in the manifest.
	KeelVersion string
	// Progress, when set, is told what the backup is doing.
	Progress func(Progress)
}

// Progress is one step of a backup or restore: a stage and, for copies, how far it got.
type Progress struct {
	Stage string
	Done  int64
	Total int64
}

func (o *Options) progress(stage string, done, total int64) {
	if o.Progress != nil {
		o.Progress(Progress{Stage: stage, Done: done, Total: total})
	}
}

// Manifest describes one backup; it is written last, so a directory without one is not a
// backup.
type Manifest struct {
	Format      int              `json:"format"`
	KeelVersion string           `json:"keelVersion,omitempty"`
	CreatedAt   time.Time        `json:"createdAt"`
	Database    DatabaseManifest `json:"database"`
	Files       []FileEntry      `json:"files"`
}

// DatabaseManifest describes the database dump.
type DatabaseManifest struct {
	File          string `json:"file"`
	Bytes         int64  `json:"bytes"`
	SHA256        string `json:"sha256"`
	ServerVersion string `json:"serverVersion"`
	// Roles are the non-superuser roles owning objects in the database (the extensions'
	// own roles among them); a restore creates the missing ones first.
	Roles []string `json:"roles"`
	// Tables are the row counts of every table, read in the dump's snapshot.
	Tables map[string]int64 `json:"tables"`
}

// FileEntry is one file of the data dir, relative to it.
type FileEntry struct {
	Path   string      `json:"path"`
	Size   int64       `json:"size"`
	Mode   fs.FileMode `json:"mode"`
	SHA256 string      `json:"sha256"`
}

// Result reports a finished backup.
type Result struct {
	Directory  string    `json:"directory"`
	Name       string    `json:"name"`
	StartedAt  time.Time `json:"startedAt"`
	FinishedAt time.Time `json:"finishedAt"`
	DurationMs int64     `json:"durationMs"`
	Timing     Timing    `json:"timing"`
	Database   DBSummary `json:"database"`
	Files      FileStats `json:"files"`
	Retention  Retention `json:"retention"`
}

// Timing splits a backup's duration.
type Timing struct {
	DatabaseMs  int64 `json:"databaseMs"`
	FilesMs     int64 `json:"filesMs"`
	RetentionMs int64 `json:"retentionMs"`
}

// DBSummary sums up the dump.
type DBSummary struct {
	Bytes  int64 `json:"bytes"`
	Tables int   `json:"tables"`
	Rows   int64 `json:"rows"`
}

// FileStats sums up the copied files.
type FileStats struct {
	Count int   `json:"count"`
	Bytes int64 `json:"bytes"`
}

// Retention is the policy applied after a backup and what it removed.
type Retention struct {
	Root       string   `json:"root"`
	KeepLast   int      `json:"keepLast"`
	MaxAgeDays int      `json:"maxAgeDays"`
	Kept       int      `json:"kept"`
	Pruned     []string `json:"pruned"`
}

func (o *Options) normalize() error {
	if o.Home == "" {
		return errors.New("no data dir to back up")
	}
	if o.DatabaseURL == "" {
		return errors.New("no database to back up")
	}
	if o.Root == "" {
		o.Root = filepath.Join(o.Home, "backups")
	}
	if o.KeepLast == 0 {
		o.KeepLast = DefaultKeepLast
	}
	if o.MaxAgeDays == 0 {
		o.MaxAgeDays = DefaultMaxAgeDays
	}
	return nil
}

// Run takes one backup into a new directory under Root and applies the retention policy.
// The database is dumped in one snapshot exported by a repeatable-read transaction that
// also counts every table's rows, so the counts match the dump exactly however many
// writes run meanwhile. Files are copied after the snapshot is taken: every attachment
// row in the dump has its file (a file is written before its row commits).
func Run(ctx context.Context, opts Options) (*Result, error) {
	if err := opts.normalize(); err != nil {
		return nil, err
	}
	pgDump, err := pgembed.Tool(opts.BinDir, "pg_dump")
	if err != nil {
		return nil, err
	}
	began := time.Now().UTC()
	if err := os.MkdirAll(opts.Root, 0o700); err != nil {
		return nil, fmt.Errorf("error creating backup dir %s: %w", opts.Root, err)
	}
	name := namePrefix + began.Format(nameLayout)
	final := filepath.Join(opts.Root, name)
	if _, err := os.Stat(final); err == nil {
		return nil, fmt.Errorf("backup %s already exists", final)
	}
	work, err := os.MkdirTemp(opts.Root, ".partial-"+name+"-")
	if err != nil {
		return nil, fmt.Errorf("error creating backup dir under %s: %w", opts.Root, err)
	}
	done := false
	defer func() {
		if !done {
			os.RemoveAll(work)
		}
	}()
	m := &Manifest{Format: FormatVersion, KeelVersion: opts.KeelVersion, CreatedAt: began}
	res := &Result{Name: name, Directory: final, StartedAt: began}

	// The database, in one snapshot.
	opts.progress("database: taking a snapshot", 0, 0)
	conn, err := pgx.Connect(ctx, opts.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("error connecting to the database to back it up: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("error starting the backup snapshot: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck
	var snapshot string
	if err := tx.QueryRow(ctx, `SELECT pg_export_snapshot()`).Scan(&snapshot); err != nil {
		return nil, fmt.Errorf("error exporting the backup snapshot: %w", err)
	}
	m.Database.File = "database.dump"
	if err := tx.QueryRow(ctx, `SELECT current_setting('server_version')`).Scan(&m.Database.ServerVersion); err != nil {
		return nil, fmt.Errorf("error reading the server version: %w", err)
	}
	if m.Database.Roles, err = ownerRoles(ctx, tx); err != nil {
		return nil, err
	}
	if m.Database.Tables, err = countRows(ctx, tx); err != nil {
		return nil, err
	}
	dumpPath := filepath.Join(work, m.Database.File)
	opts.progress("database: dumping every schema", 0, 0)
	if err := runPG(ctx, pgDump, opts.DatabaseURL, "--format=custom", "--snapshot="+snapshot, "--file="+dumpPath); err != nil {
		return nil, fmt.Errorf("error dumping the database: %w", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		return nil, fmt.Errorf("error ending the backup snapshot: %w", err)
	}
	if m.Database.SHA256, m.Database.Bytes, err = hashFile(dumpPath); err != nil {
		return nil, err
	}
	dbDone := time.Now()
	res.Timing.DatabaseMs = dbDone.Sub(began).Milliseconds()
	res.Database = DBSummary{Bytes: m.Database.Bytes, Tables: len(m.Database.Tables)}
	for _, n := range m.Database.Tables {
		res.Database.Rows += n
	}

	// The data dir's files.
	if m.Files, err = copyTree(ctx, opts.Home, filepath.Join(work, "files"), excluded(opts.Home, opts.Root), opts.progress); err != nil {
		return nil, err
	}
	for _, f := range m.Files {
		res.Files.Count++
		res.Files.Bytes += f.Size
	}
	filesDone := time.Now()
	res.Timing.FilesMs = filesDone.Sub(dbDone).Milliseconds()

	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(work, "manifest.json"), append(b, '\n'), 0o600); err != nil {
		return nil, fmt.Errorf("error writing the backup manifest: %w", err)
	}
	if err := os.Rename(work, final); err != nil {
		return nil, fmt.Errorf("error completing backup %s: %w", final, err)
	}
	done = true

	opts.progress("retention: pruning old backups", 0, 0)
	res.Retention = Retention{Root: opts.Root, KeepLast: opts.KeepLast, MaxAgeDays: opts.MaxAgeDays, Pruned: []string{}}
	if err := prune(opts.Root, name, opts.KeepLast, opts.MaxAgeDays, time.Now(), &res.Retention); err != nil {
		return nil, err
	}
	res.FinishedAt = time.Now().UTC()
	res.Timing.RetentionMs = res.FinishedAt.Sub(filesDone).Milliseconds()
	res.DurationMs = res.FinishedAt.Sub(began).Milliseconds()
	opts.progress("done", 0, 0)
	return res, nil
}

// excluded returns the paths a backup of home leaves out: skipTop, and the backup root
// wherever it lies.
func excluded(home, root string) func(rel string, d fs.DirEntry) bool {
	absRoot, _ := filepath.Abs(root)
	return func(rel string, d fs.DirEntry) bool {
		if !strings.Contains(rel, string(filepath.Separator)) && skipTop[rel] {
			return true
		}
		return d.IsDir() && filepath.Join(home, rel) == absRoot
	}
}

// systemSchemas filters out PostgreSQL's own schemas.
const systemSchemas = `n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname !~ '^pg_'`

// ownerRoles lists the non-superuser roles owning schemas, tables, sequences, types or
// functions outside PostgreSQL's own schemas.
func ownerRoles(ctx context.Context, tx pgx.Tx) ([]string, error) {
	rows, err := tx.Query(ctx, `SELECT DISTINCT r.rolname FROM (
		SELECT n.nspowner AS o FROM pg_namespace n WHERE `+systemSchemas+`
		UNION SELECT c.relowner FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE `+systemSchemas+`
		UNION SELECT t.typowner FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace WHERE `+systemSchemas+`
		UNION SELECT p.proowner FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE `+systemSchemas+`
	) x JOIN pg_roles r ON r.oid = x.o WHERE NOT r.rolsuper AND r.rolname !~ '^pg_' ORDER BY 1`)
	if err != nil {
		return nil, fmt.Errorf("error listing the database's roles: %w", err)
	}
	roles, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("error listing the database's roles: %w", err)
	}
	if roles == nil {
		roles = []string{}
	}
	return roles, nil
}

// countRows counts the rows of every table outside PostgreSQL's own schemas, keyed
// schema.table.
func countRows(ctx context.Context, q interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}) (map[string]int64, error) {
	rows, err := q.Query(ctx, `SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition AND `+systemSchemas+` ORDER BY 1, 2`)
	if err != nil {
		return nil, fmt.Errorf("error listing tables: %w", err)
	}
	type table struct{ schema, name string }
	tables, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (table, error) {
		var t table
		return t, r.Scan(&t.schema, &t.name)
	})
	if err != nil {
		return nil, fmt.Errorf("error listing tables: %w", err)
	}
	counts := make(map[string]int64, len(tables))
	for _, t := range tables {
		var n int64
		if err := q.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{t.schema, t.name}.Sanitize()).Scan(&n); err != nil {
			return nil, fmt.Errorf("error counting rows of %s.%s: %w", t.schema, t.name, err)
		}
		counts[t.schema+"."+t.name] = n
	}
	return counts, nil
}

// copyTree copies the regular files under src (except those skip names) into dst,
// keeping their modes, and returns them with their hashes, sorted by path.
func copyTree(ctx context.Context, src, dst string, skip func(rel string, d fs.DirEntry) bool, progress func(string, int64, int64)) ([]FileEntry, error) {
	var todo []string
	var total int64
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // Removed while we walk (a deleted attachment).
			}
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if rel == "." {
			return nil
		}
		if skip != nil && skip(rel, d) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				total += fi.Size()
			}
			todo = append(todo, rel)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("error listing files of %s: %w", src, err)
	}
	sort.Strings(todo)
	entries := make([]FileEntry, 0, len(todo))
	var copied int64
	last := time.Now()
	for _, rel := range todo {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		e, err := copyFile(filepath.Join(src, rel), filepath.Join(dst, rel))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		e.Path = filepath.ToSlash(rel)
		entries = append(entries, e)
		copied += e.Size
		if progress != nil && time.Since(last) > 200*time.Millisecond {
			progress(fmt.Sprintf("files: %d of %d", len(entries), len(todo)), copied, total)
			last = time.Now()
		}
	}
	if progress != nil {
		progress(fmt.Sprintf("files: %d of %d", len(entries), len(todo)), copied, total)
	}
	return entries, nil
}

// copyFile copies one file (creating dst's directories 0700) and hashes it on the way.
func copyFile(src, dst string) (FileEntry, error) {
	in, err := os.Open(src)
	if err != nil {
		return FileEntry{}, err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return FileEntry{}, fmt.Errorf("error reading %s: %w", src, err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return FileEntry{}, fmt.Errorf("error creating %s: %w", filepath.Dir(dst), err)
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, fi.Mode().Perm())
	if err != nil {
		return FileEntry{}, fmt.Errorf("error creating %s: %w", dst, err)
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(out, h), in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return FileEntry{}, fmt.Errorf("error copying %s to %s: %w", src, dst, err)
	}
	return FileEntry{Size: n, Mode: fi.Mode().Perm(), SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// hashFile returns a file's sha256 and size.
func hashFile(p string) (string, int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", 0, fmt.Errorf("error reading %s: %w", p, err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, fmt.Errorf("error reading %s: %w", p, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// List returns the completed backups under root, newest first.
func List(root string) ([]string, error) {
	ents, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("error listing backups in %s: %w", root, err)
	}
	var names []string
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), namePrefix) {
			continue
		}
		if _, err := backupTime(e.Name()); err != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(root, e.Name(), "manifest.json")); err != nil {
			continue
		}
		names = append(names, e.Name())
	}
	sort.Sort(sort.Reverse(sort.StringSlice(names)))
	return names, nil
}

func backupTime(name string) (time.Time, error) {
	return time.Parse(nameLayout, strings.TrimPrefix(name, namePrefix))
}

// prune removes the backups under root beyond the keepLast newest or older than
// maxAgeDays (a negative value disables that rule); current is always kept.
func prune(root, current string, keepLast, maxAgeDays int, now time.Time, r *Retention) error {
	names, err := List(root)
	if err != nil {
		return err
	}
	for i, name := range names {
		drop := false
		if name != current {
			if keepLast >= 0 && i >= keepLast {
				drop = true
			}
			if t, err := backupTime(name); err == nil && maxAgeDays >= 0 && now.Sub(t) > time.Duration(maxAgeDays)*24*time.Hour {
				drop = true
			}
		}
		if !drop {
			r.Kept++
			continue
		}
		if err := os.RemoveAll(filepath.Join(root, name)); err != nil {
			return fmt.Errorf("error removing old backup %s: %w", name, err)
		}
		r.Pruned = append(r.Pruned, name)
	}
	return nil
}

// runPG runs a PostgreSQL client program against dsn. The password goes through the
// environment, never the command line (which other users can read).
func runPG(ctx context.Context, prog, dsn string, args ...string) error {
	conn, password, err := splitPassword(dsn)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, prog, append(args, "--dbname="+conn)...)
	cmd.Env = append(os.Environ(), "PGPASSWORD="+password, "PGCONNECT_TIMEOUT=15")
	out, err := cmd.CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if password != "" {
			msg = strings.ReplaceAll(msg, password, "****")
		}
		if len(msg) > 2000 {
			msg = msg[:2000] + "…"
		}
		return fmt.Errorf("%s: %w: %s", filepath.Base(prog), err, msg)
	}
	return nil
}

// pgxOnly are connection string settings pgx reads and libpq does not know.
var pgxOnly = map[string]bool{"statement_cache_capacity": true, "description_cache_capacity": true,
	"default_query_exec_mode": true, "min_read_buffer_size": true}

var passwordKV = regexp.MustCompile(`(^|\s)password\s*=\s*('(\\.|[^'\\])*'|\S+)`)

// splitPassword returns dsn without its password, and the password.
func splitPassword(dsn string) (string, string, error) {
	cc, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return "", "", errors.New("the database URL is not a valid connection string")
	}
	if strings.Contains(dsn, "://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", "", errors.New("the database URL is not a valid URL")
		}
		if u.User != nil {
			u.User = url.User(u.User.Username())
		}
		q := u.Query()
		q.Del("password")
		for k := range q {
			// pgx's own settings, which libpq's tools refuse.
			if strings.HasPrefix(k, "pool_") || pgxOnly[k] {
				q.Del(k)
			}
		}
		u.RawQuery = q.Encode()
		return u.String(), cc.Password, nil
	}
	return strings.TrimSpace(passwordKV.ReplaceAllString(dsn, "")), cc.Password, nil
}
