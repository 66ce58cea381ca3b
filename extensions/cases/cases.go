// Package cases is the first-party `cases` extension (spec part 2 "Case", "Case status",
// "Case document lock", "Cases"; REFERENCE.md 5): per-company numbered cases upserted on
// (caseType, key), revisioned case documents with base-revision conflicts, locks and
// restores, annotation threads re-anchored on every revision, content-addressed
// attachments, company labels, typed links to issues (made automatically for agent runs)
// and a timeline of case events. It owns the tables of schema ext_cases and reaches issues,
// projects and labels through the work owner and runs through the agents owner. It runs
// only while the instance setting enableCases is on; its routes answer 403 "Cases are
// disabled" otherwise.
package cases

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/keelhq/keel/extensions"
	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/idem"
	"github.com/keelhq/keel/sdk/migrate"
)

// Key is the extension key.
const Key = "cases"

// Schema is the extension's PostgreSQL schema.
const Schema = "ext_cases"

//go:embed migrations/*.sql
var migrationsFS embed.FS

func init() { extensions.Register(Key, func() sdk.Extension { return New() }) }

// Cases is the extension.
type Cases struct {
	host    *sdk.Host
	pool    *pgxpool.Pool
	sqlDB   *sql.DB
	log     hclog.Logger
	mux     http.Handler
	dataDir string
	// maxAttachment is SERVICE_ATTACHMENT_MAX_BYTES (default 10 MiB).
	maxAttachment int64
}

// New returns an unconfigured Cases.
func New() *Cases { return &Cases{log: hclog.NewNullLogger()} }

// Manifest returns the manifest built from the route table.
func (x *Cases) Manifest() *sdk.Manifest { return manifest() }

// Configure connects to the extension's schema and migrates it.
func (x *Cases) Configure(ctx context.Context, env *sdk.Env) error {
	x.host = env.Host
	if env.Logger != nil {
		x.log = env.Logger
	}
	x.dataDir = env.DataDir
	x.maxAttachment = attachmentMaxBytesFromEnv()
	db, err := migrate.Open(ctx, migrate.OpenParams{URL: env.DatabaseURL, Migrations: migrationsFS, Dir: "migrations",
		Line: Key, Schema: Schema, Metrics: env.Metrics})
	if err != nil {
		return err
	}
	x.pool, x.sqlDB = db.Pool, db.SQL
	x.mux = idem.Wrap(db.Pool, table.Mux(x), idem.Options{Logger: x.log})
	return nil
}

// HTTPHandler serves the manifest routes.
func (x *Cases) HTTPHandler() http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if x.mux == nil {
			sdk.WriteError(rw, http.StatusServiceUnavailable, "cases extension is not configured")
			return
		}
		x.mux.ServeHTTP(rw, r)
	})
}

// OnEvent purges a deleted company's cases and their files.
func (x *Cases) OnEvent(ctx context.Context, ev *sdk.Event) error {
	if x.pool == nil {
		return fmt.Errorf("cases extension is not configured")
	}
	if ev.Type == "company.deleted" && ev.From("kernel") && sdk.IsUUID(ev.CompanyID) {
		if _, err := migrate.PurgeCompany(ctx, x.pool, Schema, ev.CompanyID); err != nil {
			return err
		}
		if x.dataDir != "" {
			if err := os.RemoveAll(filepath.Join(x.dataDir, "attachments", ev.CompanyID)); err != nil {
				return fmt.Errorf("error removing the attachments of company %s: %w", ev.CompanyID, err)
			}
		}
	}
	return nil
}

// Health checks the database.
func (x *Cases) Health(ctx context.Context) error {
	if x.pool == nil {
		return fmt.Errorf("not configured")
	}
	return x.pool.Ping(ctx)
}

// Stop closes the database.
func (x *Cases) Stop(context.Context) error {
	if x.sqlDB != nil {
		_ = x.sqlDB.Close()
	}
	if x.pool != nil {
		x.pool.Close()
	}
	return nil
}

// writeErr writes err; anything that is not an *sdk.Error is logged and answered with 500.
func (x *Cases) writeErr(rw http.ResponseWriter, err error) {
	var e *sdk.Error
	if !errors.As(err, &e) {
		x.log.Error("request failed", "error", err)
	}
	sdk.WriteErr(rw, err)
}

var (
	_ sdk.Configurer    = (*Cases)(nil)
	_ sdk.HTTPProvider  = (*Cases)(nil)
	_ sdk.EventHandler  = (*Cases)(nil)
	_ sdk.HealthChecker = (*Cases)(nil)
	_ sdk.Stopper       = (*Cases)(nil)
)
