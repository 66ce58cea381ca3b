// Package thetagateway is the first-party "theta_gateway" adapter (extension
// adapter.theta_gateway): it runs an agent's heartbeat on an agent gateway over WebSocket
// (REFERENCE.md 3 "Gateways", REFERENCE-adapters.md 7). Per run it opens a connection,
// answers the gateway's connect.challenge with a connect request signed by the agent's
// Ed25519 device key, sends an agent request with the run id as idempotency key and the
// session key of the configured strategy, and waits for the run with agent.wait while the
// gateway streams the agent's output as events.
package thetagateway

import (
	"context"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/keelhq/keel/adapters/internal/gateway"
	"github.com/keelhq/keel/extensions"
	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/adapter"
)

// Type is the adapter type.
const Type = "theta_gateway"

// Key is the extension key (adapter.ExtensionKey(Type)).
const Key = "adapter.theta_gateway"

// Version is the extension's version.
const Version = "0.1.0"

func init() { extensions.Register(Key, func() sdk.Extension { return New() }) }

// Adapter is the theta_gateway adapter extension.
type Adapter struct {
	host *sdk.Host
	log  hclog.Logger

	mu   sync.Mutex
	runs map[string]context.CancelCauseFunc
}

// New returns an unconfigured adapter.
func New() *Adapter {
	return &Adapter{log: hclog.NewNullLogger(), runs: map[string]context.CancelCauseFunc{}}
}

// Manifest describes the adapter: kind adapter, the four adapter methods, and the methods it
// calls: agents.runEvents for the run log and secrets.resolve for the device key and token
// references.
func (a *Adapter) Manifest() *sdk.Manifest {
	return &sdk.Manifest{
		Key:          Key,
		Version:      Version,
		Kind:         sdk.KindAdapter,
		DisplayName:  "Agent gateway adapter (WebSocket)",
		Description:  "Runs an agent's heartbeat on an agent gateway over WebSocket with a signed device identity.",
		Runtime:      sdk.Runtime{Kind: sdk.RuntimeProcess},
		Capabilities: []string{sdk.CapCalls, sdk.CapSecrets},
		Provides: []sdk.Method{
			{Name: adapter.MethodExecute, Description: "Run one heartbeat run on the gateway and wait for it."},
			{Name: adapter.MethodCancel, Description: "Stop waiting for a run in flight and close its connection."},
			{Name: adapter.MethodTestEnvironment, Description: "Check the URL and the credentials, and probe the gateway's handshake."},
			{Name: adapter.MethodInfo, Description: "Describe the adapter and its config schema."},
		},
		Uses: []string{adapter.RunEventsMethod, gateway.SecretResolveMethod},
	}
}

// Configure keeps the host services.
func (a *Adapter) Configure(_ context.Context, env *sdk.Env) error {
	a.host = env.Host
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

// Info describes the adapter. The gateway's agent picks the model, so the list is empty.
func Info() *adapter.Info {
	return &adapter.Info{Type: Type, Label: "Agent gateway (WebSocket)", Models: []adapter.Model{}, ConfigSchema: []byte(ConfigSchema)}
}

// Stop aborts every run in flight.
func (a *Adapter) Stop(context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, cancel := range a.runs {
		cancel(errCancelled)
	}
	return nil
}

// Cancel aborts a run (its connection is closed); it reports whether one was in flight.
func (a *Adapter) Cancel(runID string) bool {
	a.mu.Lock()
	cancel := a.runs[runID]
	a.mu.Unlock()
	if cancel == nil {
		return false
	}
	cancel(errCancelled)
	return true
}

var (
	_ sdk.Configurer     = (*Adapter)(nil)
	_ sdk.MethodProvider = (*Adapter)(nil)
	_ sdk.Stopper        = (*Adapter)(nil)
)

var _ adapter.Runner = (*Adapter)(nil)
