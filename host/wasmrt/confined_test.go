package wasmrt

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

// TestConfinedFS checks that a mounted folder keeps the module in: symlinks and ".." that
// lead out are refused, and the module cannot make symlinks.
func TestConfinedFS(t *testing.T) {
	t.Parallel()
	root, outside := t.TempDir(), t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(root, "in.txt"), []byte("in"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(outside, "out.txt"), []byte("out"), 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(root, "sub"), 0o755))
	require.NoError(t, os.Symlink(filepath.Join(outside, "out.txt"), filepath.Join(root, "escape")))
	require.NoError(t, os.Symlink(outside, filepath.Join(root, "sub", "door")))
	require.NoError(t, os.Symlink("../in.txt", filepath.Join(root, "sub", "back")))
	fs := newConfinedFS(root)

	for _, tc := range []struct {
		name, path string
		errno      experimentalsys.Errno
	}{
		{"Inside", "in.txt", 0},
		{"LinkInside", "sub/back", 0},
		{"LinkOut", "escape", experimentalsys.EPERM},
		{"DirLinkOut", "sub/door/out.txt", experimentalsys.EPERM},
		{"NewFileThroughDirLink", "sub/door/new.txt", experimentalsys.EPERM},
		{"DotDot", "../" + filepath.Base(outside) + "/out.txt", 0}, // cleaned to the root: not found, not out
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, errno := fs.OpenFile(tc.path, experimentalsys.O_RDONLY, 0)
			if tc.name == "DotDot" {
				require.NotEqual(t, experimentalsys.Errno(0), errno, "the file outside is not reached")
				require.NotEqual(t, experimentalsys.EPERM, errno)
				return
			}
			if tc.name == "NewFileThroughDirLink" {
				f, errno = fs.OpenFile(tc.path, experimentalsys.O_CREAT|experimentalsys.O_WRONLY, 0o644)
			}
			require.Equal(t, tc.errno, errno)
			if f != nil {
				f.Close()
			}
		})
	}
	require.Equal(t, experimentalsys.EPERM, fs.Symlink(filepath.Join(outside, "out.txt"), "made"))
	require.Equal(t, experimentalsys.Errno(0), fs.Unlink("escape"), "a link itself may be removed")
	_, err := os.Stat(filepath.Join(outside, "out.txt"))
	require.NoError(t, err, "its target stays")
}
