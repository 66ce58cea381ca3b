package routines_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

// revisions lists a routine's revisions (200 required), newest first.
func (f *fixture) revisions(t *testing.T, routineID string) []map[string]any {
	t.Helper()
	res := f.h.Do("GET", "/api/routines/"+routineID+"/revisions", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var out []map[string]any
	res.JSON(t, &out)
	return out
}

// revNumber returns a routine record's latestRevisionNumber.
func revNumber(t *testing.T, rt map[string]any) int {
	t.Helper()
	n, ok := rt["latestRevisionNumber"].(float64)
	require.True(t, ok, "latestRevisionNumber in %v", rt)
	return int(n)
}

func TestRoutineRevisions(t *testing.T) {
	t.Parallel()
	h := startHost(t, sdktest.Options{})
	f := newFixture(t, h, "Revs")
	other := newFixture(t, h, "Revs Other")

	t.Run("NumbersAdvance", func(t *testing.T) {
		rt := f.routine(t, map[string]any{"title": "Versioned", "description": "v1"})
		id := rt["id"].(string)
		require.Equal(t, 1, revNumber(t, rt))
		require.NotNil(t, rt["latestRevisionId"])
		require.Nil(t, rt["managedByPlugin"])
		require.Contains(t, rt, "managedByPlugin")

		res := h.Do("PATCH", "/api/routines/"+id, map[string]any{"description": "v2"})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, 2, revNumber(t, res.Map(t)))

		// A patch that changes nothing records nothing.
		res = h.Do("PATCH", "/api/routines/"+id, map[string]any{"description": "v2", "title": "Versioned"})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, 2, revNumber(t, res.Map(t)))
		require.Len(t, activityEntries(t, h, f.co, "routine.updated", id), 1)

		out := f.trigger(t, id, map[string]any{"kind": "api", "label": "api"})
		rev := out["revision"].(map[string]any)
		require.Equal(t, float64(3), rev["revisionNumber"])
		require.Equal(t, "Created api trigger", rev["changeSummary"])
		trigID := out["trigger"].(map[string]any)["id"].(string)

		res = h.Do("PATCH", "/api/routine-triggers/"+trigID, map[string]any{"label": "api (renamed)"})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		patched := res.Map(t)
		require.Equal(t, "api (renamed)", patched["label"])
		require.Equal(t, float64(4), patched["revision"].(map[string]any)["revisionNumber"])
		require.Equal(t, "Updated api trigger", patched["revision"].(map[string]any)["changeSummary"])

		// The same label again changes no recorded setting.
		res = h.Do("PATCH", "/api/routine-triggers/"+trigID, map[string]any{"label": "api (renamed)"})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Nil(t, res.Map(t)["revision"])

		res = h.Do("DELETE", "/api/routine-triggers/"+trigID, nil)
		require.Equal(t, http.StatusNoContent, res.Status, "%s", res.Body)
		got := f.get(t, id)
		require.Equal(t, 5, revNumber(t, got))

		revs := f.revisions(t, id)
		require.Len(t, revs, 5)
		var summaries []string
		for i, r := range revs {
			require.Equal(t, float64(5-i), r["revisionNumber"], "newest first")
			require.Equal(t, id, r["routineId"])
			require.Equal(t, f.co, r["companyId"])
			summaries = append(summaries, r["changeSummary"].(string))
		}
		require.Equal(t, []string{"Deleted api trigger", "Updated api trigger", "Created api trigger", "Updated routine",
			"Created routine"}, summaries)
		require.Equal(t, got["latestRevisionId"], revs[0]["id"])
		snap := revs[1]["snapshot"].(map[string]any)
		require.Equal(t, float64(1), snap["version"])
		require.Equal(t, "v2", snap["routine"].(map[string]any)["description"])
		trigs := snap["triggers"].([]any)
		require.Len(t, trigs, 1)
		require.Equal(t, "api (renamed)", trigs[0].(map[string]any)["label"])
		require.Empty(t, revs[0]["snapshot"].(map[string]any)["triggers"])

		res = h.Do("GET", "/api/routines/"+id+"/revisions?limit=2&offset=1", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		var page []map[string]any
		res.JSON(t, &page)
		require.Len(t, page, 2)
		require.Equal(t, float64(4), page[0]["revisionNumber"])
		wantErr(t, h.Do("GET", "/api/routines/"+id+"/revisions", nil, other.agent.As("")...), http.StatusForbidden, "")
	})

	t.Run("BaseRevisionConflict", func(t *testing.T) {
		rt := f.routine(t, map[string]any{"title": "Guarded", "priority": "high"})
		id := rt["id"].(string)
		first := rt["latestRevisionId"].(string)
		res := h.Do("PATCH", "/api/routines/"+id, map[string]any{"priority": "low", "baseRevisionId": first})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, 2, revNumber(t, res.Map(t)))

		// The same base again is stale: 409 naming the latest number, and nothing changes.
		res = h.Do("PATCH", "/api/routines/"+id, map[string]any{"title": "Overwritten", "baseRevisionId": first})
		m := wantErr(t, res, http.StatusConflict, "")
		require.Contains(t, m["error"], "latest revision is 2")
		got := f.get(t, id)
		require.Equal(t, "Guarded", got["title"])
		require.Equal(t, "low", got["priority"])
		require.Equal(t, 2, revNumber(t, got))
		require.Len(t, f.revisions(t, id), 2)

		wantValidation(t, h.Do("PATCH", "/api/routines/"+id, map[string]any{"baseRevisionId": "nope"}), "baseRevisionId")
		res = h.Do("PATCH", "/api/routines/"+id, map[string]any{"title": "Guarded 2", "baseRevisionId": got["latestRevisionId"]})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, 3, revNumber(t, res.Map(t)))
	})

	t.Run("Restore", func(t *testing.T) {
		rt := f.routine(t, map[string]any{"title": "Original", "description": "first", "priority": "high",
			"env": map[string]any{"MODE": "fast"}})
		id := rt["id"].(string)
		firstRev := rt["latestRevisionId"].(string)
		res := h.Do("PATCH", "/api/routines/"+id, map[string]any{"title": "Changed", "description": nil, "priority": "low",
			"env": nil, "concurrencyPolicy": "always_enqueue"})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		tr := f.trigger(t, id, map[string]any{"kind": "api"})["trigger"].(map[string]any)

		res = h.Do("POST", "/api/routines/"+id+"/revisions/"+firstRev+"/restore", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		out := res.Map(t)
		restored := out["routine"].(map[string]any)
		require.Equal(t, "Original", restored["title"])
		require.Equal(t, "first", restored["description"])
		require.Equal(t, "high", restored["priority"])
		require.Equal(t, "coalesce_if_active", restored["concurrencyPolicy"])
		require.Equal(t, map[string]any{"MODE": "fast"}, restored["env"])
		require.Equal(t, 4, revNumber(t, restored))
		rev := out["revision"].(map[string]any)
		require.Equal(t, float64(4), rev["revisionNumber"])
		require.Equal(t, firstRev, rev["restoredFromRevisionId"])
		require.True(t, strings.HasPrefix(rev["changeSummary"].(string), "Restored revision 1"), rev["changeSummary"])
		require.Contains(t, rev["changeSummary"], "triggers are not restored")
		// Triggers stay as they are.
		require.Equal(t, tr["id"], f.triggerOf(t, id, tr["id"].(string))["id"])
		e := activityEntries(t, h, f.co, "routine.revision_restored", id)
		require.Len(t, e, 1)
		d := details(t, e[0])
		require.Equal(t, firstRev, d["restoredFromRevisionId"])
		require.Equal(t, float64(1), d["restoredFromRevisionNumber"])

		// A revision of another routine, an unknown one and a bad id are 404.
		otherRt := f.routine(t, map[string]any{"title": "Elsewhere"})
		wantErr(t, h.Do("POST", "/api/routines/"+id+"/revisions/"+otherRt["latestRevisionId"].(string)+"/restore", nil),
			http.StatusNotFound, "Routine revision not found")
		wantErr(t, h.Do("POST", "/api/routines/"+id+"/revisions/00000000-0000-0000-0000-000000000001/restore", nil),
			http.StatusNotFound, "Routine revision not found")
		wantErr(t, h.Do("POST", "/api/routines/"+id+"/revisions/nope/restore", nil), http.StatusNotFound, "Routine revision not found")

		// Same access rules as PATCH: an agent of another company and an agent managing a
		// routine not assigned to it are refused, and nothing changes.
		wantErr(t, h.Do("POST", "/api/routines/"+id+"/revisions/"+firstRev+"/restore", nil, other.agent.As("")...),
			http.StatusForbidden, "")
		peer := h.CreateAgent(f.co, "Revs Peer", "engineer")
		wantErr(t, h.Do("POST", "/api/routines/"+id+"/revisions/"+firstRev+"/restore", nil, peer.As("")...),
			http.StatusForbidden, "Agents can only manage routines assigned to themselves")
		require.Equal(t, 4, revNumber(t, f.get(t, id)))
	})

	t.Run("NoSecretInSnapshots", func(t *testing.T) {
		rt := f.routine(t, map[string]any{"title": "Hooked"})
		id := rt["id"].(string)
		out := f.trigger(t, id, map[string]any{"kind": "webhook", "signingMode": "hmac_sha256"})
		secret := out["secretMaterial"].(map[string]any)["webhookSecret"].(string)
		require.NotEmpty(t, secret)
		tr := out["trigger"].(map[string]any)
		rev := out["revision"].(map[string]any)
		require.Equal(t, "Created webhook trigger", rev["changeSummary"])
		snapTrig := rev["snapshot"].(map[string]any)["triggers"].([]any)[0].(map[string]any)
		require.Equal(t, tr["publicId"], snapTrig["publicId"])
		require.Equal(t, "hmac_sha256", snapTrig["signingMode"])
		require.NotContains(t, snapTrig, "secretId")

		res := h.Do("POST", "/api/routine-triggers/"+tr["id"].(string)+"/rotate-secret", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		rot := res.Map(t)
		rotated := rot["secretMaterial"].(map[string]any)["webhookSecret"].(string)
		require.Equal(t, "Rotated webhook trigger secret", rot["revision"].(map[string]any)["changeSummary"])

		res = h.Do("GET", "/api/routines/"+id+"/revisions", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Len(t, f.revisions(t, id), 3)
		body := string(res.Body)
		for _, s := range []string{secret, rotated} {
			require.NotContains(t, body, s, "a webhook secret in a revision")
		}
		require.NotContains(t, string(mustJSON(t, rot["revision"])), rotated)
	})

	t.Run("Env", func(t *testing.T) {
		secretID := "11111111-2222-4333-8444-555555555555"
		good := map[string]any{"A": "x", "B": map[string]any{"type": "plain", "value": "y"},
			"C": map[string]any{"type": "secret_ref", "secretId": secretID},
			"D": map[string]any{"type": "secret_ref", "secretId": secretID, "version": 2},
			"E": map[string]any{"type": "secret_ref", "secretId": secretID, "version": "latest"}}
		rt := f.routine(t, map[string]any{"title": "Env ok", "env": good})
		require.Equal(t, mustRoundTrip(t, good), rt["env"])
		id := rt["id"].(string)
		require.Nil(t, f.routine(t, map[string]any{"title": "No env"})["env"])

		bad := []struct {
			name string
			env  any
			path string
		}{
			{"Number", map[string]any{"A": 1}, "env.A"},
			{"UnknownType", map[string]any{"A": map[string]any{"type": "file", "path": "/x"}}, "env.A"},
			{"PlainWithoutValue", map[string]any{"A": map[string]any{"type": "plain"}}, "env.A"},
			{"PlainExtraField", map[string]any{"A": map[string]any{"type": "plain", "value": "v", "x": 1}}, "env.A"},
			{"SecretRefBadID", map[string]any{"A": map[string]any{"type": "secret_ref", "secretId": "nope"}}, "env.A"},
			{"SecretRefBadVersion", map[string]any{"A": map[string]any{"type": "secret_ref", "secretId": secretID, "version": 0}}, "env.A"},
			{"BadName", map[string]any{"1X": "v"}, "env.1X"},
			{"ServiceName", map[string]any{"SERVICE_API_KEY": "v"}, "env.SERVICE_API_KEY"},
		}
		for _, c := range bad {
			t.Run(c.name, func(t *testing.T) {
				wantValidation(t, h.Do("POST", "/api/companies/"+f.co+"/routines", map[string]any{"title": "Env bad",
					"assigneeAgentId": f.agent.ID, "env": c.env}), c.path)
				wantValidation(t, h.Do("PATCH", "/api/routines/"+id, map[string]any{"env": c.env}), c.path)
			})
		}
		for _, notMap := range []any{"A=1", []any{"A"}, 3} {
			res := h.Do("PATCH", "/api/routines/"+id, map[string]any{"env": notMap})
			require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
		}
		got := f.get(t, id)
		require.Equal(t, mustRoundTrip(t, good), got["env"], "refused env changes lose nothing")
		require.Equal(t, 1, revNumber(t, got))

		res := h.Do("PATCH", "/api/routines/"+id, map[string]any{"env": nil})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Nil(t, res.Map(t)["env"])
		require.Equal(t, 2, revNumber(t, res.Map(t)))
	})

	t.Run("FolderAndTitle", func(t *testing.T) {
		res := h.Do("POST", "/api/companies/"+f.co+"/folders", map[string]any{"kind": "routine", "name": "Ops"})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		folder := res.Map(t)["id"].(string)
		skillFolder := h.Do("POST", "/api/companies/"+f.co+"/folders", map[string]any{"kind": "skill", "name": "Ops"}).Map(t)["id"].(string)
		// The folders owner checks the folder: missing, or of the other kind.
		res = h.Do("POST", "/api/companies/"+f.co+"/routines", map[string]any{"title": "F", "folderId": "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee"})
		require.Equal(t, http.StatusNotFound, res.Status, "%s", res.Body)
		require.Equal(t, "Folder not found", res.Map(t)["error"])
		res = h.Do("POST", "/api/companies/"+f.co+"/routines", map[string]any{"title": "F", "folderId": skillFolder})
		require.Equal(t, http.StatusUnprocessableEntity, res.Status, "%s", res.Body)
		require.Equal(t, "Folder kind must match item kind", res.Map(t)["error"])
		rt := f.routine(t, map[string]any{"title": strings.Repeat("t", 200), "folderId": folder})
		require.Equal(t, folder, rt["folderId"])
		id := rt["id"].(string)
		wantValidation(t, h.Do("POST", "/api/companies/"+f.co+"/routines", map[string]any{"title": strings.Repeat("t", 201)}), "title")
		wantValidation(t, h.Do("POST", "/api/companies/"+f.co+"/routines", map[string]any{"title": " "}), "title")
		wantValidation(t, h.Do("POST", "/api/companies/"+f.co+"/routines", map[string]any{"title": "F", "folderId": "nope"}), "folderId")
		wantValidation(t, h.Do("PATCH", "/api/routines/"+id, map[string]any{"folderId": "nope"}), "folderId")
		res = h.Do("PATCH", "/api/routines/"+id, map[string]any{"folderId": nil})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Nil(t, res.Map(t)["folderId"])
		require.Equal(t, 2, revNumber(t, res.Map(t)))
		require.Nil(t, f.revisions(t, id)[0]["snapshot"].(map[string]any)["routine"].(map[string]any)["folderId"])
		// A revision filed in a folder deleted since is restored unfiled.
		var filed string
		for _, rev := range f.revisions(t, id) {
			if rev["snapshot"].(map[string]any)["routine"].(map[string]any)["folderId"] == folder {
				filed = rev["id"].(string)
			}
		}
		require.NotEmpty(t, filed)
		res = h.Do("DELETE", "/api/companies/"+f.co+"/folders/"+folder, nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		res = h.Do("POST", "/api/routines/"+id+"/revisions/"+filed+"/restore", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Nil(t, res.Map(t)["routine"].(map[string]any)["folderId"])
	})

	t.Run("RunsCarryRevision", func(t *testing.T) {
		rt := f.routine(t, map[string]any{"title": "Run me", "description": "Body"})
		id := rt["id"].(string)
		res := h.Do("POST", "/api/routines/"+id+"/run", map[string]any{"payload": map[string]any{"from": "test"}})
		require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
		run := res.Map(t)
		require.Equal(t, rt["latestRevisionId"], run["routineRevisionId"])
		require.Equal(t, "local-board", run["responsibleUserId"])
		want := sha256.Sum256(mustJSON(t, []any{id, nil, "Run me", "Body", f.agent.ID, nil}))
		require.Equal(t, hex.EncodeToString(want[:]), run["dispatchFingerprint"])

		res = h.Do("PATCH", "/api/routines/"+id, map[string]any{"concurrencyPolicy": "always_enqueue"})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		latest := res.Map(t)["latestRevisionId"]
		require.NotEqual(t, rt["latestRevisionId"], latest)
		res = h.Do("POST", "/api/routines/"+id+"/run", map[string]any{}, f.agent.As("")...)
		require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
		second := res.Map(t)
		require.Equal(t, latest, second["routineRevisionId"])
		require.Nil(t, second["responsibleUserId"], "an agent's run has no responsible board user")
		require.Equal(t, run["dispatchFingerprint"], second["dispatchFingerprint"], "same routine, trigger and resolved fields")

		runs := f.runs(t, id)
		require.Len(t, runs, 2)
		for _, r := range runs {
			require.NotNil(t, r["routineRevisionId"])
			require.Contains(t, r, "dispatchFingerprint")
		}
	})
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// mustRoundTrip returns v as it reads back from JSON.
func mustRoundTrip(t *testing.T, v any) any {
	t.Helper()
	var out any
	require.NoError(t, json.Unmarshal(mustJSON(t, v), &out))
	return out
}
