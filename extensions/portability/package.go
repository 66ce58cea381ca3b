package portability

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Package layout: the manifest, the markdown-backed files of each group and the
// content-addressed assets.
const (
	ManifestFile  = "manifest.json"
	CompanyFile   = "COMPANY.md"
	AssetsDir     = "assets/sha256/"
	PackageKind   = "keel.company-package"
	SchemaVersion = 1
)

// Groups a package can carry; "tasks" is accepted as an alias of issues.
const (
	GroupCompany  = "company"
	GroupAgents   = "agents"
	GroupProjects = "projects"
	GroupIssues   = "issues"
	GroupSkills   = "skills"
)

// allGroups lists the groups in the order an import applies them.
var allGroups = []string{GroupCompany, GroupAgents, GroupProjects, GroupSkills, GroupIssues}

// defaultExport is the export set when the body names none.
var defaultExport = []string{GroupCompany, GroupAgents}

// Manifest is manifest.json: what the package holds and where.
type Manifest struct {
	Kind          string         `json:"kind"`
	SchemaVersion int            `json:"schemaVersion"`
	ExportedAt    time.Time      `json:"exportedAt"`
	Source        ManifestSource `json:"source"`
	Include       []string       `json:"include"`
	Counts        map[string]int `json:"counts"`
	Company       string         `json:"company,omitempty"`
	Agents        []string       `json:"agents"`
	Projects      []string       `json:"projects"`
	Issues        []string       `json:"issues"`
	Routines      []string       `json:"routines"`
	Skills        []string       `json:"skills"`
	Assets        []Asset        `json:"assets"`
}

// ManifestSource names the exported company.
type ManifestSource struct {
	CompanyID   string `json:"companyId"`
	CompanyName string `json:"companyName"`
}

// Asset is one content-addressed binary file.
type Asset struct {
	Path        string `json:"path"`
	SHA256      string `json:"sha256"`
	SizeBytes   int64  `json:"sizeBytes"`
	ContentType string `json:"contentType,omitempty"`
}

// assetPath is where the bytes with a sha256 live in a package.
func assetPath(sum string) string { return AssetsDir + sum }

// sha256Hex is the hex sha256 of b.
func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// pkg is a package in memory: file paths (slash-separated, relative) to bytes.
type pkg struct {
	files map[string][]byte
	size  int64
}

func newPkg() *pkg { return &pkg{files: map[string][]byte{}} }

func (p *pkg) put(name string, b []byte) {
	if old, ok := p.files[name]; ok {
		p.size -= int64(len(old))
	}
	p.files[name] = b
	p.size += int64(len(b))
}

// paths returns the file paths, sorted.
func (p *pkg) paths() []string {
	out := make([]string, 0, len(p.files))
	for k := range p.files {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// under returns the sorted paths below a folder.
func (p *pkg) under(dir string) []string {
	var out []string
	for _, k := range p.paths() {
		if strings.HasPrefix(k, dir) {
			out = append(out, k)
		}
	}
	return out
}

// cleanPackagePath checks a path inside a package: relative, slash-separated, no "..", no
// empty or absolute parts. It returns the cleaned path and false when the path escapes.
func cleanPackagePath(p string) (string, bool) {
	p = strings.ReplaceAll(p, "\\", "/")
	if p == "" || strings.HasPrefix(p, "/") || strings.Contains(p, "\x00") || (len(p) > 1 && p[1] == ':') {
		return "", false
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return "", false
		}
	}
	c := path.Clean(p)
	if c == "." || strings.HasPrefix(c, "../") {
		return "", false
	}
	return c, true
}

// markdown renders a frontmatter (YAML) and a body.
func markdown(front any, body string) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString("---\n")
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(front); err != nil {
		return nil, fmt.Errorf("error encoding frontmatter: %w", err)
	}
	_ = enc.Close()
	buf.WriteString("---\n")
	buf.WriteString(body)
	return buf.Bytes(), nil
}

// parseMarkdown splits a markdown file into its frontmatter (decoded into front) and body.
func parseMarkdown(name string, b []byte, front any) (string, error) {
	s := strings.ReplaceAll(string(b), "\r\n", "\n")
	if !strings.HasPrefix(s, "---\n") {
		return "", fmt.Errorf("%s has no frontmatter", name)
	}
	rest := s[4:]
	end := strings.Index(rest, "\n---\n")
	var fm, body string
	switch {
	case end >= 0:
		fm, body = rest[:end+1], rest[end+5:]
	case strings.HasSuffix(rest, "\n---"):
		fm = rest[:len(rest)-3]
	default:
		return "", fmt.Errorf("%s: the frontmatter is not closed", name)
	}
	if err := yaml.Unmarshal([]byte(fm), front); err != nil {
		return "", fmt.Errorf("%s: invalid frontmatter: %v", name, err)
	}
	return body, nil
}

// slugify derives a file-safe slug: lowercase ASCII letters and digits, other runs collapsed
// into one dash.
func slugify(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
			dash = false
		default:
			if !dash && b.Len() > 0 {
				b.WriteByte('-')
				dash = true
			}
		}
	}
	out := strings.TrimSuffix(b.String(), "-")
	if len(out) > 80 {
		out = strings.TrimSuffix(out[:80], "-")
	}
	if out == "" {
		out = "item"
	}
	return out
}

// uniqueSlug returns slug, or slug-2, slug-3 … when taken, and marks it taken.
func uniqueSlug(taken map[string]bool, slug string) string {
	s := slug
	for i := 2; taken[s]; i++ {
		s = fmt.Sprintf("%s-%d", slug, i)
	}
	taken[s] = true
	return s
}
