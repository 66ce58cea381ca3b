package secrets_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

// TestCallsEnforceMethodCapabilities shows an extension that declares it uses secrets.*
// but not the secrets capability refused when it calls secrets.resolve through Calls.
func TestCallsEnforceMethodCapabilities(t *testing.T) {
	t.Parallel()
	probe := sdktest.BuildProcessExtension(t, "testdata/secretprobe")
	h := sdktest.Start(t, sdktest.Options{Builtins: true, ExtensionDirs: []string{probe}})
	require.NoError(t, h.LoadErr)
	company := h.CreateCompany("Probe Co")
	res := h.Do("POST", "/api/companies/"+company+"/secrets", map[string]any{"name": "DEPLOY_TOKEN", "value": "s3cret-value"})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	secretID, _ := res.Map(t)["id"].(string)
	require.NotEmpty(t, secretID)

	res = h.Do("GET", "/api/companies/"+company+"/secret-probe/"+secretID, nil)
	require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
	require.NotContains(t, string(res.Body), "s3cret-value")
	require.Equal(t, "capability_required", res.Map(t)["code"])
}
