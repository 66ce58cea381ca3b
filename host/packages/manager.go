package packages

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/keelhq/keel/kernel"
	"github.com/keelhq/keel/sdk"
)

// Package sources.
const (
	SourcePath = "path"
	SourceNPM  = "npm"
)

// Store keeps package archives where every node sharing the database finds them. The
// kernel implements it (kernel.extension_packages).
type Store interface {
	// ExtensionPackageInsert stores a package; the same digest twice is a no-op.
	ExtensionPackageInsert(ctx context.Context, p *kernel.ExtensionPackageInsertParams) error
	// ExtensionPackageGet returns a stored package, or (nil, nil) when there is none.
	ExtensionPackageGet(ctx context.Context, digest string) (*kernel.ExtensionPackage, error)
	// ExtensionPackageGetInfo returns a stored package without its archive, or (nil, nil).
	ExtensionPackageGetInfo(ctx context.Context, digest string) (*kernel.ExtensionPackage, error)
	// ExtensionPackageDelete removes a stored package.
	ExtensionPackageDelete(ctx context.Context, digest string) error
}

// Options configure a Manager.
type Options struct {
	// Store keeps the archives (required).
	Store Store
	// DataDir is keel's data dir; packages materialise in DataDir/packages/<digest>.
	DataDir string
	// NPMRegistry is the npm registry base URL (SERVICE_NPM_REGISTRY, default
	// https://registry.npmjs.org).
	NPMRegistry string
	// NPMToken (SERVICE_NPM_TOKEN) is sent as a bearer token to the registry's own host
	// only (its packuments and the tarballs it serves itself), never to another host a
	// packument or a redirect points at, and never logged.
	NPMToken string
	// NPMTimeout bounds a packument request (default 30s), NPMTarballTimeout a tarball
	// download (default 2m).
	NPMTimeout        time.Duration
	NPMTarballTimeout time.Duration
	// CloudManaged applies install rule 3 (SERVICE_MANAGED_CONFIG set): no npm installs, and
	// local paths only inside the bundled catalog under BundledRoot.
	CloudManaged bool
	// BundledRoot holds the bundled catalog's examples/ and plugins/ folders.
	BundledRoot string
	// Limits cap archives and what they unpack to.
	Limits Limits
	// HTTPClient talks to the registry (default: a client with no overall timeout; each
	// request has its own).
	HTTPClient *http.Client
	Logger     hclog.Logger
}

// Manager is the Installer: it resolves install requests, verifies packages, stores them
// content-addressed through its Store and materialises them into the data dir.
type Manager struct {
	opts Options
	// locks serialise materialising one digest within this process (nodes race safely
	// through the atomic rename).
	locks sync.Map
}

// New returns a Manager.
func New(opts Options) (*Manager, error) {
	if opts.Store == nil {
		return nil, errors.New("packages: a store is required")
	}
	if opts.DataDir == "" {
		return nil, errors.New("packages: a data dir is required")
	}
	if opts.NPMRegistry == "" {
		opts.NPMRegistry = DefaultNPMRegistry
	}
	if u, err := urlParse(opts.NPMRegistry); err != nil {
		return nil, fmt.Errorf("SERVICE_NPM_REGISTRY=%q is not an http(s) URL", opts.NPMRegistry)
	} else {
		opts.NPMRegistry = u
	}
	if opts.NPMTimeout <= 0 {
		opts.NPMTimeout = 30 * time.Second
	}
	if opts.NPMTarballTimeout <= 0 {
		opts.NPMTarballTimeout = 2 * time.Minute
	}
	opts.Limits = opts.Limits.withDefaults()
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{}
	}
	if opts.NPMToken != "" {
		// The token is added per hop by the transport, so a redirect to another host
		// never carries it.
		c := *opts.HTTPClient
		base := c.Transport
		if base == nil {
			base = http.DefaultTransport
		}
		u, _ := url.Parse(opts.NPMRegistry)
		c.Transport = &bearerTransport{base: base, scheme: u.Scheme, host: u.Host, token: opts.NPMToken}
		opts.HTTPClient = &c
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	return &Manager{opts: opts}, nil
}

// PackagesDir is where packages materialise.
func (m *Manager) PackagesDir() string { return filepath.Join(m.opts.DataDir, "packages") }

// Install resolves and verifies req, stores the package and returns it materialised.
func (m *Manager) Install(ctx context.Context, req Request) (*Package, error) {
	name := strings.TrimSpace(req.PackageName)
	if name == "" {
		return nil, kernel.BadRequest("packageName is required")
	}
	var (
		set     *fileSet
		err     error
		pkgName string
		version string
		source  string
	)
	opts := verifyOptions{checksums: requireChecksums}
	if req.IsLocalPath {
		canonical, archive, err := CanonicalLocalPath(req.PackageName)
		if err != nil {
			return nil, err
		}
		if m.opts.CloudManaged && !inBundledRoots(m.opts.BundledRoot, canonical) {
			return nil, cloudRefusal(errCloudOutsideRoots)
		}
		if archive {
			b, err := readFileCapped(canonical, m.opts.Limits.MaxArchiveBytes)
			if err != nil {
				return nil, err
			}
			set, err = readArchive(b, m.opts.Limits)
			if err != nil {
				return nil, err
			}
		} else {
			if set, err = readDir(canonical, m.opts.Limits); err != nil {
				return nil, err
			}
			opts.checksums = fillChecksums
		}
		pkgName, source = canonical, SourcePath
	} else {
		version = strings.TrimSpace(req.Version)
		if i := strings.LastIndexByte(name, '@'); i > 0 && version == "" {
			name, version = name[:i], name[i+1:]
		}
		if err := CheckNPMName(name); err != nil {
			return nil, err
		}
		if m.opts.CloudManaged {
			return nil, cloudRefusal(errCloudNPM)
		}
		tarball, resolved, err := m.fetchNPM(ctx, name, version)
		if err != nil {
			return nil, err
		}
		if set, err = readArchive(tarball, m.opts.Limits); err != nil {
			var apiErr *kernel.APIError
			if errors.As(err, &apiErr) && apiErr.Message == notKeelPackage().Message {
				return nil, badPackage("npm package %s@%s is not a keel package: it has no %s", name, resolved, manifestFile)
			}
			return nil, err
		}
		pkgName, version, source = name, resolved, SourceNPM
	}
	mf, mfJSON, err := verify(set, opts)
	if err != nil {
		return nil, err
	}
	if source == SourcePath {
		version = mf.Version
	}
	archive, err := set.canonicalArchive()
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(archive)
	digest := hex.EncodeToString(sum[:])
	unlock := m.lock(digest)
	defer unlock()
	if err := m.opts.Store.ExtensionPackageInsert(ctx, &kernel.ExtensionPackageInsertParams{
		Digest: digest, PluginKey: mf.Key, Version: version, Source: source, PackageName: pkgName,
		Manifest: mfJSON, Archive: archive,
	}); err != nil {
		return nil, err
	}
	dir, err := m.materialiseSet(digest, set)
	if err != nil {
		return nil, err
	}
	m.opts.Logger.Info("package installed", "key", mf.Key, "version", version, "source", source, "package", pkgName, "digest", digest)
	return &Package{Dir: dir, Manifest: mf, ManifestJSON: mfJSON, Digest: digest, Source: source, PackageName: pkgName, Version: version}, nil
}

var digestPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Materialise returns the stored package with this digest, writing it into the data dir
// first when this node has not yet. A copy already on disk is checked against the
// manifest's checksum of this platform's artifact and rewritten from the store when it
// does not match.
func (m *Manager) Materialise(ctx context.Context, digest string) (*Package, error) {
	if !digestPattern.MatchString(digest) {
		return nil, kernel.BadRequest("package digest must be 64 lowercase hex characters")
	}
	unlock := m.lock(digest)
	defer unlock()
	info, err := m.opts.Store.ExtensionPackageGetInfo(ctx, digest)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(m.PackagesDir(), digest)
	if info == nil {
		_ = os.RemoveAll(dir) // A copy left by a package removed on another node.
		return nil, kernel.NotFound("Package not found")
	}
	if pkg, err := m.onDisk(dir, digest); err == nil {
		pkg.Source, pkg.PackageName, pkg.Version = info.Source, info.PackageName, info.Version
		return pkg, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		m.opts.Logger.Warn("materialised package does not verify; rewriting it from the store", "digest", digest, "error", err)
		if err := os.RemoveAll(dir); err != nil {
			return nil, fmt.Errorf("error removing damaged package %s: %w", digest, err)
		}
	}
	row, err := m.opts.Store.ExtensionPackageGet(ctx, digest)
	if err != nil {
		return nil, err
	}
	if row == nil {
		return nil, kernel.NotFound("Package not found")
	}
	sum := sha256.Sum256(row.Archive)
	if hex.EncodeToString(sum[:]) != digest {
		return nil, fmt.Errorf("stored package %s does not match its digest: refusing to materialise it", digest)
	}
	set, err := readArchive(row.Archive, m.opts.Limits)
	if err != nil {
		return nil, fmt.Errorf("stored package %s: %w", digest, err)
	}
	mf, mfJSON, err := verify(set, verifyOptions{checksums: requireChecksums})
	if err != nil {
		return nil, fmt.Errorf("stored package %s: %w", digest, err)
	}
	if _, err := m.materialiseSet(digest, set); err != nil {
		return nil, err
	}
	return &Package{Dir: dir, Manifest: mf, ManifestJSON: mfJSON, Digest: digest, Source: row.Source, PackageName: row.PackageName, Version: row.Version}, nil
}

// onDisk reads a materialised copy and checks this platform's artifact (or the module)
// against the manifest.
func (m *Manager) onDisk(dir, digest string) (*Package, error) {
	b, err := os.ReadFile(filepath.Join(dir, manifestFile))
	if err != nil {
		return nil, err
	}
	mf, err := sdk.ParseManifest(b)
	if err != nil {
		return nil, err
	}
	var rel, want string
	switch mf.Runtime.Kind {
	case sdk.RuntimeWasm:
		rel, want = mf.Runtime.Module, mf.Runtime.SHA256
	case sdk.RuntimeProcess:
		var ok bool
		if rel, want, ok = mf.Runtime.ExecutableFor(hostPlatform); !ok {
			return nil, fmt.Errorf("no executable for %s", hostPlatform)
		}
	}
	if rel != "" {
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
		if err != nil {
			// Not wrapped: a missing artifact is damage, not an absent copy.
			return nil, fmt.Errorf("error reading %s: %v", rel, errors.Unwrap(err))
		}
		sum := sha256.Sum256(data)
		if got := hex.EncodeToString(sum[:]); got != want {
			return nil, fmt.Errorf("%s does not match its sha256", rel)
		}
	}
	return &Package{Dir: dir, Manifest: mf, ManifestJSON: b, Digest: digest}, nil
}

// materialiseSet writes a verified set to DataDir/packages/<digest> atomically: into a
// temporary directory beside it, then renamed. A copy already there (this node's or a
// racing writer's) is kept.
func (m *Manager) materialiseSet(digest string, set *fileSet) (string, error) {
	dir := filepath.Join(m.PackagesDir(), digest)
	if _, err := m.onDisk(dir, digest); err == nil {
		return dir, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		m.opts.Logger.Warn("materialised package does not verify; rewriting it", "digest", digest, "error", err)
		if err := os.RemoveAll(dir); err != nil {
			return "", fmt.Errorf("error removing damaged package %s: %w", digest, err)
		}
	}
	if err := os.MkdirAll(m.PackagesDir(), 0o755); err != nil {
		return "", fmt.Errorf("error creating %s: %w", m.PackagesDir(), err)
	}
	tmp, err := os.MkdirTemp(m.PackagesDir(), ".tmp-"+digest[:12]+"-")
	if err != nil {
		return "", fmt.Errorf("error materialising package %s: %w", digest, err)
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", fmt.Errorf("error materialising package %s: %w", digest, err)
	}
	if err := set.writeTo(tmp); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(filepath.Join(dir, manifestFile)); serr == nil {
			return dir, nil // Another writer got there first with the same bytes.
		}
		return "", fmt.Errorf("error materialising package %s: %w", digest, err)
	}
	return dir, nil
}

// Remove deletes the stored package with this digest and this node's materialised copy;
// other nodes drop theirs the next time they are asked to materialise it.
func (m *Manager) Remove(ctx context.Context, digest string) error {
	if !digestPattern.MatchString(digest) {
		return kernel.BadRequest("package digest must be 64 lowercase hex characters")
	}
	unlock := m.lock(digest)
	defer unlock()
	if err := m.opts.Store.ExtensionPackageDelete(ctx, digest); err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(m.PackagesDir(), digest)); err != nil {
		return fmt.Errorf("error removing materialised package %s: %w", digest, err)
	}
	return nil
}

func (m *Manager) lock(digest string) func() {
	v, _ := m.locks.LoadOrStore(digest, &sync.Mutex{})
	mu := v.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// readFileCapped reads a local archive within the archive cap.
func readFileCapped(path string, max int64) ([]byte, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, kernel.BadRequest(errNotReadable + path)
	}
	if info.Size() > max {
		return nil, badPackage("package archive is larger than %d bytes", max)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, kernel.BadRequest(errNotReadable + path)
	}
	return b, nil
}

var _ Installer = (*Manager)(nil)
