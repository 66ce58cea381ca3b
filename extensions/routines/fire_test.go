package routines_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

func hexHMAC(secret, msg string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(msg))
	return hex.EncodeToString(m.Sum(nil))
}

// hook is a webhook trigger with its public path and secret.
type hook struct {
	id, routineID, path, secret string
}

func (f *fixture) hook(t *testing.T, routineID string, body map[string]any) *hook {
	t.Helper()
	body["kind"] = "webhook"
	out := f.trigger(t, routineID, body)
	tr := out["trigger"].(map[string]any)
	mat := out["secretMaterial"].(map[string]any)
	url := mat["webhookUrl"].(string)
	return &hook{id: tr["id"].(string), routineID: routineID, path: strings.TrimPrefix(url, f.h.URL), secret: mat["webhookSecret"].(string)}
}

// hmacHeaders signs body the timestamped way at ts.
func hmacHeaders(secret, body string, ts int64) []string {
	s := strconv.FormatInt(ts, 10)
	return []string{"X-Service-Signature", "sha256=" + hexHMAC(secret, s+"."+body), "X-Service-Timestamp", s}
}

func TestWebhookFire(t *testing.T) {
	t.Parallel()
	h := startHost(t, sdktest.Options{})
	f := newFixture(t, h, "Hooks")
	rt := f.routine(t, map[string]any{"title": "Deploy {{env}}", "concurrencyPolicy": "always_enqueue",
		"variables": []map[string]any{{"name": "env", "defaultValue": "staging"}}})
	id := rt["id"].(string)
	now := time.Now().Unix()

	t.Run("Bearer", func(t *testing.T) {
		w := f.hook(t, id, map[string]any{})
		body := `{"payload":{"via":"bearer"}}`
		res := h.Do("POST", w.path, body, "Authorization", "Bearer "+w.secret)
		require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
		run := res.Map(t)
		require.Equal(t, "webhook", run["source"])
		require.Equal(t, "issue_created", run["status"])
		require.Equal(t, w.id, run["triggerId"])
		require.Equal(t, map[string]any{"payload": map[string]any{"via": "bearer"}}, run["triggerPayload"])
		e := activityEntries(t, h, f.co, "routine_run.created", run["id"].(string))
		require.Equal(t, "system", e[0].ActorType)
		require.Equal(t, "routine-webhook", e[0].ActorID)

		for _, hdr := range [][]string{{"Authorization", "Bearer wrong"}, {"Authorization", "Bearer " + w.secret[:10]}, {}} {
			wantErr(t, h.Do("POST", w.path, body, hdr...), http.StatusUnauthorized, "")
		}
	})

	t.Run("HMACSHA256", func(t *testing.T) {
		w := f.hook(t, id, map[string]any{"signingMode": "hmac_sha256", "replayWindowSec": 60})
		body := `{"payload":{"variables":{"env":"prod"}}}`
		res := h.Do("POST", w.path, body, hmacHeaders(w.secret, body, now)...)
		require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
		run := res.Map(t)
		require.Equal(t, "Deploy prod", issue(t, h, run["linkedIssueId"].(string))["title"], "payload.variables are the run's variables")
		require.True(t, strings.HasPrefix(run["idempotencyKey"].(string), "webhook-hmac:"))
		// The same signed delivery again returns the run it fired.
		again := h.Do("POST", w.path, body, hmacHeaders(w.secret, body, now)...)
		require.Equal(t, http.StatusAccepted, again.Status, "%s", again.Body)
		require.Equal(t, run["id"], again.Map(t)["id"])
		// The captured delivery replayed inside the window under a new idempotency key is
		// refused; nothing fires.
		replay := h.Do("POST", w.path, body, append(hmacHeaders(w.secret, body, now), "Idempotency-Key", "attacker-1")...)
		require.Equal(t, http.StatusConflict, replay.Status, "%s", replay.Body)
		require.Equal(t, "webhook_replay", replay.Map(t)["code"])
		// A delivery sent with its own key may be retried with that key.
		keyed := hmacHeaders(w.secret, body, now-1)
		first := h.Do("POST", w.path, body, append(keyed, "Idempotency-Key", "delivery-7")...)
		require.Equal(t, http.StatusAccepted, first.Status, "%s", first.Body)
		retry := h.Do("POST", w.path, body, append(keyed, "Idempotency-Key", "delivery-7")...)
		require.Equal(t, http.StatusAccepted, retry.Status, "%s", retry.Body)
		require.Equal(t, first.Map(t)["id"], retry.Map(t)["id"])
		wantErr(t, h.Do("POST", w.path, body, keyed...), http.StatusConflict, "Webhook delivery was already received")
		// Milliseconds are accepted too; the hub header may carry the signature.
		ms := strconv.FormatInt(time.Now().UnixMilli(), 10)
		res = h.Do("POST", w.path, body, "X-Hub-Signature-256", "sha256="+hexHMAC(w.secret, ms+"."+body), "X-Service-Timestamp", ms)
		require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)

		wantErr(t, h.Do("POST", w.path, body, hmacHeaders(w.secret, body, now-120)...), http.StatusUnauthorized,
			"Webhook timestamp is outside the replay window")
		wantErr(t, h.Do("POST", w.path, body+" ", hmacHeaders(w.secret, body, now)...), http.StatusUnauthorized, "Invalid webhook signature")
		wantErr(t, h.Do("POST", w.path, body, hmacHeaders("wrong-secret", body, now)...), http.StatusUnauthorized, "Invalid webhook signature")
		wantErr(t, h.Do("POST", w.path, body, "X-Service-Signature", hexHMAC(w.secret, body)), http.StatusUnauthorized, "")
		wantErr(t, h.Do("POST", w.path, body), http.StatusUnauthorized, "")
	})

	t.Run("ForgeHMAC", func(t *testing.T) {
		w := f.hook(t, id, map[string]any{"signingMode": "forge_hmac"})
		body := `{"ref":"refs/heads/main","variables":{"env":"qa"}}`
		res := h.Do("POST", w.path, body, "X-Hub-Signature-256", "sha256="+hexHMAC(w.secret, body))
		require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
		require.Equal(t, "Deploy qa", issue(t, h, res.Map(t)["linkedIssueId"].(string))["title"])
		res = h.Do("POST", w.path, body, "X-Service-Signature", hexHMAC(w.secret, body))
		require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
		wantErr(t, h.Do("POST", w.path, `{"ref":"refs/heads/evil"}`, "X-Hub-Signature-256", "sha256="+hexHMAC(w.secret, body)),
			http.StatusUnauthorized, "Invalid webhook signature")
		wantErr(t, h.Do("POST", w.path, body, "X-Hub-Signature-256", "sha256="+hexHMAC("nope", body)), http.StatusUnauthorized, "")
		wantErr(t, h.Do("POST", w.path, body), http.StatusUnauthorized, "Missing webhook signature")
	})

	t.Run("None", func(t *testing.T) {
		w := f.hook(t, id, map[string]any{"signingMode": "none"})
		res := h.Do("POST", w.path, "not json at all", "Content-Type", "text/plain")
		require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
		require.Equal(t, map[string]any{"rawBody": "not json at all"}, res.Map(t)["triggerPayload"])
		// A JSON body must parse and hold storable text; a text body must be storable too.
		wantValidation(t, h.Do("POST", w.path, `{"ref":`), "")
		wantValidation(t, h.Do("POST", w.path, `{"ref":"a\u0000b"}`), "ref")
		wantValidation(t, h.Do("POST", w.path, "{\"ref\":\"caf\xe9\"}"), "ref")
		wantValidation(t, h.Do("POST", w.path, "a\x00b", "Content-Type", "text/plain"), "body")
		wantValidation(t, h.Do("POST", w.path, "a\x00b", "Content-Type", "application/octet-stream"), "body")
		res = h.Do("POST", w.path, nil)
		require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
	})

	t.Run("RotatedSecretIsRefusedAtOnce", func(t *testing.T) {
		w := f.hook(t, id, map[string]any{"signingMode": "hmac_sha256"})
		body := `{"n":1}`
		ts := time.Now().Unix()
		require.Equal(t, http.StatusAccepted, h.Do("POST", w.path, body, hmacHeaders(w.secret, body, ts)...).Status, "old secret works (and is cached)")
		res := h.Do("POST", "/api/routine-triggers/"+w.id+"/rotate-secret", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		fresh := res.Map(t)["webhookSecret"].(string)
		body = `{"n":2}`
		wantErr(t, h.Do("POST", w.path, body, hmacHeaders(w.secret, body, ts)...), http.StatusUnauthorized, "Invalid webhook signature")
		require.Equal(t, http.StatusAccepted, h.Do("POST", w.path, body, hmacHeaders(fresh, body, ts)...).Status)

		b := f.hook(t, id, map[string]any{})
		require.Equal(t, http.StatusAccepted, h.Do("POST", b.path, `{}`, "Authorization", "Bearer "+b.secret).Status)
		res = h.Do("POST", "/api/routine-triggers/"+b.id+"/rotate-secret", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		wantErr(t, h.Do("POST", b.path, `{}`, "Authorization", "Bearer "+b.secret), http.StatusUnauthorized, "")
		require.Equal(t, http.StatusAccepted, h.Do("POST", b.path, `{}`, "Authorization", "Bearer "+res.Map(t)["webhookSecret"].(string)).Status)
	})

	t.Run("InactiveAndUnknown", func(t *testing.T) {
		w := f.hook(t, id, map[string]any{})
		wantErr(t, h.Do("POST", "/api/routine-triggers/public/0123456789abcdef01234567/fire", `{}`), http.StatusNotFound, "Routine trigger not found")
		res := h.Do("PATCH", "/api/routine-triggers/"+w.id, map[string]any{"enabled": false})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		wantErr(t, h.Do("POST", w.path, `{}`, "Authorization", "Bearer "+w.secret), http.StatusConflict, "Routine trigger is not active")

		paused := f.routine(t, map[string]any{"title": "Paused", "status": "paused"})
		p := f.hook(t, paused["id"].(string), map[string]any{})
		wantErr(t, h.Do("POST", p.path, `{}`, "Authorization", "Bearer "+p.secret), http.StatusConflict, "Routine trigger is not active")

		// A routine whose project is paused records a skipped run.
		projectID := f.project(t, "Frozen")
		frozen := f.routine(t, map[string]any{"title": "Frozen", "projectId": projectID})
		fz := f.hook(t, frozen["id"].(string), map[string]any{})
		res = h.Do("PATCH", "/api/projects/"+projectID, map[string]any{"pauseReason": "manual"})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		res = h.Do("POST", fz.path, `{}`, "Authorization", "Bearer "+fz.secret)
		require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
		run := res.Map(t)
		require.Equal(t, "skipped", run["status"])
		require.Equal(t, "paused", run["failureReason"])
		require.Nil(t, run["linkedIssueId"])
	})
}
