package routines_test

import (
	"encoding/hex"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

func TestTriggers(t *testing.T) {
	t.Parallel()
	h := startHost(t, sdktest.Options{})
	f := newFixture(t, h, "Triggers")

	t.Run("Schedule", func(t *testing.T) {
		rt := f.routine(t, map[string]any{"title": "Weekly"})
		id := rt["id"].(string)
		before := time.Now()
		out := f.trigger(t, id, map[string]any{"kind": "schedule", "label": "mondays", "cronExpression": "0 9 * * 1",
			"timezone": "America/New_York"})
		require.Nil(t, out["secretMaterial"])
		tr := out["trigger"].(map[string]any)
		require.Equal(t, true, tr["enabled"])
		require.Equal(t, "0 9 * * 1", tr["cronExpression"])
		require.Equal(t, "America/New_York", tr["timezone"])
		next, err := time.Parse(time.RFC3339, tr["nextRunAt"].(string))
		require.NoError(t, err)
		ny, _ := time.LoadLocation("America/New_York")
		local := next.In(ny)
		require.Equal(t, time.Monday, local.Weekday())
		require.Equal(t, 9, local.Hour(), "nine o'clock New York time")
		require.True(t, next.After(before) && next.Before(before.Add(8*24*time.Hour)))
		require.Nil(t, tr["publicId"])
		require.Nil(t, tr["signingMode"])

		utc := f.schedule(t, id, "*/5 * * * *", "UTC")
		require.NotNil(t, utc["nextRunAt"])
		def := f.trigger(t, id, map[string]any{"kind": "schedule", "cronExpression": "@daily"})["trigger"].(map[string]any)
		require.Equal(t, "UTC", def["timezone"], "timezone defaults to UTC")

		base := "/api/routines/" + id + "/triggers"
		wantValidation(t, h.Do("POST", base, map[string]any{"kind": "schedule", "cronExpression": "99 * * * *"}), "cronExpression")
		wantValidation(t, h.Do("POST", base, map[string]any{"kind": "schedule"}), "cronExpression")
		wantValidation(t, h.Do("POST", base, map[string]any{"kind": "schedule", "cronExpression": "* * * * *", "timezone": "Nowhere/Land"}), "timezone")
		wantValidation(t, h.Do("POST", base, map[string]any{"kind": "schedule", "cronExpression": "* * * * *", "signingMode": "bearer"}), "signingMode")
		wantValidation(t, h.Do("POST", base, map[string]any{"kind": "cron"}), "kind")
		wantValidation(t, h.Do("POST", base, map[string]any{"kind": "api", "cronExpression": "* * * * *"}), "cronExpression")

		// Disabling clears the next run; enabling computes it again; a new expression moves it.
		tid := utc["id"].(string)
		res := h.Do("PATCH", "/api/routine-triggers/"+tid, map[string]any{"enabled": false})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Nil(t, res.Map(t)["nextRunAt"])
		res = h.Do("PATCH", "/api/routine-triggers/"+tid, map[string]any{"enabled": true, "cronExpression": "0 0 1 1 *", "label": "new year"})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		got := res.Map(t)
		require.Equal(t, "new year", got["label"])
		next, err = time.Parse(time.RFC3339, got["nextRunAt"].(string))
		require.NoError(t, err)
		require.Equal(t, time.January, next.Month())
		require.Equal(t, 1, next.Day())
		wantValidation(t, h.Do("PATCH", "/api/routine-triggers/"+tid, map[string]any{"cronExpression": "bad"}), "cronExpression")
		wantValidation(t, h.Do("PATCH", "/api/routine-triggers/"+tid, map[string]any{"signingMode": "bearer"}), "signingMode")
		wantValidation(t, h.Do("PATCH", "/api/routine-triggers/"+tid, map[string]any{"enabled": nil}), "enabled")
		require.Len(t, activityEntries(t, h, f.co, "routine_trigger.updated", tid), 2)
	})

	t.Run("ScheduleNeedsResolvableVariables", func(t *testing.T) {
		rt := f.routine(t, map[string]any{"title": "Ticket {{ticket}}", "variables": []map[string]any{{"name": "ticket", "required": true}}})
		id := rt["id"].(string)
		res := h.Do("POST", "/api/routines/"+id+"/triggers", map[string]any{"kind": "schedule", "cronExpression": "* * * * *"})
		wantErr(t, res, http.StatusUnprocessableEntity, "Schedule triggers cannot be enabled while required variables have no default: ticket")
		// Disabled is fine, enabling is not, until the variable has a default.
		tr := f.trigger(t, id, map[string]any{"kind": "schedule", "cronExpression": "* * * * *", "enabled": false})["trigger"].(map[string]any)
		require.Nil(t, tr["nextRunAt"])
		wantErr(t, h.Do("PATCH", "/api/routine-triggers/"+tr["id"].(string), map[string]any{"enabled": true}), http.StatusUnprocessableEntity, "")
		res = h.Do("PATCH", "/api/routines/"+id, map[string]any{"variables": []map[string]any{{"name": "ticket", "required": true, "defaultValue": "T-0"}}})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		res = h.Do("PATCH", "/api/routine-triggers/"+tr["id"].(string), map[string]any{"enabled": true})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		// With the schedule on, the default cannot be taken away.
		wantErr(t, h.Do("PATCH", "/api/routines/"+id, map[string]any{"variables": []map[string]any{{"name": "ticket", "required": true}}}),
			http.StatusUnprocessableEntity, "")
	})

	t.Run("WebhookSecretShownOnlyOnCreateAndRotate", func(t *testing.T) {
		rt := f.routine(t, map[string]any{"title": "Hooked"})
		id := rt["id"].(string)
		out := f.trigger(t, id, map[string]any{"kind": "webhook", "label": "hook"})
		tr := out["trigger"].(map[string]any)
		require.Equal(t, "bearer", tr["signingMode"], "bearer is the default")
		require.EqualValues(t, 300, tr["replayWindowSec"])
		require.Regexp(t, regexp.MustCompile(`^[0-9a-f]{24}$`), tr["publicId"])
		require.NotEmpty(t, tr["secretId"])
		require.NotNil(t, tr["lastRotatedAt"])
		mat := out["secretMaterial"].(map[string]any)
		url := mat["webhookUrl"].(string)
		require.Equal(t, h.URL+"/api/routine-triggers/public/"+tr["publicId"].(string)+"/fire", url)
		secret := mat["webhookSecret"].(string)
		raw, err := hex.DecodeString(secret)
		require.NoError(t, err)
		require.Len(t, raw, 32)
		require.Equal(t, url, out["webhookUrl"])
		require.Equal(t, secret, out["webhookSecret"])

		// Reads never show it.
		for _, path := range []string{"/api/routines/" + id, "/api/companies/" + f.co + "/routines", "/api/secrets/" + tr["secretId"].(string)} {
			res := h.Do("GET", path, nil)
			require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
			require.NotContains(t, string(res.Body), secret, path)
		}
		// The routine read shows the webhook's URL (never its secret).
		var detail struct {
			Triggers []map[string]any `json:"triggers"`
		}
		h.Do("GET", "/api/routines/"+id, nil).JSON(t, &detail)
		require.Len(t, detail.Triggers, 1)
		require.Equal(t, url, detail.Triggers[0]["webhookUrl"])
		e := activityEntries(t, h, f.co, "routine_trigger.created", tr["id"].(string))
		require.Len(t, e, 1)
		require.NotContains(t, string(e[0].Details), secret)

		res := h.Do("POST", "/api/routine-triggers/"+tr["id"].(string)+"/rotate-secret", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		rot := res.Map(t)
		rmat := rot["secretMaterial"].(map[string]any)
		require.Equal(t, url, rmat["webhookUrl"], "same public URL")
		require.NotEqual(t, secret, rmat["webhookSecret"])
		require.Len(t, activityEntries(t, h, f.co, "routine_trigger.secret_rotated", tr["id"].(string)), 1)

		wantValidation(t, h.Do("POST", "/api/routines/"+id+"/triggers", map[string]any{"kind": "webhook", "replayWindowSec": 10}), "replayWindowSec")
		wantValidation(t, h.Do("POST", "/api/routines/"+id+"/triggers", map[string]any{"kind": "webhook", "signingMode": "md5"}), "signingMode")
		wantValidation(t, h.Do("PATCH", "/api/routine-triggers/"+tr["id"].(string), map[string]any{"replayWindowSec": 90000}), "replayWindowSec")
		res = h.Do("PATCH", "/api/routine-triggers/"+tr["id"].(string), map[string]any{"signingMode": "hmac_sha256", "replayWindowSec": 600})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.EqualValues(t, 600, res.Map(t)["replayWindowSec"])
	})

	t.Run("ApiTriggerAndDelete", func(t *testing.T) {
		rt := f.routine(t, map[string]any{"title": "Api"})
		api := f.trigger(t, rt["id"].(string), map[string]any{"kind": "api", "label": "ci"})
		require.Nil(t, api["secretMaterial"])
		require.Nil(t, api["trigger"].(map[string]any)["publicId"], "api triggers have no public URL")
		wantErr(t, h.Do("POST", "/api/routine-triggers/"+api["trigger"].(map[string]any)["id"].(string)+"/rotate-secret", nil),
			http.StatusUnprocessableEntity, "Only webhook triggers have a secret to rotate")

		hook := f.trigger(t, rt["id"].(string), map[string]any{"kind": "webhook"})
		hid := hook["trigger"].(map[string]any)["id"].(string)
		secretID := hook["trigger"].(map[string]any)["secretId"].(string)
		res := h.Do("DELETE", "/api/routine-triggers/"+hid, nil)
		require.Equal(t, http.StatusNoContent, res.Status, "%s", res.Body)
		wantErr(t, h.Do("PATCH", "/api/routine-triggers/"+hid, map[string]any{"label": "x"}), http.StatusNotFound, "Routine trigger not found")
		wantErr(t, h.Do("DELETE", "/api/routine-triggers/"+hid, nil), http.StatusNotFound, "Routine trigger not found")
		res = h.Do("GET", "/api/secrets/"+secretID, nil)
		require.Equal(t, "deleted", res.Map(t)["status"], "the webhook secret goes with its trigger")
		require.Len(t, activityEntries(t, h, f.co, "routine_trigger.deleted", hid), 1)
		require.Len(t, f.get(t, rt["id"].(string))["triggers"].([]any), 1)
	})
}
