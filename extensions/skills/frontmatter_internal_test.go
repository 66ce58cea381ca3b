package skills

import (
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseFrontmatter(t *testing.T) {
	t.Parallel()
	t.Run("FlatNestedAndLists", func(t *testing.T) {
		t.Parallel()
		fm, err := ParseFrontmatter("---\r\n" +
			"name: pdf-tools   # a comment\r\n" +
			"description: \"Read: PDFs \\\"fast\\\"\"\r\n" +
			"slug: 'it''s'\r\n" +
			"version: 1.5\r\n" +
			"enabled: true\r\n" +
			"nothing: ~\r\n" +
			"url: https://example.com/a#b\r\n" +
			"metadata:\r\n" +
			"  skillKey: Acme/Tools/PDF\r\n" +
			"  service:\r\n" +
			"    key: acme/other\r\n" +
			"  tags: [a, \"b, c\", 3, {kind: url, url: 'https://x.test/y'}]\r\n" +
			"  empty: []\r\n" +
			"---\r\n" +
			"# Body\r\n")
		require.NoError(t, err)
		require.True(t, fm.Present)
		require.Equal(t, "# Body\n", fm.Body)
		f := fm.Fields
		require.Equal(t, "pdf-tools", f["name"])
		require.Equal(t, `Read: PDFs "fast"`, f["description"])
		require.Equal(t, "it's", f["slug"])
		require.Equal(t, 1.5, f["version"])
		require.Equal(t, true, f["enabled"])
		require.Nil(t, f["nothing"])
		require.Contains(t, f, "nothing")
		require.Equal(t, "https://example.com/a#b", f["url"])
		md := f["metadata"].(map[string]any)
		require.Equal(t, "Acme/Tools/PDF", md["skillKey"])
		require.Equal(t, map[string]any{"key": "acme/other"}, md["service"])
		require.Equal(t, []any{"a", "b, c", 3.0, map[string]any{"kind": "url", "url": "https://x.test/y"}}, md["tags"])
		require.Equal(t, []any{}, md["empty"])
		require.Empty(t, fm.Warnings)
	})
	t.Run("BlockScalarsAndWarnings", func(t *testing.T) {
		t.Parallel()
		fm, err := ParseFrontmatter("---\ndescription: >\n  one\n  two\n\n  three\nnotes: |\n  a\n    b\nlist:\n  - x\n  - y\nbad line\n---\nbody")
		require.NoError(t, err)
		require.Equal(t, "one two\nthree\n", fm.Fields["description"])
		require.Equal(t, "a\n  b\n", fm.Fields["notes"])
		require.Len(t, fm.Warnings, 3, "two block-list items and one stray line")
		require.Equal(t, "body", fm.Body)
	})
	t.Run("NoHeader", func(t *testing.T) {
		t.Parallel()
		for _, src := range []string{"# Just markdown\n", "---\nname: never closed\n", "", "--- \nname: x"} {
			fm, err := ParseFrontmatter(src)
			require.NoError(t, err)
			require.False(t, fm.Present, src)
			require.Equal(t, strings.TrimPrefix(src, "\ufeff"), fm.Body)
		}
	})
	t.Run("TooDeep", func(t *testing.T) {
		t.Parallel()
		_, err := ParseFrontmatter("---\nk: " + strings.Repeat("[", 40) + strings.Repeat("]", 40) + "\n---\n")
		require.NoError(t, err, "a bad literal is kept as text with a warning")
		var b strings.Builder
		b.WriteString("---\n")
		for i := 0; i < 20; i++ {
			b.WriteString(strings.Repeat(" ", i) + "k:\n")
		}
		b.WriteString(strings.Repeat(" ", 20) + "v: 1\n---\n")
		_, err = ParseFrontmatter(b.String())
		require.ErrorContains(t, err, "deeper")
	})
}

func TestParseSkillKeysAndSlugs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, src, slug, key string }{
		{"Plain", "---\nname: PDF Tools\n---\n", "pdf-tools", ""},
		{"SlugWins", "---\nname: PDF Tools\nslug: pdf\n---\n", "pdf", ""},
		{"BadSlugIgnored", "---\nname: PDF Tools\nslug: Not Kebab\n---\n", "pdf-tools", ""},
		{"Key", "---\nname: x\nkey: Acme/PDF\n---\n", "x", "acme/pdf"},
		{"SkillKey", "---\nname: x\nskillKey: acme/a\n---\n", "x", "acme/a"},
		{"MetadataSkillKey", "---\nname: x\nmetadata:\n  skillKey: acme/b\n---\n", "x", "acme/b"},
		{"CanonicalKey", "---\nname: x\nmetadata:\n  canonicalKey: acme/c\n---\n", "x", "acme/c"},
		{"ServicePrefixed", "---\nname: x\nmetadata:\n  serviceSkillKey: acme/d\n---\n", "x", "acme/d"},
		{"ServiceBlockSkillKey", "---\nname: x\nmetadata:\n  service:\n    skillKey: acme/e\n---\n", "x", "acme/e"},
		{"ServiceBlockKey", "---\nname: x\nmetadata:\n  service: {key: acme/f}\n---\n", "x", "acme/f"},
		{"BadKeyIgnored", "---\nname: x\nkey: 'no spaces allowed'\n---\n", "x", ""},
		{"FromFolder", "# no header\n", "my-folder", ""},
		{"Accents", "---\nname: Répörts Ü\n---\n", "reports-u", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := ParseSkill(tc.src)
			require.NoError(t, err)
			require.Equal(t, tc.slug, deriveSlug(p, "My Folder"))
			require.Equal(t, tc.key, p.KeyOverride)
		})
	}
	p, err := ParseSkill("---\nname: x\nmetadata:\n  sourceKind: bogus\n---\n")
	require.NoError(t, err)
	require.NotContains(t, p.Metadata, "sourceKind")
	require.Len(t, p.Warnings, 1)
}

func TestInventoryAndTrust(t *testing.T) {
	t.Parallel()
	md := map[string][]byte{SkillFile: []byte("x"), "references/a.md": []byte("a"), "notes.txt": []byte("n")}
	require.Equal(t, TrustMarkdownOnly, trustOf(inventory(md)))
	md["assets/logo.png"] = []byte{0x89, 'P'}
	require.Equal(t, TrustAssets, trustOf(inventory(md)))
	md["scripts/run"] = []byte("echo")
	require.Equal(t, TrustScripts, trustOf(inventory(md)))
	inv := inventory(md)
	require.Equal(t, InventoryEntry{Path: SkillFile, Kind: InvSkill, Size: 1}, inv[0])
	for p, want := range map[string]string{"references/x.json": InvReference, "tool.py": InvScript, "data.json": InvAsset,
		"docs/guide.md": InvReference, "bin/tool": InvScript} {
		require.Equal(t, want, classify(p, nil), p)
	}
	require.Equal(t, InvScript, classify("run", []byte("#!/bin/sh\n")))
}

func TestResolveSource(t *testing.T) {
	t.Parallel()
	web, _ := url.Parse("https://forge.test")
	reg, _ := url.Parse("https://registry.test")
	x := &Skills{ends: &Endpoints{ForgeAPI: "https://api.forge.test", ForgeRaw: "https://raw.forge.test", ForgeWeb: web, RegistryWeb: reg}}
	for _, tc := range []struct {
		in                             string
		typ, owner, repo, ref, p, skil string
	}{
		{in: "https://forge.test/acme/skills", typ: SourceForge, owner: "acme", repo: "skills"},
		{in: "https://www.forge.test/acme/skills.git", typ: SourceForge, owner: "acme", repo: "skills"},
		{in: "https://forge.test/acme/skills/tree/v1/pdf", typ: SourceForge, owner: "acme", repo: "skills", ref: "v1", p: "pdf"},
		{in: "https://forge.test/acme/skills/blob/main/a/b/SKILL.md", typ: SourceForge, owner: "acme", repo: "skills", ref: "main", p: "a/b"},
		{in: "acme/skills", typ: SourceForge, owner: "acme", repo: "skills"},
		{in: "acme/skills/pdf", typ: SourceForge, owner: "acme", repo: "skills", skil: "pdf"},
		{in: "https://registry.test/acme/skills/pdf", typ: SourceRegistrySite, owner: "acme", repo: "skills", skil: "pdf"},
		{in: "npx skills add acme/skills --skill pdf", typ: SourceRegistrySite, owner: "acme", repo: "skills", skil: "pdf"},
		{in: "npx -y skills@latest add https://forge.test/acme/skills -s=x --skill=pdf", typ: SourceRegistrySite, owner: "acme", repo: "skills", skil: "pdf"},
		{in: "https://cdn.test/x/pdf/SKILL.md", typ: SourceURL},
		{in: "/tmp/skills", typ: SourceLocalPath, p: "/tmp/skills"},
		{in: "file:///tmp/skills/SKILL.md", typ: SourceLocalPath, p: "/tmp/skills/SKILL.md"},
	} {
		src, err := x.resolveSource(tc.in)
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.typ, src.Type, tc.in)
		require.Equal(t, tc.owner, src.Owner, tc.in)
		require.Equal(t, tc.repo, src.Repo, tc.in)
		require.Equal(t, tc.ref, src.Ref, tc.in)
		require.Equal(t, tc.p, src.Path, tc.in)
		require.Equal(t, tc.skil, src.Skill, tc.in)
		if tc.typ == SourceRegistrySite {
			require.Equal(t, tc.in, src.Original)
		}
	}
	for _, in := range []string{"", "ftp://forge.test/a/b", "just-a-word", "npx skills list", "npx skills add ./local",
		"https://forge.test/acme", "https://forge.test/acme/skills/blob/main/README.md", "https://forge.test/acme/skills/pulls/1",
		"https://registry.test/acme", "javascript:alert(1)"} {
		_, err := x.resolveSource(in)
		require.Error(t, err, in)
	}
}

func FuzzParseFrontmatter(f *testing.F) {
	for _, seed := range []string{
		"---\nname: x\n---\nbody",
		"---\nmetadata:\n  a: [1, {b: 'c'}]\n  d:\n    e: \"f\\u00e9\"\n---\n",
		"---\nk: >\n  a\n\n  b\n---\n",
		"---\n- a\n  b: [\n---\n",
		"---\n\"q\": 'x''y'\n...\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, src string) {
		fm, err := ParseFrontmatter(src)
		if err != nil {
			return
		}
		if !fm.Present && fm.Body != strings.ReplaceAll(strings.TrimPrefix(src, "\ufeff"), "\r\n", "\n") {
			t.Fatalf("a file without a header is all body")
		}
		if _, err := ParseSkill(src); err != nil {
			t.Fatalf("ParseSkill failed where ParseFrontmatter did not: %v", err)
		}
	})
}
