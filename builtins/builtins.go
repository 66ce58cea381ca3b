// Package builtins is the registry of built-in agents (spec part 2 "Built-in agent
// definition"; REFERENCE.md 5): one folder per registry key, embedded in the binary and read
// by the builtinagents extension. A folder holds
//
//	agent.json                    the definition (strict: unknown fields are an error)
//	instructions.md               the agent's instructions
//	skills/<name>/SKILL.md        bundled skills, with name and description frontmatter
//	routines/<routineKey>.json    bundled routines
//
// Adding a built-in means adding a folder.
package builtins

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strings"
	"sync"
)

//go:embed */agent.json */instructions.md */skills */routines
var registryFS embed.FS

// Definition is one built-in agent of the registry.
type Definition struct {
	// Key is the registry key, the folder's name.
	Key string `json:"key"`
	// DisplayName is the agent's name when provisioned.
	DisplayName string `json:"displayName"`
	// Purpose says what the agent is for; it becomes the agent's capabilities text.
	Purpose string `json:"purpose"`
	// Role is the agent's default role.
	Role string `json:"role"`
	// Title is the agent's default title.
	Title string `json:"title,omitempty"`
	// AllowedAdapterTypes are the adapter types the agent may use; the first is the default.
	AllowedAdapterTypes []string `json:"allowedAdapterTypes"`
	// FeatureKeys name the features that need this built-in; the marker carries them.
	FeatureKeys []string `json:"featureKeys"`
	// StartsPaused provisions the agent paused.
	StartsPaused bool `json:"startsPaused,omitempty"`
	// PermissionKeys are the permission keys the agent holds.
	PermissionKeys []string `json:"permissionKeys,omitempty"`
	// BudgetMonthlyCents is the default monthly budget (0 for every shipped built-in).
	BudgetMonthlyCents int64 `json:"budgetMonthlyCents,omitempty"`

	// Instructions is instructions.md.
	Instructions string `json:"-"`
	// Skills are the bundled skills, sorted by name.
	Skills []*Skill `json:"-"`
	// Routines are the bundled routines, sorted by key.
	Routines []*Routine `json:"-"`
}

// Skill is a bundled skill.
type Skill struct {
	// Name is the skill's name (its folder and frontmatter name).
	Name string `json:"name"`
	// Description is the frontmatter description.
	Description string `json:"description"`
	// Markdown is the whole SKILL.md.
	Markdown string `json:"markdown"`
}

// Routine is a bundled routine.
type Routine struct {
	// Key is the routine key, the file's name without .json.
	Key         string `json:"key"`
	Title       string `json:"title"`
	Description string `json:"description,omitempty"`
	// CronExpression and Timezone are the routine's schedule.
	CronExpression string `json:"cronExpression"`
	Timezone       string `json:"timezone,omitempty"`
	// Enabled is whether the routine starts active (false: it starts paused).
	Enabled bool `json:"enabled,omitempty"`
}

// Skill returns the bundled skill named name, nil when there is none.
func (d *Definition) Skill(name string) *Skill {
	for _, s := range d.Skills {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// Routine returns the bundled routine keyed key, nil when there is none.
func (d *Definition) Routine(key string) *Routine {
	for _, r := range d.Routines {
		if r.Key == key {
			return r
		}
	}
	return nil
}

// Hash is the SHA-256 of a text, hex; the extension stores it to tell registry defaults from
// local changes.
func Hash(text string) string {
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:])
}

var (
	loadOnce sync.Once
	loaded   []*Definition
	loadErr  error
)

// All returns the embedded registry sorted by key. The registry is checked by the package's
// tests, so an error here is a build defect; it panics.
func All() []*Definition {
	loadOnce.Do(func() { loaded, loadErr = Load(registryFS) })
	if loadErr != nil {
		panic(fmt.Sprintf("builtins: %v", loadErr))
	}
	return loaded
}

// Get returns the embedded definition of key.
func Get(key string) (*Definition, bool) {
	for _, d := range All() {
		if d.Key == key {
			return d, true
		}
	}
	return nil, false
}

var (
	keyRE  = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)
	nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,99}$`)
)

// Load reads and checks a registry: every top-level folder of fsys is one definition.
func Load(fsys fs.FS) ([]*Definition, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("error reading the built-in registry: %w", err)
	}
	var out []*Definition
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		d, err := loadOne(fsys, e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// loadOne reads the folder of one definition.
func loadOne(fsys fs.FS, dir string) (*Definition, error) {
	raw, err := fs.ReadFile(fsys, path.Join(dir, "agent.json"))
	if err != nil {
		return nil, fmt.Errorf("error reading built-in %s: %w", dir, err)
	}
	d := new(Definition)
	if err := strictDecode(raw, d); err != nil {
		return nil, fmt.Errorf("error decoding built-in %s/agent.json: %w", dir, err)
	}
	switch {
	case d.Key != dir:
		return nil, fmt.Errorf("built-in %s: key %q must equal the folder name", dir, d.Key)
	case !keyRE.MatchString(d.Key):
		return nil, fmt.Errorf("built-in %s: key must be lowercase letters, digits and dashes", dir)
	case strings.TrimSpace(d.DisplayName) == "" || strings.TrimSpace(d.Purpose) == "" || strings.TrimSpace(d.Role) == "":
		return nil, fmt.Errorf("built-in %s: displayName, purpose and role are required", dir)
	case len(d.AllowedAdapterTypes) == 0:
		return nil, fmt.Errorf("built-in %s: allowedAdapterTypes must name at least one adapter type", dir)
	case d.BudgetMonthlyCents < 0:
		return nil, fmt.Errorf("built-in %s: budgetMonthlyCents must not be negative", dir)
	}
	if d.FeatureKeys == nil {
		d.FeatureKeys = []string{}
	}
	ins, err := fs.ReadFile(fsys, path.Join(dir, "instructions.md"))
	if err != nil {
		return nil, fmt.Errorf("error reading built-in %s instructions: %w", dir, err)
	}
	if d.Instructions = string(ins); strings.TrimSpace(d.Instructions) == "" {
		return nil, fmt.Errorf("built-in %s: instructions.md is empty", dir)
	}
	if d.Skills, err = loadSkills(fsys, dir); err != nil {
		return nil, err
	}
	if d.Routines, err = loadRoutines(fsys, dir); err != nil {
		return nil, err
	}
	return d, nil
}

// loadSkills reads dir/skills/<name>/SKILL.md.
func loadSkills(fsys fs.FS, dir string) ([]*Skill, error) {
	entries, err := fs.ReadDir(fsys, path.Join(dir, "skills"))
	if err != nil {
		return nil, nil // no skills folder
	}
	var out []*Skill
	for _, e := range entries {
		if !e.IsDir() {
			return nil, fmt.Errorf("built-in %s: skills/%s must be a folder holding SKILL.md", dir, e.Name())
		}
		raw, err := fs.ReadFile(fsys, path.Join(dir, "skills", e.Name(), "SKILL.md"))
		if err != nil {
			return nil, fmt.Errorf("error reading built-in %s skill %s: %w", dir, e.Name(), err)
		}
		front := frontmatter(string(raw))
		s := &Skill{Name: front["name"], Description: front["description"], Markdown: string(raw)}
		switch {
		case s.Name != e.Name() || !nameRE.MatchString(s.Name):
			return nil, fmt.Errorf("built-in %s: skill %s must name itself %q in its frontmatter", dir, e.Name(), e.Name())
		case s.Description == "":
			return nil, fmt.Errorf("built-in %s: skill %s needs a description in its frontmatter", dir, e.Name())
		}
		out = append(out, s)
	}
	return out, nil
}

// loadRoutines reads dir/routines/<key>.json.
func loadRoutines(fsys fs.FS, dir string) ([]*Routine, error) {
	entries, err := fs.ReadDir(fsys, path.Join(dir, "routines"))
	if err != nil {
		return nil, nil // no routines folder
	}
	var out []*Routine
	for _, e := range entries {
		key, ok := strings.CutSuffix(e.Name(), ".json")
		if e.IsDir() || !ok {
			return nil, fmt.Errorf("built-in %s: routines/%s must be a .json file", dir, e.Name())
		}
		raw, err := fs.ReadFile(fsys, path.Join(dir, "routines", e.Name()))
		if err != nil {
			return nil, fmt.Errorf("error reading built-in %s routine %s: %w", dir, key, err)
		}
		r := new(Routine)
		if err := strictDecode(raw, r); err != nil {
			return nil, fmt.Errorf("error decoding built-in %s routine %s: %w", dir, key, err)
		}
		switch {
		case r.Key != key || !keyRE.MatchString(key):
			return nil, fmt.Errorf("built-in %s: routine %s must be keyed %q", dir, e.Name(), key)
		case strings.TrimSpace(r.Title) == "" || strings.TrimSpace(r.CronExpression) == "":
			return nil, fmt.Errorf("built-in %s: routine %s needs a title and a cronExpression", dir, key)
		}
		if r.Timezone == "" {
			r.Timezone = "UTC"
		}
		out = append(out, r)
	}
	return out, nil
}

// strictDecode decodes one JSON object, refusing unknown fields and trailing data.
func strictDecode(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data after the object")
	}
	return nil
}

// frontmatter reads the `key: value` lines between the leading `---` fences of a markdown
// file.
func frontmatter(md string) map[string]string {
	out := map[string]string{}
	rest, ok := strings.CutPrefix(strings.ReplaceAll(md, "\r\n", "\n"), "---\n")
	if !ok {
		return out
	}
	block, _, ok := strings.Cut(rest, "\n---")
	if !ok {
		return out
	}
	for _, line := range strings.Split(block, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok {
			out[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), `"'`)
		}
	}
	return out
}
