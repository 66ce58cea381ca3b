// Package process is the first-party "process" adapter (extension adapter.process): it runs
// an agent's heartbeat as a local command in its own process group, streams the command's
// stdout and stderr to the run log through agents.runEvents, enforces the run timeout with
// SIGTERM then SIGKILL after a grace period, and reports the exit as the run's result.
package process

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/keelhq/keel/extensions"
	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/adapter"
)

// Type is the adapter type; the extension key is "adapter.process".
const Type = "process"

// Key is the extension key (adapter.ExtensionKey(Type)).
const Key = "adapter.process"

// Version is the extension's version.
const Version = "0.1.0"

func init() { extensions.Register(Key, func() sdk.Extension { return New() }) }

// Adapter is the process adapter extension.
type Adapter struct {
	host    *sdk.Host
	log     hclog.Logger
	dataDir string

	mu   sync.Mutex
	runs map[string]*run
}

// New returns an unconfigured adapter.
func New() *Adapter {
	return &Adapter{log: hclog.NewNullLogger(), runs: map[string]*run{}}
}

// Manifest describes the adapter: kind adapter, the four adapter methods, and the one
// method it calls, agents.runEvents. The adapterConfig schema is served by info, not as the
// extension's own config schema (the extension itself takes no config).
func (a *Adapter) Manifest() *sdk.Manifest {
	return &sdk.Manifest{
		Key:          Key,
		Version:      Version,
		Kind:         sdk.KindAdapter,
		DisplayName:  "Process adapter",
		Description:  "Runs an agent's heartbeat as a local command and streams its output to the run log.",
		Runtime:      sdk.Runtime{Kind: sdk.RuntimeProcess},
		Capabilities: []string{sdk.CapCalls},
		Provides: []sdk.Method{
			{Name: adapter.MethodExecute, Description: "Run one heartbeat run as a local command."},
			{Name: adapter.MethodCancel, Description: "Stop a run that is executing."},
			{Name: adapter.MethodTestEnvironment, Description: "Check that the command resolves and the cwd exists."},
			{Name: adapter.MethodInfo, Description: "Describe the adapter and its config schema."},
		},
		Uses: []string{adapter.RunEventsMethod},
	}
}

// Configure keeps the host services and the data directory, under which per-agent work
// directories are made.
func (a *Adapter) Configure(_ context.Context, env *sdk.Env) error {
	a.host, a.dataDir = env.Host, env.DataDir
	if env.Logger != nil {
		a.log = env.Logger
	}
	return nil
}

// CallMethod serves the adapter methods.
func (a *Adapter) CallMethod(ctx context.Context, call *sdk.MethodCall) (any, error) {
	return adapter.Dispatch(ctx, Key, a, call)
}

// Info implements adapter.Runner.
func (a *Adapter) Info() *adapter.Info { return Info() }

// Info describes the process adapter.
func Info() *adapter.Info {
	return &adapter.Info{
		Type: Type, Label: "Process", Models: []adapter.Model{},
		ConfigSchema: json.RawMessage(ConfigSchema), SupportsLocalAgentJWT: true,
	}
}

// Stop terminates every live run's process group: SIGTERM, then SIGKILL after a second.
func (a *Adapter) Stop(context.Context) error {
	a.mu.Lock()
	live := make([]*run, 0, len(a.runs))
	for _, r := range a.runs {
		live = append(live, r)
	}
	a.mu.Unlock()
	for _, r := range live {
		r.terminate(reasonCancelled, time.Second)
	}
	for _, r := range live {
		select {
		case <-r.exited:
		case <-time.After(3 * time.Second):
		}
	}
	return nil
}

// Cancel signals a live run; it reports whether one was found (adapter.Runner).
func (a *Adapter) Cancel(runID string) bool {
	a.mu.Lock()
	r := a.runs[runID]
	a.mu.Unlock()
	if r == nil {
		return false
	}
	r.terminate(reasonCancelled, r.grace)
	return true
}

var (
	_ sdk.Configurer     = (*Adapter)(nil)
	_ sdk.MethodProvider = (*Adapter)(nil)
	_ sdk.Stopper        = (*Adapter)(nil)
)

var _ adapter.Runner = (*Adapter)(nil)
