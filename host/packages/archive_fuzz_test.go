package packages

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"strings"
	"testing"

	"github.com/keelhq/keel/sdk"
)

// FuzzReadArchive feeds arbitrary bytes to the archive reader: it must never panic, and
// whatever it accepts holds only clean paths inside the package, within the caps.
func FuzzReadArchive(f *testing.F) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range []struct{ name, body, link string }{
		{"package/manifest.json", `{"key":"a","version":"1.0.0","kind":"plugin","runtime":{"kind":"wasm","module":"m.wasm"}}`, ""},
		{"package/m.wasm", "x", ""},
		{"package/l", "", "m.wasm"},
	} {
		hdr := &tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.body)), Typeflag: tar.TypeReg}
		if e.link != "" {
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, e.link
		}
		_ = tw.WriteHeader(hdr)
		_, _ = tw.Write([]byte(e.body))
	}
	_ = tw.Close()
	_ = zw.Close()
	f.Add(buf.Bytes())
	f.Add([]byte("PK\x03\x04garbage"))
	f.Add([]byte{0x1f, 0x8b, 0, 0})
	limits := Limits{MaxArchiveBytes: 1 << 20, MaxUnpackedBytes: 1 << 20, MaxFiles: 64}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := readArchive(data, limits)
		if err != nil {
			return
		}
		var total int64
		for name, file := range s.files {
			if !sdk.IsPackagePath(name) || name != file.name || strings.HasPrefix(name, "../") {
				t.Fatalf("accepted unsafe entry %q", name)
			}
			if file.link != "" || file.hardLink {
				t.Fatalf("entry %q is still a link", name)
			}
			total += int64(len(file.data))
		}
		if len(s.files) > limits.MaxFiles || total > limits.MaxUnpackedBytes {
			t.Fatalf("caps exceeded: %d files, %d bytes", len(s.files), total)
		}
	})
}
