package pgembed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// superuser is the cluster's superuser role, created by initdb.
const superuser = "keel"

// defaultPort is the port number used for the socket name when the server
// listens on its Unix socket only.
const defaultPort = 5432

const (
	defaultStartTimeout = 30 * time.Second
	stopTimeout         = 10 * time.Second
	readyPollInterval   = 20 * time.Millisecond
	maxLogSize          = 16 << 20
)

// serverSettings are passed to postgres with -c. They suit a small machine
// shared with keel itself. keel's pools stay far below max_connections (see
// host.ConnBudget); the memory of one backend is bounded by work_mem per sort or hash
// and temp_buffers, and JIT compilation, which loads LLVM into every backend that
// uses it, is off: keel's queries are short and indexed.
var serverSettings = []string{
	"shared_buffers=32MB",
	"max_connections=200",
	"fsync=on",
	"huge_pages=off",
	"work_mem=4MB",
	"temp_buffers=1MB",
	"jit=off",
	"maintenance_work_mem=32MB",
	"min_wal_size=32MB",
	"max_wal_size=256MB",
	"logging_collector=off",
	"log_destination=stderr",
	"cluster_name=keel",
}

// Config configures Start.
type Config struct {
	// DataDir is the cluster directory (PGDATA). It is created if missing.
	// When keel runs as root and the postgres user cannot reach DataDir,
	// the cluster lives under /var/lib/keel instead (see the package
	// documentation).
	DataDir string
	// BinDir is the directory holding initdb and postgres. When empty,
	// $SERVICE_PG_BIN_DIR is used, else the newest
	// /usr/lib/postgresql/*/bin, else the directory of postgres on $PATH.
	BinDir string
	// Port is the TCP port of the server. Zero means Unix socket only
	// (listen_addresses=''); a positive port also listens on
	// 127.0.0.1:Port.
	Port int
	// Logger receives keel's own messages about the cluster; it defaults to
	// a null logger. The server's output goes to
	// <cluster dir>/log/postgres.log, never to stdout.
	Logger hclog.Logger
	// StartTimeout bounds how long Start waits for the launched server to
	// accept connections. It defaults to 30s.
	StartTimeout time.Duration
}

// Cluster is a running embedded PostgreSQL server.
type Cluster struct {
	dataDir string
	sockDir string
	logPath string
	port    int
	log     hclog.Logger
	pid     int
	proc    *os.Process
	// password is the superuser's, kept in passwordFile.
	password     string
	passwordFile string

	done    chan struct{} // closed when the server process has exited
	waitErr error         // the server's exit status; valid once done is closed

	stopOnce sync.Once
	stopErr  error
}

// Start initializes the cluster directory if needed, launches postgres as a
// child process of keel and waits until the server accepts connections.
// Canceling ctx aborts the start and stops the server; once Start returns,
// the server runs until Stop is called or keel exits.
func Start(ctx context.Context, cfg Config) (_ *Cluster, err error) {
	began := time.Now()
	log := cfg.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	if cfg.DataDir == "" {
		return nil, errors.New("starting postgres: no data dir configured; set Config.DataDir")
	}
	if cfg.Port < 0 || cfg.Port > 65535 {
		return nil, fmt.Errorf("starting postgres: invalid port %d; use 0 for Unix socket only or a port from 1 to 65535", cfg.Port)
	}
	timeout := cfg.StartTimeout
	if timeout <= 0 {
		timeout = defaultStartTimeout
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("starting postgres: %w", err)
	}

	binDir, err := findBinDir(cfg.BinDir)
	if err != nil {
		return nil, err
	}
	u, err := lookupServerUser()
	if err != nil {
		return nil, err
	}
	reqDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("resolving data dir %s: %w", cfg.DataDir, err)
	}
	dataDir := reqDir
	if u.root() && !u.canTraverse(reqDir) {
		dataDir = filepath.Join(fallbackRoot, "pg-"+shortHash(reqDir))
		log.Warn("the postgres user cannot reach the requested data dir, so the cluster lives elsewhere and a backup of the data dir misses it: make every directory above the data dir traversable (chmod o+x) to keep it there",
			"requested_dir", reqDir, "cluster_dir", dataDir, "user", u.name)
		if err := mkdirAll(fallbackRoot, 0o755); err != nil {
			return nil, fmt.Errorf("creating %s for the cluster of %s: %w", fallbackRoot, reqDir, err)
		}
	}
	if err := prepareDataDir(dataDir, u, log.Info); err != nil {
		return nil, err
	}
	sockDir := filepath.Join(socketRoot, "keel-pg-"+shortHash(dataDir))
	if err := prepareSocketDir(sockDir, u); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(sockDir) // only if empty: a live server may use it
		}
	}()
	if err := clearStaleServer(dataDir, sockDir, log.Info); err != nil {
		return nil, err
	}
	port := defaultPort
	listen := ""
	if cfg.Port > 0 {
		if err := checkPort(cfg.Port); err != nil {
			return nil, err
		}
		port, listen = cfg.Port, "127.0.0.1"
	}

	pwPath := passwordPath(reqDir)
	password, havePassword, err := loadPassword(pwPath)
	if err != nil {
		return nil, err
	}
	trustsLocal := false
	if _, err := os.Stat(filepath.Join(dataDir, "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		t := time.Now()
		if !havePassword {
			if password, err = createPassword(pwPath); err != nil {
				return nil, err
			}
		}
		if err := runInitdb(binDir, dataDir, sockDir, u, password); err != nil {
			return nil, err
		}
		log.Info("initialized postgres cluster", "dir", dataDir, "took", time.Since(t))
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("starting postgres: %w", err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("inspecting data dir %s: %w", dataDir, err)
	} else {
		if trustsLocal, err = hbaTrustsLocal(dataDir); err != nil {
			return nil, err
		}
		switch {
		case !havePassword && !trustsLocal:
			return nil, fmt.Errorf("the embedded cluster in %s needs its superuser password file %s, which is missing; restore it, or remove the cluster to start afresh", dataDir, pwPath)
		case !havePassword:
			if password, err = createPassword(pwPath); err != nil {
				return nil, err
			}
		}
	}

	logPath := filepath.Join(dataDir, "log", "postgres.log")
	logFile, logOffset, err := openServerLog(logPath, u)
	if err != nil {
		return nil, err
	}
	args := []string{"-D", dataDir, "-k", sockDir, "-p", strconv.Itoa(port), "-c", "listen_addresses=" + listen}
	for _, s := range serverSettings {
		args = append(args, "-c", s)
	}
	cmd := exec.Command(filepath.Join(binDir, "postgres"), args...)
	cmd.Dir = dataDir
	cmd.Env = childEnv()
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = serverProcAttr(u.cred)

	c := &Cluster{
		dataDir: dataDir,
		sockDir: sockDir,
		logPath: logPath,
		port:    port,
		log:     log,
		done:    make(chan struct{}),

		password:     password,
		passwordFile: pwPath,
	}
	started := make(chan error, 1)
	go func() {
		// The parent-death signal fires when the thread that forked the
		// server exits, not when keel exits. Keep this goroutine, and with
		// it the thread, alive until the server has exited; the thread is
		// never unlocked, so Go discards it afterwards.
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		c.waitErr = cmd.Wait()
		close(c.done)
	}()
	err = <-started
	logFile.Close() // the server holds its own copy
	if err != nil {
		return nil, fmt.Errorf("launching %s: %w", cmd.Path, err)
	}
	c.proc = cmd.Process
	c.pid = cmd.Process.Pid

	if err := c.waitReady(ctx, timeout, logOffset); err != nil {
		_ = c.Stop()
		return nil, err
	}
	if trustsLocal {
		if err := c.requireLocalPassword(ctx); err != nil {
			_ = c.Stop()
			return nil, err
		}
	}
	log.Info("postgres started", "pid", c.pid, "dir", dataDir, "socket_dir", sockDir,
		"port", port, "tcp", listen != "", "took", time.Since(began))
	return c, nil
}

// waitReady polls the server with pgx connections until one succeeds, the
// server exits, ctx is done or timeout passes. Connection attempts are made
// every 20ms, and right away once postmaster.pid says "ready"; while it says
// "starting" they are skipped, since each one costs the starting server a
// backend fork.
func (c *Cluster) waitReady(ctx context.Context, timeout time.Duration, logOffset int64) error {
	connCfg, err := pgconn.ParseConfig(c.DSN("postgres"))
	if err != nil {
		return fmt.Errorf("parsing readiness DSN: %w", err)
	}
	deadline := time.Now().Add(timeout)
	ticker := time.NewTicker(readyPollInterval / 4)
	defer ticker.Stop()
	var lastAttempt time.Time
	sawReady := false
	lastErr := errors.New("no connection attempted yet")
	for {
		status := c.pidFileStatus()
		justReady := status == "ready" && !sawReady
		sawReady = sawReady || status == "ready"
		if justReady || (status != "starting" && time.Since(lastAttempt) >= readyPollInterval) {
			lastAttempt = time.Now()
			attemptCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
			conn, err := pgconn.ConnectConfig(attemptCtx, connCfg)
			cancel()
			if err == nil {
				return conn.Close(ctx)
			}
			lastErr = err
		}
		select {
		case <-c.done:
			return fmt.Errorf("postgres exited during startup (%v); server log %s: %s",
				c.waitErr, c.logPath, c.logTail(logOffset))
		case <-ctx.Done():
			return fmt.Errorf("waiting for postgres to start: %w", ctx.Err())
		case <-ticker.C:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres did not accept connections within %s (last error: %v); server log %s: %s",
				timeout, lastErr, c.logPath, c.logTail(logOffset))
		}
	}
}

// pidFileStatus returns the status line of postmaster.pid ("starting",
// "ready", ...), or "" when it is not there yet.
func (c *Cluster) pidFileStatus() string {
	b, err := os.ReadFile(filepath.Join(c.dataDir, "postmaster.pid"))
	if err != nil {
		return ""
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 8 {
		return ""
	}
	return strings.TrimSpace(lines[7])
}

// logTail returns the last lines the server logged after offset, as one line.
func (c *Cluster) logTail(offset int64) string {
	f, err := os.Open(c.logPath)
	if err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size()-offset > 8192 {
		offset = fi.Size() - 8192
	}
	b, _ := io.ReadAll(io.NewSectionReader(f, offset, 8192))
	return tail(logLinePrefix.ReplaceAll(b, nil), 6)
}

// logLinePrefix matches the timestamp and PID that start the server's log
// lines with the default log_line_prefix.
var logLinePrefix = regexp.MustCompile(`(?m)^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)? \S+ \[\d+\] `)

// SocketDir returns the directory holding the server's Unix socket.
func (c *Cluster) SocketDir() string { return c.sockDir }

// PID returns the process ID of the postmaster.
func (c *Cluster) PID() int { return c.pid }

// DSN returns a keyword/value connection string for pgx that connects to
// database as the superuser keel over the Unix socket, with its password.
func (c *Cluster) DSN(database string) string {
	return c.DSNAs(database, superuser, c.password)
}

// PasswordFile returns the path of the file holding the superuser's password.
func (c *Cluster) PasswordFile() string { return c.passwordFile }

// DSNAs returns a keyword/value connection string for pgx that connects to
// database as user over the Unix socket; an empty password is left out.
func (c *Cluster) DSNAs(database, user, password string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "host=%s port=%d user=%s dbname=%s", dsnValue(c.sockDir), c.port, dsnValue(user), dsnValue(database))
	if password != "" {
		fmt.Fprintf(&b, " password=%s", dsnValue(password))
	}
	b.WriteString(" sslmode=disable")
	return b.String()
}

// dsnValue quotes s for a keyword/value connection string when needed.
func dsnValue(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\r\n'\\") {
		return s
	}
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// EnsureDatabase creates the database name unless it already exists. It
// connects to the "postgres" database as the superuser.
func (c *Cluster) EnsureDatabase(ctx context.Context, name string) error {
	if name == "" {
		return errors.New("ensuring database: empty database name")
	}
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		return fmt.Errorf("ensuring database %q: connecting: %w", name, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return fmt.Errorf("ensuring database %q: checking whether it exists: %w", name, err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42P04" { // duplicate_database: created concurrently
			return nil
		}
		return fmt.Errorf("ensuring database %q: creating it: %w", name, err)
	}
	c.log.Info("created database", "name", name)
	return nil
}

// Stop shuts the server down with a fast shutdown (SIGINT), waits up to 10s
// and then kills it. It is safe to call more than once; later calls return
// the first call's result.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() { c.stopErr = c.stop() })
	return c.stopErr
}

func (c *Cluster) stop() error {
	// The server removes its socket files on exit; drop the then empty
	// socket dir too so that /tmp does not collect them.
	defer os.Remove(c.sockDir)
	select {
	case <-c.done:
		if c.waitErr != nil {
			return fmt.Errorf("stopping postgres: server (pid %d) had already exited: %w; server log %s", c.pid, c.waitErr, c.logPath)
		}
		return nil
	default:
	}
	if err := c.proc.Signal(os.Interrupt); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stopping postgres (pid %d): %w", c.pid, err)
	}
	timer := time.NewTimer(stopTimeout)
	defer timer.Stop()
	select {
	case <-c.done:
		if c.waitErr != nil {
			return fmt.Errorf("stopping postgres (pid %d): %w; server log %s", c.pid, c.waitErr, c.logPath)
		}
		c.log.Info("postgres stopped", "pid", c.pid)
		return nil
	case <-timer.C:
		_ = c.proc.Kill()
		<-c.done
		return fmt.Errorf("stopping postgres: server (pid %d) did not shut down within %s and was killed", c.pid, stopTimeout)
	}
}

// runInitdb creates the cluster in dataDir.
func runInitdb(binDir, dataDir, pwDir string, u serverUser, password string) error {
	pwfile, removePwfile, err := writeInitdbPwfile(pwDir, u, password)
	if err != nil {
		return err
	}
	defer removePwfile()
	cmd := exec.Command(filepath.Join(binDir, "initdb"),
		"-D", dataDir, "-U", superuser, "--pwfile="+pwfile, "--auth-local=scram-sha-256", "--auth-host=scram-sha-256",
		"-E", "UTF8", "--no-locale", "-N")
	cmd.Dir = dataDir
	cmd.Env = childEnv()
	cmd.SysProcAttr = toolProcAttr(u.cred)
	out, err := cmd.CombinedOutput()
	if err != nil {
		// initdb prefixes its errors and hints with "initdb:"; the rest is
		// its progress chatter.
		var msgs []byte
		for _, line := range bytes.SplitAfter(out, []byte("\n")) {
			if bytes.HasPrefix(line, []byte("initdb:")) {
				msgs = append(msgs, line...)
			}
		}
		if len(msgs) == 0 {
			msgs = out
		}
		return fmt.Errorf("initdb failed for data dir %s (%v): %s", dataDir, err, tail(msgs, 8))
	}
	return nil
}

// openServerLog opens the server log for appending, rotating it once when it
// has grown too large, and returns it with its current size.
func openServerLog(path string, u serverUser) (*os.File, int64, error) {
	dir := filepath.Dir(path)
	if err := os.Mkdir(dir, 0o700); err != nil && !os.IsExist(err) {
		return nil, 0, fmt.Errorf("creating server log dir %s: %w", dir, err)
	}
	if fi, err := os.Stat(path); err == nil && fi.Size() > maxLogSize {
		_ = os.Rename(path, path+".1")
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, 0, fmt.Errorf("opening server log %s: %w", path, err)
	}
	if u.root() {
		_ = os.Chown(dir, u.uid, u.gid)
		_ = f.Chown(u.uid, u.gid)
	}
	off, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("opening server log %s: %w", path, err)
	}
	return f, off, nil
}

// childEnv is keel's environment without the libpq/PG* variables, which
// would otherwise change how initdb and postgres behave.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") {
			env = append(env, kv)
		}
	}
	return env
}
