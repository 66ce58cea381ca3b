package skills

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// hashMarker is the file beside a materialised skill's files that records their content hash.
const hashMarker = ".keel-content-hash"

// skillDir is where a company's skill is materialised under the extension's data dir.
func (x *Skills) skillDir(companyID string, s *Skill) string {
	return filepath.Join(x.dataDir, "companies", companyID, "skills", s.Slug+"--"+shortHash(s.Key))
}

// materialize writes a skill's files to the data dir unless they are already there at the
// skill's content hash, and returns the folder. The database stays the source of truth:
// each node materialises on demand, atomically (a new folder renamed into place).
func (x *Skills) materialize(ctx context.Context, s *Skill) (string, error) {
	if x.dataDir == "" {
		return "", fmt.Errorf("the skills extension has no data dir")
	}
	dir := x.skillDir(s.CompanyID, s)
	if b, err := os.ReadFile(filepath.Join(dir, hashMarker)); err == nil && strings.TrimSpace(string(b)) == s.ContentHash {
		return dir, nil
	}
	files, err := skillFiles(ctx, x.pool, s.ID)
	if err != nil {
		return "", err
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", fmt.Errorf("error creating %s: %w", parent, err)
	}
	tmp, err := os.MkdirTemp(parent, ".tmp-")
	if err != nil {
		return "", fmt.Errorf("error materialising skill %s: %w", s.Key, err)
	}
	defer os.RemoveAll(tmp) //nolint:errcheck
	for p, b := range files {
		rel, ok := cleanRelPath(p)
		if !ok {
			continue
		}
		full := filepath.Join(tmp, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return "", fmt.Errorf("error materialising skill %s: %w", s.Key, err)
		}
		mode := os.FileMode(0o644)
		if classify(rel, b) == InvScript {
			mode = 0o755
		}
		if err := os.WriteFile(full, b, mode); err != nil {
			return "", fmt.Errorf("error materialising skill %s: %w", s.Key, err)
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, hashMarker), []byte(s.ContentHash+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("error materialising skill %s: %w", s.Key, err)
	}
	old := dir + ".old-" + shortHash(tmp)
	_ = os.Rename(dir, old)
	if err := os.Rename(tmp, dir); err != nil {
		return "", fmt.Errorf("error materialising skill %s: %w", s.Key, err)
	}
	_ = os.RemoveAll(old)
	return dir, nil
}

// forget removes a skill's materialised files (a failure is logged).
func (x *Skills) forget(companyID string, s *Skill) {
	if x.dataDir == "" {
		return
	}
	if err := os.RemoveAll(x.skillDir(companyID, s)); err != nil {
		x.log.Warn("error removing a skill's files", "skill", s.ID, "error", err)
	}
}

// forgetCompany removes a company's materialised skills.
func (x *Skills) forgetCompany(companyID string) error {
	if x.dataDir == "" {
		return nil
	}
	if err := os.RemoveAll(filepath.Join(x.dataDir, "companies", companyID)); err != nil {
		return fmt.Errorf("error removing the skill files of company %s: %w", companyID, err)
	}
	return nil
}

// materializeAll materialises written skills (the import step "materialise catalog files");
// a failure is logged: the database holds the files and a later read materialises them.
func (x *Skills) materializeAll(ctx context.Context, list ...*Skill) {
	for _, s := range list {
		if _, err := x.materialize(ctx, s); err != nil {
			x.log.Warn("error materialising a skill", "skill", s.ID, "error", err)
		}
	}
}
