package work_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

// TestMain runs the tests; when the host re-executes this binary as the work extension,
// sdktest.Main serves the extension instead.
func TestMain(m *testing.M) { sdktest.Main(m) }

// startWork starts a real host running the work extension as its own process.
func startWork(t *testing.T) *sdktest.Host {
	t.Helper()
	return sdktest.Start(t, sdktest.Options{Builtins: true})
}

func TestExtensionLoads(t *testing.T) {
	t.Parallel()
	h := startWork(t)
	res := h.Do("GET", "/api/plugins/work", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, "ready", res.Map(t)["status"], "%s", res.Body)
}
