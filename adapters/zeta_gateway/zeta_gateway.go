// Package zetagateway is the first-party "zeta_gateway" adapter (extension
// adapter.zeta_gateway): it runs an agent's heartbeat on a remote run server over HTTP and
// server-sent events (spec part 2, "Remote-run adapter behaviour"; REFERENCE-adapters.md
// 8). Per run it POSTs /v1/runs with the run id as Idempotency-Key, follows
// /v1/runs/{id}/events (reconnecting after eventReconnectMs), polls /v1/runs/{id} as a
// fallback, and stops the remote run on timeout or cancel.
package zetagateway

import (
	"context"
	"net/http"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/keelhq/keel/adapters/internal/gateway"
	"github.com/keelhq/keel/extensions"
	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/adapter"
)

// Type is the adapter type.
const Type = "zeta_gateway"

// Key is the extension key (adapter.ExtensionKey(Type)).
const Key = "adapter.zeta_gateway"

// Version is the extension's version.
const Version = "0.1.0"

func init() { extensions.Register(Key, func() sdk.Extension { return New() }) }

// Adapter is the zeta_gateway adapter extension.
type Adapter struct {
	host   *sdk.Host
	log    hclog.Logger
	client *http.Client

	mu   sync.Mutex
	runs map[string]context.CancelCauseFunc
}

// New returns an unconfigured adapter.
func New() *Adapter {
	return &Adapter{log: hclog.NewNullLogger(), client: &http.Client{}, runs: map[string]context.CancelCauseFunc{}}
}

// Manifest describes the adapter: kind adapter, the four adapter methods, and the methods it
// calls: agents.runEvents for the run log and secrets.resolve for the apiKey reference.
func (a *Adapter) Manifest() *sdk.Manifest {
	return &sdk.Manifest{
		Key:          Key,
		Version:      Version,
		Kind:         sdk.KindAdapter,
		DisplayName:  "Remote-run gateway adapter",
		Description:  "Runs an agent's heartbeat on a remote run server over HTTP and server-sent events.",
		Runtime:      sdk.Runtime{Kind: sdk.RuntimeProcess},
		Capabilities: []string{sdk.CapCalls, sdk.CapSecrets},
		Provides: []sdk.Method{
			{Name: adapter.MethodExecute, Description: "Start one heartbeat run on the remote run server and follow it to its end."},
			{Name: adapter.MethodCancel, Description: "Stop a run in flight (and the remote run)."},
			{Name: adapter.MethodTestEnvironment, Description: "Check the base URL, the key, the transport and the server's health."},
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

// Info describes the adapter. The remote server picks the model, so the list is empty.
func Info() *adapter.Info {
	return &adapter.Info{Type: Type, Label: "Remote-run gateway", Models: []adapter.Model{}, ConfigSchema: []byte(ConfigSchema)}
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

// Cancel aborts a run (its remote run is stopped); it reports whether one was in flight.
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
