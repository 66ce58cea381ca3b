package main

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/keelhq/keel/sdk"
)

// rootControlFiles are the files a wiki keeps at its root beside raw/ and wiki/.
var rootControlFiles = map[string]bool{".gitignore": true, "WIKI.md": true, "AGENTS.md": true, "IDEA.md": true, "index.md": true, "log.md": true}

// protectedFiles cannot be written through agent tools: they are the wiki's operating
// schema, which only the board changes.
var protectedFiles = map[string]bool{"AGENTS.md": true, "IDEA.md": true}

// requiredDirectories are the directories a bootstrapped wiki (or space) has.
var requiredDirectories = []string{"raw", "wiki", "wiki/sources", "wiki/projects", "wiki/entities", "wiki/concepts", "wiki/synthesis"}

// checkWikiPath applies the general path rules: relative, slash-separated, no empty, "."
// or ".." segments, and inside the wiki's allowed targets (root control files, raw/**,
// wiki/**).
func checkWikiPath(p string) error {
	if p == "" || strings.HasPrefix(p, "/") || strings.ContainsAny(p, "\\\x00") {
		return sdk.Invalid("path", fmt.Sprintf("Invalid wiki path %q: it must be relative, without backslashes", p))
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return sdk.Invalid("path", fmt.Sprintf("Invalid wiki path %q: empty, '.' and '..' segments are not allowed", p))
		}
	}
	if rootControlFiles[p] || strings.HasPrefix(p, "raw/") || strings.HasPrefix(p, "wiki/") {
		return nil
	}
	return sdk.Invalid("path", fmt.Sprintf("Invalid wiki path %q: only raw/, wiki/ and the root control files are allowed", p))
}

// checkPagePath applies the page rules: a Markdown file under wiki/ or a root control file.
func checkPagePath(p string) error {
	if err := checkWikiPath(p); err != nil {
		return err
	}
	if strings.HasPrefix(p, "raw/") || !strings.HasSuffix(p, ".md") {
		return sdk.Invalid("path", fmt.Sprintf("Invalid page path %q: pages are .md files under wiki/ or root control files", p))
	}
	return nil
}

// checkRawPath applies the source rules: under raw/.
func checkRawPath(p string) error {
	if err := checkWikiPath(p); err != nil {
		return err
	}
	if !strings.HasPrefix(p, "raw/") {
		return sdk.Invalid("rawPath", fmt.Sprintf("Invalid source path %q: sources live under raw/", p))
	}
	return nil
}

// refuseProtected refuses agent-tool writes of the control files.
func refuseProtected(p string) error {
	if protectedFiles[p] {
		return &sdk.Error{Status: http.StatusForbidden, Code: "protected_file",
			Message: fmt.Sprintf("Refusing to overwrite protected wiki control file %s", p)}
	}
	return nil
}

// hashOf is the sha256 of contents, hex.
func hashOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// folder is one space's directory inside the wiki root. Every access goes through an
// os.Root, so no path, and no symlink inside the folder, leads out of it.
type folder struct {
	// root is the wiki root's absolute path; prefix the space's subfolder ("" for default).
	root   string
	prefix string
}

// rel returns the path of p relative to the wiki root.
func (f *folder) rel(p string) string {
	if f.prefix == "" {
		return p
	}
	return f.prefix + "/" + p
}

// open opens the wiki root as an os.Root, creating it first when create is set.
func (f *folder) open(create bool) (*os.Root, error) {
	if !filepath.IsAbs(f.root) {
		return nil, sdk.Unprocessable("The wiki root folder must be an absolute path")
	}
	if create {
		if err := os.MkdirAll(f.root, 0o755); err != nil {
			return nil, fmt.Errorf("error creating wiki root %s: %w", f.root, err)
		}
	}
	r, err := os.OpenRoot(f.root)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, &sdk.Error{Status: http.StatusConflict, Code: "folder_missing", Message: "The wiki root folder does not exist: bootstrap the wiki first"}
		}
		return nil, fmt.Errorf("error opening wiki root %s: %w", f.root, err)
	}
	return r, nil
}

// read reads a file of the space; a missing file is (nil, false, nil).
func (f *folder) read(p string) ([]byte, bool, error) {
	r, err := f.open(false)
	if err != nil {
		return nil, false, err
	}
	defer r.Close()
	b, err := r.ReadFile(f.rel(p))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, false, nil
	case err != nil && strings.Contains(err.Error(), "escapes"):
		return nil, false, &sdk.Error{Status: http.StatusForbidden, Code: "symlink_escape", Message: fmt.Sprintf("Refusing to read %s: it leads out of the wiki folder", p)}
	case err != nil:
		return nil, false, fmt.Errorf("error reading %s: %w", p, err)
	}
	return b, true, nil
}

// writeAtomic writes a file of the space: a temporary file beside it, synced, then
// renamed over it. The parent directories are made; nothing is followed out of the root.
func (f *folder) writeAtomic(p string, b []byte) error {
	r, err := f.open(true)
	if err != nil {
		return err
	}
	defer r.Close()
	name := f.rel(p)
	if err := r.MkdirAll(path.Dir(name), 0o755); err != nil {
		return escapeOr(p, fmt.Errorf("error creating the directory of %s: %w", p, err))
	}
	if fi, err := r.Lstat(name); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return &sdk.Error{Status: http.StatusForbidden, Code: "symlink_escape", Message: fmt.Sprintf("Refusing to write %s: it is a symbolic link", p)}
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := path.Join(path.Dir(name), "."+path.Base(name)+".tmp-"+hex.EncodeToString(rnd[:]))
	fh, err := r.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return escapeOr(p, fmt.Errorf("error creating a temporary file for %s: %w", p, err))
	}
	_, werr := fh.Write(b)
	if werr == nil {
		werr = fh.Sync()
	}
	if cerr := fh.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = r.Rename(tmp, name)
	}
	if werr != nil {
		_ = r.Remove(tmp)
		return escapeOr(p, fmt.Errorf("error writing %s: %w", p, werr))
	}
	return nil
}

// escapeOr turns os.Root's "path escapes from parent" into a 403 naming the path.
func escapeOr(p string, err error) error {
	if strings.Contains(err.Error(), "escapes") {
		return &sdk.Error{Status: http.StatusForbidden, Code: "symlink_escape", Message: fmt.Sprintf("Refusing to write %s: it leads out of the wiki folder", p)}
	}
	return err
}

// listMarkdown lists the .md files under dir of the space (relative to the space), sorted.
// Symlinks are not followed.
func (f *folder) listMarkdown(dir string) ([]string, error) {
	r, err := f.open(false)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	out := []string{}
	base := f.rel(dir)
	err = fs.WalkDir(r.FS(), base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 || (d.IsDir() && strings.HasPrefix(d.Name(), ".") && p != base) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel := p
			if f.prefix != "" {
				rel = strings.TrimPrefix(p, f.prefix+"/")
			}
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("error listing %s: %w", dir, err)
	}
	sort.Strings(out)
	return out, nil
}

// bootstrap writes the missing bootstrap files and directories of the space; existing
// files are never overwritten. It returns the files written and those kept.
func (f *folder) bootstrap(today string) (written, preserved []string, err error) {
	r, err := f.open(true)
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	if f.prefix != "" {
		if err := r.MkdirAll(f.prefix, 0o755); err != nil {
			return nil, nil, escapeOr(f.prefix, err)
		}
	}
	for _, d := range requiredDirectories {
		if err := r.MkdirAll(f.rel(d), 0o755); err != nil {
			return nil, nil, escapeOr(d, err)
		}
	}
	written, preserved = []string{}, []string{}
	for _, bf := range bootstrapFiles(today) {
		if _, err := r.Lstat(f.rel(bf.path)); err == nil {
			preserved = append(preserved, bf.path)
			continue
		}
		if err := f.writeAtomic(bf.path, []byte(bf.contents)); err != nil {
			return nil, nil, err
		}
		written = append(written, bf.path)
	}
	return written, preserved, nil
}
