package secrets_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSecretCRUDAndValidation(t *testing.T) {
	t.Parallel()
	h := startSecrets(t)
	co := h.CreateCompany("Acme")
	base := "/api/companies/" + co + "/secrets"

	sec := createSecret(t, h, co, map[string]any{"name": "OpenAI API key", "value": "sk-crud-value-1", "description": "for agents"})
	require.Equal(t, "OPENAI_API_KEY", sec["key"])
	require.Equal(t, "local_encrypted", sec["provider"])
	require.Equal(t, "active", sec["status"])
	require.Equal(t, "service_managed", sec["managedMode"])
	require.EqualValues(t, 1, sec["latestVersion"])
	require.NotNil(t, sec["lastRotatedAt"])
	require.Nil(t, sec["lastResolvedAt"])
	for _, f := range []string{"id", "companyId", "key", "name", "description", "provider", "status", "managedMode",
		"latestVersion", "lastRotatedAt", "lastResolvedAt", "createdAt", "updatedAt"} {
		require.Contains(t, sec, f)
	}
	require.NotContains(t, sec, "value")
	id := sec["id"].(string)

	t.Run("validation", func(t *testing.T) {
		cases := []struct {
			name   string
			body   any
			status int
			path   string
		}{
			{"missing name", map[string]any{"value": "v"}, 400, "name"},
			{"long name", map[string]any{"name": strings.Repeat("n", 201), "value": "v"}, 400, "name"},
			{"bad key", map[string]any{"name": "x", "key": "1bad-key", "value": "v"}, 400, "key"},
			{"missing value", map[string]any{"name": "x"}, 400, "value"},
			{"bad mode", map[string]any{"name": "x", "value": "v", "managedMode": "nope"}, 400, "managedMode"},
		}
		for _, tc := range cases {
			res := h.Do("POST", base, tc.body)
			require.Equal(t, tc.status, res.Status, "%s: %s", tc.name, res.Body)
			require.Equal(t, "Validation error", res.Map(t)["error"], tc.name)
			require.Contains(t, string(res.Body), `"path":"`+tc.path+`"`, tc.name)
		}
		// Unknown fields are ignored, as the reference product does (in another company, so
		// this one's list stays put).
		ignored := createSecret(t, h, h.CreateCompany("Lenient Co"), map[string]any{"name": "Unknown fields ignored", "value": "v", "secret": 1})
		require.NotContains(t, ignored, "secret")
		res := h.Do("POST", base, map[string]any{"name": "Another", "key": "OPENAI_API_KEY", "value": "v"})
		require.Equal(t, http.StatusConflict, res.Status, "%s", res.Body)
		ext := createSecret(t, h, co, map[string]any{"name": "Vault ref", "managedMode": "external_reference", "externalRef": "vault://x"})
		require.EqualValues(t, 0, ext["latestVersion"])
	})

	res := h.Do("GET", base, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.NotContains(t, string(res.Body), "sk-crud-value-1")
	var list []map[string]any
	res.JSON(t, &list)
	require.Len(t, list, 2)

	res = h.Do("GET", "/api/secrets/"+id, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.NotContains(t, string(res.Body), "sk-crud-value-1")
	require.Equal(t, http.StatusNotFound, h.Do("GET", "/api/secrets/not-a-uuid", nil).Status)
	require.Equal(t, http.StatusNotFound, h.Do("GET", "/api/secrets/00000000-0000-0000-0000-000000000000", nil).Status)

	res = h.Do("PATCH", "/api/secrets/"+id, map[string]any{"name": "Renamed", "description": "new", "status": "disabled"})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, "Renamed", res.Map(t)["name"])
	require.Equal(t, "disabled", res.Map(t)["status"])
	require.Equal(t, "OPENAI_API_KEY", res.Map(t)["key"])
	res = h.Do("PATCH", "/api/secrets/"+id, map[string]any{"status": "deleted"})
	require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)

	res = h.Do("DELETE", "/api/secrets/"+id, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, "deleted", res.Map(t)["status"])
	var statuses []string
	rows, err := h.Kernel.Pool.Query(context.Background(), `SELECT status FROM ext_secrets.company_secret_versions WHERE secret_id = $1`, id)
	require.NoError(t, err)
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		statuses = append(statuses, s)
	}
	rows.Close()
	require.Equal(t, []string{"destroyed"}, statuses)
	require.Equal(t, http.StatusConflict, h.Do("POST", "/api/secrets/"+id+"/rotate", map[string]any{"value": "x"}).Status)
	res = h.Do("GET", base, nil)
	res.JSON(t, &list)
	require.Len(t, list, 1, "deleted secrets are not listed")
	// The key is free again once the secret is deleted.
	createSecret(t, h, co, map[string]any{"name": "OpenAI API key", "value": "v2"})

	res = h.Do("GET", "/api/companies/"+co+"/activity", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	for _, a := range []string{"secret.created", "secret.updated", "secret.deleted"} {
		require.Contains(t, string(res.Body), a)
	}
	require.NotContains(t, string(res.Body), "sk-crud-value-1")
}

func TestEncryptedAtRestAndRotate(t *testing.T) {
	t.Parallel()
	h := startSecrets(t)
	co := h.CreateCompany("Acme")
	const v1, v2 = "plaintext-canary-v1-7f3a", "plaintext-canary-v2-9b1c"
	sec := createSecret(t, h, co, map[string]any{"name": "db", "key": "DB_PASSWORD", "value": v1})
	id := sec["id"].(string)

	out := mustInvoke(t, h, "secrets.resolve", co, map[string]any{"companyId": co, "secretId": id, "version": 0, "requester": "test"})
	require.Equal(t, v1, out["value"])
	require.EqualValues(t, 1, out["version"])

	res := h.Do("POST", "/api/secrets/"+id+"/rotate", map[string]any{"value": v2})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.EqualValues(t, 2, res.Map(t)["latestVersion"])
	require.NotContains(t, string(res.Body), v2)
	require.Equal(t, http.StatusBadRequest, h.Do("POST", "/api/secrets/"+id+"/rotate", map[string]any{}).Status)

	out = mustInvoke(t, h, "secrets.resolve", co, map[string]any{"secretId": id, "version": 0})
	require.Equal(t, v2, out["value"])
	require.EqualValues(t, 2, out["version"])
	out = mustInvoke(t, h, "secrets.resolve", co, map[string]any{"secretId": id, "version": 1})
	require.Equal(t, v1, out["value"], "the previous version is kept")
	_, e := invoke(t, h, "secrets.resolve", co, map[string]any{"secretId": id, "version": 9})
	require.NotNil(t, e)
	require.Equal(t, http.StatusUnprocessableEntity, e.Status)

	var versions []string
	rows, err := h.Kernel.Pool.Query(context.Background(),
		`SELECT version || ':' || status FROM ext_secrets.company_secret_versions WHERE secret_id = $1 ORDER BY version`, id)
	require.NoError(t, err)
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		versions = append(versions, s)
	}
	rows.Close()
	require.Equal(t, []string{"1:previous", "2:current"}, versions)

	dump := dumpSchema(t, h)
	require.Contains(t, dump, "local_encrypted_v1")
	for _, v := range []string{v1, v2, base64.StdEncoding.EncodeToString([]byte(v1)), hex.EncodeToString([]byte(v1))} {
		require.NotContains(t, dump, v, "plaintext must appear in no column")
	}
	res = h.Do("GET", "/api/secrets/"+id+"/access-events?limit=2", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var events []map[string]any
	res.JSON(t, &events)
	require.Len(t, events, 2)
	require.Equal(t, "missing", events[0]["outcome"], "newest first")
	require.Equal(t, "success", events[1]["outcome"])
	res = h.Do("GET", "/api/companies/"+co+"/activity", nil)
	require.Contains(t, string(res.Body), "secret.rotated")
	require.NotContains(t, string(res.Body), v1)
	require.NotContains(t, string(res.Body), v2)
}

func TestRunTimeResolutionAndGrants(t *testing.T) {
	t.Parallel()
	h := startSecrets(t)
	co := h.CreateCompany("Acme")
	other := h.CreateCompany("Other")
	agent := h.CreateAgent(co, "Coder", "engineer")
	peer := h.CreateAgent(co, "Peer", "engineer")
	outsider := h.CreateAgent(other, "Outsider", "engineer")

	api := createSecret(t, h, co, map[string]any{"name": "API token", "key": "API_TOKEN", "value": "tok-1", "description": "the api"})
	apiID := api["id"].(string)
	off := createSecret(t, h, co, map[string]any{"name": "Off", "value": "off-1"})
	offID := off["id"].(string)
	require.Equal(t, http.StatusOK, h.Do("PATCH", "/api/secrets/"+offID, map[string]any{"status": "disabled"}).Status)
	foreign := createSecret(t, h, other, map[string]any{"name": "Foreign", "value": "foreign-1"})
	foreignID := foreign["id"].(string)

	t.Run("resolveEnv", func(t *testing.T) {
		out := mustInvoke(t, h, "secrets.resolveEnv", co, map[string]any{
			"companyId": co,
			"env": map[string]any{
				"LEGACY":    "plain-legacy",
				"PLAIN":     map[string]any{"type": "plain", "value": "plain-obj"},
				"TOKEN":     map[string]any{"type": "secret_ref", "secretId": apiID},
				"TOKEN_V1":  map[string]any{"type": "secret_ref", "secretId": apiID, "version": 1},
				"TOKEN_LTS": map[string]any{"type": "secret_ref", "secretId": apiID, "version": "latest"},
			},
			"consumer": map[string]any{"type": "run", "id": "run-1"},
		})
		require.Equal(t, map[string]any{"LEGACY": "plain-legacy", "PLAIN": "plain-obj", "TOKEN": "tok-1", "TOKEN_V1": "tok-1", "TOKEN_LTS": "tok-1"}, out["env"])

		cases := []struct {
			name string
			env  map[string]any
			want string
		}{
			{"other company", map[string]any{"FOREIGN": map[string]any{"type": "secret_ref", "secretId": foreignID}}, "FOREIGN"},
			{"disabled", map[string]any{"OFF": map[string]any{"type": "secret_ref", "secretId": offID}}, "OFF"},
			{"missing version", map[string]any{"OLD": map[string]any{"type": "secret_ref", "secretId": apiID, "version": 7}}, "OLD"},
			{"unknown secret", map[string]any{"NOPE": map[string]any{"type": "secret_ref", "secretId": "00000000-0000-0000-0000-000000000001"}}, "NOPE"},
			{"api key", map[string]any{"SERVICE_API_KEY": "x"}, "SERVICE_API_KEY"},
			{"service prefix", map[string]any{"SERVICE_RUN_ID": "x"}, "SERVICE_RUN_ID"},
			{"bad type", map[string]any{"T": map[string]any{"type": "magic"}}, "T"},
		}
		for _, tc := range cases {
			_, e := invoke(t, h, "secrets.resolveEnv", co, map[string]any{"env": tc.env, "consumer": map[string]any{"type": "agent", "id": agent.ID}})
			require.NotNil(t, e, tc.name)
			require.Equal(t, http.StatusUnprocessableEntity, e.Status, tc.name)
			require.Contains(t, e.Message, tc.want, tc.name)
			require.NotContains(t, e.Message, "foreign-1")
			require.NotContains(t, e.Message, "off-1")
		}
		_, e := invoke(t, h, "secrets.resolveEnv", co, map[string]any{"companyId": other, "env": map[string]any{}})
		require.NotNil(t, e)
		require.Equal(t, http.StatusForbidden, e.Status)
	})

	t.Run("bindings", func(t *testing.T) {
		cases := []struct {
			name   string
			body   map[string]any
			status int
		}{
			{"other company agent", map[string]any{"targetType": "agent", "targetId": outsider.ID}, 422},
			{"unknown agent", map[string]any{"targetType": "agent", "targetId": "00000000-0000-0000-0000-000000000002"}, 422},
			{"bad target type", map[string]any{"targetType": "galaxy", "targetId": "x"}, 400},
			{"bad selector", map[string]any{"targetType": "agent", "targetId": agent.ID, "versionSelector": "soon"}, 400},
			{"future version", map[string]any{"targetType": "agent", "targetId": agent.ID, "versionSelector": 5}, 422},
		}
		for _, tc := range cases {
			res := h.Do("POST", "/api/secrets/"+apiID+"/bindings", tc.body)
			require.Equal(t, tc.status, res.Status, "%s: %s", tc.name, res.Body)
		}
		res := h.Do("POST", "/api/secrets/"+apiID+"/bindings", map[string]any{"targetType": "agent", "targetId": agent.ID, "configPath": "env.API_TOKEN", "delivery": "api"})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		require.Equal(t, "latest", res.Map(t)["versionSelector"])
		res = h.Do("POST", "/api/secrets/"+apiID+"/bindings", map[string]any{"targetType": "agent", "targetId": agent.ID, "configPath": "env.API_TOKEN"})
		require.Equal(t, http.StatusConflict, res.Status, "%s", res.Body)
		res = h.Do("POST", "/api/secrets/"+offID+"/bindings", map[string]any{"targetType": "agent", "targetId": agent.ID, "versionSelector": 1})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		res = h.Do("POST", "/api/secrets/"+apiID+"/bindings", map[string]any{"targetType": "agent", "targetId": peer.ID})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		peerBinding := res.Map(t)["id"].(string)

		res = h.Do("GET", "/api/secrets/"+apiID+"/usage", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Len(t, res.Map(t)["bindings"], 2)
		require.Equal(t, http.StatusOK, h.Do("DELETE", "/api/secrets/"+apiID+"/bindings/"+peerBinding, nil).Status)
		require.Equal(t, http.StatusNotFound, h.Do("DELETE", "/api/secrets/"+apiID+"/bindings/"+peerBinding, nil).Status)
		require.Len(t, h.Do("GET", "/api/secrets/"+apiID+"/usage", nil).Map(t)["bindings"], 1)
	})

	t.Run("grantedForAgent", func(t *testing.T) {
		out := mustInvoke(t, h, "secrets.grantedForAgent", co, map[string]any{"agentId": agent.ID})
		require.Equal(t, []any{map[string]any{
			"key": "API_TOKEN", "name": "API token", "description": "the api", "delivery": "api",
			"projectionClass": "unclassified", "latestVersion": float64(1), "versionSelector": "latest", "resolvedVersion": float64(1),
		}}, out["secrets"], "disabled secrets are not listed")
		out = mustInvoke(t, h, "secrets.grantedForAgent", co, map[string]any{"agentId": peer.ID})
		require.Empty(t, out["secrets"])
		_, e := invoke(t, h, "secrets.grantedForAgent", co, map[string]any{"agentId": outsider.ID})
		require.NotNil(t, e)
		require.Equal(t, http.StatusNotFound, e.Status)
	})

	t.Run("valueForAgent", func(t *testing.T) {
		out := mustInvoke(t, h, "secrets.valueForAgent", co, map[string]any{"agentId": agent.ID, "key": "API_TOKEN", "runId": "run-9"})
		require.Equal(t, map[string]any{"key": "API_TOKEN", "value": "tok-1", "version": float64(1)}, out)

		cases := []struct {
			name   string
			in     map[string]any
			status int
			msg    string
		}{
			{"not granted", map[string]any{"agentId": peer.ID, "key": "API_TOKEN"}, 403, "Secret is not granted to this agent"},
			{"unknown key", map[string]any{"agentId": agent.ID, "key": "NOPE"}, 403, "Secret is not granted to this agent"},
			{"low trust", map[string]any{"agentId": agent.ID, "key": "API_TOKEN", "lowTrust": true}, 403, "Low-trust tokens cannot read secret values"},
			{"disabled", map[string]any{"agentId": agent.ID, "key": "OFF"}, 422, "OFF"},
		}
		for _, tc := range cases {
			_, e := invoke(t, h, "secrets.valueForAgent", co, tc.in)
			require.NotNil(t, e, tc.name)
			require.Equal(t, tc.status, e.Status, tc.name)
			require.Contains(t, e.Message, tc.msg, tc.name)
		}
		_, e := invoke(t, h, "secrets.valueForAgent", other, map[string]any{"agentId": agent.ID, "key": "API_TOKEN"})
		require.NotNil(t, e, "an agent of another company")
		require.Equal(t, http.StatusNotFound, e.Status)

		res := h.Do("GET", "/api/secrets/"+apiID+"/access-events", nil)
		var events []map[string]any
		res.JSON(t, &events)
		outcomes := map[string]int{}
		for _, ev := range events {
			outcomes[ev["outcome"].(string)]++
		}
		require.Equal(t, 2, outcomes["not_allowed"], "%v", outcomes)
		require.GreaterOrEqual(t, outcomes["success"], 4, "%v", outcomes)
		require.NotContains(t, string(res.Body), "tok-1")
		res = h.Do("GET", "/api/companies/"+co+"/activity", nil)
		require.Contains(t, string(res.Body), "secret.value_read")
		require.Contains(t, string(res.Body), "secret.binding_created")
		require.NotContains(t, string(res.Body), "tok-1")
	})

	t.Run("agents cannot use board routes", func(t *testing.T) {
		res := h.Do("GET", "/api/companies/"+co+"/secrets", nil, agent.As("")...)
		require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
		res = h.Do("GET", "/api/secrets/"+apiID, nil, agent.As("")...)
		require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
	})
}

func TestMasterKeyFromEnvironment(t *testing.T) {
	key := []byte("env-master-key-0123456789abcdef!")
	require.Len(t, key, 32)
	t.Setenv("SERVICE_SECRETS_MASTER_KEY", base64.StdEncoding.EncodeToString(key))
	h := startSecrets(t)
	co := h.CreateCompany("Acme")
	sec := createSecret(t, h, co, map[string]any{"name": "k", "value": "env-keyed-value"})
	require.Equal(t, "env-keyed-value", decryptVersion(t, h, key, sec["id"].(string), 1))
	_, err := os.Stat(filepath.Join(h.Config().Home, "extensions", "secrets", "master.key"))
	require.ErrorIs(t, err, os.ErrNotExist, "no key file when the environment holds the key")
}

func TestMasterKeyFromGeneratedFile(t *testing.T) {
	t.Setenv("SERVICE_SECRETS_MASTER_KEY", "")
	h := startSecrets(t)
	path := filepath.Join(h.Config().Home, "extensions", "secrets", "master.key")
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	require.Len(t, key, 32)
	co := h.CreateCompany("Acme")
	sec := createSecret(t, h, co, map[string]any{"name": "k", "value": "file-keyed-value"})
	require.Equal(t, "file-keyed-value", decryptVersion(t, h, key, sec["id"].(string), 1))
}
