package pgembed_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/host/pgembed"
	"github.com/keelhq/keel/host/pgembed/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// newDataDir returns a not yet existing data dir path under a fresh temp
// dir that the postgres user can traverse when the tests run as root
// (t.TempDir is mode 0700).
func newDataDir(t *testing.T) string {
	t.Helper()
	root, err := os.MkdirTemp("/tmp", "pgembed-test-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(root, 0o755))
	t.Cleanup(func() { os.RemoveAll(root) })
	return filepath.Join(root, "data")
}

// start starts a cluster and stops it when the test ends.
func start(t *testing.T, cfg pgembed.Config) *pgembed.Cluster {
	t.Helper()
	c, err := pgembed.Start(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Stop() })
	return c
}

// startOnFreePort starts a cluster on a free TCP port of 127.0.0.1, stops it when the test
// ends, and returns it with the port.
// Another test may take a port between choosing it and binding it; a few fresh tries make
// that race harmless.
func startOnFreePort(t *testing.T, dir string) (*pgembed.Cluster, int) {
	t.Helper()
	for try := 0; ; try++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		port := ln.Addr().(*net.TCPAddr).Port
		require.NoError(t, ln.Close())
		c, err := pgembed.Start(context.Background(), pgembed.Config{DataDir: dir, Port: port})
		if err != nil && try < 4 && strings.Contains(err.Error(), "is already in use") {
			continue
		}
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Stop() })
		return c, port
	}
}

func queryInt(t *testing.T, dsn, sql string) int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var n int
	require.NoError(t, conn.QueryRow(ctx, sql).Scan(&n))
	return n
}

func execSQL(t *testing.T, dsn string, sqls ...string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	for _, sql := range sqls {
		_, err := conn.Exec(ctx, sql)
		require.NoError(t, err, sql)
	}
}

// processGone reports whether pid no longer runs (a zombie counts as gone).
func processGone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// The state follows the parenthesized command name.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] == 'Z' || s[i+2] == 'X'
	}
	return false
}

// TestLifecycle walks one data dir through a cold start, a refused second
// server, Stop, a warm restart with TCP enabled and recoveries from stale
// postmaster.pid files. It is one test so that it pays for initdb once.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	dir := newDataDir(t)

	began := time.Now()
	c := start(t, pgembed.Config{DataDir: dir})
	t.Logf("cold start: %s", time.Since(began))

	require.True(t, strings.HasPrefix(c.SocketDir(), "/tmp/keel-pg-"), c.SocketDir())
	fi, err := os.Stat(c.SocketDir())
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	require.Equal(t, 1, queryInt(t, c.DSN("postgres"), "SELECT 1"))
	execSQL(t, c.DSN("postgres"),
		"CREATE TABLE kept (v int)",
		"INSERT INTO kept VALUES (42)")

	// A second server on the same data dir is refused.
	_, err = pgembed.Start(context.Background(), pgembed.Config{DataDir: dir})
	require.ErrorIs(t, err, pgembed.ErrAlreadyRunning)
	require.EqualError(t, err, fmt.Sprintf(
		"postgres already running on data dir %s (pid %d); stop that server first or choose another data dir", dir, c.PID()))

	pid := c.PID()
	require.NoError(t, c.Stop())
	require.NoError(t, c.Stop(), "Stop must be idempotent")
	require.True(t, processGone(pid), "postgres pid %d still runs after Stop", pid)

	// Warm restart, this time also listening on TCP.
	began = time.Now()
	c2, port := startOnFreePort(t, dir)
	t.Logf("warm start: %s", time.Since(began))
	require.NotEqual(t, pid, c2.PID())
	require.Contains(t, c2.DSN("postgres"), fmt.Sprintf("port=%d", port))
	require.Equal(t, 42, queryInt(t, c2.DSN("postgres"), "SELECT v FROM kept"), "data must survive a restart")
	tcpDSN := fmt.Sprintf("host=127.0.0.1 port=%d user=keel dbname=postgres sslmode=disable", port)
	// Over TCP every role needs a password; the superuser has none, so it cannot log in there.
	_, tcpErr := pgx.Connect(context.Background(), tcpDSN)
	require.ErrorContains(t, tcpErr, "password authentication failed")
	require.NoError(t, c2.Stop())

	// Stale postmaster.pid files. A PID that certainly is dead: a process
	// we started and reaped.
	dead := exec.Command("true")
	require.NoError(t, dead.Run())
	tests := []struct {
		name string
		pid  int
	}{
		{"dead pid", dead.Process.Pid},
		{"live pid of a non-postgres process", os.Getpid()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pidFile := fmt.Sprintf("%d\n%s\n1700000000\n5432\n%s\n\n  5432001         0\nready   \n",
				tt.pid, dir, c.SocketDir())
			require.NoError(t, os.WriteFile(filepath.Join(dir, "postmaster.pid"), []byte(pidFile), 0o600))
			// A socket lock file naming a live process makes postgres
			// refuse to start unless it is cleared too.
			require.NoError(t, os.MkdirAll(c.SocketDir(), 0o700))
			require.NoError(t, os.WriteFile(filepath.Join(c.SocketDir(), ".s.PGSQL.5432.lock"), []byte(pidFile), 0o600))

			c3 := start(t, pgembed.Config{DataDir: dir})
			require.Equal(t, 42, queryInt(t, c3.DSN("postgres"), "SELECT v FROM kept"))
			require.NoError(t, c3.Stop())
		})
	}

	// A server that dies during startup is reported with its log.
	t.Run("server exits during startup", func(t *testing.T) {
		conf := filepath.Join(dir, "postgresql.conf")
		orig, err := os.ReadFile(conf)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(conf, append(orig, "shared_buffers = 'lots'\n"...), 0o600))
		t.Cleanup(func() { require.NoError(t, os.WriteFile(conf, orig, 0o600)) })

		_, err = pgembed.Start(context.Background(), pgembed.Config{DataDir: dir})
		require.Error(t, err)
		require.Contains(t, err.Error(), "postgres exited during startup")
		require.Contains(t, err.Error(), `invalid value for parameter "shared_buffers"`)
		require.NotContains(t, err.Error(), "\n")
	})
}

func TestEnsureDatabase(t *testing.T) {
	t.Parallel()
	c := pgtest.Cluster(t)
	ctx := context.Background()
	for _, name := range []string{"ensure_plain", "Ensure Mixed Case", `ensure "quoted" ' name`} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			require.NoError(t, c.EnsureDatabase(ctx, name))
			require.NoError(t, c.EnsureDatabase(ctx, name), "second call must be a no-op")
			require.Equal(t, 1, queryInt(t, c.DSN(name), "SELECT 1"))
			require.Equal(t, 1, queryInt(t, c.DSN("postgres"),
				"SELECT count(*) FROM pg_database WHERE datname = '"+strings.ReplaceAll(name, "'", "''")+"'"))
		})
	}
	require.Error(t, c.EnsureDatabase(ctx, ""))
}

func TestDSNAs(t *testing.T) {
	t.Parallel()
	c := pgtest.Cluster(t)
	execSQL(t, c.DSN("postgres"),
		`DO $$ BEGIN
			IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'app user') THEN
				CREATE ROLE "app user" LOGIN PASSWORD 'pa ss''word';
			END IF;
		END $$`)
	dsn := c.DSNAs("postgres", "app user", "pa ss'word")
	require.Contains(t, dsn, `user='app user'`)
	require.Contains(t, dsn, `password='pa ss\'word'`)
	require.Equal(t, 1, queryInt(t, dsn, "SELECT 1"))
	require.NotContains(t, c.DSNAs("postgres", "keel", ""), "password")
}

func TestStartErrors(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	busyPort := ln.Addr().(*net.TCPAddr).Port

	tests := []struct {
		name     string
		cfg      func(t *testing.T) pgembed.Config
		is       error
		messages []string
	}{
		{
			name:     "port in use",
			cfg:      func(t *testing.T) pgembed.Config { return pgembed.Config{DataDir: newDataDir(t), Port: busyPort} },
			is:       pgembed.ErrPortInUse,
			messages: []string{fmt.Sprintf("port %d is already in use; ", busyPort)},
		},
		{
			name:     "binaries missing",
			cfg:      func(t *testing.T) pgembed.Config { return pgembed.Config{DataDir: newDataDir(t), BinDir: t.TempDir()} },
			is:       pgembed.ErrBinariesNotFound,
			messages: []string{"postgresql server binaries not found (looked in "},
		},
		{
			name: "initdb failure",
			cfg: func(t *testing.T) pgembed.Config {
				// Not empty, yet no cluster: initdb refuses to touch it.
				dir := newDataDir(t)
				require.NoError(t, os.Mkdir(dir, 0o700))
				require.NoError(t, os.WriteFile(filepath.Join(dir, "stray"), nil, 0o600))
				if os.Geteuid() == 0 {
					pg, err := user.Lookup("postgres")
					require.NoError(t, err)
					uid, _ := strconv.Atoi(pg.Uid)
					gid, _ := strconv.Atoi(pg.Gid)
					require.NoError(t, os.Chown(dir, uid, gid))
				}
				return pgembed.Config{DataDir: dir}
			},
			messages: []string{"initdb failed for data dir ", "exists but is not empty"},
		},
		{
			name:     "invalid port",
			cfg:      func(t *testing.T) pgembed.Config { return pgembed.Config{DataDir: newDataDir(t), Port: 70000} },
			messages: []string{"invalid port 70000"},
		},
		{
			name:     "no data dir",
			cfg:      func(t *testing.T) pgembed.Config { return pgembed.Config{} },
			messages: []string{"set Config.DataDir"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := tt.cfg(t)
			c, err := pgembed.Start(context.Background(), cfg)
			if c != nil {
				c.Stop()
			}
			require.Error(t, err)
			if tt.is != nil {
				require.ErrorIs(t, err, tt.is)
			}
			for _, m := range tt.messages {
				require.Contains(t, err.Error(), m)
			}
			require.NotContains(t, err.Error(), "\n", "errors shown to users must be one line")
			if cfg.DataDir != "" {
				_, statErr := os.Stat(filepath.Join(cfg.DataDir, "PG_VERSION"))
				require.ErrorIs(t, statErr, os.ErrNotExist, "no cluster may be created on a failed start")
			}
		})
	}
}

func TestBinariesMissingViaEnv(t *testing.T) {
	t.Setenv("SERVICE_PG_BIN_DIR", t.TempDir())
	_, err := pgembed.Start(context.Background(), pgembed.Config{DataDir: newDataDir(t)})
	require.ErrorIs(t, err, pgembed.ErrBinariesNotFound)
	require.Contains(t, err.Error(), "install Debian's postgresql-15 package or set SERVICE_PG_BIN_DIR")
}

func TestDataDirOwnedByOtherUser(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a data dir owned by another user than the server user")
	}
	dir := newDataDir(t)
	require.NoError(t, os.Mkdir(dir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "something"), nil, 0o600))
	_, err := pgembed.Start(context.Background(), pgembed.Config{DataDir: dir})
	require.ErrorIs(t, err, pgembed.ErrDataDirOwner)
	require.Contains(t, err.Error(), fmt.Sprintf("data dir %s is owned by uid 0, not by postgres", dir))
}

func TestRootFallbackDataDir(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("the fallback only applies when running as root")
	}
	private := t.TempDir() // mode 0700: the postgres user cannot traverse it
	requested := filepath.Join(private, "data")
	sum := sha256.Sum256([]byte(requested))
	fallback := "/var/lib/keel/pg-" + hex.EncodeToString(sum[:])[:12]
	require.NoError(t, os.RemoveAll(fallback))
	t.Cleanup(func() {
		os.RemoveAll(fallback)
		os.Remove(filepath.Dir(fallback)) // only if we left it empty
	})

	c := start(t, pgembed.Config{DataDir: requested})
	require.Equal(t, 1, queryInt(t, c.DSN("postgres"), "SELECT 1"))
	require.FileExists(t, filepath.Join(fallback, "PG_VERSION"))
	require.NoDirExists(t, requested)
}

// TestHelperProcess is not a real test: TestNoOrphanAfterSIGKILL runs the
// test binary with PGEMBED_HELPER_DATA_DIR set to start a cluster in a child
// process, which it then kills.
func TestHelperProcess(t *testing.T) {
	dir := os.Getenv("PGEMBED_HELPER_DATA_DIR")
	if dir == "" {
		t.Skip("helper process for TestNoOrphanAfterSIGKILL")
	}
	c, err := pgembed.Start(context.Background(), pgembed.Config{DataDir: dir})
	if err != nil {
		fmt.Printf("ERR=%v\n", err)
		os.Exit(1)
	}
	fmt.Printf("PID=%d\n", c.PID())
	select {} // wait to be killed
}

func TestNoOrphanAfterSIGKILL(t *testing.T) {
	t.Parallel()
	dir := newDataDir(t)
	helper := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	helper.Env = append(os.Environ(), "PGEMBED_HELPER_DATA_DIR="+dir)
	helper.Stderr = os.Stderr
	out, err := helper.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, helper.Start())
	t.Cleanup(func() { _ = helper.Process.Kill(); _ = helper.Wait() })

	lines := bufio.NewScanner(out)
	var pid int
	for pid == 0 && lines.Scan() {
		line := lines.Text()
		require.False(t, strings.HasPrefix(line, "ERR="), line)
		if s, ok := strings.CutPrefix(line, "PID="); ok {
			pid, err = strconv.Atoi(s)
			require.NoError(t, err)
		}
	}
	require.NotZero(t, pid, "helper did not report the postgres pid")
	require.False(t, processGone(pid))
	t.Cleanup(func() {
		if !processGone(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})

	require.NoError(t, helper.Process.Signal(syscall.SIGKILL))
	_ = helper.Wait()
	require.Eventually(t, func() bool { return processGone(pid) }, 5*time.Second, 10*time.Millisecond,
		"postgres (pid %d) outlived the SIGKILLed keel process", pid)

	// The killed server left its postmaster.pid behind; a new start must
	// recover from it.
	require.FileExists(t, filepath.Join(dir, "postmaster.pid"))
	c := start(t, pgembed.Config{DataDir: dir})
	require.Equal(t, 1, queryInt(t, c.DSN("postgres"), "SELECT 1"))
}

// TestSocketLoginNeedsPassword shows that reaching the server's socket is not enough to
// log in: the superuser needs the password kept 0600 beside the data dir, and a cluster
// made by an older keel that trusted socket logins is moved to passwords at start.
func TestSocketLoginNeedsPassword(t *testing.T) {
	t.Parallel()
	dir := newDataDir(t)
	c := start(t, pgembed.Config{DataDir: dir})
	require.Equal(t, 1, queryInt(t, c.DSN("postgres"), "SELECT 1"))
	fi, err := os.Stat(c.PasswordFile())
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	require.Equal(t, dir+".password", c.PasswordFile())

	ctx := context.Background()
	noPassword := c.DSNAs("postgres", "keel", "")
	_, err = pgx.Connect(ctx, noPassword)
	require.ErrorContains(t, err, "password", "a socket login without the password is refused")
	_, err = pgx.Connect(ctx, c.DSNAs("postgres", "keel", "guess"))
	require.ErrorContains(t, err, "password authentication failed")

	// An older cluster: trust on the socket, no password file. The next start sets a
	// password and stops trusting the socket.
	require.NoError(t, c.Stop())
	hba := filepath.Join(dir, "pg_hba.conf")
	b, err := os.ReadFile(hba)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(hba, []byte(strings.ReplaceAll(string(b), "scram-sha-256", "trust")), 0o600))
	require.NoError(t, os.Remove(c.PasswordFile()))
	c2 := start(t, pgembed.Config{DataDir: dir})
	require.Equal(t, 1, queryInt(t, c2.DSN("postgres"), "SELECT 1"))
	_, err = pgx.Connect(ctx, noPassword)
	require.ErrorContains(t, err, "password")

	// A cluster whose password file is gone is refused with one clear line.
	require.NoError(t, c2.Stop())
	require.NoError(t, os.Remove(c2.PasswordFile()))
	_, err = pgembed.Start(ctx, pgembed.Config{DataDir: dir})
	require.ErrorContains(t, err, "needs its superuser password file")
}

// TestConnectionURLs checks that the URLs `keel db url` prints reach the cluster, over the
// Unix socket and over 127.0.0.1:port, with the generated password.
func TestConnectionURLs(t *testing.T) {
	t.Parallel()
	dir := newDataDir(t)
	_, port := startOnFreePort(t, dir)

	socket, tcp, err := pgembed.ConnectionURLs(dir, port, "postgres")
	require.NoError(t, err)
	require.Equal(t, 1, queryInt(t, socket, "SELECT 1"))
	require.Equal(t, fmt.Sprintf("127.0.0.1:%d", port), strings.Split(strings.Split(tcp, "@")[1], "/")[0])
	require.Equal(t, 1, queryInt(t, tcp, "SELECT 1"))

	socketOnly, none, err := pgembed.ConnectionURLs(dir, 0, "postgres")
	require.NoError(t, err)
	require.Empty(t, none)
	require.Contains(t, socketOnly, "port=5432")

	_, _, err = pgembed.ConnectionURLs(newDataDir(t), 0, "postgres")
	require.ErrorContains(t, err, "start keel once (keel serve) with this SERVICE_HOME to create the cluster")
}
