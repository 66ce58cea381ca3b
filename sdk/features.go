package sdk

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"

	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

// Reserved Call methods with which the host reaches a plugin's declared features. Only the
// host sends them (caller "host"); no manifest can provide them, so other extensions cannot
// call them. The SDK answers them from the interfaces below (or a Features registry).
const (
	// ToolMethod executes a declared tool: input ToolCall, output ToolResult.
	ToolMethod = "keel.tool.execute"
	// WebhookMethod delivers an inbound webhook: input WebhookDelivery, output any JSON.
	WebhookMethod = "keel.webhook"
	// DataMethod answers a UI data key: input DataRequest, output any JSON.
	DataMethod = "keel.data"
	// ActionMethod performs a UI action by key: input DataRequest, output any JSON.
	ActionMethod = "keel.action"
	// LocalFolderMethod tells the extension that a company set one of its local folders:
	// input LocalFolderPath, no output.
	LocalFolderMethod = "keel.localfolder"
)

// featureCaller is the caller the host sends reserved feature methods as.
const featureCaller = "host"

// IsReservedMethod reports whether a Call method is one the host reserves for itself.
func IsReservedMethod(method string) bool { return strings.HasPrefix(method, "keel.") }

// RunContext says on whose behalf a tool runs: the company always, the agent and run when
// an agent calls it from a run, the project when the caller names one.
type RunContext struct {
	CompanyID string `json:"companyId"`
	AgentID   string `json:"agentId,omitempty"`
	RunID     string `json:"runId,omitempty"`
	ProjectID string `json:"projectId,omitempty"`
}

// WasmFolderPath is where a wasm module finds a company's local folder: its only
// filesystem is these mounts, one per company and declared folder (read-only for a read
// folder), and LocalFolderPath.Path says this path to a wasm module.
func WasmFolderPath(companyID, folderKey string) string {
	return "/local-folders/" + companyID + "/" + folderKey
}

// LocalFolderPath is a company's configured path of a declared local folder (for a wasm
// module, its mount point; see WasmFolderPath).
type LocalFolderPath struct {
	CompanyID string `json:"companyId"`
	FolderKey string `json:"folderKey"`
	Path      string `json:"path"`
	Access    string `json:"access"`
	Healthy   bool   `json:"healthy"`
}

// ToolCall is one execution of a declared tool. Parameters were validated against the
// tool's parameters schema by the host.
type ToolCall struct {
	Tool       string          `json:"tool"`
	Parameters json.RawMessage `json:"parameters"`
	RunContext RunContext      `json:"runContext"`
	// LocalFolders are the company's configured folders, by folder key.
	LocalFolders map[string]LocalFolderPath `json:"localFolders,omitempty"`
	// Actor is the caller, resolved by the kernel.
	Actor *Actor `json:"-"`
}

// Bind decodes the parameters into v.
func (c *ToolCall) Bind(v any) error {
	if len(c.Parameters) == 0 {
		return nil
	}
	if err := json.Unmarshal(c.Parameters, v); err != nil {
		return &Error{Status: http.StatusBadRequest, Message: fmt.Sprintf("invalid parameters for %s: %v", c.Tool, err)}
	}
	return nil
}

// ToolResult is what a tool returns: text for the agent, optional data, or an error the
// tool reports without failing the call.
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
	// RawBody is the request body byte for byte (check signatures against it).
	RawBody   []byte `json:"rawBody"`
	RequestID string `json:"requestId,omitempty"`
}

// DataRequest is one UI data read or action by key.
type DataRequest struct {
	Key               string          `json:"key"`
	CompanyID         string          `json:"companyId,omitempty"`
	Params            json.RawMessage `json:"params,omitempty"`
	RenderEnvironment json.RawMessage `json:"renderEnvironment,omitempty"`
	// LocalFolders are the company's configured folders, by folder key.
	LocalFolders map[string]LocalFolderPath `json:"localFolders,omitempty"`
	// Actor is the caller, resolved by the kernel.
	Actor *Actor `json:"-"`
}

// Bind decodes the params into v.
func (r *DataRequest) Bind(v any) error {
	if len(r.Params) == 0 {
		return nil
	}
	if err := json.Unmarshal(r.Params, v); err != nil {
		return &Error{Status: http.StatusBadRequest, Message: fmt.Sprintf("invalid params for %s: %v", r.Key, err)}
	}
	return nil
}

// ToolExecutor is implemented by extensions that declare tools.
type ToolExecutor interface {
	// ExecuteTool runs one declared tool. Returning an *Error sends its status.
	ExecuteTool(ctx context.Context, call *ToolCall) (*ToolResult, error)
}

// WebhookHandler is implemented by extensions that declare webhook endpoints.
type WebhookHandler interface {
	// HandleWebhook handles one delivery; an error marks the delivery failed (502 to the sender).
	HandleWebhook(ctx context.Context, d *WebhookDelivery) (any, error)
}

// DataProvider is implemented by extensions that feed their UI with data by key.
type DataProvider interface {
	// GetData answers a data key; an unknown key should be an *Error with status 404.
	GetData(ctx context.Context, req *DataRequest) (any, error)
}

// ActionPerformer is implemented by extensions whose UI performs actions by key.
type ActionPerformer interface {
	// PerformAction performs an action; an unknown key should be an *Error with status 404.
	PerformAction(ctx context.Context, req *DataRequest) (any, error)
}

// LocalFolderListener is implemented by extensions that want to know at once when a
// company sets one of their local folders (every tool call, data read and action also
// carries the company's folders).
type LocalFolderListener interface {
	LocalFolderChanged(ctx context.Context, f *LocalFolderPath) error
}

// Features is a registry of tool, webhook, data and action handlers by name; embed it in
// an extension to implement ToolExecutor, WebhookHandler, DataProvider and ActionPerformer:
//
//	f := &sdk.Features{}
//	f.Tool("echo", func(ctx context.Context, c *sdk.ToolCall) (*sdk.ToolResult, error) { … })
//	f.Webhook("github", func(ctx context.Context, d *sdk.WebhookDelivery) (any, error) { … })
type Features struct {
	mu       sync.RWMutex
	tools    map[string]func(context.Context, *ToolCall) (*ToolResult, error)
	webhooks map[string]func(context.Context, *WebhookDelivery) (any, error)
	data     map[string]func(context.Context, *DataRequest) (any, error)
	actions  map[string]func(context.Context, *DataRequest) (any, error)
}

// Tool registers the handler of a declared tool.
func (f *Features) Tool(name string, fn func(context.Context, *ToolCall) (*ToolResult, error)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.tools == nil {
		f.tools = map[string]func(context.Context, *ToolCall) (*ToolResult, error){}
	}
	f.tools[name] = fn
}

// Webhook registers the handler of a declared webhook endpoint.
func (f *Features) Webhook(endpointKey string, fn func(context.Context, *WebhookDelivery) (any, error)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.webhooks == nil {
		f.webhooks = map[string]func(context.Context, *WebhookDelivery) (any, error){}
	}
	f.webhooks[endpointKey] = fn
}

// Data registers the handler of a UI data key.
func (f *Features) Data(key string, fn func(context.Context, *DataRequest) (any, error)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.data == nil {
		f.data = map[string]func(context.Context, *DataRequest) (any, error){}
	}
	f.data[key] = fn
}

// Action registers the handler of a UI action key.
func (f *Features) Action(key string, fn func(context.Context, *DataRequest) (any, error)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.actions == nil {
		f.actions = map[string]func(context.Context, *DataRequest) (any, error){}
	}
	f.actions[key] = fn
}

func notRegistered(kind, key string) error {
	return &Error{Status: http.StatusNotFound, Message: fmt.Sprintf("%s %q is not handled by this plugin", kind, key), Code: "not_registered"}
}

// ExecuteTool implements ToolExecutor.
func (f *Features) ExecuteTool(ctx context.Context, call *ToolCall) (*ToolResult, error) {
	f.mu.RLock()
	fn := f.tools[call.Tool]
	f.mu.RUnlock()
	if fn == nil {
		return nil, notRegistered("Tool", call.Tool)
	}
	return fn(ctx, call)
}

// HandleWebhook implements WebhookHandler.
func (f *Features) HandleWebhook(ctx context.Context, d *WebhookDelivery) (any, error) {
	f.mu.RLock()
	fn := f.webhooks[d.EndpointKey]
	f.mu.RUnlock()
	if fn == nil {
		return nil, notRegistered("Webhook endpoint", d.EndpointKey)
	}
	return fn(ctx, d)
}

// GetData implements DataProvider.
func (f *Features) GetData(ctx context.Context, req *DataRequest) (any, error) {
	f.mu.RLock()
	fn := f.data[req.Key]
	f.mu.RUnlock()
	if fn == nil {
		return nil, notRegistered("Data key", req.Key)
	}
	return fn(ctx, req)
}

// PerformAction implements ActionPerformer.
func (f *Features) PerformAction(ctx context.Context, req *DataRequest) (any, error) {
	f.mu.RLock()
	fn := f.actions[req.Key]
	f.mu.RUnlock()
	if fn == nil {
		return nil, notRegistered("Action", req.Key)
	}
	return fn(ctx, req)
}

// callFeature answers a reserved feature method (handled reports whether method was one).
func callFeature(ctx context.Context, ext Extension, method string, actor *Actor, input []byte) (out any, handled bool, err error) {
	unsupported := func(what string) error {
		return &Error{Status: http.StatusNotImplemented, Message: fmt.Sprintf("%s does not %s", ext.Manifest().Key, what), Code: "not_implemented"}
	}
	decode := func(v any) error {
		if err := json.Unmarshal(input, v); err != nil {
			return &Error{Status: http.StatusBadRequest, Message: fmt.Sprintf("invalid input for %s: %v", method, err)}
		}
		return nil
	}
	switch method {
	case ToolMethod:
		te, ok := ext.(ToolExecutor)
		if !ok {
			return nil, true, unsupported("execute tools")
		}
		var c ToolCall
		if err := decode(&c); err != nil {
			return nil, true, err
		}
		c.Actor = actor
		res, err := te.ExecuteTool(ctx, &c)
		if err != nil {
			return nil, true, err
		}
		if res == nil {
			res = &ToolResult{}
		}
		return res, true, nil
	case WebhookMethod:
		wh, ok := ext.(WebhookHandler)
		if !ok {
			return nil, true, unsupported("handle webhooks")
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
		r.Actor = actor
		if method == DataMethod {
			dp, ok := ext.(DataProvider)
			if !ok {
				return nil, true, unsupported("provide data")
			}
			out, err := dp.GetData(ctx, &r)
			return out, true, err
		}
		ap, ok := ext.(ActionPerformer)
		if !ok {
			return nil, true, unsupported("perform actions")
		}
		out, err := ap.PerformAction(ctx, &r)
		return out, true, err
	case LocalFolderMethod:
		var f LocalFolderPath
		if err := decode(&f); err != nil {
			return nil, true, err
		}
		if l, ok := ext.(LocalFolderListener); ok {
			return nil, true, l.LocalFolderChanged(ctx, &f)
		}
		return nil, true, nil
	}
	return nil, false, nil
}

// StreamEventPrefix starts the type of an event that goes to the UI stream channel named by
// the rest of the type instead of to subscribers (see EmitStream).
const StreamEventPrefix = "plugin.stream."

// EmitStream sends one message to the UI clients listening on a bridge stream channel of
// a company (GET /api/plugins/{pluginId}/bridge/stream/{channel}?companyId=…). It needs
// the events capability. Messages are not stored: a client that is not listening misses them.
func (h *Host) EmitStream(ctx context.Context, channel, companyID string, data any) error {
	b, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("error encoding stream message for %s: %w", channel, err)
	}
	if _, err := h.Events.Publish(ctx, &hostv1.PublishRequest{Type: StreamEventPrefix + channel, CompanyId: companyID, PayloadJson: b}); err != nil {
		return fmt.Errorf("error emitting to stream %s: %w", channel, err)
	}
	return nil
}
