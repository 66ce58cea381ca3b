package packages_test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/host"
	"github.com/keelhq/keel/host/packages"
	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdktest"
)

// goCmd runs the go tool in dir, offline: everything a new extension needs is in the
// module cache keel itself was built from.
func goCmd(t *testing.T, dir string, env []string, args ...string) {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=mod -buildvcs=false")
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go %s in %s:\n%s", strings.Join(args, " "), dir, out)
}

// TestNewExtensionEndToEnd is `keel extension new` → build → its own test → pack →
// install through the Installer → load with host.LoadSource → answer on a second node
// that materialises the package from the database alone.
func TestNewExtensionEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and tests a generated module")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("needs the go tool")
	}
	t.Parallel()
	keelSrc, err := filepath.Abs("../..")
	require.NoError(t, err)
	work := t.TempDir()
	procDir, wasmDir := filepath.Join(work, "hello-proc"), filepath.Join(work, "hello-wasm")
	require.NoError(t, packages.Scaffold(packages.ScaffoldOptions{Dir: procDir, Name: "hello-proc", KeelSource: keelSrc}))
	require.NoError(t, packages.Scaffold(packages.ScaffoldOptions{Dir: wasmDir, Name: "hello-wasm", Wasm: true, KeelSource: keelSrc}))
	require.Error(t, packages.Scaffold(packages.ScaffoldOptions{Dir: procDir, Name: "hello-proc"}), "an existing extension is not overwritten")
	require.ErrorContains(t, packages.Scaffold(packages.ScaffoldOptions{Dir: t.TempDir(), Name: "Bad Name"}), "lowercase")

	// The process extension's own test runs it in a real host.
	goCmd(t, procDir, nil, "mod", "tidy")
	goCmd(t, procDir, nil, "vet", ".")
	goCmd(t, procDir, nil, "test", "-count=1", ".")
	goCmd(t, procDir, nil, "build", "-o", "hello-proc", ".")
	goCmd(t, wasmDir, nil, "mod", "tidy")
	goCmd(t, wasmDir, []string{"GOOS=wasip1", "GOARCH=wasm"}, "build", "-buildmode=c-shared", "-o", "hello-wasm.wasm", ".")

	h := sdktest.Start(t, sdktest.Options{})
	ctx := context.Background()
	digests := map[string]string{}
	for name, dir := range map[string]string{"hello_proc": procDir, "hello_wasm": wasmDir} {
		packed, err := packages.Pack(dir, packages.Limits{})
		require.NoError(t, err)
		switch packed.Manifest.Runtime.Kind {
		case sdk.RuntimeProcess:
			require.Regexp(t, "^[0-9a-f]{64}$", packed.Manifest.Runtime.SHA256, "pack writes the executable's sha256")
		case sdk.RuntimeWasm:
			require.Regexp(t, "^[0-9a-f]{64}$", packed.Manifest.Runtime.SHA256, "pack writes the module's sha256")
		}
		again, err := packages.Pack(dir, packages.Limits{})
		require.NoError(t, err)
		require.Equal(t, packed.Digest, again.Digest, "packing is deterministic")

		archive := writeFile(t, name+".tgz", packed.Archive)
		pkg, err := h.Packages.Install(ctx, packages.Request{PackageName: archive, IsLocalPath: true})
		require.NoError(t, err)
		require.Equal(t, packed.Digest, pkg.Digest, "the stored archive is the packed one")
		require.Equal(t, name, pkg.Manifest.Key)
		src, err := host.LoadSource(pkg.Dir)
		require.NoError(t, err)
		require.Equal(t, name, src.Manifest.Key)
		digests[name] = pkg.Digest
	}

	// A second node: its own data dir, the same database, no shared disk.
	node2 := newManager(t, h.Kernel)
	var dirs []string
	for _, d := range digests {
		pkg, err := node2.Materialise(ctx, d)
		require.NoError(t, err)
		dirs = append(dirs, pkg.Dir)
	}
	h2 := sdktest.Start(t, sdktest.Options{DatabaseURL: h.DatabaseURL, ExtensionDirs: dirs})
	require.NoError(t, h2.LoadErr)
	company := h2.CreateCompany("Packages Co")
	for _, route := range []string{"hello-proc", "hello-wasm"} {
		res := h2.Do("GET", "/api/companies/"+company+"/"+route+"/hello", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s: %s", route, res.Body)
		require.Equal(t, company, res.Map(t)["companyId"])
	}
}
