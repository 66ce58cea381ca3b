// Package work is the first-party `work` extension: the work graph every other area points
// at — issues (statuses, checkout and release, comments, blockers, labels, documents, work
// products, attachments, read and inbox marks), projects and workspaces, goals, approvals
// and company search (REFERENCE.md 2.1–2.5). It owns the tables of schema ext_work and is
// reached by other extensions only through the methods it provides.
package work

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
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
	"github.com/keelhq/keel/sdk/outbox"
)

// Key is the extension key; provided methods are "work.<method>".
const Key = "work"

// Schema is the extension's PostgreSQL schema.
const Schema = "ext_work"

//go:embed migrations/*.sql
var migrationsFS embed.FS

func init() { extensions.Register(Key, func() sdk.Extension { return New() }) }

// Config is the extension's config (validated against the manifest's config schema).
type Config struct {
	// AttachmentMaxBytes caps one attachment (default SERVICE_ATTACHMENT_MAX_BYTES or 10 MiB).
	AttachmentMaxBytes int64 `json:"attachmentMaxBytes,omitempty"`
}

// Work is the extension.
type Work struct {
	host    *sdk.Host
	pool    *pgxpool.Pool
	sqlDB   *sql.DB
	db      *bun.DB
	log     hclog.Logger
	dataDir string
	// outbox delivers activity entries and agent wakes at least once (sdk/outbox).
	outbox *outbox.Outbox
	// numbers coalesces concurrent issue creates' number reservations per company.
	numbers issueNumberer
	cfg     Config
	mux     http.Handler
}

// New returns an unconfigured Work.
func New() *Work { return &Work{log: hclog.NewNullLogger()} }

// Manifest returns the manifest built from the route and method tables.
func (w *Work) Manifest() *sdk.Manifest { return manifest() }

// Configure connects to the extension's schema and migrates it.
func (w *Work) Configure(ctx context.Context, env *sdk.Env) error {
	w.host = env.Host
	w.dataDir = env.DataDir
	if env.Logger != nil {
		w.log = env.Logger
	}
	if len(env.Config) > 0 {
		if err := json.Unmarshal(env.Config, &w.cfg); err != nil {
			return fmt.Errorf("error reading config: %w", err)
		}
	}
	if w.cfg.AttachmentMaxBytes <= 0 {
		w.cfg.AttachmentMaxBytes = attachmentMaxBytesFromEnv()
	}
	db, err := migrate.Open(ctx, migrate.OpenParams{URL: env.DatabaseURL, Metrics: env.Metrics, Migrations: migrationsFS, Dir: "migrations",
		Line: Key, Schema: Schema})
	if err != nil {
		return err
	}
	w.pool, w.sqlDB = db.Pool, db.SQL
	w.db = bun.NewDB(w.sqlDB, pgdialect.New())
	w.mux = idem.Wrap(db.Pool, table.Mux(w), idem.Options{Logger: w.log})
	w.outbox = outbox.Start(db.Pool, Schema+"."+outbox.DefaultTable, env.Host, w.log)
	return nil
}

// HTTPHandler serves the manifest routes.
func (w *Work) HTTPHandler() http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if w.mux == nil {
			sdk.WriteError(rw, http.StatusServiceUnavailable, "work extension is not configured")
			return
		}
		w.mux.ServeHTTP(rw, r)
	})
}

// CallMethod serves the provided methods.
func (w *Work) CallMethod(ctx context.Context, call *sdk.MethodCall) (any, error) {
	return table.Call(w, Key, ctx, call)
}

// Health checks the database.
func (w *Work) Health(ctx context.Context) error {
	if w.pool == nil {
		return fmt.Errorf("not configured")
	}
	return w.pool.Ping(ctx)
}

// Stop closes the database.
func (w *Work) Stop(context.Context) error {
	w.outbox.Stop()
	if w.sqlDB != nil {
		_ = w.sqlDB.Close()
	}
	if w.pool != nil {
		w.pool.Close()
	}
	return nil
}

var (
	_ sdk.Configurer     = (*Work)(nil)
	_ sdk.HTTPProvider   = (*Work)(nil)
	_ sdk.MethodProvider = (*Work)(nil)
	_ sdk.HealthChecker  = (*Work)(nil)
	_ sdk.Stopper        = (*Work)(nil)
)
