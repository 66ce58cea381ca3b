package folders

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/keelhq/keel/sdk"
)

// The items of a folder tree live with their owners: routines with the routines extension,
// skills with the skills extension. Each owner provides four methods this extension calls
// with the system actor in the item's company:
//
//	<owner>.folderItems.counts {}                       → {total, unfiled, byFolder: {folderId: n}}
//	<owner>.folderItems.get    {itemId}                 → {folderId, bundled} or 404
//	<owner>.folderItems.set    {itemId, folderId|null}  → {folderId}
//	<owner>.folderItems.unfile {folderIds: [...]}       → {unfiled}

// itemOwners names each kind's owner.
var itemOwners = map[string]string{KindRoutine: "routines", KindSkill: "skills"}

// itemNotFound is each kind's missing-item text.
var itemNotFound = map[string]string{KindRoutine: msgRoutineNotFound, KindSkill: msgSkillNotFound}

// itemCounts is an owner's item counts.
type itemCounts struct {
	Total    int            `json:"total"`
	Unfiled  int            `json:"unfiled"`
	ByFolder map[string]int `json:"byFolder"`
}

// itemState is where an item is filed.
type itemState struct {
	FolderID *string `json:"folderId"`
	// Bundled marks an item that belongs to the bundled tree (bundled skills).
	Bundled bool `json:"bundled"`
}

// counts reads an owner's item counts; an owner that cannot answer is logged and counts as
// empty, so the folders stay listable while it is down.
func (x *Folders) counts(ctx context.Context, companyID, kind string) *itemCounts {
	out := &itemCounts{}
	if err := x.host.Call(ctx, itemOwners[kind]+".folderItems.counts", sdk.SystemActor(), companyID, map[string]any{}, out); err != nil {
		x.log.Warn("error reading folder item counts", "kind", kind, "company", companyID, "error", err)
		return &itemCounts{}
	}
	return out
}

// item reads where an item is filed: 404 with the kind's text when the owner has no such
// item in the company.
func (x *Folders) item(ctx context.Context, companyID, kind, itemID string) (*itemState, error) {
	out := &itemState{}
	err := x.host.Call(ctx, itemOwners[kind]+".folderItems.get", sdk.SystemActor(), companyID, map[string]any{"itemId": itemID}, out)
	var e *sdk.Error
	if errors.As(err, &e) && (e.Status == http.StatusNotFound || e.Status == http.StatusBadRequest) {
		return nil, sdk.NotFound(itemNotFound[kind])
	}
	if err != nil {
		return nil, fmt.Errorf("error reading %s %s: %w", kind, itemID, err)
	}
	return out, nil
}

// setItem files an item into a folder (nil unfiles it).
func (x *Folders) setItem(ctx context.Context, companyID, kind, itemID string, folderID *string) error {
	err := x.host.Call(ctx, itemOwners[kind]+".folderItems.set", sdk.SystemActor(), companyID,
		map[string]any{"itemId": itemID, "folderId": folderID}, nil)
	var e *sdk.Error
	if errors.As(err, &e) && e.Status == http.StatusNotFound {
		return sdk.NotFound(itemNotFound[kind])
	}
	if err != nil {
		return fmt.Errorf("error filing %s %s: %w", kind, itemID, err)
	}
	return nil
}

// unfile unfiles every item of the given folders.
func (x *Folders) unfile(ctx context.Context, companyID, kind string, folderIDs []string) (int, error) {
	var out struct {
		Unfiled int `json:"unfiled"`
	}
	if err := x.host.Call(ctx, itemOwners[kind]+".folderItems.unfile", sdk.SystemActor(), companyID,
		map[string]any{"folderIds": folderIDs}, &out); err != nil {
		return 0, fmt.Errorf("error unfiling the %ss of folders %v: %w", kind, folderIDs, err)
	}
	return out.Unfiled, nil
}
