package wasmguest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
)

// Extension is the base every wasm extension implements. Optional behaviour comes from the
// smaller interfaces below; an extension implements only what its manifest declares.
type Extension interface {
	// Manifest returns the extension's manifest as strict JSON, usually an embedded
	// manifest.json. Called for Describe.
	Manifest() []byte
}

// Configurer is implemented by extensions that need their config. Configure is called once
// per module instance, before any other call on that instance; an error fails the call
// that created the instance.
type Configurer interface {
	Configure(ctx context.Context, env *Env) error
}

// HTTPProvider is implemented by extensions that declare routes. HTTPHandler is called after
// Configure; the handler sees ordinary requests at the manifest paths and reads what the
// kernel resolved with ActorFrom, CompanyIDFrom, ParamFrom and r.PathValue.
type HTTPProvider interface {
	HTTPHandler() http.Handler
}

// MethodProvider is implemented by extensions that provide methods to others.
type MethodProvider interface {
	// CallMethod serves one provided method; the result is encoded as JSON. Returning an
	// *Error sends its status and code.
	CallMethod(ctx context.Context, call *MethodCall) (any, error)
}

// JobRunner is implemented by extensions that declare jobs. Jobs are retried on error, so
// RunJob must be idempotent.
type JobRunner interface {
	RunJob(ctx context.Context, job *JobRun) error
}

// EventHandler is implemented by extensions that subscribe to events. Delivery is at least
// once; an error makes the kernel retry later.
type EventHandler interface {
	OnEvent(ctx context.Context, ev *Event) error
}

// HealthChecker is implemented by extensions with a meaningful health check; an error
// reports the extension degraded.
type HealthChecker interface {
	Health(ctx context.Context) error
}

// Stopper is implemented by extensions that must flush or release something on shutdown.
// Stop is called once per live instance and must be idempotent.
type Stopper interface {
	Stop(ctx context.Context) error
}

// Env is what the host hands an instance at Configure.
type Env struct {
	// Config is the extension config, already validated against the manifest's schema.
	Config json.RawMessage
	// DataDir is the extension's data directory on the host (not reachable from wasm
	// unless the host mounts it).
	DataDir       string
	InstanceID    string
	APIURL        string
	KernelVersion string
}

// Actor is the caller the kernel resolved and authorized for a request or a call.
type Actor struct {
	// Type is "board", "agent", "system" or "none".
	Type    string
	UserID  string
	AgentID string
	// CompanyID is the agent's company for agent actors.
	CompanyID string
	RunID     string
	// Source is local_implicit, session, board_key, agent_key or agent_jwt.
	Source          string
	IsInstanceAdmin bool
	CompanyIDs      []string
	KeyID           string
}

// SystemActor is the actor of work the extension does on its own behalf.
func SystemActor() *Actor { return &Actor{Type: "system"} }

// MethodCall is one invocation of a provided method.
type MethodCall struct {
	Method    string
	Input     json.RawMessage
	Actor     *Actor
	Caller    string
	CompanyID string
}

// Bind decodes the call input into v; malformed input is a 400 *Error.
func (c *MethodCall) Bind(v any) error {
	if len(c.Input) == 0 {
		return nil
	}
	if err := json.Unmarshal(c.Input, v); err != nil {
		return &Error{Status: http.StatusBadRequest, Message: fmt.Sprintf("invalid input for %s: %v", c.Method, err)}
	}
	return nil
}

// JobRun is one run of a declared job.
type JobRun struct {
	Key     string
	Args    json.RawMessage
	Attempt int
	ID      string
}

// Event is one delivered event.
type Event struct {
	ID         string
	Type       string
	CompanyID  string
	Payload    json.RawMessage
	OccurredAt string
	Source     string
}

// Error is an error that crosses the extension boundary with an HTTP status, an optional
// code and details, and a source: "plugin" when the extension is at fault, "downstream"
// when something it called is.
type Error struct {
	Status  int
	Message string
	Code    string
	Details any
	Source  string
}

// Error returns the message.
func (e *Error) Error() string { return e.Message }

// Error sources.
const (
	SourcePlugin     = "plugin"
	SourceDownstream = "downstream"
)

// Code is a google.rpc status code, carried by errors that cross the host_call boundary.
type Code uint8

// Codes the host services use.
const (
	CodeUnknown            Code = 2
	CodeInvalidArgument    Code = 3
	CodeDeadlineExceeded   Code = 4
	CodeNotFound           Code = 5
	CodeAlreadyExists      Code = 6
	CodePermissionDenied   Code = 7
	CodeResourceExhausted  Code = 8
	CodeFailedPrecondition Code = 9
	CodeUnimplemented      Code = 12
	CodeInternal           Code = 13
	CodeUnavailable        Code = 14
	CodeUnauthenticated    Code = 16
)

// HostError is a failed host service call: Service names it ("storage.get"), Code is the
// status code the host service returned (CodeUnknown when it gave none).
type HostError struct {
	Service string
	Code    Code
	Message string
}

// Error returns "<service>: <message>".
func (e *HostError) Error() string { return e.Service + ": " + e.Message }

// ErrNoHost is returned by every host call outside GOOS=wasip1.
var ErrNoHost = &HostError{Code: CodeUnavailable, Message: "wasmguest: no host (not running as a wasip1 module)"}

var registered Extension

// Register makes ext the module's extension. Call it once, from an init function of
// package main; a second call panics.
func Register(ext Extension) {
	if registered != nil {
		panic("wasmguest: Register called twice")
	}
	if ext == nil {
		panic("wasmguest: Register called with a nil extension")
	}
	registered = ext
}
