package packages_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/host/packages"
)

func TestNPMInstall(t *testing.T) {
	t.Parallel()
	k := newKernel(t)
	reg := newRegistry(t)
	m := newManager(t, k, func(o *packages.Options) { o.NPMRegistry = reg.srv.URL + "/" })
	ctx := context.Background()
	const scoped = "@keel-test/counter"
	reg.publish(scoped, "1.0.0", makeTgz(t, prefixed("package/", wasmFiles("test.npm_one"))))
	reg.publish(scoped, "1.1.0", makeTgz(t, prefixed("package/", wasmFiles("test.npm_two"))), "beta")
	reg.publish(scoped, "0.9.0", makeTgz(t, prefixed("package/", wasmFiles("test.npm_old"))))
	reg.tags[scoped]["latest"] = "1.0.0"
	reg.publish("plain-keel-pkg", "3.0.0", makeTgz(t, prefixed("package/", processFiles("test.npm_proc", packages.HostPlatform))))
	reg.publish("left-pad", "1.3.0", makeTgz(t, []entry{{name: "package/package.json", body: `{"name":"left-pad"}`}, {name: "package/index.js", body: "module.exports = 1"}}))
	reg.publish("tampered-pkg", "1.0.0", makeTgz(t, prefixed("package/", wasmFiles("test.npm_tampered"))))
	reg.tamper["tampered-pkg@1.0.0"] = true

	t.Run("LatestByDefault", func(t *testing.T) {
		pkg, err := m.Install(ctx, packages.Request{PackageName: scoped})
		require.NoError(t, err)
		require.Equal(t, "test.npm_one", pkg.Manifest.Key)
		require.Equal(t, "1.0.0", pkg.Version)
		require.Equal(t, scoped, pkg.PackageName)
		require.Equal(t, packages.SourceNPM, pkg.Source)
		require.Contains(t, reg.paths, "/@keel-test%2fcounter", "scoped names are escaped as npm does")
	})
	t.Run("DistTag", func(t *testing.T) {
		pkg, err := m.Install(ctx, packages.Request{PackageName: scoped, Version: "beta"})
		require.NoError(t, err)
		require.Equal(t, "1.1.0", pkg.Version)
		require.Equal(t, "test.npm_two", pkg.Manifest.Key)
	})
	t.Run("ExactVersion", func(t *testing.T) {
		pkg, err := m.Install(ctx, packages.Request{PackageName: scoped, Version: "0.9.0"})
		require.NoError(t, err)
		require.Equal(t, "test.npm_old", pkg.Manifest.Key)
		pkg, err = m.Install(ctx, packages.Request{PackageName: scoped + "@1.1.0"})
		require.NoError(t, err, "name@version is split when no version is given")
		require.Equal(t, "1.1.0", pkg.Version)
	})
	t.Run("ProcessPackage", func(t *testing.T) {
		pkg, err := m.Install(ctx, packages.Request{PackageName: "plain-keel-pkg"})
		require.NoError(t, err)
		require.Equal(t, "3.0.0", pkg.Version)
		require.Contains(t, reg.paths, "/plain-keel-pkg")
	})
	t.Run("TamperedTarballRefused", func(t *testing.T) {
		_, err := m.Install(ctx, packages.Request{PackageName: "tampered-pkg"})
		requireAPIError(t, err, http.StatusBadGateway, "npm tarball of tampered-pkg@1.0.0 does not match its dist.integrity (sha512): refused")
	})
	t.Run("NotAKeelPackage", func(t *testing.T) {
		_, err := m.Install(ctx, packages.Request{PackageName: "left-pad"})
		requireAPIError(t, err, http.StatusBadRequest, "npm package left-pad@1.3.0 is not a keel package: it has no manifest.json")
	})
	t.Run("UnknownPackageAndVersion", func(t *testing.T) {
		_, err := m.Install(ctx, packages.Request{PackageName: "no-such-pkg"})
		requireAPIError(t, err, http.StatusNotFound, "npm package no-such-pkg not found in "+reg.srv.URL)
		_, err = m.Install(ctx, packages.Request{PackageName: scoped, Version: "9.9.9"})
		requireAPIError(t, err, http.StatusNotFound, "npm package @keel-test/counter has no version or dist-tag 9.9.9")
	})
	t.Run("RuleOne", func(t *testing.T) {
		for _, c := range []string{"<", ">", ":", `"`, "|", "?", "*"} {
			_, err := m.Install(ctx, packages.Request{PackageName: "bad" + c + "name"})
			requireAPIError(t, err, http.StatusBadRequest, "packageName contains invalid characters")
		}
		for _, name := range []string{"Upper", "a b", "../etc", "@scope", "a/b", ".hidden"} {
			_, err := m.Install(ctx, packages.Request{PackageName: name})
			requireAPIErrorContains(t, err, http.StatusBadRequest, "packageName is not a valid npm package name")
		}
	})
	t.Run("RegistryDown", func(t *testing.T) {
		down := newManager(t, k, func(o *packages.Options) { o.NPMRegistry = "http://127.0.0.1:1" })
		_, err := down.Install(ctx, packages.Request{PackageName: "anything"})
		requireAPIErrorContains(t, err, http.StatusBadGateway, "npm registry http://127.0.0.1:1 is unreachable")
	})
	t.Run("TarballTooLarge", func(t *testing.T) {
		small := newManager(t, k, func(o *packages.Options) {
			o.NPMRegistry = reg.srv.URL
			o.Limits.MaxArchiveBytes = 64
		})
		_, err := small.Install(ctx, packages.Request{PackageName: "plain-keel-pkg"})
		requireAPIError(t, err, http.StatusBadRequest, "npm tarball of plain-keel-pkg@3.0.0 is larger than 64 bytes")
	})
}

// TestNPMToken installs from a private registry: the token goes to the registry's host as
// a bearer token and to no other host (a tarball served elsewhere gets none); without it,
// or with a wrong one, the refusal says so.
func TestNPMToken(t *testing.T) {
	t.Parallel()
	k := newKernel(t)
	reg, cdn := newRegistry(t), newRegistry(t)
	reg.token = "s3cret-npm-token"
	tgz := makeTgz(t, prefixed("package/", wasmFiles("test.npm_private")))
	reg.publish("private-pkg", "1.0.0", tgz)
	reg.publish("elsewhere-pkg", "1.0.0", tgz)
	cdn.publish("elsewhere-pkg", "1.0.0", tgz)
	ctx := context.Background()

	t.Run("NoToken", func(t *testing.T) {
		m := newManager(t, k, func(o *packages.Options) { o.NPMRegistry = reg.srv.URL })
		_, err := m.Install(ctx, packages.Request{PackageName: "private-pkg"})
		requireAPIErrorContains(t, err, http.StatusBadGateway, "answered 401 for private-pkg (set SERVICE_NPM_TOKEN for a private registry)")
	})
	t.Run("WrongToken", func(t *testing.T) {
		m := newManager(t, k, func(o *packages.Options) { o.NPMRegistry = reg.srv.URL; o.NPMToken = "wrong" })
		_, err := m.Install(ctx, packages.Request{PackageName: "private-pkg"})
		requireAPIErrorContains(t, err, http.StatusBadGateway, "(the SERVICE_NPM_TOKEN was refused)")
		require.NotContains(t, err.Error(), "wrong", "the token is never in an error")
	})
	t.Run("Token", func(t *testing.T) {
		m := newManager(t, k, func(o *packages.Options) { o.NPMRegistry = reg.srv.URL; o.NPMToken = reg.token })
		pkg, err := m.Install(ctx, packages.Request{PackageName: "private-pkg"})
		require.NoError(t, err)
		require.Equal(t, "test.npm_private", pkg.Manifest.Key)
	})
	t.Run("OnlyToTheRegistryHost", func(t *testing.T) {
		reg.mu.Lock()
		reg.tarballs = cdn.srv.URL
		reg.mu.Unlock()
		m := newManager(t, k, func(o *packages.Options) { o.NPMRegistry = reg.srv.URL; o.NPMToken = reg.token })
		_, err := m.Install(ctx, packages.Request{PackageName: "elsewhere-pkg"})
		require.NoError(t, err)
		cdn.mu.Lock()
		defer cdn.mu.Unlock()
		require.NotEmpty(t, cdn.auths, "the tarball came from the other host")
		for _, a := range cdn.auths {
			require.Empty(t, a, "no token to another host")
		}
	})
}
