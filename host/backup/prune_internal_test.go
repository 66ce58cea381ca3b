package backup

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPrune applies both rules of the retention policy: the newest keepLast, and none
// older than maxAgeDays, the backup just taken always kept; other directories are left
// alone.
func TestPrune(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	mk := func(root string, age time.Duration, manifest bool) string {
		name := namePrefix + now.Add(-age).Format(nameLayout)
		require.NoError(t, os.MkdirAll(filepath.Join(root, name), 0o700))
		if manifest {
			require.NoError(t, os.WriteFile(filepath.Join(root, name, "manifest.json"), []byte("{}"), 0o600))
		}
		return name
	}
	for _, tc := range []struct {
		name             string
		keepLast, maxAge int
		wantKept         []int
	}{
		{"KeepLast", 2, -1, []int{0, 1}},
		{"MaxAge", -1, 3, []int{0, 1}},
		{"Both", 1, 3, []int{0}},
		{"KeepAll", -1, -1, []int{0, 1, 2, 3}},
		{"CurrentAlwaysKept", 0, 0, []int{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			names := []string{mk(root, 0, true), mk(root, 24*time.Hour, true), mk(root, 5*24*time.Hour, true), mk(root, 9*24*time.Hour, true)}
			partial := mk(root, 30*24*time.Hour, false)
			require.NoError(t, os.Mkdir(filepath.Join(root, "other"), 0o700))
			r := Retention{}
			require.NoError(t, prune(root, names[0], tc.keepLast, tc.maxAge, now, &r))
			var want []string
			for _, i := range tc.wantKept {
				want = append(want, names[i])
			}
			left, err := List(root)
			require.NoError(t, err)
			require.Equal(t, want, left)
			require.Equal(t, len(want), r.Kept)
			require.Len(t, r.Pruned, len(names)-len(want))
			for _, keep := range []string{partial, "other"} {
				_, err := os.Stat(filepath.Join(root, keep))
				require.NoError(t, err)
			}
		})
	}
}
