package host_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/host"
	"github.com/keelhq/keel/sdktest"
)

func TestMain(m *testing.M) { sdktest.Main(m) }

func TestManifestLoading(t *testing.T) {
	t.Parallel()

	t.Run("RejectsUnknownManifestField", func(t *testing.T) {
		t.Parallel()
		_, err := host.LoadSource("testdata/unknown-field")
		require.ErrorContains(t, err, "bogus")
	})

	t.Run("RefusesRouteCollisionAtLoad", func(t *testing.T) {
		t.Parallel()
		notes := sdktest.BuildProcessExtension(t, "../examples/process-notes")
		h := sdktest.Start(t, sdktest.Options{ExtensionDirs: []string{notes, "testdata/collide-a", "testdata/collide-b"}, ExpectFailures: true})
		require.Error(t, h.LoadErr)
		require.ErrorContains(t, h.LoadErr, "route collision")

		for key, want := range map[string]string{
			"test.collide_a": "GET /api/companies/{companyId}/notes (test.collide_a) conflicts with GET /api/companies/{companyId}/notes (example.notes)",
			"test.collide_b": "GET /api/health (test.collide_b) conflicts with GET /api/health (kernel)",
		} {
			res := h.Do("GET", "/api/plugins/"+key, nil)
			require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
			rec := res.Map(t)
			require.Equal(t, "error", rec["status"])
			require.Contains(t, rec["lastError"], want)
		}
		// The winners keep their routes; the host keeps serving.
		company := h.CreateCompany("Collision Co")
		require.Equal(t, http.StatusOK, h.Do("GET", "/api/companies/"+company+"/notes", nil).Status)
		require.Equal(t, http.StatusOK, h.Do("GET", "/api/health", nil).Status)
	})
}

func TestStartErrors(t *testing.T) {
	t.Parallel()

	t.Run("PortTaken", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer ln.Close()
		port := ln.Addr().(*net.TCPAddr).Port
		_, err = host.Start(context.Background(), host.Config{Home: t.TempDir(), Port: port, DatabaseURL: "postgres://unused"}, nil)
		require.ErrorContains(t, err, fmt.Sprintf("port %d on 127.0.0.1 is already in use", port))
	})

	t.Run("LocalTrustedNeedsLoopback", func(t *testing.T) {
		t.Parallel()
		_, err := host.Start(context.Background(), host.Config{Home: t.TempDir(), Host: "0.0.0.0", Port: 0}, nil)
		require.ErrorContains(t, err, "local_trusted mode binds loopback only")
	})
}

// TestKillLeavesNoProcess runs the real keel binary with its embedded PostgreSQL and an
// extension process, kills it with SIGKILL and checks that nothing it started survives.
func TestKillLeavesNoProcess(t *testing.T) {
	t.Parallel()
	bin := buildKeel(t)
	notes := sdktest.BuildProcessExtension(t, "../examples/process-notes")
	home := t.TempDir()
	require.NoError(t, os.Chmod(home, 0o755))
	port := freePort(t)
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(os.Environ(), "SERVICE_HOME="+home, "SERVICE_PORT="+strconv.Itoa(port), "SERVICE_EXTENSIONS_PATH="+notes, "DATABASE_URL=")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })

	url := fmt.Sprintf("http://127.0.0.1:%d/api/health", port)
	sdktest.WaitFor(t, 30*time.Second, func() bool {
		res, err := http.Get(url)
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	}, "keel to become healthy")
	var children []int
	sdktest.WaitFor(t, 10*time.Second, func() bool {
		children = descendants(cmd.Process.Pid)
		return len(children) >= 2 // postgres and the extension, at least
	}, "postgres and the extension process to be running")

	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_, _ = cmd.Process.Wait()
	sdktest.WaitFor(t, 15*time.Second, func() bool {
		for _, pid := range children {
			if alive(pid) {
				return false
			}
		}
		return true
	}, fmt.Sprintf("every child of keel (%v) to exit", children))
}

func buildKeel(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "keel")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/keel")
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", b)
	return out
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// descendants lists every process below pid, from /proc.
func descendants(root int) []int {
	parent := map[int]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f, err := os.Open(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "PPid:"); ok {
				parent[pid], _ = strconv.Atoi(strings.TrimSpace(v))
			}
		}
		f.Close()
	}
	var out []int
	var walk func(int)
	walk = func(p int) {
		for pid, pp := range parent {
			if pp == p {
				out = append(out, pid)
				walk(pid)
			}
		}
	}
	walk(root)
	return out
}

func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// A zombie waiting for its reaper is already dead.
	fields := strings.Fields(string(b))
	return len(fields) > 2 && fields[2] != "Z"
}
