package migrate

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/idem"
	"github.com/keelhq/keel/sdk/outbox"
)

// Database is an extension's connection to its own schema: a pgx pool and a database/sql
// view of the same pool (for bun and for migrations).
type Database struct {
	Pool *pgxpool.Pool
	SQL  *sql.DB
}

// OpenParams configures Open.
type OpenParams struct {
	// Env, when set, supplies URL, Line, Schema and Metrics where they are left empty
	// (its DatabaseURL, Key, Schema and Metrics).
	Env *sdk.Env
	// URL is the extension's database URL (sdk.Env.DatabaseURL).
	URL string
	// MaxConns lowers the pool's limit below the extension's share of the instance's
	// connection budget (see PoolMaxConns); zero, or a larger value, takes the share.
	MaxConns int32
	// Migrations and Dir locate the embedded *.up.sql files.
	Migrations fs.FS
	Dir        string
	// Line names the migration line (the extension key) and Schema the extension's schema,
	// which holds the bookkeeping table schema_migrations. Schema defaults to Env.Schema,
	// else to the URL's search_path (the host sets it to the extension's schema).
	Line   string
	Schema string
	// Metrics, when set (pass sdk.Env.Metrics), reports the pool's use as keel_db_pool_*
	// with the owner label Line.
	Metrics prometheus.Registerer
}

// PoolMaxConnsEnv names the environment variable through which the host hands a process
// extension its share of the instance's database connection budget (a positive integer).
const PoolMaxConnsEnv = "KEEL_DB_POOL_MAX_CONNS"

// PoolMaxConnIdleTime is how long a pooled connection may stay unused before it is closed;
// idle connections are looked for every poolHealthCheckPeriod.
const (
	PoolMaxConnIdleTime   = 30 * time.Second
	poolHealthCheckPeriod = 5 * time.Second
)

// StatementCacheCapacity is how many prepared statements a pooled connection keeps. bun
// writes its arguments into the SQL text, so most of its statements are one-off texts that
// pgx would otherwise prepare and keep, each with its plan in the backend's memory, until
// 512 of them fill tens of megabytes per connection; a short cache keeps the statements
// that repeat and lets the one-off ones go.
const StatementCacheCapacity = 64

// ExtensionPoolSize is the connection share of one extension on a machine with cores CPUs
// when the host names none: two connections a core, at least 4 and at most 16. PostgreSQL
// on a small machine serves no more queries at once than it has cores; more connections
// only add backends, each with its own memory.
func ExtensionPoolSize(cores int) int32 {
	return int32(min(max(2*cores, 4), 16))
}

// PoolMaxConns returns the connection limit of an extension's pool: the share the host set
// in PoolMaxConnsEnv, else ExtensionPoolSize of this machine.
func PoolMaxConns() int32 {
	if n, err := strconv.Atoi(os.Getenv(PoolMaxConnsEnv)); err == nil && n > 0 {
		return int32(min(n, 1<<20))
	}
	return ExtensionPoolSize(runtime.NumCPU())
}

// Open connects to an extension's database and applies its embedded migrations, then the
// SDK's own lines (the Idempotency-Key table of sdk/idem, the outbox of sdk/outbox). On an error nothing is left open.
func Open(ctx context.Context, p OpenParams) (*Database, error) {
	if e := p.Env; e != nil {
		p.URL = cmp.Or(p.URL, e.DatabaseURL)
		p.Line = cmp.Or(p.Line, e.Key)
		p.Schema = cmp.Or(p.Schema, e.Schema)
		if p.Metrics == nil && e.Metrics != nil {
			p.Metrics = e.Metrics
		}
	}
	cfg, err := pgxpool.ParseConfig(p.URL)
	if err != nil {
		return nil, fmt.Errorf("error parsing the database URL of %s: %w", p.Line, err)
	}
	if p.Schema == "" {
		p.Schema = cfg.ConnConfig.RuntimeParams["search_path"]
	}
	if p.Line == "" || p.Schema == "" || strings.Contains(p.Schema, ",") {
		return nil, fmt.Errorf("error opening the database of %q: the migration line and one schema are required (pass Env)", p.Line)
	}
	cfg.MaxConns = PoolMaxConns()
	if p.MaxConns > 0 && p.MaxConns < cfg.MaxConns {
		cfg.MaxConns = p.MaxConns
	}
	// Connections are opened on demand and closed again after a short idle time: every
	// PostgreSQL backend kept open holds its own catalog and plan caches.
	cfg.MinConns = 0
	cfg.MaxConnIdleTime = PoolMaxConnIdleTime
	cfg.HealthCheckPeriod = poolHealthCheckPeriod
	cfg.ConnConfig.StatementCacheCapacity = StatementCacheCapacity
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("error connecting to the database of %s: %w", p.Line, err)
	}
	db := &Database{Pool: pool, SQL: stdlib.OpenDBFromPool(pool)}
	if p.Metrics != nil {
		// A reconfigured extension opens its database again: the newer pool replaces the older.
		c := sdk.NewPoolCollector(p.Line, pool)
		p.Metrics.Unregister(c)
		if err := p.Metrics.Register(c); err != nil {
			pool.Close()
			return nil, fmt.Errorf("error registering the pool metrics of %s: %w", p.Line, err)
		}
	}
	ms, err := Load(p.Migrations, p.Dir)
	if err == nil {
		_, err = Apply(ctx, db.SQL, Params{Line: p.Line, Table: p.Schema + ".schema_migrations", Migrations: ms})
	}
	if err == nil {
		// Every extension remembers Idempotency-Keys in its own schema (see sdk/idem).
		_, err = Apply(ctx, db.SQL, Params{Line: p.Line + ".idem", Table: p.Schema + ".schema_migrations",
			Migrations: []Migration{{Name: "0001_idempotency_keys", SQL: idem.TableSQL(p.Schema + "." + idem.DefaultTable)}}})
	}
	if err == nil {
		// Every extension may keep an outbox of activity entries and calls (see sdk/outbox).
		_, err = Apply(ctx, db.SQL, Params{Line: p.Line + ".outbox", Table: p.Schema + ".schema_migrations",
			Migrations: []Migration{{Name: "0001_outbox", SQL: outbox.TableSQL(p.Schema + "." + outbox.DefaultTable)}}})
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// Close closes the database/sql view and the pool.
func (d *Database) Close() {
	if d == nil {
		return
	}
	_ = d.SQL.Close()
	d.Pool.Close()
}
