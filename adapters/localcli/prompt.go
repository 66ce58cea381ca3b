package localcli

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// DefaultPromptTemplate is the prompt of a run whose config sets no promptTemplate.
const DefaultPromptTemplate = `You are agent {{agent.id}} ({{agent.name}}). Continue your work.

Execution contract:
- Work through the keel API at $SERVICE_API_URL with "Authorization: Bearer $SERVICE_API_KEY" and "X-Service-Run-Id: $SERVICE_RUN_ID" on every request.
- Start with GET /api/agents/me and GET /api/agents/me/inbox-lite; check an issue out before working on it.
- End every issue you touch with a final disposition: PATCH its status (done, blocked or in_review) and add a comment saying what you did.
- Retry a failed write at most twice; never retry a 409. Split large work into child issues.`

var (
	templateVar     = regexp.MustCompile(`\{\{\s*([A-Za-z0-9_.]+)\s*\}\}`)
	templateSection = regexp.MustCompile(`(?s)\{\{#\s*([A-Za-z0-9_.]+)\s*\}\}(.*?)\{\{/\s*([A-Za-z0-9_.]+)\s*\}\}`)
)

// renderTemplate fills {{path}} placeholders from data (missing ones render empty) and keeps
// the body of {{#key}}…{{/key}} sections only when key is set and not false.
func renderTemplate(tmpl string, data map[string]any) string {
	tmpl = templateSection.ReplaceAllStringFunc(tmpl, func(m string) string {
		sub := templateSection.FindStringSubmatch(m)
		if sub[1] != sub[3] || !truthy(lookup(data, sub[1])) {
			return ""
		}
		return sub[2]
	})
	return templateVar.ReplaceAllStringFunc(tmpl, func(m string) string {
		v := lookup(data, templateVar.FindStringSubmatch(m)[1])
		switch t := v.(type) {
		case nil:
			return ""
		case string:
			return t
		case map[string]any, []any:
			b, _ := json.Marshal(t)
			return string(b)
		default:
			return fmt.Sprint(t)
		}
	})
}

func lookup(data map[string]any, path string) any {
	var cur any = data
	for _, part := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[part]
	}
	return cur
}

func truthy(v any) bool {
	switch t := v.(type) {
	case nil:
		return false
	case bool:
		return t
	case string:
		return t != ""
	}
	return true
}

// Render renders a prompt template with the run's template data.
func Render(inv *Invocation, tmpl string) string { return renderTemplate(tmpl, templateData(inv)) }

// templateData is what prompt templates see.
func templateData(inv *Invocation) map[string]any {
	r := inv.Req
	ctx := map[string]any{}
	for k, v := range r.Context {
		ctx[k] = v
	}
	task := r.Env["SERVICE_TASK_ID"]
	return map[string]any{
		"agentId": r.AgentID, "agentName": r.AgentName, "companyId": r.CompanyID, "runId": r.RunID,
		"agent":   map[string]any{"id": r.AgentID, "name": r.AgentName},
		"company": map[string]any{"id": r.CompanyID},
		"run":     map[string]any{"id": r.RunID, "source": "on_demand"},
		"context": ctx, "taskId": task, "noTask": task == "",
		"wakeReason": r.Env["SERVICE_WAKE_REASON"], "serviceApiUrl": r.Env["SERVICE_API_URL"],
	}
}

// wakePrompt describes why the run woke: the reason, the issue, the comment, the approval
// and the structured payload. "" when the wake context says nothing.
func wakePrompt(inv *Invocation) string {
	env := inv.Req.Env
	var lines []string
	add := func(label, name string) {
		if v := env[name]; v != "" {
			lines = append(lines, "- "+label+": "+v)
		}
	}
	add("Wake reason", "SERVICE_WAKE_REASON")
	add("Issue", "SERVICE_TASK_ID")
	add("Comment", "SERVICE_WAKE_COMMENT_ID")
	add("Approval", "SERVICE_APPROVAL_ID")
	add("Approval status", "SERVICE_APPROVAL_STATUS")
	add("Linked issues", "SERVICE_LINKED_ISSUE_IDS")
	if len(lines) == 0 {
		return ""
	}
	out := "## Wake context\n" + strings.Join(lines, "\n")
	if p := env["SERVICE_WAKE_PAYLOAD_JSON"]; p != "" {
		out += "\n\nStructured wake payload JSON:\n```json\n" + p + "\n```"
	}
	return out
}

// envNote lists the run's SERVICE_* variables, so the model looks for them.
func envNote(inv *Invocation) string {
	var keys []string
	for k := range inv.Env {
		if strings.HasPrefix(k, "SERVICE_") {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return ""
	}
	sort.Strings(keys)
	return "keel runtime note: The following SERVICE_* environment variables are available in this run: " +
		strings.Join(keys, ", ") + ". Do not assume these variables are missing without checking your shell environment."
}

// loadInstructions reads the configured instructions file (relative to cwd), with the
// agent user's rights, into inv.Instructions with the note on where it came from. An unreadable file is a warning in
// the run log; the run goes on without it.
func loadInstructions(inv *Invocation) {
	p := inv.Config.InstructionsFilePath
	if strings.TrimSpace(p) == "" {
		return
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(inv.Cwd, p)
	}
	b, err := inv.ReadFile(p)
	if err != nil {
		inv.Log(fmt.Sprintf("[service] Warning: could not read agent instructions file %q: %v", p, err))
		return
	}
	inv.InstructionsPath = p
	inv.Instructions = string(b) + "\n\nThe above agent instructions were loaded from " + p +
		". Resolve any relative file references from " + filepath.Dir(p) + "/.\n\n"
}

// buildPrompt assembles the prompt of an attempt: [instructions (types that take them in
// the prompt), bootstrap (fresh sessions only), wake context, runtime note, rendered
// template]. A resumed session that has a wake context gets only the delta: the
// instructions and the template, which the session already holds, are left out.
func buildPrompt(s *Spec, inv *Invocation) string {
	data := templateData(inv)
	wake := wakePrompt(inv)
	delta := inv.ResumeID != "" && wake != ""
	var sections []string
	if s.InstructionsInPrompt && inv.Instructions != "" && !delta {
		sections = append(sections, strings.TrimRight(inv.Instructions, "\n"))
	}
	if inv.ResumeID == "" && inv.Config.BootstrapPromptTemplate != "" {
		sections = append(sections, renderTemplate(inv.Config.BootstrapPromptTemplate, data))
	}
	sections = append(sections, wake)
	if s.EnvNote {
		sections = append(sections, envNote(inv))
	}
	if !delta {
		tmpl := inv.Config.PromptTemplate
		if strings.TrimSpace(tmpl) == "" {
			tmpl = DefaultPromptTemplate
		}
		sections = append(sections, renderTemplate(tmpl, data))
	}
	var out []string
	for _, sec := range sections {
		if strings.TrimSpace(sec) != "" {
			out = append(out, sec)
		}
	}
	return strings.Join(out, "\n\n")
}
