package environments_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	_ "github.com/keelhq/keel/adapters/beta_local"
	_ "github.com/keelhq/keel/adapters/process"
	_ "github.com/keelhq/keel/extensions/agents"
	_ "github.com/keelhq/keel/extensions/environments"
	"github.com/keelhq/keel/sdk"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
	"github.com/keelhq/keel/sdktest"
)

// TestMain runs the tests; when the host re-executes this binary as an extension,
// sdktest.Main serves it instead.
func TestMain(m *testing.M) { sdktest.Main(m) }

// waitReady waits until an extension reports ready.
func waitReady(t testing.TB, h *sdktest.Host, key string) {
	t.Helper()
	sdktest.WaitFor(t, 60*time.Second, func() bool {
		res := h.Do("GET", "/api/plugins/"+key, nil)
		var m map[string]any
		return res.Status == http.StatusOK && json.Unmarshal(res.Body, &m) == nil && m["status"] == "ready"
	}, key+" to be ready")
}

func ok(t testing.TB, res *sdktest.Response, want int) map[string]any {
	t.Helper()
	require.Equal(t, want, res.Status, "%s", res.Body)
	return res.Map(t)
}

func list(t testing.TB, res *sdktest.Response) []map[string]any {
	t.Helper()
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var out []map[string]any
	res.JSON(t, &out)
	return out
}

func wantErr(t testing.TB, res *sdktest.Response, status int, message string) map[string]any {
	t.Helper()
	require.Equal(t, status, res.Status, "%s", res.Body)
	m := res.Map(t)
	if message != "" {
		require.Equal(t, message, m["error"], "%s", res.Body)
	}
	return m
}

// invoke calls a provided method as the kernel, across the process boundary.
func invoke(t testing.TB, h *sdktest.Host, method, companyID string, in any) (map[string]any, *hostv1.InvokeResponse) {
	t.Helper()
	b, err := json.Marshal(in)
	require.NoError(t, err)
	res, err := h.Supervisor.Invoke(context.Background(), "kernel", &hostv1.InvokeRequest{Method: method, InputJson: b,
		Actor: sdk.SystemActor(), CompanyId: companyID})
	require.NoError(t, err)
	if res.Error != nil {
		return nil, res
	}
	var out map[string]any
	require.NoError(t, json.Unmarshal(res.OutputJson, &out))
	return out, res
}

// TestEnvironments runs every environments, leases and device-login case against one host.
func TestEnvironments(t *testing.T) {
	t.Parallel()
	h := sdktest.Start(t, sdktest.Options{Builtins: true})
	for _, key := range []string{"environments", "agents", testDriverKey} {
		waitReady(t, h, key)
	}
	fake, err := filepath.Abs("testdata/codex-login")
	require.NoError(t, err)
	ok(t, h.Do("PATCH", "/api/adapters/beta_local", map[string]any{"config": map[string]any{"command": fake}}), http.StatusOK)

	t.Run("CRUD", func(t *testing.T) {
		t.Parallel()
		co := h.CreateCompany("Env CRUD")
		base := "/api/companies/" + co + "/environments"
		require.Empty(t, list(t, h.Do("GET", base, nil)))
		root := t.TempDir()
		e := ok(t, h.Do("POST", base, map[string]any{"name": "Laptop", "description": "my box",
			"config": map[string]any{"workspaceRoot": root, "env": map[string]any{"A": "1"}}}), http.StatusCreated)
		require.Equal(t, "local", e["driver"])
		require.Equal(t, "active", e["status"])
		require.Equal(t, co, e["companyId"])
		var acts []map[string]any
		h.Do("GET", "/api/companies/"+co+"/activity", nil).JSON(t, &acts)
		require.NotEmpty(t, acts)
		require.Equal(t, "environment.created", acts[0]["action"])
		id := e["id"].(string)
		require.Len(t, list(t, h.Do("GET", base, nil)), 1)
		require.Equal(t, "Laptop", ok(t, h.Do("GET", "/api/environments/"+id, nil), http.StatusOK)["name"])

		wantErr(t, h.Do("POST", base, map[string]any{"name": "laptop"}), http.StatusConflict,
			"An environment with this name already exists in the company")
		wantErr(t, h.Do("POST", base, map[string]any{"name": "X", "driver": "nope"}), http.StatusUnprocessableEntity,
			"Unknown environment driver: nope (known drivers: local, test.sandbox)")
		res := h.Do("POST", base, map[string]any{"name": "X", "config": map[string]any{"workspaceRoot": "relative/dir"}})
		wantErr(t, res, http.StatusUnprocessableEntity, "Invalid local environment config: workspaceRoot must be an absolute path")
		res = h.Do("POST", base, map[string]any{"name": "X", "config": map[string]any{"bogus": true}})
		require.Equal(t, http.StatusUnprocessableEntity, res.Status, "%s", res.Body)
		require.Equal(t, http.StatusBadRequest, h.Do("POST", base, map[string]any{"name": ""}).Status)
		require.Equal(t, http.StatusBadRequest, h.Do("POST", base, map[string]any{"name": "Y", "extra": 1}).Status)

		p := ok(t, h.Do("PATCH", "/api/environments/"+id, map[string]any{"name": "Desk", "description": nil, "status": "archived"}), http.StatusOK)
		require.Equal(t, "Desk", p["name"])
		require.Nil(t, p["description"])
		require.Equal(t, "archived", p["status"])
		require.Equal(t, http.StatusBadRequest, h.Do("PATCH", "/api/environments/"+id, map[string]any{"status": "gone"}).Status)
		wantErr(t, h.Do("PATCH", "/api/environments/"+id, map[string]any{"config": map[string]any{"workspaceRoot": "x"}}),
			http.StatusUnprocessableEntity, "Invalid local environment config: workspaceRoot must be an absolute path")

		probe := ok(t, h.Do("POST", "/api/environments/"+id+"/probe", nil), http.StatusOK)
		require.Equal(t, true, probe["ok"])
		require.Equal(t, "pass", probe["status"])
		require.NotNil(t, ok(t, h.Do("GET", "/api/environments/"+id, nil), http.StatusOK)["lastProbe"])

		wantErr(t, h.Do("GET", "/api/environments/"+"00000000-0000-0000-0000-000000000000", nil), http.StatusNotFound, "Environment not found")
		wantErr(t, h.Do("GET", "/api/environments/not-a-uuid", nil), http.StatusNotFound, "Environment not found")
		ok(t, h.Do("DELETE", "/api/environments/"+id, nil), http.StatusOK)
		wantErr(t, h.Do("GET", "/api/environments/"+id, nil), http.StatusNotFound, "Environment not found")
	})

	t.Run("CapabilitiesAndProbeConfig", func(t *testing.T) {
		t.Parallel()
		co := h.CreateCompany("Env Caps")
		base := "/api/companies/" + co + "/environments"
		caps := ok(t, h.Do("GET", base+"/capabilities", nil), http.StatusOK)
		drivers := caps["drivers"].([]any)
		require.Len(t, drivers, 2)
		require.Equal(t, "local", drivers[0].(map[string]any)["driver"])
		require.Equal(t, "builtin", drivers[0].(map[string]any)["source"])
		require.Equal(t, testDriverKey, drivers[1].(map[string]any)["pluginKey"])
		require.Equal(t, "plugin", drivers[1].(map[string]any)["source"])
		res := ok(t, h.Do("POST", base+"/probe-config", map[string]any{"driver": "local", "config": map[string]any{"workspaceRoot": t.TempDir()}}), http.StatusOK)
		require.Equal(t, "pass", res["status"])
		// A root under a file cannot be made: the probe fails, it is not an error.
		file := filepath.Join(t.TempDir(), "f")
		require.NoError(t, os.WriteFile(file, nil, 0o600))
		res = ok(t, h.Do("POST", base+"/probe-config", map[string]any{"config": map[string]any{"workspaceRoot": filepath.Join(file, "x")}}), http.StatusOK)
		require.Equal(t, false, res["ok"])
		require.Equal(t, "fail", res["status"])
		wantErr(t, h.Do("POST", base+"/probe-config", map[string]any{"config": map[string]any{"workspaceRoot": "rel"}}),
			http.StatusUnprocessableEntity, "Invalid local environment config: workspaceRoot must be an absolute path")
		wantErr(t, h.Do("POST", base+"/probe-config", map[string]any{"driver": "nope"}), http.StatusUnprocessableEntity,
			"Unknown environment driver: nope (known drivers: local, test.sandbox)")
	})

	t.Run("Access", func(t *testing.T) {
		t.Parallel()
		co := h.CreateCompany("Env Access")
		other := h.CreateCompany("Env Access Other")
		e := ok(t, h.Do("POST", "/api/companies/"+co+"/environments", map[string]any{"name": "A"}), http.StatusCreated)
		agent := h.CreateAgent(co, "Env Agent", "engineer")
		as := agent.As("")
		for _, c := range []struct{ method, path string }{
			{"GET", "/api/companies/" + co + "/environments"},
			{"POST", "/api/companies/" + co + "/environments"},
			{"GET", "/api/companies/" + co + "/environments/capabilities"},
			{"POST", "/api/companies/" + co + "/environments/probe-config"},
			{"GET", "/api/environments/" + e["id"].(string)},
			{"PATCH", "/api/environments/" + e["id"].(string)},
			{"DELETE", "/api/environments/" + e["id"].(string)},
			{"POST", "/api/environments/" + e["id"].(string) + "/probe"},
			{"GET", "/api/environments/" + e["id"].(string) + "/leases"},
			{"POST", "/api/companies/" + co + "/adapters/beta_local/login-sessions"},
		} {
			res := h.Do(c.method, c.path, map[string]any{"name": "B"}, as...)
			require.Equal(t, http.StatusForbidden, res.Status, "%s %s: %s", c.method, c.path, res.Body)
		}
		// Another company's environment cannot be used for a login.
		oe := ok(t, h.Do("POST", "/api/companies/"+other+"/environments", map[string]any{"name": "O"}), http.StatusCreated)
		m := wantErr(t, h.Do("POST", "/api/companies/"+co+"/adapters/beta_local/login-sessions", map[string]any{"environmentId": oe["id"]}),
			http.StatusForbidden, "Environment belongs to another company")
		require.Equal(t, "environment_company_mismatch", m["code"])
	})

	t.Run("Leases", func(t *testing.T) {
		t.Parallel()
		co := h.CreateCompany("Env Leases")
		root := t.TempDir()
		e := ok(t, h.Do("POST", "/api/companies/"+co+"/environments", map[string]any{"name": "L", "config": map[string]any{"workspaceRoot": root}}), http.StatusCreated)
		id := e["id"].(string)
		key := "issue-1"
		l, res := invoke(t, h, "environments.leases.acquire", co, map[string]any{"environmentId": id, "purpose": "run", "ttlSeconds": 1, "workspaceKey": key})
		require.Nil(t, res.Error)
		require.Equal(t, "active", l["status"])
		require.Equal(t, filepath.Join(root, "leases", l["id"].(string), key), l["workspacePath"])
		require.DirExists(t, l["workspacePath"].(string))
		leaseID := l["id"].(string)
		// The reaper expires it once its second has passed.
		sdktest.WaitFor(t, 30*time.Second, func() bool {
			return ok(t, h.Do("GET", "/api/environment-leases/"+leaseID, nil), http.StatusOK)["status"] == "expired"
		}, "the lease to expire")
		require.NotNil(t, ok(t, h.Do("GET", "/api/environment-leases/"+leaseID, nil), http.StatusOK)["releasedAt"])

		l2, _ := invoke(t, h, "environments.leases.acquire", co, map[string]any{"environmentId": id, "purpose": "run"})
		require.Len(t, list(t, h.Do("GET", "/api/environments/"+id+"/leases", nil)), 2)
		require.Len(t, list(t, h.Do("GET", "/api/environments/"+id+"/leases?status=active", nil)), 1)
		require.Equal(t, http.StatusBadRequest, h.Do("GET", "/api/environments/"+id+"/leases?status=bogus", nil).Status)
		require.EqualValues(t, 1, ok(t, h.Do("GET", "/api/environments/"+id, nil), http.StatusOK)["activeLeaseCount"])
		wantErr(t, h.Do("DELETE", "/api/environments/"+id, nil), http.StatusConflict, "Environment has active leases; release them before deleting it")
		// Workspaces and commands inside the lease (an argument list; stdin and env handed over).
		dir := filepath.Join(root, "leases", l2["id"].(string))
		ws, res := invoke(t, h, "environments.leases.realizeWorkspace", co, map[string]any{"leaseId": l2["id"], "key": "issue-2"})
		require.Nil(t, res.Error)
		require.Equal(t, filepath.Join(dir, "issue-2"), ws["path"])
		_, res = invoke(t, h, "environments.leases.realizeWorkspace", co, map[string]any{"leaseId": l2["id"], "key": "../up"})
		require.EqualValues(t, http.StatusBadRequest, res.Error.Status)
		out, res := invoke(t, h, "environments.leases.execute", co, map[string]any{"leaseId": l2["id"], "argv": []string{"pwd"}})
		require.Nil(t, res.Error)
		require.Equal(t, dir+"\n", out["stdout"])
		out, _ = invoke(t, h, "environments.leases.execute", co, map[string]any{"leaseId": l2["id"], "argv": []string{"cat"}, "stdin": "hi; rm -rf /"})
		require.Equal(t, "hi; rm -rf /\n", out["stdout"])
		out, _ = invoke(t, h, "environments.leases.execute", co, map[string]any{"leaseId": l2["id"], "argv": []string{"printenv", "ONLY_HERE"},
			"env": map[string]string{"ONLY_HERE": "yes"}, "cwd": ws["path"]})
		require.Equal(t, "yes\n", out["stdout"])
		out, _ = invoke(t, h, "environments.leases.execute", co, map[string]any{"leaseId": l2["id"], "argv": []string{"sh", "-c", "exit 3"}})
		require.EqualValues(t, 3, out["exitCode"])
		_, res = invoke(t, h, "environments.leases.execute", co, map[string]any{"leaseId": l2["id"], "argv": []string{"/no/such/cli"}})
		require.EqualValues(t, http.StatusUnprocessableEntity, res.Error.Status)
		require.Equal(t, "Command not found: /no/such/cli", res.Error.Message)
		r, _ := invoke(t, h, "environments.leases.release", co, map[string]any{"leaseId": l2["id"]})
		require.Equal(t, "released", r["status"])
		_, res = invoke(t, h, "environments.leases.execute", co, map[string]any{"leaseId": l2["id"], "argv": []string{"pwd"}})
		require.EqualValues(t, http.StatusConflict, res.Error.Status)
		require.Equal(t, "Environment lease is released", res.Error.Message)
		require.DirExists(t, dir, "a release keeps the lease's directory")
		d, res := invoke(t, h, "environments.leases.destroy", co, map[string]any{"leaseId": l2["id"]})
		require.Nil(t, res.Error)
		require.Equal(t, "released", d["status"])
		require.NoDirExists(t, dir, "a destroy removes it")
		// Another company cannot reach the lease.
		_, res = invoke(t, h, "environments.leases.release", h.CreateCompany("Env Leases Other"), map[string]any{"leaseId": l2["id"]})
		require.NotNil(t, res.Error)
		require.EqualValues(t, http.StatusNotFound, res.Error.Status)
		// An archived environment takes no lease.
		ok(t, h.Do("PATCH", "/api/environments/"+id, map[string]any{"status": "archived"}), http.StatusOK)
		_, res = invoke(t, h, "environments.leases.acquire", co, map[string]any{"environmentId": id, "purpose": "run"})
		require.NotNil(t, res.Error)
		require.Equal(t, "Environment is not active", res.Error.Message)
		wantErr(t, h.Do("GET", "/api/environment-leases/nope", nil), http.StatusNotFound, "Environment lease not found")
		ok(t, h.Do("DELETE", "/api/environments/"+id, nil), http.StatusOK)
		wantErr(t, h.Do("GET", "/api/environment-leases/"+leaseID, nil), http.StatusNotFound, "Environment lease not found")
	})

	t.Run("PluginDriver", func(t *testing.T) {
		t.Parallel()
		co := h.CreateCompany("Env Plugin")
		base := "/api/companies/" + co + "/environments"
		wantErr(t, h.Do("POST", base, map[string]any{"name": "S", "driver": "test.sandbox", "config": map[string]any{"region": 5}}),
			http.StatusUnprocessableEntity, "")
		wantErr(t, h.Do("POST", base, map[string]any{"name": "S", "driver": "test.sandbox", "config": map[string]any{"region": "mars"}}),
			http.StatusUnprocessableEntity, "Invalid test.sandbox environment config: region mars is not served")
		e := ok(t, h.Do("POST", base, map[string]any{"name": "S", "driver": "test.sandbox", "config": map[string]any{"region": "eu"}}), http.StatusCreated)
		require.Equal(t, "test.sandbox", e["driver"])
		p := ok(t, h.Do("POST", "/api/environments/"+e["id"].(string)+"/probe", nil), http.StatusOK)
		require.Equal(t, "pass", p["status"])
		require.Equal(t, "sandbox eu is up", p["message"])
		key := "w"
		l, res := invoke(t, h, "environments.leases.acquire", co, map[string]any{"environmentId": e["id"], "purpose": "run", "workspaceKey": key})
		require.Nil(t, res.Error)
		require.Equal(t, "sbx-"+l["id"].(string), l["providerLeaseId"])
		require.Equal(t, "/sandbox/sbx-"+l["id"].(string)+"/w", l["workspacePath"])
		r, _ := invoke(t, h, "environments.leases.release", co, map[string]any{"leaseId": l["id"]})
		require.Equal(t, "released", r["status"])
	})

	// login starts a device login in a new company with a local environment whose commands
	// get FAKE_CODEX_LOGIN=mode; it returns the company, the environment's root and the session.
	login := func(t *testing.T, name, mode string, ttl int) (string, string, map[string]any) {
		co := h.CreateCompany(name)
		root := t.TempDir()
		e := ok(t, h.Do("POST", "/api/companies/"+co+"/environments", map[string]any{"name": "Login box",
			"config": map[string]any{"workspaceRoot": root, "env": map[string]any{"FAKE_CODEX_LOGIN": mode}}}), http.StatusCreated)
		body := map[string]any{"environmentId": e["id"]}
		if ttl > 0 {
			body["ttlSeconds"] = ttl
		}
		s := ok(t, h.Do("POST", "/api/companies/"+co+"/adapters/beta_local/login-sessions", body), http.StatusCreated)
		require.Equal(t, e["id"], s["environmentId"])
		return co, root, s
	}
	session := func(t *testing.T, co, id string) map[string]any {
		return ok(t, h.Do("GET", "/api/companies/"+co+"/adapters/beta_local/login-sessions/"+id, nil), http.StatusOK)
	}
	waitStatus := func(t *testing.T, co, id, status string, timeout time.Duration) map[string]any {
		var s map[string]any
		sdktest.WaitFor(t, timeout, func() bool { s = session(t, co, id); return s["status"] == status }, "login "+status)
		return s
	}

	t.Run("DeviceLoginSucceeds", func(t *testing.T) {
		t.Parallel()
		co, root, s := login(t, "Login OK", "success", 0)
		id := s["sessionId"].(string)
		require.Contains(t, []any{"starting", "waiting_for_user"}, s["status"])
		s = waitStatus(t, co, id, "waiting_for_user", 60*time.Second)
		require.Equal(t, map[string]any{"url": "https://auth.openai.com/codex/device", "code": "QX7T-4KPMW"}, s["prompt"])
		require.Nil(t, s["failure"])
		// One in flight per company and adapter.
		envID := s["environmentId"]
		res := h.Do("POST", "/api/companies/"+co+"/adapters/beta_local/login-sessions", map[string]any{"environmentId": envID})
		wantErr(t, res, http.StatusConflict, "A device login for this adapter is already in flight")
		// The lease holds the environment while the CLI waits.
		leaseID := s["leaseId"].(string)
		require.Equal(t, "active", ok(t, h.Do("GET", "/api/environment-leases/"+leaseID, nil), http.StatusOK)["status"])
		require.NoError(t, os.WriteFile(filepath.Join(root, "leases", leaseID, "approve"), nil, 0o600))
		s = waitStatus(t, co, id, "authenticated", 60*time.Second)
		require.Nil(t, s["prompt"])
		sdktest.WaitFor(t, 30*time.Second, func() bool {
			return ok(t, h.Do("GET", "/api/environment-leases/"+leaseID, nil), http.StatusOK)["status"] == "released"
		}, "the login's lease to be released")
		// The slot is free again.
		s2 := ok(t, h.Do("POST", "/api/companies/"+co+"/adapters/beta_local/login-sessions", map[string]any{"environmentId": envID}), http.StatusCreated)
		ok(t, h.Do("POST", "/api/companies/"+co+"/adapters/beta_local/login-sessions/"+s2["sessionId"].(string)+"/cancel", nil), http.StatusOK)
	})

	t.Run("DeviceLoginFails", func(t *testing.T) {
		t.Parallel()
		co, _, s := login(t, "Login Fail", "fail", 0)
		s = waitStatus(t, co, s["sessionId"].(string), "failed", 60*time.Second)
		f := s["failure"].(map[string]any)
		require.Equal(t, "login_failed", f["reason"])
		require.Equal(t, "The login command exited with code 1: Error logging in with device code: device code expired", f["message"])
	})

	t.Run("DeviceLoginCancel", func(t *testing.T) {
		t.Parallel()
		co, _, s := login(t, "Login Cancel", "hang", 0)
		id := s["sessionId"].(string)
		waitStatus(t, co, id, "waiting_for_user", 60*time.Second)
		c := ok(t, h.Do("POST", "/api/companies/"+co+"/adapters/beta_local/login-sessions/"+id+"/cancel", nil), http.StatusOK)
		require.Equal(t, "cancelled", c["status"])
		require.Nil(t, c["prompt"])
		l := ok(t, h.Do("GET", "/api/environment-leases/"+c["leaseId"].(string), nil), http.StatusOK)
		require.Equal(t, "released", l["status"])
		// Cancelling again returns the session as it is.
		require.Equal(t, "cancelled", ok(t, h.Do("POST", "/api/companies/"+co+"/adapters/beta_local/login-sessions/"+id+"/cancel", nil), http.StatusOK)["status"])
	})

	t.Run("DeviceLoginTTL", func(t *testing.T) {
		t.Parallel()
		co, _, s := login(t, "Login TTL", "hang", 60)
		s = waitStatus(t, co, s["sessionId"].(string), "timed_out", 120*time.Second)
		require.Equal(t, "timed_out", s["failure"].(map[string]any)["reason"])
	})

	t.Run("DeviceLoginRules", func(t *testing.T) {
		t.Parallel()
		co := h.CreateCompany("Login Rules")
		e := ok(t, h.Do("POST", "/api/companies/"+co+"/environments", map[string]any{"name": "R"}), http.StatusCreated)
		base := "/api/companies/" + co + "/adapters/"
		for _, typ := range []string{"process", "alpha_local", "nope"} {
			wantErr(t, h.Do("POST", base+typ+"/login-sessions", map[string]any{"environmentId": e["id"]}), http.StatusBadRequest,
				fmt.Sprintf(`Adapter "%s" does not support a device login.`, typ))
		}
		for _, body := range []any{
			map[string]any{},
			map[string]any{"environmentId": "nope"},
			map[string]any{"environmentId": e["id"], "ttlSeconds": 59},
			map[string]any{"environmentId": e["id"], "ttlSeconds": 86401},
			map[string]any{"environmentId": e["id"], "ttlSeconds": 90.5},
			map[string]any{"environmentId": e["id"], "ttlSeconds": "90"},
			map[string]any{"environmentId": e["id"], "extra": true},
		} {
			wantErr(t, h.Do("POST", base+"beta_local/login-sessions", body), http.StatusBadRequest, "The device login start request is invalid.")
		}
		wantErr(t, h.Do("POST", base+"beta_local/login-sessions", map[string]any{"environmentId": "00000000-0000-0000-0000-000000000000"}),
			http.StatusNotFound, "Environment not found")
		// A login whose process went away (no heartbeat for 30 s) ends as interrupted and
		// frees the slot.
		ghost := uuid.NewString()
		_, err := h.Kernel.Pool.Exec(context.Background(), `INSERT INTO ext_environments.adapter_login_sessions
			(id, company_id, environment_id, adapter_type, started_by_user_id, expires_at, created_at, updated_at)
			VALUES ($1, $2, $3, 'beta_local', 'someone', now() + interval '1 hour', now() - interval '1 minute', now() - interval '1 minute')`,
			ghost, co, e["id"])
		require.NoError(t, err)
		sdktest.WaitFor(t, 30*time.Second, func() bool {
			var status, reason string
			err := h.Kernel.Pool.QueryRow(context.Background(), `SELECT status, coalesce(failure_reason, '') FROM ext_environments.adapter_login_sessions
				WHERE id = $1`, ghost).Scan(&status, &reason)
			return err == nil && status == "failed" && reason == "interrupted"
		}, "the orphaned login to be interrupted")
		ok(t, h.Do("PATCH", "/api/environments/"+e["id"].(string), map[string]any{"status": "archived"}), http.StatusOK)
		wantErr(t, h.Do("POST", base+"beta_local/login-sessions", map[string]any{"environmentId": e["id"]}), http.StatusConflict, "Environment is not active")
		wantErr(t, h.Do("GET", base+"beta_local/login-sessions/00000000-0000-0000-0000-000000000000", nil), http.StatusNotFound, "Login session not found")
		wantErr(t, h.Do("POST", base+"beta_local/login-sessions/nope/cancel", nil), http.StatusNotFound, "Login session not found")
	})
}
