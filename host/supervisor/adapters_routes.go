package supervisor

import (
	"context"
	"encoding/json"

	"github.com/gofiber/fiber/v2"

	"github.com/keelhq/keel/kernel"
)

// AdapterRoutes returns the adapter registry's endpoints (spec part 2, "Adapters"): reads
// for board callers, changes for instance admins. The host mounts them beside the kernel's.
func (s *Supervisor) AdapterRoutes() []*kernel.Route {
	return []*kernel.Route{
		kernel.Mount[struct{}, []*AdapterInfo](&adapterListEndpoint{s}),
		kernel.Mount[adapterTypeRequest, AdapterInfo](&adapterGetEndpoint{s}),
		kernel.Mount[AdapterInstallRequest, AdapterInstalled](&adapterInstallEndpoint{s}),
		kernel.Mount[adapterPatchRequest, AdapterInfo](&adapterPatchEndpoint{s}),
		kernel.Mount[adapterOverrideRequest, AdapterOverrideState](&adapterOverrideEndpoint{s}),
		kernel.Mount[adapterTypeRequest, AdapterRemoved](&adapterDeleteEndpoint{s}),
		kernel.Mount[adapterTypeRequest, AdapterReloaded](&adapterReloadEndpoint{s}),
		kernel.Mount[adapterTypeRequest, AdapterReloaded](&adapterReinstallEndpoint{s}),
		kernel.Mount[adapterTypeRequest, AdapterConfigSchema](&adapterSchemaEndpoint{s}),
		kernel.Mount[adapterTypeRequest, javaScript](&adapterUIParserEndpoint{s}),
	}
}

type adapterTypeRequest struct {
	Type string `path:"type"`
}

type adapterListEndpoint struct{ s *Supervisor }

func (e *adapterListEndpoint) Meta() *kernel.EndpointMeta {
	return &kernel.EndpointMeta{Pattern: "GET /api/adapters", Access: kernel.AccessBoard,
		Summary: "Adapter registry: built-in and installed adapter types with source, version, override and paused state, and models"}
}

func (e *adapterListEndpoint) Execute(ctx context.Context, _ *struct{}) (*[]*AdapterInfo, error) {
	list, err := e.s.AdapterList(ctx)
	if err != nil {
		return nil, err
	}
	return &list, nil
}

type adapterGetEndpoint struct{ s *Supervisor }

func (e *adapterGetEndpoint) Meta() *kernel.EndpointMeta {
	return &kernel.EndpointMeta{Pattern: "GET /api/adapters/{type}", Access: kernel.AccessBoard, Summary: "One adapter type of the registry"}
}

func (e *adapterGetEndpoint) Execute(ctx context.Context, req *adapterTypeRequest) (*AdapterInfo, error) {
	return e.s.AdapterGet(ctx, req.Type)
}

type adapterInstallEndpoint struct{ s *Supervisor }

func (e *adapterInstallEndpoint) Meta() *kernel.EndpointMeta {
	return &kernel.EndpointMeta{Pattern: "POST /api/adapters/install", Status: 201, Access: kernel.AccessInstanceAdmin,
		Summary: "Install an adapter package (npm name or local path) while serving; a built-in type's package becomes its override"}
}

func (e *adapterInstallEndpoint) Execute(ctx context.Context, req *AdapterInstallRequest) (*AdapterInstalled, error) {
	return e.s.AdapterInstall(ctx, req, kernel.ActorFrom(ctx))
}

type adapterPatchRequest struct {
	Type string `path:"type" json:"-"`
	AdapterPatch
}

type adapterPatchEndpoint struct{ s *Supervisor }

func (e *adapterPatchEndpoint) Meta() *kernel.EndpointMeta {
	return &kernel.EndpointMeta{Pattern: "PATCH /api/adapters/{type}", Access: kernel.AccessInstanceAdmin,
		Summary: "Set an adapter type's instance settings: disabled, and config validated against the adapter's config schema"}
}

func (e *adapterPatchEndpoint) Execute(ctx context.Context, req *adapterPatchRequest) (*AdapterInfo, error) {
	return e.s.AdapterConfigure(ctx, req.Type, &req.AdapterPatch, kernel.ActorFrom(ctx))
}

type adapterOverrideRequest struct {
	Type   string          `path:"type" json:"-"`
	Paused json.RawMessage `json:"paused"`
}

type adapterOverrideEndpoint struct{ s *Supervisor }

func (e *adapterOverrideEndpoint) Meta() *kernel.EndpointMeta {
	return &kernel.EndpointMeta{Pattern: "PATCH /api/adapters/{type}/override", Access: kernel.AccessInstanceAdmin,
		Summary: "Pause or resume the override of a built-in adapter type (paused: new runs go to the built-in)"}
}

func (e *adapterOverrideEndpoint) Execute(ctx context.Context, req *adapterOverrideRequest) (*AdapterOverrideState, error) {
	var paused bool
	if len(req.Paused) == 0 || json.Unmarshal(req.Paused, &paused) != nil {
		return nil, kernel.BadRequest(`"paused" (boolean) is required`)
	}
	return e.s.AdapterSetPaused(ctx, req.Type, paused, kernel.ActorFrom(ctx))
}

type adapterDeleteEndpoint struct{ s *Supervisor }

func (e *adapterDeleteEndpoint) Meta() *kernel.EndpointMeta {
	return &kernel.EndpointMeta{Pattern: "DELETE /api/adapters/{type}", Access: kernel.AccessInstanceAdmin,
		Summary: "Remove an installed adapter; removing an override restores the built-in (built-ins cannot be removed)"}
}

func (e *adapterDeleteEndpoint) Execute(ctx context.Context, req *adapterTypeRequest) (*AdapterRemoved, error) {
	return e.s.AdapterDelete(ctx, req.Type, kernel.ActorFrom(ctx))
}

type adapterReloadEndpoint struct{ s *Supervisor }

func (e *adapterReloadEndpoint) Meta() *kernel.EndpointMeta {
	return &kernel.EndpointMeta{Pattern: "POST /api/adapters/{type}/reload", Access: kernel.AccessInstanceAdmin,
		Summary: "Reload an installed adapter in place from its package directory"}
}

func (e *adapterReloadEndpoint) Execute(ctx context.Context, req *adapterTypeRequest) (*AdapterReloaded, error) {
	return e.s.AdapterReload(ctx, req.Type, kernel.ActorFrom(ctx))
}

type adapterReinstallEndpoint struct{ s *Supervisor }

func (e *adapterReinstallEndpoint) Meta() *kernel.EndpointMeta {
	return &kernel.EndpointMeta{Pattern: "POST /api/adapters/{type}/reinstall", Access: kernel.AccessInstanceAdmin,
		Summary: "Run an installed adapter's install flow again and replace it in place"}
}

func (e *adapterReinstallEndpoint) Execute(ctx context.Context, req *adapterTypeRequest) (*AdapterReloaded, error) {
	return e.s.AdapterReinstall(ctx, req.Type, kernel.ActorFrom(ctx))
}

type adapterSchemaEndpoint struct{ s *Supervisor }

func (e *adapterSchemaEndpoint) Meta() *kernel.EndpointMeta {
	return &kernel.EndpointMeta{Pattern: "GET /api/adapters/{type}/config-schema", Access: kernel.AccessBoard,
		Summary: "Config schemas of the adapter serving a type: instance config (manifest) and agent adapterConfig"}
}

func (e *adapterSchemaEndpoint) Execute(ctx context.Context, req *adapterTypeRequest) (*AdapterConfigSchema, error) {
	return e.s.AdapterSchema(ctx, req.Type)
}

// javaScript is a script body served as application/javascript.
type javaScript []byte

// WriteResponse implements kernel.ResponseWriter.
func (j *javaScript) WriteResponse(c *fiber.Ctx, status int) error {
	c.Set(fiber.HeaderContentType, "application/javascript; charset=utf-8")
	c.Set(fiber.HeaderCacheControl, "no-cache")
	return c.Status(status).Send(*j)
}

type adapterUIParserEndpoint struct{ s *Supervisor }

func (e *adapterUIParserEndpoint) Meta() *kernel.EndpointMeta {
	return &kernel.EndpointMeta{Pattern: "GET /api/adapters/{type}/ui-parser.js", Access: kernel.AccessBoard,
		Summary: "The installed adapter's browser-side output parser (ui-parser.js from its package)"}
}

func (e *adapterUIParserEndpoint) Execute(ctx context.Context, req *adapterTypeRequest) (*javaScript, error) {
	b, err := e.s.AdapterUIParser(ctx, req.Type)
	if err != nil {
		return nil, err
	}
	js := javaScript(b)
	return &js, nil
}
