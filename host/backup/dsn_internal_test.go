package backup

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSplitPassword keeps the password off pg_dump's command line and drops pgx's own
// settings, which libpq refuses.
func TestSplitPassword(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, dsn, password string }{
		{"postgres://keel:s3cret@db:5432/keel?sslmode=disable&pool_max_conns=20&statement_cache_capacity=0", "postgres://keel@db:5432/keel?sslmode=disable", "s3cret"},
		{"host=/tmp port=5432 user=keel password='a b\\'c' dbname=keel sslmode=disable", "host=/tmp port=5432 user=keel dbname=keel sslmode=disable", "a b'c"},
		{"host=/tmp user=keel dbname=keel", "host=/tmp user=keel dbname=keel", ""},
	} {
		dsn, pw, err := splitPassword(tc.in)
		require.NoError(t, err)
		require.Equal(t, tc.dsn, dsn)
		require.Equal(t, tc.password, pw)
	}
}
