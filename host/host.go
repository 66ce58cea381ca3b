// Package host is the `keel serve` process: it loads config, starts or connects to
// PostgreSQL, migrates the kernel schema, starts the kernel and the job queue, launches and
// supervises extensions, and serves HTTP. The keel command lives in host/cmd/keel.
package host

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/keelhq/keel/board"
	"github.com/keelhq/keel/host/hostsvc"
	"github.com/keelhq/keel/host/metrics"
	"github.com/keelhq/keel/host/packages"
	"github.com/keelhq/keel/host/pgembed"
	"github.com/keelhq/keel/host/queue"
	"github.com/keelhq/keel/host/supervisor"
	"github.com/keelhq/keel/kernel"
)

// Host is a running keel.
type Host struct {
	cfg        Config
	log        hclog.Logger
	PG         *pgembed.Cluster
	Kernel     *kernel.Kernel
	Queue      *queue.Queue
	Supervisor *supervisor.Supervisor
	wasm       *wasmLoader
	app        *fiber.App
	ln         net.Listener
	served     chan error
	// queueStarted yields the job queue's start result; the queue starts in the background.
	queueStarted chan error
	// queueState is queueStarting, queueStarted or queueFailed (for readiness).
	queueState atomic.Int32
	metrics    *metrics.Metrics
	// Packages installs, stores and materialises extension packages.
	Packages *packages.Manager
	// Catalog lists the packages bundled with keel (GET /api/plugins/examples).
	Catalog *packages.Catalog
	// URL is the base URL the API is served at, such as http://127.0.0.1:3100.
	URL string
	// ConnBudget is the instance's PostgreSQL connection budget, sized at start.
	ConnBudget ConnBudget
	// LoadErr joins the refusals of extensions that did not load (the host runs without them).
	LoadErr error
	// manager carries out extension installs, upgrades and removals; stopReconcile ends
	// its loop that follows other nodes.
	manager       *extensionManager
	stopReconcile context.CancelFunc
	// dsn is the keel database's connection string (backups dump it).
	dsn string
	// backups lets one backup run at a time.
	backups backupGate
}

// Start brings keel up and returns once it serves HTTP. On error everything started so far
// is stopped again.
func Start(ctx context.Context, cfg Config, logger hclog.Logger) (h *Host, err error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	started := &Host{cfg: cfg, log: logger, served: make(chan error, 1), metrics: metrics.New()}
	h = started
	defer func() {
		if err != nil {
			started.Stop(context.Background())
			h = nil
		}
	}()
	if err := os.MkdirAll(cfg.Home, 0o700); err != nil {
		return nil, fmt.Errorf("error creating data dir %s: %w", cfg.Home, err)
	}
	if cfg.DatabaseURL == "" && os.Geteuid() == 0 {
		if err := letPostgresTraverse(cfg.Home); err != nil {
			return nil, err
		}
	}
	// Bind first: a taken port is the most common start-up failure, and it is cheap to check.
	addr := net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port))
	h.ln, err = net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("port %d on %s is already in use: stop the other process or set SERVICE_PORT", cfg.Port, cfg.Host)
		}
		return nil, fmt.Errorf("error listening on %s: %w", addr, err)
	}
	if cfg.DatabaseURL != "" {
		// An external database is checked before anything else starts.
		if err := pingDatabase(ctx, cfg.DatabaseURL); err != nil {
			return nil, err
		}
	}
	h.URL = "http://" + h.ln.Addr().String()
	apiURL := h.URL
	if cfg.PublicBaseURL != "" {
		apiURL = cfg.PublicBaseURL
	}

	dsn := cfg.DatabaseURL
	if dsn == "" {
		h.PG, err = pgembed.Start(ctx, pgembed.Config{DataDir: filepath.Join(cfg.Home, "db"), Port: cfg.PGPort, Logger: logger.Named("postgres")})
		if err != nil {
			return nil, err
		}
		if err := h.PG.EnsureDatabase(ctx, "keel"); err != nil {
			return nil, err
		}
		dsn = h.PG.DSN("keel")
	}
	h.dsn = dsn
	// The job queue's schema migrates alongside the kernel's, on its own connections.
	queueMigrated := make(chan error, 1)
	go func() { queueMigrated <- migrateQueue(ctx, dsn) }()
	h.Kernel, err = kernel.New(ctx, dsn, kernel.Config{
		DeploymentMode: cfg.DeploymentMode, DeploymentExposure: cfg.DeploymentExposure, PublicBaseURL: cfg.PublicBaseURL,
		APIURL: apiURL, AgentJWTSecret: cfg.AgentJWTSecret, AgentJWTTTL: cfg.AgentJWTTTL,
		EnableCompanyDeletion: cfg.EnableCompanyDeletion, AttachmentMaxBytes: cfg.AttachmentMaxBytes,
		MaxBodyBytes: cfg.MaxBodyBytes,
		DBMaxConns:   NewConnBudget(runtime.NumCPU(), 0).Kernel,
		Logger:       logger.Named("kernel"),
	})
	if qerr := <-queueMigrated; err == nil {
		err = qerr
	}
	if err != nil {
		return nil, err
	}
	if err := checkInstanceKeys(ctx, h.Kernel, cfg.Home); err != nil {
		return nil, err
	}
	h.wasm, err = newWasmLoader(ctx, filepath.Join(cfg.Home, "wasm-cache"), logger.Named("wasm"))
	if err != nil {
		return nil, err
	}
	h.Supervisor = supervisor.New(h.Kernel, supervisor.Config{
		Executable: cfg.Executable, DataDir: cfg.Home, APIURL: apiURL, HealthInterval: cfg.HealthInterval,
		RestartMin: cfg.RestartMin, ExtensionGOMAXPROCS: cfg.ExtensionGOMAXPROCS, AgentUser: cfg.AgentUser, Logger: logger.Named("supervisor"),
		Metrics: h.metrics,
	}, hostsvc.Deps{}, &dbProvisioner{pool: h.Kernel.Pool, secret: h.Kernel.InstanceSecret(), instanceID: h.Kernel.InstanceID()}, h.wasm)
	h.Queue, err = queue.New(queue.Config{Pool: h.Kernel.Pool, Extensions: h.Supervisor, Logger: logger.Named("queue"), Metrics: h.metrics,
		Worked: h.Kernel.ReadCache.Invalidate})
	if err != nil {
		return nil, err
	}
	h.Supervisor.SetEnqueuer(h.Queue)
	h.Supervisor.SetPublisher(h.Supervisor.StreamTap(h.Queue))
	h.Queue.SetRunRecorder(h.Kernel)
	h.Kernel.SetEventPublisher(h.Queue)
	h.Kernel.SetExtensionDirectory(h.Supervisor)
	h.Kernel.SetPluginRuntime(h.Supervisor)
	h.Kernel.SetManagedReconciler(h.Supervisor)
	h.Kernel.OnCompanyCreated(h.Supervisor.ReconcileManagedInCompany)
	h.Kernel.SetRunDirectory(h.Supervisor)
	h.Kernel.SetMethodCaller(h.Supervisor)
	if err := h.Kernel.Routes.Add(h.Supervisor.AdapterRoutes()...); err != nil {
		return nil, fmt.Errorf("error mounting the adapter registry routes: %w", err)
	}
	if err := h.Kernel.Routes.Add(h.Supervisor.LLMRoutes()...); err != nil {
		return nil, fmt.Errorf("error mounting the llms documents: %w", err)
	}
	if err := h.Kernel.Routes.Add(h.backupRoutes()...); err != nil {
		return nil, fmt.Errorf("error mounting the backup routes: %w", err)
	}
	bundledRoot := cfg.BundledRoot
	if bundledRoot == "" {
		bundledRoot = packages.FindBundledRoot()
	}
	h.Catalog = packages.NewCatalog(bundledRoot)
	h.Kernel.SetBundledCatalog(h.Catalog)
	h.Packages, err = packages.New(packages.Options{
		Store: h.Kernel, DataDir: cfg.Home, NPMRegistry: cfg.NPMRegistry, NPMToken: cfg.NPMToken, CloudManaged: cfg.CloudManaged,
		BundledRoot: bundledRoot, Logger: logger.Named("packages"),
	})
	if err != nil {
		return nil, err
	}
	if err := h.setUpObservability(); err != nil {
		return nil, err
	}

	var sources []*supervisor.Source
	if !cfg.DisableBuiltins {
		builtins, err := builtinSources()
		if err != nil {
			return nil, err
		}
		sources = append(sources, builtins...)
	}
	found, failed, findErr := dirSources(cfg.ExtensionDirs)
	sources = append(sources, found...)
	var installer packages.Installer = h.Packages
	if cfg.Installer != nil {
		installer = cfg.Installer
	}
	installed, notMaterialised, err := installedSources(ctx, h.Kernel, installer, sources)
	if err != nil {
		return nil, err
	}
	sources = append(sources, installed...)
	h.ConnBudget = NewConnBudget(runtime.NumCPU(), countDatabaseExtensions(sources))
	h.Supervisor.SetExtensionPoolMaxConns(h.ConnBudget.Extension)
	logger.Info(h.ConnBudget.String())
	loadErr := h.Supervisor.Load(ctx, sources)
	if err := recordFailed(ctx, h.Kernel, sources, failed); err != nil {
		logger.Warn("error recording extensions that failed to load", "error", err)
	}
	if err := markMissing(ctx, h.Kernel, sources, failed, !cfg.DisableBuiltins); err != nil {
		logger.Warn("error recording extensions not found at start", "error", err)
	}
	for key, reason := range notMaterialised {
		if err := h.Kernel.ExtensionSetStatus(ctx, key, kernel.ExtensionError, reason); err != nil {
			logger.Warn("error recording an extension not loaded at start", "extension", key, "error", err)
		}
	}
	h.LoadErr = errors.Join(findErr, loadErr)
	if h.LoadErr != nil {
		logger.Warn("some extensions were not loaded", "error", h.LoadErr)
	}
	for _, src := range sources {
		if err := h.Queue.Schedule(src.Manifest); err != nil {
			logger.Warn("extension jobs not scheduled", "extension", src.Manifest.Key, "error", err)
		}
	}
	h.Supervisor.Run(2 * time.Second)
	h.manager = &extensionManager{k: h.Kernel, sup: h.Supervisor, inst: installer, queue: h.Queue, log: logger.Named("lifecycle")}
	h.Kernel.SetExtensionManager(h.manager)
	// Adapter installs and removals go through the same installer, one move at a time with
	// the plugin lifecycle and its reconcile loop.
	h.Supervisor.SetInstaller(installer, &h.manager.mu)
	reconcileCtx, stopReconcile := context.WithCancel(context.Background())
	h.stopReconcile = stopReconcile
	go h.manager.run(reconcileCtx, cfg.ReconcileInterval)
	// The read cache serves once it listens for other nodes' writes, on a connection of
	// its own beside the kernel's pool.
	if !cfg.DisableReadCache {
		go h.Kernel.ReadCache.Run(reconcileCtx, h.Kernel.Pool)
	}
	// River's start (leader election, producers) takes a noticeable slice of start-up and
	// nothing needs it before the API answers: jobs enqueued meanwhile wait in their table.
	// A queue that cannot start stops keel through Served.
	h.queueStarted = make(chan error, 1)
	go func() {
		err := h.Queue.Start(context.WithoutCancel(ctx))
		if err == nil {
			h.queueState.Store(queueStarted)
		} else {
			h.queueState.Store(queueFailed)
		}
		if err != nil {
			logger.Error("job queue failed to start", "error", err)
			select {
			case h.served <- err:
			default:
			}
		}
		h.queueStarted <- err
	}()

	h.app = h.Kernel.NewApp(0)
	board.Mount(board.Config{App: h.app, Secret: h.Kernel.InstanceSecret(), Mode: cfg.DeploymentMode,
		SecureCookies: strings.HasPrefix(cfg.PublicBaseURL, "https://")})
	// The server goroutine gets its own copies: Stop clears the fields.
	app, ln := h.app, h.ln
	go func() { h.served <- app.Listener(ln) }()
	logger.Info("keel is serving", "url", h.URL, "mode", cfg.DeploymentMode, "home", cfg.Home)
	return h, nil
}

// migrateQueue migrates the job queue's schema over a short-lived pool of its own.
func migrateQueue(ctx context.Context, dsn string) error {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return fmt.Errorf("error parsing the database URL to migrate the job queue: %w", err)
	}
	cfg.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("error connecting to migrate the job queue: %w", err)
	}
	defer pool.Close()
	return queue.Migrate(ctx, pool)
}

// Served returns a channel that yields the HTTP server's exit error.
func (h *Host) Served() <-chan error { return h.served }

// Config returns the normalized configuration.
func (h *Host) Config() Config { return h.cfg }

// Shutdown budget: the whole of Stop, and the part of it running jobs (heartbeat runs
// among them) get to finish before they are interrupted.
const (
	stopBudget = 15 * time.Second
	jobGrace   = 10 * time.Second
)

// Stop stops serving, shuts down extensions, the queue and the kernel, and the embedded
// PostgreSQL. It says what it waits for ("waiting for 3 runs, up to 10 s"); runs still
// executing after that are interrupted (recorded as such by the agents extension) and
// retried by the next start. Idempotent; safe after a failed Start.
func (h *Host) Stop(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, stopBudget)
	defer cancel()
	if h.app != nil {
		if h.Kernel != nil {
			h.Kernel.StopStreams()
		}
		_ = h.app.ShutdownWithTimeout(5 * time.Second)
		h.app = nil
	} else if h.ln != nil {
		_ = h.ln.Close()
	}
	h.ln = nil
	if h.stopReconcile != nil {
		h.stopReconcile()
		h.stopReconcile = nil
	}
	if h.manager != nil {
		// Wait for a move in progress, and keep new ones out.
		h.manager.mu.Lock()
		defer h.manager.mu.Unlock()
		h.manager = nil
	}
	if h.Queue != nil {
		if h.queueStarted != nil {
			select {
			case <-h.queueStarted:
			case <-ctx.Done():
			}
		}
		if h.Supervisor != nil {
			runs, calls := h.inFlight(ctx)
			h.log.Info(fmt.Sprintf("shutting down: waiting for %s and %s, up to %s", plural(runs, "run"), plural(calls, "extension call"), seconds(jobGrace)),
				"runs", runs, "extension_calls", calls)
		}
		interrupted, err := h.Queue.StopWithin(ctx, jobGrace, func() {
			h.log.Warn(fmt.Sprintf("jobs still running after %s: interrupting them", seconds(jobGrace)))
			if h.Supervisor != nil {
				h.Supervisor.Stop(ctx)
			}
		})
		if err != nil && !interrupted {
			h.log.Warn("error stopping job queue", "error", err)
		}
		h.Queue = nil
	}
	if h.Supervisor != nil {
		h.Supervisor.Stop(ctx)
		h.Supervisor = nil
	}
	if h.wasm != nil {
		h.wasm.Close(ctx)
		h.wasm = nil
	}
	if h.Kernel != nil {
		h.Kernel.Close()
		h.Kernel = nil
	}
	if h.PG != nil {
		if err := h.PG.Stop(); err != nil {
			h.log.Warn("error stopping postgres", "error", err)
		}
		h.PG = nil
	}
}
