// Package zetalocal is the zeta_local adapter (extension adapter.zeta_local): it runs an
// agent's heartbeat through the Hermes Agent CLI (`hermes chat -q <prompt>`,
// REFERENCE-adapters.md 4), whose output is plain text: the response, token and cost lines,
// and the session id.
package zetalocal

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/keelhq/keel/adapters/localcli"
	"github.com/keelhq/keel/extensions"
	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/adapter"
)

// Type is the adapter type.
const Type = "zeta_local"

// Spec describes the Hermes CLI.
var Spec = &localcli.Spec{
	Type: Type, Label: "Hermes Agent (local CLI)", Tool: "Hermes", Code: "hermes",
	DefaultCommand: "hermes",
	CommandKeys:    []string{"hermesCommand", "command"},
	DefaultModel:   "auto",
	Models:         []adapter.Model{{ID: "auto", Label: "Auto (Hermes default)"}},
	ConfigProperties: `{
    "hermesCommand": {"type": "string", "minLength": 1, "description": "The hermes binary (wins over command)."},
    "provider": {"type": "string", "enum": ["auto", "openrouter", "nous", "openai-codex", "copilot", "copilot-acp", "anthropic", "huggingface", "zai", "kimi-coding", "minimax", "minimax-cn", "kilocode"], "description": "Inference provider; auto derives it from the model."},
    "maxTurnsPerRun": {"type": "integer", "minimum": 0, "description": "--max-turns of a run (0: the CLI's default)."},
    "toolsets": {"type": "string", "description": "Comma list of toolsets (-t)."},
    "enabledToolsets": {"type": "array", "items": {"type": "string"}, "description": "Toolsets (-t), as a list."},
    "persistSession": {"type": "boolean", "description": "Resume the task's session on its next run (default true)."},
    "worktreeMode": {"type": "boolean", "description": "Pass -w (work in a git worktree)."},
    "checkpoints": {"type": "boolean", "description": "Pass --checkpoints."},
    "quiet": {"type": "boolean", "description": "Pass -Q (response and session id only)."},
    "verbose": {"type": "boolean", "description": "Pass -v."},
    "timeoutSec": {"type": "number", "minimum": 0, "description": "Run timeout in seconds (default 1800; 0 also means 1800)."},
    "graceSec": {"type": "number", "minimum": 0, "description": "Seconds between SIGTERM and SIGKILL (default 10)."}
  }`,
	InstructionsInPrompt: true,
	Args:                 args,
	NewParser: func(inv *localcli.Invocation) localcli.Parser {
		return &parser{persist: inv.Config.Bool("persistSession", true)}
	},
	CanResume:         func(inv *localcli.Invocation, _ string) bool { return inv.Config.Bool("persistSession", true) },
	DefaultTimeoutSec: 1800,
	DefaultGraceSec:   10,
	AuthEnv:           []string{"ANTHROPIC_API_KEY", "OPENROUTER_API_KEY", "OPENAI_API_KEY", "ZAI_API_KEY", "KIMI_API_KEY", "MINIMAX_API_KEY"},
	AuthFiles:         []string{".hermes/.env", ".hermes/auth.json"},
	LoginHint:         "Run `hermes setup` as the agent user, or set a provider API key in the adapter config env.",
	InstallHint:       "pip install hermes-agent",
}

func init() {
	extensions.Register(Spec.Key(), func() sdk.Extension { return localcli.New(Spec) })
}

// validProviders are the providers hermes accepts.
var validProviders = map[string]bool{"auto": true, "openrouter": true, "nous": true, "openai-codex": true, "copilot": true,
	"copilot-acp": true, "anthropic": true, "huggingface": true, "zai": true, "kimi-coding": true, "minimax": true,
	"minimax-cn": true, "kilocode": true}

// provider resolves the inference provider: the configured one, else a hint from the model
// name, else auto.
func provider(inv *localcli.Invocation) string {
	if p := inv.Config.Str("provider"); validProviders[p] {
		return p
	}
	model := strings.ToLower(inv.Model)
	if strings.HasPrefix(model, "huggingface/") {
		return "huggingface"
	}
	bare := model[strings.LastIndex(model, "/")+1:]
	for _, h := range []struct{ prefix, provider string }{
		{"gpt-4", "openai-codex"}, {"gpt-5", "copilot"}, {"o1-", "openai-codex"}, {"o3-", "openai-codex"}, {"o4-", "openai-codex"},
		{"claude", "anthropic"}, {"hermes-", "nous"}, {"glm-", "zai"}, {"moonshot", "kimi-coding"}, {"kimi", "kimi-coding"},
		{"minimax", "minimax"},
	} {
		if strings.HasPrefix(bare, h.prefix) {
			return h.provider
		}
	}
	return "auto"
}

// args is the argument list: `chat -q <prompt>`, quiet, model (always, "auto" too),
// provider unless auto, toolsets, turn limit, worktree, checkpoints, verbose, `--source
// tool --yolo`, resume, extra args.
func args(inv *localcli.Invocation) []string {
	c := inv.Config
	a := []string{"chat", "-q", inv.Prompt}
	if c.Bool("quiet", false) {
		a = append(a, "-Q")
	}
	a = append(a, "-m", inv.Model)
	if p := provider(inv); p != "auto" {
		a = append(a, "--provider", p)
	}
	toolsets := c.Str("toolsets")
	if toolsets == "" {
		toolsets = strings.Join(c.Strings("enabledToolsets"), ",")
	}
	if toolsets != "" {
		a = append(a, "-t", toolsets)
	}
	if n := c.Int("maxTurnsPerRun"); n > 0 {
		a = append(a, "--max-turns", strconv.Itoa(n))
	}
	for _, f := range []struct{ key, arg string }{{"worktreeMode", "-w"}, {"checkpoints", "--checkpoints"}, {"verbose", "-v"}} {
		if c.Bool(f.key, false) {
			a = append(a, f.arg)
		}
	}
	a = append(a, "--source", "tool", "--yolo")
	if inv.ResumeID != "" {
		a = append(a, "--resume", inv.ResumeID)
	}
	return append(a, c.ExtraArgs...)
}

var (
	quietSession  = regexp.MustCompile(`(?m)^session_id:\s*(\S+)`)
	legacySession = regexp.MustCompile(`(?i)session[_ ](?:id|saved)[:\s]+([a-zA-Z0-9_-]+)`)
	usageRe       = regexp.MustCompile(`(?i)tokens?[:\s]+(\d+)\s*(?:input|in)\b.*?(\d+)\s*(?:output|out)\b`)
	costRe        = regexp.MustCompile(`(?i)(?:cost|spent)[:\s]*\$?([\d.]+)`)
	timestampLine = regexp.MustCompile(`^\[\d{4}-\d{2}-\d{2}T`)
	errorLine     = regexp.MustCompile(`(?i)error|exception|traceback|failed`)
	benignLine    = regexp.MustCompile(`INFO|DEBUG|(?i:warn)`)
	blankRuns     = regexp.MustCompile(`\n{3,}`)
)

// parser reads hermes's plain-text output.
type parser struct {
	persist bool
	stdout  []string
	stderr  []string
}

func (p *parser) Line(line string) map[string]any {
	p.stdout = append(p.stdout, line)
	t := strings.TrimSpace(line)
	switch {
	case strings.HasPrefix(t, "┊ 💬"):
		return map[string]any{"type": "assistant", "text": strings.TrimSpace(strings.TrimPrefix(t, "┊ 💬"))}
	case strings.HasPrefix(t, "[tool]"):
		return map[string]any{"type": "tool_call", "text": strings.TrimSpace(strings.TrimPrefix(t, "[tool]"))}
	}
	return nil
}

// StderrLine keeps stderr for the session id and error lines.
func (p *parser) StderrLine(line string) { p.stderr = append(p.stderr, line) }

// clean drops hermes's status lines from a response.
func clean(text string) string {
	var keep []string
	for _, line := range strings.Split(text, "\n") {
		t := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(t, "[tool]"), strings.HasPrefix(t, "[hermes]"), strings.HasPrefix(t, "[service]"),
			strings.HasPrefix(t, "session_id:"), timestampLine.MatchString(t), strings.HasPrefix(t, "[done] ┊"):
			continue
		case strings.HasPrefix(t, "┊ 💬"):
			line = strings.TrimSpace(strings.TrimPrefix(t, "┊ 💬"))
		case strings.HasPrefix(t, "┊"):
			continue
		case strings.HasPrefix(t, "[done]"):
			line = strings.TrimSpace(strings.TrimPrefix(t, "[done]"))
		}
		keep = append(keep, line)
	}
	return strings.TrimSpace(blankRuns.ReplaceAllString(strings.Join(keep, "\n"), "\n\n"))
}

func (p *parser) Result() *localcli.Parsed {
	out := &localcli.Parsed{}
	stdout := strings.Join(p.stdout, "\n")
	stderr := strings.Join(p.stderr, "\n")
	if m := quietSession.FindAllStringSubmatch(stdout, -1); m != nil {
		out.SessionID = m[len(m)-1][1]
		response := stdout
		if i := strings.LastIndex(stdout, "\nsession_id:"); i >= 0 {
			response = stdout[:i]
		}
		out.Summary = clean(response)
	} else {
		if m := legacySession.FindStringSubmatch(stdout + "\n" + stderr); m != nil {
			out.SessionID = m[1]
		}
		out.Summary = clean(stdout)
	}
	if !p.persist {
		out.SessionID = ""
	}
	if len(out.Summary) > 2000 {
		out.Summary = out.Summary[:2000]
	}
	if m := usageRe.FindStringSubmatch(stdout); m != nil {
		in, _ := strconv.ParseInt(m[1], 10, 64)
		o, _ := strconv.ParseInt(m[2], 10, 64)
		out.AddUsage(in, 0, o)
	}
	if m := costRe.FindStringSubmatch(stdout); m != nil {
		if c, err := strconv.ParseFloat(m[1], 64); err == nil {
			out.AddCost(c)
		}
	}
	var errs []string
	for _, line := range p.stderr {
		if errorLine.MatchString(line) && !benignLine.MatchString(line) && len(errs) < 5 {
			errs = append(errs, strings.TrimSpace(line))
		}
	}
	out.Message = strings.Join(errs, "\n")
	return out
}
