// Package eta is the eta adapter (extension adapter.eta): it runs an agent's heartbeat
// through the Cursor Agent CLI (`agent -p --output-format stream-json`,
// REFERENCE-adapters.md 5), the prompt on stdin.
package eta

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
const Type = "eta"

// Spec describes the Cursor Agent CLI.
var Spec = &localcli.Spec{
	Type: Type, Label: "Cursor Agent (local CLI)", Tool: "Cursor", Code: "cursor",
	DefaultCommand: "agent",
	DefaultModel:   "auto",
	Models: []adapter.Model{
		{ID: "auto", Label: "Auto"},
		{ID: "composer-1.5", Label: "Composer 1.5"},
		{ID: "composer-1", Label: "Composer 1"},
		{ID: "gpt-5.3-codex", Label: "GPT-5.3 Codex"},
		{ID: "gpt-5.2", Label: "GPT-5.2"},
		{ID: "gpt-5.1-codex-max", Label: "GPT-5.1 Codex Max"},
		{ID: "opus-4.6", Label: "Claude Opus 4.6"},
		{ID: "opus-4.6-thinking", Label: "Claude Opus 4.6 (thinking)"},
		{ID: "sonnet-4.6", Label: "Claude Sonnet 4.6"},
		{ID: "sonnet-4.5", Label: "Claude Sonnet 4.5"},
		{ID: "gemini-3.1-pro", Label: "Gemini 3.1 Pro"},
		{ID: "gemini-3-flash", Label: "Gemini 3 Flash"},
		{ID: "grok", Label: "Grok"},
		{ID: "kimi-k2.5", Label: "Kimi K2.5"},
	},
	ConfigProperties: `{
    "mode": {"type": "string", "enum": ["plan", "ask"], "description": "--mode of the agent (unset for normal runs)."}
  }`,
	PromptOnStdin:        true,
	InstructionsInPrompt: true,
	EnvNote:              true,
	Args:                 args,
	NewParser:            func(*localcli.Invocation) localcli.Parser { return &parser{} },
	SkillsDir:            func(inv *localcli.Invocation) string { return filepath.Join(inv.Home, ".cursor", "skills") },
	UnknownSession:       regexp.MustCompile(`(?i)unknown (session|chat)|session .* not found|chat .* not found|resume .* not found|could not resume`),
	AuthRequired:         regexp.MustCompile(`(?i)authentication required|not authenticated|not logged in|unauthorized|invalid( or missing)? api[_ -]?key|cursor[_ -]?api[_ -]?key|run 'agent login' first|api( key)?( is)? required`),
	AuthEnv:              []string{"CURSOR_API_KEY"},
	AuthFiles:            []string{".cursor/cli-config.json"},
	LoginHint:            "Run `agent login` as the agent user, or set CURSOR_API_KEY in the adapter config env.",
	InstallHint:          "curl https://cursor.com/install -fsS | bash",
	Provider:             "cursor", Biller: "cursor",
	APIKeyEnv: []string{"CURSOR_API_KEY", "OPENAI_API_KEY"},
}

func init() {
	extensions.Register(Spec.Key(), func() sdk.Extension { return localcli.New(Spec) })
}

// args is the argument list: print mode with stream-json in the run's workspace, resume,
// model ("auto" included), mode, --yolo unless the extra args already trust, extra args.
// The prompt goes to stdin.
func args(inv *localcli.Invocation) []string {
	c := inv.Config
	a := []string{"-p", "--output-format", "stream-json", "--workspace", inv.Cwd}
	if inv.ResumeID != "" {
		a = append(a, "--resume", inv.ResumeID)
	}
	if inv.Model != "" {
		a = append(a, "--model", inv.Model)
	}
	if m := c.Str("mode"); m == "plan" || m == "ask" {
		a = append(a, "--mode", m)
	}
	trusted := false
	for _, x := range c.ExtraArgs {
		if x == "--trust" || strings.HasPrefix(x, "--trust=") || x == "--yolo" || x == "-f" {
			trusted = true
		}
	}
	if !trusted {
		a = append(a, "--yolo")
	}
	return append(a, c.ExtraArgs...)
}

// prefixed matches output lines the CLI prefixes with their stream.
var prefixed = regexp.MustCompile(`^(stdout|stderr)\s*[:=]?\s*([\[{].*)$`)

// parser reads the Cursor CLI's stream-json (parseCursorJsonl of the reference).
type parser struct {
	out    localcli.Parsed
	texts  []string
	result string
	cost   float64
}

func (p *parser) Line(line string) map[string]any {
	if m := prefixed.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
		line = m[2]
	}
	o, ok := localcli.ParseObj(line)
	if !ok {
		return nil
	}
	p.out.Events = true
	if sid := o.Str("session_id", "sessionId", "sessionID"); sid != "" {
		p.out.SessionID = sid
	}
	switch o.Str("type") {
	case "system":
		if o.Str("subtype") == "error" {
			p.out.Error = o.Str("message", "error", "detail")
			return map[string]any{"type": "error", "message": p.out.Error}
		}
		if o.Str("subtype") == "init" {
			p.out.Model = o.Str("model")
			return map[string]any{"type": "init", "sessionId": p.out.SessionID, "model": p.out.Model}
		}
	case "assistant":
		if t := localcli.TextOf(o["message"]); t != "" {
			p.texts = append(p.texts, t)
			return map[string]any{"type": "assistant", "text": t}
		}
	case "tool_call":
		return map[string]any{"type": "tool_call", "subtype": o.Str("subtype"), "callId": o.Str("call_id")}
	case "result":
		p.out.Terminal = true
		u := o.Map("usage")
		if u == nil {
			u = o
		}
		p.out.AddUsage(u.Int("input_tokens", "inputTokens"), u.Int("cached_input_tokens", "cachedInputTokens", "cache_read_input_tokens"),
			u.Int("output_tokens", "outputTokens"))
		if c, ok := o.Num("total_cost_usd", "cost_usd", "cost"); ok {
			p.cost += c
		}
		p.result = o.Str("result")
		if o.Bool("is_error") || o.Str("subtype") == "error" {
			p.out.Error = o.Str("error", "message", "result")
		}
		return map[string]any{"type": "result", "subtype": o.Str("subtype"), "isError": o.Bool("is_error")}
	case "error":
		p.out.Error = o.Str("message", "error", "detail")
		return map[string]any{"type": "error", "message": p.out.Error}
	case "text":
		if t := o.Map("part").Str("text"); t != "" {
			p.texts = append(p.texts, t)
		}
	case "step_finish":
		part := o.Map("part")
		tokens := part.Map("tokens")
		p.out.AddUsage(tokens.Int("input"), tokens.Map("cache").Int("read"), tokens.Int("output"))
		c, _ := part.Num("cost")
		p.cost += c
	}
	return nil
}

func (p *parser) Result() *localcli.Parsed {
	p.out.Summary = strings.Join(p.texts, "\n\n")
	if p.out.Summary == "" {
		p.out.Summary = p.result
	}
	if p.cost > 0 {
		p.out.AddCost(p.cost)
	}
	return &p.out
}
