package skills

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// Fetch limits: one skill import reads a handful of small files.
const (
	fetchTimeout      = 20 * time.Second
	fetchMaxBytes     = 2 << 20  // one response
	importMaxBytes    = 16 << 20 // one import, all files
	importMaxFiles    = 200      // files per skill
	importMaxSkills   = 100      // skills per import
	fetchMaxRedirects = 5
)

// Environment settings of the forge and the registry site (tests point them at a local
// server; the defaults are the public forge).
const (
	EnvForgeAPI    = "SERVICE_SKILLS_FORGE_API_URL"
	EnvForgeRaw    = "SERVICE_SKILLS_FORGE_RAW_URL"
	EnvForgeWeb    = "SERVICE_SKILLS_FORGE_WEB_URL"
	EnvRegistryWeb = "SERVICE_SKILLS_REGISTRY_URL"
)

// Endpoints are the forge and registry base URLs.
type Endpoints struct {
	ForgeAPI    string
	ForgeRaw    string
	ForgeWeb    *url.URL
	RegistryWeb *url.URL
}

// endpointsFromEnv reads the endpoints from the environment.
func endpointsFromEnv() (*Endpoints, error) {
	get := func(k, def string) string {
		if v := strings.TrimSpace(os.Getenv(k)); v != "" {
			return strings.TrimRight(v, "/")
		}
		return def
	}
	web, err := url.Parse(get(EnvForgeWeb, "https://github.com"))
	if err != nil {
		return nil, fmt.Errorf("error reading %s: %w", EnvForgeWeb, err)
	}
	reg, err := url.Parse(get(EnvRegistryWeb, "https://skills.sh"))
	if err != nil {
		return nil, fmt.Errorf("error reading %s: %w", EnvRegistryWeb, err)
	}
	return &Endpoints{ForgeAPI: get(EnvForgeAPI, "https://api.github.com"), ForgeRaw: get(EnvForgeRaw, "https://raw.githubusercontent.com"),
		ForgeWeb: web, RegistryWeb: reg}, nil
}

// fetcher is the one network client of skill imports: http and https only, a timeout per
// request, a size cap per response, and no redirect to another scheme.
type fetcher struct {
	client *http.Client
	max    int64
}

// errRedirectScheme refuses a redirect that changes the scheme.
var errRedirectScheme = errors.New("redirect to another scheme refused")

// newFetcher returns the client.
func newFetcher() *fetcher {
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 15 * time.Second,
		MaxIdleConns:          8,
		IdleConnTimeout:       30 * time.Second,
	}
	return &fetcher{max: fetchMaxBytes, client: &http.Client{Transport: tr, Timeout: fetchTimeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= fetchMaxRedirects {
				return fmt.Errorf("more than %d redirects", fetchMaxRedirects)
			}
			if req.URL.Scheme != via[0].URL.Scheme {
				return errRedirectScheme
			}
			return nil
		}}}
}

// fetchError is a fetch that failed with a status (404 means "not there").
type fetchError struct {
	URL    string
	Status int
}

func (e *fetchError) Error() string { return fmt.Sprintf("GET %s answered %d", e.URL, e.Status) }

// get reads a URL's body, at most f.max bytes.
func (f *fetcher) get(ctx context.Context, rawURL string, accept string) ([]byte, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("refusing to fetch %q: only http and https URLs", rawURL)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("error building request for %s: %w", rawURL, err)
	}
	req.Header.Set("User-Agent", "keel-skills/0.1")
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	res, err := f.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("error fetching %s: %w", rawURL, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
		return nil, &fetchError{URL: rawURL, Status: res.StatusCode}
	}
	if res.ContentLength > f.max {
		return nil, fmt.Errorf("%s is larger than %d bytes", rawURL, f.max)
	}
	b, err := io.ReadAll(io.LimitReader(res.Body, f.max+1))
	if err != nil {
		return nil, fmt.Errorf("error reading %s: %w", rawURL, err)
	}
	if int64(len(b)) > f.max {
		return nil, fmt.Errorf("%s is larger than %d bytes", rawURL, f.max)
	}
	return b, nil
}
