package packages_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/host/packages"
	"github.com/keelhq/keel/kernel"
)

func TestInstallLocalPath(t *testing.T) {
	t.Parallel()
	k := newKernel(t)
	m := newManager(t, k)
	ctx := context.Background()
	local := func(p string) packages.Request { return packages.Request{PackageName: p, IsLocalPath: true} }

	t.Run("RuleTwoTexts", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		file := filepath.Join(dir, "notes.txt")
		require.NoError(t, os.WriteFile(file, []byte("x"), 0o644))
		require.NoError(t, os.Symlink(file, filepath.Join(dir, "link-to-file")))
		wd, err := os.Getwd()
		require.NoError(t, err)

		_, err = m.Install(ctx, local(dir+"/a\x00b"))
		requireAPIError(t, err, http.StatusBadRequest, "Invalid localPath: path contains a null byte")
		_, err = m.Install(ctx, local(filepath.Join(dir, "missing", "..", "gone")))
		requireAPIError(t, err, http.StatusBadRequest, "Invalid localPath: path does not exist: "+filepath.Join(dir, "gone"))
		_, err = m.Install(ctx, local("relative/missing"))
		requireAPIError(t, err, http.StatusBadRequest, "Invalid localPath: path does not exist: "+filepath.Join(wd, "relative/missing"))
		_, err = m.Install(ctx, local(filepath.Join(dir, "notes.txt", "below")))
		requireAPIError(t, err, http.StatusBadRequest, "Invalid localPath: path does not exist: "+filepath.Join(dir, "notes.txt", "below"))
		_, err = m.Install(ctx, local(filepath.Join(dir, "link-to-file")))
		requireAPIError(t, err, http.StatusBadRequest, "Invalid localPath: path is not a directory: "+file)
		_, err = m.Install(ctx, local(""))
		requireAPIError(t, err, http.StatusBadRequest, "packageName is required")
	})

	t.Run("RuleTwoNotReadable", func(t *testing.T) {
		t.Parallel()
		if os.Geteuid() == 0 {
			t.Skip("root reads every directory; TestNotReadableText covers the text")
		}
		dir := filepath.Join(t.TempDir(), "locked")
		require.NoError(t, os.Mkdir(dir, 0o000))
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
		_, err := m.Install(ctx, local(dir))
		requireAPIError(t, err, http.StatusBadRequest, "Invalid localPath: path is not readable: "+dir)
	})

	t.Run("CanonicalPathOnly", func(t *testing.T) {
		t.Parallel()
		dir := writeDir(t, wasmFiles("test.canonical"))
		link := filepath.Join(t.TempDir(), "via-link")
		require.NoError(t, os.Symlink(dir, link))
		pkg, err := m.Install(ctx, local(link+"/../via-link/."))
		require.NoError(t, err)
		real, err := filepath.EvalSymlinks(dir)
		require.NoError(t, err)
		require.Equal(t, real, pkg.PackageName, "the loader sees only the canonical path")
		require.Equal(t, packages.SourcePath, pkg.Source)
		require.Equal(t, "1.0.0", pkg.Version)
		require.Equal(t, filepath.Join(m.PackagesDir(), pkg.Digest), pkg.Dir)
		require.FileExists(t, filepath.Join(pkg.Dir, "manifest.json"))
		row, err := k.ExtensionPackageGetInfo(ctx, pkg.Digest)
		require.NoError(t, err)
		require.Equal(t, "test.canonical", row.PluginKey)
		require.Equal(t, real, row.PackageName)
	})

	t.Run("DirectoryChecksumsFilledIn", func(t *testing.T) {
		t.Parallel()
		files := wasmFiles("test.fill")
		files[0].body = strings.Replace(files[0].body, `,"sha256":"`+sum256([]byte(files[1].body))+`"`, "", 1)
		require.NotContains(t, files[0].body, "sha256")
		pkg, err := m.Install(ctx, local(writeDir(t, files)))
		require.NoError(t, err)
		require.Equal(t, sum256([]byte(files[1].body)), pkg.Manifest.Runtime.SHA256)
		stored, err := os.ReadFile(filepath.Join(pkg.Dir, "manifest.json"))
		require.NoError(t, err)
		require.Contains(t, string(stored), sum256([]byte(files[1].body)))
		require.Equal(t, stored, pkg.ManifestJSON)
	})

	t.Run("ChecksumMismatchRefused", func(t *testing.T) {
		t.Parallel()
		files := wasmFiles("test.mismatch")
		files[1].body += "tampered"
		_, err := m.Install(ctx, local(writeDir(t, files)))
		requireAPIErrorContains(t, err, http.StatusBadRequest, "package test.mismatch: module m.wasm does not match its sha256")
	})

	t.Run("ArchivesNeedChecksums", func(t *testing.T) {
		t.Parallel()
		files := wasmFiles("test.nosum")
		files[0].body = strings.Replace(files[0].body, `,"sha256":"`+sum256([]byte(files[1].body))+`"`, "", 1)
		_, err := m.Install(ctx, local(writeFile(t, "p.tgz", makeTgz(t, files))))
		requireAPIErrorContains(t, err, http.StatusBadRequest, "module m.wasm has no sha256 in the manifest")
	})

	t.Run("SameContentSameDigestInEveryForm", func(t *testing.T) {
		t.Parallel()
		files := wasmFiles("test.forms", entry{name: "ui/panel.js", body: "export default 1"}, entry{name: "README.md", body: "# forms"})
		var digests []string
		for _, p := range []string{
			writeDir(t, files),
			writeFile(t, "p.tgz", makeTgz(t, files)),
			writeFile(t, "p.tar.gz", makeTgz(t, prefixed("package/", files))),
			writeFile(t, "p.zip", makeZip(t, prefixed("forms/", files))),
		} {
			pkg, err := m.Install(ctx, local(p))
			require.NoError(t, err, p)
			digests = append(digests, pkg.Digest)
			b, err := os.ReadFile(filepath.Join(pkg.Dir, "ui", "panel.js"))
			require.NoError(t, err)
			require.Equal(t, "export default 1", string(b))
		}
		for _, d := range digests {
			require.Equal(t, digests[0], d)
		}
	})

	t.Run("ProcessArtifactsPerPlatform", func(t *testing.T) {
		t.Parallel()
		files := processFiles("test.proc", "linux-amd64", "linux-arm64", "darwin-arm64")
		pkg, err := m.Install(ctx, local(writeFile(t, "p.tgz", makeTgz(t, files))))
		require.NoError(t, err)
		for _, f := range files[1:] {
			info, err := os.Stat(filepath.Join(pkg.Dir, f.name))
			require.NoError(t, err)
			require.Equal(t, os.FileMode(0o755), info.Mode().Perm(), "executables are 0755 whatever the archive said")
		}
		info, err := os.Stat(filepath.Join(pkg.Dir, "manifest.json"))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o644), info.Mode().Perm())

		_, err = m.Install(ctx, local(writeFile(t, "p.tgz", makeTgz(t, processFiles("test.elsewhere", "plan9-mips")))))
		requireAPIErrorContains(t, err, http.StatusBadRequest, "package test.elsewhere has no executable for")
	})

	t.Run("NotAKeelPackage", func(t *testing.T) {
		t.Parallel()
		_, err := m.Install(ctx, local(writeFile(t, "p.tgz", makeTgz(t, []entry{{name: "package/package.json", body: `{"name":"x"}`}}))))
		requireAPIErrorContains(t, err, http.StatusBadRequest, "not a keel package: no manifest.json")
		_, err = m.Install(ctx, local(writeDir(t, []entry{{name: "index.js", body: "1"}})))
		requireAPIErrorContains(t, err, http.StatusBadRequest, "not a keel package")
		bad := wasmFiles("test.bad")
		bad[0].body = strings.Replace(bad[0].body, `"kind":"plugin"`, `"kind":"plugin","bogus":1`, 1)
		_, err = m.Install(ctx, local(writeDir(t, bad)))
		requireAPIErrorContains(t, err, http.StatusBadRequest, "bogus")
	})

	t.Run("InstallTwiceIsIdempotent", func(t *testing.T) {
		t.Parallel()
		dir := writeDir(t, wasmFiles("test.twice"))
		a, err := m.Install(ctx, local(dir))
		require.NoError(t, err)
		b, err := m.Install(ctx, local(dir))
		require.NoError(t, err)
		require.Equal(t, a.Digest, b.Digest)
		require.Equal(t, a.Dir, b.Dir)
	})
}

func TestArchiveSafety(t *testing.T) {
	t.Parallel()
	k := newKernel(t)
	m := newManager(t, k, func(o *packages.Options) {
		o.Limits = packages.Limits{MaxFiles: 8, MaxUnpackedBytes: 64 << 10, MaxArchiveBytes: 32 << 10}
	})
	ctx := context.Background()
	ok := wasmFiles("test.safe")
	for name, tc := range map[string]struct {
		archive []byte
		want    string
	}{
		"ZipSlipTar":          {makeTgz(t, append(ok, entry{name: "../evil", body: "x"})), `package entry "../evil" escapes the package`},
		"ZipSlipInside":       {makeTgz(t, append(ok, entry{name: "ui/../../evil", body: "x"})), "escapes the package"},
		"ZipSlipZip":          {makeZip(t, append(ok, entry{name: "../../evil", body: "x"})), "escapes the package"},
		"AbsolutePath":        {makeTgz(t, append(ok, entry{name: "/etc/cron.d/evil", body: "x"})), "is an absolute path"},
		"BackslashPath":       {makeZip(t, append(ok, entry{name: `..\evil`, body: "x"})), "not a portable relative path"},
		"SymlinkEscapes":      {makeTgz(t, append(ok, entry{name: "ui/passwd", link: "../../etc/passwd"})), "escapes the package"},
		"SymlinkAbsolute":     {makeTgz(t, append(ok, entry{name: "passwd", link: "/etc/passwd"})), "escapes the package"},
		"ZipSymlinkEscapes":   {makeZip(t, append(ok, entry{name: "passwd", link: "../x"})), "escapes the package"},
		"SymlinkToNothing":    {makeTgz(t, append(ok, entry{name: "x", link: "nothing"})), "not a file in the package"},
		"HardLinkOutside":     {makeTgz(t, prefixed("package/", append(ok, entry{name: "x", link: "../etc/passwd", hard: true}))), "links outside the package"},
		"TooManyFiles":        {makeTgz(t, append(ok, manyFiles(10)...)), "package has more than 8 files"},
		"TooBigUnpacked":      {makeTgz(t, append(ok, entry{name: "big", body: strings.Repeat("a", 65<<10)})), "package unpacks to more than 65536 bytes"},
		"TooBigArchive":       {append(makeTgz(t, ok), make([]byte, 33<<10)...), "package archive is larger than 32768 bytes"},
		"DuplicateEntry":      {makeTgz(t, append(ok, entry{name: "m.wasm", body: "other"})), `package entry "m.wasm" appears twice`},
		"NotAnArchive":        {[]byte("just some text that is not an archive at all"), "package archive is not a .tgz, .tar or .zip"},
		"TruncatedGzip":       {makeTgz(t, ok)[:40], "package archive is"},
		"TwoTopLevelFolders":  {makeTgz(t, append(prefixed("a/", ok), entry{name: "b/x", body: "1"})), "not a keel package"},
		"ManifestOnlyInDepth": {makeTgz(t, prefixed("a/b/", ok)), "not a keel package"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := m.Install(ctx, packages.Request{PackageName: writeFile(t, "p.tgz", tc.archive), IsLocalPath: true})
			requireAPIErrorContains(t, err, http.StatusBadRequest, tc.want)
			entries, _ := os.ReadDir(m.PackagesDir())
			for _, e := range entries {
				require.False(t, strings.HasPrefix(e.Name(), ".tmp-"), "no temporary directory is left behind")
			}
		})
	}

	t.Run("SymlinkInsideBecomesACopy", func(t *testing.T) {
		t.Parallel()
		files := append(wasmFiles("test.links"), entry{name: "ui/a.js", body: "A"}, entry{name: "ui/b.js", link: "a.js"}, entry{name: "c.js", link: "ui/b.js"})
		pkg, err := m.Install(ctx, packages.Request{PackageName: writeFile(t, "p.tgz", makeTgz(t, files)), IsLocalPath: true})
		require.NoError(t, err)
		for _, name := range []string{"ui/b.js", "c.js"} {
			info, err := os.Lstat(filepath.Join(pkg.Dir, name))
			require.NoError(t, err)
			require.True(t, info.Mode().IsRegular(), "%s is a regular file, not a link", name)
			b, _ := os.ReadFile(filepath.Join(pkg.Dir, name))
			require.Equal(t, "A", string(b))
		}
	})

	t.Run("DirectorySymlinkEscapes", func(t *testing.T) {
		t.Parallel()
		dir := writeDir(t, wasmFiles("test.dirlink"))
		outside := writeFile(t, "secret", []byte("secret"))
		require.NoError(t, os.Symlink(outside, filepath.Join(dir, "secret")))
		_, err := m.Install(ctx, packages.Request{PackageName: dir, IsLocalPath: true})
		requireAPIErrorContains(t, err, http.StatusBadRequest, "package file secret is a symlink that escapes the package")
	})
}

func manyFiles(n int) []entry {
	out := make([]entry, n)
	for i := range out {
		out[i] = entry{name: "f/" + strings.Repeat("x", i+1), body: "1"}
	}
	return out
}

func TestCloudManaged(t *testing.T) {
	t.Parallel()
	k := newKernel(t)
	root := t.TempDir()
	for _, rel := range []string{"examples/hello", "plugins/group/wiki"} {
		require.NoError(t, os.MkdirAll(filepath.Join(root, rel), 0o755))
		for _, f := range wasmFiles("test.cloud_" + filepath.Base(rel)) {
			require.NoError(t, os.WriteFile(filepath.Join(root, rel, f.name), []byte(f.body), 0o644))
		}
	}
	m := newManager(t, k, func(o *packages.Options) { o.CloudManaged, o.BundledRoot = true, root })
	ctx := context.Background()

	for _, rel := range []string{"examples/hello", "plugins/group/wiki", "examples/../plugins/group/wiki"} {
		_, err := m.Install(ctx, packages.Request{PackageName: filepath.Join(root, rel), IsLocalPath: true})
		require.NoError(t, err, rel)
	}
	for _, p := range []string{root, filepath.Join(root, "examples"), filepath.Join(root, "plugins"), writeDir(t, wasmFiles("test.outside"))} {
		_, err := m.Install(ctx, packages.Request{PackageName: p, IsLocalPath: true})
		requireAPIError(t, err, http.StatusForbidden, "cloud-managed instances may only install plugins from the bundled plugin catalog")
	}
	_, err := m.Install(ctx, packages.Request{PackageName: "keel-plugin-x"})
	requireAPIError(t, err, http.StatusForbidden, "npm installs are disabled on cloud-managed instances; only plugins bundled with the application may be installed")
	// Rule 2 still comes first for local paths.
	_, err = m.Install(ctx, packages.Request{PackageName: filepath.Join(root, "examples", "missing"), IsLocalPath: true})
	requireAPIError(t, err, http.StatusBadRequest, "Invalid localPath: path does not exist: "+filepath.Join(root, "examples", "missing"))
}

func TestSharedStorage(t *testing.T) {
	t.Parallel()
	k := newKernel(t)
	nodeA, nodeB := newManager(t, k), newManager(t, k)
	ctx := context.Background()
	files := processFiles("test.shared", "linux-amd64", "linux-arm64", "darwin-arm64", "darwin-amd64")
	pkg, err := nodeA.Install(ctx, packages.Request{PackageName: writeFile(t, "p.zip", makeZip(t, files)), IsLocalPath: true})
	require.NoError(t, err)

	// Node B has no copy and no shared disk: it materialises from the row alone.
	got, err := nodeB.Materialise(ctx, pkg.Digest)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(nodeB.PackagesDir(), pkg.Digest), got.Dir)
	require.NotEqual(t, pkg.Dir, got.Dir)
	require.Equal(t, pkg.ManifestJSON, got.ManifestJSON)
	require.Equal(t, packages.SourcePath, got.Source)
	require.Equal(t, "2.0.0", got.Version)
	for _, f := range files[1:] {
		b, err := os.ReadFile(filepath.Join(got.Dir, f.name))
		require.NoError(t, err)
		require.Equal(t, f.body, string(b))
		info, _ := os.Stat(filepath.Join(got.Dir, f.name))
		require.Equal(t, os.FileMode(0o755), info.Mode().Perm())
	}

	t.Run("Idempotent", func(t *testing.T) {
		again, err := nodeB.Materialise(ctx, pkg.Digest)
		require.NoError(t, err)
		require.Equal(t, got.Dir, again.Dir)
	})

	t.Run("DamagedCopyRewritten", func(t *testing.T) {
		exe, _, _ := got.Manifest.Runtime.ExecutableFor(hostPlatformForTest())
		require.NoError(t, os.WriteFile(filepath.Join(got.Dir, exe), []byte("replaced"), 0o755))
		again, err := nodeB.Materialise(ctx, pkg.Digest)
		require.NoError(t, err)
		b, err := os.ReadFile(filepath.Join(again.Dir, exe))
		require.NoError(t, err)
		require.Equal(t, sum256(b), got.Manifest.Runtime.Artifacts[hostPlatformForTest()].SHA256)

		require.NoError(t, os.Remove(filepath.Join(got.Dir, exe)))
		_, err = nodeB.Materialise(ctx, pkg.Digest)
		require.NoError(t, err)
		require.FileExists(t, filepath.Join(got.Dir, exe), "a missing artifact is restored")

		// Install finds a damaged copy too.
		require.NoError(t, os.WriteFile(filepath.Join(pkg.Dir, exe), []byte("replaced"), 0o755))
		_, err = nodeA.Install(ctx, packages.Request{PackageName: writeFile(t, "p.zip", makeZip(t, files)), IsLocalPath: true})
		require.NoError(t, err)
		b, err = os.ReadFile(filepath.Join(pkg.Dir, exe))
		require.NoError(t, err)
		require.Equal(t, sum256(b), got.Manifest.Runtime.Artifacts[hostPlatformForTest()].SHA256)
	})

	t.Run("BadDigest", func(t *testing.T) {
		_, err := nodeB.Materialise(ctx, "../../etc")
		requireAPIErrorContains(t, err, http.StatusBadRequest, "digest")
		_, err = nodeB.Materialise(ctx, strings.Repeat("0", 64))
		requireAPIError(t, err, http.StatusNotFound, "Package not found")
	})

	t.Run("Remove", func(t *testing.T) {
		require.NoError(t, nodeA.Remove(ctx, pkg.Digest))
		require.NoDirExists(t, pkg.Dir)
		row, err := k.ExtensionPackageGetInfo(ctx, pkg.Digest)
		require.NoError(t, err)
		require.Nil(t, row)
		// Node B's copy goes the next time it is asked for.
		_, err = nodeB.Materialise(ctx, pkg.Digest)
		requireAPIError(t, err, http.StatusNotFound, "Package not found")
		require.NoDirExists(t, got.Dir)
		require.NoError(t, nodeA.Remove(ctx, pkg.Digest), "removing twice is fine")
	})
}

func TestCorruptStoredPackageRefused(t *testing.T) {
	t.Parallel()
	k := newKernel(t)
	m := newManager(t, k)
	ctx := context.Background()
	pkg, err := m.Install(ctx, packages.Request{PackageName: writeDir(t, wasmFiles("test.corrupt")), IsLocalPath: true})
	require.NoError(t, err)
	_, err = k.Pool.Exec(ctx, `UPDATE kernel.extension_packages SET archive = archive || '\x00'::bytea, size_bytes = size_bytes + 1 WHERE digest = $1`, pkg.Digest)
	require.NoError(t, err)
	_, err = newManager(t, k).Materialise(ctx, pkg.Digest)
	require.ErrorContains(t, err, "does not match its digest")
	require.Equal(t, http.StatusInternalServerError, kernel.AsAPIError(err).Status, "a damaged store is the server's fault")
}

func hostPlatformForTest() string { return packages.HostPlatform }

// TestNotReadableText checks rule 2's last text where the test cannot make a directory
// unreadable (root).
func TestNotReadableText(t *testing.T) {
	dir := t.TempDir()
	real, err := filepath.EvalSymlinks(dir)
	require.NoError(t, err)
	saved := *packages.ReadableDir
	*packages.ReadableDir = func(d string) bool { return d != real }
	defer func() { *packages.ReadableDir = saved }()
	_, _, err = packages.CanonicalLocalPath(dir)
	requireAPIError(t, err, http.StatusBadRequest, "Invalid localPath: path is not readable: "+real)
}
