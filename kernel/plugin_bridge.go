package kernel

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/keelhq/keel/sdk"
)

// BridgeResult is what a plugin answered to a data read or an action.
type BridgeResult struct {
	Data json.RawMessage `json:"data"`
}

type bridgeRequest struct {
	PluginID          string          `path:"pluginId" json:"-"`
	Key               string          `json:"key"`
	CompanyID         string          `json:"companyId"`
	Params            json.RawMessage `json:"params"`
	RenderEnvironment json.RawMessage `json:"renderEnvironment"`
}

type bridgeKeyRequest struct {
	PluginID          string          `path:"pluginId" json:"-"`
	Key               string          `path:"key" json:"-"`
	CompanyID         string          `json:"companyId"`
	Params            json.RawMessage `json:"params"`
	RenderEnvironment json.RawMessage `json:"renderEnvironment"`
}

// bridge sends a data read or an action to a plugin. With a company, the caller needs
// access to it; without one, only an instance admin may ask.
func (k *Kernel) bridge(ctx context.Context, method string, req *bridgeRequest) (*BridgeResult, error) {
	var details []ValidationDetail
	if strings.TrimSpace(req.Key) == "" {
		details = append(details, ValidationDetail{Path: "key", Message: "is required"})
	}
	if req.CompanyID != "" && !isUUID(req.CompanyID) {
		details = append(details, ValidationDetail{Path: "companyId", Message: "must be a UUID"})
	}
	if len(details) > 0 {
		return nil, ValidationError(details...)
	}
	actor := ActorFrom(ctx)
	if req.CompanyID != "" {
		if err := k.AuthorizeCompany(ctx, actor, req.CompanyID, ""); err != nil {
			return nil, err
		}
		// An action may change the company's data: a viewer reads only.
		if method == sdk.ActionMethod && !actor.CanWriteCompany(req.CompanyID) {
			return nil, ReadOnlyMember()
		}
	} else if !actor.IsBoard() || !(actor.IsInstanceAdmin || actor.IsLocalImplicit()) {
		return nil, Forbidden("A companyId is required unless the caller is an instance admin")
	}
	p, err := k.pluginByID(ctx, req.PluginID)
	if err != nil {
		return nil, err
	}
	if !p.ready() {
		return nil, p.unavailable()
	}
	folders, err := k.localFolderPaths(ctx, p, req.CompanyID)
	if err != nil {
		return nil, err
	}
	in := &sdk.DataRequest{Key: req.Key, CompanyID: req.CompanyID, Params: req.Params, RenderEnvironment: req.RenderEnvironment, LocalFolders: folders}
	var out json.RawMessage
	if err := k.pluginCall(ctx, p, method, req.CompanyID, in, &out); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		out = json.RawMessage("null")
	}
	return &BridgeResult{Data: out}, nil
}

type bridgeDataEndpoint struct{ k *Kernel }

func (e *bridgeDataEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "POST /api/plugins/{pluginId}/bridge/data", Access: AccessBoard,
		Summary: "Read a plugin's UI data by key (body key, companyId, params)"}
}

func (e *bridgeDataEndpoint) Execute(ctx context.Context, req *bridgeRequest) (*BridgeResult, error) {
	return e.k.bridge(ctx, sdk.DataMethod, req)
}

type bridgeActionEndpoint struct{ k *Kernel }

func (e *bridgeActionEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "POST /api/plugins/{pluginId}/bridge/action", Access: AccessEither,
		Summary: "Perform a plugin action by key as the caller (body key, companyId, params)"}
}

func (e *bridgeActionEndpoint) Execute(ctx context.Context, req *bridgeRequest) (*BridgeResult, error) {
	return e.k.bridge(ctx, sdk.ActionMethod, req)
}

type dataByKeyEndpoint struct{ k *Kernel }

func (e *dataByKeyEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "POST /api/plugins/{pluginId}/data/{key}", Access: AccessBoard,
		Summary: "Read a plugin's UI data by the key in the path (body companyId, params)"}
}

func (e *dataByKeyEndpoint) Execute(ctx context.Context, req *bridgeKeyRequest) (*BridgeResult, error) {
	return e.k.bridge(ctx, sdk.DataMethod, &bridgeRequest{PluginID: req.PluginID, Key: req.Key, CompanyID: req.CompanyID, Params: req.Params, RenderEnvironment: req.RenderEnvironment})
}

type actionByKeyEndpoint struct{ k *Kernel }

func (e *actionByKeyEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "POST /api/plugins/{pluginId}/actions/{key}", Access: AccessEither,
		Summary: "Perform a plugin action by the key in the path, as the caller (body companyId, params)"}
}

func (e *actionByKeyEndpoint) Execute(ctx context.Context, req *bridgeKeyRequest) (*BridgeResult, error) {
	return e.k.bridge(ctx, sdk.ActionMethod, &bridgeRequest{PluginID: req.PluginID, Key: req.Key, CompanyID: req.CompanyID, Params: req.Params, RenderEnvironment: req.RenderEnvironment})
}

type streamRequest struct {
	PluginID  string `path:"pluginId"`
	Channel   string `path:"channel"`
	CompanyID string `query:"companyId"`
}

// streamKeepAlive is how often an idle stream sends a comment, which also notices a client
// that went away.
const streamKeepAlive = 10 * time.Second

type streamResponse struct {
	messages <-chan json.RawMessage
	cancel   func()
}

// WriteResponse streams server-sent events until the client goes away.
func (s *streamResponse) WriteResponse(c *fiber.Ctx, status int) error {
	c.Set(fiber.HeaderContentType, "text/event-stream")
	c.Set(fiber.HeaderCacheControl, "no-cache")
	c.Set(fiber.HeaderConnection, "keep-alive")
	c.Set("X-Accel-Buffering", "no")
	c.Status(status)
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		defer s.cancel()
		if _, err := w.WriteString(":ok\n\n"); err != nil || w.Flush() != nil {
			return
		}
		tick := time.NewTicker(streamKeepAlive)
		defer tick.Stop()
		for {
			select {
			case msg, ok := <-s.messages:
				if !ok {
					return
				}
				if _, err := fmt.Fprintf(w, "data: %s\n\n", msg); err != nil {
					return
				}
			case <-tick.C:
				if _, err := w.WriteString(":keepalive\n\n"); err != nil {
					return
				}
			}
			if err := w.Flush(); err != nil {
				return
			}
		}
	})
	return nil
}

type bridgeStreamEndpoint struct{ k *Kernel }

func (e *bridgeStreamEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "GET /api/plugins/{pluginId}/bridge/stream/{channel}", Access: AccessEither,
		Summary: "Server-sent events a plugin emits on a channel for a company (query companyId required)"}
}

func (e *bridgeStreamEndpoint) Execute(ctx context.Context, req *streamRequest) (*streamResponse, error) {
	if req.CompanyID == "" {
		return nil, ValidationError(ValidationDetail{Path: "companyId", Message: "is required"})
	}
	if !isUUID(req.CompanyID) {
		return nil, ValidationError(ValidationDetail{Path: "companyId", Message: "must be a UUID"})
	}
	if err := e.k.AuthorizeCompany(ctx, ActorFrom(ctx), req.CompanyID, ""); err != nil {
		return nil, err
	}
	p, err := e.k.pluginByID(ctx, req.PluginID)
	if err != nil {
		return nil, err
	}
	if !p.enabled() {
		return nil, p.unavailable()
	}
	rt, err := e.k.runtime()
	if err != nil {
		return nil, err
	}
	// The subscription outlives the request, whose buffers the server reuses.
	msgs, cancel := rt.PluginSubscribe(p.rec.PluginKey, strings.Clone(req.Channel), strings.Clone(req.CompanyID))
	return &streamResponse{messages: msgs, cancel: cancel}, nil
}
