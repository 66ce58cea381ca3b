package localcli

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/keelhq/keel/adapters/internal/procrun"
	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/adapter"
)

// Version is the version of the CLI adapter extensions.
const Version = "0.1.0"

// Extension is one CLI adapter type's extension: a lazy adapter serving the adapter
// contract from its Spec.
type Extension struct {
	spec    *Spec
	host    *sdk.Host
	log     hclog.Logger
	dataDir string
	runs    procrun.Registry
	// loginCommand is the instance config's command: the CLI device logins run.
	loginMu      sync.Mutex
	loginCommand string
}

// instanceConfigSchema is the instance config of a type with a device login
// (PATCH /api/adapters/{type} {config}).
const instanceConfigSchema = `{"type":"object","additionalProperties":false,"properties":{
 "command":{"type":"string","minLength":1,"description":"The CLI binary device logins run (default the adapter's own command)."}}}`

// New returns the extension of a spec.
func New(s *Spec) *Extension {
	return &Extension{spec: s, log: hclog.NewNullLogger()}
}

// Key returns the spec's extension key.
func (s *Spec) Key() string { return adapter.ExtensionKey(s.Type) }

// Manifest describes the adapter: kind adapter, the four adapter methods, and the one
// method it calls, agents.runEvents.
func (x *Extension) Manifest() *sdk.Manifest {
	s := x.spec
	return &sdk.Manifest{
		Key:          s.Key(),
		Version:      Version,
		Kind:         sdk.KindAdapter,
		DisplayName:  s.Label,
		Description:  "Runs an agent's heartbeat through the " + s.Tool + " CLI's non-interactive mode and parses its output into usage, cost and session.",
		Runtime:      sdk.Runtime{Kind: sdk.RuntimeProcess},
		Capabilities: []string{sdk.CapCalls},
		Provides: []sdk.Method{
			{Name: adapter.MethodExecute, Description: "Run one heartbeat run through the " + s.Tool + " CLI."},
			{Name: adapter.MethodCancel, Description: "Stop a run that is executing."},
			{Name: adapter.MethodTestEnvironment, Description: "Check that the CLI is installed, its version and whether it is logged in."},
			{Name: adapter.MethodInfo, Description: "Describe the adapter, its models and its config schema."},
		},
		Uses:         []string{adapter.RunEventsMethod},
		ConfigSchema: x.configSchema(),
	}
}

// configSchema is the instance config schema: only types with a device login take one.
func (x *Extension) configSchema() json.RawMessage {
	if x.spec.DeviceLoginArgs == nil {
		return nil
	}
	return json.RawMessage(instanceConfigSchema)
}

// Configure keeps the host services and the data directory.
func (x *Extension) Configure(_ context.Context, env *sdk.Env) error {
	x.host, x.dataDir = env.Host, env.DataDir
	if env.Logger != nil {
		x.log = env.Logger
	}
	return x.OnConfigChange(context.Background(), env.Config)
}

// OnConfigChange takes a new instance config (the device login's command) without a restart.
func (x *Extension) OnConfigChange(_ context.Context, config json.RawMessage) error {
	var cfg struct {
		Command string `json:"command"`
	}
	if len(config) > 0 {
		if err := json.Unmarshal(config, &cfg); err != nil {
			return fmt.Errorf("error decoding the instance config of %s: %w", x.spec.Key(), err)
		}
	}
	x.loginMu.Lock()
	x.loginCommand = cfg.Command
	x.loginMu.Unlock()
	return nil
}

// CallMethod serves the adapter methods.
func (x *Extension) CallMethod(ctx context.Context, call *sdk.MethodCall) (any, error) {
	return adapter.Dispatch(ctx, x.spec.Key(), x, call)
}

// Info describes the adapter (adapter.Runner).
func (x *Extension) Info() *adapter.Info {
	s := x.spec
	models := s.Models
	if models == nil {
		models = []adapter.Model{}
	}
	info := &adapter.Info{Type: s.Type, Label: s.Label, Models: models,
		ConfigSchema: json.RawMessage(s.ConfigSchema()), SupportsLocalAgentJWT: true}
	if s.DeviceLoginArgs != nil {
		x.loginMu.Lock()
		command := x.loginCommand
		x.loginMu.Unlock()
		if command == "" {
			command = s.DefaultCommand
		}
		info.DeviceLogin = &adapter.DeviceLogin{Argv: append([]string{command}, s.DeviceLoginArgs...)}
	}
	if s.DefaultModel != "" {
		info.DefaultConfig, _ = json.Marshal(map[string]string{"model": s.DefaultModel})
	}
	return info
}

// Cancel stops a live run (adapter.Runner).
func (x *Extension) Cancel(runID string) bool { return x.runs.Cancel(runID) }

// Stop stops every live run.
func (x *Extension) Stop(context.Context) error {
	x.runs.StopAll()
	return nil
}

var (
	_ sdk.Configurer          = (*Extension)(nil)
	_ sdk.MethodProvider      = (*Extension)(nil)
	_ sdk.Stopper             = (*Extension)(nil)
	_ sdk.ConfigChangeHandler = (*Extension)(nil)
	_ adapter.Runner          = (*Extension)(nil)
)
