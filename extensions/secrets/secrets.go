// Package secrets is the first-party `secrets` extension: company secrets with versions and
// rotation, stored AES-256-GCM encrypted under a master key, bindings that grant them to
// agents and other targets, secret references resolved at run time, and an access audit
// (REFERENCE.md 2.9). It owns the tables of schema ext_secrets; other extensions reach it
// through the methods it provides ("secrets.resolve", "secrets.resolveEnv",
// "secrets.grantedForAgent", "secrets.valueForAgent"). Secret values never appear in logs,
// activity details or API reads.
package secrets

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"net/http"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/keelhq/keel/extensions"
	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/idem"
	"github.com/keelhq/keel/sdk/migrate"
)

// Key is the extension key; provided methods are "secrets.<method>".
const Key = "secrets"

// Schema is the extension's PostgreSQL schema.
const Schema = "ext_secrets"

//go:embed migrations/*.sql
var migrationsFS embed.FS

func init() { extensions.Register(Key, func() sdk.Extension { return New() }) }

// Secrets is the extension.
type Secrets struct {
	host   *sdk.Host
	pool   *pgxpool.Pool
	sqlDB  *sql.DB
	log    hclog.Logger
	sealer *sealer
	mux    http.Handler
}

// New returns an unconfigured Secrets.
func New() *Secrets { return &Secrets{log: hclog.NewNullLogger()} }

// Manifest returns the manifest built from the route and method tables.
func (s *Secrets) Manifest() *sdk.Manifest { return manifest() }

// Configure loads the master key, connects to the extension's schema and migrates it.
func (s *Secrets) Configure(ctx context.Context, env *sdk.Env) error {
	s.host = env.Host
	if env.Logger != nil {
		s.log = env.Logger
	}
	key, source, err := loadMasterKey(env.DataDir)
	if err != nil {
		return fmt.Errorf("error loading the secrets master key: %w", err)
	}
	if s.sealer, err = newSealer(key); err != nil {
		return err
	}
	s.log.Info("secrets master key loaded", "source", source)
	db, err := migrate.Open(ctx, migrate.OpenParams{URL: env.DatabaseURL, Metrics: env.Metrics, Migrations: migrationsFS, Dir: "migrations",
		Line: Key, Schema: Schema})
	if err != nil {
		return err
	}
	s.pool, s.sqlDB = db.Pool, db.SQL
	s.mux = idem.Wrap(db.Pool, table.Mux(s), idem.Options{Logger: s.log})
	return nil
}

// HTTPHandler serves the manifest routes.
func (s *Secrets) HTTPHandler() http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if s.mux == nil {
			sdk.WriteError(rw, http.StatusServiceUnavailable, "secrets extension is not configured")
			return
		}
		s.mux.ServeHTTP(rw, r)
	})
}

// CallMethod serves the provided methods.
func (s *Secrets) CallMethod(ctx context.Context, call *sdk.MethodCall) (any, error) {
	return table.Call(s, Key, ctx, call)
}

// Health checks the database.
func (s *Secrets) Health(ctx context.Context) error {
	if s.pool == nil {
		return fmt.Errorf("not configured")
	}
	return s.pool.Ping(ctx)
}

// Stop closes the database.
func (s *Secrets) Stop(context.Context) error {
	if s.sqlDB != nil {
		_ = s.sqlDB.Close()
	}
	if s.pool != nil {
		s.pool.Close()
	}
	return nil
}

var (
	_ sdk.Configurer     = (*Secrets)(nil)
	_ sdk.HTTPProvider   = (*Secrets)(nil)
	_ sdk.MethodProvider = (*Secrets)(nil)
	_ sdk.HealthChecker  = (*Secrets)(nil)
	_ sdk.Stopper        = (*Secrets)(nil)
)
