package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPathRules checks the wiki's path, page and source rules.
func TestPathRules(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		path       string
		page, raw  bool
		protected  bool
		wikiTarget bool
	}{
		{path: "wiki/index.md", page: true, wikiTarget: true},
		{path: "wiki/concepts/billing.md", page: true, wikiTarget: true},
		{path: "AGENTS.md", page: true, protected: true, wikiTarget: true},
		{path: "IDEA.md", page: true, protected: true, wikiTarget: true},
		{path: "raw/2026-01-01-x.md", raw: true, wikiTarget: true},
		{path: "wiki/notes.txt", wikiTarget: true},
		{path: "/etc/passwd"},
		{path: "wiki/../AGENTS.md"},
		{path: "wiki//x.md"},
		{path: "wiki/./x.md"},
		{path: `wiki\x.md`},
		{path: "secrets/x.md"},
		{path: ""},
	} {
		require.Equal(t, tc.wikiTarget, checkWikiPath(tc.path) == nil, "wiki path %q", tc.path)
		require.Equal(t, tc.page, checkPagePath(tc.path) == nil, "page path %q", tc.path)
		require.Equal(t, tc.raw, checkRawPath(tc.path) == nil, "raw path %q", tc.path)
		require.Equal(t, tc.protected, refuseProtected(tc.path) != nil, "protected %q", tc.path)
	}
}

// TestPageLinks checks link extraction (Markdown, relative, [[wiki]] and bare links) and
// the rewrite a rename applies.
func TestPageLinks(t *testing.T) {
	t.Parallel()
	body := []byte("# Billing\n\nSee [pricing](../concepts/pricing.md#tiers), [[wiki/entities/acme.md]], [root](/wiki/index.md),\n" +
		"wiki/synthesis/q1.md and [web](https://example.com/x.md) and [self](billing.md).\n")
	require.Equal(t, []string{"wiki/concepts/pricing.md", "wiki/entities/acme.md", "wiki/index.md", "wiki/synthesis/q1.md"},
		pageLinks("wiki/projects/billing.md", body))
	require.Equal(t, "Billing", pageTitle("wiki/projects/billing.md", body))
	require.Equal(t, "project-standup", pageType("wiki/projects/x/standup.md"))
	require.Equal(t, "concept", pageType("wiki/concepts/x.md"))

	out, changed := rewriteLinks("wiki/projects/billing.md", body, "wiki/concepts/pricing.md", "wiki/concepts/prices.md")
	require.True(t, changed)
	require.Contains(t, string(out), "[pricing](wiki/concepts/prices.md#tiers)")
	require.Equal(t, []string{"wiki/concepts/prices.md", "wiki/entities/acme.md", "wiki/index.md", "wiki/synthesis/q1.md"},
		pageLinks("wiki/projects/billing.md", out))
	out, changed = rewriteLinks("wiki/x.md", body, "wiki/synthesis/q1.md", "wiki/synthesis/q2.md")
	require.True(t, changed)
	require.Contains(t, string(out), "\nwiki/synthesis/q2.md and")
	require.Equal(t, "llm-wiki-2026", slugify("  LLM   Wiki -- 2026!! "))
}

// TestFolder checks bootstrap (missing files only), atomic writes, and that no path or
// symlink leads a read or a write out of the folder.
func TestFolder(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "wiki")
	f := &folder{root: root}
	written, preserved, err := f.bootstrap("2026-05-03")
	require.NoError(t, err)
	require.Empty(t, preserved)
	require.Contains(t, written, "AGENTS.md")
	require.Contains(t, written, "wiki/log.md")
	for _, d := range requiredDirectories {
		require.DirExists(t, filepath.Join(root, d))
	}
	log, err := os.ReadFile(filepath.Join(root, "wiki/log.md"))
	require.NoError(t, err)
	require.Contains(t, string(log), "## [2026-05-03] setup | wiki initialized")

	require.NoError(t, os.WriteFile(filepath.Join(root, "AGENTS.md"), []byte("custom"), 0o644))
	written, preserved, err = f.bootstrap("2026-05-04")
	require.NoError(t, err)
	require.Empty(t, written, "nothing is overwritten")
	require.Contains(t, preserved, "AGENTS.md")
	b, _ := os.ReadFile(filepath.Join(root, "AGENTS.md"))
	require.Equal(t, "custom", string(b))

	require.NoError(t, f.writeAtomic("wiki/concepts/a/b.md", []byte("hello")))
	got, ok, err := f.read("wiki/concepts/a/b.md")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "hello", string(got))
	entries, _ := os.ReadDir(filepath.Join(root, "wiki/concepts/a"))
	require.Len(t, entries, 1, "no temporary file is left behind")

	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret.md"), []byte("secret"), 0o644))
	require.NoError(t, os.Symlink(outside, filepath.Join(root, "wiki", "escape")))
	require.NoError(t, os.Symlink(filepath.Join(outside, "secret.md"), filepath.Join(root, "wiki", "link.md")))
	_, _, err = f.read("wiki/escape/secret.md")
	require.ErrorContains(t, err, "leads out of the wiki folder")
	err = f.writeAtomic("wiki/escape/new.md", []byte("x"))
	require.ErrorContains(t, err, "leads out of the wiki folder")
	require.NoFileExists(t, filepath.Join(outside, "new.md"))
	err = f.writeAtomic("wiki/link.md", []byte("x"))
	require.ErrorContains(t, err, "symbolic link")
	b, _ = os.ReadFile(filepath.Join(outside, "secret.md"))
	require.Equal(t, "secret", string(b), "the file a symlink names is untouched")
	pages, err := f.listMarkdown("wiki")
	require.NoError(t, err)
	require.NotContains(t, pages, "wiki/escape/secret.md", "listing does not follow symlinks")
	require.Contains(t, pages, "wiki/concepts/a/b.md")

	space := &folder{root: root, prefix: "spaces/research"}
	written, _, err = space.bootstrap("2026-05-03")
	require.NoError(t, err)
	require.Contains(t, written, "wiki/index.md")
	require.FileExists(t, filepath.Join(root, "spaces/research/wiki/index.md"))
}

// TestOnlySDK enforces that the plugin reaches keel only through the public SDK: its
// (non-test) dependencies hold no kernel, host, extensions or adapters package.
func TestOnlySDK(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, dep := range strings.Fields(string(out)) {
		rest, ok := strings.CutPrefix(dep, "github.com/keelhq/keel/")
		if !ok || dep == "github.com/keelhq/keel/plugins/wiki" {
			continue
		}
		require.True(t, strings.HasPrefix(rest, "sdk/") || rest == "sdk", "the wiki plugin imports %s: only github.com/keelhq/keel/sdk is allowed", dep)
	}
}
