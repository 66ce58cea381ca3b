package wasmguest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// Reserved Call methods with which the host reaches a module's declared features (the
// same names and JSON as sdk.ToolMethod and its siblings for process extensions). Only the
// host sends them (caller "host"); a manifest cannot provide them.
const (
	ToolMethod        = "keel.tool.execute"
	WebhookMethod     = "keel.webhook"
	DataMethod        = "keel.data"
	ActionMethod      = "keel.action"
	LocalFolderMethod = "keel.localfolder"
)

// RunContext says on whose behalf a tool runs.
type RunContext struct {
	CompanyID string `json:"companyId"`
	AgentID   string `json:"agentId,omitempty"`
	RunID     string `json:"runId,omitempty"`
	ProjectID string `json:"projectId,omitempty"`
}

// LocalFolderPath is a company's configured path of a declared local folder. A wasm
// module cannot open it yet: folder mounts for wasm modules are not built.
type LocalFolderPath struct {
	CompanyID string `json:"companyId"`
	FolderKey string `json:"folderKey"`
	Path      string `json:"path"`
	Access    string `json:"access"`
	Healthy   bool   `json:"healthy"`
}

// ToolCall is one execution of a declared tool; the host validated the parameters.
type ToolCall struct {
	Tool         string                     `json:"tool"`
	Parameters   json.RawMessage            `json:"parameters"`
	RunContext   RunContext                 `json:"runContext"`
	LocalFolders map[string]LocalFolderPath `json:"localFolders,omitempty"`
	Actor        *Actor                     `json:"-"`
}

// Bind decodes the parameters into v; malformed parameters are a 400 *Error.
func (c *ToolCall) Bind(v any) error {
	if len(c.Parameters) == 0 {
		return nil
	}
	if err := json.Unmarshal(c.Parameters, v); err != nil {
		return &Error{Status: http.StatusBadRequest, Message: fmt.Sprintf("invalid parameters for %s: %v", c.Tool, err)}
	}
	return nil
}

// ToolResult is what a tool returns.
type ToolResult struct {
	Content string `json:"content,omitempty"`
	Data    any    `json:"data,omitempty"`
	Error   string `json:"error,omitempty"`
}

// WebhookDelivery is one inbound webhook request, exactly as received.
type WebhookDelivery struct {
	DeliveryID  string              `json:"deliveryId"`
	EndpointKey string              `json:"endpointKey"`
	Headers     map[string][]string `json:"headers"`
	RawBody     []byte              `json:"rawBody"`
	RequestID   string              `json:"requestId,omitempty"`
}

// DataRequest is one UI data read or action by key.
type DataRequest struct {
	Key               string                     `json:"key"`
	CompanyID         string                     `json:"companyId,omitempty"`
	Params            json.RawMessage            `json:"params,omitempty"`
	RenderEnvironment json.RawMessage            `json:"renderEnvironment,omitempty"`
	LocalFolders      map[string]LocalFolderPath `json:"localFolders,omitempty"`
	Actor             *Actor                     `json:"-"`
}

// ToolExecutor is implemented by modules that declare tools.
type ToolExecutor interface {
	ExecuteTool(ctx context.Context, call *ToolCall) (*ToolResult, error)
}

// WebhookHandler is implemented by modules that declare webhook endpoints.
type WebhookHandler interface {
	HandleWebhook(ctx context.Context, d *WebhookDelivery) (any, error)
}

// DataProvider is implemented by modules that feed their UI with data by key.
type DataProvider interface {
	GetData(ctx context.Context, req *DataRequest) (any, error)
}

// ActionPerformer is implemented by modules whose UI performs actions by key.
type ActionPerformer interface {
	PerformAction(ctx context.Context, req *DataRequest) (any, error)
}

// callFeature answers a reserved feature method from the host (handled reports whether it
// was one).
func callFeature(ctx context.Context, ext Extension, c *MethodCall) (out any, handled bool, err error) {
	if c.Caller != "host" || !strings.HasPrefix(c.Method, "keel.") {
		return nil, false, nil
	}
	unsupported := &Error{Status: http.StatusNotImplemented, Message: "the module does not implement " + c.Method, Code: "not_implemented"}
	decode := func(v any) error {
		if err := json.Unmarshal(c.Input, v); err != nil {
			return &Error{Status: http.StatusBadRequest, Message: fmt.Sprintf("invalid input for %s: %v", c.Method, err)}
		}
		return nil
	}
	switch c.Method {
	case ToolMethod:
		te, ok := ext.(ToolExecutor)
		if !ok {
			return nil, true, unsupported
		}
		var tc ToolCall
		if err := decode(&tc); err != nil {
			return nil, true, err
		}
		tc.Actor = c.Actor
		res, err := te.ExecuteTool(ctx, &tc)
		if err == nil && res == nil {
			res = &ToolResult{}
		}
		return res, true, err
	case WebhookMethod:
		wh, ok := ext.(WebhookHandler)
		if !ok {
			return nil, true, unsupported
		}
		var d WebhookDelivery
		if err := decode(&d); err != nil {
			return nil, true, err
		}
		out, err := wh.HandleWebhook(ctx, &d)
		return out, true, err
	case DataMethod, ActionMethod:
		var r DataRequest
		if err := decode(&r); err != nil {
			return nil, true, err
		}
		r.Actor = c.Actor
		if c.Method == DataMethod {
			if dp, ok := ext.(DataProvider); ok {
				out, err := dp.GetData(ctx, &r)
				return out, true, err
			}
			return nil, true, unsupported
		}
		if ap, ok := ext.(ActionPerformer); ok {
			out, err := ap.PerformAction(ctx, &r)
			return out, true, err
		}
		return nil, true, unsupported
	case LocalFolderMethod:
		return nil, true, nil
	}
	return nil, false, nil
}
