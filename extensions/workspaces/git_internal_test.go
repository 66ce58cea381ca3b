package workspaces

import (
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSanitizeBranch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"ACM-12-add-login", "ACM-12-add-login"},
		{"ACM-1-fix: the build (again)!", "ACM-1-fix-the-build-again"},
		{"--force", "force"},
		{"feature/../../etc", "feature/etc"},
		{"a//b///c", "a/b/c"},
		{"release.lock", "release"},
		{".hidden/.x", "hidden/x"},
		{"spaces and\ttabs\nnewline", "spaces-and-tabs-newline"},
		{"@{upstream}", "upstream"},
		{"~^:?*[\\", ""},
		{"ünïcödé", "n-c-d"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			got := sanitizeBranch(tc.in)
			require.Equal(t, tc.want, got)
			if got != "" {
				out, err := exec.Command("git", "check-ref-format", "--branch", got).CombinedOutput()
				require.NoError(t, err, "git accepts %q: %s", got, out)
			}
		})
	}
}

func TestSafeRef(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"main", true}, {"origin/main", true}, {"HEAD~2", true}, {"v1.2.3", true},
		{"", false}, {"-b", false}, {"--upload-pack=evil", false}, {"main branch", false}, {"a\nb", false},
	} {
		require.Equal(t, tc.ok, safeRef(tc.in), tc.in)
	}
}
