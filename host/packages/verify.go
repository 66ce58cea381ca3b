package packages

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"runtime"
	"sort"
	"strings"

	"github.com/keelhq/keel/sdk"
)

// manifestFile is the manifest's name at a package root.
const manifestFile = "manifest.json"

// hostPlatform is the artifact key of this machine ("linux-amd64").
var hostPlatform = sdk.Platform(runtime.GOOS, runtime.GOARCH)

// checksumMode says what verify does with an artifact whose checksum the manifest lacks.
type checksumMode int

const (
	// requireChecksums refuses a package whose artifacts lack a checksum (archives, npm).
	requireChecksums checksumMode = iota
	// fillChecksums computes missing checksums and writes them into the package's manifest
	// (a local directory, as `keel extension pack` does).
	fillChecksums
)

// verifyOptions tune verify.
type verifyOptions struct {
	checksums checksumMode
	// anyPlatform accepts a process package without an executable for this machine
	// (packing for other platforms).
	anyPlatform bool
}

// verify checks a package: a strict manifest, every artifact present and matching its
// sha256, UI entries present. With fillChecksums it writes missing digests into the
// manifest in the set. It returns the manifest and its bytes as stored.
func verify(s *fileSet, opts verifyOptions) (*sdk.Manifest, []byte, error) {
	mf, ok := s.files[manifestFile]
	if !ok {
		return nil, nil, notKeelPackage()
	}
	m, err := sdk.ParseManifest(mf.data)
	if err != nil {
		return nil, nil, badPackage("%v", err)
	}
	changed := false
	check := func(what, name string, digest *string) error {
		if !sdk.IsPackagePath(name) {
			return badPackage("package %s: %s %q must be a relative path inside the package", m.Key, what, name)
		}
		f, ok := s.files[name]
		if !ok {
			return badPackage("package %s: %s %s is missing from the package", m.Key, what, name)
		}
		sum := sha256.Sum256(f.data)
		got := hex.EncodeToString(sum[:])
		switch {
		case *digest == "" && opts.checksums == fillChecksums:
			*digest, changed = got, true
		case *digest == "":
			return badPackage("package %s: %s %s has no sha256 in the manifest (keel extension pack writes it)", m.Key, what, name)
		case *digest != got:
			return badPackage("package %s: %s %s does not match its sha256 (manifest %s, file %s)", m.Key, what, name, *digest, got)
		}
		return nil
	}
	switch m.Runtime.Kind {
	case sdk.RuntimeWasm:
		if err := check("module", m.Runtime.Module, &m.Runtime.SHA256); err != nil {
			return nil, nil, err
		}
	case sdk.RuntimeProcess:
		if m.Runtime.Executable == "" && len(m.Runtime.Artifacts) == 0 {
			return nil, nil, badPackage("package %s: a process package needs runtime.executable or runtime.artifacts", m.Key)
		}
		if m.Runtime.Executable != "" {
			if err := check("executable", m.Runtime.Executable, &m.Runtime.SHA256); err != nil {
				return nil, nil, err
			}
			s.files[m.Runtime.Executable].exec = true
		}
		for platform, a := range m.Runtime.Artifacts {
			if err := check("executable for "+platform, a.Path, &a.SHA256); err != nil {
				return nil, nil, err
			}
			m.Runtime.Artifacts[platform] = a
			s.files[a.Path].exec = true
		}
		if _, _, ok := m.Runtime.ExecutableFor(hostPlatform); !ok && !opts.anyPlatform {
			return nil, nil, badPackage("package %s has no executable for %s (its artifacts are for %s)", m.Key, hostPlatform, platforms(m))
		}
	}
	if m.UI != nil {
		for _, slot := range m.UI.Slots {
			if slot.Entry == "" && slot.Route != "" {
				continue // served by one of the extension's routes (checked with the manifest)
			}
			if !sdk.IsPackagePath(slot.Entry) {
				return nil, nil, badPackage("package %s: UI entry %q must be a relative path inside the package", m.Key, slot.Entry)
			}
			// Entries are relative to the package's ui/ directory, where keel serves them
			// (an entry at the package root is accepted too).
			_, inUI := s.files["ui/"+slot.Entry]
			if _, ok := s.files[slot.Entry]; !ok && !inUI {
				return nil, nil, badPackage("package %s: UI entry %s is missing from the package", m.Key, slot.Entry)
			}
		}
	}
	data := mf.data
	if changed {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(m); err != nil {
			return nil, nil, fmt.Errorf("error encoding manifest of %s: %w", m.Key, err)
		}
		again, err := sdk.ParseManifest(buf.Bytes())
		if err != nil {
			return nil, nil, fmt.Errorf("error re-reading manifest of %s: %w", m.Key, err)
		}
		m = again
		data = buf.Bytes()
		mf.data = data
	}
	return m, data, nil
}

func platforms(m *sdk.Manifest) string {
	if len(m.Runtime.Artifacts) == 0 {
		return "none"
	}
	out := make([]string, 0, len(m.Runtime.Artifacts))
	for p := range m.Runtime.Artifacts {
		out = append(out, p)
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}
