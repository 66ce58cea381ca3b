package folders

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/keelhq/keel/sdk"
)

func init() {
	addRoutes(
		route{Method: http.MethodGet, Path: "/api/companies/{companyId}/folders", CompanyFromPath: true, Query: listQuery{},
			Response: new(FolderList), Errors: []int{http.StatusBadRequest},
			Summary: "List a company's routine or skill folders with direct item counts, all and unfiled item counts",
			Handle:  (*Folders).handleList},
		route{Method: http.MethodPost, Path: "/api/companies/{companyId}/folders", CompanyFromPath: true, Body: CreateBody{},
			Status: http.StatusCreated, Response: new(Folder), Errors: []int{http.StatusNotFound, http.StatusConflict, http.StatusUnprocessableEntity},
			Summary: "Create a folder (kind, name; parentId, slug derived from the name when omitted, color, position)",
			Handle:  (*Folders).handleCreate},
		route{Method: http.MethodPost, Path: "/api/companies/{companyId}/folders/ensure-my", CompanyFromPath: true, Body: EnsureMyBody{},
			Response: new(Folder), Summary: "Ensure the signed-in board user's personal skill folder (systemKey my:{userId}); idempotent",
			Handle: (*Folders).handleEnsureMy},
		route{Method: http.MethodPatch, Path: "/api/companies/{companyId}/folders/{folderId}", CompanyFromPath: true, Body: PatchBody{},
			Response: new(Folder), Errors: []int{http.StatusNotFound, http.StatusConflict},
			Summary: "Rename, re-slug, recolour or reposition a folder (a new name without a slug re-derives the slug)",
			Handle:  (*Folders).handlePatch},
		route{Method: http.MethodPost, Path: "/api/companies/{companyId}/folders/{folderId}/move", CompanyFromPath: true, Body: MoveBody{},
			Response: new(Folder), Errors: []int{http.StatusNotFound, http.StatusConflict, http.StatusUnprocessableEntity},
			Summary: "Move a folder to a position under a parent (null for the root, omitted to keep); answers the folder with its children",
			Handle:  (*Folders).handleMove},
		route{Method: http.MethodPost, Path: "/api/companies/{companyId}/folders/items/move", CompanyFromPath: true, Body: ItemMoveBody{},
			Response: new(ItemMove), Errors: []int{http.StatusNotFound, http.StatusUnprocessableEntity},
			Summary: "File a routine or skill into a folder of its kind, or unfile it (folderId null or omitted)",
			Handle:  (*Folders).handleItemMove},
		route{Method: http.MethodDelete, Path: "/api/companies/{companyId}/folders/{folderId}", CompanyFromPath: true,
			Response: new(Deleted), Errors: []int{http.StatusNotFound, http.StatusConflict},
			Summary: "Delete a folder without child folders; its items become unfiled",
			Handle:  (*Folders).handleDelete},
	)
}

// listQuery documents the list's query parameters.
type listQuery struct {
	Kind string `query:"kind" jsonschema:"required,enum=routine,enum=skill" doc:"The tree to list: routine or skill"`
}

// FolderList is the answer of the folder list.
type FolderList struct {
	Kind    string    `json:"kind"`
	Folders []*Folder `json:"folders"`
	// AllCount is the number of items of the kind; UnfiledCount those in no folder.
	AllCount     int `json:"allCount"`
	UnfiledCount int `json:"unfiledCount"`
}

// CreateBody is the body of POST /api/companies/{companyId}/folders.
type CreateBody struct {
	Kind string `json:"kind" jsonschema:"required,enum=routine,enum=skill"`
	// Name is 1-120 characters.
	Name string `json:"name" jsonschema:"required,minLength=1,maxLength=120"`
	// ParentID is a folder of the same kind, or null for a root folder.
	ParentID *string `json:"parentId,omitempty" jsonschema:"format=uuid"`
	// Slug matches ^[a-z0-9]+(?:-[a-z0-9]+)*$; derived from the name when omitted.
	Slug *string `json:"slug,omitempty" jsonschema:"maxLength=120"`
	// Color is 1-80 characters or null.
	Color *string `json:"color,omitempty" jsonschema:"maxLength=80"`
	// Position is the sort order among siblings (default one past the highest).
	Position *int `json:"position,omitempty" jsonschema:"minimum=0"`
}

// EnsureMyBody is the body of POST /api/companies/{companyId}/folders/ensure-my.
type EnsureMyBody struct {
	// Slug is the personal folder's slug when it is created; a stable suffix is appended on collision.
	Slug sdk.PatchField[string] `json:"slug,omitempty"`
}

// PatchBody is the body of PATCH /api/companies/{companyId}/folders/{folderId}.
type PatchBody struct {
	Name     *string                `json:"name,omitempty" jsonschema:"minLength=1,maxLength=120"`
	Slug     *string                `json:"slug,omitempty" jsonschema:"maxLength=120"`
	Color    sdk.PatchField[string] `json:"color,omitempty"`
	Position *int                   `json:"position,omitempty" jsonschema:"minimum=0"`
}

// MoveBody is the body of POST /api/companies/{companyId}/folders/{folderId}/move.
type MoveBody struct {
	Position *int `json:"position" jsonschema:"required,minimum=0"`
	// ParentID is the new parent, null for the root; omitted keeps the parent.
	ParentID sdk.PatchField[string] `json:"parentId,omitempty"`
}

// ItemMoveBody is the body of POST /api/companies/{companyId}/folders/items/move.
type ItemMoveBody struct {
	Kind     string                 `json:"kind" jsonschema:"required,enum=routine,enum=skill"`
	ItemID   string                 `json:"itemId" jsonschema:"required,format=uuid"`
	FolderID sdk.PatchField[string] `json:"folderId,omitempty"`
}

// ItemMove is the answer of an item move.
type ItemMove struct {
	Kind     string  `json:"kind"`
	ItemID   string  `json:"itemId"`
	FolderID *string `json:"folderId"`
}

// Deleted is the answer of a folder delete.
type Deleted struct {
	Deleted *Folder `json:"deleted"`
}

// validKind reports whether kind names a folder tree.
func validKind(kind string) bool { return kind == KindRoutine || kind == KindSkill }

// checkSlug validates a given slug.
func checkSlug(slug string, bad func(path, msg string)) {
	if utf8.RuneCountInString(slug) < 1 || utf8.RuneCountInString(slug) > maxSlug || !slugPattern.MatchString(slug) {
		bad("slug", "must be 1 to 120 characters of lowercase letters and digits in hyphen-separated runs")
	}
}

// checkName validates a name and returns it trimmed.
func checkName(name string, bad func(path, msg string)) string {
	name = strings.TrimSpace(name)
	if n := utf8.RuneCountInString(name); n < 1 || n > maxName {
		bad("name", "must be 1 to 120 characters")
	}
	return name
}

// checkColor validates a colour.
func checkColor(c string, bad func(path, msg string)) {
	if n := utf8.RuneCountInString(c); n < 1 || n > maxColor {
		bad("color", "must be 1 to 80 characters or null")
	}
}

// validator collects validation details.
type validator struct{ d []sdk.ValidationDetail }

func (v *validator) bad(path, msg string) {
	v.d = append(v.d, sdk.ValidationDetail{Path: path, Message: msg})
}

func (v *validator) err() error {
	if len(v.d) == 0 {
		return nil
	}
	return sdk.ValidationError(v.d...)
}

// writable refuses a folder the caller may not rename, move or delete.
func writable(f *Folder, t *tree) error {
	if f.isBundled() || t.inBundledTree(f) {
		return sdk.Forbidden(msgBundledReadOnly)
	}
	if f.isSystem() {
		return sdk.Forbidden(msgSystemManaged)
	}
	return nil
}

// acceptsChildren refuses a parent that takes no hand-made child folders or items.
func acceptsChildren(p *Folder, t *tree) error {
	if p == nil {
		return nil
	}
	if t.inBundledTree(p) {
		return sdk.Forbidden(msgBundledReadOnly)
	}
	if p.SystemKey != nil && (*p.SystemKey == sysMy || *p.SystemKey == sysProjects) {
		return sdk.Forbidden(msgReserved)
	}
	return nil
}

// reservedRoot refuses a hand-made root skill folder with a reserved slug.
func reservedRoot(kind string, parentID *string, slug string) error {
	if kind == KindSkill && parentID == nil && reservedSkillSlugs[slug] {
		return sdk.Forbidden(msgReserved)
	}
	return nil
}

// activity appends one activity entry for a folder write; a failure is logged, not
// returned: the write it records has already happened.
func (x *Folders) activity(ctx context.Context, companyID, action, entityType, entityID string, details map[string]any) {
	err := x.host.LogActivity(ctx, &sdk.ActivityEntry{CompanyID: companyID, Actor: sdk.ActorFrom(ctx), Action: action,
		EntityType: entityType, EntityID: entityID, Details: details})
	if err != nil {
		x.log.Warn("error appending activity", "action", action, "entity", entityID, "error", err)
	}
}

func (x *Folders) handleList(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := sdk.CompanyIDFrom(ctx)
	kind := strings.TrimSpace(r.URL.Query().Get("kind"))
	if !validKind(kind) {
		x.writeErr(rw, sdk.NewError(http.StatusBadRequest, msgKindRequired))
		return
	}
	t, err := loadTree(ctx, x.pool, companyID, kind)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	c := x.counts(ctx, companyID, kind)
	out := &FolderList{Kind: kind, Folders: t.sorted(), AllCount: c.Total, UnfiledCount: c.Unfiled}
	for _, f := range out.Folders {
		f.ItemCount = ptr(c.ByFolder[f.ID])
	}
	sdk.WriteJSON(rw, http.StatusOK, out)
}

// insert writes a new folder row.
func insert(ctx context.Context, tx pgx.Tx, f *Folder) error {
	_, err := tx.Exec(ctx, `INSERT INTO folders (`+folderCols+`) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$10)`,
		f.ID, f.CompanyID, f.Kind, f.ParentID, f.Name, f.Slug, f.SystemKey, f.Color, f.Position, f.CreatedAt)
	if err != nil {
		return fmt.Errorf("error creating folder %s: %w", f.Slug, err)
	}
	return nil
}

func (x *Folders) handleCreate(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := sdk.CompanyIDFrom(ctx)
	var body CreateBody
	if err := sdk.DecodeJSON(r, &body); err != nil {
		x.writeErr(rw, err)
		return
	}
	v := &validator{}
	if !validKind(body.Kind) {
		v.bad("kind", "must be routine or skill")
	}
	name := checkName(body.Name, v.bad)
	var parentID *string
	if body.ParentID != nil {
		p := strings.ToLower(strings.TrimSpace(*body.ParentID))
		if !sdk.IsUUID(p) {
			v.bad("parentId", "must be a UUID or null")
		}
		parentID = &p
	}
	slug := ""
	if body.Slug != nil {
		slug = strings.TrimSpace(*body.Slug)
		checkSlug(slug, v.bad)
	} else if slug = Slugify(name); slug == "" && len(v.d) == 0 {
		v.bad("name", "must contain a letter or digit to derive a slug from, or give a slug")
	}
	if body.Color != nil {
		checkColor(*body.Color, v.bad)
	}
	if body.Position != nil && *body.Position < 0 {
		v.bad("position", "must be an integer >= 0")
	}
	if err := v.err(); err != nil {
		x.writeErr(rw, err)
		return
	}
	now := nowUTC()
	f := &Folder{ID: newID(), CompanyID: companyID, Kind: body.Kind, ParentID: parentID, Name: name, Slug: slug,
		Color: body.Color, CreatedAt: now, UpdatedAt: now}
	err := x.inTx(ctx, func(tx pgx.Tx) error {
		if err := lockKind(ctx, tx, companyID, f.Kind); err != nil {
			return err
		}
		t, err := loadTree(ctx, tx, companyID, f.Kind)
		if err != nil {
			return err
		}
		depth := 1
		if parentID != nil {
			p := t.byID[*parentID]
			if p == nil {
				return sdk.NotFound(msgParentNotFound)
			}
			if err := acceptsChildren(p, t); err != nil {
				return err
			}
			depth = p.Depth + 1
		}
		if err := reservedRoot(f.Kind, parentID, slug); err != nil {
			return err
		}
		if depth > maxDepth {
			return sdk.Unprocessable(msgDepth)
		}
		if t.slugTaken(parentID, slug, "") {
			return sdk.Conflict(msgSlugTaken)
		}
		if body.Position != nil {
			f.Position = *body.Position
		} else {
			f.Position = t.nextPosition(parentID)
		}
		if err := insert(ctx, tx, f); err != nil {
			return err
		}
		t.byID[f.ID] = f
		t.compute()
		return nil
	})
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	x.activity(ctx, companyID, "folder.created", "folder", f.ID, map[string]any{"kind": f.Kind, "name": f.Name,
		"slug": f.Slug, "parentId": f.ParentID, "path": f.Path})
	sdk.WriteJSON(rw, http.StatusCreated, f)
}

// ensureSystem returns the folder with a system key, creating it under parent when
// missing. It runs inside a transaction holding the tree's lock.
func ensureSystem(ctx context.Context, tx pgx.Tx, t *tree, companyID, kind, systemKey, name, slug string, parent *Folder) (*Folder, bool, error) {
	if f := t.bySystemKey(systemKey); f != nil {
		return f, false, nil
	}
	var parentID *string
	if parent != nil {
		parentID = &parent.ID
	}
	base := slug
	for i := 2; t.slugTaken(parentID, slug, ""); i++ {
		slug = fmt.Sprintf("%s-%d", base, i)
	}
	now := nowUTC()
	f := &Folder{ID: newID(), CompanyID: companyID, Kind: kind, ParentID: parentID, Name: name, Slug: slug,
		SystemKey: ptr(systemKey), Position: t.nextPosition(parentID), CreatedAt: now, UpdatedAt: now}
	if err := insert(ctx, tx, f); err != nil {
		return nil, false, err
	}
	t.byID[f.ID] = f
	t.compute()
	return f, true, nil
}

// stableSuffix is a short suffix derived from a user id.
func stableSuffix(userID string) string {
	sum := sha256.Sum256([]byte(userID))
	return hex.EncodeToString(sum[:])[:6]
}

func (x *Folders) handleEnsureMy(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := sdk.CompanyIDFrom(ctx)
	actor := sdk.ActorFrom(ctx)
	if actor == nil || actor.Type != "board" || actor.UserId == "" {
		x.writeErr(rw, sdk.Forbidden(msgBoardUser))
		return
	}
	var body EnsureMyBody
	if err := sdk.DecodeJSON(r, &body); err != nil {
		x.writeErr(rw, err)
		return
	}
	v := &validator{}
	slug := Slugify(actor.UserId)
	if body.Slug.Set && !body.Slug.Null {
		slug = strings.TrimSpace(body.Slug.Value)
		checkSlug(slug, v.bad)
	}
	if slug == "" {
		slug = personalSlugFalls
	}
	if err := v.err(); err != nil {
		x.writeErr(rw, err)
		return
	}
	var out *Folder
	created := false
	err := x.inTx(ctx, func(tx pgx.Tx) error {
		if err := lockKind(ctx, tx, companyID, KindSkill); err != nil {
			return err
		}
		t, err := loadTree(ctx, tx, companyID, KindSkill)
		if err != nil {
			return err
		}
		key := sysMyPrefix + actor.UserId
		if out = t.bySystemKey(key); out != nil {
			return nil
		}
		my, _, err := ensureSystem(ctx, tx, t, companyID, KindSkill, sysMy, "My skills", sysMy, nil)
		if err != nil {
			return err
		}
		if t.slugTaken(&my.ID, slug, "") {
			slug = strings.TrimRight(slug[:min(len(slug), maxSlug-7)], "-") + "-" + stableSuffix(actor.UserId)
		}
		out, created, err = ensureSystem(ctx, tx, t, companyID, KindSkill, key, "My skills", slug, my)
		return err
	})
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	if created {
		x.activity(ctx, companyID, "folder.personal_ensured", "folder", out.ID, map[string]any{"kind": KindSkill,
			"systemKey": out.SystemKey, "slug": out.Slug, "path": out.Path})
	}
	sdk.WriteJSON(rw, http.StatusOK, out)
}

// folderInTx locks the folder's tree and reads it: 404 when the folder is not the company's.
func (x *Folders) folderInTx(ctx context.Context, tx pgx.Tx, companyID, id string) (*Folder, *tree, error) {
	id = strings.ToLower(strings.TrimSpace(id))
	kind, err := x.folderKindOf(ctx, companyID, id)
	if err != nil {
		return nil, nil, err
	}
	if kind == "" {
		return nil, nil, sdk.NotFound(msgFolderNotFound)
	}
	if err := lockKind(ctx, tx, companyID, kind); err != nil {
		return nil, nil, err
	}
	t, err := loadTree(ctx, tx, companyID, kind)
	if err != nil {
		return nil, nil, err
	}
	f := t.byID[id]
	if f == nil {
		return nil, nil, sdk.NotFound(msgFolderNotFound)
	}
	return f, t, nil
}

func (x *Folders) handlePatch(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := sdk.CompanyIDFrom(ctx)
	var body PatchBody
	if err := sdk.DecodeJSON(r, &body); err != nil {
		x.writeErr(rw, err)
		return
	}
	if body.Name == nil && body.Slug == nil && !body.Color.Set && body.Position == nil {
		x.writeErr(rw, sdk.NewError(http.StatusBadRequest, msgPatchEmpty))
		return
	}
	v := &validator{}
	var name, slug string
	if body.Name != nil {
		name = checkName(*body.Name, v.bad)
	}
	if body.Slug != nil {
		slug = strings.TrimSpace(*body.Slug)
		checkSlug(slug, v.bad)
	} else if body.Name != nil && len(v.d) == 0 {
		if slug = Slugify(name); slug == "" {
			v.bad("name", "must contain a letter or digit to derive a slug from, or give a slug")
		}
	}
	if body.Color.Set && !body.Color.Null {
		checkColor(body.Color.Value, v.bad)
	}
	if body.Position != nil && *body.Position < 0 {
		v.bad("position", "must be an integer >= 0")
	}
	if err := v.err(); err != nil {
		x.writeErr(rw, err)
		return
	}
	var f *Folder
	changed := map[string]any{}
	err := x.inTx(ctx, func(tx pgx.Tx) error {
		var t *tree
		var err error
		if f, t, err = x.folderInTx(ctx, tx, companyID, sdk.ParamFrom(ctx, "folderId")); err != nil {
			return err
		}
		if err := writable(f, t); err != nil {
			return err
		}
		if body.Name != nil && name != f.Name {
			changed["name"], f.Name = name, name
		}
		if slug != "" && slug != f.Slug {
			if err := reservedRoot(f.Kind, f.ParentID, slug); err != nil {
				return err
			}
			if t.slugTaken(f.ParentID, slug, f.ID) {
				return sdk.Conflict(msgSlugTaken)
			}
			changed["slug"], f.Slug = slug, slug
		}
		if body.Color.Set {
			if body.Color.Null {
				f.Color = nil
			} else {
				f.Color = ptr(body.Color.Value)
			}
			changed["color"] = f.Color
		}
		if body.Position != nil {
			changed["position"], f.Position = *body.Position, *body.Position
		}
		f.UpdatedAt = nowUTC()
		if _, err := tx.Exec(ctx, `UPDATE folders SET name = $2, slug = $3, color = $4, position = $5, updated_at = $6 WHERE id = $1`,
			f.ID, f.Name, f.Slug, f.Color, f.Position, f.UpdatedAt); err != nil {
			return fmt.Errorf("error updating folder %s: %w", f.ID, err)
		}
		t.compute()
		return nil
	})
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	x.activity(ctx, companyID, "folder.updated", "folder", f.ID, map[string]any{"kind": f.Kind, "changes": changed, "path": f.Path})
	sdk.WriteJSON(rw, http.StatusOK, f)
}

func (x *Folders) handleMove(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := sdk.CompanyIDFrom(ctx)
	var body MoveBody
	if err := sdk.DecodeJSON(r, &body); err != nil {
		x.writeErr(rw, err)
		return
	}
	v := &validator{}
	if body.Position == nil || *body.Position < 0 {
		v.bad("position", "is required: an integer >= 0")
	}
	var newParent *string
	if body.ParentID.Set && !body.ParentID.Null {
		p := strings.ToLower(strings.TrimSpace(body.ParentID.Value))
		if !sdk.IsUUID(p) {
			v.bad("parentId", "must be a UUID or null")
		}
		newParent = &p
	}
	if err := v.err(); err != nil {
		x.writeErr(rw, err)
		return
	}
	var f *Folder
	var from *string
	err := x.inTx(ctx, func(tx pgx.Tx) error {
		var t *tree
		var err error
		if f, t, err = x.folderInTx(ctx, tx, companyID, sdk.ParamFrom(ctx, "folderId")); err != nil {
			return err
		}
		if err := writable(f, t); err != nil {
			return err
		}
		from = f.ParentID
		if !body.ParentID.Set {
			newParent = f.ParentID
		}
		depth := 1
		if newParent != nil {
			if *newParent == f.ID {
				return sdk.Unprocessable(msgOwnParent)
			}
			p := t.byID[*newParent]
			if p == nil {
				return sdk.NotFound(msgParentNotFound)
			}
			for _, d := range t.descendants(f.ID) {
				if d.ID == p.ID {
					return sdk.Unprocessable(msgOwnSubtree)
				}
			}
			if err := acceptsChildren(p, t); err != nil {
				return err
			}
			depth = p.Depth + 1
		}
		if err := reservedRoot(f.Kind, newParent, f.Slug); err != nil {
			return err
		}
		if depth+t.height(f.ID)-1 > maxDepth {
			return sdk.Unprocessable(msgDepth)
		}
		if t.slugTaken(newParent, f.Slug, f.ID) {
			return sdk.Conflict(msgSlugTaken)
		}
		// The folder takes its place among its new siblings, which are renumbered 0..n.
		p := ""
		if newParent != nil {
			p = *newParent
		}
		var siblings []*Folder
		for _, s := range t.children(p) {
			if s.ID != f.ID {
				siblings = append(siblings, s)
			}
		}
		at := min(*body.Position, len(siblings))
		siblings = append(siblings[:at], append([]*Folder{f}, siblings[at:]...)...)
		now := nowUTC()
		f.ParentID, f.UpdatedAt = newParent, now
		for i, s := range siblings {
			if s.Position == i && s != f {
				continue
			}
			s.Position = i
			if _, err := tx.Exec(ctx, `UPDATE folders SET parent_id = $2, position = $3, updated_at = $4 WHERE id = $1`,
				s.ID, s.ParentID, s.Position, now); err != nil {
				return fmt.Errorf("error moving folder %s: %w", s.ID, err)
			}
			s.UpdatedAt = now
		}
		t.compute()
		f.Children = t.descendants(f.ID)
		return nil
	})
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	x.activity(ctx, companyID, "folder.moved", "folder", f.ID, map[string]any{"kind": f.Kind, "fromParentId": from,
		"toParentId": f.ParentID, "position": f.Position, "path": f.Path})
	sdk.WriteJSON(rw, http.StatusOK, f)
}

func (x *Folders) handleItemMove(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := sdk.CompanyIDFrom(ctx)
	var body ItemMoveBody
	if err := sdk.DecodeJSON(r, &body); err != nil {
		x.writeErr(rw, err)
		return
	}
	v := &validator{}
	if !validKind(body.Kind) {
		v.bad("kind", "must be routine or skill")
	}
	itemID := strings.ToLower(strings.TrimSpace(body.ItemID))
	if !sdk.IsUUID(itemID) {
		v.bad("itemId", "must be a UUID")
	}
	var folderID *string
	if body.FolderID.Set && !body.FolderID.Null {
		id := strings.ToLower(strings.TrimSpace(body.FolderID.Value))
		if !sdk.IsUUID(id) {
			v.bad("folderId", "must be a UUID or null")
		}
		folderID = &id
	}
	if err := v.err(); err != nil {
		x.writeErr(rw, err)
		return
	}
	var from *string
	err := x.inTx(ctx, func(tx pgx.Tx) error {
		if err := lockKind(ctx, tx, companyID, body.Kind); err != nil {
			return err
		}
		t, err := loadTree(ctx, tx, companyID, body.Kind)
		if err != nil {
			return err
		}
		var target *Folder
		if folderID != nil {
			if target = t.byID[*folderID]; target == nil {
				kind, err := x.folderKindOf(ctx, companyID, *folderID)
				if err != nil {
					return err
				}
				if kind != "" {
					return sdk.Unprocessable(msgKindMismatch)
				}
				return sdk.NotFound(msgFolderNotFound)
			}
		}
		item, err := x.item(ctx, companyID, body.Kind, itemID)
		if err != nil {
			return err
		}
		from = item.FolderID
		var cur *Folder
		if item.FolderID != nil {
			cur = t.byID[*item.FolderID]
		}
		if (item.Bundled || cur != nil && t.inBundledTree(cur)) && (target == nil || !t.inBundledTree(target)) {
			return sdk.Forbidden(msgBundledSkill)
		}
		if target != nil && (cur == nil || cur.ID != target.ID) {
			if err := acceptsChildren(target, t); err != nil {
				return err
			}
		}
		return x.setItem(ctx, companyID, body.Kind, itemID, folderID)
	})
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	x.activity(ctx, companyID, "folder.item_moved", body.Kind, itemID, map[string]any{"kind": body.Kind, "itemId": itemID,
		"fromFolderId": from, "folderId": folderID})
	sdk.WriteJSON(rw, http.StatusOK, &ItemMove{Kind: body.Kind, ItemID: itemID, FolderID: folderID})
}

func (x *Folders) handleDelete(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := sdk.CompanyIDFrom(ctx)
	var f *Folder
	unfiled := 0
	err := x.inTx(ctx, func(tx pgx.Tx) error {
		var t *tree
		var err error
		if f, t, err = x.folderInTx(ctx, tx, companyID, sdk.ParamFrom(ctx, "folderId")); err != nil {
			return err
		}
		if err := writable(f, t); err != nil {
			return err
		}
		if len(t.children(f.ID)) > 0 {
			return sdk.Conflict(msgHasChildren)
		}
		if unfiled, err = x.unfile(ctx, companyID, f.Kind, []string{f.ID}); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM folders WHERE id = $1`, f.ID); err != nil {
			return fmt.Errorf("error deleting folder %s: %w", f.ID, err)
		}
		return nil
	})
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	x.activity(ctx, companyID, "folder.deleted", "folder", f.ID, map[string]any{"kind": f.Kind, "name": f.Name,
		"path": f.Path, "unfiledItems": unfiled})
	sdk.WriteJSON(rw, http.StatusOK, &Deleted{Deleted: f})
}
