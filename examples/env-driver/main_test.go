package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdk"
)

// Test_main checks the package's contract: a plugin declaring example.dirbox with the
// environment_drivers capability, whose driver answers the reserved contract calls.
func Test_main(t *testing.T) {
	t.Parallel()
	p := newPlugin()
	mf := p.Manifest()
	require.Equal(t, sdk.KindPlugin, mf.Kind)
	require.True(t, mf.HasCapability(sdk.CapEnvironmentDrivers))
	require.Equal(t, "example.dirbox", mf.EnvironmentDrivers[0].Driver)

	root := t.TempDir()
	ctx := context.Background()
	cfg, _ := json.Marshal(map[string]string{"root": root})
	env := sdk.EnvironmentRef{Driver: "example.dirbox", Config: cfg}
	call := func(method string, in any) any {
		t.Helper()
		b, err := json.Marshal(in)
		require.NoError(t, err)
		out, err := sdk.CallEnvironmentDriver(ctx, p.EnvironmentDriver(), method, b)
		require.NoError(t, err)
		return out
	}
	require.True(t, call(sdk.EnvValidateConfigMethod, env).(*sdk.EnvValidateResult).OK)
	require.False(t, call(sdk.EnvValidateConfigMethod, sdk.EnvironmentRef{Config: json.RawMessage(`{"root":"rel"}`)}).(*sdk.EnvValidateResult).OK)
	require.Equal(t, "pass", call(sdk.EnvProbeMethod, env).(*sdk.EnvProbeResult).Status)
	lease := "0190d2a8-6c1e-7e6a-9a3c-1d2e3f405162"
	require.Equal(t, "box-"+lease, call(sdk.EnvAcquireLeaseMethod, sdk.EnvLeaseRequest{EnvironmentRef: env, LeaseID: lease}).(*sdk.EnvLease).ProviderLeaseID)
	ref := sdk.EnvLeaseRef{EnvironmentRef: env, LeaseID: lease}
	res := call(sdk.EnvExecuteMethod, sdk.EnvExecRequest{EnvLeaseRef: ref, Argv: []string{"printenv", "BOX_LEASE_ID"}}).(*sdk.EnvExecResult)
	require.Equal(t, lease+"\n", res.Stdout)
	call(sdk.EnvDestroyLeaseMethod, ref)
	require.NoDirExists(t, root+"/box-"+lease)
}
