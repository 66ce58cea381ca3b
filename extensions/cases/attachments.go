package cases

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelhq/keel/sdk"
)

// attachmentField is the multipart field an upload carries its file in.
const attachmentField = "file"

func init() {
	addRoutes(
		route{Method: http.MethodPost, Path: "/api/cases/{id}/attachments", Status: http.StatusCreated, Response: new(Attachment),
			Summary: "Upload a file to a case (multipart/form-data, exactly one file in field \"file\"); records attachment_added",
			Handle:  (*Cases).handleAttachmentUpload},
		route{Method: http.MethodGet, Path: "/api/cases/{id}/attachments/{attachmentId}/content",
			Summary: "Download a case attachment (always as a download)", Handle: (*Cases).handleAttachmentContent},
	)
}

// Asset is a stored file: content-addressed per company, shared by every attachment of
// the same bytes.
type Asset struct {
	ID          string    `json:"id"`
	SHA256      string    `json:"sha256"`
	ByteSize    int64     `json:"byteSize"`
	ContentType string    `json:"contentType"`
	CreatedAt   time.Time `json:"createdAt"`
}

// Attachment is a case attachment with its stored asset.
type Attachment struct {
	ID               string    `json:"id"`
	CompanyID        string    `json:"companyId"`
	CaseID           string    `json:"caseId"`
	FileName         string    `json:"fileName"`
	ContentType      string    `json:"contentType"`
	ByteSize         int64     `json:"byteSize"`
	CreatedByAgentID *string   `json:"createdByAgentId"`
	CreatedByUserID  *string   `json:"createdByUserId"`
	CreatedByRunID   *string   `json:"createdByRunId"`
	CreatedAt        time.Time `json:"createdAt"`
	ContentPath      string    `json:"contentPath"`
	Asset            *Asset    `json:"asset"`
	storagePath      string
}

// attachmentCols are the columns scanAttachment reads, in order (aliases a and s).
const attachmentCols = `a.id, a.company_id, a.case_id, a.file_name, a.created_by_agent_id, a.created_by_user_id, a.created_by_run_id,
	a.created_at, s.id, s.sha256, s.byte_size, s.content_type, s.created_at, s.storage_path`

// scanAttachment reads one attachment row with its asset.
func scanAttachment(row pgx.Row) (*Attachment, error) {
	a := &Attachment{Asset: new(Asset)}
	if err := row.Scan(&a.ID, &a.CompanyID, &a.CaseID, &a.FileName, &a.CreatedByAgentID, &a.CreatedByUserID, &a.CreatedByRunID,
		&a.CreatedAt, &a.Asset.ID, &a.Asset.SHA256, &a.Asset.ByteSize, &a.Asset.ContentType, &a.Asset.CreatedAt, &a.storagePath); err != nil {
		return nil, err
	}
	a.ContentType, a.ByteSize = a.Asset.ContentType, a.Asset.ByteSize
	a.ContentPath = "/api/cases/" + a.CaseID + "/attachments/" + a.ID + "/content"
	return a, nil
}

// caseAttachments reads a case's attachments, oldest first.
func (x *Cases) caseAttachments(ctx context.Context, caseID string) ([]*Attachment, error) {
	rows, err := x.pool.Query(ctx, `SELECT `+attachmentCols+` FROM case_attachments a JOIN case_assets s ON s.id = a.asset_id
		WHERE a.case_id = $1 ORDER BY a.created_at, a.id`, caseID)
	if err != nil {
		return nil, fmt.Errorf("error reading attachments of case %s: %w", caseID, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*Attachment, error) { return scanAttachment(row) })
	if err != nil {
		return nil, fmt.Errorf("error reading attachments of case %s: %w", caseID, err)
	}
	if out == nil {
		out = []*Attachment{}
	}
	return out, nil
}

// storeAsset writes data at attachments/<company>/<sha256[:2]>/<sha256> under the data
// directory unless that content is there already, and returns the relative path.
func (x *Cases) storeAsset(companyID, sum string, data []byte) (string, error) {
	rel := filepath.Join("attachments", companyID, sum[:2], sum)
	abs := filepath.Join(x.dataDir, rel)
	if st, err := os.Stat(abs); err == nil && st.Size() == int64(len(data)) {
		return filepath.ToSlash(rel), nil
	}
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

func (x *Cases) handleAttachmentUpload(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	c, err := x.caseByRef(ctx, x.pool, r.PathValue("id"), false)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	up, err := sdk.ReadFileUpload(r, attachmentField, x.maxAttachment)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	sum := sha256.Sum256(up.Data)
	hexSum := hex.EncodeToString(sum[:])
	rel, err := x.storeAsset(c.CompanyID, hexSum, up.Data)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	runIssue := x.runIssue(ctx, c.CompanyID)
	at := attributionOf(sdk.ActorFrom(ctx))
	var out *Attachment
	err = x.inTx(ctx, func(tx pgx.Tx) error {
		var assetID string
		if err := tx.QueryRow(ctx, `INSERT INTO case_assets (id, company_id, sha256, byte_size, content_type, storage_path)
			VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (company_id, sha256) DO UPDATE SET sha256 = EXCLUDED.sha256 RETURNING id`,
			newID(), c.CompanyID, hexSum, len(up.Data), up.ContentType, rel).Scan(&assetID); err != nil {
			return fmt.Errorf("error recording asset: %w", err)
		}
		id := newID()
		if _, err := tx.Exec(ctx, `INSERT INTO case_attachments (id, company_id, case_id, asset_id, file_name, created_by_agent_id,
			created_by_user_id, created_by_run_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
			id, c.CompanyID, c.ID, assetID, up.FileName, at.AgentID, at.UserID, at.RunID); err != nil {
			return fmt.Errorf("error recording attachment: %w", err)
		}
		var err error
		out, err = scanAttachment(tx.QueryRow(ctx, `SELECT `+attachmentCols+` FROM case_attachments a JOIN case_assets s ON s.id = a.asset_id
			WHERE a.id = $1`, id))
		if err != nil {
			return fmt.Errorf("error reading attachment: %w", err)
		}
		if err := eventTx(ctx, tx, c.CompanyID, c.ID, "attachment_added", at, runIssue, map[string]any{"attachmentId": id,
			"fileName": out.FileName, "byteSize": out.ByteSize, "sha256": hexSum}); err != nil {
			return err
		}
		return autoLinkTx(ctx, tx, c, runIssue, "work", at)
	})
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusCreated, out)
}

func (x *Cases) handleAttachmentContent(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	c, err := x.caseByRef(ctx, x.pool, r.PathValue("id"), false)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	id := strings.ToLower(r.PathValue("attachmentId"))
	if !isUUID(id) {
		x.writeErr(rw, notFound(msgAttachmentNotFound))
		return
	}
	a, err := scanAttachment(x.pool.QueryRow(ctx, `SELECT `+attachmentCols+` FROM case_attachments a JOIN case_assets s ON s.id = a.asset_id
		WHERE a.id = $1 AND a.case_id = $2`, id, c.ID))
	if errors.Is(err, pgx.ErrNoRows) {
		x.writeErr(rw, notFound(msgAttachmentNotFound))
		return
	}
	if err != nil {
		x.writeErr(rw, fmt.Errorf("error reading attachment %s: %w", id, err))
		return
	}
	rel := filepath.FromSlash(a.storagePath)
	if !filepath.IsLocal(rel) {
		x.writeErr(rw, fmt.Errorf("attachment %s has a storage path outside the data directory", a.ID))
		return
	}
	f, err := os.Open(filepath.Join(x.dataDir, rel))
	if err != nil {
		x.log.Error("attachment file unreadable", "attachment", a.ID, "error", err)
		x.writeErr(rw, notFound("Attachment content not found"))
		return
	}
	defer f.Close()
	h := rw.Header()
	h.Set("Content-Type", a.ContentType)
	if v := mime.FormatMediaType("attachment", map[string]string{"filename": a.FileName}); v != "" {
		h.Set("Content-Disposition", v)
	} else {
		h.Set("Content-Disposition", "attachment")
	}
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	h.Set("ETag", `"`+a.Asset.SHA256+`"`)
	http.ServeContent(rw, r, "", a.CreatedAt, f)
}
