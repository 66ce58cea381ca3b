package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/keelhq/keel/host/packages"
	"github.com/keelhq/keel/kernel"
)

// DirInstaller is the stand-in packages.Installer a host uses until the package store
// (host/packages: archives, npm registries, storage in PostgreSQL) is wired in. It installs
// local directories only (install rule 2 with its error texts), copies each into
// <root>/<digest>, content-addressed by a sha256 over its files, and materialises from
// there. Hosts that share root (tests of two nodes) share packages.
type DirInstaller struct {
	root string
}

// NewDirInstaller returns a DirInstaller keeping packages under root.
func NewDirInstaller(root string) *DirInstaller { return &DirInstaller{root: root} }

func invalidLocalPath(reason string) error {
	return kernel.BadRequest("Invalid localPath: " + reason)
}

// canonicalDir resolves a local path as install rule 2 says: absolute, `..` collapsed,
// symlinks followed, an existing readable directory.
func canonicalDir(path string) (string, error) {
	if strings.ContainsRune(path, 0) {
		return "", invalidLocalPath("path contains a null byte")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", invalidLocalPath("path does not exist: " + path)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", invalidLocalPath("path does not exist: " + abs)
	}
	st, err := os.Stat(real)
	if err != nil {
		return "", invalidLocalPath("path does not exist: " + abs)
	}
	if !st.IsDir() {
		return "", invalidLocalPath("path is not a directory: " + real)
	}
	f, err := os.Open(real)
	if err != nil {
		return "", invalidLocalPath("path is not readable: " + real)
	}
	defer f.Close()
	if _, err := f.Readdirnames(1); err != nil && err != io.EOF {
		return "", invalidLocalPath("path is not readable: " + real)
	}
	return real, nil
}

// Install implements packages.Installer for local directories.
func (d *DirInstaller) Install(ctx context.Context, req packages.Request) (*packages.Package, error) {
	if !req.IsLocalPath {
		return nil, kernel.NewAPIError(http.StatusNotImplemented, "npm installs are not available on this host; install from a local path (isLocalPath true)").WithCode("npm_unavailable")
	}
	dir, err := canonicalDir(req.PackageName)
	if err != nil {
		return nil, err
	}
	if _, err := LoadSource(dir); err != nil {
		return nil, kernel.BadRequest(fmt.Sprintf("%s is not a keel package: %v", dir, err)).WithCode("invalid_package")
	}
	digest, err := dirDigest(dir)
	if err != nil {
		return nil, err
	}
	dst := filepath.Join(d.root, digest)
	if _, err := os.Stat(filepath.Join(dst, ManifestFile)); err != nil {
		if err := copyDir(dir, dst); err != nil {
			return nil, err
		}
	}
	pkg, err := d.Materialise(ctx, digest)
	if err != nil {
		return nil, err
	}
	pkg.PackageName = dir
	return pkg, nil
}

// Materialise implements packages.Installer.
func (d *DirInstaller) Materialise(_ context.Context, digest string) (*packages.Package, error) {
	if len(digest) != 64 || strings.Trim(digest, "0123456789abcdef") != "" {
		return nil, fmt.Errorf("malformed package digest %q", digest)
	}
	dir := filepath.Join(d.root, digest)
	src, err := LoadSource(dir)
	if err != nil {
		return nil, fmt.Errorf("package %s is not stored on this node: %w", digest, err)
	}
	return &packages.Package{Dir: dir, Manifest: src.Manifest, ManifestJSON: src.ManifestJSON, Digest: digest,
		Source: "path", PackageName: dir, Version: src.Manifest.Version}, nil
}

// Remove implements packages.Installer.
func (d *DirInstaller) Remove(_ context.Context, digest string) error {
	if len(digest) != 64 || strings.Trim(digest, "0123456789abcdef") != "" {
		return fmt.Errorf("malformed package digest %q", digest)
	}
	if err := os.RemoveAll(filepath.Join(d.root, digest)); err != nil {
		return fmt.Errorf("error removing package %s: %w", digest, err)
	}
	return nil
}

// dirDigest hashes a directory's regular files (relative path, mode and bytes) in order.
func dirDigest(dir string) (string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.Type().IsRegular() {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("error reading package %s: %w", dir, err)
	}
	sort.Strings(files)
	h := sha256.New()
	for _, path := range files {
		rel, _ := filepath.Rel(dir, path)
		st, err := os.Stat(path)
		if err != nil {
			return "", fmt.Errorf("error reading package %s: %w", dir, err)
		}
		fmt.Fprintf(h, "%s\x00%o\x00%d\x00", filepath.ToSlash(rel), st.Mode().Perm()&0o111, st.Size())
		f, err := os.Open(path)
		if err != nil {
			return "", fmt.Errorf("error reading package %s: %w", dir, err)
		}
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return "", fmt.Errorf("error reading package %s: %w", dir, err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// copyDir copies a directory's regular files into dst through a temporary sibling that is
// renamed into place, so a half-copied package is never seen.
func copyDir(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return fmt.Errorf("error storing package: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dst), ".incoming-*")
	if err != nil {
		return fmt.Errorf("error storing package: %w", err)
	}
	defer os.RemoveAll(tmp)
	err = filepath.WalkDir(src, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(tmp, rel)
		switch {
		case e.IsDir():
			return os.MkdirAll(target, 0o700)
		case e.Type().IsRegular():
			st, err := e.Info()
			if err != nil {
				return err
			}
			in, err := os.Open(path)
			if err != nil {
				return err
			}
			defer in.Close()
			out, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, st.Mode().Perm()|0o600)
			if err != nil {
				return err
			}
			if _, err := io.Copy(out, in); err != nil {
				out.Close()
				return err
			}
			return out.Close()
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("error storing package from %s: %w", src, err)
	}
	if err := os.Rename(tmp, dst); err != nil && !os.IsExist(err) {
		if _, serr := os.Stat(filepath.Join(dst, ManifestFile)); serr == nil {
			return nil // another install stored the same package meanwhile
		}
		return fmt.Errorf("error storing package: %w", err)
	}
	return nil
}

var _ packages.Installer = (*DirInstaller)(nil)
