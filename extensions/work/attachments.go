package work

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"github.com/keelhq/keel/sdk"
)

// attachmentField is the multipart field an upload carries its file in.
const attachmentField = "file"

// attachmentInlineTypes are the media types served inline (unless ?download=1); anything
// else is served as a download so that uploaded HTML or SVG never renders in the app's origin.
var attachmentInlineTypes = []string{
	"image/png", "image/jpeg", "image/gif", "image/webp", "image/avif", "application/pdf",
	"text/plain", "text/markdown", "text/csv", "application/json", "audio/mpeg", "audio/wav", "video/mp4", "video/webm",
}

func init() {
	addRoutes(
		route{Method: http.MethodPost, Path: "/api/companies/{companyId}/issues/{issueId}/attachments", Status: http.StatusCreated, Response: new(Attachment), CompanyFromPath: true,
			Summary: "Upload a file to an issue (multipart/form-data, exactly one file in field \"file\")", Handle: handleAttachmentUpload},
		route{Method: http.MethodGet, Path: "/api/issues/{id}/attachments", Response: new([]*Attachment), Summary: "List an issue's attachments",
			Handle: handleAttachmentList},
		route{Method: http.MethodGet, Path: "/api/attachments/{attachmentId}/content", Summary: "Download an attachment (inline; ?download=1 as a download)",
			Handle: handleAttachmentContent},
		route{Method: http.MethodDelete, Path: "/api/attachments/{attachmentId}", Response: new(Attachment), Summary: "Delete an attachment and its file",
			Handle: handleAttachmentDelete},
	)
}

// Attachment is a row of ext_work.issue_attachments and its API shape.
type Attachment struct {
	bun.BaseModel `bun:"table:issue_attachments,alias:att"`

	ID               string    `bun:"id,pk,type:uuid" json:"id"`
	CompanyID        string    `bun:"company_id,type:uuid" json:"companyId"`
	IssueID          string    `bun:"issue_id,type:uuid" json:"issueId"`
	FileName         string    `bun:"file_name" json:"fileName"`
	ContentType      string    `bun:"content_type" json:"contentType"`
	SizeBytes        int64     `bun:"size_bytes" json:"sizeBytes"`
	SHA256           string    `bun:"sha256" json:"sha256"`
	StoragePath      string    `bun:"storage_path" json:"-"`
	CreatedByAgentID *string   `bun:"created_by_agent_id,type:uuid" json:"createdByAgentId"`
	CreatedByUserID  *string   `bun:"created_by_user_id" json:"createdByUserId"`
	CreatedByRunID   *string   `bun:"created_by_run_id" json:"createdByRunId"`
	CreatedAt        time.Time `bun:"created_at" json:"createdAt"`
	// ContentPath is the API path of the bytes.
	ContentPath string `bun:"-" json:"contentPath"`
}

func (a *Attachment) withContentPath() *Attachment {
	a.ContentPath = "/api/attachments/" + a.ID + "/content"
	return a
}

// attachmentStore writes data under dataDir at attachments/<company>/<sha256 prefix>/<id>
// through a temporary file and returns the path relative to dataDir.
func attachmentStore(dataDir, companyID, sum, id string, data []byte) (string, error) {
	rel := filepath.Join("attachments", companyID, sum[:2], id)
	abs := filepath.Join(dataDir, rel)
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return "", fmt.Errorf("error creating attachment directory: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(abs), ".upload-*")
	if err != nil {
		return "", fmt.Errorf("error creating attachment file: %w", err)
	}
	_, werr := tmp.Write(data)
	if werr == nil {
		werr = tmp.Sync()
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), abs)
	}
	if werr != nil {
		_ = os.Remove(tmp.Name())
		return "", fmt.Errorf("error writing attachment file: %w", werr)
	}
	return filepath.ToSlash(rel), nil
}

// attachmentPath is the file of an attachment, refusing a stored path that leaves the data
// directory.
func (w *Work) attachmentPath(a *Attachment) (string, error) {
	rel := filepath.FromSlash(a.StoragePath)
	if !filepath.IsLocal(rel) {
		return "", fmt.Errorf("attachment %s has a storage path outside the data directory", a.ID)
	}
	return filepath.Join(w.dataDir, rel), nil
}

// removeAttachmentFiles removes the files of deleted attachments; a failure is logged, the
// rows being gone already.
func (w *Work) removeAttachmentFiles(storagePaths []string) {
	for _, sp := range storagePaths {
		rel := filepath.FromSlash(sp)
		if !filepath.IsLocal(rel) {
			continue
		}
		if err := os.Remove(filepath.Join(w.dataDir, rel)); err != nil && !errors.Is(err, os.ErrNotExist) {
			w.log.Warn("error removing an attachment file", "path", sp, "error", err)
		}
	}
}

// attachmentByID loads an attachment the caller's company may see: 404 "Attachment not
// found" when missing, 403 for another company's.
func (w *Work) attachmentByID(ctx context.Context, db bun.IDB, id string) (*Attachment, error) {
	if !isUUID(id) {
		return nil, notFound("Attachment not found")
	}
	a := new(Attachment)
	q := db.NewSelect().Model(a).Where("att.id = ?", id)
	if _, ok := db.(bun.Tx); ok {
		q = q.For("UPDATE")
	}
	if err := q.Scan(ctx); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, notFound("Attachment not found")
		}
		return nil, fmt.Errorf("error reading attachment %s: %w", id, err)
	}
	if err := requireCompanyAccess(ctx, a.CompanyID); err != nil {
		return nil, err
	}
	return a.withContentPath(), nil
}

func handleAttachmentUpload(w *Work, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := sdk.CompanyIDFrom(ctx)
	if companyID == "" {
		companyID = r.PathValue("companyId")
	}
	iss, err := w.issueGet(ctx, nil, r.PathValue("issueId"))
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	if iss == nil || iss.CompanyID != companyID {
		w.writeErr(rw, notFound("Issue not found"))
		return
	}
	if err := requireCompanyAccess(ctx, iss.CompanyID); err != nil {
		w.writeErr(rw, err)
		return
	}
	up, err := sdk.ReadFileUpload(r, attachmentField, w.cfg.AttachmentMaxBytes)
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	sum := sha256.Sum256(up.Data)
	by := attributionOf(sdk.ActorFrom(ctx))
	a := &Attachment{
		ID: uuid.Must(uuid.NewV7()).String(), CompanyID: iss.CompanyID, IssueID: iss.ID, FileName: up.FileName,
		ContentType: up.ContentType, SizeBytes: int64(len(up.Data)), SHA256: hex.EncodeToString(sum[:]),
		CreatedByAgentID: by.AgentID, CreatedByUserID: by.UserID, CreatedByRunID: by.RunID,
		CreatedAt: time.Now().UTC().Truncate(time.Microsecond),
	}
	if a.StoragePath, err = attachmentStore(w.dataDir, a.CompanyID, a.SHA256, a.ID, up.Data); err != nil {
		w.writeErr(rw, err)
		return
	}
	if _, err := w.db.NewInsert().Model(a).Exec(ctx); err != nil {
		if p, perr := w.attachmentPath(a); perr == nil {
			_ = os.Remove(p)
		}
		w.writeErr(rw, fmt.Errorf("error inserting attachment of issue %s: %w", iss.ID, err))
		return
	}
	if err := w.activity(ctx, a.CompanyID, "issue.attachment.added", "issue", a.IssueID,
		map[string]any{"attachmentId": a.ID, "fileName": a.FileName, "sizeBytes": a.SizeBytes, "sha256": a.SHA256}); err != nil {
		w.log.Warn("error recording attachment activity", "attachment", a.ID, "error", err)
	}
	sdk.WriteJSON(rw, http.StatusCreated, a.withContentPath())
}

func handleAttachmentList(w *Work, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	iss, err := w.issueByRef(ctx, r.PathValue("id"))
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	out := []*Attachment{}
	if err := w.db.NewSelect().Model(&out).Where("att.issue_id = ?", iss.ID).OrderExpr("att.created_at ASC, att.id ASC").Scan(ctx); err != nil {
		w.writeErr(rw, fmt.Errorf("error listing attachments of issue %s: %w", iss.ID, err))
		return
	}
	for _, a := range out {
		a.withContentPath()
	}
	sdk.WriteJSON(rw, http.StatusOK, out)
}

func handleAttachmentContent(w *Work, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	a, err := w.attachmentByID(ctx, w.db, r.PathValue("attachmentId"))
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	p, err := w.attachmentPath(a)
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	f, err := os.Open(p)
	if err != nil {
		w.log.Error("attachment file unreadable", "attachment", a.ID, "error", err)
		w.writeErr(rw, notFound("Attachment content not found"))
		return
	}
	defer f.Close()
	download := r.URL.Query().Get("download")
	disposition := "attachment"
	if download != "1" && download != "true" && attachmentInline(a.ContentType) {
		disposition = "inline"
	}
	h := rw.Header()
	h.Set("Content-Type", a.ContentType)
	h.Set("Content-Disposition", attachmentDisposition(disposition, a.FileName))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	h.Set("Cache-Control", "private, no-cache")
	h.Set("ETag", `"`+a.SHA256+`"`)
	http.ServeContent(rw, r, "", a.CreatedAt, f)
}

// attachmentInline reports whether a media type may render inline.
func attachmentInline(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && containsString(attachmentInlineTypes, mt)
}

// attachmentDisposition formats a Content-Disposition with the file name, RFC 2231-encoded
// when it is not plain ASCII.
func attachmentDisposition(disposition, name string) string {
	if v := mime.FormatMediaType(disposition, map[string]string{"filename": name}); v != "" {
		return v
	}
	return disposition
}

func handleAttachmentDelete(w *Work, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var a *Attachment
	err := w.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var err error
		if a, err = w.attachmentByID(ctx, tx, r.PathValue("attachmentId")); err != nil {
			return err
		}
		_, err = tx.NewDelete().Model(a).WherePK().Exec(ctx)
		return err
	})
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	if p, err := w.attachmentPath(a); err != nil {
		w.log.Warn("attachment file not removed", "attachment", a.ID, "error", err)
	} else if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		w.log.Warn("error removing attachment file", "attachment", a.ID, "error", err)
	}
	if err := w.activity(ctx, a.CompanyID, "issue.attachment.deleted", "issue", a.IssueID,
		map[string]any{"attachmentId": a.ID, "fileName": a.FileName}); err != nil {
		w.log.Warn("error recording attachment activity", "attachment", a.ID, "error", err)
	}
	sdk.WriteJSON(rw, http.StatusOK, a)
}
