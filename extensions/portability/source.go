package portability

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/keelhq/keel/sdk"
)

// Package limits: an import reads at most this much, from at most this many files.
const (
	maxPackageBytes = 1 << 30
	maxPackageFiles = 500_000
	maxZipBytes     = 512 << 20
	fetchTimeout    = 30 * time.Second
	fetchMaxBytes   = 64 << 20
)

// Forge endpoints, shared with the skills importer's settings (tests point them at a local
// server; the defaults are the public forge).
const (
	EnvForgeAPI = "SERVICE_SKILLS_FORGE_API_URL"
	EnvForgeRaw = "SERVICE_SKILLS_FORGE_RAW_URL"
	EnvForgeWeb = "SERVICE_SKILLS_FORGE_WEB_URL"
)

// Error texts of bad sources.
const (
	msgGenericURL   = "Only code-forge URLs or owner/repo shorthands are accepted as remote import sources"
	msgNotDirectory = "Import path is not a directory or a zip file"
	msgTooLarge     = "Import package exceeds %d bytes"
)

// endpoints are the forge's base URLs.
type endpoints struct {
	API string
	Raw string
	Web *url.URL
}

func endpointsFromEnv() (*endpoints, error) {
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
	return &endpoints{API: get(EnvForgeAPI, "https://api.github.com"), Raw: get(EnvForgeRaw, "https://raw.githubusercontent.com"), Web: web}, nil
}

// Source is where an import reads its package: a string (a local path to a directory or a
// .zip, a forge URL, or owner/repo[/path]) or an object {type: local|zip|forge|inline, …}.
type Source struct {
	Type string `json:"type" jsonschema:"enum=local,enum=zip,enum=forge,enum=github,enum=inline"`
	// Path is a directory or a .zip file on the server (local).
	Path string `json:"path,omitempty"`
	// Data is a base64 zip archive (zip).
	Data string `json:"data,omitempty"`
	// URL is a forge repository URL or owner/repo[/path] (forge).
	URL string `json:"url,omitempty"`
	// Ref pins a forge branch, tag or commit (forge; default the default branch).
	Ref string `json:"ref,omitempty"`
	// Files are the package's files, as an export answers them (inline).
	Files map[string]json.RawMessage `json:"files,omitempty"`
}

// UnmarshalJSON accepts the string shorthand.
func (s *Source) UnmarshalJSON(b []byte) error {
	var str string
	if err := json.Unmarshal(b, &str); err == nil {
		str = strings.TrimSpace(str)
		switch {
		case str == "":
			*s = Source{}
		case strings.HasPrefix(str, "/") || strings.HasPrefix(str, "./") || strings.HasPrefix(str, "~"):
			*s = Source{Type: "local", Path: str}
		default:
			*s = Source{Type: "forge", URL: str}
		}
		return nil
	}
	type plain Source
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*s = Source(p)
	return nil
}

// resolvedSource says where a package came from.
type resolvedSource struct {
	Type   string `json:"type"`
	Path   string `json:"path,omitempty"`
	URL    string `json:"url,omitempty"`
	Ref    string `json:"ref,omitempty"`
	Commit string `json:"commit,omitempty"`
}

// load reads the package a source names.
func (x *Portability) load(ctx context.Context, src *Source) (*pkg, *resolvedSource, error) {
	switch src.Type {
	case "local":
		p, err := readLocal(src.Path)
		return p, &resolvedSource{Type: "local", Path: src.Path}, err
	case "zip":
		b, err := base64.StdEncoding.DecodeString(src.Data)
		if err != nil {
			return nil, nil, sdk.Invalid("source.data", "must be a base64 zip archive")
		}
		p, err := readZip(b)
		return p, &resolvedSource{Type: "zip"}, err
	case "inline":
		p, err := readInline(src.Files)
		return p, &resolvedSource{Type: "inline"}, err
	case "forge", "github":
		return x.readForge(ctx, src)
	case "":
		return nil, nil, sdk.Invalid("source", "is required")
	}
	return nil, nil, sdk.Invalid("source.type", "must be local, zip, forge or inline")
}

// readLocal reads a directory or a .zip file on the server.
func readLocal(p string) (*pkg, error) {
	if strings.TrimSpace(p) == "" {
		return nil, sdk.Invalid("source.path", "is required")
	}
	if !filepath.IsAbs(p) {
		return nil, sdk.Invalid("source.path", "must be an absolute path")
	}
	st, err := os.Stat(p)
	if err != nil {
		return nil, sdk.NewError(http.StatusUnprocessableEntity, msgNotDirectory+": "+p)
	}
	if !st.IsDir() {
		if !strings.HasSuffix(strings.ToLower(p), ".zip") {
			return nil, sdk.NewError(http.StatusUnprocessableEntity, msgNotDirectory+": "+p)
		}
		if st.Size() > maxZipBytes {
			return nil, sdk.NewError(http.StatusRequestEntityTooLarge, fmt.Sprintf(msgTooLarge, maxZipBytes))
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("error reading %s: %w", p, err)
		}
		return readZip(b)
	}
	out := newPkg()
	root := filepath.Clean(p)
	err = filepath.WalkDir(root, func(full string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if full != root && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(root, full)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if out.size+info.Size() > maxPackageBytes || len(out.files) >= maxPackageFiles {
			return sdk.NewError(http.StatusRequestEntityTooLarge, fmt.Sprintf(msgTooLarge, maxPackageBytes))
		}
		b, err := os.ReadFile(full)
		if err != nil {
			return err
		}
		out.put(filepath.ToSlash(rel), b)
		return nil
	})
	if err != nil {
		var e *sdk.Error
		if errors.As(err, &e) {
			return nil, e
		}
		return nil, fmt.Errorf("error reading package %s: %w", p, err)
	}
	return out, nil
}

// readZip reads a zip archive: entries that escape the package are refused, and so are
// archives whose files add up to more than the limit. A single top folder is stripped.
func readZip(b []byte) (*pkg, error) {
	if len(b) > maxZipBytes {
		return nil, sdk.NewError(http.StatusRequestEntityTooLarge, fmt.Sprintf(msgTooLarge, maxZipBytes))
	}
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return nil, sdk.Invalid("source", "is not a zip archive: "+err.Error())
	}
	var total uint64
	for _, f := range zr.File {
		if _, ok := cleanPackagePath(f.Name); !ok {
			return nil, sdk.Invalid("source", fmt.Sprintf("zip entry %q escapes the package", f.Name))
		}
		total += f.UncompressedSize64
	}
	if total > maxPackageBytes || len(zr.File) > maxPackageFiles {
		return nil, sdk.NewError(http.StatusRequestEntityTooLarge, fmt.Sprintf(msgTooLarge, maxPackageBytes))
	}
	out := newPkg()
	for _, f := range zr.File {
		if f.FileInfo().IsDir() {
			continue
		}
		name, _ := cleanPackagePath(f.Name)
		rc, err := f.Open()
		if err != nil {
			return nil, sdk.Invalid("source", fmt.Sprintf("zip entry %q cannot be read: %v", f.Name, err))
		}
		data, err := io.ReadAll(io.LimitReader(rc, int64(f.UncompressedSize64)+1))
		rc.Close()
		if err != nil {
			return nil, sdk.Invalid("source", fmt.Sprintf("zip entry %q cannot be read: %v", f.Name, err))
		}
		if uint64(len(data)) > f.UncompressedSize64 || out.size+int64(len(data)) > maxPackageBytes {
			return nil, sdk.NewError(http.StatusRequestEntityTooLarge, fmt.Sprintf(msgTooLarge, maxPackageBytes))
		}
		out.put(name, data)
	}
	return stripTop(out), nil
}

// stripTop removes a single top folder that holds the manifest (a zipped folder).
func stripTop(p *pkg) *pkg {
	if _, ok := p.files[ManifestFile]; ok {
		return p
	}
	top := ""
	for name := range p.files {
		dir, _, found := strings.Cut(name, "/")
		if !found || (top != "" && dir != top) {
			return p
		}
		top = dir
	}
	out := newPkg()
	for name, b := range p.files {
		out.put(strings.TrimPrefix(name, top+"/"), b)
	}
	return out
}

// readInline reads files as an export answers them: text, or {encoding: base64, data}.
func readInline(files map[string]json.RawMessage) (*pkg, error) {
	if len(files) == 0 {
		return nil, sdk.Invalid("source.files", "is required")
	}
	out := newPkg()
	for name, raw := range files {
		clean, ok := cleanPackagePath(name)
		if !ok {
			return nil, sdk.Invalid("source.files", fmt.Sprintf("file %q escapes the package", name))
		}
		var text string
		if json.Unmarshal(raw, &text) == nil {
			out.put(clean, []byte(text))
			continue
		}
		var bin struct {
			Encoding string `json:"encoding"`
			Data     string `json:"data"`
		}
		if json.Unmarshal(raw, &bin) != nil || bin.Encoding != "base64" {
			return nil, sdk.Invalid("source.files", fmt.Sprintf("file %q must be a string or {encoding: base64, data}", name))
		}
		b, err := base64.StdEncoding.DecodeString(bin.Data)
		if err != nil {
			return nil, sdk.Invalid("source.files", fmt.Sprintf("file %q is not valid base64", name))
		}
		out.put(clean, b)
	}
	return out, nil
}

// forgeRef is a repository on the forge, a ref and a folder inside it.
type forgeRef struct {
	Owner, Repo, Ref, Dir string
}

// parseForge reads owner/repo[/dir] or a forge URL (repo, tree/<ref>/<dir>); any other URL
// is refused.
func (x *Portability) parseForge(raw, ref string) (*forgeRef, error) {
	raw = strings.TrimSpace(raw)
	if strings.Contains(raw, "://") {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || !strings.EqualFold(u.Host, x.ends.Web.Host) {
			return nil, sdk.NewError(http.StatusUnprocessableEntity, msgGenericURL)
		}
		parts := strings.Split(strings.Trim(u.Path, "/"), "/")
		if len(parts) < 2 || parts[0] == "" || parts[1] == "" {
			return nil, sdk.NewError(http.StatusUnprocessableEntity, msgGenericURL)
		}
		f := &forgeRef{Owner: parts[0], Repo: strings.TrimSuffix(parts[1], ".git"), Ref: ref}
		if len(parts) >= 4 && parts[2] == "tree" {
			f.Ref = parts[3]
			f.Dir = strings.Join(parts[4:], "/")
		} else if len(parts) > 2 {
			return nil, sdk.NewError(http.StatusUnprocessableEntity, msgGenericURL)
		}
		return f, nil
	}
	parts := strings.Split(strings.Trim(raw, "/"), "/")
	if len(parts) < 2 || strings.ContainsAny(raw, " :?#@") {
		return nil, sdk.NewError(http.StatusUnprocessableEntity, msgGenericURL)
	}
	for _, p := range parts {
		if p == "" || p == "." || p == ".." {
			return nil, sdk.NewError(http.StatusUnprocessableEntity, msgGenericURL)
		}
	}
	return &forgeRef{Owner: parts[0], Repo: parts[1], Ref: ref, Dir: strings.Join(parts[2:], "/")}, nil
}

// readForge reads a package folder of a forge repository at a ref.
func (x *Portability) readForge(ctx context.Context, src *Source) (*pkg, *resolvedSource, error) {
	f, err := x.parseForge(src.URL, src.Ref)
	if err != nil {
		return nil, nil, err
	}
	repoAPI := x.ends.API + "/repos/" + url.PathEscape(f.Owner) + "/" + url.PathEscape(f.Repo)
	if f.Ref == "" {
		var repo struct {
			DefaultBranch string `json:"default_branch"`
		}
		if err := x.fetch.json(ctx, repoAPI, &repo); err != nil {
			return nil, nil, err
		}
		f.Ref = repo.DefaultBranch
	}
	var commit struct {
		SHA string `json:"sha"`
	}
	if err := x.fetch.json(ctx, repoAPI+"/commits/"+url.PathEscape(f.Ref), &commit); err != nil {
		return nil, nil, err
	}
	var tree struct {
		Tree []struct {
			Path string `json:"path"`
			Type string `json:"type"`
			Size int64  `json:"size"`
		} `json:"tree"`
		Truncated bool `json:"truncated"`
	}
	if err := x.fetch.json(ctx, repoAPI+"/git/trees/"+url.PathEscape(commit.SHA)+"?recursive=1", &tree); err != nil {
		return nil, nil, err
	}
	prefix := ""
	if f.Dir != "" {
		prefix = strings.Trim(f.Dir, "/") + "/"
	}
	out := newPkg()
	for _, e := range tree.Tree {
		if e.Type != "blob" || !strings.HasPrefix(e.Path, prefix) {
			continue
		}
		rel, ok := cleanPackagePath(strings.TrimPrefix(e.Path, prefix))
		if !ok {
			continue
		}
		if out.size+e.Size > maxPackageBytes {
			return nil, nil, sdk.NewError(http.StatusRequestEntityTooLarge, fmt.Sprintf(msgTooLarge, maxPackageBytes))
		}
		b, err := x.fetch.get(ctx, x.ends.Raw+"/"+f.Owner+"/"+f.Repo+"/"+commit.SHA+"/"+e.Path)
		if err != nil {
			return nil, nil, err
		}
		out.put(rel, b)
	}
	return out, &resolvedSource{Type: "forge", URL: x.ends.Web.String() + "/" + f.Owner + "/" + f.Repo, Ref: f.Ref, Commit: commit.SHA, Path: f.Dir}, nil
}

// fetcher is the one network client of forge imports: http and https only, a timeout per
// request, a size cap per response, and no redirect to another scheme.
type fetcher struct{ client *http.Client }

func newFetcher() *fetcher {
	tr := &http.Transport{Proxy: http.ProxyFromEnvironment, DialContext: (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		TLSHandshakeTimeout: 10 * time.Second, ResponseHeaderTimeout: 15 * time.Second, MaxIdleConns: 8, IdleConnTimeout: 30 * time.Second}
	return &fetcher{client: &http.Client{Transport: tr, Timeout: fetchTimeout, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) >= 5 || req.URL.Scheme != via[0].URL.Scheme {
			return errors.New("redirect refused")
		}
		return nil
	}}}
}

// get reads a URL; a failure is 502 naming the URL (404 when the forge has no such thing).
func (f *fetcher) get(ctx context.Context, rawURL string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, sdk.NewError(http.StatusUnprocessableEntity, "invalid forge URL "+rawURL)
	}
	req.Header.Set("User-Agent", "keel-portability/0.1")
	res, err := f.client.Do(req)
	if err != nil {
		return nil, sdk.NewError(http.StatusBadGateway, "error fetching "+rawURL+": "+err.Error())
	}
	defer res.Body.Close()
	if res.StatusCode == http.StatusNotFound {
		return nil, sdk.NewError(http.StatusNotFound, "Import source not found: "+rawURL)
	}
	if res.StatusCode != http.StatusOK {
		return nil, sdk.NewError(http.StatusBadGateway, fmt.Sprintf("GET %s answered %d", rawURL, res.StatusCode))
	}
	b, err := io.ReadAll(io.LimitReader(res.Body, fetchMaxBytes+1))
	if err != nil {
		return nil, sdk.NewError(http.StatusBadGateway, "error reading "+rawURL+": "+err.Error())
	}
	if len(b) > fetchMaxBytes {
		return nil, sdk.NewError(http.StatusRequestEntityTooLarge, fmt.Sprintf("%s is larger than %d bytes", rawURL, fetchMaxBytes))
	}
	return b, nil
}

func (f *fetcher) json(ctx context.Context, rawURL string, out any) error {
	b, err := f.get(ctx, rawURL)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, out); err != nil {
		return sdk.NewError(http.StatusBadGateway, "undecodable answer from "+rawURL)
	}
	return nil
}
