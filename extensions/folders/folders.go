// Package folders is the first-party `folders` extension (spec part 2 "Folder",
// "Folders"): per-company trees of folders that organise routines and skills, with slugs
// derived from names, a depth limit of 4 measured over a moved subtree, reserved and
// system-managed folders (bundled, my, my:{userId}, projects, project:{projectId},
// bundled:{slug}), personal skill folders, moves with a position among siblings, item
// moves between folders of the item's kind, and item counts. It owns the table of schema
// ext_folders; the items live with their owners (routines, skills), which keep each item's
// folderId and answer the folderItems.* methods this extension calls through the host.
package folders

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
const Key = "folders"

// Schema is the extension's PostgreSQL schema.
const Schema = "ext_folders"

//go:embed migrations/*.sql
var migrationsFS embed.FS

func init() { extensions.Register(Key, func() sdk.Extension { return New() }) }

// Folders is the extension.
type Folders struct {
	host  *sdk.Host
	pool  *pgxpool.Pool
	sqlDB *sql.DB
	log   hclog.Logger
	mux   http.Handler
}

// New returns an unconfigured Folders.
func New() *Folders { return &Folders{log: hclog.NewNullLogger()} }

// Manifest returns the manifest built from the route table.
func (x *Folders) Manifest() *sdk.Manifest { return manifest() }

// Configure connects to the extension's schema and migrates it.
func (x *Folders) Configure(ctx context.Context, env *sdk.Env) error {
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
	x.mux = table.Mux(x)
	return nil
}

// HTTPHandler serves the manifest routes.
func (x *Folders) HTTPHandler() http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if x.mux == nil {
			sdk.WriteError(rw, http.StatusServiceUnavailable, "folders extension is not configured")
			return
		}
		x.mux.ServeHTTP(rw, r)
	})
}

// CallMethod serves the provided methods.
func (x *Folders) CallMethod(ctx context.Context, call *sdk.MethodCall) (any, error) {
	if x.pool == nil {
		return nil, fmt.Errorf("folders extension is not configured")
	}
	return table.Call(x, Key, ctx, call)
}

// OnEvent purges a deleted company's folders.
func (x *Folders) OnEvent(ctx context.Context, ev *sdk.Event) error {
	if x.pool == nil {
		return fmt.Errorf("folders extension is not configured")
	}
	if ev.Type == "company.deleted" && ev.From("kernel") && sdk.IsUUID(ev.CompanyID) {
		if _, err := migrate.PurgeCompany(ctx, x.pool, Schema, ev.CompanyID); err != nil {
			return err
		}
	}
	return nil
}

// Health checks the database.
func (x *Folders) Health(ctx context.Context) error {
	if x.pool == nil {
		return fmt.Errorf("not configured")
	}
	return x.pool.Ping(ctx)
}

// Stop closes the database.
func (x *Folders) Stop(context.Context) error {
	if x.sqlDB != nil {
		_ = x.sqlDB.Close()
	}
	if x.pool != nil {
		x.pool.Close()
	}
	return nil
}

// writeErr writes err; anything that is not an *sdk.Error is logged and answered with 500.
func (x *Folders) writeErr(rw http.ResponseWriter, err error) {
	var e *sdk.Error
	if !errors.As(err, &e) {
		x.log.Error("request failed", "error", err)
	}
	sdk.WriteErr(rw, err)
}

var (
	_ sdk.Configurer     = (*Folders)(nil)
	_ sdk.HTTPProvider   = (*Folders)(nil)
	_ sdk.MethodProvider = (*Folders)(nil)
	_ sdk.EventHandler   = (*Folders)(nil)
	_ sdk.HealthChecker  = (*Folders)(nil)
	_ sdk.Stopper        = (*Folders)(nil)
)
