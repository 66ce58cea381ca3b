//go:build !wasip1

package main

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/host/wasmrt"
	"github.com/keelhq/keel/host/wasmrt/wasmrttest"
	"github.com/keelhq/keel/sdk"
	extensionv1 "github.com/keelhq/keel/sdk/proto/extension/v1"
)

// Test_main builds the module, loads it the way the host does (manifest limits and
// capabilities, in-memory host services) and drives its routes.
func Test_main(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mf, err := sdk.ParseManifest(manifestJSON)
	require.NoError(t, err)
	require.Equal(t, sdk.RuntimeWasm, mf.Runtime.Kind)

	wasmPath := wasmrttest.BuildModule(t, ".")
	rt, err := wasmrt.New(ctx, wasmrt.Config{CacheDir: filepath.Join(t.TempDir(), "cache")})
	require.NoError(t, err)
	t.Cleanup(func() { _ = rt.Close(ctx) })
	fakes := wasmrttest.NewServices()
	mod, err := rt.Load(ctx, wasmrt.LoadParams{
		Key: mf.Key, ModulePath: wasmPath, Limits: *mf.Runtime.Limits,
		Services: fakes.HostServices(), Capabilities: mf.Capabilities,
	})
	require.NoError(t, err)

	desc, err := mod.Describe(ctx, &extensionv1.DescribeRequest{})
	require.NoError(t, err)
	require.JSONEq(t, string(manifestJSON), string(desc.ManifestJson))
	_, err = mod.Configure(ctx, &extensionv1.ConfigureRequest{})
	require.NoError(t, err)

	do := func(method, suffix string) (*extensionv1.HTTPResponse, error) {
		return mod.Handle(ctx, &extensionv1.HTTPRequest{
			Method: method, Path: "/api/companies/co-1/wasm-counter" + suffix, CompanyId: "co-1",
			Params: map[string]string{"companyId": "co-1"}, Actor: &extensionv1.Actor{Type: "agent", AgentId: "agent-1", CompanyId: "co-1"},
		})
	}
	countOf := func(res *extensionv1.HTTPResponse) int {
		t.Helper()
		require.Equal(t, int32(http.StatusOK), res.Status, "%s", res.Body)
		var body struct{ Count int }
		require.NoError(t, json.Unmarshal(res.Body, &body))
		return body.Count
	}

	res, err := do("GET", "")
	require.NoError(t, err)
	require.Equal(t, 0, countOf(res))
	for want := 1; want <= 2; want++ {
		res, err = do("POST", "/increment")
		require.NoError(t, err)
		require.Equal(t, want, countOf(res))
	}
	entries := fakes.Activity.Entries()
	require.Len(t, entries, 2)
	require.Equal(t, "wasm_counter.incremented", entries[1].Action)
	require.Equal(t, "agent", entries[1].ActorType)
	require.Equal(t, "agent-1", entries[1].AgentId)

	_, err = do("POST", "/hog")
	require.ErrorIs(t, err, wasmrt.ErrMemoryLimit)
	res, err = do("GET", "")
	require.NoError(t, err)
	require.Equal(t, 2, countOf(res), "the host keeps serving after the limit")
}
