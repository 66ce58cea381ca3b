package packages

import (
	"bytes"
	"context"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/keelhq/keel/kernel"
)

// DefaultNPMRegistry is the registry npm installs use unless SERVICE_NPM_REGISTRY says.
const DefaultNPMRegistry = "https://registry.npmjs.org"

// maxPackumentBytes caps a packument (abbreviated packuments of even large packages are
// far smaller).
const maxPackumentBytes = 32 << 20

// packument is the part of an npm registry packument keel reads.
type packument struct {
	Name     string                      `json:"name"`
	DistTags map[string]string           `json:"dist-tags"`
	Versions map[string]packumentVersion `json:"versions"`
}

type packumentVersion struct {
	Version string `json:"version"`
	Dist    struct {
		Tarball   string `json:"tarball"`
		Integrity string `json:"integrity"`
	} `json:"dist"`
}

// badGateway is a 502 about the registry.
func badGateway(format string, args ...any) *kernel.APIError {
	return kernel.NewAPIError(http.StatusBadGateway, fmt.Sprintf(format, args...)).WithCode("npm_registry_error")
}

// escapeNPMName escapes a package name for the registry URL: a scoped name keeps its @
// and has its slash escaped (@scope%2fname), as npm sends it.
func escapeNPMName(name string) string {
	if scope, rest, ok := strings.Cut(name, "/"); ok && strings.HasPrefix(scope, "@") {
		return "@" + url.PathEscape(scope[1:]) + "%2f" + url.PathEscape(rest)
	}
	return url.PathEscape(name)
}

// fetchNPM resolves name at version (an exact version or a dist-tag, default latest) on
// the registry, downloads its tarball within the size cap and checks it against the
// version's dist.integrity (sha512). It returns the tarball and the resolved version.
func (m *Manager) fetchNPM(ctx context.Context, name, version string) ([]byte, string, error) {
	if version == "" {
		version = "latest"
	}
	registry := strings.TrimRight(m.opts.NPMRegistry, "/")
	pURL := registry + "/" + escapeNPMName(name)
	body, status, err := m.get(ctx, pURL, "application/vnd.npm.install-v1+json; q=1.0, application/json; q=0.8, */*", maxPackumentBytes, m.opts.NPMTimeout)
	if err != nil {
		return nil, "", badGateway("npm registry %s is unreachable: %v", registry, err)
	}
	switch {
	case status == http.StatusNotFound:
		return nil, "", kernel.NotFound(fmt.Sprintf("npm package %s not found in %s", name, registry)).WithCode("npm_package_not_found")
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		hint := "set SERVICE_NPM_TOKEN for a private registry"
		if m.opts.NPMToken != "" {
			hint = "the SERVICE_NPM_TOKEN was refused"
		}
		return nil, "", badGateway("npm registry %s answered %d for %s (%s)", registry, status, name, hint).WithCode("npm_registry_unauthorized")
	case status != http.StatusOK:
		return nil, "", badGateway("npm registry %s answered %d for %s", registry, status, name)
	}
	var p packument
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, "", badGateway("npm registry %s sent a malformed packument for %s: %v", registry, name, err)
	}
	resolved := version
	if tagged, ok := p.DistTags[version]; ok {
		resolved = tagged
	}
	v, ok := p.Versions[resolved]
	if !ok {
		return nil, "", kernel.NotFound(fmt.Sprintf("npm package %s has no version or dist-tag %s", name, version)).WithCode("npm_version_not_found")
	}
	want, err := sha512Integrity(v.Dist.Integrity)
	if err != nil {
		return nil, "", badGateway("npm package %s@%s: %v; refused", name, resolved, err)
	}
	tURL, err := url.Parse(v.Dist.Tarball)
	if err != nil || (tURL.Scheme != "https" && tURL.Scheme != "http") || tURL.Host == "" {
		return nil, "", badGateway("npm package %s@%s has no usable tarball URL (%q)", name, resolved, v.Dist.Tarball)
	}
	tarball, status, err := m.get(ctx, tURL.String(), "application/octet-stream", m.opts.Limits.MaxArchiveBytes, m.opts.NPMTarballTimeout)
	var tooBig *tooLargeError
	switch {
	case errors.As(err, &tooBig):
		return nil, "", badPackage("npm tarball of %s@%s is larger than %d bytes", name, resolved, m.opts.Limits.MaxArchiveBytes)
	case err != nil:
		return nil, "", badGateway("error downloading the npm tarball of %s@%s: %v", name, resolved, err)
	case status != http.StatusOK:
		return nil, "", badGateway("npm registry answered %d for the tarball of %s@%s", status, name, resolved)
	}
	got := sha512.Sum512(tarball)
	if !bytes.Equal(got[:], want) {
		return nil, "", badGateway("npm tarball of %s@%s does not match its dist.integrity (sha512): refused", name, resolved).WithCode("npm_integrity_mismatch")
	}
	return tarball, resolved, nil
}

// sha512Integrity returns the sha512 digest of a subresource-integrity string, which may
// list several hashes ("sha512-… sha1-…").
func sha512Integrity(integrity string) ([]byte, error) {
	for _, part := range strings.Fields(integrity) {
		algo, digest, ok := strings.Cut(part, "-")
		if !ok || algo != "sha512" {
			continue
		}
		if i := strings.IndexByte(digest, '?'); i >= 0 {
			digest = digest[:i]
		}
		b, err := base64.StdEncoding.DecodeString(digest)
		if err != nil || len(b) != sha512.Size {
			return nil, errors.New("its dist.integrity sha512 is malformed")
		}
		return b, nil
	}
	return nil, errors.New("it has no sha512 dist.integrity")
}

// bearerTransport adds the registry token to requests for the registry's own scheme and
// host (port included) and to no other.
type bearerTransport struct {
	base                http.RoundTripper
	scheme, host, token string
}

func (t *bearerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != t.scheme || !strings.EqualFold(req.URL.Host, t.host) {
		return t.base.RoundTrip(req)
	}
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+t.token)
	return t.base.RoundTrip(r)
}

// String keeps the token out of any printed form of the transport.
func (t *bearerTransport) String() string { return "bearer(" + t.scheme + "://" + t.host + ")" }

type tooLargeError struct{ max int64 }

func (e *tooLargeError) Error() string { return fmt.Sprintf("response larger than %d bytes", e.max) }

// get fetches a URL within a time limit and a size cap.
func (m *Manager) get(ctx context.Context, u, accept string, maxBytes int64, timeout time.Duration) ([]byte, int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Accept", accept)
	req.Header.Set("User-Agent", "keel/"+kernel.Version)
	res, err := m.opts.HTTPClient.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
		return nil, res.StatusCode, nil
	}
	if res.ContentLength > maxBytes {
		return nil, res.StatusCode, &tooLargeError{maxBytes}
	}
	b, err := io.ReadAll(io.LimitReader(res.Body, maxBytes+1))
	if err != nil {
		return nil, res.StatusCode, err
	}
	if int64(len(b)) > maxBytes {
		return nil, res.StatusCode, &tooLargeError{maxBytes}
	}
	return b, res.StatusCode, nil
}

// urlParse checks a registry base URL and returns it without a trailing slash.
func urlParse(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", errors.New("not an http(s) URL")
	}
	return strings.TrimRight(raw, "/"), nil
}
