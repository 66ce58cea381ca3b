// Package betalocal is the beta_local adapter (extension adapter.beta_local): it runs an
// agent's heartbeat through the Codex CLI's `exec --json` mode (REFERENCE-adapters.md 10,
// REFERENCE.md 3), the prompt on stdin.
package betalocal

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/keelhq/keel/adapters/localcli"
	"github.com/keelhq/keel/extensions"
	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/adapter"
)

// Type is the adapter type.
const Type = "beta_local"

// Spec describes the Codex CLI.
var Spec = &localcli.Spec{
	Type: Type, Label: "Codex (local CLI)", Tool: "Codex", Code: "codex",
	DefaultCommand: "codex",
	Models: []adapter.Model{
		{ID: "gpt-5.5", Label: "GPT-5.5"},
		{ID: "gpt-5.4", Label: "GPT-5.4"},
		{ID: "gpt-5.4-mini", Label: "GPT-5.4 mini"},
		{ID: "gpt-5.3-codex", Label: "GPT-5.3 Codex"},
		{ID: "gpt-5.2-codex", Label: "GPT-5.2 Codex"},
	},
	ConfigProperties: `{
    "search": {"type": "boolean", "description": "Pass --search (web search)."},
    "dangerouslyBypassApprovalsAndSandbox": {"type": "boolean", "description": "Pass --dangerously-bypass-approvals-and-sandbox instead of the workspace-write sandbox."},
    "dangerouslyBypassSandbox": {"type": "boolean", "description": "Legacy name of dangerouslyBypassApprovalsAndSandbox."},
    "modelReasoningEffort": {"type": "string", "enum": ["minimal", "low", "medium", "high", "xhigh"], "description": "-c model_reasoning_effort."},
    "reasoningEffort": {"type": "string", "description": "Legacy name of modelReasoningEffort."},
    "fastMode": {"type": "boolean", "description": "Use the fast service tier."},
    "mcpServers": {"type": "object", "additionalProperties": {"type": "object"}, "description": "MCP servers by name ({url, headers} or {command, args, env}), passed as -c mcp_servers.<name>.* overrides."}
  }`,
	PromptOnStdin:        true,
	InstructionsInPrompt: true,
	Args:                 args,
	NewParser:            func(*localcli.Invocation) localcli.Parser { return &parser{} },
	SkillsDir:            func(inv *localcli.Invocation) string { return filepath.Join(codexHome(inv), "skills") },
	UnknownSession:       regexp.MustCompile(`(?i)unknown (session|thread)|session .* not found|thread .* not found|conversation .* not found|missing rollout path for thread|state db missing rollout path|state db returned stale rollout path|no rollout found for thread id`),
	AuthRequired:         regexp.MustCompile(`(?i)refresh_token_(reused|expired|invalidated)|not logged in|please (run|use) .?codex login|401 unauthorized|invalid api key|incorrect api key`),
	CrashCode:            "codex_harness_crash",
	AuthEnv:              []string{"OPENAI_API_KEY"},
	AuthFiles:            []string{".codex/auth.json"},
	LoginHint:            "Run `codex login --device-auth` as the agent user, or set OPENAI_API_KEY in the adapter config env.",
	InstallHint:          "npm install -g @openai/codex",
	Provider:             "openai", Biller: "openai",
	APIKeyEnv: []string{"OPENAI_API_KEY"},
	// The one device login of the spec's local types (REFERENCE-plugins.md C.8, codex_local).
	DeviceLoginArgs: []string{"login", "--device-auth"},
}

func init() {
	extensions.Register(Spec.Key(), func() sdk.Extension { return localcli.New(Spec) })
}

// codexHome is CODEX_HOME of the run: the config env's, else ~/.codex.
func codexHome(inv *localcli.Invocation) string {
	if h := inv.Env["CODEX_HOME"]; h != "" {
		return h
	}
	return filepath.Join(inv.Home, ".codex")
}

// args is the argument list: `[--search] exec --json`, the sandbox (workspace-write with
// network unless SERVICE_RUNNER_NETWORK_ACCESS is disabled, or the bypass), model, effort,
// fast mode, extra args, then `resume <id> -` or `-` (the prompt on stdin).
func args(inv *localcli.Invocation) []string {
	c := inv.Config
	var a []string
	if c.Bool("search", false) {
		a = append(a, "--search")
	}
	a = append(a, "exec", "--json")
	bypass := c.Bool("dangerouslyBypassApprovalsAndSandbox", c.Bool("dangerouslyBypassSandbox", false))
	explicit := false
	for _, x := range c.ExtraArgs {
		if x == "--sandbox" || x == "-s" || x == "--profile" || x == "-p" || strings.HasPrefix(x, "sandbox_mode=") ||
			strings.HasPrefix(x, "--sandbox=") || strings.HasPrefix(x, "--profile=") {
			explicit = true
		}
	}
	if !bypass && !explicit {
		network := "true"
		if inv.Env["SERVICE_RUNNER_NETWORK_ACCESS"] == "disabled" {
			network = "false"
		}
		a = append(a, "-c", `sandbox_mode="workspace-write"`, "-c", "sandbox_workspace_write.network_access="+network)
	}
	if bypass {
		a = append(a, "--dangerously-bypass-approvals-and-sandbox")
	}
	if inv.Model != "" {
		a = append(a, "--model", inv.Model)
	}
	effort := c.Str("modelReasoningEffort")
	if effort == "" {
		effort = c.Str("reasoningEffort")
	}
	if effort != "" {
		a = append(a, "-c", `model_reasoning_effort="`+effort+`"`)
	}
	if c.Bool("fastMode", false) {
		a = append(a, "-c", `service_tier="fast"`, "-c", "features.fast_mode=true")
	}
	a = append(a, mcpOverrides(c)...)
	a = append(a, c.ExtraArgs...)
	if inv.ResumeID != "" {
		return append(a, "resume", inv.ResumeID, "-")
	}
	return append(a, "-")
}

// bareKey is a TOML bare key: a server name usable in a -c override.
var bareKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// mcpOverrides turns config.mcpServers into -c mcp_servers.<name>.<key>=<TOML value>
// overrides (url, http_headers, command, args, env), in name order. JSON strings, string
// arrays and string maps are written as TOML basic strings, arrays and inline tables.
func mcpOverrides(c *localcli.Config) []string {
	raw, ok := c.Raw["mcpServers"]
	if !ok {
		return nil
	}
	var servers map[string]map[string]json.RawMessage
	if json.Unmarshal(raw, &servers) != nil {
		return nil
	}
	names := make([]string, 0, len(servers))
	for n := range servers {
		if bareKey.MatchString(n) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var out []string
	for _, n := range names {
		s := servers[n]
		for _, k := range []struct{ from, to string }{{"url", "url"}, {"headers", "http_headers"}, {"command", "command"}, {"args", "args"}, {"env", "env"}} {
			v, ok := s[k.from]
			if !ok {
				continue
			}
			if t, ok := tomlValue(v); ok {
				out = append(out, "-c", "mcp_servers."+n+"."+k.to+"="+t)
			}
		}
	}
	return out
}

// tomlValue writes a JSON string, string array or string map as TOML.
func tomlValue(v json.RawMessage) (string, bool) {
	var s string
	if json.Unmarshal(v, &s) == nil {
		b, _ := json.Marshal(s)
		return string(b), true
	}
	var list []string
	if json.Unmarshal(v, &list) == nil {
		b, _ := json.Marshal(list)
		return string(b), true
	}
	var m map[string]string
	if json.Unmarshal(v, &m) == nil {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			kb, _ := json.Marshal(k)
			vb, _ := json.Marshal(m[k])
			parts = append(parts, string(kb)+" = "+string(vb))
		}
		return "{ " + strings.Join(parts, ", ") + " }", true
	}
	return "", false
}

// parser reads codex's JSONL: thread.started carries the session (thread) id,
// item.completed the agent messages and tool calls, turn.completed the usage, error and
// turn.failed the errors.
type parser struct {
	out localcli.Parsed
}

func (p *parser) Line(line string) map[string]any {
	o, ok := localcli.ParseObj(line)
	if !ok {
		return nil
	}
	p.out.Events = true
	switch o.Str("type") {
	case "thread.started":
		p.out.SessionID = o.Str("thread_id")
		return map[string]any{"type": "init", "sessionId": p.out.SessionID}
	case "item.completed":
		item := o.Map("item")
		switch item.Str("type") {
		case "agent_message":
			p.out.Summary = item.Str("text")
			return map[string]any{"type": "assistant", "text": p.out.Summary}
		case "command_execution":
			return map[string]any{"type": "tool_call", "command": item.Str("command"), "exitCode": item["exit_code"]}
		case "reasoning":
			return map[string]any{"type": "thinking", "text": item.Str("text")}
		}
	case "turn.completed":
		p.out.Terminal = true
		if u := o.Map("usage"); u != nil {
			p.out.AddUsage(u.Int("input_tokens"), u.Int("cached_input_tokens"), u.Int("output_tokens"))
		}
		return map[string]any{"type": "result", "summary": p.out.Summary}
	case "turn.failed":
		p.out.Terminal = true
		p.out.Error = localcli.ErrorText(o.Map("error")["message"])
		if p.out.Error == "" {
			p.out.Error = localcli.ErrorText(o["error"])
		}
		return map[string]any{"type": "error", "message": p.out.Error}
	case "error":
		p.out.Terminal = true
		p.out.Error = o.Str("message")
		return map[string]any{"type": "error", "message": p.out.Error}
	}
	return nil
}

func (p *parser) Result() *localcli.Parsed { return &p.out }
