package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/keelhq/keel/host/packages"
	"github.com/keelhq/keel/kernel"
)

// dirInstaller is the package installer used until the content-addressed one (host/packages)
// is wired in: it installs an unpacked package directory from a local path, run where it
// lies, and refuses registry installs.
type dirInstaller struct{}

// Install implements packages.Installer for local directories.
func (dirInstaller) Install(_ context.Context, req packages.Request) (*packages.Package, error) {
	if !req.IsLocalPath {
		return nil, kernel.BadRequest("This keel installs packages from a local path only (isLocalPath: true)")
	}
	dir := req.PackageName
	if !filepath.IsAbs(dir) {
		return nil, kernel.BadRequest("Local package path must be absolute")
	}
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() {
		return nil, kernel.BadRequest(fmt.Sprintf("Local package path %s is not a directory", dir))
	}
	src, err := LoadSource(dir)
	if err != nil {
		return nil, kernel.BadRequest(err.Error())
	}
	return &packages.Package{Dir: src.Dir, Manifest: src.Manifest, ManifestJSON: src.ManifestJSON, Source: "path",
		PackageName: src.Dir, Version: src.Manifest.Version}, nil
}

// Materialise implements packages.Installer; nothing is stored, so there is nothing to
// materialise.
func (dirInstaller) Materialise(context.Context, string) (*packages.Package, error) {
	return nil, errors.New("packages are not stored by the directory installer")
}

// Remove implements packages.Installer; nothing is stored.
func (dirInstaller) Remove(context.Context, string) error { return nil }

var _ packages.Installer = dirInstaller{}
