package wasmguest

import (
	"context"
	"encoding/json"
	"fmt"
)

// Host service ids of keel.host_call (ABI v1). These never change.
const (
	svcActivityAppend  = 1
	svcAuthzCheck      = 2
	svcPrincipalsAgent = 3
	svcCompaniesGet    = 4
	svcCallsInvoke     = 5
	svcEventsPublish   = 6
	svcSettingsGet     = 7
	svcStorageGet      = 8
	svcStorageSet      = 9
	svcStorageDelete   = 10
	svcJobsEnqueue     = 11
	svcSecretsResolve  = 12
)

var serviceNames = [...]string{
	svcActivityAppend: "activity.append", svcAuthzCheck: "authz.check", svcPrincipalsAgent: "principals.get_agent",
	svcCompaniesGet: "companies.get", svcCallsInvoke: "calls.invoke", svcEventsPublish: "events.publish",
	svcSettingsGet: "settings.get", svcStorageGet: "storage.get", svcStorageSet: "storage.set",
	svcStorageDelete: "storage.delete", svcJobsEnqueue: "jobs.enqueue", svcSecretsResolve: "secrets.resolve",
}

// Envelope status bytes (ABI v1): 0 ok, then the response; 1 error, then a UTF-8 message;
// 2 error with a status code, then one code byte and a UTF-8 message.
const (
	envOK        = 0
	envError     = 1
	envCodeError = 2
)

// hostCallFunc sends one request to the host; abi_wasip1.go sets it to keel.host_call.
// It returns the envelope the host wrote.
var hostCallFunc = func(service uint32, in []byte) []byte { return nil }

// call runs one host service call: in is the encoded request; the result is the encoded
// response or a *HostError.
func call(ctx context.Context, service uint32, in []byte) ([]byte, error) {
	name := serviceNames[service]
	if err := ctx.Err(); err != nil {
		return nil, &HostError{Service: name, Code: CodeDeadlineExceeded, Message: err.Error()}
	}
	env := hostCallFunc(service, in)
	if env == nil {
		e := *ErrNoHost
		e.Service = name
		return nil, &e
	}
	return parseEnvelope(name, env)
}

func parseEnvelope(name string, env []byte) ([]byte, error) {
	if len(env) == 0 {
		return nil, &HostError{Service: name, Code: CodeInternal, Message: "empty result from host"}
	}
	switch env[0] {
	case envOK:
		return env[1:], nil
	case envError:
		return nil, &HostError{Service: name, Code: CodeUnknown, Message: string(env[1:])}
	case envCodeError:
		if len(env) < 2 {
			return nil, &HostError{Service: name, Code: CodeInternal, Message: "truncated error from host"}
		}
		return nil, &HostError{Service: name, Code: Code(env[1]), Message: string(env[2:])}
	default:
		return nil, &HostError{Service: name, Code: CodeInternal, Message: fmt.Sprintf("unknown result status %d from host", env[0])}
	}
}

// AppendActivityRequest is keel.host.v1.AppendActivityRequest.
type AppendActivityRequest struct {
	CompanyID string
	// ActorType is agent, user, system or plugin; empty means plugin (the calling extension).
	ActorType   string
	ActorID     string
	Action      string
	EntityType  string
	EntityID    string
	AgentID     string
	RunID       string
	DetailsJSON []byte
}

// AppendActivityResponse is keel.host.v1.AppendActivityResponse.
type AppendActivityResponse struct {
	ID        string
	CreatedAt string
}

// Activity appends an entry to the company activity log (capability activity).
func Activity(ctx context.Context, req *AppendActivityRequest) (*AppendActivityResponse, error) {
	var e encoder
	req.encode(&e)
	return roundTrip[AppendActivityResponse](ctx, svcActivityAppend, e.b)
}

// ActivityEntry is what LogActivity appends.
type ActivityEntry struct {
	CompanyID  string
	Actor      *Actor
	Action     string
	EntityType string
	EntityID   string
	Details    any
}

// LogActivity appends an activity entry, attributing it to the actor when one is given and
// to the extension otherwise (capability activity).
func LogActivity(ctx context.Context, e *ActivityEntry) error {
	req := &AppendActivityRequest{CompanyID: e.CompanyID, Action: e.Action, EntityType: e.EntityType, EntityID: e.EntityID}
	if a := e.Actor; a != nil {
		switch a.Type {
		case "agent":
			req.ActorType, req.ActorID, req.AgentID, req.RunID = "agent", a.AgentID, a.AgentID, a.RunID
		case "board":
			req.ActorType, req.ActorID = "user", a.UserID
		}
	}
	if e.Details != nil {
		b, err := json.Marshal(e.Details)
		if err != nil {
			return fmt.Errorf("error encoding activity details: %w", err)
		}
		req.DetailsJSON = b
	}
	if _, err := Activity(ctx, req); err != nil {
		return fmt.Errorf("error appending activity %s: %w", e.Action, err)
	}
	return nil
}

// CheckRequest is keel.host.v1.CheckRequest.
type CheckRequest struct {
	Actor     *Actor
	CompanyID string
	// Permission is a permission key such as tasks:assign; empty checks company access only.
	Permission string
}

// CheckResponse is keel.host.v1.CheckResponse.
type CheckResponse struct {
	Allowed bool
	// Reason explains a refusal in words fit for an API error.
	Reason string
}

// AuthzCheck checks company access and a permission key for an actor (capability authz).
func AuthzCheck(ctx context.Context, req *CheckRequest) (*CheckResponse, error) {
	var e encoder
	req.encode(&e)
	return roundTrip[CheckResponse](ctx, svcAuthzCheck, e.b)
}

// AgentIdentity is keel.host.v1.AgentIdentity.
type AgentIdentity struct {
	ID        string
	CompanyID string
	Name      string
	URLKey    string
	Role      string
	Status    string
	CreatedAt string
	UpdatedAt string
}

// GetAgent reads an agent identity (capability principals).
func GetAgent(ctx context.Context, agentID string) (*AgentIdentity, error) {
	var e encoder
	e.string(1, agentID)
	return roundTrip[AgentIdentity](ctx, svcPrincipalsAgent, e.b)
}

// GetCompany returns the company record as the API shows it (capability companies).
func GetCompany(ctx context.Context, companyID string) (json.RawMessage, error) {
	var e encoder
	e.string(1, companyID)
	out, err := call(ctx, svcCompaniesGet, e.b)
	if err != nil {
		return nil, err
	}
	b, err := decodeBytesField(out, 1)
	if err != nil {
		return nil, malformedResponse(serviceNames[svcCompaniesGet], err)
	}
	return json.RawMessage(b), nil
}

// InvokeRequest is keel.host.v1.InvokeRequest.
type InvokeRequest struct {
	// Method is "<extension key>.<method>" as the owner's manifest provides it.
	Method    string
	InputJSON []byte
	Actor     *Actor
	CompanyID string
}

// InvokeResponse is keel.host.v1.InvokeResponse: the output, or the callee's error.
type InvokeResponse struct {
	OutputJSON json.RawMessage
	Error      *Error
}

// Invoke calls another extension's provided method (capability calls; the manifest must
// list the method in uses).
func Invoke(ctx context.Context, req *InvokeRequest) (*InvokeResponse, error) {
	var e encoder
	req.encode(&e)
	return roundTrip[InvokeResponse](ctx, svcCallsInvoke, e.b)
}

// Call invokes another extension's provided method with input encoded as JSON and decodes
// the result into out (may be nil). A failure of the callee comes back as an *Error.
func Call(ctx context.Context, method string, actor *Actor, companyID string, input, out any) error {
	in, err := json.Marshal(input)
	if err != nil {
		return fmt.Errorf("error encoding input of %s: %w", method, err)
	}
	res, err := Invoke(ctx, &InvokeRequest{Method: method, InputJSON: in, Actor: actor, CompanyID: companyID})
	if err != nil {
		return fmt.Errorf("error calling %s: %w", method, err)
	}
	if res.Error != nil {
		return res.Error
	}
	if out != nil && len(res.OutputJSON) > 0 {
		if err := json.Unmarshal(res.OutputJSON, out); err != nil {
			return fmt.Errorf("error decoding result of %s: %w", method, err)
		}
	}
	return nil
}

// PublishRequest is keel.host.v1.PublishRequest.
type PublishRequest struct {
	Type        string
	CompanyID   string
	PayloadJSON []byte
}

// PublishResponse is keel.host.v1.PublishResponse.
type PublishResponse struct {
	ID string
}

// Publish publishes an event to subscribed extensions (capability events).
func Publish(ctx context.Context, req *PublishRequest) (*PublishResponse, error) {
	var e encoder
	req.encode(&e)
	return roundTrip[PublishResponse](ctx, svcEventsPublish, e.b)
}

// Settings reads a section of the instance settings, "general" or "experimental"
// (capability settings).
func Settings(ctx context.Context, section string) (json.RawMessage, error) {
	var e encoder
	e.string(1, section)
	out, err := call(ctx, svcSettingsGet, e.b)
	if err != nil {
		return nil, err
	}
	b, err := decodeBytesField(out, 1)
	if err != nil {
		return nil, malformedResponse(serviceNames[svcSettingsGet], err)
	}
	return json.RawMessage(b), nil
}

// StorageGet reads a key of the company's key-value state (capability storage).
func StorageGet(ctx context.Context, companyID, key string) (value []byte, found bool, err error) {
	var e encoder
	e.string(1, companyID)
	e.string(2, key)
	out, err := call(ctx, svcStorageGet, e.b)
	if err != nil {
		return nil, false, err
	}
	if value, found, err = decodeStorageGet(out); err != nil {
		return nil, false, malformedResponse(serviceNames[svcStorageGet], err)
	}
	return value, found, nil
}

// StorageSet writes a key of the company's key-value state (capability storage).
func StorageSet(ctx context.Context, companyID, key string, value []byte) error {
	var e encoder
	e.string(1, companyID)
	e.string(2, key)
	e.bytes(3, value)
	_, err := call(ctx, svcStorageSet, e.b)
	return err
}

// StorageDelete deletes a key of the company's key-value state and reports whether it
// existed (capability storage).
func StorageDelete(ctx context.Context, companyID, key string) (deleted bool, err error) {
	var e encoder
	e.string(1, companyID)
	e.string(2, key)
	out, err := call(ctx, svcStorageDelete, e.b)
	if err != nil {
		return false, err
	}
	if deleted, err = decodeBoolField(out, 1); err != nil {
		return false, malformedResponse(serviceNames[svcStorageDelete], err)
	}
	return deleted, nil
}

// EnqueueRequest is keel.host.v1.EnqueueRequest.
type EnqueueRequest struct {
	// JobKey is one of the extension's declared jobs.
	JobKey   string
	ArgsJSON []byte
	// UniqueKey, when set, drops the job if one with the same key is queued or running.
	UniqueKey string
	// RunAt is an RFC 3339 time; empty means now.
	RunAt       string
	MaxAttempts int32
}

// EnqueueResponse is keel.host.v1.EnqueueResponse.
type EnqueueResponse struct {
	JobID     string
	Duplicate bool
}

// Enqueue enqueues one of the extension's declared jobs (capability jobs).
func Enqueue(ctx context.Context, req *EnqueueRequest) (*EnqueueResponse, error) {
	var e encoder
	req.encode(&e)
	return roundTrip[EnqueueResponse](ctx, svcJobsEnqueue, e.b)
}

// ResolveSecretRequest is keel.host.v1.ResolveSecretRequest.
type ResolveSecretRequest struct {
	CompanyID string
	SecretID  string
	// Version 0 means the latest.
	Version int32
}

// ResolveSecretResponse is keel.host.v1.ResolveSecretResponse.
type ResolveSecretResponse struct {
	Value   string
	Version int32
}

// ResolveSecret resolves a company secret (capability secrets).
func ResolveSecret(ctx context.Context, req *ResolveSecretRequest) (*ResolveSecretResponse, error) {
	var e encoder
	req.encode(&e)
	return roundTrip[ResolveSecretResponse](ctx, svcSecretsResolve, e.b)
}

// roundTrip sends the encoded request in and decodes the response into a new R.
func roundTrip[R any, PR interface {
	*R
	decode([]byte) error
}](ctx context.Context, service uint32, in []byte) (*R, error) {
	out, err := call(ctx, service, in)
	if err != nil {
		return nil, err
	}
	res := PR(new(R))
	if err := res.decode(out); err != nil {
		return nil, malformedResponse(serviceNames[service], err)
	}
	return res, nil
}

func malformedResponse(name string, err error) error {
	if err != nil {
		return &HostError{Service: name, Code: CodeInternal, Message: "malformed response from host: " + err.Error()}
	}
	return nil
}

// Level is a log level of Log, numbered as hclog numbers them.
type Level uint32

// Log levels.
const (
	LevelTrace Level = 1
	LevelDebug Level = 2
	LevelInfo  Level = 3
	LevelWarn  Level = 4
	LevelError Level = 5
)

// logFunc writes one log line through keel.log; abi_wasip1.go sets it.
var logFunc = func(level Level, msg string) {}

// Log writes msg to the host's log for this extension at level.
func Log(level Level, msg string) { logFunc(level, msg) }

// Logf formats and writes a line to the host's log for this extension.
func Logf(level Level, format string, args ...any) { logFunc(level, fmt.Sprintf(format, args...)) }
