package sdk

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	extensionv1 "github.com/keelhq/keel/sdk/proto/extension/v1"
)

// Actor is the caller the kernel resolved and authorized for a request or a call.
type Actor = extensionv1.Actor

// Extension is the base every extension implements. Optional behaviour comes from the
// smaller interfaces below; an extension implements only what its manifest declares.
type Extension interface {
	// Manifest returns the extension's manifest. Called once at launch (Describe).
	Manifest() *Manifest
}

// Configurer is implemented by extensions that need their environment: host services,
// database, config. Configure is called once per launch, before any other call.
type Configurer interface {
	Configure(ctx context.Context, env *Env) error
}

// HTTPProvider is implemented by extensions that declare routes. The handler sees ordinary
// requests at the manifest paths; ActorFrom, CompanyIDFrom and ParamFrom read what the
// kernel resolved.
type HTTPProvider interface {
	HTTPHandler() http.Handler
}

// MethodProvider is implemented by extensions that provide methods to others.
type MethodProvider interface {
	// CallMethod serves one provided method. Returning an *Error sends its status and code.
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

// HealthChecker is implemented by extensions with a meaningful health check.
type HealthChecker interface {
	Health(ctx context.Context) error
}

// Stopper is implemented by extensions that must release resources on shutdown. Stop is
// idempotent and safe before Configure.
type Stopper interface {
	Stop(ctx context.Context) error
}

// SchemaName returns the PostgreSQL schema (and role name stem) the host gives an extension
// with the database capability: ext_ and the key with dots as underscores.
func SchemaName(key string) string {
	return "ext_" + strings.ReplaceAll(key, ".", "_")
}

// Env is what the host hands an extension at Configure.
type Env struct {
	// Host reaches the host services the manifest's capabilities allow.
	Host *Host
	// Config is the extension config, already validated against the manifest's schema.
	Config json.RawMessage
	// DatabaseURL connects as the extension's own role to its own schema (database capability).
	DatabaseURL string
	// Key is the extension's key (its manifest's).
	Key string
	// Schema is the extension's own PostgreSQL schema (SchemaName of the key), set with
	// DatabaseURL; migrate.Open keeps its bookkeeping there unless told otherwise.
	Schema string
	// DataDir is a directory the extension owns.
	DataDir       string
	InstanceID    string
	APIURL        string
	KernelVersion string
	Logger        hclog.Logger
	// Metrics is the extension's own Prometheus registry: what is registered here appears on
	// the host's GET /metrics with an extension label, gathered when the host is scraped.
	Metrics *prometheus.Registry
}

// MethodCall is one invocation of a provided method.
type MethodCall struct {
	Method    string
	Input     json.RawMessage
	Actor     *Actor
	Caller    string
	CompanyID string
}

// Bind decodes the call input into v.
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
	// Source is who wrote the event, stamped by the kernel: "kernel" or the key of the
	// extension that wrote it. It cannot be forged by the writer.
	Source string
}

// From reports whether the event was written by owner (an extension key or "kernel").
// Subscribers act on an entity's events only when they come from the entity's owner:
// anyone with activity access can write an entry that looks like another owner's event.
func (e *Event) From(owner string) bool { return e.Source == owner }

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

// ErrorSource values.
const (
	SourcePlugin     = "plugin"
	SourceDownstream = "downstream"
)

func toProtoError(err error) *extensionv1.Error {
	if err == nil {
		return nil
	}
	e, ok := err.(*Error)
	if !ok {
		return &extensionv1.Error{Status: http.StatusInternalServerError, Message: err.Error(), Source: SourcePlugin}
	}
	pe := &extensionv1.Error{Status: int32(e.Status), Message: e.Message, Code: e.Code, Source: e.Source}
	if pe.Status == 0 {
		pe.Status = http.StatusInternalServerError
	}
	if pe.Source == "" {
		pe.Source = SourcePlugin
	}
	if e.Details != nil {
		pe.DetailsJson, _ = json.Marshal(e.Details)
	}
	return pe
}

// FromProtoError converts a wire error back to an *Error (nil stays nil).
func FromProtoError(pe *extensionv1.Error) error {
	if pe == nil {
		return nil
	}
	e := &Error{Status: int(pe.Status), Message: pe.Message, Code: pe.Code, Source: pe.Source}
	if len(pe.DetailsJson) > 0 {
		e.Details = json.RawMessage(pe.DetailsJson)
	}
	return e
}
