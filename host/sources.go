package host

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/keelhq/keel/extensions"
	"github.com/keelhq/keel/host/supervisor"
	"github.com/keelhq/keel/sdk"
)

// ManifestFile is the manifest's file name in an extension directory.
const ManifestFile = "manifest.json"

// builtinSources returns the first-party extensions compiled into this binary.
func builtinSources() ([]*supervisor.Source, error) {
	var out []*supervisor.Source
	for _, key := range extensions.Keys() {
		f, _ := extensions.Lookup(key)
		m := f().Manifest()
		if m.Key != key {
			return nil, fmt.Errorf("first-party extension registered as %s describes itself as %s", key, m.Key)
		}
		b, err := json.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("error encoding manifest of %s: %w", key, err)
		}
		if _, err := sdk.ParseManifest(b); err != nil {
			return nil, fmt.Errorf("first-party extension %s: %w", key, err)
		}
		out = append(out, &supervisor.Source{Manifest: m, ManifestJSON: b, Builtin: true})
	}
	return out, nil
}

// LoadSource reads and strictly validates the manifest of one extension directory.
func LoadSource(dir string) (*supervisor.Source, error) {
	b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return nil, fmt.Errorf("error reading manifest in %s: %w", dir, err)
	}
	m, err := sdk.ParseManifest(b)
	if err != nil {
		return nil, fmt.Errorf("extension in %s: %w", dir, err)
	}
	if m.Runtime.Kind == sdk.RuntimeProcess && m.Runtime.Executable == "" {
		return nil, fmt.Errorf("extension in %s: a process runtime needs an executable", dir)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("error resolving %s: %w", dir, err)
	}
	return &supervisor.Source{Manifest: m, ManifestJSON: b, Dir: abs}, nil
}

// dirSources finds extensions in the given directories: each is an extension directory
// (it holds manifest.json) or a directory of extension directories.
func dirSources(dirs []string) ([]*supervisor.Source, error) {
	var out []*supervisor.Source
	var errs []error
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, ManifestFile)); err == nil {
			src, err := LoadSource(dir)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			out = append(out, src)
			continue
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			errs = append(errs, fmt.Errorf("error reading extension directory %s: %w", dir, err))
			continue
		}
		names := []string{}
		for _, e := range entries {
			if e.IsDir() {
				if _, err := os.Stat(filepath.Join(dir, e.Name(), ManifestFile)); err == nil {
					names = append(names, e.Name())
				}
			}
		}
		sort.Strings(names)
		for _, n := range names {
			src, err := LoadSource(filepath.Join(dir, n))
			if err != nil {
				errs = append(errs, err)
				continue
			}
			out = append(out, src)
		}
	}
	return out, errors.Join(errs...)
}
