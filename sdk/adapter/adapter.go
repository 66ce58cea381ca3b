// Package adapter is the contract between the agents extension's heartbeat engine and an
// adapter extension (one per adapter type: process, http, the local CLIs, the gateways).
// An adapter is an extension of kind "adapter" with key "adapter.<type>" that provides the
// methods below; the engine calls them as "adapter.<type>.<method>" through the host. While
// a run executes, the adapter streams its log and events back by calling "agents.runEvents".
// Adapters are lazy: the host starts one on first use and stops it when idle.
package adapter

import (
	"encoding/json"
	"strings"
	"time"
)

// Methods an adapter provides.
const (
	// MethodExecute runs one heartbeat run to completion and returns its result. The call
	// lasts as long as the run; the engine bounds it with the run's timeout plus grace.
	MethodExecute = "execute"
	// MethodCancel stops a run that is executing (SIGTERM, then SIGKILL after the grace).
	MethodCancel = "cancel"
	// MethodTestEnvironment checks that a config can run here (binaries, URLs, credentials).
	MethodTestEnvironment = "testEnvironment"
	// MethodInfo describes the adapter: label, models, config schema, capabilities.
	MethodInfo = "info"
)

// RunEventsMethod is the agents extension's method adapters call to stream run output.
const RunEventsMethod = "agents.runEvents"

// ExtensionKey returns the extension key of an adapter type ("process" → "adapter.process").
func ExtensionKey(adapterType string) string { return "adapter." + adapterType }

// Method returns the qualified method of an adapter type ("adapter.process.execute").
func Method(adapterType, method string) string { return ExtensionKey(adapterType) + "." + method }

// ExecuteRequest is the input of execute.
type ExecuteRequest struct {
	RunID       string `json:"runId"`
	AgentID     string `json:"agentId"`
	AgentName   string `json:"agentName"`
	CompanyID   string `json:"companyId"`
	AdapterType string `json:"adapterType"`
	// Config is the agent's adapterConfig with secret references in env already resolved.
	Config json.RawMessage `json:"config"`
	// Env is the runtime environment keel assigns: SERVICE_AGENT_ID, SERVICE_COMPANY_ID,
	// SERVICE_API_URL, SERVICE_RUN_ID, SERVICE_API_KEY (the run's JWT when the adapter
	// supports it) and the wake-context variables. It wins over config env of the same name.
	Env map[string]string `json:"env"`
	// Context is the wake context: issueId, wakeReason, commentId, approvalId, payload…
	Context map[string]any `json:"context,omitempty"`
	// AuthToken is the run's local agent JWT (empty when the adapter does not support it).
	AuthToken string `json:"authToken,omitempty"`
	// Runtime is the session the engine kept for the run's task, for adapters that resume
	// sessions; nil or empty for a fresh session.
	Runtime *Runtime `json:"runtime,omitempty"`
	// Skills are the agent's skills materialized on this host, for adapters that hand a
	// skills directory to their CLI.
	Skills []Skill `json:"skills,omitempty"`
}

// Runtime is the saved session of a run's task (REFERENCE.md 3 step 4: the task session
// keyed by taskKey), as the adapter returned it after the task's last run.
type Runtime struct {
	// TaskKey is the key the session is kept under: the issue or task id, "" for runs
	// without one.
	TaskKey string `json:"taskKey,omitempty"`
	// SessionID is the saved session id.
	SessionID string `json:"sessionId,omitempty"`
	// SessionParams are the adapter's saved session parameters (for a local CLI: sessionId
	// and the cwd it was made in).
	SessionParams json.RawMessage `json:"sessionParams,omitempty"`
}

// Skill is one skill directory (holding its SKILL.md) an adapter links into its CLI's
// skills directory under Name.
type Skill struct {
	Name string `json:"name"`
	Path string `json:"path"`
}

// Usage is token usage reported by an adapter.
type Usage struct {
	InputTokens       int64 `json:"inputTokens"`
	OutputTokens      int64 `json:"outputTokens"`
	CachedInputTokens int64 `json:"cachedInputTokens"`
}

// Run outcomes.
const (
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
	StatusTimedOut  = "timed_out"
	StatusCancelled = "cancelled"
)

// ExecuteResult is the output of execute (REFERENCE.md 3, AdapterExecutionResult).
type ExecuteResult struct {
	// Status is succeeded, failed, timed_out or cancelled.
	Status               string   `json:"status"`
	ExitCode             *int     `json:"exitCode,omitempty"`
	Signal               string   `json:"signal,omitempty"`
	TimedOut             bool     `json:"timedOut,omitempty"`
	ErrorMessage         string   `json:"errorMessage,omitempty"`
	ErrorCode            string   `json:"errorCode,omitempty"`
	Usage                *Usage   `json:"usage,omitempty"`
	Provider             string   `json:"provider,omitempty"`
	Biller               string   `json:"biller,omitempty"`
	Model                string   `json:"model,omitempty"`
	BillingType          string   `json:"billingType,omitempty"`
	CostUSD              *float64 `json:"costUsd,omitempty"`
	CacheAdjustedCostUSD *float64 `json:"cacheAdjustedCostUsd,omitempty"`
	SessionID            string   `json:"sessionId,omitempty"`
	// SessionParams are what the adapter needs to resume the session on the task's next
	// run; the engine keeps them under the run's task key and hands them back in Runtime.
	SessionParams json.RawMessage `json:"sessionParams,omitempty"`
	// SessionDisplayID is a short form of the session id for display.
	SessionDisplayID string `json:"sessionDisplayId,omitempty"`
	// ClearSession asks the engine to forget the task's saved session (it is unusable).
	ClearSession bool            `json:"clearSession,omitempty"`
	Summary      string          `json:"summary,omitempty"`
	ResultJSON   json.RawMessage `json:"resultJson,omitempty"`
	PID          int             `json:"pid,omitempty"`
}

// CancelRequest is the input of cancel.
type CancelRequest struct {
	RunID string `json:"runId"`
}

// CancelResult says whether a live run was found and signalled.
type CancelResult struct {
	Cancelled bool `json:"cancelled"`
}

// TestEnvironmentRequest is the input of testEnvironment.
type TestEnvironmentRequest struct {
	CompanyID string          `json:"companyId"`
	Config    json.RawMessage `json:"config"`
}

// Check is one environment check.
type Check struct {
	// Name is the check's code ("alpha_local_command_resolvable").
	Name string `json:"name"`
	// OK is false for a check that fails the environment (level error).
	OK      bool   `json:"ok"`
	Message string `json:"message,omitempty"`
	// Level is info, warn or error (empty: info when OK, else error).
	Level string `json:"level,omitempty"`
	// Detail and Hint explain a finding and how to fix it.
	Detail string `json:"detail,omitempty"`
	Hint   string `json:"hint,omitempty"`
}

// TestEnvironmentResult is the output of testEnvironment.
type TestEnvironmentResult struct {
	OK bool `json:"ok"`
	// Status is pass, warn (a warning check) or fail (an error check); empty from adapters
	// that report only OK.
	Status string  `json:"status,omitempty"`
	Checks []Check `json:"checks"`
}

// Model is one model an adapter can run.
type Model struct {
	ID    string `json:"id"`
	Label string `json:"label"`
}

// Info is the output of info.
type Info struct {
	Type   string  `json:"type"`
	Label  string  `json:"label"`
	Models []Model `json:"models"`
	// ConfigSchema is the JSON Schema of the adapter's adapterConfig.
	ConfigSchema json.RawMessage `json:"configSchema"`
	// SupportsLocalAgentJWT says whether the run's JWT is handed over as SERVICE_API_KEY.
	SupportsLocalAgentJWT bool `json:"supportsLocalAgentJwt"`
	// DefaultConfig holds adapterConfig keys an agent of this type gets on create when it
	// does not set them (a default model).
	DefaultConfig json.RawMessage `json:"defaultConfig,omitempty"`
	// DeviceLogin is the adapter's device login (spec part 2 "Adapter device-login
	// session"); nil when the type has none, and device logins of it are refused.
	DeviceLogin *DeviceLogin `json:"deviceLogin,omitempty"`
}

// DeviceLogin describes how an adapter's CLI logs in with a device code: the environments
// owner runs Argv inside a lease of the chosen environment, reads the URL and the one-time
// code from its output, and ends the session when the command exits (0: logged in) or the
// session's TTL passes.
type DeviceLogin struct {
	// Argv is the login command as an argument list ("codex", "login", "--device-auth").
	Argv []string `json:"argv"`
	// Env are variables the command gets besides the environment's.
	Env map[string]string `json:"env,omitempty"`
	// URLPattern and CodePattern are regular expressions whose first group (or whole match)
	// is the verification URL and the one-time code; empty uses the first https URL and the
	// first XXXX-XXXX style code in the output.
	URLPattern  string `json:"urlPattern,omitempty"`
	CodePattern string `json:"codePattern,omitempty"`
}

// RunEvent is one log chunk or event of a run, streamed with agents.runEvents.
type RunEvent struct {
	// Seq orders events within a run, from 1.
	Seq int64 `json:"seq"`
	// Kind is log, event or spawn (the process started; PID is set). A local adapter's run
	// stays queued until its spawn event (or its first stdout or stderr output) arrives.
	Kind string `json:"kind"`
	// Stream is stdout, stderr or system for logs.
	Stream  string          `json:"stream,omitempty"`
	Text    string          `json:"text,omitempty"`
	Payload json.RawMessage `json:"payload,omitempty"`
	PID     int             `json:"pid,omitempty"`
	// PGID is the spawned process's group (spawn events of adapters that start each run in
	// its own group); a restarted node kills what is left of the group.
	PGID int `json:"pgid,omitempty"`
	// StartTicks is the spawned process's start time in clock ticks since boot
	// (ProcessStartTicks), so a restarted node never signals a recycled pid.
	StartTicks uint64    `json:"startTicks,omitempty"`
	At         time.Time `json:"at"`
}

// RunEventsRequest is the input of agents.runEvents.
type RunEventsRequest struct {
	RunID  string     `json:"runId"`
	Events []RunEvent `json:"events"`
}

// SpecTypes are the adapter types the spec names (spec part 1, "Agent"). They are built-in
// types: agents may name them whether or not this instance runs an adapter for them (a run
// of a type with no loaded adapter fails with adapter_not_found).
var SpecTypes = []string{"process", "http", "alpha_local", "beta_local", "gamma_local", "delta_local",
	"epsilon_local", "zeta_local", "eta", "theta_gateway", "zeta_gateway"}

// TypeOf returns the adapter type an adapter extension key serves: the segment after
// "adapter." ("adapter.process" and "adapter.process.custom" both serve "process"), or ""
// for a key that is not an adapter key. An installed key "adapter.<builtin type>.<name>"
// overrides the built-in adapter of that type.
func TypeOf(key string) string {
	rest, ok := strings.CutPrefix(key, "adapter.")
	if !ok || rest == "" {
		return ""
	}
	typ, _, _ := strings.Cut(rest, ".")
	return typ
}

// Reserved host methods of the adapter registry. The host answers them itself (no manifest
// can provide a "keel." method); a caller declares them in its uses like any other method.
const (
	// ResolveMethod resolves an adapter type to the extension that serves new runs of it
	// now (input ResolveRequest, output Resolution): the installed override unless it is
	// paused, else the built-in. The heartbeat engine resolves once per run and sends
	// every call of that run (info, execute, cancel) to the resolved key, so a run keeps
	// the adapter it started with while the registry changes under it.
	ResolveMethod = "keel.adapters.resolve"
	// ListMethod lists the adapter types the registry knows (output TypeList).
	ListMethod = "keel.adapters.list"
)

// ResolveRequest is the input of ResolveMethod.
type ResolveRequest struct {
	Type string `json:"type"`
}

// Resolution is the output of ResolveMethod.
type Resolution struct {
	Type string `json:"type"`
	// Key is the extension key that serves the type now; its methods are Key + "." + method.
	Key string `json:"key"`
	// Override is true when Key is an installed override of a built-in type.
	Override bool `json:"override"`
}

// MethodOf returns the qualified method of a resolved extension key ("adapter.process.custom.execute").
func MethodOf(key, method string) string { return key + "." + method }

// TypeList is the output of ListMethod.
type TypeList struct {
	Types []string `json:"types"`
}
