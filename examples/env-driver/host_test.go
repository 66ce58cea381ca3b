package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	_ "github.com/keelhq/keel/adapters/beta_local"
	_ "github.com/keelhq/keel/extensions/agents"
	_ "github.com/keelhq/keel/extensions/environments"
	"github.com/keelhq/keel/sdk"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
	"github.com/keelhq/keel/sdktest"
)

// TestMain runs the tests; when the host re-executes this binary as a first-party
// extension (environments, agents, beta_local), sdktest.Main serves it instead.
func TestMain(m *testing.M) { sdktest.Main(m) }

// TestDriverThroughHost loads the built example as a plugin and uses its driver through
// the environments routes and methods: the capabilities list, config validation by schema
// and by the driver, probe, a lease with a workspace and a command, and a device login
// whose command runs in a box.
func TestDriverThroughHost(t *testing.T) {
	t.Parallel()
	h := sdktest.Start(t, sdktest.Options{Builtins: true, ExtensionDirs: []string{sdktest.BuildProcessExtension(t, ".")}})
	co := h.CreateCompany("Dirbox Co")
	base := "/api/companies/" + co + "/environments"
	do := func(want int, method, path string, body any) map[string]any {
		t.Helper()
		res := h.Do(method, path, body)
		require.Equal(t, want, res.Status, "%s %s: %s", method, path, res.Body)
		return res.Map(t)
	}
	caps := do(http.StatusOK, "GET", base+"/capabilities", nil)["drivers"].([]any)
	require.Len(t, caps, 2)
	box := caps[1].(map[string]any)
	require.Equal(t, "example.dirbox", box["driver"])
	require.Equal(t, "example.envdriver", box["pluginKey"])

	do(http.StatusUnprocessableEntity, "POST", base, map[string]any{"name": "Box", "driver": "example.dirbox", "config": map[string]any{}})
	res := do(http.StatusUnprocessableEntity, "POST", base, map[string]any{"name": "Box", "driver": "example.dirbox", "config": map[string]any{"root": "rel"}})
	require.Equal(t, "Invalid example.dirbox environment config: root must be an absolute path", res["error"])
	root := t.TempDir()
	e := do(http.StatusCreated, "POST", base, map[string]any{"name": "Box", "driver": "example.dirbox", "config": map[string]any{"root": root}})
	id := e["id"].(string)
	p := do(http.StatusOK, "POST", "/api/environments/"+id+"/probe", nil)
	require.Equal(t, "dirbox ready at "+root, p["message"])
	require.Equal(t, "fail", do(http.StatusOK, "POST", base+"/probe-config", map[string]any{"driver": "example.dirbox",
		"config": map[string]any{"root": filepath.Join(root, "missing")}})["status"])

	invoke := func(method string, in any) map[string]any {
		t.Helper()
		b, _ := json.Marshal(in)
		r, err := h.Supervisor.Invoke(context.Background(), "kernel", &hostv1.InvokeRequest{Method: method, InputJson: b, Actor: sdk.SystemActor(), CompanyId: co})
		require.NoError(t, err)
		require.Nil(t, r.Error, "%v", r.Error)
		var out map[string]any
		require.NoError(t, json.Unmarshal(r.OutputJson, &out))
		return out
	}
	l := invoke("environments.leases.acquire", map[string]any{"environmentId": id, "purpose": "run", "workspaceKey": "issue-7"})
	leaseID := l["id"].(string)
	require.Equal(t, "box-"+leaseID, l["providerLeaseId"])
	require.Equal(t, filepath.Join(root, "box-"+leaseID, "issue-7"), l["workspacePath"])
	out := invoke("environments.leases.execute", map[string]any{"leaseId": leaseID, "argv": []string{"printenv", "BOX_LEASE_ID"}})
	require.Equal(t, leaseID+"\n", out["stdout"])
	require.Equal(t, "released", invoke("environments.leases.release", map[string]any{"leaseId": leaseID})["status"])

	// A device login runs its command in a box; its output arrives when it ends. Without
	// an instance config the adapter's own CLI (codex, not installed here) is run.
	s := do(http.StatusCreated, "POST", "/api/companies/"+co+"/adapters/beta_local/login-sessions", map[string]any{"environmentId": id})
	path := "/api/companies/" + co + "/adapters/beta_local/login-sessions/" + s["sessionId"].(string)
	sdktest.WaitFor(t, 60*time.Second, func() bool { s = do(http.StatusOK, "GET", path, nil); return s["status"] == "failed" }, "the login to fail")
	require.Equal(t, map[string]any{"reason": "login_command_failed", "message": "Command not found: codex"}, s["failure"])
	// The running adapter takes its new instance config without a restart.
	fake := filepath.Join(t.TempDir(), "codex")
	require.NoError(t, os.WriteFile(fake, []byte("#!/bin/sh\necho 'Open https://auth.example/device and enter ABCD-EFGH'\necho 'Error: denied' >&2\nexit 1\n"), 0o755))
	do(http.StatusOK, "PATCH", "/api/adapters/beta_local", map[string]any{"config": map[string]any{"command": fake}})
	s = do(http.StatusCreated, "POST", "/api/companies/"+co+"/adapters/beta_local/login-sessions", map[string]any{"environmentId": id})
	path = "/api/companies/" + co + "/adapters/beta_local/login-sessions/" + s["sessionId"].(string)
	sdktest.WaitFor(t, 60*time.Second, func() bool { s = do(http.StatusOK, "GET", path, nil); return s["status"] == "failed" }, "the login to fail")
	require.Equal(t, "The login command exited with code 1: Error: denied", s["failure"].(map[string]any)["message"])
	lease := do(http.StatusOK, "GET", "/api/environment-leases/"+s["leaseId"].(string), nil)
	require.Equal(t, "example.dirbox", lease["driver"])
	require.Equal(t, "released", lease["status"])
}
