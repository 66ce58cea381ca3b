package sdk_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestModuleStandsAlone proves the SDK is a Go module of its own: it builds and vets from
// its own go.mod (no workspace, no replace of the host), and nothing it or its tests
// import pulls in the host's HTTP framework, job queue or wasm runtime, or a host package.
func TestModuleStandsAlone(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the module")
	}
	goCmd := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "go %s: %s", strings.Join(args, " "), out)
		return string(out)
	}
	mod := strings.TrimSpace(goCmd("list", "-m"))
	require.Equal(t, "github.com/keelhq/keel/sdk", mod)
	goCmd("build", "./...")
	goCmd("vet", "./...")
	deps := goCmd("list", "-deps", "-test", "./...")
	for _, dep := range strings.Fields(deps) {
		for _, heavy := range []string{"github.com/gofiber/", "github.com/riverqueue/", "github.com/tetratelabs/wazero",
			"github.com/keelhq/keel/host", "github.com/keelhq/keel/kernel", "github.com/keelhq/keel/extensions"} {
			require.False(t, strings.HasPrefix(dep, heavy), "the SDK module depends on %s", dep)
		}
	}
	require.NotContains(t, goCmd("list", "-m", "all"), "github.com/keelhq/keel ", "the SDK module requires the host module")
}
