// Package routines is the first-party `routines` extension: routines that create execution
// issues for an assigned agent, fired by schedule, webhook and api triggers or by hand
// (spec part 1 "Routines"; REFERENCE.md 5). It owns the tables of schema ext_routines,
// runs the schedule ticker (an interval job, leader-elected, whose core tick takes the
// instant to evaluate so tests drive it with an injected clock), serves the public webhook
// fire route, keeps each webhook trigger's secret as a managed company secret of the
// secrets extension, and creates execution issues through work.issues.create.
package routines

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/keelhq/keel/extensions"
	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/idem"
	"github.com/keelhq/keel/sdk/migrate"
)

// Key is the extension key; provided methods are "routines.<method>".
const Key = "routines"

// Schema is the extension's PostgreSQL schema.
const Schema = "ext_routines"

// SchedulerEnv turns the automatic schedule ticker off when set to "off" (the tick job then
// does nothing; routines.tick still ticks on demand). Tests that drive schedules with an
// injected clock set it so wall-clock ticks cannot interleave.
const SchedulerEnv = "SERVICE_ROUTINES_SCHEDULER"

//go:embed migrations/*.sql
var migrationsFS embed.FS

func init() { extensions.Register(Key, func() sdk.Extension { return New() }) }

// Config is the extension's config (validated against the manifest's config schema).
type Config struct {
	// Scheduler is "on" (default) or "off"; off stops the automatic ticker.
	Scheduler string `json:"scheduler,omitempty"`
}

// Routines is the extension.
type Routines struct {
	host    *sdk.Host
	pool    *pgxpool.Pool
	sqlDB   *sql.DB
	log     hclog.Logger
	mux     http.Handler
	apiBase string
	cfg     Config
	secrets *secretCache
}

// New returns an unconfigured Routines.
func New() *Routines { return &Routines{log: hclog.NewNullLogger(), secrets: newSecretCache(4096)} }

// Manifest returns the manifest built from the route, method and job tables.
func (x *Routines) Manifest() *sdk.Manifest { return manifest() }

// Configure connects to the extension's schema and migrates it.
func (x *Routines) Configure(ctx context.Context, env *sdk.Env) error {
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
	// SERVICE_API_URL is the API's base URL without an /api suffix (as the agents runtime
	// environment builds it from the host's API URL); webhook URLs hang off it.
	apiURL := env.APIURL
	if apiURL == "" {
		apiURL = os.Getenv("SERVICE_API_URL")
	}
	x.apiBase = strings.TrimSuffix(strings.TrimSuffix(apiURL, "/"), "/api")
	db, err := migrate.Open(ctx, migrate.OpenParams{URL: env.DatabaseURL, Metrics: env.Metrics, Migrations: migrationsFS, Dir: "migrations",
		Line: Key, Schema: Schema})
	if err != nil {
		return err
	}
	x.pool, x.sqlDB = db.Pool, db.SQL
	x.mux = idem.Wrap(db.Pool, table.Mux(x), idem.Options{Logger: x.log,
		Skip: []string{"POST /api/routines/{routineId}/triggers", "POST /api/routine-triggers/{triggerId}/rotate-secret",
			"POST /api/routine-triggers/public/{publicId}/fire"}})
	return nil
}

// HTTPHandler serves the manifest routes.
func (x *Routines) HTTPHandler() http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if x.mux == nil {
			sdk.WriteError(rw, http.StatusServiceUnavailable, "routines extension is not configured")
			return
		}
		x.mux.ServeHTTP(rw, r)
	})
}

// CallMethod serves the provided methods.
func (x *Routines) CallMethod(ctx context.Context, call *sdk.MethodCall) (any, error) {
	return table.Call(x, Key, ctx, call)
}

// RunJob runs the declared jobs.
func (x *Routines) RunJob(ctx context.Context, job *sdk.JobRun) error {
	if x.pool == nil {
		return fmt.Errorf("routines extension is not configured")
	}
	switch job.Key {
	case jobTick:
		return x.tickJob(ctx)
	}
	return fmt.Errorf("unknown job %q", job.Key)
}

// OnEvent keeps run statuses current as execution issues finish.
func (x *Routines) OnEvent(ctx context.Context, ev *sdk.Event) error {
	if x.pool == nil {
		return fmt.Errorf("routines extension is not configured")
	}
	return x.onEvent(ctx, ev)
}

// Health checks the database.
func (x *Routines) Health(ctx context.Context) error {
	if x.pool == nil {
		return fmt.Errorf("not configured")
	}
	return x.pool.Ping(ctx)
}

// Stop closes the database.
func (x *Routines) Stop(context.Context) error {
	if x.sqlDB != nil {
		_ = x.sqlDB.Close()
	}
	if x.pool != nil {
		x.pool.Close()
	}
	return nil
}

var (
	_ sdk.Configurer     = (*Routines)(nil)
	_ sdk.HTTPProvider   = (*Routines)(nil)
	_ sdk.MethodProvider = (*Routines)(nil)
	_ sdk.JobRunner      = (*Routines)(nil)
	_ sdk.EventHandler   = (*Routines)(nil)
	_ sdk.HealthChecker  = (*Routines)(nil)
	_ sdk.Stopper        = (*Routines)(nil)
)
