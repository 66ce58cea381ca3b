package kernel_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/host/pgembed/pgtest"
	"github.com/keelhq/keel/kernel"
)

// TestDatabaseUnavailable cuts a running kernel off its database (the database stops
// accepting connections and its sessions are terminated): requests that need it answer
// 503 database_unavailable, not 500, and recover when it is back.
func TestDatabaseUnavailable(t *testing.T) {
	t.Parallel()
	env := ktStart(t, ktLocal())
	company := env.Company(t, map[string]any{"name": "Cut Off Co"})
	cfg, err := pgx.ParseConfig(env.DSN)
	require.NoError(t, err)
	db := pgx.Identifier{cfg.Database}.Sanitize()
	admin := func(sql string, args ...any) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, pgtest.Cluster(t).DSN("postgres"))
		require.NoError(t, err)
		defer conn.Close(context.Background())
		_, err = conn.Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	t.Cleanup(func() { admin("ALTER DATABASE " + db + " ALLOW_CONNECTIONS true") })
	admin("ALTER DATABASE " + db + " ALLOW_CONNECTIONS false")
	admin("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", cfg.Database)

	for _, path := range []string{"/api/companies", "/api/companies/" + company["id"].(string)} {
		m := env.Do(t, "GET", path, nil).RequireError(t, http.StatusServiceUnavailable, "Database is unavailable; try again shortly")
		require.Equal(t, "database_unavailable", m["code"])
	}

	admin("ALTER DATABASE " + db + " ALLOW_CONNECTIONS true")
	env.Do(t, "GET", "/api/companies", nil).RequireStatus(t, http.StatusOK)
}

// TestInputCheck covers the input check by media type on kernel routes: JSON and text
// bodies are scanned, binary and multipart bodies pass to the handler, and the limits
// count the media type's own size.
func TestInputCheck(t *testing.T) {
	t.Parallel()
	env := ktStart(t, kernel.Config{DeploymentMode: kernel.ModeLocalTrusted, MaxBodyBytes: 64 << 10})
	contentType := func(ct string) ktOpt { return func(r *http.Request) { r.Header.Set("Content-Type", ct) } }

	for _, tc := range []struct {
		name, body, contentType, path string
	}{
		{"JSONField", `{"name":"x","description":"a\u0000"}`, "application/json", "description"},
		{"JSONWithCharset", "{\"name\":\"caf\xe9\"}", "application/json; charset=utf-8", "name"},
		{"VendorJSON", `{"name":"\udfff"}`, "application/vnd.api+json", "name"},
		{"MalformedJSON", `{"name":`, "application/json", ""},
		{"JSONWithoutContentType", `{"name":"\u0000"}`, "", "name"},
		{"JSONAsTextPlain", `{"name":"\u0000"}`, "text/plain", "name"},
		{"RawText", "a\x00b", "text/plain", "body"},
		{"RawTextInvalidUTF8", "caf\xe9", "", "body"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env.Do(t, "POST", "/api/companies", tc.body, contentType(tc.contentType)).RequireValidation(t, tc.path)
		})
	}

	t.Run("BinaryPassesToTheHandler", func(t *testing.T) {
		t.Parallel()
		res := env.Do(t, "POST", "/api/companies", "a\x00b", contentType("application/octet-stream"))
		require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
		require.NotContains(t, string(res.Body), `"path":"body"`)
	})

	t.Run("LimitsByMediaType", func(t *testing.T) {
		t.Parallel()
		big := `{"name":"` + strings.Repeat("x", 100<<10) + `"}`
		m := env.Do(t, "POST", "/api/companies", big).RequireError(t, http.StatusRequestEntityTooLarge, "Request body is too large (limit 65536 bytes)")
		require.Equal(t, "body_too_large", m["code"])
		// A multipart body gets the upload limit (the attachment limit and its framing).
		res := env.Do(t, "POST", "/api/companies", big, contentType("multipart/form-data; boundary=x"))
		require.NotEqual(t, http.StatusRequestEntityTooLarge, res.Status, "%s", res.Body)
	})

	t.Run("TextLimits", func(t *testing.T) {
		t.Parallel()
		company := env.Company(t, map[string]any{"name": "Limits Co"})["id"].(string)
		agentID, _ := env.Agent(t, company, "Key Agent")
		long := strings.Repeat("\u00e9", 201)
		env.Do(t, "POST", "/api/agents/"+agentID+"/keys", map[string]any{"name": long}).RequireValidation(t, "name")
		env.Do(t, "POST", "/api/agents/"+agentID+"/keys", map[string]any{"name": long[:400]}).RequireStatus(t, http.StatusCreated)
		env.Do(t, "PATCH", "/api/companies/"+company, map[string]any{"pauseReason": strings.Repeat("x", 1001)}).RequireValidation(t, "pauseReason")
		env.Do(t, "PATCH", "/api/companies/"+company, map[string]any{"feedbackDataSharingTermsVersion": long}).RequireValidation(t, "feedbackDataSharingTermsVersion")
		env.Do(t, "POST", "/api/companies", map[string]any{"name": long}).RequireValidation(t, "name")
		env.Do(t, "POST", "/api/companies", map[string]any{"name": "x", "description": strings.Repeat("x", 10001)}).RequireValidation(t, "description")
	})

	t.Run("QueryAndPath", func(t *testing.T) {
		t.Parallel()
		env.Do(t, "GET", "/api/companies?q=%00", nil).RequireValidation(t, "q")
		env.Do(t, "GET", "/api/companies/a%00b", nil).RequireValidation(t, "companyId")
	})
}
