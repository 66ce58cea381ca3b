package skills

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"sort"
	"strings"

	"github.com/keelhq/keel/sdk"
)

// catalogFS holds keel's skill catalog: bundled skills (re-imported into every company on
// each list, read-only) and optional ones (installable through an import).
//
//go:embed catalog
var catalogFS embed.FS

// CatalogSkill is one catalog entry.
type CatalogSkill struct {
	Name        string `json:"name"`
	Slug        string `json:"slug"`
	Key         string `json:"key"`
	Description string `json:"description"`
	// Kind is bundled or optional.
	Kind             string   `json:"kind"`
	Category         string   `json:"category"`
	RecommendedRoles []string `json:"recommendedRoles"`
	DefaultInstall   bool     `json:"defaultInstall"`
	TrustLevel       string   `json:"trustLevel"`

	files    map[string][]byte
	markdown string
}

// catalog is the parsed catalog, sorted by slug.
var catalog = loadCatalog()

// loadCatalog parses the embedded catalog; a broken entry is a build error caught by tests.
func loadCatalog() []*CatalogSkill {
	var out []*CatalogSkill
	entries, _ := fs.ReadDir(catalogFS, "catalog")
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		root := "catalog/" + e.Name()
		files := map[string][]byte{}
		_ = fs.WalkDir(catalogFS, root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				b, rerr := catalogFS.ReadFile(p)
				if rerr == nil {
					files[strings.TrimPrefix(p, root+"/")] = b
				}
			}
			return nil
		})
		md, ok := files[SkillFile]
		if !ok {
			continue
		}
		p, err := ParseSkill(string(md))
		if err != nil {
			continue
		}
		c := &CatalogSkill{Name: p.Name, Slug: deriveSlug(p, e.Name()), Description: p.Description, Kind: str(p.Metadata, "kind"),
			Category: str(p.Metadata, "category"), RecommendedRoles: []string{}, files: files, markdown: string(md)}
		if c.Kind != "optional" {
			c.Kind = "bundled"
		}
		c.Key = bundledKeyPrefix + c.Slug
		if roles, ok := p.Metadata["recommendedRoles"].([]any); ok {
			for _, r := range roles {
				if s, ok := r.(string); ok {
					c.RecommendedRoles = append(c.RecommendedRoles, s)
				}
			}
		}
		c.DefaultInstall, _ = p.Metadata["defaultInstall"].(bool)
		c.TrustLevel = trustOf(inventory(files))
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Slug < out[j].Slug })
	return out
}

// catalogSkill finds a catalog entry by slug or name.
func catalogSkill(name string) *CatalogSkill {
	name = strings.TrimSuffix(strings.TrimSpace(name), ".md")
	for _, c := range catalog {
		if c.Slug == name || c.Name == name {
			return c
		}
	}
	return nil
}

func init() {
	addRoutes(
		route{Method: http.MethodGet, Path: "/api/skills/available", Access: sdk.AccessPublic, Response: new(catalogList),
			Summary: "The skill catalog: bundled and optional skills with category, recommended roles and defaultInstall",
			Handle:  (*Skills).handleAvailable},
		route{Method: http.MethodGet, Path: "/api/skills/index", Access: sdk.AccessPublic, Response: new(catalogIndex),
			Summary: "The skill catalog index: each skill's name and the path of its SKILL.md",
			Handle:  (*Skills).handleIndex},
		route{Method: http.MethodGet, Path: "/api/skills/{skillName}", Access: sdk.AccessPublic, Errors: []int{http.StatusNotFound},
			Summary: "A catalog skill's SKILL.md as Markdown (text/markdown)",
			Handle:  (*Skills).handleCatalogSkill},
	)
}

// catalogList is the answer of /api/skills/available.
type catalogList struct {
	Skills []*CatalogSkill `json:"skills"`
}

// catalogIndexEntry is one entry of /api/skills/index.
type catalogIndexEntry struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Path        string `json:"path"`
}

// catalogIndex is the answer of /api/skills/index.
type catalogIndex struct {
	Skills []catalogIndexEntry `json:"skills"`
}

func (x *Skills) handleAvailable(rw http.ResponseWriter, _ *http.Request) {
	sdk.WriteJSON(rw, http.StatusOK, &catalogList{Skills: catalog})
}

func (x *Skills) handleIndex(rw http.ResponseWriter, _ *http.Request) {
	out := &catalogIndex{Skills: []catalogIndexEntry{}}
	for _, c := range catalog {
		out.Skills = append(out.Skills, catalogIndexEntry{Name: c.Slug, Description: c.Description, Path: "/api/skills/" + c.Slug})
	}
	sdk.WriteJSON(rw, http.StatusOK, out)
}

func (x *Skills) handleCatalogSkill(rw http.ResponseWriter, r *http.Request) {
	c := catalogSkill(path.Base(r.PathValue("skillName")))
	if c == nil {
		x.writeErr(rw, sdk.NotFound(msgSkillNotFound))
		return
	}
	rw.Header().Set("Content-Type", "text/markdown; charset=utf-8")
	rw.WriteHeader(http.StatusOK)
	_, _ = rw.Write([]byte(c.markdown))
}
