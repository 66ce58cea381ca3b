// Package packages installs keel extension packages: it resolves an install request (a local
// directory, a .tgz or .zip of one, or a name and version on an npm registry), verifies the
// package (strict manifest, artifact checksums, registry integrity), stores its bytes
// content-addressed in PostgreSQL so that every node sharing the database can run it, and
// materialises it into the data dir on demand.
//
// This file is the contract the rest of the host codes against; the package's other files
// implement it.
package packages

import (
	"context"

	"github.com/keelhq/keel/sdk"
)

// Request is one install request, as POST /api/plugins/install and POST /api/adapters/install
// receive it.
type Request struct {
	// PackageName is an npm package name, or a local path when IsLocalPath is true.
	PackageName string
	// Version is the npm version or dist-tag (default latest); ignored for local paths.
	Version string
	// IsLocalPath says PackageName is a path on this machine.
	IsLocalPath bool
}

// Package is an installed, verified package materialised on this node.
type Package struct {
	// Dir is the absolute path of the materialised package directory (it holds manifest.json).
	Dir string
	// Manifest is the package's strictly parsed manifest, and ManifestJSON its bytes.
	Manifest     *sdk.Manifest
	ManifestJSON []byte
	// Digest is the sha256 (hex) of the stored package archive: its content address.
	Digest string
	// Source is "path" for a local directory or archive, "npm" for a registry install.
	Source string
	// PackageName and Version are what was asked for and resolved (the npm name and the
	// resolved version; for a local path, the canonical path and the manifest's version).
	PackageName string
	Version     string
}

// Installer resolves, verifies, stores and materialises packages.
type Installer interface {
	// Install resolves and verifies req, stores the package and returns it materialised.
	// A bad request is a *kernel.APIError with the spec's status and text (install rules 1–3).
	Install(ctx context.Context, req Request) (*Package, error)
	// Materialise returns the directory of the stored package with this digest, writing it
	// into the data dir first when this node has not yet.
	Materialise(ctx context.Context, digest string) (*Package, error)
	// Remove deletes the stored package with this digest and its materialised copy.
	Remove(ctx context.Context, digest string) error
}
