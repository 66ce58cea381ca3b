// Package decisions is the first-party `decisions` extension: agent-proposed questions with
// signed options whose effects run on issues when a board user picks one (spec part 1
// "Decision", "Decision status", "Decisions"; REFERENCE.md 5). It owns the tables of schema
// ext_decisions, signs each decision's options and target snapshots with an HMAC key of its
// own, executes effects through the work owner's provided methods with one execution row
// per effect, expires open decisions from a job and wakes the origin agent through the
// agents owner (via its outbox, at least once) when a decision asks for it.
package decisions

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/keelhq/keel/extensions"
	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/idem"
	"github.com/keelhq/keel/sdk/migrate"
	"github.com/keelhq/keel/sdk/outbox"
)

// Key is the extension key; provided methods are "decisions.<method>".
const Key = "decisions"

// Schema is the extension's PostgreSQL schema.
const Schema = "ext_decisions"

// OpenCapEnv sets how many open decisions one agent may hold (default 50).
const OpenCapEnv = "SERVICE_DECISIONS_OPEN_CAP"

// defaultOpenCap is the open decision cap when OpenCapEnv is unset.
const defaultOpenCap = 50

//go:embed migrations/*.sql
var migrationsFS embed.FS

func init() { extensions.Register(Key, func() sdk.Extension { return New() }) }

// Decisions is the extension.
type Decisions struct {
	host    *sdk.Host
	pool    *pgxpool.Pool
	sqlDB   *sql.DB
	log     hclog.Logger
	mux     http.Handler
	outbox  *outbox.Outbox
	signer  *signer
	openCap int
}

// New returns an unconfigured Decisions.
func New() *Decisions { return &Decisions{log: hclog.NewNullLogger(), openCap: defaultOpenCap} }

// Manifest returns the manifest built from the route, method and job tables.
func (x *Decisions) Manifest() *sdk.Manifest { return manifest() }

// Configure loads the signing key, connects to the extension's schema and migrates it. A
// missing signing secret never stops the extension: a key file is generated instead.
func (x *Decisions) Configure(ctx context.Context, env *sdk.Env) error {
	x.host = env.Host
	if env.Logger != nil {
		x.log = env.Logger
	}
	s, source, err := loadSigner(env.DataDir)
	if err != nil {
		return fmt.Errorf("error loading the decision signing key: %w", err)
	}
	x.signer = s
	x.log.Info("decision signing key loaded", "source", source)
	if v := strings.TrimSpace(os.Getenv(SigningSecretEnv)); v != "" && source != "env" {
		x.log.Warn(SigningSecretEnv+" is shorter than 32 characters and is ignored", "source", source)
	}
	if v := strings.TrimSpace(os.Getenv(OpenCapEnv)); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n >= 1 {
			x.openCap = n
		} else {
			x.log.Warn(OpenCapEnv+" is not a positive integer; using the default", "value", v, "default", defaultOpenCap)
		}
	}
	db, err := migrate.Open(ctx, migrate.OpenParams{URL: env.DatabaseURL, Migrations: migrationsFS, Dir: "migrations",
		Line: Key, Schema: Schema})
	if err != nil {
		return err
	}
	x.pool, x.sqlDB = db.Pool, db.SQL
	x.outbox = outbox.Start(db.Pool, Schema+"."+outbox.DefaultTable, env.Host, x.log)
	x.mux = idem.Wrap(db.Pool, table.Mux(x), idem.Options{Logger: x.log})
	return nil
}

// HTTPHandler serves the manifest routes.
func (x *Decisions) HTTPHandler() http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if x.mux == nil {
			sdk.WriteError(rw, http.StatusServiceUnavailable, "decisions extension is not configured")
			return
		}
		x.mux.ServeHTTP(rw, r)
	})
}

// CallMethod serves the provided methods.
func (x *Decisions) CallMethod(ctx context.Context, call *sdk.MethodCall) (any, error) {
	return table.Call(x, Key, ctx, call)
}

// RunJob runs the declared jobs.
func (x *Decisions) RunJob(ctx context.Context, job *sdk.JobRun) error {
	if x.pool == nil {
		return fmt.Errorf("decisions extension is not configured")
	}
	switch job.Key {
	case jobSweep:
		_, err := x.sweep(ctx, nowUTC())
		return err
	}
	return fmt.Errorf("unknown job %q", job.Key)
}

// OnEvent purges a deleted company's decisions, bundles, executions and queues.
func (x *Decisions) OnEvent(ctx context.Context, ev *sdk.Event) error {
	if x.pool == nil {
		return fmt.Errorf("decisions extension is not configured")
	}
	if ev.Type == "company.deleted" && ev.From("kernel") && ev.CompanyID != "" {
		_, err := migrate.PurgeCompany(ctx, x.pool, Schema, ev.CompanyID)
		return err
	}
	return nil
}

// Health checks the database.
func (x *Decisions) Health(ctx context.Context) error {
	if x.pool == nil {
		return fmt.Errorf("not configured")
	}
	return x.pool.Ping(ctx)
}

// Stop ends the outbox drainer and closes the database.
func (x *Decisions) Stop(context.Context) error {
	if x.outbox != nil {
		x.outbox.Stop()
	}
	if x.sqlDB != nil {
		_ = x.sqlDB.Close()
	}
	if x.pool != nil {
		x.pool.Close()
	}
	return nil
}

// writeErr writes err; anything that is not an *sdk.Error is logged and answered with 500.
func (x *Decisions) writeErr(rw http.ResponseWriter, err error) {
	var e *sdk.Error
	if !errors.As(err, &e) {
		x.log.Error("request failed", "error", err)
	}
	sdk.WriteErr(rw, err)
}

var (
	_ sdk.Configurer     = (*Decisions)(nil)
	_ sdk.HTTPProvider   = (*Decisions)(nil)
	_ sdk.MethodProvider = (*Decisions)(nil)
	_ sdk.JobRunner      = (*Decisions)(nil)
	_ sdk.EventHandler   = (*Decisions)(nil)
	_ sdk.HealthChecker  = (*Decisions)(nil)
	_ sdk.Stopper        = (*Decisions)(nil)
)
