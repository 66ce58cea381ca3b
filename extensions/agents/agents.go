// Package agents is the first-party `agents` extension: agent configuration and lifecycle
// (the kernel keeps only the identity: id, company, name, url key, role, status), hires,
// permissions, config revisions, skills sync, the /me routes, and the heartbeat engine:
// wakeup requests, heartbeat runs, their logs and events, and the run scheduler. Runs
// execute through adapter extensions ("adapter.<type>.execute", see sdk/adapter).
package agents

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"net/http"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"

	"github.com/keelhq/keel/extensions"
	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/idem"
	"github.com/keelhq/keel/sdk/migrate"
)

// Key is the extension key; provided methods are "agents.<method>".
const Key = "agents"

// Schema is the extension's PostgreSQL schema.
const Schema = "ext_agents"

//go:embed migrations/*.sql
var migrationsFS embed.FS

func init() { extensions.Register(Key, func() sdk.Extension { return New() }) }

// Agents is the extension.
type Agents struct {
	host    *sdk.Host
	env     *sdk.Env
	pool    *pgxpool.Pool
	sqlDB   *sql.DB
	db      *bun.DB
	log     hclog.Logger
	dataDir string
	mux     http.Handler
	// engine is the heartbeat engine (heartbeat*.go); nil until Configure.
	engine *engine
	// metrics counts heartbeat runs (metrics.go).
	metrics *runMetrics
}

// New returns an unconfigured extension.
func New() *Agents { return &Agents{log: hclog.NewNullLogger()} }

// Manifest returns the manifest built from the route, method and job tables.
func (a *Agents) Manifest() *sdk.Manifest { return manifest() }

// Configure connects to the extension's schema, migrates it and starts the engine.
func (a *Agents) Configure(ctx context.Context, env *sdk.Env) error {
	a.host, a.env, a.dataDir = env.Host, env, env.DataDir
	if env.Logger != nil {
		a.log = env.Logger
	}
	db, err := migrate.Open(ctx, migrate.OpenParams{URL: env.DatabaseURL, Metrics: env.Metrics, Migrations: migrationsFS, Dir: "migrations",
		Line: Key, Schema: Schema})
	if err != nil {
		return err
	}
	a.pool, a.sqlDB = db.Pool, db.SQL
	a.db = bun.NewDB(a.sqlDB, pgdialect.New())
	a.mux = idem.Wrap(db.Pool, table.Mux(a), idem.Options{Logger: a.log,
		Skip: []string{"POST /api/agents/me/secrets/{key}/value"}})
	a.metrics = newRunMetrics(env.Metrics)
	a.engine = newEngine(a)
	return nil
}

// HTTPHandler serves the manifest routes.
func (a *Agents) HTTPHandler() http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if a.mux == nil {
			sdk.WriteError(rw, http.StatusServiceUnavailable, "agents extension is not configured")
			return
		}
		a.mux.ServeHTTP(rw, r)
	})
}

// CallMethod serves the provided methods.
func (a *Agents) CallMethod(ctx context.Context, call *sdk.MethodCall) (any, error) {
	return table.Call(a, Key, ctx, call)
}

// RunJob runs a declared job of the heartbeat engine.
func (a *Agents) RunJob(ctx context.Context, job *sdk.JobRun) error {
	if a.engine == nil {
		return fmt.Errorf("agents extension is not configured")
	}
	return a.engine.runJob(ctx, job)
}

// Health checks the database.
func (a *Agents) Health(ctx context.Context) error {
	if a.pool == nil {
		return fmt.Errorf("not configured")
	}
	return a.pool.Ping(ctx)
}

// Stop stops the engine and closes the database.
func (a *Agents) Stop(ctx context.Context) error {
	if a.engine != nil {
		a.engine.stop(ctx)
	}
	if a.sqlDB != nil {
		_ = a.sqlDB.Close()
	}
	if a.pool != nil {
		a.pool.Close()
	}
	return nil
}

var (
	_ sdk.Configurer     = (*Agents)(nil)
	_ sdk.HTTPProvider   = (*Agents)(nil)
	_ sdk.MethodProvider = (*Agents)(nil)
	_ sdk.JobRunner      = (*Agents)(nil)
	_ sdk.HealthChecker  = (*Agents)(nil)
	_ sdk.Stopper        = (*Agents)(nil)
)
