package agents_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	_ "github.com/keelhq/keel/extensions/secrets"
)

// TestAgentAdapterTypes checks the reference behaviour for adapter types: create, hire and
// patch refuse a type that is neither the spec's nor an installed adapter's (422 "Unknown
// adapter type: <type>"); the spec's types and installed external adapters are accepted.
func TestAgentAdapterTypes(t *testing.T) {
	t.Parallel()
	h := startAgents(t)
	company := h.CreateCompany("Adapter Types")
	base := "/api/companies/" + company

	for _, tc := range []struct {
		name, path, adapterType string
		status                  int
	}{
		{"create unknown", "/agents", "warp_drive", http.StatusUnprocessableEntity},
		{"hire unknown", "/agent-hires", "warp_drive", http.StatusUnprocessableEntity},
		{"create spec type", "/agents", "alpha_local", http.StatusCreated},
		{"hire spec type", "/agent-hires", "zeta_gateway", http.StatusCreated},
		{"create installed external adapter", "/agents", "fake", http.StatusCreated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := h.Do("POST", base+tc.path, map[string]any{"name": tc.name, "adapterType": tc.adapterType})
			require.Equal(t, tc.status, res.Status, "%s", res.Body)
			if tc.status == http.StatusUnprocessableEntity {
				msg := res.Map(t)["error"].(string)
				require.True(t, strings.HasPrefix(msg, "Unknown adapter type: "+tc.adapterType+" (known types: "), msg)
				for _, known := range []string{"alpha_local", "fake", "http", "process"} {
					require.Contains(t, msg, known)
				}
			}
		})
	}
	ag := createAgent(t, h, company, map[string]any{"name": "Switcher"})
	res := h.Do("PATCH", "/api/agents/"+ag["id"].(string), map[string]any{"adapterType": "warp_drive"})
	require.Equal(t, http.StatusUnprocessableEntity, res.Status, "%s", res.Body)
	require.Contains(t, res.Map(t)["error"], "Unknown adapter type: warp_drive (known types: ")
	res = h.Do("PATCH", "/api/agents/"+ag["id"].(string), map[string]any{"adapterType": "http"})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
}

// TestGatewayDeviceKey checks that a theta_gateway agent gets a generated Ed25519 device
// private key kept as a company secret: adapterConfig holds only a secret_ref (reads never
// show the key), the secret holds a PKCS#8 PEM, and disableDeviceAuth skips it.
func TestGatewayDeviceKey(t *testing.T) {
	t.Parallel()
	h := startAgents(t)
	company := h.CreateCompany("Gateway Keys")
	gw := createAgent(t, h, company, map[string]any{"name": "Gateway", "adapterType": "theta_gateway",
		"adapterConfig": map[string]any{"url": "wss://gateway.test/ws"}})
	conf := gw["adapterConfig"].(map[string]any)
	require.Equal(t, "wss://gateway.test/ws", conf["url"])
	ref, ok := conf["devicePrivateKeyPem"].(map[string]any)
	require.True(t, ok, "devicePrivateKeyPem is a secret reference: %v", conf)
	require.Equal(t, "secret_ref", ref["type"])
	require.Equal(t, "latest", ref["version"])
	secretID := ref["secretId"].(string)

	res := h.Do("GET", "/api/agents/"+gw["id"].(string), nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.NotContains(t, string(res.Body), "PRIVATE KEY")
	require.Equal(t, ref, res.Map(t)["adapterConfig"].(map[string]any)["devicePrivateKeyPem"])

	// The secret is a company secret of the agent's company holding an Ed25519 PKCS#8 key.
	res = h.Do("GET", "/api/secrets/"+secretID, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, company, res.Map(t)["companyId"])
	var versions string
	require.NoError(t, h.Kernel.Pool.QueryRow(t.Context(), `SELECT count(*)::text FROM ext_secrets.company_secret_versions
		WHERE secret_id = $1`, secretID).Scan(&versions))
	require.Equal(t, "1", versions)

	// A merge patch keeps the key; a hire gets one too; disableDeviceAuth skips it.
	res = h.Do("PATCH", "/api/agents/"+gw["id"].(string), map[string]any{"adapterConfig": map[string]any{"timeoutSec": 60}})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, ref, res.Map(t)["adapterConfig"].(map[string]any)["devicePrivateKeyPem"])
	res = h.Do("POST", "/api/companies/"+company+"/agent-hires", map[string]any{"name": "Hired Gateway", "adapterType": "theta_gateway",
		"adapterConfig": map[string]any{"url": "wss://gateway.test/ws"}})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	require.Contains(t, string(res.Body), `"secret_ref"`)
	require.NotContains(t, string(res.Body), "PRIVATE KEY")
	off := createAgent(t, h, company, map[string]any{"name": "No Device", "adapterType": "theta_gateway",
		"adapterConfig": map[string]any{"url": "wss://gateway.test/ws", "disableDeviceAuth": true}})
	require.NotContains(t, off["adapterConfig"], "devicePrivateKeyPem")

	// A plaintext key given by the caller is moved into a secret as well.
	pemKey := "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIBrS5y0Jx3k1Yc0h0XjCk2k7eM7Vq3lHqY4f2N2hJ6Vb\n-----END PRIVATE KEY-----\n"
	given := createAgent(t, h, company, map[string]any{"name": "Given Key", "adapterType": "theta_gateway",
		"adapterConfig": map[string]any{"url": "wss://gateway.test/ws", "devicePrivateKeyPem": pemKey}})
	require.Equal(t, "secret_ref", given["adapterConfig"].(map[string]any)["devicePrivateKeyPem"].(map[string]any)["type"])
	res = h.Do("POST", "/api/companies/"+company+"/agents", map[string]any{"name": "Bad Key", "adapterType": "theta_gateway",
		"adapterConfig": map[string]any{"devicePrivateKeyPem": "hunter2"}})
	require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
	require.NotContains(t, string(res.Body), "hunter2")
}
