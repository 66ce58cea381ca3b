package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"github.com/keelhq/keel/extensions"
	"github.com/keelhq/keel/host/supervisor"
	"github.com/keelhq/keel/kernel"
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
	if _, _, ok := m.Runtime.ExecutableFor(sdk.Platform(runtime.GOOS, runtime.GOARCH)); m.Runtime.Kind == sdk.RuntimeProcess && !ok {
		if len(m.Runtime.Artifacts) > 0 {
			return nil, fmt.Errorf("extension in %s: no executable for %s among its artifacts", dir, sdk.Platform(runtime.GOOS, runtime.GOARCH))
		}
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
// It also returns why each extension directory that failed to load did, by absolute path.
func dirSources(dirs []string) ([]*supervisor.Source, map[string]error, error) {
	var out []*supervisor.Source
	var errs []error
	failed := map[string]error{}
	load := func(dir string) (*supervisor.Source, error) {
		src, err := LoadSource(dir)
		if err != nil {
			if abs, aerr := filepath.Abs(dir); aerr == nil {
				failed[abs] = err
			}
		}
		return src, err
	}
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, ManifestFile)); err == nil {
			src, err := load(dir)
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
			src, err := load(filepath.Join(dir, n))
			if err != nil {
				errs = append(errs, err)
				continue
			}
			out = append(out, src)
		}
	}
	return out, failed, errors.Join(errs...)
}

// recordFailed gives an extension directory whose manifest failed to load, and which the
// registry does not know yet, a registry row, so that markMissing lists it with status
// error and the reason: /api/plugins then names an extension that never loaded too. The
// row's key is the manifest's key when it can be read, else the directory's name; a key
// loaded from another directory at this start is left alone.
func recordFailed(ctx context.Context, k *kernel.Kernel, sources []*supervisor.Source, failed map[string]error) error {
	loaded := map[string]bool{}
	for _, src := range sources {
		loaded[src.Manifest.Key] = true
	}
	dirs := make([]string, 0, len(failed))
	for dir := range failed {
		dirs = append(dirs, dir)
	}
	sort.Strings(dirs)
	var errs []error
	for _, dir := range dirs {
		raw, _ := os.ReadFile(filepath.Join(dir, ManifestFile))
		var head struct {
			Key     string `json:"key"`
			Version string `json:"version"`
			Kind    string `json:"kind"`
			Runtime struct {
				Kind string `json:"kind"`
			} `json:"runtime"`
		}
		manifest := json.RawMessage(`{}`)
		if json.Unmarshal(raw, &head) == nil {
			manifest = raw
		}
		key := strings.TrimSpace(head.Key)
		if key == "" {
			key = filepath.Base(dir)
		}
		if loaded[key] {
			continue
		}
		rec, err := k.ExtensionGet(ctx, key)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if rec != nil {
			continue // A known row: markMissing records why it did not load.
		}
		if _, err := k.ExtensionUpsert(ctx, &kernel.ExtensionUpsertParams{
			Key: key, Version: head.Version, Kind: head.Kind, Runtime: head.Runtime.Kind, Source: "path", Path: dir, Manifest: manifest,
		}); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// markMissing records every registry row whose extension was not loaded at this start with
// status error and the reason: the manifest in its directory failed to load, or it was
// not found at all. /api/plugins then tells the truth about stale rows.
// Built-in rows are left alone when builtins is false (a start without them).
func markMissing(ctx context.Context, k *kernel.Kernel, sources []*supervisor.Source, failed map[string]error, builtins bool) error {
	loaded := map[string]bool{}
	for _, src := range sources {
		loaded[src.Manifest.Key] = true
	}
	recs, err := k.ExtensionList(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, rec := range recs {
		if loaded[rec.PluginKey] || (rec.Source == "builtin" && !builtins) {
			continue
		}
		reason := failed[rec.Path]
		if reason == nil {
			where := "among the built-in extensions"
			if rec.Source != "builtin" {
				where = "in " + rec.Path + " (check SERVICE_EXTENSIONS_PATH)"
			}
			reason = fmt.Errorf("not found at start: no extension %s %s", rec.PluginKey, where)
		}
		errs = append(errs, k.ExtensionSetStatus(ctx, rec.PluginKey, kernel.ExtensionError, reason))
	}
	return errors.Join(errs...)
}
