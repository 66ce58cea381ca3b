// Package pgtest gives tests of other packages a throwaway PostgreSQL server:
// one embedded cluster per test binary, started on first use in a temporary
// directory and shared by all tests of that binary, each of which gets its
// own fresh database from NewDatabase.
//
// Use it with
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		dsn := pgtest.NewDatabase(t)
//		...
//	}
//
// Without Main the server still dies with the test binary (see package
// pgembed), but its temporary directory is left behind.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelhq/keel/host/pgembed"
)

var (
	mu         sync.Mutex
	shared     *pgembed.Cluster
	sharedErr  error
	sharedRoot string
)

// Cluster returns the test binary's shared cluster, starting it on first use in a temp dir; it is stopped by Main.
func Cluster(t testing.TB) *pgembed.Cluster {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if shared == nil && sharedErr == nil {
		shared, sharedErr = startShared()
	}
	if sharedErr != nil {
		t.Fatalf("pgtest: %v", sharedErr)
	}
	return shared
}

// startShared starts the shared cluster. A failure is remembered, so that the
// remaining tests fail fast instead of retrying.
func startShared() (*pgembed.Cluster, error) {
	base := os.TempDir()
	if os.Geteuid() == 0 {
		// The server runs as the postgres user, which must be able to reach
		// the cluster directory; $TMPDIR might point somewhere it cannot.
		base = "/tmp"
	}
	root, err := os.MkdirTemp(base, "keel-pgtest-")
	if err != nil {
		return nil, fmt.Errorf("creating temp dir for the shared cluster: %w", err)
	}
	if err := os.Chmod(root, 0o755); err != nil {
		os.RemoveAll(root)
		return nil, fmt.Errorf("making temp dir %s traversable: %w", root, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := pgembed.Start(ctx, pgembed.Config{DataDir: root + "/data"})
	if err != nil {
		os.RemoveAll(root)
		return nil, fmt.Errorf("starting the shared cluster: %w", err)
	}
	sharedRoot = root
	return c, nil
}

var unsafeChars = regexp.MustCompile(`[^a-z0-9]+`)

// NewDatabase creates a fresh, uniquely named database in the shared cluster and returns its DSN; dropped in t.Cleanup (WITH (FORCE)).
func NewDatabase(t testing.TB) string {
	t.Helper()
	c := Cluster(t)
	name := databaseName(t.Name())
	ident := pgx.Identifier{name}.Sanitize()
	if err := exec(c, "CREATE DATABASE "+ident); err != nil {
		t.Fatalf("pgtest: creating database %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := exec(c, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: dropping database %s: %v", name, err)
		}
	})
	return c.DSN(name)
}

// databaseName derives a unique database name, at most 63 bytes long, from a
// test name.
func databaseName(testName string) string {
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	base := strings.Trim(unsafeChars.ReplaceAllString(strings.ToLower(testName), "_"), "_")
	if len(base) > 40 {
		base = base[:40]
	}
	return "t_" + base + "_" + hex.EncodeToString(rnd[:])
}

// exec runs one statement in the cluster's "postgres" database.
func exec(c *pgembed.Cluster, sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// AtExit registers f to run once the tests of the binary have run, before Main stops the
// shared cluster and exits: the place for a helper package to remove what it made for the
// whole binary (temporary directories that outlive single tests). Functions run in the order
// registered. Without Main they never run.
func AtExit(f func()) {
	exitMu.Lock()
	defer exitMu.Unlock()
	atExit = append(atExit, f)
}

var (
	exitMu sync.Mutex
	atExit []func()
)

// Main wraps testing.M: runs the tests, then the AtExit functions, then stops the shared
// cluster, then os.Exit(code). Use as `func TestMain(m *testing.M) { pgtest.Main(m) }`.
func Main(m *testing.M) {
	code := m.Run()
	exitMu.Lock()
	fs := atExit
	atExit = nil
	exitMu.Unlock()
	for _, f := range fs {
		f()
	}
	mu.Lock()
	if shared != nil {
		if err := shared.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
		shared = nil
		sharedErr = fmt.Errorf("the shared cluster was stopped by pgtest.Main")
	}
	if sharedRoot != "" {
		os.RemoveAll(sharedRoot)
		sharedRoot = ""
	}
	mu.Unlock()
	os.Exit(code)
}
