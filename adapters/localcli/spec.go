// Package localcli is the shared runner of the local CLI adapters (alpha_local, beta_local,
// gamma_local, delta_local, epsilon_local, zeta_local, eta): each adapter type describes its
// CLI in a Spec (argument list, prompt passing, output parser, error classes, config schema,
// models) and localcli does the rest the same way for all of them: the config, the working
// directory, the prompt (rendered template, instructions file, wake context), session resume
// keyed by the run's task and its cwd with one fresh retry when the CLI no longer knows the
// session, skills, the run's SERVICE_* environment and JWT, the spawn (an argument list,
// never a shell string), the streaming parse into run events, the classified result, and
// testEnvironment (installed, version, logged in).
package localcli

import (
	"regexp"

	"github.com/keelhq/keel/sdk/adapter"
)

// Spec describes one CLI adapter type.
type Spec struct {
	// Type is the adapter type ("alpha_local"); the extension key is "adapter.<type>".
	Type string
	// Label names the adapter in the registry.
	Label string
	// Tool names the CLI in log lines and messages ("Claude").
	Tool string
	// Code prefixes the adapter's error and check codes ("claude" → claude_auth_required).
	Code string
	// DefaultCommand is the CLI binary when the config names none.
	DefaultCommand string
	// CommandKeys are config keys naming the binary, first set wins (default ["command"]).
	CommandKeys []string
	// DefaultModel is the model when the config names none ("" passes none).
	DefaultModel string
	// Models is the models list info reports.
	Models []adapter.Model
	// ConfigProperties are the type's own adapterConfig properties, a JSON object of JSON
	// Schema property definitions added to the shared ones.
	ConfigProperties string
	// PromptOnStdin writes the prompt to the CLI's stdin; otherwise Args places it.
	PromptOnStdin bool
	// InstructionsInPrompt prefixes the instructions file to the prompt; otherwise Args or
	// Prepare hand it to the CLI.
	InstructionsInPrompt bool
	// EnvNote adds the runtime note listing the run's SERVICE_* variables to the prompt.
	EnvNote bool
	// Args returns the argument list of one attempt.
	Args func(inv *Invocation) []string
	// NewParser returns the parser of one attempt's output.
	NewParser func(inv *Invocation) Parser
	// Prepare runs before the first attempt (files the CLI reads, environment); optional.
	Prepare func(inv *Invocation) error
	// SkillsDir returns the directory the agent's skills are linked into; optional.
	SkillsDir func(inv *Invocation) string
	// CanResume reports whether a saved session id can be resumed here; optional.
	CanResume func(inv *Invocation, sessionID string) bool
	// NewSession makes the session of a fresh attempt for CLIs whose session keel names (a
	// session file); optional.
	NewSession func(inv *Invocation) (string, error)
	// UnknownSession matches output saying the resumed session does not exist; a match
	// after a failed resumed attempt retries once with a fresh session. nil: no retry.
	UnknownSession *regexp.Regexp
	// AuthRequired matches output saying the CLI is not logged in. nil: not classified.
	AuthRequired *regexp.Regexp
	// ErrorClasses classify a failed run's output further (after auth required), first
	// match wins.
	ErrorClasses []ErrorClass
	// MaxTurnsExitCode is the exit code that means the turn limit was hit (0: none).
	MaxTurnsExitCode int
	// DefaultTimeoutSec and DefaultGraceSec replace the shared defaults (0 and 20).
	DefaultTimeoutSec, DefaultGraceSec float64
	// CrashCode is the error code of a CLI that failed after starting its event stream
	// without a terminal event; "" classifies nothing.
	CrashCode string
	// AuthEnv are environment variables that log the CLI in (API keys).
	AuthEnv []string
	// AuthFiles are files under HOME that hold a CLI login.
	AuthFiles []string
	// DeviceLoginArgs are the CLI's arguments of a device-code login ("login",
	// "--device-auth"); nil: the type has no device login.
	DeviceLoginArgs []string
	// LoginHint tells how to log the CLI in.
	LoginHint string
	// InstallHint tells how to install the CLI.
	InstallHint string
	// RequireProviderModel requires a provider/model model id.
	RequireProviderModel bool
	// Provider and Biller name who runs and bills the model ("" derives the provider from
	// a provider/model id).
	Provider, Biller string
	// APIKeyEnv are the variables whose presence makes the billing type api (else
	// subscription); empty reports unknown.
	APIKeyEnv []string
}

// ErrorClass is an error code given to a failed run whose output matches Re.
type ErrorClass struct {
	Code string
	Re   *regexp.Regexp
}

// StderrParser is a Parser that also reads stderr lines.
type StderrParser interface {
	// StderrLine parses one line of stderr.
	StderrLine(line string)
}

// Parser reads one attempt's stdout.
type Parser interface {
	// Line parses one line of stdout and returns a run event payload to record, or nil.
	Line(line string) map[string]any
	// Result returns what the attempt's output said.
	Result() *Parsed
}

// Parsed is what a CLI's output said about its run.
type Parsed struct {
	SessionID string
	Summary   string
	Model     string
	Usage     adapter.Usage
	HasUsage  bool
	CostUSD   *float64
	// Error is the error the output reported; it fails the run.
	Error string
	// Message explains a run that failed for another reason (a non-zero exit); it does not
	// fail the run by itself.
	Message string
	// MaxTurns, Refusal and Terminal say the run hit its turn limit, the model refused, and
	// the stream reached its terminal event.
	MaxTurns, Refusal, Terminal bool
	// Events is whether the output held any protocol event.
	Events     bool
	StopReason string
}

// AddUsage adds token counts to p.
func (p *Parsed) AddUsage(in, cached, out int64) {
	p.Usage.InputTokens += in
	p.Usage.CachedInputTokens += cached
	p.Usage.OutputTokens += out
	p.HasUsage = true
}

// AddCost adds a cost in dollars to p.
func (p *Parsed) AddCost(usd float64) {
	if p.CostUSD == nil {
		p.CostUSD = new(float64)
	}
	*p.CostUSD += usd
}
