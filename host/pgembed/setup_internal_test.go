package pgembed

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

func TestDSNQuoting(t *testing.T) {
	t.Parallel()
	c := &Cluster{sockDir: "/tmp/keel-pg-0123456789ab", port: 5432}
	tests := []struct {
		name               string
		db, user, password string
		want               string
	}{
		{"plain", "app", "keel", "", "host=/tmp/keel-pg-0123456789ab port=5432 user=keel dbname=app sslmode=disable"},
		{"space and quote", "my db", "o'brien", `p\w d`,
			`host=/tmp/keel-pg-0123456789ab port=5432 user='o\'brien' dbname='my db' password='p\\w d' sslmode=disable`},
		{"empty database", "", "keel", "", "host=/tmp/keel-pg-0123456789ab port=5432 user=keel dbname='' sslmode=disable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dsn := c.DSNAs(tt.db, tt.user, tt.password)
			require.Equal(t, tt.want, dsn)
			cfg, err := pgconn.ParseConfig(dsn)
			require.NoError(t, err)
			require.Equal(t, tt.user, cfg.User)
			require.Equal(t, tt.password, cfg.Password)
			if tt.db != "" {
				require.Equal(t, tt.db, cfg.Database)
			}
		})
	}
}

func TestTail(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		max  int
		want string
	}{
		{"", 3, "(no output)"},
		{"a\n\nb\n  c  \n", 3, "a | b | c"},
		{"1\n2\n3\n4\n5\n", 2, "4 | 5"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, tail([]byte(tt.in), tt.max))
	}
}

func TestCanTraverse(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to look at directories from another user's point of view")
	}
	u, err := lookupServerUser()
	require.NoError(t, err)

	root, err := os.MkdirTemp("/tmp", "pgembed-traverse-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(root) })
	require.NoError(t, os.Chmod(root, 0o755))
	open := filepath.Join(root, "open")
	closed := filepath.Join(root, "closed")
	ownedClosed := filepath.Join(root, "owned")
	require.NoError(t, os.Mkdir(open, 0o711))
	require.NoError(t, os.Mkdir(closed, 0o700))
	require.NoError(t, os.Mkdir(ownedClosed, 0o700))
	require.NoError(t, os.Chown(ownedClosed, u.uid, u.gid))
	require.NoError(t, os.Symlink(closed, filepath.Join(root, "link")))

	tests := []struct {
		dir  string
		want bool
	}{
		{filepath.Join(open, "data"), true},
		{filepath.Join(open, "missing", "deeper", "data"), true},
		{filepath.Join(closed, "data"), false},
		{filepath.Join(closed, "missing", "data"), false},
		{filepath.Join(ownedClosed, "data"), true},
		{filepath.Join(root, "link", "data"), false},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, u.canTraverse(tt.dir), tt.dir)
	}
}
