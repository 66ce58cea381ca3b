package pgerr_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keelhq/keel/sdk/pgerr"
)

func TestUnavailable(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Nothing listens on port 1: a real connect failure.
	_, connErr := pgx.Connect(ctx, "postgres://keel@127.0.0.1:1/keel?connect_timeout=5")
	require.Error(t, connErr)

	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"ConnectRefused", connErr, true},
		{"WrappedConnectRefused", fmt.Errorf("error loading issue: %w", connErr), true},
		{"AdminShutdown", &pgconn.PgError{Code: "57P01"}, true},
		{"CannotConnectNow", &pgconn.PgError{Code: "57P03"}, true},
		{"ConnectionException", &pgconn.PgError{Code: "08006"}, true},
		{"TooManyConnections", &pgconn.PgError{Code: "53300"}, true},
		{"ConnClosed", fmt.Errorf("query: %w", pgconn.ErrConnClosed), true},
		{"UnexpectedEOF", io.ErrUnexpectedEOF, true},
		{"HostServiceStatus", fmt.Errorf("error listing agents: %w", pgerr.Status()), true},
		{"OtherUnavailableStatus", status.Error(codes.Unavailable, "connection refused"), false},
		{"UniqueViolation", &pgconn.PgError{Code: "23505"}, false},
		{"NoRows", pgx.ErrNoRows, false},
		{"Plain", errors.New("boom"), false},
		{"Nil", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, pgerr.Unavailable(tc.err), "%v", tc.err)
		})
	}
}
