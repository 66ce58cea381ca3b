package secrets_test

import (
	"encoding/hex"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestManagedSecrets(t *testing.T) {
	t.Parallel()
	h := startSecrets(t)
	co := h.CreateCompany("Managed Co")
	other := h.CreateCompany("Other Co")

	t.Run("CreateGeneratesAValueResolvableOnce", func(t *testing.T) {
		out := mustInvoke(t, h, "secrets.createManaged", co, map[string]any{"name": "routine webhook", "description": "hook"})
		id, _ := out["secretId"].(string)
		require.NotEmpty(t, id)
		require.EqualValues(t, 1, out["version"])
		value, _ := out["value"].(string)
		raw, err := hex.DecodeString(value)
		require.NoError(t, err, "generated value is hex")
		require.Len(t, raw, 32)

		got := mustInvoke(t, h, "secrets.resolve", co, map[string]any{"secretId": id, "version": 1})
		require.Equal(t, value, got["value"])
		require.NotContains(t, dumpSchema(t, h), value, "the value is stored encrypted")

		res := h.Do("GET", "/api/secrets/"+id, nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.NotContains(t, string(res.Body), value)
		require.Equal(t, "routine webhook", res.Map(t)["name"])

		// Two managed secrets may share a name: their keys differ.
		again := mustInvoke(t, h, "secrets.createManaged", co, map[string]any{"name": "routine webhook"})
		require.NotEqual(t, id, again["secretId"])
	})

	t.Run("CreateKeepsAGivenValue", func(t *testing.T) {
		out := mustInvoke(t, h, "secrets.createManaged", co, map[string]any{"name": "given", "value": "my-own-value"})
		require.Equal(t, "my-own-value", out["value"])
		got := mustInvoke(t, h, "secrets.resolve", co, map[string]any{"secretId": out["secretId"]})
		require.Equal(t, "my-own-value", got["value"])
	})

	t.Run("RotateRevokesEveryEarlierVersionAtOnce", func(t *testing.T) {
		out := mustInvoke(t, h, "secrets.createManaged", co, map[string]any{"name": "rotating"})
		id := out["secretId"].(string)
		rot := mustInvoke(t, h, "secrets.rotateManaged", co, map[string]any{"secretId": id})
		require.EqualValues(t, 2, rot["version"])
		require.NotEqual(t, out["value"], rot["value"])
		_, e := invoke(t, h, "secrets.resolve", co, map[string]any{"secretId": id, "version": 1})
		require.NotNil(t, e, "version 1 is revoked")
		require.Equal(t, http.StatusUnprocessableEntity, e.Status)
		got := mustInvoke(t, h, "secrets.resolve", co, map[string]any{"secretId": id})
		require.Equal(t, rot["value"], got["value"])
		require.EqualValues(t, 2, got["version"])

		rot3 := mustInvoke(t, h, "secrets.rotateManaged", co, map[string]any{"secretId": id, "value": "third"})
		require.EqualValues(t, 3, rot3["version"])
		_, e = invoke(t, h, "secrets.resolve", co, map[string]any{"secretId": id, "version": 2})
		require.NotNil(t, e, "version 2 is revoked")
		require.Equal(t, "third", mustInvoke(t, h, "secrets.resolve", co, map[string]any{"secretId": id, "version": 3})["value"])
	})

	t.Run("DeleteDestroysTheSecret", func(t *testing.T) {
		out := mustInvoke(t, h, "secrets.createManaged", co, map[string]any{"name": "doomed"})
		id := out["secretId"].(string)
		del := mustInvoke(t, h, "secrets.deleteManaged", co, map[string]any{"secretId": id})
		require.Equal(t, true, del["deleted"])
		_, e := invoke(t, h, "secrets.resolve", co, map[string]any{"secretId": id})
		require.NotNil(t, e)
		// Deleting again is harmless; rotating a deleted secret is refused.
		mustInvoke(t, h, "secrets.deleteManaged", co, map[string]any{"secretId": id})
		_, e = invoke(t, h, "secrets.rotateManaged", co, map[string]any{"secretId": id})
		require.NotNil(t, e)
		require.Equal(t, http.StatusConflict, e.Status)
	})

	t.Run("RefusesBadInputAndOtherCompanies", func(t *testing.T) {
		_, e := invoke(t, h, "secrets.createManaged", co, map[string]any{"name": "  "})
		require.NotNil(t, e)
		require.Equal(t, http.StatusBadRequest, e.Status)
		_, e = invoke(t, h, "secrets.createManaged", "", map[string]any{"name": "x"})
		require.NotNil(t, e)
		require.Equal(t, http.StatusBadRequest, e.Status)

		out := mustInvoke(t, h, "secrets.createManaged", co, map[string]any{"name": "mine"})
		id := out["secretId"].(string)
		for _, m := range []string{"secrets.rotateManaged", "secrets.deleteManaged"} {
			_, e = invoke(t, h, m, other, map[string]any{"secretId": id})
			require.NotNil(t, e, m)
			require.Equal(t, http.StatusNotFound, e.Status, m)
		}
		_, e = invoke(t, h, "secrets.rotateManaged", co, map[string]any{"secretId": "00000000-0000-0000-0000-000000000000"})
		require.NotNil(t, e)
		require.Equal(t, http.StatusNotFound, e.Status)
		require.Equal(t, out["value"], mustInvoke(t, h, "secrets.resolve", co, map[string]any{"secretId": id})["value"])
	})
}
