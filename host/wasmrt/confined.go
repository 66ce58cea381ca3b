package wasmrt

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/tetratelabs/wazero"
	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/experimental/sysfs"
	"github.com/tetratelabs/wazero/sys"
)

// confinedFS is a host directory a module sees, from which it cannot escape: every path it
// names is resolved on the host (symlinks followed) and refused with EPERM when it leads
// out of the directory; it cannot create symlinks. wazero's own directory mount keeps ".."
// in, but would follow a symlink inside the folder that points out of it.
type confinedFS struct {
	experimentalsys.FS
	root string // the real path of the directory
}

func newConfinedFS(root string) experimentalsys.FS {
	if real, err := filepath.EvalSymlinks(root); err == nil {
		root = real
	}
	return &confinedFS{FS: sysfs.DirFS(root), root: filepath.Clean(root)}
}

// check cleans a guest path (".." cannot climb above the directory) and reports whether it
// stays in the directory once symlinks are resolved; the cleaned path is what the
// directory is asked for. With follow false the last component itself is not resolved (the
// operation acts on a link, not its target).
func (c *confinedFS) check(path string, follow bool) (string, bool) {
	clean := filepath.Clean("/" + path)
	rel := strings.TrimPrefix(clean, "/")
	host := filepath.Join(c.root, clean)
	if !follow && clean != "/" {
		host = filepath.Dir(host)
	}
	// Resolve the longest prefix that exists; what does not exist yet cannot be a link.
	rest := ""
	for {
		real, err := filepath.EvalSymlinks(host)
		if err == nil {
			return rel, within(c.root, filepath.Join(real, rest))
		}
		if !os.IsNotExist(err) {
			return rel, false
		}
		parent := filepath.Dir(host)
		if parent == host {
			return rel, false
		}
		rest = filepath.Join(filepath.Base(host), rest)
		host = parent
	}
}

func within(root, p string) bool {
	return p == root || strings.HasPrefix(p, root+string(filepath.Separator))
}

func (c *confinedFS) OpenFile(path string, flag experimentalsys.Oflag, perm fs.FileMode) (experimentalsys.File, experimentalsys.Errno) {
	p, ok := c.check(path, true)
	if !ok {
		return nil, experimentalsys.EPERM
	}
	return c.FS.OpenFile(p, flag, perm)
}

func (c *confinedFS) Lstat(path string) (sys.Stat_t, experimentalsys.Errno) {
	p, ok := c.check(path, false)
	if !ok {
		return sys.Stat_t{}, experimentalsys.EPERM
	}
	return c.FS.Lstat(p)
}

func (c *confinedFS) Stat(path string) (sys.Stat_t, experimentalsys.Errno) {
	p, ok := c.check(path, true)
	if !ok {
		return sys.Stat_t{}, experimentalsys.EPERM
	}
	return c.FS.Stat(p)
}

func (c *confinedFS) Mkdir(path string, perm fs.FileMode) experimentalsys.Errno {
	p, ok := c.check(path, true)
	if !ok {
		return experimentalsys.EPERM
	}
	return c.FS.Mkdir(p, perm)
}

func (c *confinedFS) Chmod(path string, perm fs.FileMode) experimentalsys.Errno {
	p, ok := c.check(path, true)
	if !ok {
		return experimentalsys.EPERM
	}
	return c.FS.Chmod(p, perm)
}

func (c *confinedFS) Rename(from, to string) experimentalsys.Errno {
	f, okFrom := c.check(from, false)
	t, okTo := c.check(to, false)
	if !okFrom || !okTo {
		return experimentalsys.EPERM
	}
	return c.FS.Rename(f, t)
}

func (c *confinedFS) Rmdir(path string) experimentalsys.Errno {
	p, ok := c.check(path, false)
	if !ok {
		return experimentalsys.EPERM
	}
	return c.FS.Rmdir(p)
}

func (c *confinedFS) Unlink(path string) experimentalsys.Errno {
	p, ok := c.check(path, false)
	if !ok {
		return experimentalsys.EPERM
	}
	return c.FS.Unlink(p)
}

func (c *confinedFS) Link(oldPath, newPath string) experimentalsys.Errno {
	o, okOld := c.check(oldPath, true)
	n, okNew := c.check(newPath, false)
	if !okOld || !okNew {
		return experimentalsys.EPERM
	}
	return c.FS.Link(o, n)
}

// Symlink is refused: a link the module made could lead out of the folder later.
func (c *confinedFS) Symlink(string, string) experimentalsys.Errno { return experimentalsys.EPERM }

func (c *confinedFS) Readlink(path string) (string, experimentalsys.Errno) {
	p, ok := c.check(path, false)
	if !ok {
		return "", experimentalsys.EPERM
	}
	return c.FS.Readlink(p)
}

func (c *confinedFS) Utimens(path string, atim, mtim int64) experimentalsys.Errno {
	p, ok := c.check(path, true)
	if !ok {
		return experimentalsys.EPERM
	}
	return c.FS.Utimens(p, atim, mtim)
}

// fsConfig mounts the folders, each confined (read-only ones refuse writes); with none, the
// module has no filesystem.
func fsConfig(mounts []Mount) wazero.FSConfig {
	cfg := wazero.NewFSConfig()
	for _, mt := range mounts {
		var f experimentalsys.FS = newConfinedFS(mt.HostPath)
		if mt.ReadOnly {
			f = &sysfs.ReadFS{FS: f}
		}
		cfg = cfg.(sysfs.FSConfig).WithSysFSMount(f, mt.GuestPath)
	}
	return cfg
}
