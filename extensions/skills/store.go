package skills

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/keelhq/keel/sdk"
)

// Error texts (spec part 2 "Errors"; the ones the spec leaves open are plain English).
const (
	msgSkillNotFound     = "Skill not found"
	msgFileNotFound      = "Skill file not found"
	msgBundledReadOnly   = "Bundled skills are read-only"
	msgNotEditable       = "Only managed skills can be edited"
	msgNotForge          = "Only forge-managed skills can be updated"
	msgPermission        = "Missing permission agents:create for this company"
	reasonBundled        = "Bundled skills are re-imported from keel and cannot be edited"
	reasonSourceManaged  = "Imported skills follow their source; create a managed skill to edit"
	reasonPluginManaged  = "Managed by a plugin"
	maxSkillName         = 200
	maxSkillDescription  = 4000
	maxManagedFileLength = 1 << 20
)

const skillCols = `id, company_id, key, slug, name, description, source_type, source_locator, source_ref, metadata, trust_level,
	inventory, content_hash, folder_id, managed_by, created_at, updated_at`

// scanSkill reads one skill row.
func scanSkill(row pgx.Row) (*Skill, error) {
	s := &Skill{}
	var md, inv []byte
	if err := row.Scan(&s.ID, &s.CompanyID, &s.Key, &s.Slug, &s.Name, &s.Description, &s.SourceType, &s.SourceLocator,
		&s.SourceRef, &md, &s.TrustLevel, &inv, &s.ContentHash, &s.FolderID, &s.ManagedBy, &s.CreatedAt, &s.UpdatedAt); err != nil {
		return nil, err
	}
	_ = json.Unmarshal(md, &s.Metadata)
	_ = json.Unmarshal(inv, &s.FileInventory)
	if s.Metadata == nil {
		s.Metadata = map[string]any{}
	}
	if s.FileInventory == nil {
		s.FileInventory = []InventoryEntry{}
	}
	s.decorate()
	return s, nil
}

// decorate sets the computed fields.
func (s *Skill) decorate() {
	switch {
	case s.SourceType == SourceBundled:
		s.Editable, s.EditableReason = false, ptr(reasonBundled)
	case s.ManagedBy != nil:
		s.Editable, s.EditableReason = false, ptr(reasonPluginManaged)
	case s.SourceType == SourceManagedLocal:
		s.Editable, s.EditableReason = true, nil
	default:
		s.Editable, s.EditableReason = false, ptr(reasonSourceManaged)
	}
}

// querier is a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// skillGet reads a skill of a company (nil when missing).
func skillGet(ctx context.Context, q querier, companyID, id string) (*Skill, error) {
	if !sdk.IsUUID(id) {
		return nil, nil
	}
	s, err := scanSkill(q.QueryRow(ctx, `SELECT `+skillCols+` FROM skills WHERE id = $1 AND company_id = $2`, id, companyID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("error reading skill %s: %w", id, err)
	}
	return s, nil
}

// skillGetByKey reads a skill by its canonical key (nil when missing).
func skillGetByKey(ctx context.Context, q querier, companyID, key string) (*Skill, error) {
	s, err := scanSkill(q.QueryRow(ctx, `SELECT `+skillCols+` FROM skills WHERE company_id = $1 AND key = $2`, companyID, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("error reading skill %s: %w", key, err)
	}
	return s, nil
}

// skillList reads a company's skills by name.
func skillList(ctx context.Context, q querier, companyID string) ([]*Skill, error) {
	rows, err := q.Query(ctx, `SELECT `+skillCols+` FROM skills WHERE company_id = $1 ORDER BY name, key`, companyID)
	if err != nil {
		return nil, fmt.Errorf("error listing skills: %w", err)
	}
	defer rows.Close()
	out := []*Skill{}
	for rows.Next() {
		s, err := scanSkill(rows)
		if err != nil {
			return nil, fmt.Errorf("error reading a skill: %w", err)
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// skillFiles reads a skill's files.
func skillFiles(ctx context.Context, q querier, skillID string) (map[string][]byte, error) {
	rows, err := q.Query(ctx, `SELECT path, content FROM skill_files WHERE skill_id = $1`, skillID)
	if err != nil {
		return nil, fmt.Errorf("error reading the files of skill %s: %w", skillID, err)
	}
	defer rows.Close()
	out := map[string][]byte{}
	for rows.Next() {
		var p string
		var b []byte
		if err := rows.Scan(&p, &b); err != nil {
			return nil, fmt.Errorf("error reading a skill file: %w", err)
		}
		out[p] = b
	}
	return out, rows.Err()
}

// skillFile reads one file of a skill (nil when missing).
func skillFile(ctx context.Context, q querier, skillID, p string) ([]byte, error) {
	var b []byte
	err := q.QueryRow(ctx, `SELECT content FROM skill_files WHERE skill_id = $1 AND path = $2`, skillID, p).Scan(&b)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("error reading file %s of skill %s: %w", p, skillID, err)
	}
	return b, nil
}

// upsertParams is a skill to write, keyed on (company, key).
type upsertParams struct {
	CompanyID   string
	Key         string
	Slug        string
	Name        string
	Description string
	SourceType  string
	Locator     *string
	Ref         *string
	Metadata    map[string]any
	Files       map[string][]byte
	ManagedBy   *string
	// FolderID files a new skill (an existing one keeps its folder unless Refile).
	FolderID *string
	Refile   bool
}

// upsertResult says what an upsert did.
type upsertResult struct {
	Skill   *Skill
	Created bool
	Changed bool
}

// skillUpsert writes a skill and its files in a transaction; an unchanged skill is not
// written at all.
func skillUpsert(ctx context.Context, tx pgx.Tx, p *upsertParams) (*upsertResult, error) {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, "skills:"+p.CompanyID+":"+p.Key); err != nil {
		return nil, fmt.Errorf("error locking skill %s: %w", p.Key, err)
	}
	cur, err := skillGetByKey(ctx, tx, p.CompanyID, p.Key)
	if err != nil {
		return nil, err
	}
	inv := inventory(p.Files)
	hash := contentHash(p.Files)
	md, err := json.Marshal(p.Metadata)
	if err != nil {
		return nil, fmt.Errorf("error encoding skill metadata: %w", err)
	}
	invJSON, _ := json.Marshal(inv)
	now := time.Now().UTC().Truncate(time.Microsecond)
	folder := p.FolderID
	if cur != nil {
		curMD, _ := json.Marshal(cur.Metadata)
		if !p.Refile {
			folder = cur.FolderID
		}
		if cur.ContentHash == hash && cur.Slug == p.Slug && cur.Name == p.Name && cur.Description == p.Description &&
			cur.SourceType == p.SourceType && deref(cur.SourceLocator) == deref(p.Locator) && deref(cur.SourceRef) == deref(p.Ref) &&
			bytes.Equal(curMD, md) && deref(cur.ManagedBy) == deref(p.ManagedBy) && deref(cur.FolderID) == deref(folder) {
			return &upsertResult{Skill: cur}, nil
		}
	}
	id := uuid.Must(uuid.NewV7()).String()
	if cur != nil {
		id = cur.ID
	}
	s, err := scanSkill(tx.QueryRow(ctx, `INSERT INTO skills (id, company_id, key, slug, name, description, source_type, source_locator,
			source_ref, metadata, trust_level, inventory, content_hash, folder_id, managed_by, created_at, updated_at)
		VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$16)
		ON CONFLICT (company_id, key) DO UPDATE SET slug = EXCLUDED.slug, name = EXCLUDED.name, description = EXCLUDED.description,
			source_type = EXCLUDED.source_type, source_locator = EXCLUDED.source_locator, source_ref = EXCLUDED.source_ref,
			metadata = EXCLUDED.metadata, trust_level = EXCLUDED.trust_level, inventory = EXCLUDED.inventory,
			content_hash = EXCLUDED.content_hash, folder_id = EXCLUDED.folder_id, managed_by = EXCLUDED.managed_by,
			updated_at = EXCLUDED.updated_at
		RETURNING `+skillCols, id, p.CompanyID, p.Key, p.Slug, p.Name, p.Description, p.SourceType, p.Locator, p.Ref, md,
		trustOf(inv), invJSON, hash, folder, p.ManagedBy, now))
	if err != nil {
		return nil, fmt.Errorf("error writing skill %s: %w", p.Key, err)
	}
	if cur == nil || cur.ContentHash != hash {
		if _, err := tx.Exec(ctx, `DELETE FROM skill_files WHERE skill_id = $1`, s.ID); err != nil {
			return nil, fmt.Errorf("error replacing the files of skill %s: %w", p.Key, err)
		}
		for path, b := range p.Files {
			if _, err := tx.Exec(ctx, `INSERT INTO skill_files (skill_id, company_id, path, content) VALUES ($1, $2, $3, $4)`,
				s.ID, p.CompanyID, path, b); err != nil {
				return nil, fmt.Errorf("error writing file %s of skill %s: %w", path, p.Key, err)
			}
		}
	}
	return &upsertResult{Skill: s, Created: cur == nil, Changed: true}, nil
}

// inTx runs fn in a transaction.
func (x *Skills) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	tx, err := x.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("error starting a transaction: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("error committing: %w", err)
	}
	return nil
}

// ptr returns a pointer to v.
func ptr[T any](v T) *T { return &v }

// deref returns *p or "".
func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// nilIfEmpty is nil for "" and &s otherwise.
func nilIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
