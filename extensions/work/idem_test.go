package work_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdk/idem"
	"github.com/keelhq/keel/sdktest"
)

// The host re-executes this test binary as the work extension, which then honours the
// test-only crash header.
func init() { idem.EnableCrashHeader() }

// idemIssueCount counts a company's issues with a title, straight from the owner's table.
func idemIssueCount(t *testing.T, h *sdktest.Host, companyID, title string) int {
	t.Helper()
	var n int
	require.NoError(t, h.Kernel.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM ext_work.issues WHERE company_id = $1 AND title = $2`, companyID, title).Scan(&n))
	return n
}

// TestIdempotentCreateSurvivesExtensionDeath makes the work extension commit an issue and
// die before answering: the client gets a 503 saying the outcome is unknown, and its retry
// with the same Idempotency-Key gets the original issue back instead of a second one.
func TestIdempotentCreateSurvivesExtensionDeath(t *testing.T) {
	t.Parallel()
	h := issStart(t)
	company := h.CreateCompany("Crash Co")
	body := map[string]any{"title": "Written before the crash", "priority": "high"}
	path := "/api/companies/" + company + "/issues"

	res := h.Do("POST", path, body, idem.Header, "crash-1", idem.CrashHeader, "1")
	require.Equal(t, http.StatusServiceUnavailable, res.Status, "%s", res.Body)
	lost := res.Map(t)
	require.Equal(t, "extension_unavailable", lost["code"])
	require.Contains(t, lost["error"], "the outcome of the request is unknown")
	require.Contains(t, lost["error"], "same Idempotency-Key")
	require.Equal(t, 1, idemIssueCount(t, h, company, "Written before the crash"), "the create committed before the crash")

	var replay *sdktest.Response
	sdktest.WaitFor(t, 60*time.Second, func() bool {
		replay = h.Do("POST", path, body, idem.Header, "crash-1")
		return replay.Status != http.StatusServiceUnavailable
	}, "the restarted work extension to answer the retry")
	require.Equal(t, http.StatusCreated, replay.Status, "%s", replay.Body)
	require.Equal(t, "true", replay.Header.Get(idem.ReplayedHeader))
	issue := replay.Map(t)
	require.Equal(t, "Written before the crash", issue["title"])
	require.Equal(t, "high", issue["priority"])
	require.Equal(t, 1, idemIssueCount(t, h, company, "Written before the crash"))

	// The answer read back is remembered: a further retry replays it byte for byte.
	again := h.Do("POST", path, body, idem.Header, "crash-1")
	require.Equal(t, http.StatusCreated, again.Status, "%s", again.Body)
	require.Equal(t, "true", again.Header.Get(idem.ReplayedHeader))
	require.JSONEq(t, string(replay.Body), string(again.Body))
	require.Equal(t, 1, idemIssueCount(t, h, company, "Written before the crash"))

	// A comment records its whole answer in its transaction: the retry gets it verbatim.
	commentPath := "/api/issues/" + issue["id"].(string) + "/comments"
	comment := map[string]any{"body": "Said once, despite the crash"}
	res = h.Do("POST", commentPath, comment, idem.Header, "crash-2", idem.CrashHeader, "1")
	require.Equal(t, http.StatusServiceUnavailable, res.Status, "%s", res.Body)
	sdktest.WaitFor(t, 60*time.Second, func() bool {
		replay = h.Do("POST", commentPath, comment, idem.Header, "crash-2")
		return replay.Status != http.StatusServiceUnavailable
	}, "the restarted work extension to answer the comment's retry")
	require.Equal(t, http.StatusCreated, replay.Status, "%s", replay.Body)
	require.Equal(t, "true", replay.Header.Get(idem.ReplayedHeader))
	require.Equal(t, "Said once, despite the crash", replay.Map(t)["body"])
	var comments int
	require.NoError(t, h.Kernel.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM ext_work.issue_comments WHERE issue_id = $1`, issue["id"]).Scan(&comments))
	require.Equal(t, 1, comments)
}

// TestIdempotencyKey covers the header's rules on creates of the work extension.
func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	h := issStart(t)
	company := h.CreateCompany("Idem Co")
	path := "/api/companies/" + company + "/issues"
	worker := h.CreateAgent(company, "Keyed Worker", "engineer")

	t.Run("ReplaysTheOriginalAnswer", func(t *testing.T) {
		t.Parallel()
		body := map[string]any{"title": "Replayed issue"}
		first := h.Do("POST", path, body, idem.Header, "replay-1")
		require.Equal(t, http.StatusCreated, first.Status, "%s", first.Body)
		require.Empty(t, first.Header.Get(idem.ReplayedHeader))
		second := h.Do("POST", path, body, idem.Header, "replay-1")
		require.Equal(t, http.StatusCreated, second.Status, "%s", second.Body)
		require.Equal(t, "true", second.Header.Get(idem.ReplayedHeader))
		require.JSONEq(t, string(first.Body), string(second.Body))
		require.Equal(t, 1, idemIssueCount(t, h, company, "Replayed issue"))
	})

	t.Run("RoutesWithoutARecordReplayToo", func(t *testing.T) {
		t.Parallel()
		// Labels do not record the key in their transaction: their answer is remembered
		// right after it succeeded.
		body := map[string]any{"name": "Replayed label", "color": "#445566"}
		labels := "/api/companies/" + company + "/labels"
		first := h.Do("POST", labels, body, idem.Header, "label-1")
		require.Equal(t, http.StatusCreated, first.Status, "%s", first.Body)
		second := h.Do("POST", labels, body, idem.Header, "label-1")
		require.Equal(t, http.StatusCreated, second.Status, "%s", second.Body)
		require.Equal(t, "true", second.Header.Get(idem.ReplayedHeader))
		require.JSONEq(t, string(first.Body), string(second.Body))
	})

	t.Run("OtherBodyIsAConflict", func(t *testing.T) {
		t.Parallel()
		first := h.Do("POST", path, map[string]any{"title": "Conflicting issue"}, idem.Header, "conflict-1")
		require.Equal(t, http.StatusCreated, first.Status, "%s", first.Body)
		res := h.Do("POST", path, map[string]any{"title": "Conflicting issue, edited"}, idem.Header, "conflict-1")
		require.Equal(t, http.StatusConflict, res.Status, "%s", res.Body)
		require.Equal(t, idem.ReusedMessage, res.Map(t)["error"])
		require.Equal(t, idem.ReusedCode, res.Map(t)["code"])
		require.Equal(t, 0, idemIssueCount(t, h, company, "Conflicting issue, edited"))
	})

	t.Run("OtherRouteIsAConflict", func(t *testing.T) {
		t.Parallel()
		first := h.Do("POST", path, map[string]any{"name": "Keyed label", "color": "#112233"}, idem.Header, "route-1")
		require.Equal(t, http.StatusBadRequest, first.Status, "a failed request is not remembered: %s", first.Body)
		ok := h.Do("POST", path, map[string]any{"title": "Route issue"}, idem.Header, "route-1")
		require.Equal(t, http.StatusCreated, ok.Status, "%s", ok.Body)
		res := h.Do("POST", "/api/companies/"+company+"/labels", map[string]any{"name": "Keyed label", "color": "#112233"}, idem.Header, "route-1")
		require.Equal(t, http.StatusConflict, res.Status, "%s", res.Body)
	})

	t.Run("MalformedKeys", func(t *testing.T) {
		t.Parallel()
		for name, key := range map[string]string{
			"Empty":        "",
			"TooLong":      strings.Repeat("k", idem.MaxKeyLen+1),
			"NotPrintable": "clé",
		} {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				res := h.Do("POST", path, map[string]any{"title": "Bad key " + name}, idem.Header, key)
				require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
				m := res.Map(t)
				require.Equal(t, "Validation error", m["error"])
				require.Contains(t, fmt.Sprint(m["details"]), idem.Header)
				require.Equal(t, 0, idemIssueCount(t, h, company, "Bad key "+name))
			})
		}
		ok := h.Do("POST", path, map[string]any{"title": "Longest key"}, idem.Header, strings.Repeat("k", idem.MaxKeyLen))
		require.Equal(t, http.StatusCreated, ok.Status, "%s", ok.Body)
	})

	t.Run("ConcurrentRequestsCreateOnce", func(t *testing.T) {
		t.Parallel()
		body := map[string]any{"title": "Raced issue"}
		const n = 8
		var wg sync.WaitGroup
		results := make([]*sdktest.Response, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i] = h.Do("POST", path, body, idem.Header, "race-1")
			}()
		}
		wg.Wait()
		ids := map[string]bool{}
		for _, res := range results {
			require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
			ids[res.Map(t)["id"].(string)] = true
		}
		require.Len(t, ids, 1, "every request answers the one issue")
		require.Equal(t, 1, idemIssueCount(t, h, company, "Raced issue"))
	})

	t.Run("KeysArePerActor", func(t *testing.T) {
		t.Parallel()
		body := map[string]any{"title": "Per-actor issue"}
		board := h.Do("POST", path, body, idem.Header, "actor-1")
		require.Equal(t, http.StatusCreated, board.Status, "%s", board.Body)
		agent := h.Do("POST", path, body, append(worker.As(""), idem.Header, "actor-1")...)
		require.Equal(t, http.StatusCreated, agent.Status, "%s", agent.Body)
		require.Empty(t, agent.Header.Get(idem.ReplayedHeader))
		require.NotEqual(t, board.Map(t)["id"], agent.Map(t)["id"])
		replay := h.Do("POST", path, body, append(worker.As(""), idem.Header, "actor-1")...)
		require.Equal(t, "true", replay.Header.Get(idem.ReplayedHeader))
		require.Equal(t, agent.Map(t)["id"], replay.Map(t)["id"])
		require.Equal(t, 2, idemIssueCount(t, h, company, "Per-actor issue"))
	})

	t.Run("ExpiredKeyIsNew", func(t *testing.T) {
		t.Parallel()
		body := map[string]any{"title": "Expiring issue"}
		first := h.Do("POST", path, body, idem.Header, "expire-1")
		require.Equal(t, http.StatusCreated, first.Status, "%s", first.Body)
		_, err := h.Kernel.Pool.Exec(context.Background(),
			`UPDATE ext_work.idempotency_keys SET created_at = now() - interval '25 hours' WHERE key = 'expire-1'`)
		require.NoError(t, err)
		second := h.Do("POST", path, body, idem.Header, "expire-1")
		require.Equal(t, http.StatusCreated, second.Status, "%s", second.Body)
		require.Empty(t, second.Header.Get(idem.ReplayedHeader))
		require.NotEqual(t, first.Map(t)["id"], second.Map(t)["id"])
		require.Equal(t, 2, idemIssueCount(t, h, company, "Expiring issue"))
	})

	t.Run("WithoutAKeyNothingIsRemembered", func(t *testing.T) {
		t.Parallel()
		body := map[string]any{"title": "Unkeyed issue"}
		for range 2 {
			res := h.Do("POST", path, body)
			require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		}
		require.Equal(t, 2, idemIssueCount(t, h, company, "Unkeyed issue"))
	})
}

// BenchmarkIssueCreateIdempotent compares issue creates without a key, with a fresh key each
// (a lookup, the key recorded in the create's transaction, the answer stored after it), and
// replays of one key (a lookup and the stored answer, no create).
func BenchmarkIssueCreateIdempotent(b *testing.B) {
	h := sdktest.Start(b, sdktest.Options{Builtins: true})
	sdktest.WaitFor(b, 60*time.Second, func() bool {
		res := h.Do("GET", "/api/plugins/work", nil)
		return res.Status == http.StatusOK && strings.Contains(string(res.Body), `"status":"ready"`)
	}, "the work extension to be ready")
	path := "/api/companies/" + h.CreateCompany("Bench Idem Co") + "/issues"
	body := map[string]any{"title": "Benchmarked issue"}
	for _, bc := range []struct {
		name string
		key  func(i int) string
	}{
		{"Unkeyed", nil},
		{"FreshKey", func(i int) string { return fmt.Sprintf("bench-%d-%d", time.Now().UnixNano(), i) }},
		{"Replayed", func(int) string { return "bench-replayed" }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			i := 0
			for b.Loop() {
				var headers []string
				if bc.key != nil {
					headers = []string{idem.Header, bc.key(i)}
				}
				i++
				if res := h.Do("POST", path, body, headers...); res.Status != http.StatusCreated {
					b.Fatalf("POST %s: %d %s", path, res.Status, res.Body)
				}
			}
		})
	}
}
