package skills

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/keelhq/keel/sdk"
)

// bundledKeyPrefix is the canonical key prefix of bundled skills.
const bundledKeyPrefix = "keelhq/keel/"

// importOptions adjust an import.
type importOptions struct {
	// ProjectID files scanned skills under the project's folder (project scans).
	ProjectID   string
	ProjectName string
	// Scan makes the import non-destructive: an existing skill of another source, or one
	// whose slug another key already uses, is reported as a conflict and left alone.
	Scan bool
}

// importOutcome is what an import did.
type importOutcome struct {
	Imported  []*Skill
	Updated   []*Skill
	Skipped   []map[string]any
	Conflicts []map[string]any
	Warnings  []string
}

// prepared is a candidate turned into an upsert.
type prepared struct {
	params *upsertParams
	dir    string
}

// prepare parses a candidate's SKILL.md and derives its slug, key and metadata.
func prepare(companyID string, src *Source, c candidate) (*prepared, []string, error) {
	md, ok := c.Files[SkillFile]
	if !ok {
		return nil, nil, fmt.Errorf("%s: no %s", c.Dir, SkillFile)
	}
	p, err := ParseSkill(string(md))
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", c.Dir, err)
	}
	var warnings []string
	for _, w := range p.Warnings {
		warnings = append(warnings, c.Dir+"/"+SkillFile+": "+w)
	}
	dirName := path.Base(c.Dir)
	if c.Dir == "" || dirName == "." || dirName == "/" {
		dirName = src.Repo
	}
	slug := deriveSlug(p, dirName)
	name := p.Name
	if name == "" {
		name = slug
	}
	if len(name) > maxSkillName {
		name = name[:maxSkillName]
	}
	desc := p.Description
	if len(desc) > maxSkillDescription {
		desc = desc[:maxSkillDescription]
	}
	meta := p.Metadata
	meta["sourceKind"] = src.Type
	var key string
	var ref *string
	switch src.Type {
	case SourceForge, SourceRegistrySite:
		key = strings.ToLower(src.Owner + "/" + src.Repo + "/" + slug)
		ref = nilIfEmpty(src.Commit)
		meta["owner"], meta["repo"], meta["ref"], meta["trackingRef"], meta["commit"] = src.Owner, src.Repo, src.Commit, src.TrackingRef, src.Commit
		meta["hostname"], meta["path"] = src.Hostname, c.Dir
		meta["sources"] = []any{map[string]any{"kind": "github-dir", "repo": src.Owner + "/" + src.Repo, "path": c.Dir,
			"commit": src.Commit, "trackingRef": src.TrackingRef, "hostname": src.Hostname, "url": c.Locator}}
		if src.Original != "" {
			meta["originalLocator"] = src.Original
		}
	case SourceURL:
		key = "url/" + strings.ToLower(src.Hostname) + "/" + shortHash(src.Locator) + "/" + slug
		meta["sources"] = []any{map[string]any{"kind": "url", "url": src.Locator, "rawUrl": src.Locator, "hostname": src.Hostname}}
	case SourceLocalPath, SourceProjectScan:
		key = "local/" + shortHash(c.Locator) + "/" + slug
		meta["path"] = c.Locator
	case SourceManagedLocal:
		key = "company/" + companyID + "/" + slug
	case SourceBundled:
		key = bundledKeyPrefix + slug
	}
	if p.KeyOverride != "" && src.Type != SourceBundled && src.Type != SourceManagedLocal {
		key = p.KeyOverride
	}
	files := c.Files
	return &prepared{dir: c.Dir, params: &upsertParams{CompanyID: companyID, Key: key, Slug: slug, Name: name, Description: desc,
		SourceType: src.Type, Locator: nilIfEmpty(c.Locator), Ref: ref, Metadata: meta, Files: files}}, warnings, nil
}

// importCandidates persists the skills a source holds, one row per (company, key).
func (x *Skills) importCandidates(ctx context.Context, companyID string, src *Source, cands []candidate, opt importOptions) (*importOutcome, error) {
	out := &importOutcome{Imported: []*Skill{}, Updated: []*Skill{}, Skipped: []map[string]any{}, Conflicts: []map[string]any{},
		Warnings: []string{}}
	var preps []*prepared
	seen := map[string]string{}
	for _, c := range cands {
		p, w, err := prepare(companyID, src, c)
		out.Warnings = append(out.Warnings, w...)
		if err != nil {
			out.Warnings = append(out.Warnings, err.Error()+", skipped")
			continue
		}
		if strings.HasPrefix(p.params.Key, bundledKeyPrefix) && src.Type != SourceBundled {
			out.Warnings = append(out.Warnings, fmt.Sprintf("%s: the key %s belongs to a bundled skill, skipped", c.Dir, p.params.Key))
			out.Skipped = append(out.Skipped, map[string]any{"key": p.params.Key, "slug": p.params.Slug, "reason": "bundled_key"})
			continue
		}
		if first, dup := seen[p.params.Key]; dup {
			out.Warnings = append(out.Warnings, fmt.Sprintf("%s: the key %s is also the key of %s, skipped", c.Dir, p.params.Key, first))
			out.Skipped = append(out.Skipped, map[string]any{"key": p.params.Key, "slug": p.params.Slug, "reason": "duplicate_key"})
			continue
		}
		seen[p.params.Key] = c.Dir
		preps = append(preps, p)
	}
	var folderID *string
	if opt.ProjectID != "" && len(preps) > 0 {
		name, slug := strings.TrimSpace(opt.ProjectName), Slugify(opt.ProjectName)
		if name == "" || slug == "" {
			name, slug = "Project "+opt.ProjectID[:8], "project-"+opt.ProjectID[:8]
		}
		if len(name) > 120 {
			name = name[:120]
		}
		f, err := x.systemFolder(ctx, companyID, "project:"+opt.ProjectID, name, slug, "projects")
		if err != nil {
			x.log.Warn("error filing scanned skills", "project", opt.ProjectID, "error", err)
		} else {
			folderID = &f
		}
	}
	err := x.inTx(ctx, func(tx pgx.Tx) error {
		for _, p := range preps {
			if opt.Scan {
				conflict, err := scanConflict(ctx, tx, companyID, p.params)
				if err != nil {
					return err
				}
				if conflict != nil {
					out.Conflicts = append(out.Conflicts, conflict)
					continue
				}
				p.params.FolderID = folderID
			}
			res, err := skillUpsert(ctx, tx, p.params)
			if err != nil {
				return err
			}
			switch {
			case res.Created:
				out.Imported = append(out.Imported, res.Skill)
			case res.Changed:
				out.Updated = append(out.Updated, res.Skill)
			default:
				out.Skipped = append(out.Skipped, map[string]any{"key": res.Skill.Key, "slug": res.Skill.Slug, "skillId": res.Skill.ID,
					"reason": "unchanged"})
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	x.materializeAll(ctx, out.Imported...)
	x.materializeAll(ctx, out.Updated...)
	return out, nil
}

// scanConflict reports a scanned skill that would overwrite another source's skill, or
// whose slug another key uses (nil when it may be written).
func scanConflict(ctx context.Context, tx pgx.Tx, companyID string, p *upsertParams) (map[string]any, error) {
	cur, err := skillGetByKey(ctx, tx, companyID, p.Key)
	if err != nil {
		return nil, err
	}
	if cur != nil && cur.SourceType != SourceProjectScan {
		return map[string]any{"key": p.Key, "slug": p.Slug, "path": deref(p.Locator), "reason": "key_conflict",
			"existingSkillId": cur.ID, "existingSourceType": cur.SourceType}, nil
	}
	var otherID, otherKey string
	err = tx.QueryRow(ctx, `SELECT id, key FROM skills WHERE company_id = $1 AND slug = $2 AND key <> $3 LIMIT 1`,
		companyID, p.Slug, p.Key).Scan(&otherID, &otherKey)
	if err == nil {
		return map[string]any{"key": p.Key, "slug": p.Slug, "path": deref(p.Locator), "reason": "slug_conflict",
			"existingSkillId": otherID, "existingKey": otherKey}, nil
	}
	if err != pgx.ErrNoRows {
		return nil, fmt.Errorf("error checking slug %s: %w", p.Slug, err)
	}
	return nil, nil
}

// systemFolder ensures a system-managed skill folder with the folders owner and returns its id.
func (x *Skills) systemFolder(ctx context.Context, companyID, systemKey, name, slug, parent string) (string, error) {
	var f struct {
		ID string `json:"id"`
	}
	in := map[string]any{"kind": "skill", "systemKey": systemKey, "name": name, "slug": slug}
	if parent != "" {
		in["parentSystemKey"] = parent
	}
	if err := x.host.Call(ctx, "folders.ensureSystem", sdk.SystemActor(), companyID, in, &f); err != nil {
		return "", fmt.Errorf("error ensuring skill folder %s: %w", systemKey, err)
	}
	return f.ID, nil
}

// logImport records company.skills_imported for an import that wrote skills.
func (x *Skills) logImport(ctx context.Context, companyID string, src *Source, out *importOutcome, action string) {
	if len(out.Imported)+len(out.Updated) == 0 {
		return
	}
	brief := func(list []*Skill) []map[string]any {
		r := make([]map[string]any, 0, len(list))
		for _, s := range list {
			r = append(r, map[string]any{"id": s.ID, "key": s.Key, "slug": s.Slug, "name": s.Name, "trustLevel": s.TrustLevel})
		}
		return r
	}
	details := map[string]any{"sourceType": src.Type, "sourceLocator": src.Locator, "imported": brief(out.Imported),
		"updated": brief(out.Updated), "count": len(out.Imported) + len(out.Updated), "via": action}
	if src.Original != "" {
		details["originalLocator"] = src.Original
	}
	err := x.host.LogActivity(ctx, &sdk.ActivityEntry{CompanyID: companyID, Actor: sdk.ActorFrom(ctx), Action: "company.skills_imported",
		EntityType: "company", EntityID: companyID, Details: details})
	if err != nil {
		x.log.Warn("error appending activity", "action", "company.skills_imported", "error", err)
	}
	for _, s := range append(append([]*Skill{}, out.Imported...), out.Updated...) {
		x.log.Info("skill_imported", "company", companyID, "skill", s.ID, "key", s.Key, "sourceType", s.SourceType, "trustLevel", s.TrustLevel)
	}
}
