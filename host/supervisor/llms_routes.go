package supervisor

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/keelhq/keel/kernel"
)

// LLMRoutes returns the plain-text documents an agent that configures other agents reads
// (spec part 2, "LLM reflection documents"): the adapter types of this instance, one
// document per type generated from the adapter's manifest and config schema (so an
// installed adapter documents itself), and the agent icons. Board callers and agents with
// canCreateAgents only.
func (s *Supervisor) LLMRoutes() []*kernel.Route {
	return []*kernel.Route{
		kernel.Mount[struct{}, plainText](&llmsAgentConfigEndpoint{s}),
		kernel.Mount[llmsAdapterRequest, plainText](&llmsAdapterConfigEndpoint{s}),
		kernel.Mount[struct{}, plainText](&llmsAgentIconsEndpoint{s}),
	}
}

// plainText is a document served as text/plain.
type plainText string

// WriteResponse implements kernel.ResponseWriter.
func (p *plainText) WriteResponse(c *fiber.Ctx, status int) error {
	c.Set(fiber.HeaderContentType, "text/plain; charset=utf-8")
	c.Set(fiber.HeaderCacheControl, "no-cache")
	return c.Status(status).SendString(string(*p))
}

// llmsForbidden is the refusal of an agent without canCreateAgents.
const llmsForbidden = "Only board users and agents with canCreateAgents can read agent configuration documents"

// mayReadLLMDocs lets board callers through, and agents whose record (read from the agents
// owner) carries canCreateAgents.
func (s *Supervisor) mayReadLLMDocs(ctx context.Context) error {
	actor := kernel.ActorFrom(ctx)
	switch {
	case actor.Type == kernel.ActorBoard:
		return nil
	case actor.Type != kernel.ActorAgent:
		return kernel.Forbidden(llmsForbidden)
	}
	raw, err := s.PluginCall(ctx, "agents", "get", actor, actor.CompanyID, map[string]string{"agentId": actor.AgentID})
	if err != nil {
		return fmt.Errorf("error reading the permissions of agent %s: %w", actor.AgentID, err)
	}
	var rec struct {
		Permissions struct {
			CanCreateAgents bool `json:"canCreateAgents"`
		} `json:"permissions"`
	}
	if err := json.Unmarshal(raw, &rec); err != nil {
		return fmt.Errorf("error decoding agent %s: %w", actor.AgentID, err)
	}
	if !rec.Permissions.CanCreateAgents {
		return kernel.Forbidden(llmsForbidden)
	}
	return nil
}

type llmsAgentConfigEndpoint struct{ s *Supervisor }

func (e *llmsAgentConfigEndpoint) Meta() *kernel.EndpointMeta {
	return &kernel.EndpointMeta{Pattern: "GET /api/llms/agent-configuration.txt", Access: kernel.AccessEither,
		Summary: "Plain-text guide to configuring agents: the adapter types of this instance with links to each type's document (board, or agents with canCreateAgents)"}
}

func (e *llmsAgentConfigEndpoint) Execute(ctx context.Context, _ *struct{}) (*plainText, error) {
	if err := e.s.mayReadLLMDocs(ctx); err != nil {
		return nil, err
	}
	list, err := e.s.AdapterList(ctx)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	b.WriteString("# Agent configuration\n\n")
	b.WriteString("An agent runs through an adapter. Create an agent with POST /api/companies/{companyId}/agents\n")
	b.WriteString("(or change one with PATCH /api/agents/{agentId}) giving adapterType, one of the types below,\n")
	b.WriteString("and adapterConfig, an object the type's document describes field by field.\n\n")
	b.WriteString("## Adapter types\n\n")
	for _, a := range list {
		fmt.Fprintf(&b, "- %s: %s", a.Type, a.Label)
		var notes []string
		if a.Source != "" {
			notes = append(notes, a.Source)
		}
		if a.Version != "" {
			notes = append(notes, "version "+a.Version)
		}
		switch {
		case !a.Loaded:
			notes = append(notes, "no adapter loaded on this instance: runs fail")
		case a.Disabled:
			notes = append(notes, "disabled")
		case a.Paused:
			notes = append(notes, "override paused: the built-in serves new runs")
		}
		if len(notes) > 0 {
			fmt.Fprintf(&b, " (%s)", strings.Join(notes, ", "))
		}
		fmt.Fprintf(&b, "\n  /api/llms/agent-configuration/%s.txt\n", a.Type)
	}
	b.WriteString("\nAgent icons: /api/llms/agent-icons.txt\n")
	out := plainText(b.String())
	return &out, nil
}

type llmsAdapterRequest struct {
	Type string `path:"adapterType"`
}

type llmsAdapterConfigEndpoint struct{ s *Supervisor }

func (e *llmsAdapterConfigEndpoint) Meta() *kernel.EndpointMeta {
	return &kernel.EndpointMeta{Pattern: "GET /api/llms/agent-configuration/{adapterType}", Access: kernel.AccessEither,
		Summary: "Plain-text document of one adapter type ({adapterType}.txt), generated from the adapter's manifest and config schema (board, or agents with canCreateAgents)"}
}

func (e *llmsAdapterConfigEndpoint) Execute(ctx context.Context, req *llmsAdapterRequest) (*plainText, error) {
	typ, ok := strings.CutSuffix(req.Type, ".txt")
	if !ok || typ == "" {
		return nil, kernel.NotFound("Not found")
	}
	if err := e.s.mayReadLLMDocs(ctx); err != nil {
		return nil, err
	}
	info, err := e.s.AdapterGet(ctx, typ)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Adapter type %s\n\n", typ)
	fmt.Fprintf(&b, "Label: %s\n", info.Label)
	if info.Key != "" {
		fmt.Fprintf(&b, "Adapter: %s", info.Key)
		if info.Version != "" {
			fmt.Fprintf(&b, " %s", info.Version)
		}
		fmt.Fprintf(&b, " (%s)\n", info.Source)
	}
	if m := e.s.get(info.Key); m != nil && m.src.Manifest.Description != "" {
		fmt.Fprintf(&b, "Description: %s\n", m.src.Manifest.Description)
	}
	switch {
	case !info.Loaded:
		b.WriteString("Status: no adapter for this type is loaded on this instance; runs of it fail with adapter_not_found\n")
	case info.Disabled:
		b.WriteString("Status: disabled by an instance admin\n")
	default:
		fmt.Fprintf(&b, "Status: %s\n", orText(info.Status, "ready"))
	}
	if len(info.Models) > 0 {
		b.WriteString("\n## Models\n\n")
		for _, m := range info.Models {
			line, _ := json.Marshal(m)
			fmt.Fprintf(&b, "- %s\n", line)
		}
	}
	fmt.Fprintf(&b, "\nSet adapterType to %q and adapterConfig to an object with these fields.\n", typ)
	schema, err := e.s.AdapterSchema(ctx, typ)
	if err != nil {
		if kernel.AsAPIError(err).Status != http.StatusNotFound {
			return nil, err
		}
		b.WriteString("\nThis adapter publishes no config schema: adapterConfig is free-form.\n")
	} else {
		if len(schema.AdapterConfigSchema) > 0 {
			b.WriteString("\n## adapterConfig fields\n\n")
			writeSchemaFields(&b, schema.AdapterConfigSchema)
			b.WriteString("\n## adapterConfig JSON Schema\n\n")
			writeIndented(&b, schema.AdapterConfigSchema)
		}
		if len(schema.ConfigSchema) > 0 {
			b.WriteString("\n## Instance config of the adapter (set by an instance admin, not per agent)\n\n")
			writeSchemaFields(&b, schema.ConfigSchema)
		}
	}
	out := plainText(b.String())
	return &out, nil
}

// writeSchemaFields writes one line per top-level property of an object schema: name,
// type, required, description, default and allowed values.
func writeSchemaFields(b *strings.Builder, raw json.RawMessage) {
	var s struct {
		Properties map[string]struct {
			Type        any    `json:"type"`
			Description string `json:"description"`
			Default     any    `json:"default"`
			Enum        []any  `json:"enum"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(raw, &s); err != nil || len(s.Properties) == 0 {
		b.WriteString("(no fields described)\n")
		return
	}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	required := map[string]bool{}
	for _, r := range s.Required {
		required[r] = true
	}
	for _, n := range names {
		p := s.Properties[n]
		fmt.Fprintf(b, "- %s", n)
		var tags []string
		if p.Type != nil {
			t, _ := json.Marshal(p.Type)
			tags = append(tags, strings.Trim(string(t), `"`))
		}
		if required[n] {
			tags = append(tags, "required")
		}
		if len(tags) > 0 {
			fmt.Fprintf(b, " (%s)", strings.Join(tags, ", "))
		}
		if p.Description != "" {
			fmt.Fprintf(b, ": %s", p.Description)
		}
		if p.Default != nil {
			d, _ := json.Marshal(p.Default)
			fmt.Fprintf(b, " Default: %s.", d)
		}
		if len(p.Enum) > 0 {
			e, _ := json.Marshal(p.Enum)
			fmt.Fprintf(b, " One of: %s.", e)
		}
		b.WriteString("\n")
	}
}

// writeIndented writes JSON indented, or as it is when it does not parse.
func writeIndented(b *strings.Builder, raw json.RawMessage) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		b.Write(raw)
		b.WriteString("\n")
		return
	}
	out, _ := json.MarshalIndent(v, "", "  ")
	b.Write(out)
	b.WriteString("\n")
}

func orText(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// AgentIcons are the icon names the board renders for an agent's icon field; any other
// value (an emoji, say) is stored as given and shown as text.
var AgentIcons = []string{
	"bot", "brain", "briefcase", "bug", "building", "calculator", "chart-line", "clipboard-list", "code",
	"cpu", "database", "file-text", "flask-conical", "globe", "hammer", "headphones", "heart-pulse",
	"lightbulb", "mail", "megaphone", "message-square", "palette", "pen-tool", "rocket", "scale",
	"search", "server", "shield", "shopping-cart", "sparkles", "target", "terminal", "truck",
	"user", "users", "wrench", "zap",
}

type llmsAgentIconsEndpoint struct{ s *Supervisor }

func (e *llmsAgentIconsEndpoint) Meta() *kernel.EndpointMeta {
	return &kernel.EndpointMeta{Pattern: "GET /api/llms/agent-icons.txt", Access: kernel.AccessEither,
		Summary: "Plain-text list of the agent icon names (board, or agents with canCreateAgents)"}
}

func (e *llmsAgentIconsEndpoint) Execute(ctx context.Context, _ *struct{}) (*plainText, error) {
	if err := e.s.mayReadLLMDocs(ctx); err != nil {
		return nil, err
	}
	var b strings.Builder
	b.WriteString("# Agent icons\n\n")
	b.WriteString("Set an agent's icon (POST /api/companies/{companyId}/agents or PATCH /api/agents/{agentId})\n")
	b.WriteString("to one of these names; any other value of up to 200 characters (an emoji, say) is kept as text.\n\n")
	for _, n := range AgentIcons {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	out := plainText(b.String())
	return &out, nil
}
