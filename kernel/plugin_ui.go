package kernel

import (
	"context"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/keelhq/keel/sdk"
)

// UIContribution is what one enabled plugin adds to the UI.
type UIContribution struct {
	PluginID    string    `json:"pluginId"`
	PluginKey   string    `json:"pluginKey"`
	DisplayName string    `json:"displayName"`
	Version     string    `json:"version"`
	UpdatedAt   time.Time `json:"updatedAt"`
	// UIBaseURL is where the plugin's ui/ files are served; slot entries are relative to it.
	UIBaseURL string           `json:"uiBaseUrl"`
	Slots     []sdk.UISlot     `json:"slots"`
	Launchers []sdk.UILauncher `json:"launchers"`
}

type uiContributionsEndpoint struct{ k *Kernel }

func (e *uiContributionsEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "GET /api/plugins/ui-contributions", Access: AccessBoard,
		Summary: "UI slots and launchers of enabled plugins (a disabled plugin's are hidden)"}
}

func (e *uiContributionsEndpoint) Execute(ctx context.Context, _ *struct{}) (*[]*UIContribution, error) {
	plugins, err := e.k.pluginsAll(ctx)
	if err != nil {
		return nil, err
	}
	out := []*UIContribution{}
	for _, p := range plugins {
		ui := p.mf.UI
		if !p.enabled() || ui == nil || len(ui.Slots)+len(ui.Launchers) == 0 {
			continue
		}
		name := p.mf.DisplayName
		if name == "" {
			name = p.rec.PluginKey
		}
		c := &UIContribution{PluginID: p.rec.ID, PluginKey: p.rec.PluginKey, DisplayName: name, Version: p.rec.Version,
			UpdatedAt: p.rec.UpdatedAt, UIBaseURL: "/api/plugins/" + p.rec.ID + "/ui/", Slots: ui.Slots, Launchers: ui.Launchers}
		if c.Slots == nil {
			c.Slots = []sdk.UISlot{}
		}
		if c.Launchers == nil {
			c.Launchers = []sdk.UILauncher{}
		}
		out = append(out, c)
	}
	return &out, nil
}

// uiAssetMaxDepth is how many path segments a UI asset may have below ui/.
const uiAssetMaxDepth = 8

type uiAssetRequest struct {
	PluginID string
	Segments []string
}

// Bind collects the file path's segments (f1 … fN), unescaped.
func (r *uiAssetRequest) Bind(c *fiber.Ctx, rc *RequestContext) error {
	r.PluginID = rc.Params["pluginId"]
	for i := 1; i <= uiAssetMaxDepth; i++ {
		seg, ok := rc.Params[fmt.Sprintf("f%d", i)]
		if !ok {
			break
		}
		u, err := url.PathUnescape(seg)
		if err != nil {
			return BadRequest("Invalid UI asset path")
		}
		r.Segments = append(r.Segments, u)
	}
	return nil
}

type uiAsset struct {
	body        []byte
	contentType string
}

// WriteResponse sends the file with its content type.
func (a *uiAsset) WriteResponse(c *fiber.Ctx, status int) error {
	c.Set(fiber.HeaderContentType, a.contentType)
	c.Set(fiber.HeaderCacheControl, "public, max-age=0, must-revalidate")
	c.Set("X-Content-Type-Options", "nosniff")
	return c.Status(status).Send(a.body)
}

type uiAssetEndpoint struct {
	k     *Kernel
	depth int
}

func (e *uiAssetEndpoint) Meta() *EndpointMeta {
	var b strings.Builder
	for i := 1; i <= e.depth; i++ {
		fmt.Fprintf(&b, "/{f%d}", i)
	}
	return &EndpointMeta{Pattern: "GET /api/plugins/{pluginId}/ui" + b.String(), Access: AccessBoard,
		Summary: fmt.Sprintf("A file of an enabled plugin's ui/ directory (%d path segments; no way out of ui/)", e.depth)}
}

// uiAssetRoutes mounts the asset route once per path depth: the route table has no
// catch-all segment.
func (k *Kernel) uiAssetRoutes() []*Route {
	out := make([]*Route, 0, uiAssetMaxDepth)
	for d := 1; d <= uiAssetMaxDepth; d++ {
		out = append(out, Mount[uiAssetRequest, uiAsset](&uiAssetEndpoint{k: k, depth: d}))
	}
	return out
}

func (e *uiAssetEndpoint) Execute(ctx context.Context, req *uiAssetRequest) (*uiAsset, error) {
	p, err := e.k.pluginByID(ctx, req.PluginID)
	if err != nil {
		return nil, err
	}
	notFound := NotFound("UI asset not found")
	if !p.enabled() || p.rec.Path == "" {
		return nil, notFound
	}
	for _, s := range req.Segments {
		if s == "" || s == "." || s == ".." || strings.ContainsAny(s, "/\\\x00") {
			return nil, BadRequest("Invalid UI asset path").WithCode("path_traversal")
		}
	}
	root, err := filepath.EvalSymlinks(filepath.Join(p.rec.Path, "ui"))
	if err != nil {
		return nil, notFound
	}
	real, err := filepath.EvalSymlinks(filepath.Join(append([]string{root}, req.Segments...)...))
	if err != nil {
		return nil, notFound
	}
	if !within(root, real) {
		return nil, BadRequest("Invalid UI asset path").WithCode("path_traversal")
	}
	st, err := os.Stat(real)
	if err != nil || !st.Mode().IsRegular() {
		return nil, notFound
	}
	if st.Size() > 32<<20 {
		return nil, NewAPIError(http.StatusRequestEntityTooLarge, "UI asset is too large")
	}
	b, err := os.ReadFile(real)
	if err != nil {
		return nil, notFound
	}
	ct := mime.TypeByExtension(filepath.Ext(real))
	if ct == "" {
		ct = http.DetectContentType(b)
	}
	return &uiAsset{body: b, contentType: ct}, nil
}

// within reports whether path is root or below it (both cleaned, symlinks resolved).
func within(root, path string) bool {
	rel, err := filepath.Rel(root, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}
