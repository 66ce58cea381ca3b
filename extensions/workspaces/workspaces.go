// Package workspaces is the first-party `workspaces` extension (spec part 2 "Instance-admin
// routes": execution workspaces; REFERENCE.md 3 step 4 and 5): it resolves the working
// directory of every issue run (the project's workspace, shared; a git worktree of it on
// the issue's own branch when the project asks for isolated workspaces; or, for an issue
// without a project workspace, the agent's own directory, which the adapter makes), hands
// the run its SERVICE_WORKSPACE_* variables, serves the execution-workspaces routes with
// close readiness (uncommitted or unpushed work blocks a close) and the workspace-operations
// log, and starts and stops the runtime services and commands a workspace declares. It owns
// the tables of schema ext_workspaces and reaches issues and projects through the work
// owner. Git always runs with an argument list, never through a shell.
package workspaces

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/keelhq/keel/extensions"
	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/migrate"
)

// Key is the extension key.
const Key = "workspaces"

// Schema is the extension's PostgreSQL schema.
const Schema = "ext_workspaces"

//go:embed migrations/*.sql
var migrationsFS embed.FS

func init() { extensions.Register(Key, func() sdk.Extension { return New() }) }

// Workspaces is the extension.
type Workspaces struct {
	host    *sdk.Host
	pool    *pgxpool.Pool
	sqlDB   *sql.DB
	log     hclog.Logger
	mux     http.Handler
	dataDir string
	// hostname names this node in runtime_services.host.
	hostname string
	// repos serialises git operations per repository.
	repos repoLocks
	// procs holds the runtime services and commands this node started.
	procs *procTable
}

// New returns an unconfigured Workspaces.
func New() *Workspaces {
	return &Workspaces{log: hclog.NewNullLogger(), procs: newProcTable()}
}

// Manifest returns the manifest built from the route table.
func (x *Workspaces) Manifest() *sdk.Manifest { return manifest() }

// Configure connects to the extension's schema, migrates it and settles the runtime
// services a previous process of this node left behind (they died with it).
func (x *Workspaces) Configure(ctx context.Context, env *sdk.Env) error {
	x.host = env.Host
	if env.Logger != nil {
		x.log = env.Logger
	}
	x.dataDir = env.DataDir
	x.hostname, _ = os.Hostname()
	db, err := migrate.Open(ctx, migrate.OpenParams{URL: env.DatabaseURL, Migrations: migrationsFS, Dir: "migrations",
		Line: Key, Schema: Schema, Metrics: env.Metrics})
	if err != nil {
		return err
	}
	x.pool, x.sqlDB = db.Pool, db.SQL
	if _, err := x.pool.Exec(ctx, `UPDATE runtime_services SET status = 'stopped', stopped_at = now(), updated_at = now()
		WHERE host = $1 AND status IN ('starting', 'running')`, x.hostname); err != nil {
		return fmt.Errorf("error settling runtime services of a previous process: %w", err)
	}
	x.mux = table.Mux(x)
	return nil
}

// HTTPHandler serves the manifest routes.
func (x *Workspaces) HTTPHandler() http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if x.mux == nil {
			sdk.WriteError(rw, http.StatusServiceUnavailable, "workspaces extension is not configured")
			return
		}
		x.mux.ServeHTTP(rw, r)
	})
}

// CallMethod serves the provided methods.
func (x *Workspaces) CallMethod(ctx context.Context, call *sdk.MethodCall) (any, error) {
	if x.pool == nil {
		return nil, fmt.Errorf("workspaces extension is not configured")
	}
	return table.Call(x, Key, ctx, call)
}

// OnEvent stops a deleted company's runtime services and purges its rows (the worktrees
// stay on disk: they may hold work nobody pushed).
func (x *Workspaces) OnEvent(ctx context.Context, ev *sdk.Event) error {
	if x.pool == nil {
		return fmt.Errorf("workspaces extension is not configured")
	}
	if ev.Type == "company.deleted" && ev.From("kernel") && sdk.IsUUID(ev.CompanyID) {
		x.procs.stopCompany(ev.CompanyID)
		if _, err := migrate.PurgeCompany(ctx, x.pool, Schema, ev.CompanyID); err != nil {
			return err
		}
	}
	return nil
}

// Health checks the database.
func (x *Workspaces) Health(ctx context.Context) error {
	if x.pool == nil {
		return fmt.Errorf("not configured")
	}
	return x.pool.Ping(ctx)
}

// Stop stops the runtime services of this node and closes the database.
func (x *Workspaces) Stop(context.Context) error {
	x.procs.stopAll()
	if x.sqlDB != nil {
		_ = x.sqlDB.Close()
	}
	if x.pool != nil {
		x.pool.Close()
	}
	return nil
}

// writeErr writes err; anything that is not an *sdk.Error is logged and answered with 500.
func (x *Workspaces) writeErr(rw http.ResponseWriter, err error) {
	var e *sdk.Error
	if !errors.As(err, &e) {
		x.log.Error("request failed", "error", err)
	}
	sdk.WriteErr(rw, err)
}

var (
	_ sdk.Configurer     = (*Workspaces)(nil)
	_ sdk.HTTPProvider   = (*Workspaces)(nil)
	_ sdk.MethodProvider = (*Workspaces)(nil)
	_ sdk.EventHandler   = (*Workspaces)(nil)
	_ sdk.HealthChecker  = (*Workspaces)(nil)
	_ sdk.Stopper        = (*Workspaces)(nil)
)
