package folders

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/keelhq/keel/sdk"
)

// Provided methods: item owners check a folderId against the tree (routines on create and
// update, skills when they file an item), and the skills owner keeps its system-managed
// folders (bundled, bundled:{slug}, projects, project:{projectId}) through ensureSystem.
func init() {
	addMethods(map[string]method{
		"get": {
			Description: "Read a folder of the call's company. Input {folderId, kind?}. Output the folder (path, depth) plus " +
				"{bundled: in the bundled tree, acceptsItems: hand-filed items may enter it}. 404 \"Folder not found\"; with kind, " +
				"422 \"Folder kind must match item kind\" for a folder of the other kind.",
			Call: (*Folders).methodGet,
		},
		"ensureSystem": {
			Description: "Ensure a system-managed folder of the call's company (idempotent). Input {kind, systemKey, name, slug?, " +
				"parentSystemKey?}: the parent is ensured first when it is one of the reserved containers (bundled, my, " +
				"projects). Output the folder.",
			Call: (*Folders).methodEnsureSystem,
		},
	})
}

// MethodFolder is a folder as the provided methods answer it.
type MethodFolder struct {
	*Folder
	Bundled      bool `json:"bundled"`
	AcceptsItems bool `json:"acceptsItems"`
}

func (x *Folders) methodGet(ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in struct {
		FolderID string `json:"folderId"`
		Kind     string `json:"kind"`
	}
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	if call.CompanyID == "" {
		return nil, sdk.Invalid("companyId", "the call must name a company")
	}
	id := strings.ToLower(strings.TrimSpace(in.FolderID))
	kind, err := x.folderKindOf(ctx, call.CompanyID, id)
	if err != nil {
		return nil, err
	}
	if kind == "" {
		return nil, sdk.NotFound(msgFolderNotFound)
	}
	if in.Kind != "" && in.Kind != kind {
		return nil, sdk.Unprocessable(msgKindMismatch)
	}
	t, err := loadTree(ctx, x.pool, call.CompanyID, kind)
	if err != nil {
		return nil, err
	}
	f := t.byID[id]
	if f == nil {
		return nil, sdk.NotFound(msgFolderNotFound)
	}
	return &MethodFolder{Folder: f, Bundled: t.inBundledTree(f), AcceptsItems: acceptsChildren(f, t) == nil}, nil
}

// containerNames are the names of the reserved root containers.
var containerNames = map[string]string{sysBundled: "Bundled", sysMy: "My skills", sysProjects: "Projects"}

func (x *Folders) methodEnsureSystem(ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in struct {
		Kind            string `json:"kind"`
		SystemKey       string `json:"systemKey"`
		Name            string `json:"name"`
		Slug            string `json:"slug"`
		ParentSystemKey string `json:"parentSystemKey"`
	}
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	v := &validator{}
	if call.CompanyID == "" {
		v.bad("companyId", "the call must name a company")
	}
	if !validKind(in.Kind) {
		v.bad("kind", "must be routine or skill")
	}
	if in.SystemKey == "" || len(in.SystemKey) > 200 {
		v.bad("systemKey", "is required")
	}
	name := checkName(in.Name, v.bad)
	slug := in.Slug
	if slug == "" {
		slug = Slugify(name)
	}
	checkSlug(slug, v.bad)
	if err := v.err(); err != nil {
		return nil, err
	}
	var out *Folder
	err := x.inTx(ctx, func(tx pgx.Tx) error {
		if err := lockKind(ctx, tx, call.CompanyID, in.Kind); err != nil {
			return err
		}
		t, err := loadTree(ctx, tx, call.CompanyID, in.Kind)
		if err != nil {
			return err
		}
		var parent *Folder
		if in.ParentSystemKey != "" {
			if parent = t.bySystemKey(in.ParentSystemKey); parent == nil {
				cname, ok := containerNames[in.ParentSystemKey]
				if !ok {
					return sdk.NotFound(msgParentNotFound)
				}
				if parent, _, err = ensureSystem(ctx, tx, t, call.CompanyID, in.Kind, in.ParentSystemKey, cname, in.ParentSystemKey, nil); err != nil {
					return err
				}
			}
			if parent.Depth+1 > maxDepth {
				return sdk.Unprocessable(msgDepth)
			}
		}
		out, _, err = ensureSystem(ctx, tx, t, call.CompanyID, in.Kind, in.SystemKey, name, slug, parent)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
