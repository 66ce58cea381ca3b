package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"

	schemav5 "github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/keelhq/keel/sdk"
)

// ToolDescriptor is one tool of an enabled plugin, as agents see it.
type ToolDescriptor struct {
	// Name is "<pluginKey>:<tool>", the name to execute it by.
	Name             string          `json:"name"`
	DisplayName      string          `json:"displayName"`
	Description      string          `json:"description"`
	ParametersSchema json.RawMessage `json:"parametersSchema"`
	PluginID         string          `json:"pluginId"`
	PluginKey        string          `json:"pluginKey"`
}

type toolListRequest struct {
	PluginID string `query:"pluginId"`
}

type toolListEndpoint struct{ k *Kernel }

func (e *toolListEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "GET /api/plugins/tools", Access: AccessEither,
		Summary: "List the agent tools of enabled plugins (name, description, parameters schema)"}
}

func (e *toolListEndpoint) Execute(ctx context.Context, req *toolListRequest) (*[]*ToolDescriptor, error) {
	plugins, err := e.k.pluginsAll(ctx)
	if err != nil {
		return nil, err
	}
	out := []*ToolDescriptor{}
	for _, p := range plugins {
		if !p.enabled() || (req.PluginID != "" && req.PluginID != p.rec.ID && req.PluginID != p.rec.PluginKey) {
			continue
		}
		for _, t := range p.mf.Tools {
			out = append(out, toolDescriptor(p, &t))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return &out, nil
}

func toolDescriptor(p *installedPlugin, t *sdk.Tool) *ToolDescriptor {
	schema := t.ParametersSchema
	if len(schema) == 0 {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	name := t.DisplayName
	if name == "" {
		name = t.Name
	}
	return &ToolDescriptor{Name: p.rec.PluginKey + ":" + t.Name, DisplayName: name, Description: t.Description,
		ParametersSchema: schema, PluginID: p.rec.ID, PluginKey: p.rec.PluginKey}
}

type toolExecuteRequest struct {
	Tool       string          `json:"tool"`
	Parameters json.RawMessage `json:"parameters"`
	RunContext *sdk.RunContext `json:"runContext"`
}

// ToolExecuteResult is a tool's answer.
type ToolExecuteResult struct {
	PluginID string          `json:"pluginId"`
	ToolName string          `json:"toolName"`
	Result   *sdk.ToolResult `json:"result"`
}

type toolExecuteEndpoint struct{ k *Kernel }

func (e *toolExecuteEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "POST /api/plugins/tools/execute", Access: AccessEither,
		Summary: "Execute a plugin tool by name with validated parameters, as the caller (agents in their own company)"}
}

func (e *toolExecuteEndpoint) Execute(ctx context.Context, req *toolExecuteRequest) (*ToolExecuteResult, error) {
	var details []ValidationDetail
	if strings.TrimSpace(req.Tool) == "" {
		details = append(details, ValidationDetail{Path: "tool", Message: "is required"})
	}
	actor := ActorFrom(ctx)
	rc := sdk.RunContext{}
	if req.RunContext != nil {
		rc = *req.RunContext
	}
	if actor.IsAgent() {
		// An agent acts in its own company, as itself, in its own run.
		if rc.CompanyID == "" {
			rc.CompanyID = actor.CompanyID
		}
		if rc.AgentID == "" {
			rc.AgentID = actor.AgentID
		}
		if rc.RunID == "" {
			rc.RunID = actor.RunID
		}
	}
	if rc.CompanyID == "" {
		details = append(details, ValidationDetail{Path: "runContext.companyId", Message: "is required"})
	}
	for path, v := range map[string]string{"runContext.companyId": rc.CompanyID, "runContext.agentId": rc.AgentID, "runContext.projectId": rc.ProjectID} {
		if v != "" && !isUUID(v) {
			details = append(details, ValidationDetail{Path: path, Message: "must be a UUID"})
		}
	}
	if len(details) > 0 {
		sort.Slice(details, func(i, j int) bool { return details[i].Path < details[j].Path })
		return nil, ValidationError(details...)
	}
	if actor.IsAgent() {
		if rc.CompanyID != actor.CompanyID {
			return nil, Forbidden("Agents can only execute tools in their own company")
		}
		if rc.AgentID != actor.AgentID {
			return nil, Forbidden("Agents can only execute tools as themselves")
		}
		if actor.RunID != "" && rc.RunID != actor.RunID {
			return nil, Forbidden("The run context does not match the calling run")
		}
	}
	if err := e.k.AuthorizeCompany(ctx, actor, rc.CompanyID, ""); err != nil {
		return nil, err
	}
	// A tool may change the company's data: a viewer reads only.
	if !actor.CanWriteCompany(rc.CompanyID) {
		return nil, ReadOnlyMember()
	}
	if rc.AgentID != "" && !actor.IsAgent() {
		a, err := e.k.AgentGetByID(ctx, rc.AgentID)
		if err != nil {
			return nil, Internal(err)
		}
		if a == nil || a.CompanyID != rc.CompanyID {
			return nil, Forbidden("The run context's agent does not belong to its company")
		}
	}
	pluginKey, toolName, ok := strings.Cut(req.Tool, ":")
	if !ok || pluginKey == "" || toolName == "" {
		return nil, NotFound(fmt.Sprintf("Tool %q not found", req.Tool))
	}
	p, err := e.k.pluginByID(ctx, pluginKey)
	var apiErr *APIError
	if errors.As(err, &apiErr) && apiErr.Status == http.StatusNotFound {
		return nil, NotFound(fmt.Sprintf("Tool %q not found", req.Tool))
	}
	if err != nil {
		return nil, err
	}
	tool := p.mf.Tool(toolName)
	if tool == nil || !p.enabled() {
		return nil, NotFound(fmt.Sprintf("Tool %q not found", req.Tool))
	}
	params := req.Parameters
	if len(params) == 0 || string(params) == "null" {
		params = json.RawMessage(`{}`)
	}
	if err := validateAgainst(p.rec.PluginKey+"/tools/"+tool.Name, tool.ParametersSchema, params, "parameters"); err != nil {
		return nil, err
	}
	if !p.ready() {
		return nil, p.unavailable()
	}
	folders, err := e.k.localFolderPaths(ctx, p, rc.CompanyID)
	if err != nil {
		return nil, err
	}
	var res sdk.ToolResult
	in := &sdk.ToolCall{Tool: tool.Name, Parameters: params, RunContext: rc, LocalFolders: folders}
	if err := e.k.pluginCall(ctx, p, sdk.ToolMethod, rc.CompanyID, in, &res); err != nil {
		return nil, err
	}
	return &ToolExecuteResult{PluginID: p.rec.ID, ToolName: req.Tool, Result: &res}, nil
}

// validateAgainst checks a JSON value against a JSON Schema and answers 400 "Validation
// error" with one detail per failed field (paths prefixed with root).
func validateAgainst(id string, schema json.RawMessage, value json.RawMessage, root string) error {
	if len(schema) == 0 {
		return nil
	}
	s, err := sdk.CompileSchema(id, schema)
	if err != nil {
		return Internal(fmt.Errorf("error compiling schema %s: %w", id, err))
	}
	var v any
	if err := json.Unmarshal(value, &v); err != nil {
		return ValidationError(ValidationDetail{Path: root, Message: "must be valid JSON"})
	}
	err = s.Validate(v)
	if err == nil {
		return nil
	}
	var ve *schemav5.ValidationError
	if !errors.As(err, &ve) {
		return ValidationError(ValidationDetail{Path: root, Message: err.Error()})
	}
	var details []ValidationDetail
	var walk func(e *schemav5.ValidationError)
	walk = func(e *schemav5.ValidationError) {
		if len(e.Causes) == 0 {
			path := root
			if loc := strings.Trim(e.InstanceLocation, "/"); loc != "" {
				path += "." + strings.ReplaceAll(loc, "/", ".")
			}
			details = append(details, ValidationDetail{Path: path, Message: e.Message})
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return ValidationError(details...)
}
