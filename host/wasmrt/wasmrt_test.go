package wasmrt_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keelhq/keel/host/wasmrt"
	"github.com/keelhq/keel/host/wasmrt/wasmrttest"
	"github.com/keelhq/keel/sdk"
	extensionv1 "github.com/keelhq/keel/sdk/proto/extension/v1"
)

const counterDir = "../../examples/wasm-counter"

var (
	sharedOnce sync.Once
	sharedRT   *wasmrt.Runtime
	sharedDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if sharedRT != nil {
		_ = sharedRT.Close(context.Background())
		_ = os.RemoveAll(sharedDir)
	}
	os.Exit(code)
}

// runtime returns the Runtime shared by the tests, so each module compiles once per run.
func runtime(t testing.TB) *wasmrt.Runtime {
	t.Helper()
	sharedOnce.Do(func() {
		dir, err := os.MkdirTemp("", "wasmrt-cache-")
		require.NoError(t, err)
		sharedDir = dir
		sharedRT, err = wasmrt.New(context.Background(), wasmrt.Config{CacheDir: dir})
		require.NoError(t, err)
	})
	require.NotNil(t, sharedRT, "shared runtime failed to start")
	return sharedRT
}

// logBuffer is a concurrency-safe buffer for an hclog logger.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func counterManifest(t testing.TB) *sdk.Manifest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(counterDir, "manifest.json"))
	require.NoError(t, err)
	m, err := sdk.ParseManifest(b)
	require.NoError(t, err)
	return m
}

type counterBundle struct {
	mod   *wasmrt.Module
	fakes *wasmrttest.Services
}

// loadCounter loads the counter example with its manifest's limits and capabilities,
// changed by adjust.
func loadCounter(t testing.TB, adjust func(p *wasmrt.LoadParams)) *counterBundle {
	t.Helper()
	mf := counterManifest(t)
	fakes := wasmrttest.NewServices()
	p := wasmrt.LoadParams{
		Key: mf.Key, ModulePath: wasmrttest.BuildModule(t, counterDir), Limits: *mf.Runtime.Limits,
		Services: fakes.HostServices(), Capabilities: mf.Capabilities,
	}
	if adjust != nil {
		adjust(&p)
	}
	mod, err := runtime(t).Load(context.Background(), p)
	require.NoError(t, err)
	t.Cleanup(func() { _ = mod.Close(context.Background()) })
	_, err = mod.Configure(context.Background(), &extensionv1.ConfigureRequest{ConfigJson: []byte(`{}`), InstanceId: "test"})
	require.NoError(t, err)
	return &counterBundle{mod: mod, fakes: fakes}
}

func counterRequest(method, company, suffix string) *extensionv1.HTTPRequest {
	path := "/api/companies/" + company + "/wasm-counter" + suffix
	return &extensionv1.HTTPRequest{
		Method: method, Path: path, Pattern: method + " /api/companies/{companyId}/wasm-counter" + suffix,
		Params: map[string]string{"companyId": company}, CompanyId: company, RequestId: "req-1",
		Actor:   &extensionv1.Actor{Type: "board", UserId: "user-1", Source: "session"},
		Headers: map[string]*extensionv1.HeaderValues{"Accept": {Values: []string{"application/json"}}},
	}
}

func count(t testing.TB, res *extensionv1.HTTPResponse) int64 {
	t.Helper()
	require.Equal(t, int32(http.StatusOK), res.Status, "%s", res.Body)
	var body struct{ Count int64 }
	require.NoError(t, json.Unmarshal(res.Body, &body), "%s", res.Body)
	return body.Count
}

func TestCounter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("Describe", func(t *testing.T) {
		t.Parallel()
		b := loadCounter(t, nil)
		res, err := b.mod.Describe(ctx, &extensionv1.DescribeRequest{})
		require.NoError(t, err)
		want, err := os.ReadFile(filepath.Join(counterDir, "manifest.json"))
		require.NoError(t, err)
		require.Equal(t, string(want), string(res.ManifestJson))
		_, err = sdk.ParseManifest(res.ManifestJson)
		require.NoError(t, err)
	})

	t.Run("GetAndIncrement", func(t *testing.T) {
		t.Parallel()
		b := loadCounter(t, nil)
		res, err := b.mod.Handle(ctx, counterRequest("GET", "co-1", ""))
		require.NoError(t, err)
		require.Equal(t, int64(0), count(t, res))
		require.Equal(t, []string{"application/json; charset=utf-8"}, res.Headers["Content-Type"].GetValues())

		for want := int64(1); want <= 3; want++ {
			res, err = b.mod.Handle(ctx, counterRequest("POST", "co-1", "/increment"))
			require.NoError(t, err)
			require.Equal(t, want, count(t, res))
		}
		res, err = b.mod.Handle(ctx, counterRequest("GET", "co-1", ""))
		require.NoError(t, err)
		require.Equal(t, int64(3), count(t, res))

		v, found := b.fakes.Storage.Value("co-1", "count")
		require.True(t, found)
		require.Equal(t, "3", string(v))
		entries := b.fakes.Activity.Entries()
		require.Len(t, entries, 3)
		for i, e := range entries {
			require.Equal(t, "wasm_counter.incremented", e.Action)
			require.Equal(t, "co-1", e.CompanyId)
			require.Equal(t, "user", e.ActorType)
			require.Equal(t, "user-1", e.ActorId)
			require.JSONEq(t, fmt.Sprintf(`{"count":%d}`, i+1), string(e.DetailsJson))
		}

		res, err = b.mod.Handle(ctx, counterRequest("GET", "co-2", ""))
		require.NoError(t, err)
		require.Equal(t, int64(0), count(t, res), "counters are per company")
	})

	t.Run("UnknownRouteIs404", func(t *testing.T) {
		t.Parallel()
		b := loadCounter(t, nil)
		res, err := b.mod.Handle(ctx, &extensionv1.HTTPRequest{Method: "GET", Path: "/api/nowhere"})
		require.NoError(t, err)
		require.Equal(t, int32(http.StatusNotFound), res.Status)
	})

	t.Run("UnimplementedOperations", func(t *testing.T) {
		t.Parallel()
		b := loadCounter(t, nil)
		_, err := b.mod.Call(ctx, &extensionv1.CallRequest{Method: "x"})
		require.Equal(t, codes.Unimplemented, status.Code(err), "%v", err)
		require.Contains(t, err.Error(), "extension provides no methods")
		_, err = b.mod.RunJob(ctx, &extensionv1.RunJobRequest{JobKey: "x"})
		require.Equal(t, codes.Unimplemented, status.Code(err))
		_, err = b.mod.OnEvent(ctx, &extensionv1.Event{Type: "x"})
		require.Equal(t, codes.Unimplemented, status.Code(err))
		h, err := b.mod.Health(ctx, &extensionv1.HealthRequest{})
		require.NoError(t, err)
		require.Equal(t, "ok", h.Status)
	})

	t.Run("MemoryLimit", func(t *testing.T) {
		t.Parallel()
		b := loadCounter(t, nil)
		_, err := b.mod.Handle(ctx, counterRequest("POST", "co-1", "/increment"))
		require.NoError(t, err)

		started := time.Now()
		_, err = b.mod.Handle(ctx, counterRequest("POST", "co-1", "/hog"))
		t.Logf("hog failed after %v: %v", time.Since(started), err)
		require.ErrorIs(t, err, wasmrt.ErrMemoryLimit)
		require.EqualError(t, err, "wasm extension example.wasm_counter exceeded its memory limit of 32MB")
		var ce *wasmrt.CallError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, http.StatusBadGateway, ce.HTTPStatus())
		require.Equal(t, "extension_memory_limit", ce.Code())

		res, err := b.mod.Handle(ctx, counterRequest("GET", "co-1", ""))
		require.NoError(t, err, "the next call runs on a fresh instance")
		require.Equal(t, int64(1), count(t, res))
	})

	t.Run("TimeLimit", func(t *testing.T) {
		t.Parallel()
		b := loadCounter(t, func(p *wasmrt.LoadParams) { p.Limits.TimeoutMS = 300 })
		started := time.Now()
		_, err := b.mod.Handle(ctx, counterRequest("POST", "co-1", "/spin"))
		elapsed := time.Since(started)
		t.Logf("spin failed after %v: %v", elapsed, err)
		require.ErrorIs(t, err, wasmrt.ErrTimeLimit)
		require.EqualError(t, err, "wasm extension example.wasm_counter exceeded its time limit of 300ms")
		require.GreaterOrEqual(t, elapsed, 300*time.Millisecond)
		require.Less(t, elapsed, 3*time.Second)
		var ce *wasmrt.CallError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, http.StatusGatewayTimeout, ce.HTTPStatus())
		require.Equal(t, "extension_time_limit", ce.Code())

		res, err := b.mod.Handle(ctx, counterRequest("POST", "co-1", "/increment"))
		require.NoError(t, err, "the next call runs on a fresh instance")
		require.Equal(t, int64(1), count(t, res))
	})

	t.Run("CallerDeadlineIsNotTheLimit", func(t *testing.T) {
		t.Parallel()
		b := loadCounter(t, nil)
		cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		_, err := b.mod.Handle(cctx, counterRequest("POST", "co-1", "/spin"))
		require.Equal(t, codes.DeadlineExceeded, status.Code(err), "%v", err)
		require.NotErrorIs(t, err, wasmrt.ErrTimeLimit)

		res, err := b.mod.Handle(ctx, counterRequest("GET", "co-1", ""))
		require.NoError(t, err)
		require.Equal(t, int64(0), count(t, res))
	})

	t.Run("ConcurrentCalls", func(t *testing.T) {
		t.Parallel()
		// A generous limit: this checks the pool, and a loaded machine is slow.
		b := loadCounter(t, func(p *wasmrt.LoadParams) { p.Limits.TimeoutMS = 60000 })
		const workers, rounds = 16, 20
		var wg sync.WaitGroup
		errs := make(chan error, workers*rounds)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				company := fmt.Sprintf("co-%d", w)
				for range rounds {
					if _, err := b.mod.Handle(ctx, counterRequest("POST", company, "/increment")); err != nil {
						errs <- err
					}
					if _, err := b.mod.Handle(ctx, counterRequest("GET", company, "")); err != nil {
						errs <- err
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		for w := range workers {
			res, err := b.mod.Handle(ctx, counterRequest("GET", fmt.Sprintf("co-%d", w), ""))
			require.NoError(t, err)
			require.Equal(t, int64(rounds), count(t, res))
		}
		require.Len(t, b.fakes.Activity.Entries(), workers*rounds)
	})

	t.Run("UndeclaredCapability", func(t *testing.T) {
		t.Parallel()
		b := loadCounter(t, func(p *wasmrt.LoadParams) { p.Capabilities = []string{sdk.CapStorage} })
		res, err := b.mod.Handle(ctx, counterRequest("POST", "co-1", "/increment"))
		require.NoError(t, err)
		require.Equal(t, int32(http.StatusInternalServerError), res.Status, "%s", res.Body)
		require.Empty(t, b.fakes.Activity.Entries())
	})

	t.Run("Shutdown", func(t *testing.T) {
		t.Parallel()
		b := loadCounter(t, nil)
		_, err := b.mod.Shutdown(ctx, &extensionv1.ShutdownRequest{})
		require.NoError(t, err)
		res, err := b.mod.Handle(ctx, counterRequest("POST", "co-1", "/increment"))
		require.NoError(t, err, "a call after Shutdown starts a fresh instance")
		require.Equal(t, int64(1), count(t, res))
	})

	t.Run("Close", func(t *testing.T) {
		t.Parallel()
		b := loadCounter(t, func(p *wasmrt.LoadParams) { p.Limits.TimeoutMS = 10000 })
		done := make(chan error, 1)
		go func() {
			_, err := b.mod.Handle(ctx, counterRequest("POST", "co-1", "/spin"))
			done <- err
		}()
		time.Sleep(100 * time.Millisecond)
		started := time.Now()
		require.NoError(t, b.mod.Close(ctx))
		require.Less(t, time.Since(started), 2*time.Second, "Close interrupts calls in flight")
		err := <-done
		require.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
		_, err = b.mod.Handle(ctx, counterRequest("GET", "co-1", ""))
		require.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
		require.NoError(t, b.mod.Close(ctx), "Close is idempotent")
	})
}

func TestLoad(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("ChecksSHA256", func(t *testing.T) {
		t.Parallel()
		path := wasmrttest.BuildModule(t, counterDir)
		bin, err := os.ReadFile(path)
		require.NoError(t, err)
		sum := sha256.Sum256(bin)
		wrong := hex.EncodeToString(make([]byte, 32))
		_, err = runtime(t).Load(ctx, wasmrt.LoadParams{Key: "example.wasm_counter", ModulePath: path, SHA256: wrong})
		require.ErrorContains(t, err, "has sha256 "+hex.EncodeToString(sum[:])+", but the manifest expects "+wrong)

		mod, err := runtime(t).Load(ctx, wasmrt.LoadParams{Key: "example.wasm_counter", ModulePath: path, SHA256: hex.EncodeToString(sum[:])})
		require.NoError(t, err, "the default limits (128 MB, 5 s) fit a Go guest")
		res, err := mod.Handle(ctx, counterRequest("GET", "co-1", ""))
		require.NoError(t, err)
		require.Equal(t, int32(http.StatusInternalServerError), res.Status, "no storage service: the handler fails cleanly")
		require.NoError(t, mod.Close(ctx))
	})

	t.Run("RefusesModuleMissingExports", func(t *testing.T) {
		t.Parallel()
		path := writeModule(t, fakeModule{version: 1, exports: []string{"keel_api_version"}})
		_, err := runtime(t).Load(ctx, wasmrt.LoadParams{Key: "test.broken", ModulePath: path})
		require.EqualError(t, err, "error loading wasm extension test.broken: module does not implement the keel wasm ABI v1: missing exports malloc, free, keel_call")
	})

	t.Run("RefusesWrongSignature", func(t *testing.T) {
		t.Parallel()
		path := writeModule(t, fakeModule{version: 1, exports: []string{"keel_api_version", "malloc", "free", "keel_call"}, badFree: true})
		_, err := runtime(t).Load(ctx, wasmrt.LoadParams{Key: "test.broken", ModulePath: path})
		require.ErrorContains(t, err, "wrong signatures: free is (i64) -> (), want (i32) -> ()")
	})

	t.Run("RefusesOtherAPIVersion", func(t *testing.T) {
		t.Parallel()
		path := writeModule(t, fakeModule{version: 2, exports: []string{"keel_api_version", "malloc", "free", "keel_call"}})
		_, err := runtime(t).Load(ctx, wasmrt.LoadParams{Key: "test.v2", ModulePath: path})
		require.ErrorContains(t, err, "wasm extension test.v2 speaks keel wasm ABI v2; the host speaks v1")
	})

	t.Run("RefusesCommandModule", func(t *testing.T) {
		t.Parallel()
		path := writeModule(t, fakeModule{version: 1, exports: []string{"keel_api_version", "malloc", "free", "keel_call", "_start"}})
		_, err := runtime(t).Load(ctx, wasmrt.LoadParams{Key: "test.cmd", ModulePath: path})
		require.ErrorContains(t, err, "is a WASI command")
	})

	t.Run("RefusesMemoryBelowTheModuleMinimum", func(t *testing.T) {
		t.Parallel()
		path := wasmrttest.BuildModule(t, counterDir)
		_, err := runtime(t).Load(ctx, wasmrt.LoadParams{Key: "example.wasm_counter", ModulePath: path, Limits: sdk.Limits{MemoryMB: 2}})
		require.ErrorContains(t, err, "module needs more memory than its limit of 2MB")
	})

	t.Run("ResultOutsideMemoryIsATrap", func(t *testing.T) {
		t.Parallel()
		path := writeModule(t, fakeModule{version: 1, exports: []string{"keel_api_version", "malloc", "free", "keel_call"}, result: 0xffff0000_00000010})
		mod, err := runtime(t).Load(ctx, wasmrt.LoadParams{Key: "test.liar", ModulePath: path})
		require.NoError(t, err)
		defer mod.Close(ctx)
		_, err = mod.Describe(ctx, &extensionv1.DescribeRequest{})
		require.ErrorIs(t, err, wasmrt.ErrTrap)
		require.ErrorContains(t, err, "wasm extension test.liar failed in Describe: invalid result: range [4294901760, 4294901776) is outside guest memory")
	})
}

func TestHostCallFromMallocIsATrap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := writeModule(t, fakeModule{version: 1, exports: []string{"keel_api_version", "malloc", "free", "keel_call"}, reentrant: true})
	mod, err := runtime(t).Load(ctx, wasmrt.LoadParams{Key: "test.reentrant", ModulePath: path,
		Services: wasmrttest.NewServices().HostServices(), Capabilities: []string{sdk.CapStorage}})
	require.NoError(t, err)
	defer mod.Close(ctx)
	_, err = mod.Describe(ctx, &extensionv1.DescribeRequest{})
	require.ErrorIs(t, err, wasmrt.ErrTrap)
	require.ErrorContains(t, err, "host_call from inside malloc or free")
}

// TestCompilationCache measures a cold compile and a compile from the cache directory.
func TestCompilationCache(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := wasmrttest.BuildModule(t, counterDir)
	dir := t.TempDir()
	load := func() time.Duration {
		rt, err := wasmrt.New(ctx, wasmrt.Config{CacheDir: dir})
		require.NoError(t, err)
		defer rt.Close(ctx)
		started := time.Now()
		mod, err := rt.Load(ctx, wasmrt.LoadParams{Key: "example.wasm_counter", ModulePath: path})
		require.NoError(t, err)
		elapsed := time.Since(started)
		require.NoError(t, mod.Close(ctx))
		return elapsed
	}
	cold := load()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.NotEmpty(t, entries, "the compiled module is cached in CacheDir")
	cached := load()
	t.Logf("load (compile + first instance): cold %v, cached %v", cold, cached)
}

func TestProbe(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	load := func(t *testing.T, adjust func(p *wasmrt.LoadParams)) (*wasmrt.Module, *logBuffer) {
		t.Helper()
		logs := &logBuffer{}
		runtime(t) // creates the shared cache directory, so the probe compiles once per run
		rt, err := wasmrt.New(ctx, wasmrt.Config{CacheDir: sharedDir, Logger: hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Debug})})
		require.NoError(t, err)
		t.Cleanup(func() { _ = rt.Close(ctx) })
		fakes := wasmrttest.NewServices()
		p := wasmrt.LoadParams{
			Key: "test.probe", ModulePath: wasmrttest.BuildModule(t, "testdata/probe"),
			Limits:   sdk.Limits{MemoryMB: 32, TimeoutMS: 30000, Instances: 4},
			Services: fakes.HostServices(), Capabilities: []string{sdk.CapStorage, sdk.CapActivity, sdk.CapSettings},
		}
		if adjust != nil {
			adjust(&p)
		}
		mod, err := rt.Load(ctx, p)
		require.NoError(t, err)
		return mod, logs
	}
	handle := func(t *testing.T, mod *wasmrt.Module, method, path string) map[string]any {
		t.Helper()
		u, q, _ := bytes.Cut([]byte(path), []byte("?"))
		res, err := mod.Handle(ctx, &extensionv1.HTTPRequest{Method: method, Path: string(u), RawQuery: string(q)})
		require.NoError(t, err)
		require.Equal(t, int32(http.StatusOK), res.Status, "%s", res.Body)
		var body map[string]any
		require.NoError(t, json.Unmarshal(res.Body, &body), "%s", res.Body)
		return body
	}

	t.Run("ConfiguresEveryInstance", func(t *testing.T) {
		t.Parallel()
		mod, logs := load(t, nil)
		h, err := mod.Health(ctx, &extensionv1.HealthRequest{})
		require.NoError(t, err)
		require.Equal(t, "degraded", h.Status)
		require.Equal(t, "not configured", h.Message)

		_, err = mod.Configure(ctx, &extensionv1.ConfigureRequest{ConfigJson: []byte(`{"greeting":"hi"}`)})
		require.NoError(t, err)
		var wg sync.WaitGroup
		instances := make(chan string, 8)
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				body := handle(t, mod, "POST", "/api/probe/sleep?ms=100")
				instances <- body["instance"].(string)
			}()
		}
		wg.Wait()
		close(instances)
		seen := map[string]bool{}
		for id := range instances {
			seen[id] = true
		}
		require.Greater(t, len(seen), 1, "concurrent calls run on several instances")
		require.LessOrEqual(t, len(seen), 4, "no more instances than Limits.Instances")
		for range 8 { // every instance answers with the config
			body := handle(t, mod, "GET", "/api/probe/info")
			require.Equal(t, map[string]any{"greeting": "hi"}, body["config"])
			require.Equal(t, float64(1), body["configured"])
		}
		require.Contains(t, logs.String(), "configured instance")

		_, err = mod.Configure(ctx, &extensionv1.ConfigureRequest{ConfigJson: []byte(`{"fail":true}`)})
		require.Equal(t, codes.FailedPrecondition, status.Code(err), "%v", err)
		require.ErrorContains(t, err, "error configuring: refusing config")
	})

	t.Run("RequestAndResponse", func(t *testing.T) {
		t.Parallel()
		mod, _ := load(t, nil)
		res, err := mod.Handle(ctx, &extensionv1.HTTPRequest{
			Method: "GET", Path: "/api/probe/info", RawQuery: "q=1", Pattern: "GET /api/probe/info", CompanyId: "co-9",
			Headers: map[string]*extensionv1.HeaderValues{"X-Probe": {Values: []string{"yes"}}},
			Actor:   &extensionv1.Actor{Type: "board", UserId: "u-7"},
		})
		require.NoError(t, err)
		var info map[string]any
		require.NoError(t, json.Unmarshal(res.Body, &info))
		require.Equal(t, "board", info["actor"])
		require.Equal(t, "u-7", info["userId"])
		require.Equal(t, "co-9", info["company"])
		require.Equal(t, "1", info["query"])
		require.Equal(t, "yes", info["header"])
		require.Equal(t, "GET /api/probe/info", info["pattern"])

		body := bytes.Repeat([]byte("0123456789"), 100_000) // 1 MB round trip
		res, err = mod.Handle(ctx, &extensionv1.HTTPRequest{Method: "POST", Path: "/api/probe/echo/x", Body: body})
		require.NoError(t, err)
		require.Equal(t, int32(http.StatusCreated), res.Status)
		require.Equal(t, body, res.Body)
		require.Equal(t, []string{"a", "b"}, res.Headers["X-Multi"].GetValues())
		require.Equal(t, []string{"text/plain; charset=utf-8"}, res.Headers["Content-Type"].GetValues())
	})

	t.Run("PanicIsAnErrorAndKeepsTheInstance", func(t *testing.T) {
		t.Parallel()
		mod, _ := load(t, func(p *wasmrt.LoadParams) { p.Limits.Instances = 1 })
		before := handle(t, mod, "GET", "/api/probe/info")["instance"]
		_, err := mod.Handle(ctx, &extensionv1.HTTPRequest{Method: "POST", Path: "/api/probe/panic"})
		require.Equal(t, codes.Internal, status.Code(err), "%v", err)
		require.ErrorContains(t, err, "panic in Handle: boom")
		require.Equal(t, before, handle(t, mod, "GET", "/api/probe/info")["instance"])
	})

	t.Run("ExitIsATrap", func(t *testing.T) {
		t.Parallel()
		mod, _ := load(t, func(p *wasmrt.LoadParams) { p.Limits.Instances = 1 })
		before := handle(t, mod, "GET", "/api/probe/info")["instance"]
		_, err := mod.Handle(ctx, &extensionv1.HTTPRequest{Method: "POST", Path: "/api/probe/exit"})
		require.ErrorIs(t, err, wasmrt.ErrTrap)
		require.EqualError(t, err, "wasm extension test.probe failed in Handle: exited with code 3")
		require.NotEqual(t, before, handle(t, mod, "GET", "/api/probe/info")["instance"], "the instance was replaced")
	})

	t.Run("SleepEndsAtTheTimeLimit", func(t *testing.T) {
		t.Parallel()
		mod, _ := load(t, func(p *wasmrt.LoadParams) { p.Limits.TimeoutMS = 200 })
		started := time.Now()
		_, err := mod.Handle(ctx, &extensionv1.HTTPRequest{Method: "POST", Path: "/api/probe/sleep", RawQuery: "ms=60000"})
		require.ErrorIs(t, err, wasmrt.ErrTimeLimit)
		require.Less(t, time.Since(started), 2*time.Second)
	})

	t.Run("HostCalls", func(t *testing.T) {
		t.Parallel()
		mod, _ := load(t, func(p *wasmrt.LoadParams) {
			p.Capabilities = []string{sdk.CapStorage, sdk.CapSettings}
		})
		require.Equal(t, map[string]any{"ok": true}, handle(t, mod, "POST", "/api/probe/storage"))
		require.Equal(t, map[string]any{"service": "activity.append", "code": float64(codes.PermissionDenied),
			"message": "capability activity not declared"}, handle(t, mod, "POST", "/api/probe/activity"))
		require.Equal(t, map[string]any{"service": "settings.get", "code": float64(codes.PermissionDenied),
			"message": "capability settings not declared (the host opened no settings service for test.probe)"},
			handle(t, mod, "POST", "/api/probe/settings"))
	})

	t.Run("HostCallChecksBounds", func(t *testing.T) {
		t.Parallel()
		mod, _ := load(t, nil)
		for _, tc := range []struct{ query, status, message string }{
			{"svc=8&ptr=4294967200&len=1000", "2", "host_call: range [4294967200, 4294968200) is outside guest memory"},
			{"svc=8&ptr=0&len=4294967295", "2", "host_call: message of 4294967295 bytes exceeds the limit of 67108864 bytes"},
			{"svc=99&ptr=0&len=0", "2", "unknown host service 99"},
			{"svc=8&ptr=0&len=0", "2", "company_id and key are required"},
			{"svc=8&ptr=1024&len=64", "2", "malformed storage.get request"},
		} {
			body := handle(t, mod, "POST", "/api/probe/raw?"+tc.query)
			require.Contains(t, body["message"], tc.message, tc.query)
		}
		require.Equal(t, map[string]any{"ok": true}, handle(t, mod, "POST", "/api/probe/storage"), "the instance still works")
	})

	t.Run("OptionalOperations", func(t *testing.T) {
		t.Parallel()
		mod, _ := load(t, nil)
		res, err := mod.Call(ctx, &extensionv1.CallRequest{Method: "echo", InputJson: []byte(`{"a":1}`), Caller: "kernel", CompanyId: "co-1"})
		require.NoError(t, err)
		require.Nil(t, res.Error)
		require.JSONEq(t, `{"method":"echo","input":{"a":1},"caller":"kernel","company":"co-1"}`, string(res.OutputJson))

		res, err = mod.Call(ctx, &extensionv1.CallRequest{Method: "fail"})
		require.NoError(t, err)
		require.Equal(t, &extensionv1.Error{Status: 409, Code: "probe_conflict", Message: "conflict", Source: "plugin"}, res.Error)

		res, err = mod.Call(ctx, &extensionv1.CallRequest{Method: "echo", InputJson: []byte(`{`)})
		require.NoError(t, err)
		require.Equal(t, int32(http.StatusBadRequest), res.Error.GetStatus())

		job, err := mod.RunJob(ctx, &extensionv1.RunJobRequest{JobKey: "good"})
		require.NoError(t, err)
		require.Nil(t, job.Error)
		job, err = mod.RunJob(ctx, &extensionv1.RunJobRequest{JobKey: "bad"})
		require.NoError(t, err)
		require.Equal(t, "job failed", job.Error.GetMessage())
		require.Equal(t, int32(500), job.Error.GetStatus())

		ev, err := mod.OnEvent(ctx, &extensionv1.Event{Id: "e1", Type: "x.y"})
		require.NoError(t, err)
		require.Nil(t, ev.Error)
	})
}

// BenchmarkHandle measures one Handle round trip (GET, one storage host call) on a warm
// instance.
func BenchmarkHandle(b *testing.B) {
	ctx := context.Background()
	bundle := loadCounter(b, nil)
	req := counterRequest("GET", "co-1", "")
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := bundle.mod.Handle(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHandleParallel measures Handle throughput with the default pool.
func BenchmarkHandleParallel(b *testing.B) {
	ctx := context.Background()
	bundle := loadCounter(b, nil)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		req := counterRequest("GET", "co-1", "")
		for pb.Next() {
			if _, err := bundle.mod.Handle(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkHealth measures the bare keel_call round trip (no host calls, tiny messages).
func BenchmarkHealth(b *testing.B) {
	ctx := context.Background()
	bundle := loadCounter(b, nil)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := bundle.mod.Health(ctx, &extensionv1.HealthRequest{}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestLimitLogsOneLineAtInfo checks that a broken limit is logged in one line at info
// level: the guest's stderr (a Go runtime stack trace) only appears at debug.
func TestLimitLogsOneLineAtInfo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	logs := &logBuffer{}
	runtime(t) // creates the shared cache directory
	rt, err := wasmrt.New(ctx, wasmrt.Config{CacheDir: sharedDir, Logger: hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info})})
	require.NoError(t, err)
	t.Cleanup(func() { _ = rt.Close(ctx) })
	mf := counterManifest(t)
	mod, err := rt.Load(ctx, wasmrt.LoadParams{
		Key: mf.Key, ModulePath: wasmrttest.BuildModule(t, counterDir), Limits: *mf.Runtime.Limits,
		Services: wasmrttest.NewServices().HostServices(), Capabilities: mf.Capabilities,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = mod.Close(ctx) })
	_, err = mod.Configure(ctx, &extensionv1.ConfigureRequest{ConfigJson: []byte(`{}`), InstanceId: "test"})
	require.NoError(t, err)

	_, err = mod.Handle(ctx, counterRequest("POST", "co-1", "/hog"))
	require.ErrorIs(t, err, wasmrt.ErrMemoryLimit)
	out := logs.String()
	require.Contains(t, out, "exceeded its memory limit of 32MB")
	require.NotContains(t, out, "goroutine")
	require.Equal(t, 1, strings.Count(out, "\n"), "%s", out)
}
