package packages

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/keelhq/keel/kernel"
	"github.com/keelhq/keel/sdk"
)

// Limits bound what a package may unpack to. Zero fields take the defaults.
type Limits struct {
	// MaxArchiveBytes caps a package archive as downloaded or read (default 128 MiB).
	MaxArchiveBytes int64
	// MaxUnpackedBytes caps the total size of a package's files (default 256 MiB).
	MaxUnpackedBytes int64
	// MaxFiles caps the number of entries in a package (default 10,000).
	MaxFiles int
}

// Default limits.
const (
	DefaultMaxArchiveBytes  = 128 << 20
	DefaultMaxUnpackedBytes = 256 << 20
	DefaultMaxFiles         = 10000
)

func (l Limits) withDefaults() Limits {
	if l.MaxArchiveBytes <= 0 {
		l.MaxArchiveBytes = DefaultMaxArchiveBytes
	}
	if l.MaxUnpackedBytes <= 0 {
		l.MaxUnpackedBytes = DefaultMaxUnpackedBytes
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = DefaultMaxFiles
	}
	return l
}

// file is one regular file of a package.
type file struct {
	// name is a clean slash-separated path inside the package (sdk.IsPackagePath).
	name string
	exec bool
	data []byte
	// link, for a symlink or hard link entry while reading, is its target.
	link     string
	hardLink bool
}

// fileSet is a package's files by name. Directories are implicit.
type fileSet struct {
	files  map[string]*file
	total  int64
	limits Limits
}

func newFileSet(limits Limits) *fileSet {
	return &fileSet{files: map[string]*file{}, limits: limits.withDefaults()}
}

// badPackage is the 400 of a package that cannot be installed.
func badPackage(format string, args ...any) *kernel.APIError {
	return kernel.BadRequest(fmt.Sprintf(format, args...)).WithCode("invalid_package")
}

// entryName turns an archive entry name into a clean package path, refusing absolute
// paths and any path that climbs out of the package (zip-slip).
func entryName(raw string) (string, error) {
	name := strings.TrimPrefix(raw, "./")
	name = strings.TrimSuffix(name, "/")
	if strings.ContainsRune(name, '\\') || strings.ContainsRune(name, 0) || (len(name) > 1 && name[1] == ':') {
		return "", badPackage("package entry %q is not a portable relative path", raw)
	}
	if strings.HasPrefix(name, "/") {
		return "", badPackage("package entry %q is an absolute path", raw)
	}
	for _, seg := range strings.Split(name, "/") {
		if seg == ".." {
			return "", badPackage("package entry %q escapes the package", raw)
		}
	}
	clean := path.Clean(name)
	if clean == "." {
		return "", nil
	}
	if !sdk.IsPackagePath(clean) {
		return "", badPackage("package entry %q is not a clean relative path", raw)
	}
	return clean, nil
}

// add records a file, enforcing the count and size caps and refusing duplicates.
func (s *fileSet) add(f *file) error {
	if _, dup := s.files[f.name]; dup {
		return badPackage("package entry %q appears twice", f.name)
	}
	if len(s.files) >= s.limits.MaxFiles {
		return badPackage("package has more than %d files", s.limits.MaxFiles)
	}
	s.files[f.name] = f
	return nil
}

// readData reads one entry's content, counting it against the unpacked-size cap.
func (s *fileSet) readData(r io.Reader) ([]byte, error) {
	remaining := s.limits.MaxUnpackedBytes - s.total
	b, err := io.ReadAll(io.LimitReader(r, remaining+1))
	if err != nil {
		return nil, badPackage("package archive is damaged: %v", err)
	}
	if int64(len(b)) > remaining {
		return nil, badPackage("package unpacks to more than %d bytes", s.limits.MaxUnpackedBytes)
	}
	s.total += int64(len(b))
	return b, nil
}

// readArchive reads a .tgz, .tar or .zip package into a file set. The package root is the
// archive root when it holds manifest.json, else its single top-level directory (npm
// tarballs put everything under package/).
func readArchive(b []byte, limits Limits) (*fileSet, error) {
	s := newFileSet(limits)
	if int64(len(b)) > s.limits.MaxArchiveBytes {
		return nil, badPackage("package archive is larger than %d bytes", s.limits.MaxArchiveBytes)
	}
	var err error
	switch {
	case bytes.HasPrefix(b, []byte{0x1f, 0x8b}):
		var zr *gzip.Reader
		zr, err = gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, badPackage("package archive is not a valid .tgz: %v", err)
		}
		err = s.readTar(zr)
	case bytes.HasPrefix(b, []byte("PK\x03\x04")) || bytes.HasPrefix(b, []byte("PK\x05\x06")):
		err = s.readZip(b)
	case len(b) > 262 && string(b[257:262]) == "ustar":
		err = s.readTar(bytes.NewReader(b))
	default:
		return nil, badPackage("package archive is not a .tgz, .tar or .zip")
	}
	if err != nil {
		return nil, err
	}
	if err := s.rootAtManifest(); err != nil {
		return nil, err
	}
	if err := s.resolveLinks(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *fileSet) readTar(r io.Reader) error {
	tr := tar.NewReader(r)
	entries := 0
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return badPackage("package archive is damaged: %v", err)
		}
		if entries++; entries > s.limits.MaxFiles {
			return badPackage("package has more than %d files", s.limits.MaxFiles)
		}
		name, err := entryName(hdr.Name)
		if err != nil {
			return err
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			continue
		case tar.TypeReg, tar.TypeRegA, tar.TypeGNUSparse:
			if name == "" {
				return badPackage("package entry %q has no name", hdr.Name)
			}
			data, err := s.readData(tr)
			if err != nil {
				return err
			}
			if err := s.add(&file{name: name, exec: hdr.Mode&0o111 != 0, data: data}); err != nil {
				return err
			}
		case tar.TypeSymlink, tar.TypeLink:
			if name == "" {
				return badPackage("package entry %q has no name", hdr.Name)
			}
			if err := s.add(&file{name: name, link: hdr.Linkname, hardLink: hdr.Typeflag == tar.TypeLink}); err != nil {
				return err
			}
		default:
			return badPackage("package entry %q is not a file, directory or link", hdr.Name)
		}
	}
}

func (s *fileSet) readZip(b []byte) error {
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return badPackage("package archive is not a valid .zip: %v", err)
	}
	if len(zr.File) > s.limits.MaxFiles {
		return badPackage("package has more than %d files", s.limits.MaxFiles)
	}
	for _, zf := range zr.File {
		name, err := entryName(zf.Name)
		if err != nil {
			return err
		}
		mode := zf.Mode()
		if mode.IsDir() || strings.HasSuffix(zf.Name, "/") {
			continue
		}
		if name == "" {
			return badPackage("package entry %q has no name", zf.Name)
		}
		if zf.UncompressedSize64 > uint64(s.limits.MaxUnpackedBytes) {
			return badPackage("package unpacks to more than %d bytes", s.limits.MaxUnpackedBytes)
		}
		rc, err := zf.Open()
		if err != nil {
			return badPackage("package entry %q cannot be read: %v", zf.Name, err)
		}
		data, err := s.readData(rc)
		rc.Close()
		if err != nil {
			return err
		}
		switch {
		case mode&fs.ModeSymlink != 0:
			err = s.add(&file{name: name, link: string(data)})
		case mode.IsRegular():
			err = s.add(&file{name: name, exec: mode&0o111 != 0, data: data})
		default:
			err = badPackage("package entry %q is not a file, directory or link", zf.Name)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// rootAtManifest re-roots the set at the directory holding manifest.json: the archive
// root, or its one top-level directory.
func (s *fileSet) rootAtManifest() error {
	if _, ok := s.files[manifestFile]; ok {
		return nil
	}
	top := ""
	for name := range s.files {
		first, _, _ := strings.Cut(name, "/")
		if first == name || (top != "" && first != top) {
			return notKeelPackage()
		}
		top = first
	}
	if top == "" {
		return notKeelPackage()
	}
	if _, ok := s.files[top+"/"+manifestFile]; !ok {
		return notKeelPackage()
	}
	moved := make(map[string]*file, len(s.files))
	for name, f := range s.files {
		f.name = strings.TrimPrefix(name, top+"/")
		if f.link != "" && f.hardLink {
			// Hard link targets are archive paths, re-rooted like the names.
			rel, ok := strings.CutPrefix(f.link, top+"/")
			if !ok {
				return badPackage("package entry %q links outside the package", name)
			}
			f.link = rel
		}
		moved[f.name] = f
	}
	s.files = moved
	return nil
}

func notKeelPackage() *kernel.APIError {
	return badPackage("not a keel package: no %s at the package root (or under its one top-level directory, such as npm's package/)", manifestFile)
}

// resolveLinks replaces each symlink or hard link by a copy of the file it names inside the
// package; a link that escapes the package, or names no file in it, is refused.
func (s *fileSet) resolveLinks() error {
	for _, f := range s.files {
		if f.link == "" && !f.hardLink {
			continue
		}
		cur := f
		for hops := 0; cur.link != "" || cur.hardLink; hops++ {
			if hops > 8 {
				return badPackage("package entry %q is a chain of too many links", f.name)
			}
			target := cur.link
			if !cur.hardLink {
				if path.IsAbs(target) {
					return badPackage("package entry %q is a symlink that escapes the package (%s)", f.name, target)
				}
				target = path.Join(path.Dir(cur.name), target)
			}
			target = path.Clean(target)
			if target == ".." || strings.HasPrefix(target, "../") || path.IsAbs(target) {
				return badPackage("package entry %q is a link that escapes the package (%s)", f.name, cur.link)
			}
			next, ok := s.files[target]
			if !ok {
				return badPackage("package entry %q links to %q, which is not a file in the package", f.name, cur.link)
			}
			cur = next
		}
		f.data, f.exec, f.link, f.hardLink = cur.data, cur.exec, "", false
		s.total += int64(len(f.data))
		if s.total > s.limits.MaxUnpackedBytes {
			return badPackage("package unpacks to more than %d bytes", s.limits.MaxUnpackedBytes)
		}
	}
	return nil
}

// readDir reads a package directory into a file set. Symlinks must stay inside the
// directory and name files; .git is skipped.
func readDir(root string, limits Limits, exclude ...string) (*fileSet, error) {
	s := newFileSet(limits)
	skip := map[string]bool{}
	for _, p := range exclude {
		skip[p] = true
	}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return badPackage("error reading package directory: %v", err)
		}
		if p == root {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if skip[p] {
			return nil
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		info, err := os.Lstat(p)
		if err != nil {
			return badPackage("error reading package file %s: %v", rel, err)
		}
		real := p
		if info.Mode()&fs.ModeSymlink != 0 {
			real, err = filepath.EvalSymlinks(p)
			if err != nil {
				return badPackage("package file %s is a broken symlink", rel)
			}
			if r, err := filepath.Rel(root, real); err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
				return badPackage("package file %s is a symlink that escapes the package", rel)
			}
			if info, err = os.Stat(real); err != nil {
				return badPackage("error reading package file %s: %v", rel, err)
			}
		}
		if !info.Mode().IsRegular() {
			return badPackage("package file %s is not a regular file", rel)
		}
		if !sdk.IsPackagePath(rel) {
			return badPackage("package file %q has an unportable name", rel)
		}
		if info.Size() > s.limits.MaxUnpackedBytes-s.total {
			return badPackage("package unpacks to more than %d bytes", s.limits.MaxUnpackedBytes)
		}
		fh, err := os.Open(real)
		if err != nil {
			return badPackage("package file %s is not readable", rel)
		}
		data, err := s.readData(fh)
		fh.Close()
		if err != nil {
			return err
		}
		return s.add(&file{name: rel, exec: info.Mode()&0o111 != 0, data: data})
	})
	if err != nil {
		return nil, err
	}
	if _, ok := s.files[manifestFile]; !ok {
		return nil, notKeelPackage()
	}
	return s, nil
}

// names returns the file names in order.
func (s *fileSet) names() []string {
	out := make([]string, 0, len(s.files))
	for n := range s.files {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// canonicalArchive writes the set as keel's canonical .tgz: files sorted by name, no
// directories, modes 0644 or 0755, zero times and owners. The same files always give the
// same bytes, so the same package gets the same digest whatever form it came in.
func (s *fileSet) canonicalArchive() ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.DefaultCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(zw)
	for _, name := range s.names() {
		f := s.files[name]
		mode := int64(0o644)
		if f.exec {
			mode = 0o755
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(f.data)), ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("error writing package archive: %w", err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, fmt.Errorf("error writing package archive: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("error writing package archive: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("error writing package archive: %w", err)
	}
	return buf.Bytes(), nil
}

// writeTo writes the set under dir (which must exist and be empty).
func (s *fileSet) writeTo(dir string) error {
	for _, name := range s.names() {
		f := s.files[name]
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("error materialising package: %w", err)
		}
		mode := fs.FileMode(0o644)
		if f.exec {
			mode = 0o755
		}
		if err := os.WriteFile(p, f.data, mode); err != nil {
			return fmt.Errorf("error materialising package: %w", err)
		}
		if err := os.Chmod(p, mode); err != nil { // WriteFile's mode is masked by the umask.
			return fmt.Errorf("error materialising package: %w", err)
		}
	}
	return nil
}
