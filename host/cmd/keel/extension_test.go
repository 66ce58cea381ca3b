package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestExtensionPack runs `keel extension pack DIR -o FILE` in process and reads the archive
// back: the module's sha256 is in the packed manifest, the output file is not packed into
// itself, and a second pack gives the same bytes.
func TestExtensionPack(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	module := []byte("\x00asm module")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(`{"key":"test.pack","version":"0.2.0","kind":"plugin","runtime":{"kind":"wasm","module":"m.wasm"}}`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "m.wasm"), module, 0o644))
	out := filepath.Join(dir, "test-pack.tgz")

	pack := func() []byte {
		t.Helper()
		cmd := rootCommand()
		var stdout bytes.Buffer
		cmd.SetOut(&stdout)
		cmd.SetArgs([]string{"extension", "pack", dir, "-o", out})
		require.NoError(t, cmd.Execute())
		require.Contains(t, stdout.String(), "packed test.pack 0.2.0 into "+out)
		b, err := os.ReadFile(out)
		require.NoError(t, err)
		return b
	}
	first := pack()
	require.Equal(t, first, pack(), "packing is deterministic and leaves its own output out")

	zr, err := gzip.NewReader(bytes.NewReader(first))
	require.NoError(t, err)
	tr := tar.NewReader(zr)
	files := map[string][]byte{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		b, err := io.ReadAll(tr)
		require.NoError(t, err)
		files[hdr.Name] = b
	}
	require.Len(t, files, 2)
	var m struct {
		Runtime struct {
			SHA256 string `json:"sha256"`
		} `json:"runtime"`
	}
	require.NoError(t, json.Unmarshal(files["manifest.json"], &m))
	sum := sha256.Sum256(module)
	require.Equal(t, hex.EncodeToString(sum[:]), m.Runtime.SHA256)

	cmd := rootCommand()
	cmd.SetArgs([]string{"extension", "pack", t.TempDir()})
	require.ErrorContains(t, cmd.Execute(), "not a keel package")
}
