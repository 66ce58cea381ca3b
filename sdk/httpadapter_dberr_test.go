package sdk_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdk"
)

func TestWriteErrDatabaseUnavailable(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	sdk.WriteErr(rec, fmt.Errorf("error listing notes: %w", &pgconn.PgError{Code: "57P01", Message: "terminating connection"}))
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	require.JSONEq(t, `{"error":"Database is unavailable; try again shortly","code":"database_unavailable"}`, rec.Body.String())
	require.Equal(t, "1", rec.Header().Get("Retry-After"))

	rec = httptest.NewRecorder()
	sdk.WriteErr(rec, fmt.Errorf("boom"))
	require.Equal(t, http.StatusInternalServerError, rec.Code)
}
