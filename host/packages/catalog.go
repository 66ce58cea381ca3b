package packages

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/keelhq/keel/kernel"
	"github.com/keelhq/keel/sdk"
)

// catalogFolders are the folders of the bundled root that hold packages, with their tags.
var catalogFolders = []struct{ dir, tag string }{
	{"plugins", kernel.BundledTagFirstParty},
	{"examples", kernel.BundledTagExample},
}

// Catalog lists the plugin packages that ship with keel: each directory holding a
// manifest.json of kind plugin in the bundled root's plugins/ (first-party) or examples/
// (example), one or two levels down. The scan runs once and is cached.
type Catalog struct {
	root string
	once sync.Once
	list []*kernel.BundledPlugin
}

// NewCatalog returns the catalog of a bundled root ("" is an empty catalog).
func NewCatalog(root string) *Catalog { return &Catalog{root: root} }

// Root is the bundled root the catalog scans.
func (c *Catalog) Root() string { return c.root }

// BundledPlugins implements kernel.BundledCatalog.
func (c *Catalog) BundledPlugins(context.Context) ([]*kernel.BundledPlugin, error) {
	c.once.Do(func() { c.list = scanCatalog(c.root) })
	out := make([]*kernel.BundledPlugin, len(c.list))
	for i, e := range c.list {
		cp := *e
		out[i] = &cp
	}
	return out, nil
}

func scanCatalog(root string) []*kernel.BundledPlugin {
	list := []*kernel.BundledPlugin{}
	if root == "" {
		return list
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return list
	}
	for _, folder := range catalogFolders {
		base := filepath.Join(realRoot, folder.dir)
		for _, dir := range packageDirs(base, 2) {
			if e := catalogEntry(realRoot, dir, folder.tag); e != nil {
				list = append(list, e)
			}
		}
	}
	sort.SliceStable(list, func(i, j int) bool {
		if list[i].Tag != list[j].Tag {
			return list[i].Tag == kernel.BundledTagFirstParty
		}
		return list[i].DisplayName < list[j].DisplayName
	})
	return list
}

// packageDirs returns the directories under base, up to depth levels down, that hold a
// manifest.json (a package directory is not searched further). Hidden directories,
// node_modules and dist are skipped.
func packageDirs(base string, depth int) []string {
	entries, err := os.ReadDir(base)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || strings.HasPrefix(name, ".") || name == "node_modules" || name == "dist" {
			continue
		}
		dir := filepath.Join(base, name)
		if _, err := os.Stat(filepath.Join(dir, manifestFile)); err == nil {
			out = append(out, dir)
			continue
		}
		if depth > 1 {
			out = append(out, packageDirs(dir, depth-1)...)
		}
	}
	return out
}

func catalogEntry(root, dir, tag string) *kernel.BundledPlugin {
	b, err := os.ReadFile(filepath.Join(dir, manifestFile))
	if err != nil {
		return nil
	}
	m, err := sdk.ParseManifest(b)
	if err != nil || m.Kind != sdk.KindPlugin {
		return nil
	}
	rel, _ := filepath.Rel(root, dir)
	e := &kernel.BundledPlugin{
		PackageName: m.Key, PluginKey: m.Key, DisplayName: m.DisplayName, Description: m.Description,
		LocalPath: dir, Tag: tag, Experimental: m.Flag != "",
	}
	var pj struct {
		Name string `json:"name"`
	}
	if b, err := os.ReadFile(filepath.Join(dir, "package.json")); err == nil && json.Unmarshal(b, &pj) == nil && pj.Name != "" {
		e.PackageName = pj.Name
	}
	if e.DisplayName == "" {
		e.DisplayName = titleCase(filepath.Base(dir))
	}
	if e.Description == "" {
		e.Description = "Bundled " + tag + " plugin from " + filepath.ToSlash(rel) + "."
	}
	return e
}

func titleCase(s string) string {
	words := strings.FieldsFunc(s, func(r rune) bool { return r == '-' || r == '_' || r == '.' })
	for i, w := range words {
		words[i] = strings.ToUpper(w[:1]) + w[1:]
	}
	return strings.Join(words, " ")
}

// FindBundledRoot returns the default bundled root: the first directory, walking up from
// the executable's directory and then from the working directory, that has an examples/ or
// plugins/ folder holding a package. It returns "" when there is none.
func FindBundledRoot() string {
	var starts []string
	if exe, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			starts = append(starts, filepath.Dir(real))
		}
	}
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	for _, start := range starts {
		for dir := start; ; dir = filepath.Dir(dir) {
			for _, folder := range catalogFolders {
				if len(packageDirs(filepath.Join(dir, folder.dir), 2)) > 0 {
					return dir
				}
			}
			if parent := filepath.Dir(dir); parent == dir {
				break
			}
		}
	}
	return ""
}

var _ kernel.BundledCatalog = (*Catalog)(nil)
