// Package skills is the first-party `skills` extension (spec part 2 "Skill", "Skills"):
// a company's skills, one row per (company, canonical key), imported from a forge
// repository (repo, tree or blob URL, owner/repo, owner/repo/skill), a registry-site URL
// or an npx-style add command (unwrapped to the forge), a raw URL, or a local SKILL.md or
// folder; SKILL.md frontmatter parsing, slug and canonical key derivation, inventory
// classification and trust levels; bundled skills re-imported on every list and
// read-only; managed skills edited through the files routes; forge update checks and
// installs; project workspace scans; and the public catalog. It owns the tables of schema
// ext_skills, files its skills through the folders owner and reads agents and projects
// through their owners.
package skills

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
	"github.com/keelhq/keel/sdk/migrate"
)

// Key is the extension key.
const Key = "skills"

// Schema is the extension's PostgreSQL schema.
const Schema = "ext_skills"

//go:embed migrations/*.sql
var migrationsFS embed.FS

func init() { extensions.Register(Key, func() sdk.Extension { return New() }) }

// Skills is the extension.
type Skills struct {
	host  *sdk.Host
	pool  *pgxpool.Pool
	sqlDB *sql.DB
	log   hclog.Logger
	mux   http.Handler
	fetch *fetcher
	ends  *Endpoints
	// dataDir is the extension's data dir, where skills are materialised for agent runs.
	dataDir string
}

// New returns an unconfigured Skills.
func New() *Skills { return &Skills{log: hclog.NewNullLogger(), fetch: newFetcher()} }

// Manifest returns the manifest built from the route table.
func (x *Skills) Manifest() *sdk.Manifest { return manifest() }

// Configure reads the forge endpoints, connects to the extension's schema and migrates it.
func (x *Skills) Configure(ctx context.Context, env *sdk.Env) error {
	x.host = env.Host
	if env.Logger != nil {
		x.log = env.Logger
	}
	ends, err := endpointsFromEnv()
	if err != nil {
		return err
	}
	x.ends = ends
	x.dataDir = env.DataDir
	db, err := migrate.Open(ctx, migrate.OpenParams{URL: env.DatabaseURL, MaxConns: 4, Migrations: migrationsFS, Dir: "migrations",
		Line: Key, Schema: Schema, Metrics: env.Metrics})
	if err != nil {
		return err
	}
	x.pool, x.sqlDB = db.Pool, db.SQL
	x.mux = table.Mux(x)
	return nil
}

// HTTPHandler serves the manifest routes.
func (x *Skills) HTTPHandler() http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if x.mux == nil {
			sdk.WriteError(rw, http.StatusServiceUnavailable, "skills extension is not configured")
			return
		}
		x.mux.ServeHTTP(rw, r)
	})
}

// CallMethod serves the provided methods.
func (x *Skills) CallMethod(ctx context.Context, call *sdk.MethodCall) (any, error) {
	if x.pool == nil {
		return nil, fmt.Errorf("skills extension is not configured")
	}
	return table.Call(x, Key, ctx, call)
}

// OnEvent purges a deleted company's skills.
func (x *Skills) OnEvent(ctx context.Context, ev *sdk.Event) error {
	if x.pool == nil {
		return fmt.Errorf("skills extension is not configured")
	}
	if ev.Type == "company.deleted" && ev.From("kernel") && sdk.IsUUID(ev.CompanyID) {
		if _, err := migrate.PurgeCompany(ctx, x.pool, Schema, ev.CompanyID); err != nil {
			return err
		}
		return x.forgetCompany(ev.CompanyID)
	}
	return nil
}

// Health checks the database.
func (x *Skills) Health(ctx context.Context) error {
	if x.pool == nil {
		return fmt.Errorf("not configured")
	}
	return x.pool.Ping(ctx)
}

// Stop closes the database.
func (x *Skills) Stop(context.Context) error {
	if x.sqlDB != nil {
		_ = x.sqlDB.Close()
	}
	if x.pool != nil {
		x.pool.Close()
	}
	return nil
}

// writeErr writes err; anything that is not an *sdk.Error is logged and answered with 500.
func (x *Skills) writeErr(rw http.ResponseWriter, err error) {
	var e *sdk.Error
	if !errors.As(err, &e) {
		x.log.Error("request failed", "error", err)
	}
	sdk.WriteErr(rw, err)
}

var (
	_ sdk.Configurer     = (*Skills)(nil)
	_ sdk.HTTPProvider   = (*Skills)(nil)
	_ sdk.MethodProvider = (*Skills)(nil)
	_ sdk.EventHandler   = (*Skills)(nil)
	_ sdk.HealthChecker  = (*Skills)(nil)
	_ sdk.Stopper        = (*Skills)(nil)
)
