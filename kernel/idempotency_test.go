package kernel_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdk/idem"
)

// ktIdemKey sends an Idempotency-Key.
func ktIdemKey(key string) ktOpt {
	return func(r *http.Request) { r.Header.Set(idem.Header, key) }
}

// ktCompanyCount counts companies by name.
func ktCompanyCount(t *testing.T, e *ktEnv, name string) int {
	t.Helper()
	var n int
	require.NoError(t, e.K.Pool.QueryRow(context.Background(), `SELECT count(*) FROM kernel.companies WHERE name = $1`, name).Scan(&n))
	return n
}

// TestIdempotencyKey covers Idempotency-Key on the kernel's own create routes.
func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	env := ktStart(t, ktAuthenticated())
	alice, aliceSession := env.User(t, "Alice", true)
	_, bobSession := env.User(t, "Bob", true)
	require.NotEmpty(t, alice)
	asAlice, asBob := ktSession(aliceSession), ktSession(bobSession)

	t.Run("ReplaysTheOriginalCompany", func(t *testing.T) {
		t.Parallel()
		body := map[string]any{"name": "Idem Replay Co"}
		first := env.Do(t, "POST", "/api/companies", body, asAlice, ktIdemKey("co-1")).RequireStatus(t, http.StatusCreated)
		require.Empty(t, first.Header.Get(idem.ReplayedHeader))
		second := env.Do(t, "POST", "/api/companies", body, asAlice, ktIdemKey("co-1")).RequireStatus(t, http.StatusCreated)
		require.Equal(t, "true", second.Header.Get(idem.ReplayedHeader))
		require.JSONEq(t, string(first.Body), string(second.Body))
		require.Equal(t, 1, ktCompanyCount(t, env, "Idem Replay Co"))
	})

	t.Run("OtherBodyIsAConflict", func(t *testing.T) {
		t.Parallel()
		env.Do(t, "POST", "/api/companies", map[string]any{"name": "Idem First Co"}, asAlice, ktIdemKey("co-2")).RequireStatus(t, http.StatusCreated)
		m := env.Do(t, "POST", "/api/companies", map[string]any{"name": "Idem Second Co"}, asAlice, ktIdemKey("co-2")).
			RequireError(t, http.StatusConflict, idem.ReusedMessage)
		require.Equal(t, idem.ReusedCode, m["code"])
		require.Equal(t, 0, ktCompanyCount(t, env, "Idem Second Co"))
	})

	t.Run("MalformedKeys", func(t *testing.T) {
		t.Parallel()
		for name, key := range map[string]string{"Empty": "", "TooLong": strings.Repeat("x", idem.MaxKeyLen+1), "NotPrintable": "naïve"} {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				env.Do(t, "POST", "/api/companies", map[string]any{"name": "Idem Bad " + name}, asAlice, ktIdemKey(key)).
					RequireValidation(t, idem.Header)
				require.Equal(t, 0, ktCompanyCount(t, env, "Idem Bad "+name))
			})
		}
	})

	t.Run("KeysArePerActor", func(t *testing.T) {
		t.Parallel()
		body := map[string]any{"name": "Idem Per Actor Co"}
		a := env.Do(t, "POST", "/api/companies", body, asAlice, ktIdemKey("co-3")).RequireStatus(t, http.StatusCreated).Object(t)
		b := env.Do(t, "POST", "/api/companies", body, asBob, ktIdemKey("co-3")).RequireStatus(t, http.StatusCreated).Object(t)
		require.NotEqual(t, a["id"], b["id"])
		require.Equal(t, 2, ktCompanyCount(t, env, "Idem Per Actor Co"))
	})

	t.Run("ConcurrentRequestsCreateOnce", func(t *testing.T) {
		t.Parallel()
		body := map[string]any{"name": "Idem Raced Co"}
		const n = 8
		var wg sync.WaitGroup
		results := make([]*ktResp, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i] = env.Do(t, "POST", "/api/companies", body, asAlice, ktIdemKey("co-race"))
			}()
		}
		wg.Wait()
		ids := map[any]bool{}
		for _, r := range results {
			ids[r.RequireStatus(t, http.StatusCreated).Object(t)["id"]] = true
		}
		require.Len(t, ids, 1)
		require.Equal(t, 1, ktCompanyCount(t, env, "Idem Raced Co"))
	})

	t.Run("DocumentedInOpenAPI", func(t *testing.T) {
		t.Parallel()
		doc := env.Do(t, "GET", "/api/openapi.json", nil, asAlice).RequireStatus(t, http.StatusOK).Object(t)
		headerParams := func(path, method string) []string {
			op := doc["paths"].(map[string]any)[path].(map[string]any)[method].(map[string]any)
			var names []string
			params, _ := op["parameters"].([]any)
			for _, p := range params {
				if p.(map[string]any)["in"] == "header" {
					names = append(names, p.(map[string]any)["name"].(string))
				}
			}
			return names
		}
		require.Equal(t, []string{idem.Header}, headerParams("/api/companies", "post"))
		require.Empty(t, headerParams("/api/companies", "get"))
		require.Empty(t, headerParams("/api/board-api-keys", "post"))
	})

	t.Run("TokenRoutesIgnoreTheKey", func(t *testing.T) {
		t.Parallel()
		first := env.Do(t, "POST", "/api/board-api-keys", map[string]any{"name": "idem"}, asAlice, ktIdemKey("key-1")).
			RequireStatus(t, http.StatusCreated).Object(t)
		second := env.Do(t, "POST", "/api/board-api-keys", map[string]any{"name": "idem"}, asAlice, ktIdemKey("key-1")).
			RequireStatus(t, http.StatusCreated).Object(t)
		require.NotEqual(t, first["token"], second["token"])
		var n int
		require.NoError(t, env.K.Pool.QueryRow(context.Background(), `SELECT count(*) FROM kernel.idempotency_keys WHERE key = 'key-1'`).Scan(&n))
		require.Zero(t, n, "a token is never stored")
	})
}
