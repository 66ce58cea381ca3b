package folders_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	_ "github.com/keelhq/keel/extensions/agents"
	_ "github.com/keelhq/keel/extensions/folders"
	_ "github.com/keelhq/keel/extensions/routines"
	_ "github.com/keelhq/keel/extensions/secrets"
	_ "github.com/keelhq/keel/extensions/work"
	extensionv1 "github.com/keelhq/keel/sdk/proto/extension/v1"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
	"github.com/keelhq/keel/sdktest"
)

// TestMain runs the tests; when the host re-executes this binary as an extension,
// sdktest.Main serves it instead.
func TestMain(m *testing.M) { sdktest.Main(m) }

// ok requires a status and decodes an object.
func ok(t testing.TB, res *sdktest.Response, want int) map[string]any {
	t.Helper()
	require.Equal(t, want, res.Status, "%s", res.Body)
	return res.Map(t)
}

// wantErr checks an API error's status and text.
func wantErr(t testing.TB, res *sdktest.Response, status int, message string) {
	t.Helper()
	require.Equal(t, status, res.Status, "%s", res.Body)
	require.Equal(t, message, res.Map(t)["error"], "%s", res.Body)
}

// call invokes a provided method as the kernel.
func call(t testing.TB, h *sdktest.Host, method, companyID string, input any) (json.RawMessage, *extensionv1.Error) {
	t.Helper()
	in, err := json.Marshal(input)
	require.NoError(t, err)
	res, err := h.Supervisor.Invoke(context.Background(), "kernel", &hostv1.InvokeRequest{
		Method: method, InputJson: in, Actor: &extensionv1.Actor{Type: "system"}, CompanyId: companyID})
	require.NoError(t, err)
	return res.OutputJson, res.Error
}
