package board_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGeneratedCodeIsFresh fails when a committed *_templ.go differs from what the pinned
// templ generator (a tool dependency in go.mod) makes of its .templ file, or when a
// generated file has no .templ file left: run `make generate`. The generator runs on copies
// in a temporary folder, so the tree is left alone.
func TestGeneratedCodeIsFresh(t *testing.T) {
	t.Parallel()
	sources, err := filepath.Glob("*.templ")
	require.NoError(t, err)
	require.NotEmpty(t, sources)
	dir := t.TempDir()
	for _, f := range sources {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), b, 0o600))
	}
	cmd := exec.Command("go", "tool", "templ", "generate", "-path", dir)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "templ generate: %s", out)
	generated, err := filepath.Glob("*_templ.go")
	require.NoError(t, err)
	require.Len(t, generated, len(sources), "every .templ file has one committed *_templ.go and no other is left")
	for _, f := range sources {
		name := strings.TrimSuffix(f, ".templ") + "_templ.go"
		want, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		got, err := os.ReadFile(name)
		require.NoError(t, err, "%s has no generated file: run make generate", f)
		require.Equal(t, string(want), string(got), "%s is stale: run make generate", name)
	}
}
