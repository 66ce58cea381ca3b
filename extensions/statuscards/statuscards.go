// Package statuscards is the first-party `statuscards` extension (spec part 1 "Status
// card", "Status card state", "Status cards"; REFERENCE.md 5): standing questions about a
// company's work that a designated summarizer agent compiles into company-search queries
// and keeps summarized as the watched issues change. It owns the tables of schema
// ext_statuscards (cards, the update ledger, summary revisions); it reaches issues and
// search through the work owner, wakes and runs through the agents owner, spend through the
// costs owner and the built-in summarizer through the builtinagents owner. Interval and
// reactive cards are evaluated by a leader-elected interval job whose core takes the instant
// to evaluate, so tests drive it with an injected clock. It runs only while the instance
// setting enableStatusCards is on; its routes answer 404 "Status cards are not enabled"
// otherwise.
package statuscards

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/keelhq/keel/extensions"
	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/idem"
	"github.com/keelhq/keel/sdk/migrate"
)

// Key is the extension key; provided methods are "statuscards.<method>".
const Key = "statuscards"

// Schema is the extension's PostgreSQL schema.
const Schema = "ext_statuscards"

// SchedulerEnv turns the automatic evaluation job off when set to "off" (statuscards.tick
// still evaluates on demand). Tests that drive policies with an injected clock set it.
const SchedulerEnv = "SERVICE_STATUSCARDS_SCHEDULER"

//go:embed migrations/*.sql
var migrationsFS embed.FS

func init() { extensions.Register(Key, func() sdk.Extension { return New() }) }

// Config is the extension's config (validated against the manifest's config schema).
type Config struct {
	// Scheduler is "on" (default) or "off"; off stops the automatic evaluation job.
	Scheduler string `json:"scheduler,omitempty"`
}

// StatusCards is the extension.
type StatusCards struct {
	host  *sdk.Host
	pool  *pgxpool.Pool
	sqlDB *sql.DB
	log   hclog.Logger
	mux   http.Handler
	cfg   Config
	// now is the clock of request handlers (the scheduler takes its instant as an argument).
	now func() time.Time
}

// New returns an unconfigured StatusCards.
func New() *StatusCards {
	return &StatusCards{log: hclog.NewNullLogger(), now: func() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }}
}

// Manifest returns the manifest built from the route, method and job tables.
func (x *StatusCards) Manifest() *sdk.Manifest { return manifest() }

// Configure connects to the extension's schema and migrates it.
func (x *StatusCards) Configure(ctx context.Context, env *sdk.Env) error {
	x.host = env.Host
	if env.Logger != nil {
		x.log = env.Logger
	}
	if len(env.Config) > 0 {
		if err := json.Unmarshal(env.Config, &x.cfg); err != nil {
			return fmt.Errorf("error reading config: %w", err)
		}
	}
	if v := strings.TrimSpace(os.Getenv(SchedulerEnv)); v != "" {
		x.cfg.Scheduler = v
	}
	db, err := migrate.Open(ctx, migrate.OpenParams{URL: env.DatabaseURL, Metrics: env.Metrics, MaxConns: 8, Migrations: migrationsFS,
		Dir: "migrations", Line: Key, Schema: Schema})
	if err != nil {
		return err
	}
	x.pool, x.sqlDB = db.Pool, db.SQL
	x.mux = idem.Wrap(db.Pool, table.Mux(x), idem.Options{Logger: x.log})
	return nil
}

// HTTPHandler serves the manifest routes.
func (x *StatusCards) HTTPHandler() http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if x.mux == nil {
			sdk.WriteError(rw, http.StatusServiceUnavailable, "statuscards extension is not configured")
			return
		}
		x.mux.ServeHTTP(rw, r)
	})
}

// CallMethod serves the provided methods.
func (x *StatusCards) CallMethod(ctx context.Context, call *sdk.MethodCall) (any, error) {
	if x.pool == nil {
		return nil, fmt.Errorf("statuscards extension is not configured")
	}
	return table.Call(x, Key, ctx, call)
}

// RunJob runs the declared jobs.
func (x *StatusCards) RunJob(ctx context.Context, job *sdk.JobRun) error {
	if x.pool == nil {
		return fmt.Errorf("statuscards extension is not configured")
	}
	switch job.Key {
	case jobEvaluate:
		if x.cfg.Scheduler == "off" {
			return nil
		}
		_, err := x.tick(ctx, time.Now())
		return err
	}
	return fmt.Errorf("unknown job %q", job.Key)
}

// OnEvent follows generation tasks and watched issues, and purges deleted companies.
func (x *StatusCards) OnEvent(ctx context.Context, ev *sdk.Event) error {
	if x.pool == nil {
		return fmt.Errorf("statuscards extension is not configured")
	}
	return x.onEvent(ctx, ev)
}

// Health checks the database.
func (x *StatusCards) Health(ctx context.Context) error {
	if x.pool == nil {
		return fmt.Errorf("not configured")
	}
	return x.pool.Ping(ctx)
}

// Stop closes the database.
func (x *StatusCards) Stop(context.Context) error {
	if x.sqlDB != nil {
		_ = x.sqlDB.Close()
	}
	if x.pool != nil {
		x.pool.Close()
	}
	return nil
}

// writeErr writes err; anything that is not an *sdk.Error is logged and answered with 500.
func (x *StatusCards) writeErr(rw http.ResponseWriter, err error) {
	var e *sdk.Error
	if !errors.As(err, &e) {
		x.log.Error("request failed", "error", err)
	} else {
		err = e
	}
	sdk.WriteErr(rw, err)
}

var (
	_ sdk.Configurer     = (*StatusCards)(nil)
	_ sdk.HTTPProvider   = (*StatusCards)(nil)
	_ sdk.MethodProvider = (*StatusCards)(nil)
	_ sdk.JobRunner      = (*StatusCards)(nil)
	_ sdk.EventHandler   = (*StatusCards)(nil)
	_ sdk.HealthChecker  = (*StatusCards)(nil)
	_ sdk.Stopper        = (*StatusCards)(nil)
)
