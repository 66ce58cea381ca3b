package kernel

import (
	"context"
	"encoding/json"
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
	out, err := e.k.ExtensionUIList(ctx)
	if err != nil {
		return nil, Internal(err)
	}
	return &out, nil
}

// ExtensionUIList returns the UI contributions of the enabled extensions that have any, in
// install order. It reads only each manifest's ui and displayName (every page of the board
// asks, and the whole manifests are large).
func (k *Kernel) ExtensionUIList(ctx context.Context) ([]*UIContribution, error) {
	rows, err := k.Pool.Query(ctx, `SELECT id::text, key, version, updated_at, COALESCE(manifest->>'displayName', ''), manifest->'ui'
		FROM kernel.extensions WHERE status NOT IN ('uninstalled', 'disabled') AND enabled AND manifest ? 'ui' ORDER BY install_order`)
	if err != nil {
		return nil, fmt.Errorf("error listing UI contributions: %w", err)
	}
	defer rows.Close()
	out := []*UIContribution{}
	for rows.Next() {
		var c UIContribution
		var raw []byte
		if err := rows.Scan(&c.PluginID, &c.PluginKey, &c.Version, &c.UpdatedAt, &c.DisplayName, &raw); err != nil {
			return nil, fmt.Errorf("error listing UI contributions: %w", err)
		}
		var ui sdk.UI
		if json.Unmarshal(raw, &ui) != nil || len(ui.Slots)+len(ui.Launchers) == 0 {
			continue
		}
		if c.DisplayName == "" {
			c.DisplayName = c.PluginKey
		}
		c.UIBaseURL, c.Slots, c.Launchers = "/api/plugins/"+c.PluginID+"/ui/", ui.Slots, ui.Launchers
		if c.Slots == nil {
			c.Slots = []sdk.UISlot{}
		}
		if c.Launchers == nil {
			c.Launchers = []sdk.UILauncher{}
		}
		out = append(out, &c)
	}
	return out, rows.Err()
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
