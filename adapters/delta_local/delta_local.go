// Package deltalocal is the delta_local adapter (extension adapter.delta_local): it runs an
// agent's heartbeat through the OpenCode CLI's `run --format json` mode
// (REFERENCE-adapters.md 2), the prompt on stdin and the model in provider/model form.
package deltalocal

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/keelhq/keel/adapters/localcli"
	"github.com/keelhq/keel/extensions"
	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/adapter"
)

// Type is the adapter type.
const Type = "delta_local"

// Spec describes the OpenCode CLI.
var Spec = &localcli.Spec{
	Type: Type, Label: "OpenCode (local CLI)", Tool: "OpenCode", Code: "opencode",
	DefaultCommand: "opencode",
	Models: []adapter.Model{
		{ID: "openai/gpt-5.2-codex", Label: "OpenAI GPT-5.2 Codex"},
		{ID: "openai/gpt-5.5", Label: "OpenAI GPT-5.5"},
		{ID: "openai/gpt-5.4", Label: "OpenAI GPT-5.4"},
		{ID: "openai/gpt-5.4-mini", Label: "OpenAI GPT-5.4 mini"},
		{ID: "openai/gpt-5.2", Label: "OpenAI GPT-5.2"},
		{ID: "openai/gpt-5.1-codex-max", Label: "OpenAI GPT-5.1 Codex Max"},
		{ID: "openai/gpt-5.1-codex-mini", Label: "OpenAI GPT-5.1 Codex mini"},
	},
	ConfigProperties: `{
    "model": {"type": "string", "pattern": "^[^/]+/.+$", "description": "Model id in provider/model form (required to run)."},
    "variant": {"type": "string", "description": "--variant of the model (minimal, low, medium, high, xhigh, max)."},
    "dangerouslySkipPermissions": {"type": "boolean", "description": "Allow access outside the workspace without prompts (default true), through a run-scoped opencode.json."}
  }`,
	PromptOnStdin:        true,
	InstructionsInPrompt: true,
	RequireProviderModel: true,
	Args:                 args,
	NewParser:            func(*localcli.Invocation) localcli.Parser { return &parser{} },
	Prepare:              prepare,
	SkillsDir:            func(inv *localcli.Invocation) string { return filepath.Join(inv.Home, ".claude", "skills") },
	UnknownSession:       regexp.MustCompile(`(?i)unknown session|session\b.*\bnot found|resource not found:.*[\\/]session[\\/].*\.json|notfounderror|no session`),
	AuthRequired:         regexp.MustCompile(`(?i)auth(entication)? required|invalid\s*api\s*key|not logged in|opencode auth login|free usage exceeded|ProviderAuthError`),
	AuthEnv:              []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY"},
	AuthFiles:            []string{".local/share/opencode/auth.json"},
	LoginHint:            "Run `opencode auth login` as the agent user, or set the provider's API key in the adapter config env.",
	InstallHint:          "curl -fsSL https://opencode.ai/install | bash",
}

func init() {
	extensions.Register(Spec.Key(), func() sdk.Extension { return localcli.New(Spec) })
}

// prepare keeps OpenCode from writing project config into the repository and, unless
// dangerouslySkipPermissions is false, gives the run its own config directory whose
// opencode.json (the user's config merged) allows external directories.
func prepare(inv *localcli.Invocation) error {
	inv.Env["OPENCODE_DISABLE_PROJECT_CONFIG"] = "true"
	if !inv.Config.Bool("dangerouslySkipPermissions", true) {
		return nil
	}
	base := inv.Env["XDG_CONFIG_HOME"]
	if base == "" {
		base = filepath.Join(inv.Home, ".config")
	}
	conf := map[string]any{}
	if b, err := inv.ReadFile(filepath.Join(base, "opencode", "opencode.json")); err == nil {
		_ = json.Unmarshal(b, &conf)
	}
	perm, _ := conf["permission"].(map[string]any)
	if perm == nil {
		perm = map[string]any{}
	}
	perm["external_directory"] = "allow"
	conf["permission"] = perm
	dir := filepath.Join(inv.RunDir, "xdg-config", "opencode")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(conf, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, "opencode.json"), b, 0o644); err != nil {
		return err
	}
	inv.Env["XDG_CONFIG_HOME"] = filepath.Dir(dir)
	return nil
}

// args is the argument list: `run --format json`, print-logs when asked, resume, model,
// variant, extra args. The prompt goes to stdin.
func args(inv *localcli.Invocation) []string {
	a := []string{"run", "--format", "json"}
	switch strings.ToLower(inv.Env["SERVICE_OPENCODE_PRINT_LOGS"]) {
	case "true", "1", "yes":
		a = append(a, "--print-logs")
	}
	if inv.ResumeID != "" {
		a = append(a, "--session", inv.ResumeID)
	}
	if inv.Model != "" {
		a = append(a, "--model", inv.Model)
	}
	if v := inv.Config.Str("variant"); v != "" {
		a = append(a, "--variant", v)
	}
	return append(a, inv.Config.ExtraArgs...)
}

// parser reads OpenCode's JSON events: sessionID on every event, text parts, step_finish
// usage and cost, tool errors and errors.
type parser struct {
	out    localcli.Parsed
	texts  []string
	errors []string
}

func (p *parser) Line(line string) map[string]any {
	o, ok := localcli.ParseObj(line)
	if !ok {
		return nil
	}
	p.out.Events = true
	if sid, ok := o["sessionID"].(string); ok && sid != "" {
		p.out.SessionID = sid
	}
	part := o.Map("part")
	switch o.Str("type") {
	case "text":
		if t := part.Str("text"); t != "" {
			p.texts = append(p.texts, t)
			return map[string]any{"type": "assistant", "text": t}
		}
	case "step_finish":
		tokens := part.Map("tokens")
		p.out.AddUsage(tokens.Int("input"), tokens.Map("cache").Int("read"), tokens.Int("output")+tokens.Int("reasoning"))
		cost, _ := part.Num("cost")
		p.out.AddCost(cost)
		return map[string]any{"type": "step", "reason": part.Str("reason")}
	case "tool_use":
		state := part.Map("state")
		if state.Str("status") == "error" {
			return map[string]any{"type": "tool_error", "tool": part.Str("tool"), "error": state.Str("error")}
		}
		return map[string]any{"type": "tool_call", "tool": part.Str("tool")}
	case "error":
		msg := localcli.ErrorText(o["error"])
		if msg == "" {
			msg = o.Str("message")
		}
		if msg != "" {
			p.errors = append(p.errors, msg)
			return map[string]any{"type": "error", "message": msg}
		}
	}
	return nil
}

func (p *parser) Result() *localcli.Parsed {
	p.out.Summary = strings.Join(p.texts, "\n\n")
	p.out.Error = strings.Join(p.errors, "\n")
	return &p.out
}
