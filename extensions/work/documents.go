package work

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"github.com/keelhq/keel/sdk"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

// Document limits.
const (
	DocumentKeyMaxLen           = 64
	DocumentBodyMaxBytes        = 512 << 10
	DocumentChangeSummaryMaxLen = 500
	DocumentTitleMaxLen         = 500
	DocumentFormatMarkdown      = "markdown"
)

// documentKeyPattern is the pattern of an issue document key.
var documentKeyPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// Document write errors (REFERENCE 2.2 Documents; the case document rules of spec part 2
// with "Document" wording).
const (
	msgDocumentNotFound      = "Document not found"
	msgDocumentNotYet        = "Document does not exist yet"
	msgDocumentNeedsBase     = "Document update requires baseRevisionId"
	msgDocumentStale         = "Document was updated by someone else"
	msgDocumentLocked        = "Document is locked"
	msgRevisionNotFound      = "Document revision not found"
	msgRevisionAlreadyLatest = "Revision is already the latest"
)

func init() {
	addRoutes(
		route{Method: http.MethodGet, Path: "/api/issues/{id}/documents", Response: new([]*IssueDocumentSummary), Summary: "List an issue's documents",
			Handle: handleDocumentList},
		route{Method: http.MethodGet, Path: "/api/issues/{id}/documents/{key}", Response: new(IssueDocument), Summary: "Get an issue document with its latest body",
			Handle: handleDocumentGet},
		route{Method: http.MethodPut, Path: "/api/issues/{id}/documents/{key}", Response: new(documentWrite), Summary: "Create (no baseRevisionId) or update (baseRevisionId of the latest revision) an issue document",
			Body: documentPutBody{}, Handle: handleDocumentPut},
		route{Method: http.MethodDelete, Path: "/api/issues/{id}/documents/{key}", Response: new(map[string]any), Summary: "Delete an issue document and its revisions",
			Handle: handleDocumentDelete},
		route{Method: http.MethodGet, Path: "/api/issues/{id}/documents/{key}/revisions", Response: new(map[string]any), Summary: "List a document's revisions, newest first",
			Handle: handleDocumentRevisions},
		route{Method: http.MethodPost, Path: "/api/issues/{id}/documents/{key}/revisions/{revisionId}/restore", Response: new(documentWrite), Summary: "Write an old revision forward as the new latest revision",
			Handle: handleDocumentRestore},
		route{Method: http.MethodPost, Path: "/api/issues/{id}/documents/{key}/lock", Response: new(DocumentLockState), Summary: "Lock a document (idempotent; only the holder may then write)",
			Handle: handleDocumentLock},
		route{Method: http.MethodPost, Path: "/api/issues/{id}/documents/{key}/unlock", Response: new(DocumentLockState), Summary: "Unlock a document (the holder or the board; idempotent)",
			Handle: handleDocumentUnlock},
	)
}

// Document is a row of ext_work.documents: the latest state of a revisioned document.
type Document struct {
	bun.BaseModel `bun:"table:documents,alias:d"`

	ID               string     `bun:"id,pk,type:uuid"`
	CompanyID        string     `bun:"company_id,type:uuid"`
	Title            *string    `bun:"title"`
	Format           string     `bun:"format"`
	Body             string     `bun:"body"`
	LatestRevisionID *string    `bun:"latest_revision_id,type:uuid"`
	RevisionNumber   int        `bun:"revision_number"`
	LockedAt         *time.Time `bun:"locked_at"`
	LockedByAgentID  *string    `bun:"locked_by_agent_id,type:uuid"`
	LockedByUserID   *string    `bun:"locked_by_user_id"`
	CreatedByAgentID *string    `bun:"created_by_agent_id,type:uuid"`
	CreatedByUserID  *string    `bun:"created_by_user_id"`
	UpdatedByAgentID *string    `bun:"updated_by_agent_id,type:uuid"`
	UpdatedByUserID  *string    `bun:"updated_by_user_id"`
	CreatedAt        time.Time  `bun:"created_at"`
	UpdatedAt        time.Time  `bun:"updated_at"`
}

// DocumentRevision is a row of ext_work.document_revisions and its API shape.
type DocumentRevision struct {
	bun.BaseModel `bun:"table:document_revisions,alias:rev"`

	ID               string    `bun:"id,pk,type:uuid" json:"id"`
	CompanyID        string    `bun:"company_id,type:uuid" json:"companyId"`
	DocumentID       string    `bun:"document_id,type:uuid" json:"documentId"`
	RevisionNumber   int       `bun:"revision_number" json:"revisionNumber"`
	Title            *string   `bun:"title" json:"title"`
	Format           string    `bun:"format" json:"format"`
	Body             string    `bun:"body" json:"body"`
	ChangeSummary    *string   `bun:"change_summary" json:"changeSummary"`
	CreatedByAgentID *string   `bun:"created_by_agent_id,type:uuid" json:"createdByAgentId"`
	CreatedByUserID  *string   `bun:"created_by_user_id" json:"createdByUserId"`
	CreatedByRunID   *string   `bun:"created_by_run_id" json:"createdByRunId"`
	CreatedAt        time.Time `bun:"created_at" json:"createdAt"`
}

// issueDocumentLink is a row of ext_work.issue_documents.
type issueDocumentLink struct {
	bun.BaseModel `bun:"table:issue_documents,alias:idoc"`

	IssueID    string    `bun:"issue_id,pk,type:uuid"`
	Key        string    `bun:"key,pk"`
	DocumentID string    `bun:"document_id,type:uuid"`
	CompanyID  string    `bun:"company_id,type:uuid"`
	CreatedAt  time.Time `bun:"created_at"`
}

// IssueDocument is the API shape of an issue's document.
type IssueDocument struct {
	ID                   string     `json:"id"`
	CompanyID            string     `json:"companyId"`
	IssueID              string     `json:"issueId"`
	Key                  string     `json:"key"`
	Title                *string    `json:"title"`
	Format               string     `json:"format"`
	Body                 string     `json:"body"`
	LatestBody           string     `json:"latestBody"`
	LatestRevisionID     *string    `json:"latestRevisionId"`
	LatestRevisionNumber int        `json:"latestRevisionNumber"`
	Locked               bool       `json:"locked"`
	LockedAt             *time.Time `json:"lockedAt"`
	LockedByAgentID      *string    `json:"lockedByAgentId"`
	LockedByUserID       *string    `json:"lockedByUserId"`
	CreatedByAgentID     *string    `json:"createdByAgentId"`
	CreatedByUserID      *string    `json:"createdByUserId"`
	UpdatedByAgentID     *string    `json:"updatedByAgentId"`
	UpdatedByUserID      *string    `json:"updatedByUserId"`
	CreatedAt            time.Time  `json:"createdAt"`
	UpdatedAt            time.Time  `json:"updatedAt"`
}

// IssueDocumentSummary is one row of GET /api/issues/{id}/documents.
type IssueDocumentSummary struct {
	ID               string     `bun:"id" json:"id"`
	Key              string     `bun:"key" json:"key"`
	Title            *string    `bun:"title" json:"title"`
	Format           string     `bun:"format" json:"format"`
	RevisionNumber   int        `bun:"revision_number" json:"revisionNumber"`
	LatestRevisionID *string    `bun:"latest_revision_id" json:"latestRevisionId"`
	Locked           bool       `bun:"locked" json:"locked"`
	LockedAt         *time.Time `bun:"locked_at" json:"lockedAt"`
	LockedByAgentID  *string    `bun:"locked_by_agent_id" json:"lockedByAgentId"`
	LockedByUserID   *string    `bun:"locked_by_user_id" json:"lockedByUserId"`
	CreatedAt        time.Time  `bun:"created_at" json:"createdAt"`
	UpdatedAt        time.Time  `bun:"updated_at" json:"updatedAt"`
}

// DocumentLockState is the answer of the lock and unlock routes.
type DocumentLockState struct {
	DocumentID      string     `json:"documentId"`
	Key             string     `json:"key"`
	Locked          bool       `json:"locked"`
	LockedAt        *time.Time `json:"lockedAt"`
	LockedByAgentID *string    `json:"lockedByAgentId"`
	LockedByUserID  *string    `json:"lockedByUserId"`
}

// documentWrite is the answer of a write: the document and the revision it gained.
type documentWrite struct {
	Document *IssueDocument    `json:"document"`
	Revision *DocumentRevision `json:"revision"`
}

// documentPutBody is the body of PUT /api/issues/{id}/documents/{key}.
type documentPutBody struct {
	Title          *string `json:"title,omitempty" jsonschema:"maxLength=500"`
	Format         string  `json:"format,omitempty" jsonschema:"enum=markdown"`
	Body           *string `json:"body" jsonschema:"required"`
	ChangeSummary  *string `json:"changeSummary,omitempty" jsonschema:"maxLength=500"`
	BaseRevisionID *string `json:"baseRevisionId,omitempty" jsonschema:"format=uuid"`
}

func issueDocumentOf(d *Document, issueID, key string) *IssueDocument {
	return &IssueDocument{
		ID: d.ID, CompanyID: d.CompanyID, IssueID: issueID, Key: key, Title: d.Title, Format: d.Format,
		Body: d.Body, LatestBody: d.Body, LatestRevisionID: d.LatestRevisionID, LatestRevisionNumber: d.RevisionNumber,
		Locked: d.LockedAt != nil, LockedAt: d.LockedAt, LockedByAgentID: d.LockedByAgentID, LockedByUserID: d.LockedByUserID,
		CreatedByAgentID: d.CreatedByAgentID, CreatedByUserID: d.CreatedByUserID,
		UpdatedByAgentID: d.UpdatedByAgentID, UpdatedByUserID: d.UpdatedByUserID,
		CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt,
	}
}

func lockStateOf(d *Document, key string) *DocumentLockState {
	return &DocumentLockState{DocumentID: d.ID, Key: key, Locked: d.LockedAt != nil, LockedAt: d.LockedAt,
		LockedByAgentID: d.LockedByAgentID, LockedByUserID: d.LockedByUserID}
}

// documentLockedAgainst reports whether d is locked by someone other than the actor.
func documentLockedAgainst(d *Document, a *sdk.Actor) bool {
	if d.LockedAt == nil {
		return false
	}
	switch a.Type {
	case "agent":
		return d.LockedByAgentID == nil || *d.LockedByAgentID != a.AgentId
	case "board":
		return d.LockedByUserID == nil || *d.LockedByUserID != a.UserId
	}
	return true
}

// lockedError is the 409 a write to a document locked by someone else gets.
func lockedError(d *Document) error {
	return &sdk.Error{Status: http.StatusConflict, Message: msgDocumentLocked, Code: "document_locked",
		Details: map[string]any{"lockedAt": d.LockedAt, "lockedByAgentId": d.LockedByAgentID, "lockedByUserId": d.LockedByUserID}}
}

// documentSerialize takes the transaction-scoped lock that orders all writes to one
// issue's document key, including its creation.
func documentSerialize(ctx context.Context, tx bun.Tx, issueID, key string) error {
	if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock(hashtext('ext_work.issue_documents'), hashtext(? || ':' || ?))", issueID, key); err != nil {
		return fmt.Errorf("error locking document %s of issue %s: %w", key, issueID, err)
	}
	return nil
}

// documentByKey loads the document an issue holds under key (nil when there is none),
// locking its row when db is a transaction.
func documentByKey(ctx context.Context, db bun.IDB, issueID, key string) (*Document, error) {
	d := new(Document)
	q := db.NewSelect().Model(d).Where("d.id = (SELECT document_id FROM issue_documents WHERE issue_id = ? AND key = ?)", issueID, key)
	if _, ok := db.(bun.Tx); ok {
		q = q.For("UPDATE")
	}
	if err := q.Scan(ctx); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, nil
		}
		return nil, fmt.Errorf("error reading document %s of issue %s: %w", key, issueID, err)
	}
	return d, nil
}

// documentAppendRevision adds a revision to d (already locked) and makes it the latest.
func documentAppendRevision(ctx context.Context, tx bun.Tx, d *Document, by attribution, title *string, body string, summary *string) (*DocumentRevision, error) {
	now := time.Now().UTC().Truncate(time.Microsecond)
	rev := &DocumentRevision{
		ID: uuid.Must(uuid.NewV7()).String(), CompanyID: d.CompanyID, DocumentID: d.ID, RevisionNumber: d.RevisionNumber + 1,
		Title: title, Format: d.Format, Body: body, ChangeSummary: summary,
		CreatedByAgentID: by.AgentID, CreatedByUserID: by.UserID, CreatedByRunID: by.RunID, CreatedAt: now,
	}
	if _, err := tx.NewInsert().Model(rev).Exec(ctx); err != nil {
		return nil, fmt.Errorf("error inserting revision of document %s: %w", d.ID, err)
	}
	d.Title, d.Body, d.LatestRevisionID, d.RevisionNumber = title, body, &rev.ID, rev.RevisionNumber
	d.UpdatedByAgentID, d.UpdatedByUserID, d.UpdatedAt = by.AgentID, by.UserID, now
	if _, err := tx.NewUpdate().Model(d).
		Column("title", "format", "body", "latest_revision_id", "revision_number", "updated_by_agent_id", "updated_by_user_id", "updated_at").
		WherePK().Exec(ctx); err != nil {
		return nil, fmt.Errorf("error updating document %s: %w", d.ID, err)
	}
	return rev, nil
}

// documentRoute resolves the issue and key of a document route.
func (w *Work) documentRoute(r *http.Request) (*Issue, string, error) {
	iss, err := w.issueByRef(r.Context(), r.PathValue("id"))
	if err != nil {
		return nil, "", err
	}
	return iss, r.PathValue("key"), nil
}

func validDocumentKey(key string) bool {
	return len(key) <= DocumentKeyMaxLen && documentKeyPattern.MatchString(key)
}

func (w *Work) documentActivity(ctx context.Context, iss *Issue, action string, details map[string]any) {
	if err := w.activity(ctx, iss.CompanyID, action, "issue", iss.ID, details); err != nil {
		w.log.Warn("error recording document activity", "action", action, "issue", iss.ID, "error", err)
	}
}

func handleDocumentList(w *Work, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	iss, err := w.issueByRef(ctx, r.PathValue("id"))
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	out := []*IssueDocumentSummary{}
	err = w.db.NewSelect().TableExpr("issue_documents AS idoc").Join("JOIN documents AS d ON d.id = idoc.document_id").
		ColumnExpr("d.id, idoc.key, d.title, d.format, d.revision_number, d.latest_revision_id, d.locked_at IS NOT NULL AS locked").
		ColumnExpr("d.locked_at, d.locked_by_agent_id, d.locked_by_user_id, d.created_at, d.updated_at").
		Where("idoc.issue_id = ?", iss.ID).OrderExpr("idoc.key ASC").Scan(ctx, &out)
	if err != nil {
		w.writeErr(rw, fmt.Errorf("error listing documents of issue %s: %w", iss.ID, err))
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, out)
}

func handleDocumentGet(w *Work, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	iss, key, err := w.documentRoute(r)
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	if !validDocumentKey(key) {
		w.writeErr(rw, notFound(msgDocumentNotFound))
		return
	}
	d, err := documentByKey(ctx, w.db, iss.ID, key)
	if err == nil && d == nil {
		err = notFound(msgDocumentNotFound)
	}
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, issueDocumentOf(d, iss.ID, key))
}

func handleDocumentPut(w *Work, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	iss, key, err := w.documentRoute(r)
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	if !validDocumentKey(key) {
		w.writeErr(rw, invalid("key", fmt.Sprintf("must match %s and be at most %d characters", documentKeyPattern, DocumentKeyMaxLen)))
		return
	}
	var body documentPutBody
	if err := decodeBody(r, &body); err != nil {
		w.writeErr(rw, err)
		return
	}
	switch {
	case body.Body == nil:
		err = invalid("body", "required")
	case len(*body.Body) > DocumentBodyMaxBytes:
		err = invalid("body", fmt.Sprintf("must be at most %d bytes", DocumentBodyMaxBytes))
	case body.Format != "" && body.Format != DocumentFormatMarkdown:
		err = invalid("format", "must be markdown")
	case body.Title != nil && utf8.RuneCountInString(*body.Title) > DocumentTitleMaxLen:
		err = invalid("title", fmt.Sprintf("must be at most %d characters", DocumentTitleMaxLen))
	case body.ChangeSummary != nil && utf8.RuneCountInString(*body.ChangeSummary) > DocumentChangeSummaryMaxLen:
		err = invalid("changeSummary", fmt.Sprintf("must be at most %d characters", DocumentChangeSummaryMaxLen))
	case body.BaseRevisionID != nil && !isUUID(*body.BaseRevisionID):
		err = invalid("baseRevisionId", "must be a UUID")
	}
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	actor := sdk.ActorFrom(ctx)
	by := attributionOf(actor)
	var (
		d       *Document
		rev     *DocumentRevision
		created bool
	)
	err = w.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if err := documentSerialize(ctx, tx, iss.ID, key); err != nil {
			return err
		}
		var err error
		if d, err = documentByKey(ctx, tx, iss.ID, key); err != nil {
			return err
		}
		if d == nil {
			if body.BaseRevisionID != nil {
				return &sdk.Error{Status: http.StatusConflict, Message: msgDocumentNotYet, Code: "document_not_found"}
			}
			created = true
			now := time.Now().UTC().Truncate(time.Microsecond)
			d = &Document{
				ID: uuid.Must(uuid.NewV7()).String(), CompanyID: iss.CompanyID, Format: DocumentFormatMarkdown,
				CreatedByAgentID: by.AgentID, CreatedByUserID: by.UserID, CreatedAt: now, UpdatedAt: now,
			}
			if _, err := tx.NewInsert().Model(d).Exec(ctx); err != nil {
				return fmt.Errorf("error inserting document %s of issue %s: %w", key, iss.ID, err)
			}
			link := &issueDocumentLink{IssueID: iss.ID, Key: key, DocumentID: d.ID, CompanyID: iss.CompanyID, CreatedAt: now}
			if _, err := tx.NewInsert().Model(link).Exec(ctx); err != nil {
				return fmt.Errorf("error linking document %s to issue %s: %w", key, iss.ID, err)
			}
		} else {
			if documentLockedAgainst(d, actor) {
				return lockedError(d)
			}
			latest := map[string]any{"code": "stale_base_revision", "latestRevisionId": d.LatestRevisionID, "latestRevisionNumber": d.RevisionNumber}
			if body.BaseRevisionID == nil {
				return &sdk.Error{Status: http.StatusConflict, Message: msgDocumentNeedsBase, Code: "stale_base_revision", Details: latest}
			}
			if d.LatestRevisionID == nil || *body.BaseRevisionID != *d.LatestRevisionID {
				if d.LatestRevisionID != nil {
					cur := new(DocumentRevision)
					if err := tx.NewSelect().Model(cur).Where("rev.id = ?", *d.LatestRevisionID).Scan(ctx); err == nil {
						latest["latestRevision"] = cur
					}
				}
				return &sdk.Error{Status: http.StatusConflict, Message: msgDocumentStale, Code: "stale_base_revision", Details: latest}
			}
		}
		title := d.Title
		if body.Title != nil {
			title = body.Title
		}
		rev, err = documentAppendRevision(ctx, tx, d, by, title, *body.Body, body.ChangeSummary)
		return err
	})
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	action, status := "issue.document.updated", http.StatusOK
	if created {
		action, status = "issue.document.created", http.StatusCreated
	}
	w.documentActivity(ctx, iss, action, map[string]any{"key": key, "documentId": d.ID, "revisionId": rev.ID, "revisionNumber": rev.RevisionNumber})
	sdk.WriteJSON(rw, status, &documentWrite{Document: issueDocumentOf(d, iss.ID, key), Revision: rev})
}

func handleDocumentDelete(w *Work, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	iss, key, err := w.documentRoute(r)
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	if !validDocumentKey(key) {
		sdk.WriteJSON(rw, http.StatusOK, map[string]any{"ok": true})
		return
	}
	var d *Document
	err = w.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if err := documentSerialize(ctx, tx, iss.ID, key); err != nil {
			return err
		}
		var err error
		if d, err = documentByKey(ctx, tx, iss.ID, key); err != nil || d == nil {
			return err
		}
		if documentLockedAgainst(d, sdk.ActorFrom(ctx)) {
			return lockedError(d)
		}
		if _, err := tx.NewDelete().Model(d).WherePK().Exec(ctx); err != nil {
			return fmt.Errorf("error deleting document %s: %w", d.ID, err)
		}
		return nil
	})
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	if d != nil {
		w.documentActivity(ctx, iss, "issue.document.deleted", map[string]any{"key": key, "documentId": d.ID})
	}
	sdk.WriteJSON(rw, http.StatusOK, map[string]any{"ok": true})
}

// documentRevisionItem is one revision in GET …/revisions.
type documentRevisionItem struct {
	*DocumentRevision
	ActorAgentName *string `json:"actorAgentName"`
}

func handleDocumentRevisions(w *Work, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	iss, key, err := w.documentRoute(r)
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	var d *Document
	if validDocumentKey(key) {
		if d, err = documentByKey(ctx, w.db, iss.ID, key); err != nil {
			w.writeErr(rw, err)
			return
		}
	}
	if d == nil {
		w.writeErr(rw, notFound(msgDocumentNotFound))
		return
	}
	var revs []*DocumentRevision
	if err := w.db.NewSelect().Model(&revs).Where("rev.document_id = ?", d.ID).OrderExpr("rev.revision_number DESC").Scan(ctx); err != nil {
		w.writeErr(rw, fmt.Errorf("error listing revisions of document %s: %w", d.ID, err))
		return
	}
	names := map[string]string{}
	for _, rev := range revs {
		if rev.CreatedByAgentID != nil {
			res, err := w.host.Principals.ListAgents(ctx, &hostv1.ListAgentsRequest{CompanyId: iss.CompanyID, IncludeTerminated: true})
			if err != nil {
				w.log.Warn("error listing agents for revision authors", "document", d.ID, "error", err)
				break
			}
			for _, a := range res.Agents {
				names[a.Id] = a.Name
			}
			break
		}
	}
	items := make([]documentRevisionItem, 0, len(revs))
	for _, rev := range revs {
		item := documentRevisionItem{DocumentRevision: rev}
		if rev.CreatedByAgentID != nil {
			if name, ok := names[*rev.CreatedByAgentID]; ok {
				item.ActorAgentName = &name
			}
		}
		items = append(items, item)
	}
	sdk.WriteJSON(rw, http.StatusOK, map[string]any{
		"key": key,
		"document": map[string]any{"id": d.ID, "title": d.Title, "format": d.Format,
			"latestRevisionId": d.LatestRevisionID, "latestRevisionNumber": d.RevisionNumber},
		"revisions": items,
	})
}

func handleDocumentRestore(w *Work, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	iss, key, err := w.documentRoute(r)
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	if !validDocumentKey(key) {
		w.writeErr(rw, notFound(msgDocumentNotFound))
		return
	}
	revisionID := r.PathValue("revisionId")
	actor := sdk.ActorFrom(ctx)
	var (
		d        *Document
		old, rev *DocumentRevision
	)
	err = w.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if err := documentSerialize(ctx, tx, iss.ID, key); err != nil {
			return err
		}
		var err error
		if d, err = documentByKey(ctx, tx, iss.ID, key); err != nil {
			return err
		}
		if d == nil {
			return notFound(msgDocumentNotFound)
		}
		if documentLockedAgainst(d, actor) {
			return lockedError(d)
		}
		if !isUUID(revisionID) {
			return notFound(msgRevisionNotFound)
		}
		old = new(DocumentRevision)
		if err := tx.NewSelect().Model(old).Where("rev.id = ? AND rev.document_id = ?", revisionID, d.ID).Scan(ctx); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return notFound(msgRevisionNotFound)
			}
			return fmt.Errorf("error reading revision %s: %w", revisionID, err)
		}
		if d.LatestRevisionID != nil && *d.LatestRevisionID == old.ID {
			return conflict(msgRevisionAlreadyLatest)
		}
		summary := fmt.Sprintf("Restored revision %d", old.RevisionNumber)
		d.Format = old.Format
		rev, err = documentAppendRevision(ctx, tx, d, attributionOf(actor), old.Title, old.Body, &summary)
		return err
	})
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	w.documentActivity(ctx, iss, "issue.document.restored", map[string]any{"key": key, "documentId": d.ID,
		"revisionId": rev.ID, "revisionNumber": rev.RevisionNumber, "restoredRevisionId": old.ID, "restoredRevisionNumber": old.RevisionNumber})
	sdk.WriteJSON(rw, http.StatusOK, &documentWrite{Document: issueDocumentOf(d, iss.ID, key), Revision: rev})
}

func handleDocumentLock(w *Work, rw http.ResponseWriter, r *http.Request) {
	w.documentSetLock(rw, r, true)
}

func handleDocumentUnlock(w *Work, rw http.ResponseWriter, r *http.Request) {
	w.documentSetLock(rw, r, false)
}

// documentSetLock locks or unlocks a document. Locking a locked document and unlocking an
// unlocked one change nothing and answer the current state; only the holder or the board
// may unlock.
func (w *Work) documentSetLock(rw http.ResponseWriter, r *http.Request, lock bool) {
	ctx := r.Context()
	iss, key, err := w.documentRoute(r)
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	if !validDocumentKey(key) {
		w.writeErr(rw, notFound(msgDocumentNotFound))
		return
	}
	actor := sdk.ActorFrom(ctx)
	var (
		d       *Document
		changed bool
	)
	err = w.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var err error
		if d, err = documentByKey(ctx, tx, iss.ID, key); err != nil {
			return err
		}
		if d == nil {
			return notFound(msgDocumentNotFound)
		}
		if (d.LockedAt != nil) == lock {
			return nil
		}
		if lock {
			by := attributionOf(actor)
			now := time.Now().UTC().Truncate(time.Microsecond)
			d.LockedAt, d.LockedByAgentID, d.LockedByUserID = &now, by.AgentID, by.UserID
		} else {
			if actor.Type != "board" && documentLockedAgainst(d, actor) {
				return forbidden("Only the lock holder or the board can unlock this document")
			}
			d.LockedAt, d.LockedByAgentID, d.LockedByUserID = nil, nil, nil
		}
		changed = true
		_, err = tx.NewUpdate().Model(d).Column("locked_at", "locked_by_agent_id", "locked_by_user_id").WherePK().Exec(ctx)
		return err
	})
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	if changed {
		action := "issue.document.unlocked"
		if lock {
			action = "issue.document.locked"
		}
		w.documentActivity(ctx, iss, action, map[string]any{"key": key, "documentId": d.ID})
	}
	sdk.WriteJSON(rw, http.StatusOK, lockStateOf(d, key))
}
