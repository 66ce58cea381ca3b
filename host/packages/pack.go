package packages

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/keelhq/keel/sdk"
)

// Packed is a package built by Pack.
type Packed struct {
	// Archive is the canonical .tgz and Digest its sha256 (hex): the digest keel stores it under.
	Archive []byte
	Digest  string
	// Manifest is the manifest inside, with every artifact's sha256 filled in.
	Manifest *sdk.Manifest
}

// Pack builds a package from a directory (`keel extension pack`): it reads every file but
// .git within the caps, writes each artifact's sha256 into the manifest (checking those
// already there), checks the manifest strictly and returns keel's canonical .tgz. Artifacts
// may be for any platforms. Files at the exclude paths (absolute, such as the output
// archive when it is written inside dir) are left out.
func Pack(dir string, limits Limits, exclude ...string) (*Packed, error) {
	set, err := readDir(dir, limits, exclude...)
	if err != nil {
		return nil, err
	}
	m, _, err := verify(set, verifyOptions{checksums: fillChecksums, anyPlatform: true})
	if err != nil {
		return nil, err
	}
	archive, err := set.canonicalArchive()
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(archive)
	return &Packed{Archive: archive, Digest: hex.EncodeToString(sum[:]), Manifest: m}, nil
}
