// Package alphalocal is the alpha_local adapter (extension adapter.alpha_local): it runs an
// agent's heartbeat through the Claude Code CLI in print mode with stream-json output
// (REFERENCE-adapters.md 9, REFERENCE.md 3), the prompt on stdin.
package alphalocal

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/keelhq/keel/adapters/localcli"
	"github.com/keelhq/keel/extensions"
	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/adapter"
)

// Type is the adapter type.
const Type = "alpha_local"

// DefaultModel is the model a run uses when the config names none and the environment
// picks no other (ANTHROPIC_MODEL, Bedrock, Vertex).
const DefaultModel = "claude-opus-5"

// defaultMaxTurns is --max-turns when maxTurnsPerRun is not set.
const defaultMaxTurns = 300

// allowedTools replaces --dangerously-skip-permissions when the CLI would run as root,
// which the CLI refuses to combine with skipping permissions.
const allowedTools = "Task AskUserQuestion Bash CronCreate CronDelete CronList Edit EnterPlanMode EnterWorktree ExitPlanMode ExitWorktree Glob Grep Monitor NotebookEdit PushNotification Read RemoteTrigger ScheduleWakeup Skill TaskOutput TaskStop TodoWrite ToolSearch WebFetch WebSearch Write"

// Spec describes the Claude Code CLI.
var Spec = &localcli.Spec{
	Type: Type, Label: "Claude Code (local CLI)", Tool: "Claude", Code: "claude",
	DefaultCommand: "claude",
	Models: []adapter.Model{
		{ID: "claude-opus-5", Label: "Claude Opus 5"},
		{ID: "claude-opus-4-6", Label: "Claude Opus 4.6"},
		{ID: "claude-sonnet-4-6", Label: "Claude Sonnet 4.6"},
		{ID: "claude-haiku-4-5", Label: "Claude Haiku 4.5"},
	},
	ConfigProperties: `{
    "maxTurnsPerRun": {"type": "integer", "minimum": 0, "description": "--max-turns of a run (default 300; 0 uses the default)."},
    "effort": {"type": "string", "enum": ["low", "medium", "high", "xhigh", "max"], "description": "--effort of the model."},
    "dangerouslySkipPermissions": {"type": "boolean", "description": "Run without permission prompts (default true); as root the CLI gets an allowed-tools list instead."},
    "chrome": {"type": "boolean", "description": "Pass --chrome."},
    "mcpServers": {"type": "object", "additionalProperties": {"type": "object"}, "description": "MCP servers by name, written to an --mcp-config file with --strict-mcp-config."}
  }`,
	PromptOnStdin:  true,
	Args:           args,
	NewParser:      func(*localcli.Invocation) localcli.Parser { return &parser{} },
	Prepare:        prepare,
	SkillsDir:      func(inv *localcli.Invocation) string { return filepath.Join(bundleDir(inv), ".claude", "skills") },
	CanResume:      func(_ *localcli.Invocation, id string) bool { return uuidRe.MatchString(id) },
	UnknownSession: regexp.MustCompile(`(?i)no conversation found with session id|unknown session|session .* not found|not a valid UUID|--resume requires a valid session|is not a UUID|does not match any session title`),
	AuthRequired:   regexp.MustCompile(`(?i)invalid api key|please run /login|not logged in|login required|authentication_error|oauth token has expired|authentication required|unauthorized`),
	AuthEnv:        []string{"ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"},
	AuthFiles:      []string{".claude/.credentials.json"},
	LoginHint:      "Run `claude login` (or `claude setup-token`) as the agent user, or set ANTHROPIC_API_KEY in the adapter config env.",
	InstallHint:    "npm install -g @anthropic-ai/claude-code",
	Provider:       "anthropic", Biller: "anthropic",
	APIKeyEnv: []string{"ANTHROPIC_API_KEY"},
}

func init() {
	extensions.Register(Spec.Key(), func() sdk.Extension { return localcli.New(Spec) })
}

var uuidRe = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// bundleDir is the run's prompt bundle: the instructions file and the skills, handed to
// the CLI with --add-dir.
func bundleDir(inv *localcli.Invocation) string { return filepath.Join(inv.RunDir, "bundle") }

// prepare writes the prompt bundle and the MCP config, and picks the model.
func prepare(inv *localcli.Invocation) error {
	dir := bundleDir(inv)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if inv.Instructions != "" {
		if err := os.WriteFile(filepath.Join(dir, "agent-instructions.md"), []byte(inv.Instructions), 0o644); err != nil {
			return err
		}
	}
	if raw, ok := inv.Config.Raw["mcpServers"]; ok && len(raw) > 2 && string(raw) != "null" {
		doc := `{"mcpServers":` + string(raw) + `}`
		if err := os.WriteFile(filepath.Join(inv.RunDir, "mcp-config.json"), []byte(doc), 0o644); err != nil {
			return err
		}
	}
	if inv.Config.Model == "" {
		inv.Model = DefaultModel
		for _, k := range []string{"ANTHROPIC_MODEL", "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX", "ANTHROPIC_BEDROCK_BASE_URL"} {
			if inv.Env[k] != "" {
				inv.Model = ""
			}
		}
	}
	return nil
}

// args is the argument list: print mode with stream-json, resume, permissions, model,
// effort, turn limit, the instructions file (fresh sessions only), MCP config, the prompt
// bundle, extra args. The prompt goes to stdin.
func args(inv *localcli.Invocation) []string {
	c := inv.Config
	a := []string{"--print", "--output-format", "stream-json", "--verbose"}
	if inv.ResumeID != "" {
		a = append(a, "--resume", inv.ResumeID)
	}
	if c.Bool("dangerouslySkipPermissions", true) {
		if inv.AsRoot {
			a = append(a, "--allowedTools", allowedTools)
		} else {
			a = append(a, "--dangerously-skip-permissions")
		}
	}
	if c.Bool("chrome", false) {
		a = append(a, "--chrome")
	}
	if inv.Model != "" {
		a = append(a, "--model", inv.Model)
	}
	if e := c.Str("effort"); e != "" {
		a = append(a, "--effort", e)
	}
	turns := c.Int("maxTurnsPerRun")
	if turns == 0 {
		turns = defaultMaxTurns
	}
	a = append(a, "--max-turns", strconv.Itoa(turns))
	if inv.ResumeID == "" && inv.Instructions != "" {
		a = append(a, "--append-system-prompt-file", filepath.Join(bundleDir(inv), "agent-instructions.md"))
	}
	if _, err := os.Stat(filepath.Join(inv.RunDir, "mcp-config.json")); err == nil {
		a = append(a, "--mcp-config", filepath.Join(inv.RunDir, "mcp-config.json"), "--strict-mcp-config")
	}
	a = append(a, "--add-dir", bundleDir(inv))
	return append(a, c.ExtraArgs...)
}

// parser reads claude's stream-json: system/init and assistant events carry the session id,
// assistant messages the text, the result event the usage, cost, outcome and summary.
type parser struct {
	out   localcli.Parsed
	texts []string
}

func (p *parser) Line(line string) map[string]any {
	o, ok := localcli.ParseObj(line)
	if !ok {
		return nil
	}
	p.out.Events = true
	if sid := o.Str("session_id"); sid != "" {
		p.out.SessionID = sid
	}
	switch o.Str("type") {
	case "system":
		if o.Str("subtype") == "init" {
			if m := o.Str("model"); m != "" {
				p.out.Model = m
			}
			return map[string]any{"type": "init", "sessionId": o.Str("session_id"), "model": o.Str("model")}
		}
	case "assistant":
		msg := o.Map("message")
		var text []string
		var tools []string
		for _, b := range msg.List("content") {
			bo, ok := b.(map[string]any)
			if !ok {
				continue
			}
			switch localcli.Obj(bo).Str("type") {
			case "text":
				text = append(text, localcli.Obj(bo).Str("text"))
			case "tool_use":
				tools = append(tools, localcli.Obj(bo).Str("name"))
			}
		}
		if len(text) > 0 {
			t := strings.Join(text, "")
			p.texts = append(p.texts, t)
			return map[string]any{"type": "assistant", "text": t}
		}
		if len(tools) > 0 {
			return map[string]any{"type": "tool_call", "tools": tools}
		}
	case "result":
		return p.result(o)
	}
	return nil
}

func (p *parser) result(o localcli.Obj) map[string]any {
	p.out.Terminal = true
	if mu := o.Map("modelUsage"); len(mu) > 0 {
		for _, v := range mu {
			m, ok := v.(map[string]any)
			if !ok {
				continue
			}
			u := localcli.Obj(m)
			p.out.AddUsage(u.Int("inputTokens")+u.Int("cacheCreationInputTokens"), u.Int("cacheReadInputTokens"), u.Int("outputTokens"))
		}
	} else if u := o.Map("usage"); u != nil {
		p.out.AddUsage(u.Int("input_tokens")+u.Int("cache_creation_input_tokens"), u.Int("cache_read_input_tokens"), u.Int("output_tokens"))
	}
	if c, ok := o.Num("total_cost_usd"); ok {
		p.out.AddCost(c)
	}
	sub := o.Str("subtype")
	stop := o.Str("stop_reason", "stopReason")
	p.out.StopReason = stop
	switch {
	case sub == "error_max_turns" || stop == "max_turns" || stop == "max_turns_exhausted":
		p.out.MaxTurns = true
	case sub == "model_refusal" || sub == "refusal" || stop == "refusal":
		p.out.Refusal = true
	}
	text := o.Str("result")
	if text != "" {
		p.out.Summary = text
	} else {
		p.out.Summary = strings.Join(p.texts, "\n\n")
	}
	if p.out.Refusal && text != "" {
		p.out.Error = text
	}
	if o.Bool("is_error") || (sub != "" && sub != "success") {
		msg := text
		if msg == "" {
			var errs []string
			for _, e := range o.List("errors") {
				errs = append(errs, localcli.ErrorText(e))
			}
			msg = strings.Join(errs, "; ")
		}
		if msg == "" {
			msg = "Claude run ended with " + sub
		}
		p.out.Error = msg
	}
	return map[string]any{"type": "result", "subtype": sub, "isError": o.Bool("is_error"), "summary": p.out.Summary}
}

func (p *parser) Result() *localcli.Parsed {
	if p.out.Summary == "" {
		p.out.Summary = strings.Join(p.texts, "\n\n")
	}
	return &p.out
}
