package skills

import (
	"crypto/sha256"
	"encoding/hex"
	"path"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// Source kinds (spec part 2 "Skill": metadata sourceKind), also each skill's sourceType.
const (
	SourceBundled      = "service_bundled"
	SourceForge        = "forge"
	SourceRegistrySite = "registry_site"
	SourceURL          = "url"
	SourceLocalPath    = "local_path"
	SourceProjectScan  = "project_scan"
	SourceManagedLocal = "managed_local"
	SourceCatalog      = "catalog"
)

// validSourceKinds are the recognised sourceKind values.
var validSourceKinds = map[string]bool{SourceBundled: true, SourceForge: true, SourceRegistrySite: true, SourceURL: true,
	SourceLocalPath: true, SourceProjectScan: true, SourceManagedLocal: true, SourceCatalog: true}

// Inventory kinds and trust levels (spec part 2 "Skill").
const (
	InvSkill     = "skill"
	InvReference = "reference"
	InvScript    = "script"
	InvAsset     = "asset"

	TrustMarkdownOnly = "markdown_only"
	TrustAssets       = "assets"
	TrustScripts      = "scripts_executables"
)

// SkillFile is the name of a skill's entry file.
const SkillFile = "SKILL.md"

// slugPattern is a kebab-case slug.
var slugPattern = regexp.MustCompile(`^[a-z0-9]+(?:-[a-z0-9]+)*$`)

// keyPattern is a canonical key: slash-separated lowercase segments.
var keyPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*(?:/[a-z0-9][a-z0-9._-]*)*$`)

// Slugify derives a slug: accents stripped, lowercased, other runs collapsed to a hyphen.
func Slugify(name string) string {
	var b strings.Builder
	hyphen := false
	for _, r := range norm.NFKD.String(name) {
		if unicode.Is(unicode.Mn, r) {
			continue
		}
		r = unicode.ToLower(r)
		if r < 128 && (r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			if hyphen && b.Len() > 0 {
				b.WriteByte('-')
			}
			hyphen = false
			b.WriteRune(r)
			continue
		}
		hyphen = true
	}
	s := b.String()
	if len(s) > 120 {
		s = strings.TrimRight(s[:120], "-")
	}
	return s
}

// normalizeKey lowercases a key override and checks its shape ("" when unusable).
func normalizeKey(k string) string {
	k = strings.ToLower(strings.Trim(strings.TrimSpace(k), "/"))
	if len(k) > 300 || !keyPattern.MatchString(k) {
		return ""
	}
	return k
}

// str reads a string field of a map.
func str(m map[string]any, k string) string {
	if m == nil {
		return ""
	}
	s, _ := m[k].(string)
	return strings.TrimSpace(s)
}

// obj reads an object field of a map.
func obj(m map[string]any, k string) map[string]any {
	if m == nil {
		return nil
	}
	o, _ := m[k].(map[string]any)
	return o
}

// Parsed is what a SKILL.md says about its skill.
type Parsed struct {
	Name        string
	Description string
	// Slug is the frontmatter slug when it is kebab-case ("" otherwise).
	Slug string
	// KeyOverride is the canonical key the frontmatter asks for ("" for none).
	KeyOverride string
	Metadata    map[string]any
	Body        string
	Warnings    []string
}

// ParseSkill reads a SKILL.md: name, description, slug, the key override (key, skillKey,
// or metadata skillKey, canonicalKey, serviceSkillKey, service.skillKey, service.key, in
// that order) and the metadata object.
func ParseSkill(markdown string) (*Parsed, error) {
	fm, err := ParseFrontmatter(markdown)
	if err != nil {
		return nil, err
	}
	p := &Parsed{Name: str(fm.Fields, "name"), Description: str(fm.Fields, "description"), Body: fm.Body, Warnings: fm.Warnings}
	if s := str(fm.Fields, "slug"); slugPattern.MatchString(s) && len(s) <= 120 {
		p.Slug = s
	}
	p.Metadata = obj(fm.Fields, "metadata")
	if p.Metadata == nil {
		p.Metadata = map[string]any{}
	}
	md := p.Metadata
	service := obj(md, "service")
	for _, k := range []string{str(fm.Fields, "key"), str(fm.Fields, "skillKey"), str(md, "skillKey"), str(md, "canonicalKey"),
		str(md, "serviceSkillKey"), str(service, "skillKey"), str(service, "key")} {
		if n := normalizeKey(k); n != "" {
			p.KeyOverride = n
			break
		}
	}
	if sk := str(md, "sourceKind"); sk != "" && !validSourceKinds[sk] {
		p.Warnings = append(p.Warnings, "metadata.sourceKind "+sk+" is not a known source kind, ignored")
		delete(md, "sourceKind")
	}
	return p, nil
}

// deriveSlug picks a skill's slug: the frontmatter slug, else derived from the name, else
// from the folder name, else "skill".
func deriveSlug(p *Parsed, dirName string) string {
	for _, s := range []string{p.Slug, Slugify(p.Name), Slugify(dirName)} {
		if s != "" {
			return s
		}
	}
	return "skill"
}

// shortHash is a short stable hash of s.
func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:10]
}

// InventoryEntry is one file of a skill.
type InventoryEntry struct {
	Path string `json:"path"`
	Kind string `json:"kind"`
	Size int    `json:"size"`
}

// scriptExts are file extensions classified as scripts wherever they sit.
var scriptExts = map[string]bool{".sh": true, ".bash": true, ".zsh": true, ".py": true, ".js": true, ".mjs": true, ".cjs": true,
	".ts": true, ".rb": true, ".pl": true, ".php": true, ".ps1": true, ".bat": true, ".cmd": true, ".exe": true, ".bin": true,
	".go": true, ".lua": true}

// classify returns a file's inventory kind: SKILL.md is the skill, files under scripts/
// or with a script extension are scripts, Markdown and text (or anything under
// references/) are references, everything else (and anything under assets/) is an asset.
func classify(p string, data []byte) string {
	if p == SkillFile {
		return InvSkill
	}
	top, _, _ := strings.Cut(p, "/")
	ext := strings.ToLower(path.Ext(p))
	switch {
	case top == "scripts" || top == "bin" || scriptExts[ext] || len(data) > 2 && data[0] == '#' && data[1] == '!':
		return InvScript
	case top == "assets":
		return InvAsset
	case top == "references" || ext == ".md" || ext == ".markdown" || ext == ".txt" || ext == ".mdx":
		return InvReference
	}
	return InvAsset
}

// trustOf is the highest classification of an inventory: markdown_only < assets < scripts_executables.
func trustOf(inv []InventoryEntry) string {
	trust := TrustMarkdownOnly
	for _, e := range inv {
		switch e.Kind {
		case InvScript:
			return TrustScripts
		case InvAsset:
			trust = TrustAssets
		}
	}
	return trust
}

// inventory classifies a skill's files, sorted by path with SKILL.md first.
func inventory(files map[string][]byte) []InventoryEntry {
	out := make([]InventoryEntry, 0, len(files))
	for p, data := range files {
		out = append(out, InventoryEntry{Path: p, Kind: classify(p, data), Size: len(data)})
	}
	sort.Slice(out, func(i, j int) bool {
		if (out[i].Path == SkillFile) != (out[j].Path == SkillFile) {
			return out[i].Path == SkillFile
		}
		return out[i].Path < out[j].Path
	})
	return out
}

// contentHash is a hash over a skill's files.
func contentHash(files map[string][]byte) string {
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	h := sha256.New()
	for _, p := range paths {
		h.Write([]byte(p))
		h.Write([]byte{0})
		s := sha256.Sum256(files[p])
		h.Write(s[:])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// cleanRelPath checks a path inside a skill: relative, no dot segments, no backslashes.
func cleanRelPath(p string) (string, bool) {
	p = strings.TrimSpace(p)
	if p == "" || len(p) > 500 || strings.HasPrefix(p, "/") || strings.Contains(p, "\\") || strings.ContainsRune(p, 0) {
		return "", false
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return "", false
		}
	}
	return p, true
}

// Skill is a company skill as the API shows it.
type Skill struct {
	ID            string           `json:"id"`
	CompanyID     string           `json:"companyId"`
	Key           string           `json:"key"`
	Slug          string           `json:"slug"`
	Name          string           `json:"name"`
	Description   string           `json:"description"`
	SourceType    string           `json:"sourceType"`
	SourceLocator *string          `json:"sourceLocator"`
	SourceRef     *string          `json:"sourceRef"`
	Metadata      map[string]any   `json:"metadata"`
	TrustLevel    string           `json:"trustLevel"`
	FileInventory []InventoryEntry `json:"fileInventory"`
	FolderID      *string          `json:"folderId"`
	// ManagedBy is the plugin that manages the skill ("" for none).
	ManagedBy *string `json:"managedBy"`
	// Editable says the files routes may change the skill; EditableReason says why not.
	Editable       bool      `json:"editable"`
	EditableReason *string   `json:"editableReason"`
	ContentHash    string    `json:"contentHash"`
	CreatedAt      time.Time `json:"createdAt"`
	UpdatedAt      time.Time `json:"updatedAt"`
	// Markdown is the SKILL.md (detail views only).
	Markdown *string `json:"markdown,omitempty"`
	// UsedByAgents are the agents that want the skill (detail view only).
	UsedByAgents []AgentUse `json:"usedByAgents,omitempty"`
	// AttachedAgentCount is the number of agents that want the skill (list view).
	AttachedAgentCount *int `json:"attachedAgentCount,omitempty"`
}

// AgentUse is an agent that lists a skill among its desired skills.
type AgentUse struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	AdapterType string `json:"adapterType"`
}
