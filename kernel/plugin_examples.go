package kernel

import "context"

// Bundled-plugin tags (spec part 2 "Plugin").
const (
	BundledTagExample    = "example"
	BundledTagFirstParty = "first-party"
)

// BundledPlugin is one entry of the bundled catalog: a package that ships with keel and is
// installed through the ordinary local-path install of its LocalPath.
type BundledPlugin struct {
	PackageName  string `json:"packageName"`
	PluginKey    string `json:"pluginKey"`
	DisplayName  string `json:"displayName"`
	Description  string `json:"description"`
	LocalPath    string `json:"localPath"`
	Tag          string `json:"tag"`
	Experimental bool   `json:"experimental"`
}

// BundledCatalog lists the packages that ship with keel. The host implements it by
// scanning the bundled root once.
type BundledCatalog interface {
	// BundledPlugins returns the catalog, first-party before example, then by display name.
	BundledPlugins(ctx context.Context) ([]*BundledPlugin, error)
}

// SetBundledCatalog sets where GET /api/plugins/examples reads from; without one the
// catalog is empty.
func (k *Kernel) SetBundledCatalog(c BundledCatalog) { k.bundled = c }

type pluginExamplesEndpoint struct{ k *Kernel }

func (e *pluginExamplesEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "GET /api/plugins/examples", Access: AccessInstanceAdmin,
		Summary: "List the plugins bundled with keel (examples and first-party), installable by local path"}
}

func (e *pluginExamplesEndpoint) Execute(ctx context.Context, _ *struct{}) (*[]*BundledPlugin, error) {
	list := []*BundledPlugin{}
	if e.k.bundled != nil {
		found, err := e.k.bundled.BundledPlugins(ctx)
		if err != nil {
			return nil, Internal(err)
		}
		list = append(list, found...)
	}
	return &list, nil
}

func (k *Kernel) pluginExampleRoutes() []*Route {
	return []*Route{Mount[struct{}, []*BundledPlugin](&pluginExamplesEndpoint{k})}
}
