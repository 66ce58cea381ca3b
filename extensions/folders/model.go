package folders

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"golang.org/x/text/unicode/norm"

	"github.com/keelhq/keel/sdk"
)

// Folder kinds.
const (
	KindRoutine = "routine"
	KindSkill   = "skill"
)

// Folder limits (spec part 2 "Limits").
const (
	maxDepth   = 4
	maxName    = 120
	maxSlug    = 120
	maxColor   = 80
	maxFolders = 10000
)

// System keys of the reserved skill containers and the prefixes of system-managed folders.
const (
	sysBundled        = "bundled"
	sysMy             = "my"
	sysProjects       = "projects"
	sysMyPrefix       = "my:"
	sysProjectPrefix  = "project:"
	sysBundledPrefix  = "bundled:"
	personalSlugFalls = "me"
)

// reservedSkillSlugs are root skill slugs only the system may use.
var reservedSkillSlugs = map[string]bool{sysBundled: true, sysMy: true, sysProjects: true}

// Error texts (spec part 2 "Errors").
const (
	msgKindRequired    = "Folder kind query parameter is required"
	msgDepth           = "Folder depth cannot exceed 4"
	msgOwnParent       = "A folder cannot be its own parent"
	msgOwnSubtree      = "A folder cannot be moved into its own subtree"
	msgKindMismatch    = "Folder kind must match item kind"
	msgParentNotFound  = "Parent folder not found"
	msgFolderNotFound  = "Folder not found"
	msgRoutineNotFound = "Routine not found"
	msgSkillNotFound   = "Skill not found"
	msgSlugTaken       = "Folder slug already exists under this parent"
	msgHasChildren     = "Move or delete nested folders first"
	msgSystemManaged   = "System-managed folders cannot be changed"
	msgBundledReadOnly = "Bundled folders are read-only"
	msgReserved        = "Reserved skill folders are system-managed"
	msgBundledSkill    = "Bundled skills cannot be moved"
	msgBoardUser       = "A signed-in board user is required to create a personal skill folder"
	msgPatchEmpty      = "At least one folder field is required"
)

// slugPattern is the spec's slug pattern.
var slugPattern = regexp.MustCompile(`^[a-z0-9]+(?:-[a-z0-9]+)*$`)

// Folder is a folder as the API shows it.
type Folder struct {
	ID        string    `json:"id"`
	CompanyID string    `json:"companyId"`
	Kind      string    `json:"kind"`
	ParentID  *string   `json:"parentId"`
	Name      string    `json:"name"`
	Slug      string    `json:"slug"`
	SystemKey *string   `json:"systemKey"`
	Color     *string   `json:"color"`
	Position  int       `json:"position"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	Path      string    `json:"path"`
	Depth     int       `json:"depth"`
	// ItemCount is the direct number of items in the folder (list view only).
	ItemCount *int `json:"itemCount,omitempty"`
	// Children are the folder's descendants after a move, shallowest first.
	Children []*Folder `json:"children,omitempty"`
}

// isBundled reports whether the folder is in the bundled tree.
func (f *Folder) isBundled() bool {
	return f.SystemKey != nil && (*f.SystemKey == sysBundled || strings.HasPrefix(*f.SystemKey, sysBundledPrefix))
}

// isSystem reports whether the folder is system-managed.
func (f *Folder) isSystem() bool { return f.SystemKey != nil }

// Slugify derives a slug from a name: accents stripped, lowercased, every run of other
// characters collapsed to one hyphen, trimmed of hyphens and cut to 120 characters.
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
	if len(s) > maxSlug {
		s = strings.TrimRight(s[:maxSlug], "-")
	}
	return s
}

// tree is a company's folders of one kind, by id, with paths and depths computed.
type tree struct {
	byID map[string]*Folder
}

const folderCols = `id, company_id, kind, parent_id, name, slug, system_key, color, position, created_at, updated_at`

// querier is a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// scanFolder reads one folder row.
func scanFolder(row pgx.Row) (*Folder, error) {
	f := &Folder{}
	err := row.Scan(&f.ID, &f.CompanyID, &f.Kind, &f.ParentID, &f.Name, &f.Slug, &f.SystemKey, &f.Color, &f.Position,
		&f.CreatedAt, &f.UpdatedAt)
	return f, err
}

// loadTree reads a company's folders of one kind and computes their paths and depths.
func loadTree(ctx context.Context, q querier, companyID, kind string) (*tree, error) {
	rows, err := q.Query(ctx, `SELECT `+folderCols+` FROM folders WHERE company_id = $1 AND kind = $2`, companyID, kind)
	if err != nil {
		return nil, fmt.Errorf("error reading the %s folders of company %s: %w", kind, companyID, err)
	}
	defer rows.Close()
	t := &tree{byID: map[string]*Folder{}}
	for rows.Next() {
		f, err := scanFolder(rows)
		if err != nil {
			return nil, fmt.Errorf("error reading a folder: %w", err)
		}
		t.byID[f.ID] = f
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error reading the %s folders of company %s: %w", kind, companyID, err)
	}
	t.compute()
	return t, nil
}

// compute fills every folder's path and depth from its ancestors.
func (t *tree) compute() {
	done := map[string]bool{}
	var visit func(f *Folder, guard int)
	visit = func(f *Folder, guard int) {
		if done[f.ID] {
			return
		}
		done[f.ID] = true
		f.Path, f.Depth = f.Slug, 1
		if f.ParentID == nil || guard > maxFolders {
			return
		}
		p := t.byID[*f.ParentID]
		if p == nil {
			return
		}
		visit(p, guard+1)
		f.Path, f.Depth = p.Path+"/"+f.Slug, p.Depth+1
	}
	for _, f := range t.byID {
		visit(f, 0)
	}
}

// children returns a folder's direct children ("" for roots), in list order.
func (t *tree) children(parentID string) []*Folder {
	var out []*Folder
	for _, f := range t.byID {
		if parentID == "" && f.ParentID == nil || f.ParentID != nil && *f.ParentID == parentID {
			out = append(out, f)
		}
	}
	sortFolders(out)
	return out
}

// descendants returns a folder's descendants, shallowest first.
func (t *tree) descendants(id string) []*Folder {
	var out []*Folder
	queue := []string{id}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, c := range t.children(cur) {
			out = append(out, c)
			queue = append(queue, c.ID)
		}
	}
	return out
}

// height is the number of levels of a folder's subtree (1 for a leaf).
func (t *tree) height(id string) int {
	h := 1
	for _, d := range t.descendants(id) {
		if n := d.Depth - t.byID[id].Depth + 1; n > h {
			h = n
		}
	}
	return h
}

// inBundledTree reports whether a folder or one of its ancestors is a bundled folder.
func (t *tree) inBundledTree(f *Folder) bool {
	for i := 0; f != nil && i <= maxFolders; i++ {
		if f.isBundled() {
			return true
		}
		if f.ParentID == nil {
			return false
		}
		f = t.byID[*f.ParentID]
	}
	return false
}

// bySystemKey returns the folder with a system key, or nil.
func (t *tree) bySystemKey(key string) *Folder {
	for _, f := range t.byID {
		if f.SystemKey != nil && *f.SystemKey == key {
			return f
		}
	}
	return nil
}

// slugTaken reports whether a sibling other than self already uses slug.
func (t *tree) slugTaken(parentID *string, slug, self string) bool {
	p := ""
	if parentID != nil {
		p = *parentID
	}
	for _, c := range t.children(p) {
		if c.ID != self && c.Slug == slug {
			return true
		}
	}
	return false
}

// nextPosition is one past the highest position among a parent's children.
func (t *tree) nextPosition(parentID *string) int {
	p := ""
	if parentID != nil {
		p = *parentID
	}
	next := 0
	for _, c := range t.children(p) {
		if c.Position >= next {
			next = c.Position + 1
		}
	}
	return next
}

// sorted returns every folder sorted by position, name and id.
func (t *tree) sorted() []*Folder {
	out := make([]*Folder, 0, len(t.byID))
	for _, f := range t.byID {
		out = append(out, f)
	}
	sortFolders(out)
	return out
}

// sortFolders sorts by position, name, id.
func sortFolders(fs []*Folder) {
	sort.Slice(fs, func(i, j int) bool {
		a, b := fs[i], fs[j]
		if a.Position != b.Position {
			return a.Position < b.Position
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.ID < b.ID
	})
}

// lockKind serializes a company's writes to one folder tree for the transaction.
func lockKind(ctx context.Context, tx pgx.Tx, companyID, kind string) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, "folders:"+companyID+":"+kind); err != nil {
		return fmt.Errorf("error locking the %s folders of company %s: %w", kind, companyID, err)
	}
	return nil
}

// inTx runs fn in a transaction.
func (x *Folders) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
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

// folderKindOf reads a folder's company and kind (nil when missing or outside the company).
func (x *Folders) folderKindOf(ctx context.Context, companyID, id string) (string, error) {
	if !sdk.IsUUID(id) {
		return "", nil
	}
	var kind string
	err := x.pool.QueryRow(ctx, `SELECT kind FROM folders WHERE id = $1 AND company_id = $2`, id, companyID).Scan(&kind)
	if err == pgx.ErrNoRows {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("error reading folder %s: %w", id, err)
	}
	return kind, nil
}

// newID returns a time-ordered UUID.
func newID() string { return uuid.Must(uuid.NewV7()).String() }

// nowUTC is the current time at the database's precision.
func nowUTC() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// ptr returns a pointer to v.
func ptr[T any](v T) *T { return &v }
