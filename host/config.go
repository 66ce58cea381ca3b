package host

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/keelhq/keel/host/packages"
)

// Config is keel's configuration, read from flags and SERVICE_* environment variables.
type Config struct {
	// Home is the data directory (SERVICE_HOME, default ~/.keel).
	Home string
	// Host and Port are where the API listens (SERVICE_HOST 127.0.0.1, SERVICE_PORT 3100).
	// Port 0 picks a free port.
	Host string
	Port int
	// DatabaseURL switches from the embedded cluster to an external server (DATABASE_URL).
	DatabaseURL string
	// PGPort makes the embedded cluster also listen on 127.0.0.1:PGPort (SERVICE_PG_PORT;
	// default 0, Unix socket only).
	PGPort int
	// DeploymentMode is local_trusted (default) or authenticated (SERVICE_DEPLOYMENT_MODE).
	DeploymentMode string
	// DeploymentExposure is private (default) or public (SERVICE_DEPLOYMENT_EXPOSURE).
	DeploymentExposure string
	// PublicBaseURL is the externally visible base URL (SERVICE_PUBLIC_BASE_URL).
	PublicBaseURL string
	// AgentJWTSecret signs local agent JWTs (SERVICE_AGENT_JWT_SECRET; generated when empty).
	AgentJWTSecret string
	// AgentJWTTTL is the agent JWT lifetime (SERVICE_AGENT_JWT_TTL_SECONDS, default 3600).
	AgentJWTTTL time.Duration
	// ExtensionDirs are extra extension directories (SERVICE_EXTENSIONS_PATH, colon-separated):
	// a directory holding manifest.json, or a directory of such directories.
	ExtensionDirs []string
	// EnableCompanyDeletion allows deleting companies (SERVICE_ENABLE_COMPANY_DELETION).
	EnableCompanyDeletion bool
	// AttachmentMaxBytes is the attachment size limit (SERVICE_ATTACHMENT_MAX_BYTES, 10 MiB).
	AttachmentMaxBytes int64
	// MaxBodyBytes limits a request body other than a multipart upload, counted after
	// decompression (SERVICE_MAX_BODY_BYTES, default 2 MiB).
	MaxBodyBytes int
	// LogLevel is trace, debug, info, warn or error (SERVICE_LOG_LEVEL, default info).
	LogLevel string
	// LogFormat is text (default) or json, one JSON object per line (SERVICE_LOG_FORMAT).
	LogFormat string
	// Executable runs first-party extensions; defaults to this executable.
	Executable string
	// HealthInterval is how often extensions are pinged (SERVICE_EXTENSION_HEALTH_INTERVAL, 5s).
	HealthInterval time.Duration
	// RestartMin is the first restart backoff of a crashed extension (250ms).
	RestartMin time.Duration
	// DisableReadCache makes every cacheable extension read go to its extension
	// (SERVICE_READ_CACHE=false); benchmarks of the reads' queries set it.
	DisableReadCache bool
	// ExtensionGOMAXPROCS is the GOMAXPROCS of process extensions (SERVICE_EXTENSION_GOMAXPROCS,
	// default 1; 0 in the environment, or a negative value here, leaves Go's default).
	ExtensionGOMAXPROCS int
	// AgentUser is the OS user agent processes run as when keel runs as root
	// (SERVICE_AGENT_USER, default keel-agent, created if missing); "-" runs them as keel's
	// own user.
	AgentUser string
	// DisableBuiltins skips first-party extensions (tests that load only their own).
	DisableBuiltins bool
	// Installer installs and materialises extension packages (POST /api/plugins/install);
	// nil uses the package manager (host/packages): content-addressed in the database and
	// materialised under Home/packages, so nodes of one instance share packages
	// through it.
	Installer packages.Installer
	// ReconcileInterval is how often this node checks the registry for extension moves made
	// on another node, as the fallback of the registry's notices, which it follows at once
	// (default 10s).
	ReconcileInterval time.Duration
	// NPMRegistry is the npm registry packages install from (SERVICE_NPM_REGISTRY, default
	// https://registry.npmjs.org).
	NPMRegistry string
	// NPMToken (SERVICE_NPM_TOKEN) authenticates to a private NPMRegistry: it is sent as a
	// bearer token to that registry's host only and never logged.
	NPMToken string `json:"-"`
	// CloudManaged applies spec install rule 3 (SERVICE_MANAGED_CONFIG set, as the reference
	// product decides it): npm installs are refused and local paths must lie in the bundled
	// catalog.
	CloudManaged bool
	// BundledRoot holds the packages that ship with keel in its examples/ and plugins/
	// folders (SERVICE_BUNDLED_PLUGIN_ROOT; default: the nearest such directory above the
	// executable, else above the working directory).
	BundledRoot string
	// BackupDir is where instance backups go (SERVICE_BACKUP_DIR, default Home/backups).
	BackupDir string
	// BackupKeepLast keeps this many newest backups (SERVICE_BACKUP_KEEP, default 7;
	// negative keeps all).
	BackupKeepLast int
	// BackupMaxAgeDays removes backups older than this many days
	// (SERVICE_BACKUP_MAX_AGE_DAYS, default 30; negative keeps them whatever their age).
	BackupMaxAgeDays int
}

// ConfigFromEnv reads the SERVICE_* environment over the defaults.
func ConfigFromEnv() (Config, error) {
	c := Config{Host: "127.0.0.1", Port: 3100, DeploymentMode: "local_trusted", DeploymentExposure: "private", LogLevel: "info"}
	var errs []error
	str := func(name string, dst *string) {
		if v, ok := os.LookupEnv(name); ok && v != "" {
			*dst = v
		}
	}
	num := func(name string, dst *int) {
		if v, ok := os.LookupEnv(name); ok && v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s=%q is not a number", name, v))
				return
			}
			*dst = n
		}
	}
	str("SERVICE_HOME", &c.Home)
	str("SERVICE_HOST", &c.Host)
	num("SERVICE_PORT", &c.Port)
	str("DATABASE_URL", &c.DatabaseURL)
	num("SERVICE_PG_PORT", &c.PGPort)
	str("SERVICE_DEPLOYMENT_MODE", &c.DeploymentMode)
	str("SERVICE_DEPLOYMENT_EXPOSURE", &c.DeploymentExposure)
	str("SERVICE_PUBLIC_BASE_URL", &c.PublicBaseURL)
	str("SERVICE_AGENT_JWT_SECRET", &c.AgentJWTSecret)
	str("SERVICE_LOG_LEVEL", &c.LogLevel)
	str("SERVICE_LOG_FORMAT", &c.LogFormat)
	if c.LogFormat != "" && c.LogFormat != "text" && c.LogFormat != "json" {
		errs = append(errs, fmt.Errorf("SERVICE_LOG_FORMAT=%q is not text or json", c.LogFormat))
	}
	var ttl int
	num("SERVICE_AGENT_JWT_TTL_SECONDS", &ttl)
	c.AgentJWTTTL = time.Duration(ttl) * time.Second
	var maxBytes int
	num("SERVICE_ATTACHMENT_MAX_BYTES", &maxBytes)
	c.AttachmentMaxBytes = int64(maxBytes)
	num("SERVICE_MAX_BODY_BYTES", &c.MaxBodyBytes)
	if v := os.Getenv("SERVICE_EXTENSIONS_PATH"); v != "" {
		for _, p := range strings.Split(v, string(os.PathListSeparator)) {
			if p != "" {
				c.ExtensionDirs = append(c.ExtensionDirs, p)
			}
		}
	}
	str("SERVICE_NPM_REGISTRY", &c.NPMRegistry)
	str("SERVICE_NPM_TOKEN", &c.NPMToken)
	str("SERVICE_BUNDLED_PLUGIN_ROOT", &c.BundledRoot)
	str("SERVICE_BACKUP_DIR", &c.BackupDir)
	num("SERVICE_BACKUP_KEEP", &c.BackupKeepLast)
	num("SERVICE_BACKUP_MAX_AGE_DAYS", &c.BackupMaxAgeDays)
	c.CloudManaged = os.Getenv("SERVICE_MANAGED_CONFIG") != ""
	if v := os.Getenv("SERVICE_AGENT_USER"); v != "" {
		c.AgentUser = v
	}
	if v := os.Getenv("SERVICE_ENABLE_COMPANY_DELETION"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("SERVICE_ENABLE_COMPANY_DELETION=%q is not a boolean", v))
		}
		c.EnableCompanyDeletion = b
	}
	if v := os.Getenv("SERVICE_READ_CACHE"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("SERVICE_READ_CACHE=%q is not a boolean", v))
		}
		c.DisableReadCache = err == nil && !b
	}
	if v := os.Getenv("SERVICE_EXTENSION_GOMAXPROCS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("SERVICE_EXTENSION_GOMAXPROCS=%q is not a non-negative integer", v))
		}
		c.ExtensionGOMAXPROCS = n
		if n == 0 {
			c.ExtensionGOMAXPROCS = -1
		}
	}
	if v := os.Getenv("SERVICE_EXTENSION_HEALTH_INTERVAL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("SERVICE_EXTENSION_HEALTH_INTERVAL=%q is not a duration", v))
		}
		c.HealthInterval = d
	}
	return c, errors.Join(errs...)
}

// normalize fills defaults and checks the combination.
func (c *Config) normalize() error {
	home, err := HomeDir(c.Home)
	if err != nil {
		return err
	}
	c.Home = home
	if c.Host == "" {
		c.Host = "127.0.0.1"
	}
	if c.ExtensionGOMAXPROCS == 0 {
		c.ExtensionGOMAXPROCS = 1
	}
	if c.ReconcileInterval <= 0 {
		c.ReconcileInterval = 10 * time.Second
	}
	if c.LogFormat != "" && c.LogFormat != "text" && c.LogFormat != "json" {
		return fmt.Errorf("SERVICE_LOG_FORMAT %q is not text or json", c.LogFormat)
	}
	if c.Port < 0 || c.Port > 65535 {
		return fmt.Errorf("SERVICE_PORT %d is out of range: use 1 to 65535, or 0 for a free port", c.Port)
	}
	if c.PGPort < 0 || c.PGPort > 65535 {
		return fmt.Errorf("SERVICE_PG_PORT %d is out of range: use 1 to 65535, or leave it unset for the Unix socket only", c.PGPort)
	}
	if c.DatabaseURL != "" {
		if err := checkDatabaseURL(c.DatabaseURL); err != nil {
			return err
		}
	}
	if c.DeploymentMode == "" {
		c.DeploymentMode = "local_trusted"
	}
	if c.DeploymentMode != "local_trusted" && c.DeploymentMode != "authenticated" {
		return fmt.Errorf("SERVICE_DEPLOYMENT_MODE %q is not a deployment mode: use local_trusted or authenticated", c.DeploymentMode)
	}
	if c.DeploymentExposure == "" {
		c.DeploymentExposure = "private"
	}
	if c.DeploymentExposure != "private" && c.DeploymentExposure != "public" {
		return fmt.Errorf("SERVICE_DEPLOYMENT_EXPOSURE %q is not an exposure: use private or public", c.DeploymentExposure)
	}
	if c.DeploymentMode == "local_trusted" {
		ip := net.ParseIP(c.Host)
		if c.Host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return fmt.Errorf("local_trusted mode binds loopback only, not %s: set SERVICE_HOST=127.0.0.1 or SERVICE_DEPLOYMENT_MODE=authenticated", c.Host)
		}
	}
	if c.NPMRegistry != "" {
		if u, err := url.Parse(c.NPMRegistry); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("SERVICE_NPM_REGISTRY %q is not an http(s) URL", c.NPMRegistry)
		}
	}
	if c.BackupDir == "" {
		c.BackupDir = filepath.Join(c.Home, "backups")
	} else if c.BackupDir, err = filepath.Abs(c.BackupDir); err != nil {
		return fmt.Errorf("error resolving SERVICE_BACKUP_DIR: %w", err)
	}
	if c.Executable == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("error finding the keel executable: %w", err)
		}
		c.Executable = exe
	}
	return nil
}

// checkDatabaseURL checks DATABASE_URL's form without echoing it: the URL carries a
// password.
func checkDatabaseURL(raw string) error {
	if strings.Contains(raw, "://") {
		u, err := url.Parse(raw)
		if err != nil {
			return errors.New("DATABASE_URL is not a valid URL: use postgres://user:password@host:5432/database")
		}
		if u.Scheme != "postgres" && u.Scheme != "postgresql" {
			return fmt.Errorf("DATABASE_URL has the unsupported scheme %q: keel needs PostgreSQL, postgres://user:password@host:5432/database", u.Scheme)
		}
		return nil
	}
	if _, err := pgconn.ParseConfig(raw); err != nil {
		return errors.New("DATABASE_URL is neither a postgres:// URL nor a key=value connection string: use postgres://user:password@host:5432/database")
	}
	return nil
}

// pingDatabase connects once to DATABASE_URL and reports a failure in one line that names
// the server and user but never the password.
func pingDatabase(ctx context.Context, dsn string) error {
	cc, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return errors.New("DATABASE_URL is not a valid connection string: use postgres://user:password@host:5432/database")
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	conn, err := pgconn.ConnectConfig(ctx, cc)
	if err != nil {
		reason := err.Error()
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) {
			reason = pgErr.Message
		} else if inner := errors.Unwrap(err); inner != nil {
			reason = inner.Error()
		}
		// Fallback attempts (such as IPv6 then IPv4) each add a line: the first names the cause.
		reason, _, _ = strings.Cut(reason, "\n")
		if cc.Password != "" {
			reason = strings.ReplaceAll(reason, cc.Password, "****")
		}
		return fmt.Errorf("cannot reach the database at %s as %s (DATABASE_URL): %s: check that the server runs and the URL's host, port, user, password and database", net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port)))+"/"+cc.Database, cc.User, reason)
	}
	return conn.Close(ctx)
}

// letPostgresTraverse lets the postgres user reach SERVICE_HOME/db when keel runs as root:
// it adds only the traverse bits to home (0700 becomes 0711: no listing, no reading), so
// the whole instance stays under SERVICE_HOME. db/ itself is handed to postgres, 0700.
func letPostgresTraverse(home string) error {
	fi, err := os.Stat(home)
	if err != nil {
		return fmt.Errorf("error inspecting data dir %s: %w", home, err)
	}
	if perm := fi.Mode().Perm(); perm&0o011 != 0o011 {
		if err := os.Chmod(home, perm|0o011); err != nil {
			return fmt.Errorf("error letting the postgres user traverse data dir %s: %w", home, err)
		}
	}
	return nil
}

// HomeDir resolves SERVICE_HOME: home made absolute, or ~/.keel when empty.
func HomeDir(home string) (string, error) {
	if home == "" {
		user, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("error finding the home directory (set SERVICE_HOME): %w", err)
		}
		home = filepath.Join(user, ".keel")
	}
	abs, err := filepath.Abs(home)
	if err != nil {
		return "", fmt.Errorf("error resolving SERVICE_HOME %s: %w", home, err)
	}
	return abs, nil
}
