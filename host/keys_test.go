package host_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/host"
	"github.com/keelhq/keel/host/pgembed/pgtest"
)

// TestMasterKeyMismatchRefused checks that a database and a data dir from different
// instances never meet: the database remembers its secrets master key's fingerprint and a
// start with another key, or without one, is refused with one line.
func TestMasterKeyMismatchRefused(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t)
	start := func(home string) (*host.Host, error) {
		h, err := host.Start(context.Background(), host.Config{Home: home, Port: 0, DatabaseURL: dsn, DisableBuiltins: true}, nil)
		if h != nil {
			t.Cleanup(func() { h.Stop(context.Background()) })
		}
		return h, err
	}
	keyPath := func(home string) string { return filepath.Join(home, "extensions", "secrets", "master.key") }
	signingPath := func(home string) string {
		return filepath.Join(home, "extensions", "decisions", "decision-signing.key")
	}

	first := t.TempDir()
	h, err := start(first)
	require.NoError(t, err)
	h.Stop(context.Background())
	original, err := os.ReadFile(keyPath(first))
	require.NoError(t, err)
	signing, err := os.ReadFile(signingPath(first))
	require.NoError(t, err)

	// A fresh data dir (SERVICE_HOME deleted) against the old database: no key here.
	fresh := t.TempDir()
	_, err = start(fresh)
	require.EqualError(t, err, "the database holds secrets encrypted under a key that is not here: restore "+keyPath(fresh)+
		" from the same backup as the database, or set SERVICE_SECRETS_MASTER_KEY to that key, or point keel at a fresh database")
	_, statErr := os.Stat(keyPath(fresh))
	require.ErrorIs(t, statErr, os.ErrNotExist, "a refused start generates no key")

	// Another instance's key.
	other := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Dir(keyPath(other)), 0o700))
	require.NoError(t, os.WriteFile(keyPath(other), []byte("MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=\n"), 0o600))
	_, err = start(other)
	require.ErrorContains(t, err, "the database holds secrets encrypted under a different key than "+keyPath(other))

	// The right master key but another instance's decision signing key.
	require.NoError(t, os.WriteFile(keyPath(other), original, 0o600))
	require.NoError(t, os.MkdirAll(filepath.Dir(signingPath(other)), 0o700))
	require.NoError(t, os.WriteFile(signingPath(other), []byte("0123456789abcdef0123456789abcdef0123456789abcdef\n"), 0o600))
	_, err = start(other)
	require.ErrorContains(t, err, "the database holds decisions signed under a different key than "+signingPath(other))

	// The restored keys start again.
	require.NoError(t, os.WriteFile(signingPath(other), signing, 0o600))
	_, err = start(other)
	require.NoError(t, err)
}

// TestDataDirHoldsCluster checks that, as root, the embedded cluster lives under
// SERVICE_HOME/db (owned by postgres, 0700) and SERVICE_HOME only gains traverse bits.
func TestDataDirHoldsCluster(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("the placement question only arises as root")
	}
	// t.TempDir's parent is 0700, which the postgres user could not traverse.
	home, err := os.MkdirTemp("", "keel-home-*")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(home) })
	h, err := host.Start(context.Background(), host.Config{Home: home, Port: 0, DisableBuiltins: true}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { h.Stop(context.Background()) })

	require.FileExists(t, filepath.Join(home, "db", "PG_VERSION"))
	fi, err := os.Stat(home)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o711), fi.Mode().Perm())
	fi, err = os.Stat(filepath.Join(home, "db"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	require.NotEqual(t, uint32(0), fi.Sys().(*syscall.Stat_t).Uid, "db/ belongs to the postgres user")
	require.FileExists(t, filepath.Join(home, "extensions", "secrets", "master.key"))
}
