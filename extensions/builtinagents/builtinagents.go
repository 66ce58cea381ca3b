// Package builtinagents is the first-party `builtinagents` extension (spec part 2 "Built-in
// agent definition", "Built-in agent lifecycle state", "Built-in agents"; REFERENCE.md 5):
// it provisions the agents of the builtins registry per company (directly, or as a pending
// hire approval when the company requires board approval for new agents), computes their
// lifecycle state, reconciles and resets the registry-managed pieces (the agent's name,
// role and marker, its instructions, its bundled skills and routines) and runs the bundled
// routines. Agents are written through the agents owner, which lets no one else touch the
// metadata.serviceBuiltInAgent marker; routines through the routines owner; approvals
// through the work owner. It runs only while the instance setting enableBuiltInAgents is
// on; its routes answer 404 "Built-in agents are not enabled" otherwise.
package builtinagents

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"net/http"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/keelhq/keel/extensions"
	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/idem"
	"github.com/keelhq/keel/sdk/migrate"
)

// Key is the extension key.
const Key = "builtinagents"

// Schema is the extension's PostgreSQL schema.
const Schema = "ext_builtinagents"

//go:embed migrations/*.sql
var migrationsFS embed.FS

func init() { extensions.Register(Key, func() sdk.Extension { return New() }) }

// BuiltInAgents is the extension.
type BuiltInAgents struct {
	host  *sdk.Host
	pool  *pgxpool.Pool
	sqlDB *sql.DB
	log   hclog.Logger
	mux   http.Handler
}

// New returns an unconfigured BuiltInAgents.
func New() *BuiltInAgents { return &BuiltInAgents{log: hclog.NewNullLogger()} }

// Manifest returns the manifest built from the route table.
func (x *BuiltInAgents) Manifest() *sdk.Manifest { return manifest() }

// Configure connects to the extension's schema and migrates it.
func (x *BuiltInAgents) Configure(ctx context.Context, env *sdk.Env) error {
	x.host = env.Host
	if env.Logger != nil {
		x.log = env.Logger
	}
	db, err := migrate.Open(ctx, migrate.OpenParams{URL: env.DatabaseURL, MaxConns: 4, Migrations: migrationsFS, Dir: "migrations",
		Line: Key, Schema: Schema, Metrics: env.Metrics})
	if err != nil {
		return err
	}
	x.pool, x.sqlDB = db.Pool, db.SQL
	x.mux = idem.Wrap(db.Pool, table.Mux(x), idem.Options{Logger: x.log})
	return nil
}

// HTTPHandler serves the manifest routes.
func (x *BuiltInAgents) HTTPHandler() http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if x.mux == nil {
			sdk.WriteError(rw, http.StatusServiceUnavailable, "builtinagents extension is not configured")
			return
		}
		x.mux.ServeHTTP(rw, r)
	})
}

// CallMethod serves the provided methods.
func (x *BuiltInAgents) CallMethod(ctx context.Context, call *sdk.MethodCall) (any, error) {
	if x.pool == nil {
		return nil, fmt.Errorf("builtinagents extension is not configured")
	}
	return table.Call(x, Key, ctx, call)
}

// OnEvent purges a deleted company's rows and settles provisions under approval.
func (x *BuiltInAgents) OnEvent(ctx context.Context, ev *sdk.Event) error {
	if x.pool == nil {
		return fmt.Errorf("builtinagents extension is not configured")
	}
	switch {
	case ev.Type == "company.deleted" && ev.From("kernel") && sdk.IsUUID(ev.CompanyID):
		_, err := migrate.PurgeCompany(ctx, x.pool, Schema, ev.CompanyID)
		return err
	case ev.Type == "approval.decided" && ev.From("work") && sdk.IsUUID(ev.CompanyID):
		return x.onApprovalDecided(ctx, ev)
	}
	return nil
}

// Health checks the database.
func (x *BuiltInAgents) Health(ctx context.Context) error {
	if x.pool == nil {
		return fmt.Errorf("not configured")
	}
	return x.pool.Ping(ctx)
}

// Stop closes the database.
func (x *BuiltInAgents) Stop(context.Context) error {
	if x.sqlDB != nil {
		_ = x.sqlDB.Close()
	}
	if x.pool != nil {
		x.pool.Close()
	}
	return nil
}

// writeErr writes err; anything that is not an *sdk.Error is logged and answered with 500.
func (x *BuiltInAgents) writeErr(rw http.ResponseWriter, err error) {
	var e *sdk.Error
	if !errors.As(err, &e) {
		x.log.Error("request failed", "error", err)
	}
	sdk.WriteErr(rw, err)
}

// callErr returns the API error another owner answered as it is (its status, text and code
// reach the caller; sdk.WriteErr does not unwrap), and wraps any other failure with what the
// extension was doing.
func callErr(err error, format string, args ...any) error {
	var e *sdk.Error
	if errors.As(err, &e) {
		return e
	}
	return fmt.Errorf(format+": %w", append(args, err)...)
}

var (
	_ sdk.Configurer     = (*BuiltInAgents)(nil)
	_ sdk.HTTPProvider   = (*BuiltInAgents)(nil)
	_ sdk.MethodProvider = (*BuiltInAgents)(nil)
	_ sdk.EventHandler   = (*BuiltInAgents)(nil)
	_ sdk.HealthChecker  = (*BuiltInAgents)(nil)
	_ sdk.Stopper        = (*BuiltInAgents)(nil)
)
