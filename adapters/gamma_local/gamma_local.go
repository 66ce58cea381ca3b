// Package gammalocal is the gamma_local adapter (extension adapter.gamma_local): it runs an
// agent's heartbeat through the Gemini CLI's stream-json mode (REFERENCE-adapters.md 1, the
// CLI lane), the prompt passed with --prompt.
package gammalocal

import (
	"path/filepath"
	"regexp"
	"strings"

	"github.com/keelhq/keel/adapters/localcli"
	"github.com/keelhq/keel/extensions"
	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/adapter"
)

// Type is the adapter type.
const Type = "gamma_local"

// Spec describes the Gemini CLI.
var Spec = &localcli.Spec{
	Type: Type, Label: "Gemini CLI (local)", Tool: "Gemini", Code: "gemini",
	DefaultCommand: "gemini",
	DefaultModel:   "auto",
	Models: []adapter.Model{
		{ID: "auto", Label: "Auto"},
		{ID: "gemini-3.1-pro-preview", Label: "Gemini 3.1 Pro (preview)"},
		{ID: "gemini-3.1-pro-preview-customtools", Label: "Gemini 3.1 Pro (preview, custom tools)"},
		{ID: "gemini-2.5-pro", Label: "Gemini 2.5 Pro"},
		{ID: "gemini-2.5-flash", Label: "Gemini 2.5 Flash"},
		{ID: "gemini-2.5-flash-lite", Label: "Gemini 2.5 Flash Lite"},
		{ID: "gemini-2.0-flash", Label: "Gemini 2.0 Flash"},
		{ID: "gemini-2.0-flash-lite", Label: "Gemini 2.0 Flash Lite"},
	},
	ConfigProperties: `{
    "sandbox": {"type": "boolean", "description": "Pass --sandbox (default --sandbox=none)."}
  }`,
	InstructionsInPrompt: true,
	EnvNote:              true,
	Args:                 args,
	NewParser:            func(*localcli.Invocation) localcli.Parser { return &parser{} },
	Prepare:              prepare,
	SkillsDir:            func(inv *localcli.Invocation) string { return filepath.Join(inv.Home, ".gemini", "skills") },
	UnknownSession:       regexp.MustCompile(`(?i)unknown session|session .* not found|resume .* not found|checkpoint .* not found|cannot resume|failed to resume|exceeds the maximum number of tokens|input token count exceeds`),
	AuthRequired:         regexp.MustCompile("(?i)not authenticated|please authenticate|api[_ ]?key (required|missing|invalid)|authentication required|manual authorization is required|unauthorized|invalid credentials|not logged in|login required|run `gemini auth( login)?` first"),
	ErrorClasses: []localcli.ErrorClass{{Code: "gemini_network_unavailable",
		Re: regexp.MustCompile(`ENOTFOUND oauth2\.googleapis\.com|ENOTFOUND sts\.googleapis\.com|EAI_AGAIN|_GaxiosError.*ENOTFOUND|_UserRefreshClient.*ENOTFOUND`)}},
	MaxTurnsExitCode: 53,
	AuthEnv:          []string{"GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GENAI_USE_GCA"},
	AuthFiles:        []string{".gemini/oauth_creds.json"},
	LoginHint:        "Run `gemini auth login` as the agent user, or set GEMINI_API_KEY in the adapter config env.",
	InstallHint:      "npm install -g @google/gemini-cli",
	Provider:         "google", Biller: "google",
	APIKeyEnv: []string{"GEMINI_API_KEY", "GOOGLE_API_KEY"},
}

func init() {
	extensions.Register(Spec.Key(), func() sdk.Extension { return localcli.New(Spec) })
}

// prepare sets up the headless terminal environment the CLI expects.
func prepare(inv *localcli.Invocation) error {
	if t := inv.Env["TERM"]; t == "" || t == "dumb" || t == "vt100" {
		inv.Env["TERM"] = "xterm-256color"
	}
	if inv.Env["COLORTERM"] == "" {
		inv.Env["COLORTERM"] = "truecolor"
	}
	inv.Env["NO_BROWSER"] = "1"
	delete(inv.Env, "NO_COLOR")
	return nil
}

// args is the argument list: stream-json output, resume, model (not "auto"), yolo
// approvals, the sandbox, extra args, then the prompt as --prompt.
func args(inv *localcli.Invocation) []string {
	c := inv.Config
	a := []string{"--output-format", "stream-json"}
	if inv.ResumeID != "" {
		a = append(a, "--resume", inv.ResumeID)
	}
	if inv.Model != "" && inv.Model != "auto" {
		a = append(a, "--model", inv.Model)
	}
	a = append(a, "--approval-mode", "yolo")
	if c.Bool("sandbox", false) {
		a = append(a, "--sandbox")
	} else {
		a = append(a, "--sandbox=none")
	}
	a = append(a, c.ExtraArgs...)
	return append(a, "--prompt", inv.Prompt)
}

// turnLimits are the statuses and stop reasons that mean the turn limit was hit.
var turnLimits = map[string]bool{"turn_limit": true, "max_turns": true, "max_turns_exhausted": true, "turn_limit_exhausted": true}

// parser reads gemini's stream-json (parseGeminiJsonl of the reference).
type parser struct {
	out    localcli.Parsed
	texts  []string
	result string
}

func (p *parser) Line(line string) map[string]any {
	o, ok := localcli.ParseObj(line)
	if !ok {
		return nil
	}
	p.out.Events = true
	if sid := o.Str("session_id", "sessionId", "sessionID", "checkpoint_id", "thread_id"); sid != "" {
		p.out.SessionID = sid
	}
	if m := o.Str("model"); m != "" {
		p.out.Model = m
	}
	switch o.Str("type") {
	case "init":
		return map[string]any{"type": "init", "sessionId": p.out.SessionID, "model": o.Str("model")}
	case "assistant":
		if t := localcli.TextOf(o["message"]); t != "" {
			p.texts = append(p.texts, t)
			return map[string]any{"type": "assistant", "text": t}
		}
	case "message":
		if o.Str("role") == "assistant" {
			if t := localcli.TextOf(o["content"]); t != "" {
				p.texts = append(p.texts, t)
				return map[string]any{"type": "assistant", "text": t}
			}
		}
	case "tool_use":
		return map[string]any{"type": "tool_call", "name": o.Str("tool_name", "name")}
	case "text":
		if t := o.Map("part").Str("text"); t != "" {
			p.texts = append(p.texts, t)
		}
	case "result":
		return p.resultEvent(o)
	case "error":
		p.out.Terminal = true
		p.out.Error = localcli.ErrorText(firstOf(o, "error", "message", "detail"))
		return map[string]any{"type": "error", "message": p.out.Error}
	case "system":
		if o.Str("subtype") == "error" {
			p.out.Error = localcli.ErrorText(firstOf(o, "error", "message", "detail"))
		}
	}
	p.usage(o)
	return nil
}

func (p *parser) resultEvent(o localcli.Obj) map[string]any {
	p.out.Terminal = true
	p.usage(o)
	p.result = o.Str("result", "text", "response")
	status := strings.ToLower(o.Str("status"))
	for _, k := range []string{"status", "stopReason", "stop_reason", "errorCode", "error_code"} {
		if turnLimits[o.Str(k)] {
			p.out.MaxTurns = true
		}
	}
	p.out.StopReason = o.Str("stopReason", "stop_reason")
	if o.Bool("is_error") || o.Str("subtype") == "error" || status == "error" || status == "failed" {
		msg := localcli.ErrorText(firstOf(o, "error", "message", "result"))
		if msg == "" {
			msg = "Gemini run failed: status=" + status
		}
		p.out.Error = msg
	}
	return map[string]any{"type": "result", "status": status}
}

// usage adds an event's usage (usage, usageMetadata or stats) and cost.
func (p *parser) usage(o localcli.Obj) {
	u := o.Map("usage")
	if u == nil {
		u = o.Map("usageMetadata")
	}
	if u == nil {
		if st := o.Map("stats"); st != nil {
			u = st
			if um := st.Map("usageMetadata"); um != nil {
				u = um
			}
		}
	}
	if u != nil {
		p.out.AddUsage(u.Int("input_tokens", "inputTokens", "promptTokenCount"),
			u.Int("cached_input_tokens", "cachedInputTokens", "cachedContentTokenCount", "cached"),
			u.Int("output_tokens", "outputTokens", "candidatesTokenCount"))
	}
	if c, ok := o.Num("total_cost_usd", "cost_usd", "cost"); ok {
		p.out.AddCost(c)
	}
}

func (p *parser) Result() *localcli.Parsed {
	p.out.Summary = strings.Join(p.texts, "\n\n")
	if p.out.Summary == "" {
		p.out.Summary = p.result
	}
	return &p.out
}

func firstOf(o localcli.Obj, keys ...string) any {
	for _, k := range keys {
		if v, ok := o[k]; ok && v != nil && v != "" {
			return v
		}
	}
	return nil
}
