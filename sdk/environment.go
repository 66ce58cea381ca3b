package sdk

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// CapEnvironmentDrivers lets an extension declare environment drivers
// (Manifest.EnvironmentDrivers): execution backends the environments owner creates
// environments on, holds leases of and runs commands in (spec part 2 "Environment, lease,
// execution workspace"; REFERENCE.md "environment.drivers.register").
const CapEnvironmentDrivers = "environment_drivers"

// EnvironmentDriverDecl declares one environment driver an extension implements.
type EnvironmentDriverDecl struct {
	// Driver is the driver's key, unique on the host ("ssh", "acme.sandbox"); "local" is
	// the built-in driver's and cannot be declared.
	Driver string `json:"driver" jsonschema:"pattern=^[a-z0-9][a-z0-9._-]*$"`
	// DisplayName names the driver in the capabilities list.
	DisplayName string `json:"displayName,omitempty"`
	// Description says what the driver runs on.
	Description string `json:"description,omitempty"`
	// ConfigSchema is the JSON Schema of an environment's config on this driver; the
	// environments owner checks it before it asks the driver to validate the config.
	ConfigSchema json.RawMessage `json:"configSchema,omitempty"`
}

// Reserved Call methods of the environment-driver contract. The host sends them (caller
// "host") to the extension that declares the request's driver, when the environments owner
// asks it to through EnvironmentDriverCallMethod; no manifest can provide them. The SDK
// answers them from the extension's EnvironmentDriver.
const (
	EnvValidateConfigMethod   = "keel.environment.validateConfig"
	EnvProbeMethod            = "keel.environment.probe"
	EnvAcquireLeaseMethod     = "keel.environment.acquireLease"
	EnvResumeLeaseMethod      = "keel.environment.resumeLease"
	EnvReleaseLeaseMethod     = "keel.environment.releaseLease"
	EnvDestroyLeaseMethod     = "keel.environment.destroyLease"
	EnvRealizeWorkspaceMethod = "keel.environment.realizeWorkspace"
	EnvExecuteMethod          = "keel.environment.execute"
)

// Reserved host methods with which the environments owner reaches plugin drivers; the
// host answers them itself, and a caller declares them in its uses like any other method.
const (
	// EnvironmentDriversMethod lists the drivers loaded extensions declare (output
	// EnvironmentDriverList).
	EnvironmentDriversMethod = "keel.environments.drivers"
	// EnvironmentDriverCallMethod sends one contract method to the extension that declares
	// a driver (input EnvironmentDriverCall, output the method's result).
	EnvironmentDriverCallMethod = "keel.environments.call"
)

// EnvironmentDriverInfo is one declared driver and the extension that declares it.
type EnvironmentDriverInfo struct {
	EnvironmentDriverDecl
	// Extension is the key of the extension that declares the driver.
	Extension string `json:"extension"`
}

// EnvironmentDriverList is the output of EnvironmentDriversMethod.
type EnvironmentDriverList struct {
	Drivers []EnvironmentDriverInfo `json:"drivers"`
}

// EnvironmentDriverCall is the input of EnvironmentDriverCallMethod.
type EnvironmentDriverCall struct {
	Driver string `json:"driver"`
	// Method is one of the Env*Method constants.
	Method string          `json:"method"`
	Input  json.RawMessage `json:"input"`
}

// EnvironmentRef names the environment a contract call is about.
type EnvironmentRef struct {
	// Driver is the declared driver key the call is for.
	Driver        string          `json:"driver"`
	EnvironmentID string          `json:"environmentId,omitempty"`
	CompanyID     string          `json:"companyId,omitempty"`
	Config        json.RawMessage `json:"config"`
}

// EnvValidateResult is the answer of validateConfig: OK, or the problems found. A driver
// may return a normalized config (defaults filled in) to store instead.
type EnvValidateResult struct {
	OK               bool            `json:"ok"`
	Errors           []string        `json:"errors,omitempty"`
	NormalizedConfig json.RawMessage `json:"normalizedConfig,omitempty"`
}

// EnvProbeResult is the answer of probe: whether the environment can take leases now.
type EnvProbeResult struct {
	// Status is pass, warn or fail.
	Status  string         `json:"status"`
	Message string         `json:"message,omitempty"`
	Details map[string]any `json:"details,omitempty"`
}

// EnvLeaseRequest asks a driver for a lease (acquireLease).
type EnvLeaseRequest struct {
	EnvironmentRef
	// LeaseID is keel's id of the lease.
	LeaseID string `json:"leaseId"`
	// Purpose says what the lease is for (login_session, run, manual).
	Purpose   string    `json:"purpose,omitempty"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// EnvLeaseRef names a lease a driver handed out (resume, release, destroy, realize, execute).
type EnvLeaseRef struct {
	EnvironmentRef
	LeaseID string `json:"leaseId"`
	// ProviderLeaseID is the driver's own id of the lease, as acquireLease returned it.
	ProviderLeaseID string `json:"providerLeaseId,omitempty"`
	// Metadata is what acquireLease returned with the lease.
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// EnvLease is a driver's answer to acquireLease and resumeLease.
type EnvLease struct {
	ProviderLeaseID string          `json:"providerLeaseId"`
	Metadata        json.RawMessage `json:"metadata,omitempty"`
}

// EnvWorkspaceRequest asks a driver to make a working directory inside a lease.
type EnvWorkspaceRequest struct {
	EnvLeaseRef
	// Key names the workspace within the lease (an issue or run id); "" is the lease's own.
	Key string `json:"key,omitempty"`
}

// EnvWorkspace is a realized working directory, as the environment sees it.
type EnvWorkspace struct {
	Path string `json:"path"`
}

// EnvExecRequest runs one command inside a lease: an argument list, never a shell string.
type EnvExecRequest struct {
	EnvLeaseRef
	Argv []string          `json:"argv"`
	Env  map[string]string `json:"env,omitempty"`
	Cwd  string            `json:"cwd,omitempty"`
	// Stdin is written to the command's standard input, then closed.
	Stdin string `json:"stdin,omitempty"`
	// TimeoutSec bounds the command (0: the driver's default).
	TimeoutSec float64 `json:"timeoutSec,omitempty"`
	// OnOutput, when set, receives each output line as it is written (in-process drivers
	// only; a remote driver returns the output with the result).
	OnOutput func(stream, line string) `json:"-"`
}

// EnvExecResult is how a command ended.
type EnvExecResult struct {
	ExitCode int    `json:"exitCode"`
	Stdout   string `json:"stdout,omitempty"`
	Stderr   string `json:"stderr,omitempty"`
	TimedOut bool   `json:"timedOut,omitempty"`
}

// EnvironmentDriver is the environment-driver contract (REFERENCE.md "environment*"
// methods). The built-in local driver implements it in process; a plugin implements it
// to serve the drivers its manifest declares, and the SDK answers the reserved Env*Method
// calls from it. Each request names its driver, so one implementation may serve several.
// An *Error's status reaches the caller (a 4xx for a bad config); any other error is the
// driver's failure. Since protocol v1.
type EnvironmentDriver interface {
	// ValidateConfig checks an environment's config when it is created, updated or probed
	// as a candidate.
	ValidateConfig(ctx context.Context, env *EnvironmentRef) (*EnvValidateResult, error)
	// Probe checks that the environment can take leases now.
	Probe(ctx context.Context, env *EnvironmentRef) (*EnvProbeResult, error)
	// AcquireLease holds the environment for one purpose until released or expired.
	AcquireLease(ctx context.Context, req *EnvLeaseRequest) (*EnvLease, error)
	// ResumeLease re-attaches to a lease after the owner restarted.
	ResumeLease(ctx context.Context, ref *EnvLeaseRef) (*EnvLease, error)
	// ReleaseLease gives the lease back; the environment keeps what it holds for reuse.
	ReleaseLease(ctx context.Context, ref *EnvLeaseRef) error
	// DestroyLease gives the lease back and removes everything it held.
	DestroyLease(ctx context.Context, ref *EnvLeaseRef) error
	// RealizeWorkspace makes a working directory inside the lease.
	RealizeWorkspace(ctx context.Context, req *EnvWorkspaceRequest) (*EnvWorkspace, error)
	// Execute runs a command inside the lease and waits for it.
	Execute(ctx context.Context, req *EnvExecRequest) (*EnvExecResult, error)
}

// EnvironmentDriverProvider is implemented by extensions that declare environment drivers.
type EnvironmentDriverProvider interface {
	EnvironmentDriver() EnvironmentDriver
}

// IsEnvironmentMethod reports whether a Call method is one of the driver contract's.
func IsEnvironmentMethod(method string) bool { return strings.HasPrefix(method, "keel.environment.") }

// CallEnvironmentDriver decodes a reserved contract call's input and calls d. It is how the
// SDK answers the Env*Method calls, and how an owner calls a driver in process.
func CallEnvironmentDriver(ctx context.Context, d EnvironmentDriver, method string, input json.RawMessage) (any, error) {
	decode := func(v any) error {
		if err := json.Unmarshal(input, v); err != nil {
			return Invalid("input", fmt.Sprintf("invalid input for %s: %v", method, err))
		}
		return nil
	}
	switch method {
	case EnvValidateConfigMethod, EnvProbeMethod:
		var in EnvironmentRef
		if err := decode(&in); err != nil {
			return nil, err
		}
		if method == EnvProbeMethod {
			return d.Probe(ctx, &in)
		}
		return d.ValidateConfig(ctx, &in)
	case EnvAcquireLeaseMethod:
		var in EnvLeaseRequest
		if err := decode(&in); err != nil {
			return nil, err
		}
		return d.AcquireLease(ctx, &in)
	case EnvResumeLeaseMethod, EnvReleaseLeaseMethod, EnvDestroyLeaseMethod:
		var in EnvLeaseRef
		if err := decode(&in); err != nil {
			return nil, err
		}
		switch method {
		case EnvResumeLeaseMethod:
			return d.ResumeLease(ctx, &in)
		case EnvReleaseLeaseMethod:
			return struct{}{}, d.ReleaseLease(ctx, &in)
		default:
			return struct{}{}, d.DestroyLease(ctx, &in)
		}
	case EnvRealizeWorkspaceMethod:
		var in EnvWorkspaceRequest
		if err := decode(&in); err != nil {
			return nil, err
		}
		return d.RealizeWorkspace(ctx, &in)
	case EnvExecuteMethod:
		var in EnvExecRequest
		if err := decode(&in); err != nil {
			return nil, err
		}
		return d.Execute(ctx, &in)
	}
	return nil, &Error{Status: 501, Code: "method_not_provided", Message: "unknown environment driver method " + method}
}

// EnvironmentDriverNotSupported answers every contract method with 501; embed it to
// implement only some of them.
type EnvironmentDriverNotSupported struct{}

func envNotSupported(what string) error {
	return &Error{Status: 501, Code: "not_supported", Message: "this environment driver does not support " + what}
}

// ValidateConfig accepts any config.
func (EnvironmentDriverNotSupported) ValidateConfig(context.Context, *EnvironmentRef) (*EnvValidateResult, error) {
	return &EnvValidateResult{OK: true}, nil
}

// Probe reports that the driver cannot probe.
func (EnvironmentDriverNotSupported) Probe(context.Context, *EnvironmentRef) (*EnvProbeResult, error) {
	return &EnvProbeResult{Status: "warn", Message: "this environment driver cannot be probed"}, nil
}

// AcquireLease is not supported.
func (EnvironmentDriverNotSupported) AcquireLease(context.Context, *EnvLeaseRequest) (*EnvLease, error) {
	return nil, envNotSupported("leases")
}

// ResumeLease is not supported.
func (EnvironmentDriverNotSupported) ResumeLease(context.Context, *EnvLeaseRef) (*EnvLease, error) {
	return nil, envNotSupported("resuming leases")
}

// ReleaseLease does nothing.
func (EnvironmentDriverNotSupported) ReleaseLease(context.Context, *EnvLeaseRef) error { return nil }

// DestroyLease does nothing.
func (EnvironmentDriverNotSupported) DestroyLease(context.Context, *EnvLeaseRef) error { return nil }

// RealizeWorkspace is not supported.
func (EnvironmentDriverNotSupported) RealizeWorkspace(context.Context, *EnvWorkspaceRequest) (*EnvWorkspace, error) {
	return nil, envNotSupported("workspaces")
}

// Execute is not supported.
func (EnvironmentDriverNotSupported) Execute(context.Context, *EnvExecRequest) (*EnvExecResult, error) {
	return nil, envNotSupported("commands")
}

var _ EnvironmentDriver = EnvironmentDriverNotSupported{}
