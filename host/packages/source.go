package packages

import (
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"

	"github.com/keelhq/keel/kernel"
)

// The spec's install-rule texts (part 2 "Plugins", rules 1–3), quoted exactly.
const (
	errInvalidChars      = "packageName contains invalid characters"
	errNullByte          = "Invalid localPath: path contains a null byte"
	errNotExist          = "Invalid localPath: path does not exist: "
	errNotDir            = "Invalid localPath: path is not a directory: "
	errNotReadable       = "Invalid localPath: path is not readable: "
	errCloudNPM          = "npm installs are disabled on cloud-managed instances; only plugins bundled with the application may be installed"
	errCloudOutsideRoots = "cloud-managed instances may only install plugins from the bundled plugin catalog"
)

// archiveExts are the file names a local package archive may have.
var archiveExts = []string{".tgz", ".tar.gz", ".tar", ".zip"}

func isArchiveName(name string) bool {
	lower := strings.ToLower(name)
	for _, ext := range archiveExts {
		if strings.HasSuffix(lower, ext) {
			return true
		}
	}
	return false
}

// readableDir reports whether a directory can be listed; a variable so a test can stand
// in for a permission failure, which root never sees.
var readableDir = func(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	_, err = f.Readdirnames(1)
	return err == nil || errors.Is(err, io.EOF)
}

// CanonicalLocalPath applies install rule 2: the value is resolved to an absolute real path
// (.. collapsed, symlinks followed) that must be an existing readable directory. keel also
// accepts a readable package archive file (.tgz, .tar.gz, .tar, .zip); any other file is
// "not a directory". It returns the canonical path and whether it is an archive.
func CanonicalLocalPath(p string) (canonical string, archive bool, err error) {
	if strings.ContainsRune(p, 0) {
		return "", false, kernel.BadRequest(errNullByte)
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", false, kernel.BadRequest(errNotExist + p)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrInvalid) || isNotDirErr(err) {
			return "", false, kernel.BadRequest(errNotExist + abs)
		}
		return "", false, kernel.BadRequest(errNotReadable + abs)
	}
	info, err := os.Stat(real)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", false, kernel.BadRequest(errNotExist + abs)
		}
		return "", false, kernel.BadRequest(errNotReadable + real)
	}
	if !info.IsDir() {
		if info.Mode().IsRegular() && isArchiveName(real) {
			f, err := os.Open(real)
			if err != nil {
				return "", false, kernel.BadRequest(errNotReadable + real)
			}
			f.Close()
			return real, true, nil
		}
		return "", false, kernel.BadRequest(errNotDir + real)
	}
	if !readableDir(real) {
		return "", false, kernel.BadRequest(errNotReadable + real)
	}
	return real, false, nil
}

func isNotDirErr(err error) bool { return errors.Is(err, syscall.ENOTDIR) }

// npmNamePattern is an npm package name: an optional @scope/ and a name, lowercase,
// URL-safe, at most 214 characters (checked apart).
var npmNamePattern = regexp.MustCompile(`^(@[a-z0-9][a-z0-9._~-]*/)?[a-z0-9][a-z0-9._~-]*$`)

// CheckNPMName applies install rule 1, then npm's own naming rules.
func CheckNPMName(name string) error {
	if strings.ContainsAny(name, `<>:"|?*`) {
		return kernel.BadRequest(errInvalidChars)
	}
	if len(name) > 214 || !npmNamePattern.MatchString(name) {
		return kernel.BadRequest("packageName is not a valid npm package name: " + name)
	}
	return nil
}

// inBundledRoots reports whether a canonical path is a package directory (or archive)
// strictly inside one of the bundled catalog's folders (examples/, plugins/) under root.
func inBundledRoots(root, canonical string) bool {
	if root == "" {
		return false
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return false
	}
	for _, sub := range catalogFolders {
		base := filepath.Join(realRoot, sub.dir)
		rel, err := filepath.Rel(base, canonical)
		if err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel) {
			return true
		}
	}
	return false
}

// cloudRefusal is the 403 of install rule 3.
func cloudRefusal(text string) *kernel.APIError {
	return kernel.NewAPIError(http.StatusForbidden, text)
}
