package secrets_test

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	_ "github.com/keelhq/keel/extensions/secrets"
	"github.com/keelhq/keel/sdk"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
	"github.com/keelhq/keel/sdktest"
)

// TestMain runs the tests; when the host re-executes this binary as the secrets extension,
// sdktest.Main serves the extension instead.
func TestMain(m *testing.M) { sdktest.Main(m) }

// startSecrets starts a real host running the secrets extension as its own process.
func startSecrets(t *testing.T) *sdktest.Host {
	t.Helper()
	return sdktest.Start(t, sdktest.Options{Builtins: true})
}

// createSecret creates a secret through the API and returns its record.
func createSecret(t *testing.T, h *sdktest.Host, companyID string, body map[string]any) map[string]any {
	t.Helper()
	res := h.Do("POST", "/api/companies/"+companyID+"/secrets", body)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	return res.Map(t)
}

// invoke calls a provided method the way the kernel does and returns its output or error.
func invoke(t *testing.T, h *sdktest.Host, method, companyID string, input any) (json.RawMessage, *sdk.Error) {
	t.Helper()
	in, err := json.Marshal(input)
	require.NoError(t, err)
	res, err := h.Supervisor.Invoke(context.Background(), "kernel", &hostv1.InvokeRequest{
		Method: method, InputJson: in, CompanyId: companyID, Actor: sdk.SystemActor(),
	})
	require.NoError(t, err)
	if res.Error != nil {
		return nil, sdk.FromProtoError(res.Error).(*sdk.Error)
	}
	return res.OutputJson, nil
}

// mustInvoke is invoke that fails the test on an error and decodes the output.
func mustInvoke(t *testing.T, h *sdktest.Host, method, companyID string, input any) map[string]any {
	t.Helper()
	out, e := invoke(t, h, method, companyID, input)
	require.Nil(t, e, "%s: %v", method, e)
	var m map[string]any
	require.NoError(t, json.Unmarshal(out, &m))
	return m
}

// dumpSchema returns every row of every ext_secrets table as text, for plaintext checks.
func dumpSchema(t *testing.T, h *sdktest.Host) string {
	t.Helper()
	ctx := context.Background()
	var all string
	for _, table := range []string{"company_secrets", "company_secret_versions", "company_secret_bindings", "secret_access_events"} {
		rows, err := h.Kernel.Pool.Query(ctx, fmt.Sprintf(`SELECT t::text FROM ext_secrets.%s t`, table))
		require.NoError(t, err)
		for rows.Next() {
			var s string
			require.NoError(t, rows.Scan(&s))
			all += s + "\n"
		}
		require.NoError(t, rows.Err())
		rows.Close()
	}
	return all
}

// decryptVersion reads a version's material through the superuser pool and decrypts it
// with key, independently of the extension's code.
func decryptVersion(t *testing.T, h *sdktest.Host, key []byte, secretID string, version int) string {
	t.Helper()
	var m struct {
		Scheme, IV, Tag, Ciphertext string
	}
	require.NoError(t, h.Kernel.Pool.QueryRow(context.Background(),
		`SELECT material FROM ext_secrets.company_secret_versions WHERE secret_id = $1 AND version = $2`, secretID, version).Scan(&m))
	require.Equal(t, "local_encrypted_v1", m.Scheme)
	iv, err := base64.StdEncoding.DecodeString(m.IV)
	require.NoError(t, err)
	tag, err := base64.StdEncoding.DecodeString(m.Tag)
	require.NoError(t, err)
	ct, err := base64.StdEncoding.DecodeString(m.Ciphertext)
	require.NoError(t, err)
	block, err := aes.NewCipher(key)
	require.NoError(t, err)
	gcm, err := cipher.NewGCM(block)
	require.NoError(t, err)
	pt, err := gcm.Open(nil, iv, append(ct, tag...), []byte(fmt.Sprintf("keel-secret:%s:%d", secretID, version)))
	require.NoError(t, err)
	return string(pt)
}
