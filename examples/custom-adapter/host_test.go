package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	_ "github.com/keelhq/keel/extensions/agents"
	"github.com/keelhq/keel/sdktest"
)

// TestMain runs the tests; when the host re-executes this binary as a first-party
// extension (agents, the built-in process adapter), sdktest.Main serves it instead.
func TestMain(m *testing.M) { sdktest.Main(m) }

// packageDir builds the example into a package directory: the executable beside
// manifest.json and ui-parser.js.
func packageDir(t *testing.T) string {
	t.Helper()
	built := sdktest.BuildProcessExtension(t, ".")
	dir := t.TempDir()
	for _, name := range []string{"manifest.json", "custom-adapter"} {
		b, err := os.ReadFile(filepath.Join(built, name))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o755))
	}
	b, err := os.ReadFile("ui-parser.js")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ui-parser.js"), b, 0o644))
	return dir
}

// fixture is a host with a company and helpers to run process agents.
type fixture struct {
	t       *testing.T
	h       *sdktest.Host
	company string
}

// agent creates a process agent running sh -c script.
func (f *fixture) agent(name, script string) string {
	f.t.Helper()
	res := f.h.Do("POST", "/api/companies/"+f.company+"/agents", map[string]any{"name": name, "role": "engineer",
		"adapterType": "process", "adapterConfig": map[string]any{"command": "/bin/sh", "args": []string{"-c", script}, "timeoutSec": 120}})
	require.Equal(f.t, http.StatusCreated, res.Status, "%s", res.Body)
	return res.Map(f.t)["id"].(string)
}

// wake starts a run of an agent and returns its id.
func (f *fixture) wake(agentID string) string {
	f.t.Helper()
	res := f.h.Do("POST", "/api/agents/"+agentID+"/wakeup", map[string]any{"source": "on_demand"})
	require.Equal(f.t, http.StatusAccepted, res.Status, "%s", res.Body)
	return res.Map(f.t)["id"].(string)
}

// wait waits for a run to reach one of statuses and returns it.
func (f *fixture) wait(runID string, statuses ...string) map[string]any {
	f.t.Helper()
	var run map[string]any
	sdktest.WaitFor(f.t, 90*time.Second, func() bool {
		res := f.h.Do("GET", "/api/heartbeat-runs/"+runID, nil)
		if res.Status != http.StatusOK {
			return false
		}
		run = res.Map(f.t)
		for _, s := range statuses {
			if run["status"] == s {
				return true
			}
		}
		return false
	}, "run "+runID+" to reach "+strings.Join(statuses, "|"))
	return run
}

// servedBy runs an agent once and reports which adapter ran it: "custom" (the override
// tags its results) or "builtin"; tag is the override's configured tag.
func (f *fixture) servedBy(agentID string) (by, tag string) {
	f.t.Helper()
	run := f.wait(f.wake(agentID), "succeeded", "failed", "timed_out", "cancelled")
	require.Equal(f.t, "succeeded", run["status"], "%v", run)
	return adapterOf(run)
}

func adapterOf(run map[string]any) (by, tag string) {
	result, _ := run["resultJson"].(map[string]any)
	stdout, _ := result["stdout"].(string)
	tag, _ = result["tag"].(string)
	if result["adapter"] == "custom" && strings.Contains(stdout, "ran-custom") {
		return "custom", tag
	}
	if result["adapter"] == nil && strings.Contains(stdout, "ran-builtin") {
		return "builtin", tag
	}
	return "unclear: " + stdout, tag
}

// registry returns the registry entry of one type from GET /api/adapters.
func (f *fixture) registry(typ string) map[string]any {
	f.t.Helper()
	res := f.h.Do("GET", "/api/adapters", nil)
	require.Equal(f.t, http.StatusOK, res.Status, "%s", res.Body)
	var list []map[string]any
	res.JSON(f.t, &list)
	for _, e := range list {
		if e["type"] == typ {
			return e
		}
	}
	f.t.Fatalf("type %s not in the registry: %s", typ, res.Body)
	return nil
}

// steady keeps one agent running short runs back to back until stopped, and records the
// status and adapter of every run.
type steady struct {
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	runs []map[string]any
}

func (f *fixture) steady(agentID string) *steady {
	s := &steady{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			select {
			case <-s.stop:
				return
			default:
			}
			res := f.h.Do("POST", "/api/agents/"+agentID+"/wakeup", map[string]any{"source": "on_demand"})
			if res.Status != http.StatusAccepted {
				s.add(map[string]any{"status": "wakeup refused", "body": string(res.Body)})
				continue
			}
			id, _ := res.Map(f.t)["id"].(string)
			for {
				r := f.h.Do("GET", "/api/heartbeat-runs/"+id, nil)
				if r.Status == http.StatusOK {
					run := r.Map(f.t)
					if st := run["status"]; st != "queued" && st != "running" {
						s.add(run)
						break
					}
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}()
	return s
}

func (s *steady) add(run map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runs = append(s.runs, run)
}

func (s *steady) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.runs)
}

// TestOverrideWhileServing installs the example as the process override while keel serves
// and runs go on: runs that start afterwards use it while one in flight finishes on the
// built-in; its config, config schema and UI parser are served; pausing sends runs back to
// the built-in and resuming to the override; reload and reinstall replace it in place;
// delete restores the built-in, and built-ins cannot be deleted. A steady stream of runs
// all the while has no failed run.
func TestOverrideWhileServing(t *testing.T) {
	t.Parallel()
	dir := packageDir(t)
	h := sdktest.Start(t, sdktest.Options{Builtins: true})
	f := &fixture{t: t, h: h, company: h.CreateCompany("Adapter Override Co")}
	script := `echo ran-${KEEL_CUSTOM_ADAPTER:+custom}${KEEL_CUSTOM_ADAPTER:-builtin}`
	quick := f.agent("Quick", script)
	flag := filepath.Join(t.TempDir(), "go")
	slow := f.agent("Slow", "while [ ! -f "+flag+" ]; do sleep 0.05; done; "+script)
	load := f.steady(f.agent("Steady", script))

	// Before: process is the built-in, a spec type with no adapter is listed as not loaded.
	e := f.registry("process")
	require.Equal(t, "builtin", e["source"])
	require.Equal(t, false, e["override"])
	require.Equal(t, "adapter.process", e["activeKey"])
	require.Equal(t, false, f.registry("alpha_local")["loaded"])
	require.Equal(t, "builtin", f.registry("http")["source"])
	by, _ := f.servedBy(quick)
	require.Equal(t, "builtin", by)

	// A run in flight on the built-in while the override is installed.
	inflight := f.wake(slow)
	f.wait(inflight, "running")

	res := h.Do("POST", "/api/adapters/install", map[string]any{"packageName": dir, "isLocalPath": true})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	inst := res.Map(t)
	require.Equal(t, "process", inst["type"])
	require.Equal(t, "adapter.process.custom", inst["key"])
	require.Equal(t, true, inst["override"])
	require.Equal(t, false, inst["requiresRestart"])

	e = f.registry("process")
	require.Equal(t, true, e["override"], "%v", e)
	require.Equal(t, "path", e["source"])
	require.Equal(t, "0.1.0", e["version"])
	require.Equal(t, false, e["paused"])
	require.Equal(t, "adapter.process.custom", e["activeKey"])
	require.Equal(t, "adapter.process", e["overrides"].(map[string]any)["key"])
	require.Equal(t, []any{map[string]any{"id": "shell", "label": "Local shell"}}, e["models"])

	by, _ = f.servedBy(quick)
	require.Equal(t, "custom", by, "a run that starts after the install uses the override")
	require.NoError(t, os.WriteFile(flag, nil, 0o644))
	run := f.wait(inflight, "succeeded", "failed", "timed_out", "cancelled")
	require.Equal(t, "succeeded", run["status"], "%v", run)
	by, _ = adapterOf(run)
	require.Equal(t, "builtin", by, "the run in flight finished on the built-in it started on")

	// Config schema and UI parser come from the override's package.
	res = h.Do("GET", "/api/adapters/process/config-schema", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	schema := res.Map(t)
	require.Equal(t, "adapter.process.custom", schema["key"])
	require.Contains(t, schema["configSchema"].(map[string]any)["properties"], "tag")
	require.NotNil(t, schema["adapterConfigSchema"])
	res = h.Do("GET", "/api/adapters/process/ui-parser.js", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Contains(t, res.Header.Get("Content-Type"), "application/javascript")
	require.Contains(t, string(res.Body), "parseStdoutLine")
	res = h.Do("GET", "/api/adapters/http/ui-parser.js", nil)
	require.Equal(t, http.StatusNotFound, res.Status, "%s", res.Body)
	require.Equal(t, `No UI parser available for adapter "http".`, res.Map(t)["error"])

	// Instance config: validated against the manifest's schema, delivered without restart.
	res = h.Do("PATCH", "/api/adapters/process", map[string]any{"config": map[string]any{"tag": 5}})
	require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
	res = h.Do("PATCH", "/api/adapters/process", map[string]any{})
	require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
	res = h.Do("PATCH", "/api/adapters/process", map[string]any{"config": map[string]any{"tag": "blue"}})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	by, tag := f.servedBy(quick)
	require.Equal(t, "custom", by)
	require.Equal(t, "blue", tag)

	// Pause: the next runs go to the built-in; resume: back to the override.
	for _, tc := range []struct {
		body   any
		status int
		text   string
	}{
		{map[string]any{}, http.StatusBadRequest, `"paused" (boolean) is required`},
		{map[string]any{"paused": "yes"}, http.StatusBadRequest, `"paused" (boolean) is required`},
	} {
		res = h.Do("PATCH", "/api/adapters/process/override", tc.body)
		require.Equal(t, tc.status, res.Status, "%s", res.Body)
		require.Equal(t, tc.text, res.Map(t)["error"])
	}
	res = h.Do("PATCH", "/api/adapters/warp_drive/override", map[string]any{"paused": true})
	require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
	require.Equal(t, `Type "warp_drive" is not a builtin adapter.`, res.Map(t)["error"])
	flag2 := filepath.Join(t.TempDir(), "go")
	slow2 := f.agent("Slow Two", "while [ ! -f "+flag2+" ]; do sleep 0.05; done; "+script)
	inflight = f.wake(slow2)
	f.wait(inflight, "running")
	res = h.Do("PATCH", "/api/adapters/process/override", map[string]any{"paused": true})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, map[string]any{"type": "process", "paused": true, "changed": true, "activeKey": "adapter.process"}, res.Map(t))
	e = f.registry("process")
	require.Equal(t, true, e["paused"])
	require.Equal(t, "adapter.process", e["activeKey"])
	by, _ = f.servedBy(quick)
	require.Equal(t, "builtin", by, "a paused override sends the next runs to the built-in")
	require.NoError(t, os.WriteFile(flag2, nil, 0o644))
	run = f.wait(inflight, "succeeded", "failed", "timed_out", "cancelled")
	by, _ = adapterOf(run)
	require.Equal(t, "custom", by, "a run in flight on the override finishes there after the pause: %v", run)
	res = h.Do("PATCH", "/api/adapters/process/override", map[string]any{"paused": true})
	require.Equal(t, false, res.Map(t)["changed"])
	res = h.Do("PATCH", "/api/adapters/process/override", map[string]any{"paused": false})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	by, _ = f.servedBy(quick)
	require.Equal(t, "custom", by)

	// Reload and reinstall replace the override in place; it keeps serving.
	res = h.Do("POST", "/api/adapters/process/reload", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, true, res.Map(t)["reloaded"])
	by, _ = f.servedBy(quick)
	require.Equal(t, "custom", by)
	res = h.Do("POST", "/api/adapters/process/reinstall", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, true, res.Map(t)["reinstalled"])
	res = h.Do("POST", "/api/adapters/install", map[string]any{"packageName": dir, "isLocalPath": true})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	require.Equal(t, true, res.Map(t)["reinstalled"])
	require.Equal(t, false, res.Map(t)["requiresRestart"])
	by, _ = f.servedBy(quick)
	require.Equal(t, "custom", by)

	// Delete restores the built-in at once for new runs; a run in flight on the override
	// finishes there before it goes (the delete waits for it). Built-ins and unknown types
	// cannot be deleted.
	flag3 := filepath.Join(t.TempDir(), "go")
	slow3 := f.agent("Slow Three", "while [ ! -f "+flag3+" ]; do sleep 0.05; done; "+script)
	inflight = f.wake(slow3)
	f.wait(inflight, "running")
	deleted := make(chan *sdktest.Response, 1)
	go func() { deleted <- h.Do("DELETE", "/api/adapters/process", nil) }()
	sdktest.WaitFor(t, 60*time.Second, func() bool { return f.registry("process")["override"] == false }, "the override to leave the registry")
	by, _ = f.servedBy(quick)
	require.Equal(t, "builtin", by, "deleting the override restores the built-in")
	require.NoError(t, os.WriteFile(flag3, nil, 0o644))
	run = f.wait(inflight, "succeeded", "failed", "timed_out", "cancelled")
	by, _ = adapterOf(run)
	require.Equal(t, "custom", by, "a run in flight on a deleted override finishes there: %v", run)
	res = <-deleted
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, map[string]any{"type": "process", "removed": true, "restored": "adapter.process"}, res.Map(t))
	e = f.registry("process")
	require.Equal(t, false, e["override"])
	require.Equal(t, "builtin", e["source"])
	for _, tc := range []struct {
		method, path string
		status       int
		text         string
	}{
		{"DELETE", "/api/adapters/process", http.StatusForbidden, `Cannot remove built-in adapter "process".`},
		{"DELETE", "/api/adapters/http", http.StatusForbidden, `Cannot remove built-in adapter "http".`},
		{"DELETE", "/api/adapters/warp_drive", http.StatusNotFound, `Adapter "warp_drive" is not registered.`},
		{"POST", "/api/adapters/process/reload", http.StatusBadRequest, "Cannot reload built-in adapter."},
		{"GET", "/api/adapters/process/ui-parser.js", http.StatusNotFound, `No UI parser available for adapter "process".`},
		{"GET", "/api/adapters/warp_drive", http.StatusNotFound, `Adapter "warp_drive" is not registered.`},
	} {
		res = h.Do(tc.method, tc.path, nil)
		require.Equal(t, tc.status, res.Status, "%s %s: %s", tc.method, tc.path, res.Body)
		require.Equal(t, tc.text, res.Map(t)["error"], "%s %s", tc.method, tc.path)
	}
	res = h.Do("POST", "/api/adapters/install", map[string]any{"isLocalPath": true})
	require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)

	// The built-in's schema is its agents' adapterConfig schema; a spec type no adapter
	// serves has none. Disabling a type is recorded in the registry; its agents still run.
	res = h.Do("GET", "/api/adapters/process/config-schema", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, "adapter.process", res.Map(t)["key"])
	require.NotNil(t, res.Map(t)["adapterConfigSchema"])
	res = h.Do("GET", "/api/adapters/alpha_local/config-schema", nil)
	require.Equal(t, http.StatusNotFound, res.Status, "%s", res.Body)
	require.Equal(t, `Adapter "alpha_local" has no config schema.`, res.Map(t)["error"])
	res = h.Do("PATCH", "/api/adapters/process", map[string]any{"disabled": true})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, true, res.Map(t)["disabled"])
	by, _ = f.servedBy(quick)
	require.Equal(t, "builtin", by)
	res = h.Do("PATCH", "/api/adapters/process", map[string]any{"disabled": false})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, false, f.registry("process")["disabled"])

	// Unknown adapter types are refused on agent create with the registry's list.
	res = h.Do("POST", "/api/companies/"+f.company+"/agents", map[string]any{"name": "Warp", "adapterType": "warp_drive"})
	require.Equal(t, http.StatusUnprocessableEntity, res.Status, "%s", res.Body)
	require.True(t, strings.HasPrefix(res.Map(t)["error"].(string), "Unknown adapter type: warp_drive (known types: "), "%s", res.Body)
	require.Contains(t, res.Map(t)["error"], "process")

	res = h.Do("GET", "/api/openapi.json", nil)
	require.Equal(t, http.StatusOK, res.Status)
	for _, path := range []string{"/api/adapters", "/api/adapters/install", "/api/adapters/{type}/override", "/api/adapters/{type}/ui-parser.js"} {
		require.Contains(t, string(res.Body), `"`+path+`"`)
	}

	// The steady stream of runs all succeeded, on whichever adapter was active.
	sdktest.WaitFor(t, 90*time.Second, func() bool { return load.count() >= 3 }, "a few steady runs")
	close(load.stop)
	<-load.done
	load.mu.Lock()
	defer load.mu.Unlock()
	seen := map[string]int{}
	for _, r := range load.runs {
		require.Equal(t, "succeeded", r["status"], "a steady run failed: %v", r)
		by, _ := adapterOf(r)
		seen[by]++
	}
	t.Logf("steady runs: %d (%v)", len(load.runs), seen)
}

// TestPausedOverrideSurvivesRestart installs the override through the API, pauses it,
// restarts keel on the same database and finds the override loaded
// and still paused (runs on the built-in), then resumes it. An override found on the
// extensions path serves from the start as well.
func TestPausedOverrideSurvivesRestart(t *testing.T) {
	t.Parallel()
	dir := packageDir(t)
	opts := sdktest.Options{Builtins: true}
	h1 := sdktest.Start(t, opts)
	f := &fixture{t: t, h: h1, company: h1.CreateCompany("Adapter Restart Co")}
	agent := f.agent("Restarter", `echo ran-${KEEL_CUSTOM_ADAPTER:+custom}${KEEL_CUSTOM_ADAPTER:-builtin}`)
	res := h1.Do("POST", "/api/adapters/install", map[string]any{"packageName": dir, "isLocalPath": true})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	by, _ := f.servedBy(agent)
	require.Equal(t, "custom", by)
	res = h1.Do("PATCH", "/api/adapters/process/override", map[string]any{"paused": true})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h1.Stop(ctx)

	opts.DatabaseURL = h1.DatabaseURL
	h2 := sdktest.Start(t, opts)
	f.h = h2
	e := f.registry("process")
	require.Equal(t, true, e["override"], "the installed override is loaded again: %v", e)
	require.Equal(t, true, e["paused"], "the pause survives the restart")
	by, _ = f.servedBy(agent)
	require.Equal(t, "builtin", by)
	res = h2.Do("PATCH", "/api/adapters/process/override", map[string]any{"paused": false})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	by, _ = f.servedBy(agent)
	require.Equal(t, "custom", by)

	// An override on the extensions path is the override from the start.
	h3 := sdktest.Start(t, sdktest.Options{Builtins: true, ExtensionDirs: []string{packageDir(t)}})
	f3 := &fixture{t: t, h: h3, company: h3.CreateCompany("Adapter Path Co")}
	by, _ = f3.servedBy(f3.agent("Pathfinder", `echo ran-${KEEL_CUSTOM_ADAPTER:+custom}${KEEL_CUSTOM_ADAPTER:-builtin}`))
	require.Equal(t, "custom", by)
	require.Equal(t, "path", f3.registry("process")["source"])
}

// TestOverrideAcrossNodes runs two keel nodes on one database: an
// override installed on one is loaded by the other (it follows the registry), a pause made
// on one holds on both at once (it is a kernel row read per run), and a delete on one is
// followed by the other.
func TestOverrideAcrossNodes(t *testing.T) {
	t.Parallel()
	dir := packageDir(t)
	// Each node has its own data dir: the package reaches the other through the database.
	a := sdktest.Start(t, sdktest.Options{Builtins: true})
	b := sdktest.Start(t, sdktest.Options{Builtins: true, DatabaseURL: a.DatabaseURL})
	fa := &fixture{t: t, h: a, company: a.CreateCompany("Two Node Adapter Co")}
	fb := &fixture{t: t, h: b, company: fa.company}
	agent := fa.agent("Either Node", `echo ran-${KEEL_CUSTOM_ADAPTER:+custom}${KEEL_CUSTOM_ADAPTER:-builtin}`)

	res := a.Do("POST", "/api/adapters/install", map[string]any{"packageName": dir, "isLocalPath": true})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	sdktest.WaitFor(t, 60*time.Second, func() bool { return fb.registry("process")["activeKey"] == "adapter.process.custom" },
		"the other node to load the override")
	for range 2 {
		by, _ := fb.servedBy(agent)
		require.Equal(t, "custom", by)
	}
	res = a.Do("PATCH", "/api/adapters/process/override", map[string]any{"paused": true})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, true, fb.registry("process")["paused"], "a pause holds on every node at once")
	for range 2 {
		by, _ := fb.servedBy(agent)
		require.Equal(t, "builtin", by)
	}
	res = a.Do("PATCH", "/api/adapters/process/override", map[string]any{"paused": false})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	res = a.Do("DELETE", "/api/adapters/process", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	sdktest.WaitFor(t, 60*time.Second, func() bool { return fb.registry("process")["override"] == false },
		"the other node to follow the delete")
	by, _ := fb.servedBy(agent)
	require.Equal(t, "builtin", by)
}
