package environments_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/keelhq/keel/extensions"
	"github.com/keelhq/keel/sdk"
)

// testDriverKey is the key of a plugin, compiled into this test binary, that declares the
// environment driver test.sandbox: the host relays the driver contract to it across the
// process boundary as to any plugin.
const testDriverKey = "test.envdriver"

func init() { extensions.Register(testDriverKey, func() sdk.Extension { return &driverPlugin{} }) }

// driverPlugin is the example plugin.
type driverPlugin struct{}

func (p *driverPlugin) Manifest() *sdk.Manifest {
	return &sdk.Manifest{Key: testDriverKey, Version: "0.1.0", Kind: sdk.KindPlugin, DisplayName: "Test sandbox driver",
		Runtime: sdk.Runtime{Kind: sdk.RuntimeProcess}, Capabilities: []string{sdk.CapEnvironmentDrivers},
		EnvironmentDrivers: []sdk.EnvironmentDriverDecl{{Driver: "test.sandbox", DisplayName: "Test sandbox",
			ConfigSchema: json.RawMessage(`{"type":"object","required":["region"],"properties":{"region":{"type":"string"}}}`)}}}
}

func (p *driverPlugin) EnvironmentDriver() sdk.EnvironmentDriver { return sandbox{} }

// sandbox is a driver that pretends: leases are names, workspaces are paths under them.
type sandbox struct {
	sdk.EnvironmentDriverNotSupported
}

type sandboxConfig struct {
	Region string `json:"region"`
}

func (sandbox) ValidateConfig(_ context.Context, env *sdk.EnvironmentRef) (*sdk.EnvValidateResult, error) {
	var c sandboxConfig
	_ = json.Unmarshal(env.Config, &c)
	if c.Region != "eu" && c.Region != "us" {
		return &sdk.EnvValidateResult{OK: false, Errors: []string{fmt.Sprintf("region %s is not served", c.Region)}}, nil
	}
	return &sdk.EnvValidateResult{OK: true}, nil
}

func (sandbox) Probe(_ context.Context, env *sdk.EnvironmentRef) (*sdk.EnvProbeResult, error) {
	var c sandboxConfig
	_ = json.Unmarshal(env.Config, &c)
	return &sdk.EnvProbeResult{Status: "pass", Message: "sandbox " + c.Region + " is up"}, nil
}

func (sandbox) AcquireLease(_ context.Context, req *sdk.EnvLeaseRequest) (*sdk.EnvLease, error) {
	return &sdk.EnvLease{ProviderLeaseID: "sbx-" + req.LeaseID}, nil
}

func (sandbox) RealizeWorkspace(_ context.Context, req *sdk.EnvWorkspaceRequest) (*sdk.EnvWorkspace, error) {
	return &sdk.EnvWorkspace{Path: "/sandbox/" + req.ProviderLeaseID + "/" + req.Key}, nil
}

var _ sdk.EnvironmentDriverProvider = (*driverPlugin)(nil)
