// Package environments is the first-party `environments` extension (spec part 2
// "Environment, lease, execution workspace", "Instance-admin routes", "Adapter device-login
// session"; REFERENCE-plugins.md C.8): a company's execution backends, on the built-in
// local driver or on a driver a plugin declares (sdk.EnvironmentDriver, reached through the
// host's keel.environments.call), the leases held on them, released by their holder or by
// the reaper once they expire, and adapter device logins, which run the adapter's login
// command inside a lease of an environment and surface the code and URL it prints. It owns
// the tables of schema ext_environments.
package environments

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/keelhq/keel/extensions"
	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/migrate"
)

// Key is the extension key.
const Key = "environments"

// Schema is the extension's PostgreSQL schema.
const Schema = "ext_environments"

//go:embed migrations/*.sql
var migrationsFS embed.FS

func init() { extensions.Register(Key, func() sdk.Extension { return New() }) }

// reapInterval is how often expired leases are looked for.
const reapInterval = 2 * time.Second

// Environments is the extension.
type Environments struct {
	host    *sdk.Host
	pool    *pgxpool.Pool
	sqlDB   *sql.DB
	log     hclog.Logger
	mux     http.Handler
	dataDir string
	local   *localDriver

	// logins are the device logins running in this process, by session id.
	loginsMu sync.Mutex
	logins   map[string]*loginRun

	startOnce  sync.Once
	stopReaper context.CancelFunc
	reaperDone chan struct{}
}

// New returns an unconfigured Environments.
func New() *Environments {
	return &Environments{log: hclog.NewNullLogger(), logins: map[string]*loginRun{}}
}

// Manifest returns the manifest built from the route table.
func (x *Environments) Manifest() *sdk.Manifest { return manifest() }

// Configure connects to the extension's schema, migrates it and starts the reaper (of
// expired leases and of device logins whose process is gone).
func (x *Environments) Configure(ctx context.Context, env *sdk.Env) error {
	x.host = env.Host
	if env.Logger != nil {
		x.log = env.Logger
	}
	x.dataDir = env.DataDir
	x.local = &localDriver{root: env.DataDir}
	db, err := migrate.Open(ctx, migrate.OpenParams{URL: env.DatabaseURL, Migrations: migrationsFS, Dir: "migrations",
		Line: Key, Schema: Schema, Metrics: env.Metrics})
	if err != nil {
		return err
	}
	x.pool, x.sqlDB = db.Pool, db.SQL
	x.mux = table.Mux(x)
	x.startOnce.Do(func() {
		rctx, cancel := context.WithCancel(context.Background())
		x.stopReaper, x.reaperDone = cancel, make(chan struct{})
		go x.reap(rctx)
	})
	return nil
}

// HTTPHandler serves the manifest routes.
func (x *Environments) HTTPHandler() http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if x.mux == nil {
			sdk.WriteError(rw, http.StatusServiceUnavailable, "environments extension is not configured")
			return
		}
		x.mux.ServeHTTP(rw, r)
	})
}

// CallMethod serves the provided methods.
func (x *Environments) CallMethod(ctx context.Context, call *sdk.MethodCall) (any, error) {
	return table.Call(x, Key, ctx, call)
}

// OnEvent purges a deleted company's environments, leases and sessions.
func (x *Environments) OnEvent(ctx context.Context, ev *sdk.Event) error {
	if x.pool == nil {
		return fmt.Errorf("environments extension is not configured")
	}
	if ev.Type == "company.deleted" && ev.From("kernel") && sdk.IsUUID(ev.CompanyID) {
		if _, err := migrate.PurgeCompany(ctx, x.pool, Schema, ev.CompanyID); err != nil {
			return err
		}
	}
	return nil
}

// Health checks the database.
func (x *Environments) Health(ctx context.Context) error {
	if x.pool == nil {
		return fmt.Errorf("not configured")
	}
	return x.pool.Ping(ctx)
}

// Stop cancels the running device logins and waits (up to 10 s) until they have recorded
// their end, stops the reaper and closes the database.
func (x *Environments) Stop(context.Context) error {
	x.loginsMu.Lock()
	running := make([]*loginRun, 0, len(x.logins))
	for _, l := range x.logins {
		l.cancel(errStopped)
		running = append(running, l)
	}
	x.loginsMu.Unlock()
	// Each login records how it ended and releases its lease before the database closes.
	deadline := time.After(10 * time.Second)
	for _, l := range running {
		select {
		case <-l.done:
		case <-deadline:
		}
	}
	if x.stopReaper != nil {
		x.stopReaper()
		<-x.reaperDone
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
func (x *Environments) writeErr(rw http.ResponseWriter, err error) {
	var e *sdk.Error
	if !errors.As(err, &e) {
		x.log.Error("request failed", "error", err)
	}
	sdk.WriteErr(rw, err)
}

var (
	_ sdk.Configurer     = (*Environments)(nil)
	_ sdk.HTTPProvider   = (*Environments)(nil)
	_ sdk.MethodProvider = (*Environments)(nil)
	_ sdk.EventHandler   = (*Environments)(nil)
	_ sdk.HealthChecker  = (*Environments)(nil)
	_ sdk.Stopper        = (*Environments)(nil)
)
