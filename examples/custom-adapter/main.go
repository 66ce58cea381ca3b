// Command custom-adapter is an example adapter package that overrides the built-in process
// adapter. Its key is "adapter.process.custom": an installed adapter keyed
// adapter.<type>.<name> serves <type>, and because "process" is a built-in type it becomes
// the process override as soon as it is installed (POST /api/adapters/install), without a
// restart. It runs each heartbeat through the built-in adapter's code with
// KEEL_CUSTOM_ADAPTER=1 in the command's environment, writes a "[custom-adapter]" line to
// the run log, and tags the result (resultJson.adapter = "custom", resultJson.tag from its
// instance config, summary prefixed), so tests and operators can tell which adapter ran.
package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/keelhq/keel/adapters/process"
	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/adapter"
)

//go:embed manifest.json
var manifestJSON []byte

// Custom is the override adapter: the built-in process adapter plus a tag.
type Custom struct {
	manifest *sdk.Manifest
	inner    *process.Adapter
	host     *sdk.Host

	mu  sync.Mutex
	tag string
}

// config is the adapter's instance config (PATCH /api/adapters/process {config}).
type config struct {
	Tag string `json:"tag"`
}

func newCustom() *Custom {
	m, err := sdk.ParseManifest(manifestJSON)
	if err != nil {
		panic(err)
	}
	return &Custom{manifest: m, inner: process.New()}
}

// Manifest returns the embedded manifest.
func (c *Custom) Manifest() *sdk.Manifest { return c.manifest }

// Configure configures the wrapped process adapter and reads the instance config.
func (c *Custom) Configure(ctx context.Context, env *sdk.Env) error {
	c.host = env.Host
	if err := c.inner.Configure(ctx, env); err != nil {
		return err
	}
	return c.OnConfigChange(ctx, env.Config)
}

// OnConfigChange takes a new instance config without a restart (sdk.ConfigChangeHandler).
func (c *Custom) OnConfigChange(_ context.Context, raw json.RawMessage) error {
	var cfg config
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &cfg); err != nil {
			return fmt.Errorf("error decoding custom adapter config: %w", err)
		}
	}
	c.mu.Lock()
	c.tag = cfg.Tag
	c.mu.Unlock()
	return nil
}

// CallMethod serves the adapter contract.
func (c *Custom) CallMethod(ctx context.Context, call *sdk.MethodCall) (any, error) {
	return adapter.Dispatch(ctx, c.manifest.Key, c, call)
}

// Execute runs the heartbeat as the built-in would, marked, and tags the result.
func (c *Custom) Execute(ctx context.Context, req *adapter.ExecuteRequest) (*adapter.ExecuteResult, error) {
	env := make(map[string]string, len(req.Env)+1)
	for k, v := range req.Env {
		env[k] = v
	}
	env["KEEL_CUSTOM_ADAPTER"] = "1"
	req.Env = env
	c.logLine(ctx, req.RunID, "[custom-adapter] running "+req.RunID+"\n")
	res, err := c.inner.Execute(ctx, req)
	if err != nil || res == nil {
		return res, err
	}
	c.mu.Lock()
	tag := c.tag
	c.mu.Unlock()
	tagged := map[string]any{}
	if len(res.ResultJSON) > 0 {
		_ = json.Unmarshal(res.ResultJSON, &tagged)
	}
	tagged["adapter"] = "custom"
	if tag != "" {
		tagged["tag"] = tag
	}
	res.ResultJSON, _ = json.Marshal(tagged)
	res.Summary = "[custom-adapter] " + res.Summary
	return res, nil
}

// logLine streams one system line to the run log.
func (c *Custom) logLine(ctx context.Context, runID, text string) {
	if c.host == nil {
		return
	}
	_ = c.host.Call(ctx, adapter.RunEventsMethod, sdk.SystemActor(), "", adapter.RunEventsRequest{RunID: runID,
		Events: []adapter.RunEvent{{Kind: "log", Stream: "system", Text: text, At: time.Now()}}}, nil)
}

// Cancel stops an executing run (adapter.Runner).
func (c *Custom) Cancel(runID string) bool { return c.inner.Cancel(runID) }

// TestEnvironment checks a config as the built-in does (adapter.Runner).
func (c *Custom) TestEnvironment(req *adapter.TestEnvironmentRequest) *adapter.TestEnvironmentResult {
	return c.inner.TestEnvironment(req)
}

// Info describes the adapter: the process type, with a model list for the registry.
func (c *Custom) Info() *adapter.Info {
	info := *process.Info()
	info.Label = "Process (custom)"
	info.Models = []adapter.Model{{ID: "shell", Label: "Local shell"}}
	return &info
}

// Stop stops live runs.
func (c *Custom) Stop(ctx context.Context) error { return c.inner.Stop(ctx) }

func main() { sdk.Serve(newCustom()) }

var (
	_ adapter.Runner          = (*Custom)(nil)
	_ sdk.ConfigChangeHandler = (*Custom)(nil)
)
