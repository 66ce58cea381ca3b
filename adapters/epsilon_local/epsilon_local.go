// Package epsilonlocal is the epsilon_local adapter (extension adapter.epsilon_local): it
// runs an agent's heartbeat through the Pi coding agent CLI in JSON print mode
// (REFERENCE-adapters.md 3): the instructions as an appended system prompt, the prompt as
// the last argument, and a session file keel names and keeps per task.
package epsilonlocal

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/keelhq/keel/adapters/localcli"
	"github.com/keelhq/keel/extensions"
	"github.com/keelhq/keel/sdk"
)

// Type is the adapter type.
const Type = "epsilon_local"

// tools are the tools a run may use.
const tools = "read,bash,edit,write,grep,find,ls"

// Spec describes the Pi CLI.
var Spec = &localcli.Spec{
	Type: Type, Label: "Pi coding agent (local CLI)", Tool: "Pi", Code: "pi",
	DefaultCommand: "pi",
	ConfigProperties: `{
    "model": {"type": "string", "pattern": "^[^/]+/.+$", "description": "Model id in provider/model form, e.g. xai/grok-4 (required to run)."},
    "thinking": {"type": "string", "enum": ["off", "minimal", "low", "medium", "high", "xhigh"], "description": "--thinking level."}
  }`,
	RequireProviderModel: true,
	Args:                 args,
	NewParser:            func(*localcli.Invocation) localcli.Parser { return &parser{} },
	Prepare: func(inv *localcli.Invocation) error {
		return os.MkdirAll(skillsDir(inv), 0o755)
	},
	SkillsDir:      skillsDir,
	NewSession:     newSession,
	CanResume:      canResume,
	UnknownSession: regexp.MustCompile(`(?i)unknown session|session not found|session .* not found|no session`),
	AuthRequired:   regexp.MustCompile(`(?i)auth(entication)? required|no api key|invalid\s*api\s*key|not logged in|free usage exceeded`),
	AuthEnv:        []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "XAI_API_KEY", "GEMINI_API_KEY", "OPENROUTER_API_KEY"},
	AuthFiles:      []string{".pi/agent/auth.json"},
	LoginHint:      "Run `pi` and `/login` as the agent user, or set the provider's API key in the adapter config env.",
	InstallHint:    "npm install -g @mariozechner/pi-coding-agent",
}

func init() {
	extensions.Register(Spec.Key(), func() sdk.Extension { return localcli.New(Spec) })
}

func skillsDir(inv *localcli.Invocation) string {
	return filepath.Join(inv.Home, ".pi", "agent", "skills")
}

// newSession creates the empty session file of a fresh session:
// ~/.pi/services/<timestamp>-<agent id>.jsonl.
func newSession(inv *localcli.Invocation) (string, error) {
	dir := filepath.Join(inv.Home, ".pi", "services")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("error creating the Pi sessions directory: %w", err)
	}
	ts := strings.NewReplacer(":", "-", ".", "-").Replace(time.Now().UTC().Format("2006-01-02T15:04:05.000Z"))
	agent := filepath.Base(filepath.Clean("/" + inv.Req.AgentID))
	for i := 0; ; i++ {
		name := ts + "-" + agent + ".jsonl"
		if i > 0 {
			name = fmt.Sprintf("%s-%s-%d.jsonl", ts, agent, i)
		}
		p := filepath.Join(dir, name)
		f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if os.IsExist(err) && i < 100 {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("error creating the Pi session file: %w", err)
		}
		return p, f.Close()
	}
}

// canResume accepts a session file whose header was written in the run's cwd.
func canResume(inv *localcli.Invocation, path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	line, _ := bufio.NewReader(f).ReadString('\n')
	var head struct {
		Type string `json:"type"`
		Cwd  string `json:"cwd"`
	}
	if json.Unmarshal([]byte(line), &head) != nil || head.Type != "session" {
		return false
	}
	return filepath.Clean(head.Cwd) == filepath.Clean(inv.Cwd)
}

// args is the argument list: JSON print mode, the system prompt extension (the
// instructions and the default template, or the configured template), provider and model,
// thinking, tools, the session file, the skills directory, extra args, then the prompt.
func args(inv *localcli.Invocation) []string {
	c := inv.Config
	ext := localcli.Render(inv, localcli.DefaultPromptTemplate)
	if inv.Instructions != "" {
		ext = inv.Instructions + ext
	} else if c.PromptTemplate != "" {
		ext = localcli.Render(inv, c.PromptTemplate)
	}
	a := []string{"--mode", "json", "-p", "--append-system-prompt", ext}
	provider, model, ok := strings.Cut(inv.Model, "/")
	if !ok {
		provider, model = "", inv.Model
	}
	if provider != "" {
		a = append(a, "--provider", provider)
	}
	if model != "" {
		a = append(a, "--model", model)
	}
	if t := c.Str("thinking"); t != "" {
		a = append(a, "--thinking", t)
	}
	session := inv.ResumeID
	if session == "" {
		session = inv.SessionID
	}
	a = append(a, "--tools", tools, "--session", session, "--skill", skillsDir(inv))
	a = append(a, c.ExtraArgs...)
	return append(a, inv.Prompt)
}

// parser reads Pi's JSON events (parsePiJsonl of the reference).
type parser struct {
	out      localcli.Parsed
	messages []string
	final    string
	errors   []string
	seen     map[string]bool
}

func (p *parser) fail(msg string) {
	if p.seen == nil {
		p.seen = map[string]bool{}
	}
	if !p.seen[msg] {
		p.seen[msg] = true
		p.errors = append(p.errors, msg)
	}
}

// providerFailure records an assistant message that stopped with an error.
func (p *parser) providerFailure(m localcli.Obj) {
	if m.Str("role") == "assistant" && m.Str("stopReason") == "error" {
		msg := m.Str("errorMessage")
		if msg == "" {
			msg = "Pi provider request failed."
		}
		p.fail(msg)
	}
}

func (p *parser) Line(line string) map[string]any {
	o, ok := localcli.ParseObj(line)
	if !ok {
		return nil
	}
	p.out.Events = true
	switch o.Str("type") {
	case "agent_end":
		p.out.Terminal = true
		msgs := o.List("messages")
		for _, m := range msgs {
			if mo, ok := m.(map[string]any); ok {
				p.providerFailure(mo)
			}
		}
		if n := len(msgs); n > 0 {
			if last, ok := msgs[n-1].(map[string]any); ok && localcli.Obj(last).Str("role") == "assistant" {
				if t := localcli.TextOf(last); t != "" {
					p.final = t
				}
			}
		}
		return map[string]any{"type": "result", "summary": p.final}
	case "message_end":
		p.providerFailure(o.Map("message"))
	case "auto_retry_end":
		if !o.Bool("success") {
			msg := o.Str("finalError")
			if msg == "" {
				msg = "Pi exhausted automatic retries without producing a response."
			}
			p.fail(msg)
		}
	case "turn_end":
		m := o.Map("message")
		p.providerFailure(m)
		if t := localcli.TextOf(map[string]any(m)); t != "" {
			p.final = t
			p.messages = append(p.messages, t)
		}
		if u := m.Map("usage"); u != nil {
			p.out.AddUsage(u.Int("input"), u.Int("cacheRead"), u.Int("output"))
			if c, ok := u.Map("cost").Num("total"); ok {
				p.out.AddCost(c)
			}
		}
		return map[string]any{"type": "assistant", "text": p.final}
	case "message_update":
		if ev := o.Map("assistantMessageEvent"); ev.Str("type") == "text_delta" {
			if len(p.messages) == 0 {
				p.messages = append(p.messages, "")
			}
			p.messages[len(p.messages)-1] += ev.Str("delta")
		}
	case "tool_execution_start":
		return map[string]any{"type": "tool_call", "tool": o.Str("toolName"), "callId": o.Str("toolCallId")}
	case "tool_execution_end":
		return map[string]any{"type": "tool_result", "tool": o.Str("toolName"), "callId": o.Str("toolCallId"), "isError": o.Bool("isError")}
	case "error":
		p.fail(o.Str("message"))
	case "response", "extension_ui_request", "extension_ui_response", "extension_error", "agent_start", "turn_start":
	default:
		if u := o.Map("usage"); u != nil {
			p.out.AddUsage(u.Int("inputTokens", "input"), u.Int("cachedInputTokens", "cacheRead"), u.Int("outputTokens", "output"))
		}
	}
	return nil
}

func (p *parser) Result() *localcli.Parsed {
	p.out.Summary = p.final
	if p.out.Summary == "" {
		p.out.Summary = strings.Join(p.messages, "\n\n")
	}
	if len(p.errors) > 0 {
		p.out.Error = p.errors[0]
	}
	return &p.out
}
