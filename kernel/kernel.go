// Package kernel is keel's small core: actor resolution and company scoping, principals and
// credentials, companies, memberships and grants, instance settings, the activity log, the
// extension registry records and the composed HTTP route table. Everything else is an
// extension that the host supervises and the kernel routes to.
package kernel

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"

	"github.com/keelhq/keel/migrations"
	"github.com/keelhq/keel/sdk/migrate"
)

// Version is the kernel version extensions declare compatibility with.
const Version = "0.1.0"

// Deployment modes and exposures.
const (
	ModeLocalTrusted  = "local_trusted"
	ModeAuthenticated = "authenticated"
	ExposurePrivate   = "private"
	ExposurePublic    = "public"
)

// Config configures the kernel.
type Config struct {
	DeploymentMode     string
	DeploymentExposure string
	// PublicBaseURL is required with public exposure.
	PublicBaseURL string
	// APIURL is the base URL agents and extensions use to reach the API.
	APIURL string
	// AgentJWTSecret signs local agent JWTs; generated and kept in the data dir when empty.
	AgentJWTSecret string
	// AgentJWTTTL is the lifetime of minted agent JWTs (default one hour).
	AgentJWTTTL time.Duration
	// EnableCompanyDeletion allows DELETE /api/companies/{companyId}.
	EnableCompanyDeletion bool
	// AttachmentMaxBytes is the instance default attachment size limit.
	AttachmentMaxBytes int64
	// MaxBodyBytes limits a request body that is not a multipart upload, counted after
	// decompression (default DefaultMaxBodyBytes); uploads are limited by AttachmentMaxBytes.
	MaxBodyBytes int
	// DBMaxConns bounds the kernel's connection pool, which the job queue shares (the
	// host sizes it from the machine; zero keeps the URL's pool_max_conns, at least 16).
	DBMaxConns int32
	Logger     hclog.Logger
}

// Validate checks the deployment settings against the spec's rules.
func (c *Config) Validate() error {
	switch c.DeploymentMode {
	case "":
		c.DeploymentMode = ModeLocalTrusted
	case ModeLocalTrusted, ModeAuthenticated:
	default:
		return fmt.Errorf("invalid deployment mode %q: use local_trusted or authenticated", c.DeploymentMode)
	}
	switch c.DeploymentExposure {
	case "":
		c.DeploymentExposure = ExposurePrivate
	case ExposurePrivate, ExposurePublic:
	default:
		return fmt.Errorf("invalid deployment exposure %q: use private or public", c.DeploymentExposure)
	}
	if c.DeploymentMode == ModeLocalTrusted && c.DeploymentExposure != ExposurePrivate {
		return errors.New("local_trusted mode is valid only with private exposure: set SERVICE_DEPLOYMENT_MODE=authenticated")
	}
	if c.DeploymentExposure == ExposurePublic && c.PublicBaseURL == "" {
		return errors.New("public exposure requires an explicit public base URL (SERVICE_PUBLIC_BASE_URL)")
	}
	if c.AgentJWTTTL <= 0 {
		c.AgentJWTTTL = time.Hour
	}
	if c.AttachmentMaxBytes <= 0 {
		c.AttachmentMaxBytes = 10 << 20
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.MaxBodyBytes > MaxAttachmentBytes {
		return fmt.Errorf("the request body limit %d is above the largest keel accepts (%d)", c.MaxBodyBytes, MaxAttachmentBytes)
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	return nil
}

// EventPublisher delivers activity entries and published events to subscribed extensions.
// The host implements it on the job queue; a nil publisher drops events.
type EventPublisher interface {
	// PublishEvent is called after an activity entry or event is committed.
	PublishEvent(ctx context.Context, ev *Event) error
}

// Event is one entry of the event stream.
type Event struct {
	ID         string
	Type       string
	CompanyID  string
	Payload    []byte
	OccurredAt time.Time
	Source     string
}

// Kernel is the running kernel.
type Kernel struct {
	cfg        Config
	log        hclog.Logger
	Pool       *pgxpool.Pool
	SQL        *sql.DB
	DB         *bun.DB
	Routes     *RouteTable
	instanceID string
	jwtSecret  []byte
	startedAt  time.Time

	events     EventPublisher
	extensions ExtensionDirectory
	// methods calls extension-provided methods (method_caller.go).
	methods MethodCaller
	manager ExtensionManager
	bundled BundledCatalog
	runs    runChecks
	// pluginRuntime is the host side of the plugin feature routes (plugin_features.go).
	pluginRuntime PluginRuntime
	// managed carries out the managed-resource routes (plugin_managed.go).
	managed ManagedReconciler
	// pluginSweep is when old webhook deliveries and job runs were last deleted (unix nanoseconds).
	pluginSweep atomic.Int64

	// observer, metrics and readiness are the host's observability hooks (see observe.go).
	observer  RequestObserver
	metrics   http.Handler
	readiness []ReadinessCheck

	settingsMu        sync.Mutex
	settingsListeners []func(section string)
	// companyListeners are called after a company is created (OnCompanyCreated).
	companyListeners []func(companyID string)

	// idemSweep is when expired Idempotency-Keys were last deleted (unix nanoseconds).
	idemSweep atomic.Int64

	// feed wakes this node's company event streams (activity_stream.go).
	feed *activityFeed
	// activityW commits undelivered activity entries in groups (activity_writer.go); nil
	// writes each alone.
	activityW *activityWriter

	// ReadCache keeps the answers of cacheable extension reads (readcache.go); it serves
	// nothing until the host runs it.
	ReadCache *ReadCache
}

// New connects to the database at dsn, applies the kernel migrations and registers the
// kernel routes. It does not serve HTTP; see Handler.
func New(ctx context.Context, dsn string, cfg Config) (*Kernel, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	poolCfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("error parsing database URL: %w", err)
	}
	if cfg.DBMaxConns > 0 {
		poolCfg.MaxConns = cfg.DBMaxConns
	} else if poolCfg.MaxConns < 16 {
		poolCfg.MaxConns = 16
	}
	// Connections are opened on demand and closed after a short idle time: every open
	// PostgreSQL backend holds its own catalog and plan caches.
	poolCfg.MinConns = 0
	poolCfg.MaxConnIdleTime = migrate.PoolMaxConnIdleTime
	poolCfg.HealthCheckPeriod = 5 * time.Second
	poolCfg.ConnConfig.StatementCacheCapacity = migrate.StatementCacheCapacity
	pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		return nil, fmt.Errorf("error connecting to database: %w", err)
	}
	sqlDB := stdlib.OpenDBFromPool(pool)
	k := &Kernel{
		cfg:       cfg,
		log:       cfg.Logger,
		Pool:      pool,
		SQL:       sqlDB,
		DB:        bun.NewDB(sqlDB, pgdialect.New()),
		ReadCache: NewReadCache(cfg.Logger),
		Routes:    NewRouteTable(),
		startedAt: time.Now(),
		feed:      newActivityFeed(),
	}
	k.activityW = newActivityWriter(k, activityFlushers)
	if err := k.migrate(ctx); err != nil {
		k.Close()
		return nil, err
	}
	if err := k.bootstrap(ctx); err != nil {
		k.Close()
		return nil, err
	}
	if err := k.announceBoardClaim(ctx); err != nil {
		k.Close()
		return nil, err
	}
	if err := k.announceBootstrapInvite(ctx); err != nil {
		k.Close()
		return nil, err
	}
	if err := k.registerRoutes(); err != nil {
		k.Close()
		return nil, err
	}
	return k, nil
}

// Config returns the validated configuration.
func (k *Kernel) Config() Config { return k.cfg }

// InstanceID returns the id of this keel instance (shared by all nodes on one database).
func (k *Kernel) InstanceID() string { return k.instanceID }

// SetEventPublisher sets where committed activity is published.
func (k *Kernel) SetEventPublisher(p EventPublisher) { k.events = p }

// SetExtensionDirectory sets the source of live extension state for the plugin routes.
func (k *Kernel) SetExtensionDirectory(d ExtensionDirectory) { k.extensions = d }

// Close writes the activity entries handed to the writer, then releases the database
// connections.
func (k *Kernel) Close() {
	if k.activityW != nil {
		k.activityW.stopWriter()
	}
	if k.SQL != nil {
		k.SQL.Close()
	}
	if k.Pool != nil {
		k.Pool.Close()
	}
}

func (k *Kernel) migrate(ctx context.Context) error {
	ms, err := migrate.Load(migrations.FS, ".")
	if err != nil {
		return err
	}
	res, err := migrate.Apply(ctx, k.SQL, migrate.Params{Line: "main", Table: "kernel.schema_migrations", Migrations: ms})
	if err != nil {
		return fmt.Errorf("error migrating kernel schema: %w", err)
	}
	if len(res.Applied) > 0 {
		k.log.Info("applied kernel migrations", "migrations", res.Applied)
	}
	return nil
}

// pendingMigrations counts embedded kernel migrations not recorded as applied: zero on a
// node that started, more when a newer node has not migrated a shared database yet (or the
// bookkeeping was tampered with).
func (k *Kernel) pendingMigrations(ctx context.Context) (int, error) {
	ms, err := migrate.Load(migrations.FS, ".")
	if err != nil {
		return 0, err
	}
	var applied int
	names := make([]string, len(ms))
	for i, m := range ms {
		names[i] = m.Name
	}
	if err := k.Pool.QueryRow(ctx, `SELECT count(*) FROM kernel.schema_migrations WHERE line = 'main' AND name = ANY($1)`, names).Scan(&applied); err != nil {
		return 0, fmt.Errorf("error counting applied kernel migrations: %w", err)
	}
	return len(ms) - applied, nil
}

// bootstrap makes sure the instance row, the JWT secret and the local board user exist.
func (k *Kernel) bootstrap(ctx context.Context) error {
	id := newID()
	if _, err := k.Pool.Exec(ctx, `INSERT INTO kernel.instance (id) VALUES ($1) ON CONFLICT (singleton) DO NOTHING`, id); err != nil {
		return fmt.Errorf("error creating instance record: %w", err)
	}
	if err := k.Pool.QueryRow(ctx, `SELECT id FROM kernel.instance`).Scan(&k.instanceID); err != nil {
		return fmt.Errorf("error reading instance record: %w", err)
	}
	secret := k.cfg.AgentJWTSecret
	if secret == "" {
		generated := randomHex(32)
		if _, err := k.Pool.Exec(ctx, `INSERT INTO kernel.instance_settings (section, value) VALUES ('jwt', jsonb_build_object('secret', $1::text)) ON CONFLICT (section) DO NOTHING`, generated); err != nil {
			return fmt.Errorf("error storing agent JWT secret: %w", err)
		}
		if err := k.Pool.QueryRow(ctx, `SELECT value->>'secret' FROM kernel.instance_settings WHERE section = 'jwt'`).Scan(&secret); err != nil {
			return fmt.Errorf("error reading agent JWT secret: %w", err)
		}
	}
	k.jwtSecret = []byte(secret)
	if k.cfg.DeploymentMode == ModeLocalTrusted {
		if _, err := k.Pool.Exec(ctx, `INSERT INTO kernel.users (id, email, name) VALUES ($1, 'local@service.local', 'Board') ON CONFLICT (id) DO NOTHING`, LocalBoardUserID); err != nil {
			return fmt.Errorf("error creating local board user: %w", err)
		}
		if _, err := k.Pool.Exec(ctx, `INSERT INTO kernel.instance_user_roles (user_id, role) VALUES ($1, 'instance_admin') ON CONFLICT DO NOTHING`, LocalBoardUserID); err != nil {
			return fmt.Errorf("error granting local board instance admin: %w", err)
		}
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Errorf("error reading random bytes: %w", err))
	}
	return hex.EncodeToString(b)
}

// InstanceSecret returns the instance's master secret, from which per-purpose keys
// (agent JWT keys, extension database passwords) are derived.
func (k *Kernel) InstanceSecret() []byte { return k.jwtSecret }
