// Package costs is the first-party `costs` extension: the token cost ledger (cost events
// reported through the API or recorded from heartbeat runs), spend reads by agent, model,
// provider, biller and project, rolling window spend, finance events, budget policies with
// soft warnings and hard stops, budget incidents and their resolution (spec part 1 "Costs
// and budgets"; REFERENCE.md 2.12). It owns the tables of schema ext_costs. Spend reads come
// from hourly and daily rollups maintained on every insert, so they stay flat as the ledger
// grows. Other extensions reach it through the methods it provides ("costs.recordRunCost",
// "costs.upsertBudgetPolicy", "costs.budgetGate", "costs.dashboardSummary").
package costs

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

// Key is the extension key; provided methods are "costs.<method>".
const Key = "costs"

// Schema is the extension's PostgreSQL schema.
const Schema = "ext_costs"

//go:embed migrations/*.sql
var migrationsFS embed.FS

func init() { extensions.Register(Key, func() sdk.Extension { return New() }) }

// Costs is the extension.
type Costs struct {
	host  *sdk.Host
	pool  *pgxpool.Pool
	sqlDB *sql.DB
	log   hclog.Logger
	mux   http.Handler
	// spend serializes the spend recalculation and policy evaluation of each company.
	spend *spendQueue
	// agentCache remembers the company of agents that reported costs.
	agentCache agentCompanies
	// writer stores the cost events reported without a heartbeat run, in groups.
	writer *eventWriter
}

// New returns an unconfigured Costs.
func New() *Costs {
	c := &Costs{log: hclog.NewNullLogger()}
	c.spend = newSpendQueue(c.settleSpend)
	return c
}

// Manifest returns the manifest built from the route, method and job tables.
func (c *Costs) Manifest() *sdk.Manifest { return manifest() }

// Configure connects to the extension's schema and migrates it.
func (c *Costs) Configure(ctx context.Context, env *sdk.Env) error {
	c.host = env.Host
	if env.Logger != nil {
		c.log = env.Logger
	}
	db, err := migrate.Open(ctx, migrate.OpenParams{URL: env.DatabaseURL, Metrics: env.Metrics, Migrations: migrationsFS, Dir: "migrations",
		Line: Key, Schema: Schema})
	if err != nil {
		return err
	}
	c.pool, c.sqlDB = db.Pool, db.SQL
	c.writer = newEventWriter(db.Pool)
	c.mux = idem.Wrap(db.Pool, table.Mux(c), idem.Options{Logger: c.log})
	return nil
}

// HTTPHandler serves the manifest routes.
func (c *Costs) HTTPHandler() http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if c.mux == nil {
			sdk.WriteError(rw, http.StatusServiceUnavailable, "costs extension is not configured")
			return
		}
		c.mux.ServeHTTP(rw, r)
	})
}

// CallMethod serves the provided methods.
func (c *Costs) CallMethod(ctx context.Context, call *sdk.MethodCall) (any, error) {
	return table.Call(c, Key, ctx, call)
}

// RunJob runs a declared job.
func (c *Costs) RunJob(ctx context.Context, job *sdk.JobRun) error {
	if c.pool == nil {
		return fmt.Errorf("costs extension is not configured")
	}
	switch job.Key {
	case jobMaintenance:
		return c.maintenance(ctx)
	}
	return fmt.Errorf("unknown job %s", job.Key)
}

// Health checks the database.
func (c *Costs) Health(ctx context.Context) error {
	if c.pool == nil {
		return fmt.Errorf("not configured")
	}
	return c.pool.Ping(ctx)
}

// Stop stops the event writer and closes the database.
func (c *Costs) Stop(ctx context.Context) error {
	if c.writer != nil {
		c.writer.close(ctx)
	}
	if c.sqlDB != nil {
		_ = c.sqlDB.Close()
	}
	if c.pool != nil {
		c.pool.Close()
	}
	return nil
}

var (
	_ sdk.Configurer     = (*Costs)(nil)
	_ sdk.HTTPProvider   = (*Costs)(nil)
	_ sdk.MethodProvider = (*Costs)(nil)
	_ sdk.JobRunner      = (*Costs)(nil)
	_ sdk.HealthChecker  = (*Costs)(nil)
	_ sdk.Stopper        = (*Costs)(nil)
)
