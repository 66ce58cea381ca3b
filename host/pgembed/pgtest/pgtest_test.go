package pgtest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/host/pgembed/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestClusterIsShared(t *testing.T) {
	t.Parallel()
	require.Same(t, pgtest.Cluster(t), pgtest.Cluster(t))
}

func TestNewDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("group", func(t *testing.T) {
		for _, name := range []string{"first", "second/with:odd chars and a very long name that needs truncating"} {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				dsn := pgtest.NewDatabase(t)
				conn, err := pgx.Connect(ctx, dsn)
				require.NoError(t, err)
				defer conn.Close(ctx)
				var db string
				require.NoError(t, conn.QueryRow(ctx, "SELECT current_database()").Scan(&db))
				require.True(t, strings.HasPrefix(db, "t_testnewdatabase_group_"), db)
				require.LessOrEqual(t, len(db), 63)
				_, err = conn.Exec(ctx, "CREATE TABLE t (v int)")
				require.NoError(t, err)
			})
		}
	})

	// The subtests have finished, so their databases must be gone.
	conn, err := pgx.Connect(ctx, pgtest.Cluster(t).DSN("postgres"))
	require.NoError(t, err)
	defer conn.Close(ctx)
	var left int
	require.NoError(t, conn.QueryRow(ctx,
		"SELECT count(*) FROM pg_database WHERE datname LIKE 't\\_testnewdatabase\\_%'").Scan(&left))
	require.Zero(t, left)
}
