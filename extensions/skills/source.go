package skills

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/keelhq/keel/sdk"
)

// Source is a resolved import source.
type Source struct {
	// Type is the skills' sourceType: forge, registry_site, url or local_path.
	Type string `json:"sourceType"`
	// Locator is where the skills come from (forge or raw URL, or absolute path).
	Locator string `json:"sourceLocator"`
	// Original is the locator as given when it was unwrapped (registry URL, npx command).
	Original string `json:"originalLocator,omitempty"`
	Hostname string `json:"hostname,omitempty"`
	Owner    string `json:"owner,omitempty"`
	Repo     string `json:"repo,omitempty"`
	// Ref is the ref the source names ("" for the default branch); Commit the commit read.
	Ref    string `json:"ref,omitempty"`
	Commit string `json:"commit,omitempty"`
	// TrackingRef is the branch an update follows.
	TrackingRef string `json:"trackingRef,omitempty"`
	// Path is the folder (or SKILL.md) inside the repository or on disk.
	Path string `json:"path,omitempty"`
	// Skill narrows a repository to one skill (owner/repo/skill, --skill).
	Skill string `json:"skill,omitempty"`
	// pinned says the source named a ref.
	pinned bool
}

// candidate is one skill found at a source.
type candidate struct {
	// Dir is the skill's folder relative to the source root ("" for the root).
	Dir     string
	Files   map[string][]byte
	Locator string
}

var (
	ownerRepoRE = regexp.MustCompile(`^([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+)(?:/([A-Za-z0-9_.-]+))?$`)
	segmentRE   = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)
)

// badSource is the 422 of a source that cannot be imported.
func badSource(format string, args ...any) error {
	return sdk.Unprocessable(fmt.Sprintf(format, args...))
}

// sameHost compares a URL's host with an endpoint's (ignoring a www. prefix).
func sameHost(u, base *url.URL) bool {
	if base == nil {
		return false
	}
	return strings.TrimPrefix(strings.ToLower(u.Host), "www.") == strings.TrimPrefix(strings.ToLower(base.Host), "www.")
}

// resolveSource reads an import source string without touching the network or the disk.
func (x *Skills) resolveSource(input string) (*Source, error) {
	s := strings.TrimSpace(input)
	if s == "" {
		return nil, sdk.Invalid("source", "is required")
	}
	if len(s) > 2000 {
		return nil, sdk.Invalid("source", "must be at most 2000 characters")
	}
	if src, ok, err := x.resolveCommand(s); ok || err != nil {
		return src, err
	}
	switch {
	case strings.HasPrefix(s, "file://"):
		return resolveLocal(strings.TrimPrefix(s, "file://"))
	case strings.HasPrefix(s, "/") || strings.HasPrefix(s, "./") || strings.HasPrefix(s, "../") || strings.HasPrefix(s, "~/") || s == "~" || s == ".":
		return resolveLocal(s)
	}
	if strings.Contains(s, "://") {
		u, err := url.Parse(s)
		if err != nil || u.Host == "" {
			return nil, badSource("Invalid skill source URL: %s", s)
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			return nil, badSource("Unsupported skill source scheme %s: use https, owner/repo or a local path", u.Scheme)
		}
		switch {
		case sameHost(u, x.ends.ForgeWeb):
			return x.resolveForgeURL(u)
		case sameHost(u, x.ends.RegistryWeb):
			segs := splitPath(u.Path)
			if len(segs) < 2 || len(segs) > 3 {
				return nil, badSource("Registry skill URL must name owner/repo or owner/repo/skill: %s", s)
			}
			src := x.forgeSource(segs[0], segs[1])
			if len(segs) == 3 {
				src.Skill = segs[2]
			}
			src.Type, src.Original = SourceRegistrySite, s
			return src, nil
		}
		return &Source{Type: SourceURL, Locator: u.String(), Hostname: u.Hostname()}, nil
	}
	if m := ownerRepoRE.FindStringSubmatch(s); m != nil {
		src := x.forgeSource(m[1], m[2])
		src.Skill = m[3]
		return src, nil
	}
	return nil, badSource("Unsupported skill source: %s (use a forge URL, owner/repo, a raw URL or a local path)", s)
}

// resolveCommand unwraps an npx-style add command ("npx skills add owner/repo --skill x").
func (x *Skills) resolveCommand(s string) (*Source, bool, error) {
	fields := strings.Fields(s)
	if len(fields) < 3 {
		return nil, false, nil
	}
	switch fields[0] {
	case "npx", "pnpx", "bunx", "pnpm", "yarn":
	default:
		return nil, false, nil
	}
	add := -1
	for i, f := range fields {
		if f == "add" {
			add = i
			break
		}
	}
	if add < 0 {
		return nil, true, badSource("Unsupported skill command: only add commands can be imported")
	}
	var locator, skill string
	for i := add + 1; i < len(fields); i++ {
		f := fields[i]
		switch {
		case f == "--skill" || f == "-s":
			if i+1 < len(fields) {
				skill = fields[i+1]
				i++
			}
		case strings.HasPrefix(f, "--skill="):
			skill = strings.TrimPrefix(f, "--skill=")
		case strings.HasPrefix(f, "-"):
		case locator == "":
			locator = f
		}
	}
	if locator == "" || strings.HasPrefix(locator, "/") || strings.HasPrefix(locator, ".") || strings.HasPrefix(locator, "~") {
		return nil, true, badSource("The add command must name a forge repository")
	}
	src, err := x.resolveSource(locator)
	if err != nil {
		return nil, true, err
	}
	if src.Type != SourceForge && src.Type != SourceRegistrySite {
		return nil, true, badSource("The add command must name a forge repository")
	}
	if skill != "" {
		if !segmentRE.MatchString(skill) {
			return nil, true, sdk.Invalid("source", "the --skill value must be a skill name")
		}
		src.Skill = skill
	}
	src.Type, src.Original = SourceRegistrySite, s
	return src, true, nil
}

// forgeSource is the source of a whole repository.
func (x *Skills) forgeSource(owner, repo string) *Source {
	repo = strings.TrimSuffix(repo, ".git")
	return &Source{Type: SourceForge, Owner: owner, Repo: repo, Hostname: x.ends.ForgeWeb.Hostname(),
		Locator: x.ends.ForgeWeb.String() + "/" + owner + "/" + repo}
}

// resolveForgeURL reads a forge repository, tree or blob URL.
func (x *Skills) resolveForgeURL(u *url.URL) (*Source, error) {
	segs := splitPath(u.Path)
	if len(segs) < 2 || !segmentRE.MatchString(segs[0]) || !segmentRE.MatchString(segs[1]) {
		return nil, badSource("Forge URL must name owner/repo: %s", u.String())
	}
	src := x.forgeSource(segs[0], segs[1])
	if len(segs) == 2 {
		return src, nil
	}
	if len(segs) < 4 || (segs[2] != "tree" && segs[2] != "blob") {
		return nil, badSource("Forge URL must be a repository, tree or blob URL: %s", u.String())
	}
	src.Ref, src.pinned = segs[3], true
	p := strings.Join(segs[4:], "/")
	if segs[2] == "blob" {
		if path.Base(p) != SkillFile {
			return nil, badSource("A blob URL must point to a %s: %s", SkillFile, u.String())
		}
		p = path.Dir(p)
		if p == "." {
			p = ""
		}
	}
	src.Path = p
	src.Locator = u.String()
	return src, nil
}

// splitPath splits a URL path into non-empty segments (unescaped).
func splitPath(p string) []string {
	var out []string
	for _, s := range strings.Split(p, "/") {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// resolveLocal reads a local path to a SKILL.md or a folder.
func resolveLocal(p string) (*Source, error) {
	if strings.HasPrefix(p, "~") {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, badSource("Cannot expand ~ in %s", p)
		}
		p = filepath.Join(home, strings.TrimPrefix(p, "~"))
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return nil, badSource("Invalid local skill path: %s", p)
	}
	return &Source{Type: SourceLocalPath, Locator: abs, Path: abs}, nil
}

// load reads the skills a source holds.
func (x *Skills) load(ctx context.Context, src *Source) ([]candidate, []string, error) {
	switch src.Type {
	case SourceForge, SourceRegistrySite:
		return x.loadForge(ctx, src)
	case SourceURL:
		b, err := x.fetch.get(ctx, src.Locator, "text/markdown, text/plain, */*")
		if err != nil {
			return nil, nil, upstream(err)
		}
		dir := path.Base(path.Dir(mustURLPath(src.Locator)))
		return []candidate{{Dir: dir, Files: map[string][]byte{SkillFile: b}, Locator: src.Locator}}, nil, nil
	case SourceLocalPath:
		return loadLocal(src)
	}
	return nil, nil, badSource("Unsupported skill source type %s", src.Type)
}

// mustURLPath is a URL's path ("" when it does not parse).
func mustURLPath(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return ""
	}
	return u.Path
}

// upstream turns a fetch failure into an API error: 404 from the source is a 422 naming
// it, other failures a 502.
func upstream(err error) error {
	var fe *fetchError
	if errors.As(err, &fe) && fe.Status == http.StatusNotFound {
		return badSource("Skill source not found: %s", fe.URL)
	}
	return &sdk.Error{Status: http.StatusBadGateway, Message: "Error fetching skill source: " + err.Error()}
}

// forgeTree is the forge's recursive tree listing.
type forgeTree struct {
	Tree []struct {
		Path string `json:"path"`
		Type string `json:"type"`
		Size int64  `json:"size"`
	} `json:"tree"`
	Truncated bool `json:"truncated"`
}

// forgeJSON reads a forge API document.
func (x *Skills) forgeJSON(ctx context.Context, p string, v any) error {
	b, err := x.fetch.get(ctx, x.ends.ForgeAPI+p, "application/vnd.github+json")
	if err != nil {
		return upstream(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return &sdk.Error{Status: http.StatusBadGateway, Message: "Error fetching skill source: the forge answered malformed JSON for " + p}
	}
	return nil
}

// forgeCommit resolves a ref ("" for the default branch) to the branch name and commit.
func (x *Skills) forgeCommit(ctx context.Context, owner, repo, ref string) (string, string, error) {
	base := "/repos/" + url.PathEscape(owner) + "/" + url.PathEscape(repo)
	if ref == "" {
		var r struct {
			DefaultBranch string `json:"default_branch"`
		}
		if err := x.forgeJSON(ctx, base, &r); err != nil {
			return "", "", err
		}
		if ref = r.DefaultBranch; ref == "" {
			ref = "main"
		}
	}
	var c struct {
		SHA string `json:"sha"`
	}
	if err := x.forgeJSON(ctx, base+"/commits/"+url.PathEscape(ref), &c); err != nil {
		return "", "", err
	}
	if c.SHA == "" {
		return "", "", &sdk.Error{Status: http.StatusBadGateway, Message: "Error fetching skill source: no commit for " + ref}
	}
	return ref, c.SHA, nil
}

// loadForge reads the skills of a forge repository at a commit.
func (x *Skills) loadForge(ctx context.Context, src *Source) ([]candidate, []string, error) {
	ref, sha, err := x.forgeCommit(ctx, src.Owner, src.Repo, src.Ref)
	if err != nil {
		return nil, nil, err
	}
	src.Ref, src.Commit = ref, sha
	if src.TrackingRef == "" {
		src.TrackingRef = ref
	}
	var tree forgeTree
	if err := x.forgeJSON(ctx, "/repos/"+url.PathEscape(src.Owner)+"/"+url.PathEscape(src.Repo)+"/git/trees/"+sha+"?recursive=1", &tree); err != nil {
		return nil, nil, err
	}
	var warnings []string
	if tree.Truncated {
		warnings = append(warnings, "the forge truncated the repository listing; some skills may be missing")
	}
	prefix := strings.Trim(src.Path, "/")
	under := func(p string) bool { return prefix == "" || p == prefix || strings.HasPrefix(p, prefix+"/") }
	blobs := map[string]int64{}
	var dirs []string
	for _, e := range tree.Tree {
		if e.Type != "blob" || !under(e.Path) {
			continue
		}
		blobs[e.Path] = e.Size
		if path.Base(e.Path) == SkillFile {
			d := path.Dir(e.Path)
			if d == "." {
				d = ""
			}
			dirs = append(dirs, d)
		}
	}
	sort.Strings(dirs)
	if src.Skill != "" {
		var keep []string
		for _, d := range dirs {
			if strings.EqualFold(path.Base(d), src.Skill) || Slugify(path.Base(d)) == Slugify(src.Skill) {
				keep = append(keep, d)
			}
		}
		dirs = keep
	}
	if len(dirs) == 0 {
		return nil, warnings, badSource("No %s found in %s", SkillFile, src.Locator)
	}
	if len(dirs) > importMaxSkills {
		return nil, warnings, badSource("The source holds more than %d skills", importMaxSkills)
	}
	isSkillDir := map[string]bool{}
	for _, d := range dirs {
		isSkillDir[d] = true
	}
	total := 0
	var out []candidate
	for _, d := range dirs {
		files := map[string][]byte{}
		for p, size := range blobs {
			rel := p
			if d != "" {
				if !strings.HasPrefix(p, d+"/") {
					continue
				}
				rel = strings.TrimPrefix(p, d+"/")
			}
			if ownedByDeeper(d, p, isSkillDir) {
				continue
			}
			if len(files) >= importMaxFiles {
				warnings = append(warnings, fmt.Sprintf("%s: more than %d files, the rest were skipped", d, importMaxFiles))
				break
			}
			if size > fetchMaxBytes {
				warnings = append(warnings, fmt.Sprintf("%s: %s is larger than %d bytes, skipped", d, rel, fetchMaxBytes))
				continue
			}
			b, err := x.fetch.get(ctx, x.ends.ForgeRaw+"/"+url.PathEscape(src.Owner)+"/"+url.PathEscape(src.Repo)+"/"+sha+"/"+escapePath(p), "")
			if err != nil {
				return nil, warnings, upstream(err)
			}
			if total += len(b); total > importMaxBytes {
				return nil, warnings, badSource("The source is larger than %d bytes", importMaxBytes)
			}
			files[rel] = b
		}
		loc := x.ends.ForgeWeb.String() + "/" + src.Owner + "/" + src.Repo
		if d != "" {
			loc += "/tree/" + ref + "/" + d
		}
		out = append(out, candidate{Dir: d, Files: files, Locator: loc})
	}
	return out, warnings, nil
}

// ownedByDeeper reports whether file p belongs to a skill folder nested inside d.
func ownedByDeeper(d, p string, isSkillDir map[string]bool) bool {
	for dir := path.Dir(p); dir != "." && dir != d; dir = path.Dir(dir) {
		if isSkillDir[dir] {
			return true
		}
		if dir == "/" || dir == "" {
			break
		}
	}
	return false
}

// escapePath escapes each segment of a path.
func escapePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// skipDirs are folders a local scan never enters.
var skipDirs = map[string]bool{".git": true, "node_modules": true, ".hg": true, ".svn": true, "vendor": true, "dist": true}

// loadLocal reads a SKILL.md, a folder with one, or a folder with many (up to 4 levels deep).
func loadLocal(src *Source) ([]candidate, []string, error) {
	fi, err := os.Stat(src.Path)
	if err != nil {
		return nil, nil, badSource("Local skill path not found: %s", src.Path)
	}
	root := src.Path
	if !fi.IsDir() {
		if filepath.Base(root) != SkillFile {
			return nil, nil, badSource("A local skill file must be named %s: %s", SkillFile, src.Path)
		}
		root = filepath.Dir(root)
		src.Path = root
	}
	var dirs []string
	if _, err := os.Stat(filepath.Join(root, SkillFile)); err == nil {
		dirs = []string{root}
	} else {
		dirs = findSkillDirs(root, 4)
	}
	if len(dirs) == 0 {
		return nil, nil, badSource("No %s found in %s", SkillFile, src.Path)
	}
	if len(dirs) > importMaxSkills {
		return nil, nil, badSource("The source holds more than %d skills", importMaxSkills)
	}
	var out []candidate
	var warnings []string
	for _, d := range dirs {
		files, w, err := readSkillDir(d)
		if err != nil {
			return nil, warnings, err
		}
		warnings = append(warnings, w...)
		rel, _ := filepath.Rel(root, d)
		if rel == "." {
			rel = filepath.Base(d)
		}
		out = append(out, candidate{Dir: filepath.ToSlash(rel), Files: files, Locator: d})
	}
	return out, warnings, nil
}

// findSkillDirs lists folders under root holding a SKILL.md, at most depth levels down.
func findSkillDirs(root string, depth int) []string {
	var out []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() {
			rel, _ := filepath.Rel(root, p)
			if rel != "." && (skipDirs[d.Name()] || strings.Count(rel, string(filepath.Separator)) >= depth) {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Name() == SkillFile && d.Type().IsRegular() {
			out = append(out, filepath.Dir(p))
		}
		return nil
	})
	sort.Strings(out)
	// A skill folder's own subfolders are its files, not more skills.
	var keep []string
	for _, d := range out {
		nested := false
		for _, k := range keep {
			if strings.HasPrefix(d, k+string(filepath.Separator)) {
				nested = true
				break
			}
		}
		if !nested {
			keep = append(keep, d)
		}
	}
	return keep
}

// readSkillDir reads a skill folder's regular files (symlinks and hidden folders skipped).
func readSkillDir(dir string) (map[string][]byte, []string, error) {
	files := map[string][]byte{}
	var warnings []string
	total := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		name := d.Name()
		if d.IsDir() {
			if p != dir && (skipDirs[name] || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if len(files) >= importMaxFiles {
			warnings = append(warnings, fmt.Sprintf("%s: more than %d files, the rest were skipped", dir, importMaxFiles))
			return filepath.SkipAll
		}
		info, err := d.Info()
		if err != nil || info.Size() > fetchMaxBytes {
			warnings = append(warnings, fmt.Sprintf("%s: %s is larger than %d bytes, skipped", dir, rel, fetchMaxBytes))
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("%s: %s cannot be read, skipped", dir, rel))
			return nil
		}
		if total += len(b); total > importMaxBytes {
			return badSource("The source is larger than %d bytes", importMaxBytes)
		}
		files[rel] = b
		return nil
	})
	if err != nil {
		return nil, warnings, err
	}
	return files, warnings, nil
}
