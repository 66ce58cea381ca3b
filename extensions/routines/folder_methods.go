package routines

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/keelhq/keel/sdk"
)

// Provided methods the folders extension files routines with: a routine's folderId is a
// routine field kept here, and folders reads and changes it only through these methods.
// Each acts in the call's company.
func init() {
	addMethods(map[string]method{
		"folderItems.counts": {
			Description: "Count the company's routines for the folder list. Input {}. Output {total, unfiled, byFolder: {folderId: n}}.",
			Call:        (*Routines).methodFolderCounts,
		},
		"folderItems.get": {
			Description: "Read where a routine is filed. Input {itemId}. Output {folderId, bundled: false}. 404 \"Routine not found\".",
			Call:        (*Routines).methodFolderGet,
		},
		"folderItems.set": {
			Description: "File a routine into a folder (checked by the caller) or unfile it. Input {itemId, folderId|null}. " +
				"Output {folderId}. 404 \"Routine not found\".",
			Call: (*Routines).methodFolderSet,
		},
		"folderItems.unfile": {
			Description: "Unfile every routine of the given folders. Input {folderIds}. Output {unfiled}.",
			Call:        (*Routines).methodFolderUnfile,
		},
	})
}

// folderMethodInput is the input of the folderItems methods.
type folderMethodInput struct {
	ItemID    string   `json:"itemId"`
	FolderID  *string  `json:"folderId"`
	FolderIDs []string `json:"folderIds"`
}

// bindFolderCall decodes a folderItems call that needs a company.
func bindFolderCall(call *sdk.MethodCall) (*folderMethodInput, error) {
	in := &folderMethodInput{}
	if err := call.Bind(in); err != nil {
		return nil, err
	}
	if !isUUID(call.CompanyID) {
		return nil, invalid("companyId", "the call must name a company")
	}
	in.ItemID = strings.ToLower(strings.TrimSpace(in.ItemID))
	return in, nil
}

func (x *Routines) methodFolderCounts(ctx context.Context, call *sdk.MethodCall) (any, error) {
	if _, err := bindFolderCall(call); err != nil {
		return nil, err
	}
	rows, err := x.pool.Query(ctx, `SELECT folder_id, count(*) FROM routines WHERE company_id = $1 GROUP BY folder_id`, call.CompanyID)
	if err != nil {
		return nil, fmt.Errorf("error counting routines by folder: %w", err)
	}
	defer rows.Close()
	out := struct {
		Total    int            `json:"total"`
		Unfiled  int            `json:"unfiled"`
		ByFolder map[string]int `json:"byFolder"`
	}{ByFolder: map[string]int{}}
	for rows.Next() {
		var folder *string
		var n int
		if err := rows.Scan(&folder, &n); err != nil {
			return nil, fmt.Errorf("error counting routines by folder: %w", err)
		}
		out.Total += n
		if folder == nil {
			out.Unfiled += n
		} else {
			out.ByFolder[*folder] = n
		}
	}
	return out, rows.Err()
}

func (x *Routines) methodFolderGet(ctx context.Context, call *sdk.MethodCall) (any, error) {
	in, err := bindFolderCall(call)
	if err != nil {
		return nil, err
	}
	if !isUUID(in.ItemID) {
		return nil, notFound(msgRoutineNotFound)
	}
	var folder *string
	err = x.pool.QueryRow(ctx, `SELECT folder_id FROM routines WHERE id = $1 AND company_id = $2`, in.ItemID, call.CompanyID).Scan(&folder)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound(msgRoutineNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("error reading the folder of routine %s: %w", in.ItemID, err)
	}
	return map[string]any{"folderId": folder, "bundled": false}, nil
}

func (x *Routines) methodFolderSet(ctx context.Context, call *sdk.MethodCall) (any, error) {
	in, err := bindFolderCall(call)
	if err != nil {
		return nil, err
	}
	if !isUUID(in.ItemID) {
		return nil, notFound(msgRoutineNotFound)
	}
	if in.FolderID != nil && !isUUID(*in.FolderID) {
		return nil, invalid("folderId", "must be a UUID or null")
	}
	tag, err := x.pool.Exec(ctx, `UPDATE routines SET folder_id = $3, updated_at = clock_timestamp()
		WHERE id = $1 AND company_id = $2`, in.ItemID, call.CompanyID, in.FolderID)
	if err != nil {
		return nil, fmt.Errorf("error filing routine %s: %w", in.ItemID, err)
	}
	if tag.RowsAffected() == 0 {
		return nil, notFound(msgRoutineNotFound)
	}
	return map[string]any{"folderId": in.FolderID}, nil
}

func (x *Routines) methodFolderUnfile(ctx context.Context, call *sdk.MethodCall) (any, error) {
	in, err := bindFolderCall(call)
	if err != nil {
		return nil, err
	}
	for _, id := range in.FolderIDs {
		if !isUUID(id) {
			return nil, invalid("folderIds", "must be UUIDs")
		}
	}
	tag, err := x.pool.Exec(ctx, `UPDATE routines SET folder_id = NULL, updated_at = clock_timestamp()
		WHERE company_id = $1 AND folder_id = ANY($2::uuid[])`, call.CompanyID, in.FolderIDs)
	if err != nil {
		return nil, fmt.Errorf("error unfiling routines: %w", err)
	}
	return map[string]any{"unfiled": tag.RowsAffected()}, nil
}

// checkFolder checks a routine's folderId with the folders owner: 404 "Folder not found"
// and 422 "Folder kind must match item kind" come back as the owner says them.
func (x *Routines) checkFolder(ctx context.Context, companyID, folderID string) error {
	err := x.host.Call(ctx, "folders.get", sdk.SystemActor(), companyID, map[string]any{"folderId": folderID, "kind": "routine"}, nil)
	var e *sdk.Error
	if errors.As(err, &e) && (e.Status == http.StatusNotFound || e.Status == http.StatusUnprocessableEntity) {
		return e
	}
	if err != nil {
		return fmt.Errorf("error reading folder %s: %w", folderID, err)
	}
	return nil
}

// isUnprocessable reports whether an owner answered 422.
func isUnprocessable(err error) bool {
	var e *sdk.Error
	return errors.As(err, &e) && e.Status == http.StatusUnprocessableEntity
}
