package cases

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/keelhq/keel/sdk"
)

// Case document limits (spec part 2 "Case", "Limits").
const (
	docKeyMaxLen        = 120
	docBodyMaxLen       = 200000
	docChangeSummaryMax = 1000
	docTitleMaxLen      = 500
	docFormatDefault    = "markdown"
)

// docKeyPattern is the pattern of a case document key.
var docKeyPattern = regexp.MustCompile(`^[A-Za-z0-9_.:-]+$`)

// docFormats are the formats a case document may have.
var docFormats = map[string]bool{"markdown": true, "text": true, "html": true, "json": true}

func init() {
	const p = "/api/cases/{id}/documents/{key}"
	addRoutes(
		route{Method: http.MethodGet, Path: p, Response: new(Document), Summary: "Get a case document with its latest body", Handle: (*Cases).handleDocGet},
		route{Method: http.MethodPut, Path: p, Response: new(docWrite),
			Summary: "Create (no baseRevisionId) or revise (baseRevisionId of the latest revision) a case document",
			Body:    DocPutBody{}, Handle: (*Cases).handleDocPut},
		route{Method: http.MethodDelete, Path: p, Response: new(map[string]bool), Summary: "Delete a case document and its revisions ({ok: true} also for a missing key)",
			Handle: (*Cases).handleDocDelete},
		route{Method: http.MethodGet, Path: p + "/revisions", Response: new(map[string]any),
			Summary: "List a case document's revisions, newest first, with author agent name and attributed issue",
			Handle:  (*Cases).handleDocRevisions},
		route{Method: http.MethodPost, Path: p + "/revisions/{revisionId}/restore", Response: new(docWrite),
			Summary: "Write an old revision forward as the new latest revision (409 when it is the latest)",
			Handle:  (*Cases).handleDocRestore},
		route{Method: http.MethodPost, Path: p + "/lock", Response: new(LockState), Summary: "Lock a case document (idempotent); writes, restores and deletes then answer 409",
			Handle: (*Cases).handleDocLock},
		route{Method: http.MethodPost, Path: p + "/unlock", Response: new(LockState), Summary: "Unlock a case document (idempotent)",
			Handle: (*Cases).handleDocUnlock},
	)
}

// DocPutBody is the body of PUT /api/cases/{id}/documents/{key}.
type DocPutBody struct {
	// Body is the new content, up to 200000 characters.
	Body *string `json:"body" jsonschema:"required,maxLength=200000"`
	// Title is optional.
	Title *string `json:"title,omitempty" jsonschema:"maxLength=500"`
	// Format defaults to markdown.
	Format *string `json:"format,omitempty" jsonschema:"enum=markdown,enum=text,enum=html,enum=json"`
	// ChangeSummary is up to 1000 characters.
	ChangeSummary *string `json:"changeSummary,omitempty" jsonschema:"maxLength=1000"`
	// BaseRevisionID must be omitted when creating and must be the latest revision when updating.
	BaseRevisionID *string `json:"baseRevisionId,omitempty" jsonschema:"format=uuid"`
}

// Document is a case document and its API shape.
type Document struct {
	ID                   string     `json:"id"`
	CompanyID            string     `json:"companyId"`
	CaseID               string     `json:"caseId"`
	Key                  string     `json:"key"`
	Title                *string    `json:"title"`
	Format               string     `json:"format"`
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
	SourceTrust          *string    `json:"sourceTrust"`
	CreatedAt            time.Time  `json:"createdAt"`
	UpdatedAt            time.Time  `json:"updatedAt"`
	// Body is the latest body again, on the single-document read.
	Body *string `json:"body,omitempty"`
}

// docCols are the columns scanDoc reads, in order.
const docCols = `id, company_id, case_id, key, title, format, body, latest_revision_id, revision_number, locked_at,
	locked_by_agent_id, locked_by_user_id, created_by_agent_id, created_by_user_id, updated_by_agent_id, updated_by_user_id,
	created_at, updated_at`

// scanDoc reads one document row.
func scanDoc(row pgx.Row) (*Document, error) {
	d := new(Document)
	if err := row.Scan(&d.ID, &d.CompanyID, &d.CaseID, &d.Key, &d.Title, &d.Format, &d.LatestBody, &d.LatestRevisionID,
		&d.LatestRevisionNumber, &d.LockedAt, &d.LockedByAgentID, &d.LockedByUserID, &d.CreatedByAgentID, &d.CreatedByUserID,
		&d.UpdatedByAgentID, &d.UpdatedByUserID, &d.CreatedAt, &d.UpdatedAt); err != nil {
		return nil, err
	}
	d.Locked = d.LockedAt != nil
	return d, nil
}

// Revision is a case document revision and its API shape.
type Revision struct {
	ID               string        `json:"id"`
	CompanyID        string        `json:"companyId"`
	DocumentID       string        `json:"documentId"`
	RevisionNumber   int           `json:"revisionNumber"`
	Title            *string       `json:"title"`
	Format           string        `json:"format"`
	Body             string        `json:"body"`
	ChangeSummary    *string       `json:"changeSummary"`
	RestoredFromID   *string       `json:"restoredFromRevisionId"`
	CreatedByAgentID *string       `json:"createdByAgentId"`
	CreatedByUserID  *string       `json:"createdByUserId"`
	CreatedByRunID   *string       `json:"createdByRunId"`
	IssueID          *string       `json:"issueId"`
	CreatedAt        time.Time     `json:"createdAt"`
	ActorAgentName   *string       `json:"actorAgentName,omitempty"`
	Issue            *IssueSummary `json:"issue,omitempty"`
}

// revCols are the columns scanRev reads, in order.
const revCols = `id, company_id, document_id, revision_number, title, format, body, change_summary, restored_from_id,
	created_by_agent_id, created_by_user_id, created_by_run_id, issue_id, created_at`

// scanRev reads one revision row.
func scanRev(row pgx.Row) (*Revision, error) {
	v := new(Revision)
	if err := row.Scan(&v.ID, &v.CompanyID, &v.DocumentID, &v.RevisionNumber, &v.Title, &v.Format, &v.Body, &v.ChangeSummary,
		&v.RestoredFromID, &v.CreatedByAgentID, &v.CreatedByUserID, &v.CreatedByRunID, &v.IssueID, &v.CreatedAt); err != nil {
		return nil, err
	}
	return v, nil
}

// docWrite is the answer of a write: the document and the revision it gained.
type docWrite struct {
	Document *Document `json:"document"`
	Revision *Revision `json:"revision"`
}

// LockState is the answer of lock and unlock.
type LockState struct {
	DocumentID      string     `json:"documentId"`
	Key             string     `json:"key"`
	Locked          bool       `json:"locked"`
	LockedAt        *time.Time `json:"lockedAt"`
	LockedByAgentID *string    `json:"lockedByAgentId"`
	LockedByUserID  *string    `json:"lockedByUserId"`
}

// docKey validates the key path parameter (400 naming it).
func docKey(r *http.Request) (string, error) {
	key := r.PathValue("key")
	if utf8.RuneCountInString(key) > docKeyMaxLen || !docKeyPattern.MatchString(key) {
		return "", invalid("key", "must be 1 to 120 characters of A-Z, a-z, 0-9, _ . : -")
	}
	return key, nil
}

// caseAndKey resolves the case and the document key of a document route.
func (x *Cases) caseAndKey(r *http.Request) (*Case, string, error) {
	key, err := docKey(r)
	if err != nil {
		return nil, "", err
	}
	c, err := x.caseByRef(r.Context(), x.pool, r.PathValue("id"), false)
	if err != nil {
		return nil, "", err
	}
	return c, key, nil
}

// docByKey reads a case's document (nil when missing); in a transaction the row is locked.
func docByKey(ctx context.Context, q querier, caseID, key string, forUpdate bool) (*Document, error) {
	lock := ""
	if forUpdate {
		lock = " FOR UPDATE"
	}
	d, err := scanDoc(q.QueryRow(ctx, `SELECT `+docCols+` FROM case_documents WHERE case_id = $1 AND key = $2`+lock, caseID, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("error reading document %s of case %s: %w", key, caseID, err)
	}
	return d, nil
}

// caseDocuments reads a case's documents by key.
func (x *Cases) caseDocuments(ctx context.Context, caseID string) ([]*Document, error) {
	rows, err := x.pool.Query(ctx, `SELECT `+docCols+` FROM case_documents WHERE case_id = $1 ORDER BY key`, caseID)
	if err != nil {
		return nil, fmt.Errorf("error reading documents of case %s: %w", caseID, err)
	}
	docs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*Document, error) { return scanDoc(row) })
	if err != nil {
		return nil, fmt.Errorf("error reading documents of case %s: %w", caseID, err)
	}
	return docs, nil
}

// staleErr is rule 3's 409 with the current latest revision; needsBase is rule 2's.
func staleErr(message string, latest *Revision) *sdk.Error {
	return &sdk.Error{Status: http.StatusConflict, Message: message, Code: "stale_base_revision", Details: map[string]any{
		"code": "stale_base_revision", "latestRevisionId": latest.ID, "latestRevisionNumber": latest.RevisionNumber,
		"latestRevision": latest}}
}

// lockedErr is rule 4's 409.
func lockedErr() *sdk.Error {
	return &sdk.Error{Status: http.StatusConflict, Message: msgDocLocked, Code: "document_locked"}
}

func (x *Cases) handleDocGet(rw http.ResponseWriter, r *http.Request) {
	c, key, err := x.caseAndKey(r)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	d, err := docByKey(r.Context(), x.pool, c.ID, key, false)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	if d == nil {
		x.writeErr(rw, notFound(msgDocNotFound))
		return
	}
	d.Body = &d.LatestBody
	sdk.WriteJSON(rw, http.StatusOK, d)
}

// revisionInput is a validated new revision.
type revisionInput struct {
	body, format  string
	title         *string
	changeSummary *string
	restoredFrom  *string
}

// appendRevisionTx writes a new latest revision of a locked document (creating the
// document row when d is nil), re-anchors its open annotation threads, records
// document_revised and links the run's issue as work.
func (x *Cases) appendRevisionTx(ctx context.Context, tx pgx.Tx, c *Case, key string, d *Document, in *revisionInput,
	at attribution, runIssue string) (*docWrite, error) {
	if d == nil {
		var err error
		d, err = scanDoc(tx.QueryRow(ctx, `INSERT INTO case_documents (id, company_id, case_id, key, title, format, body,
			created_by_agent_id, created_by_user_id, updated_by_agent_id, updated_by_user_id)
			VALUES ($1, $2, $3, $4, $5, $6, '', $7, $8, $7, $8) ON CONFLICT (case_id, key) DO NOTHING RETURNING `+docCols,
			newID(), c.CompanyID, c.ID, key, in.title, in.format, at.AgentID, at.UserID))
		if errors.Is(err, pgx.ErrNoRows) {
			// Created by a concurrent writer: this write had no base, so it loses (rule 2).
			cur, err := docByKey(ctx, tx, c.ID, key, true)
			if err != nil {
				return nil, err
			}
			latest, err := latestRevision(ctx, tx, cur)
			if err != nil {
				return nil, err
			}
			return nil, staleErr(msgDocNeedsBase, latest)
		}
		if err != nil {
			return nil, fmt.Errorf("error creating document %s of case %s: %w", key, c.ID, err)
		}
	}
	title := d.Title
	if in.title != nil {
		title = in.title
	}
	rev, err := scanRev(tx.QueryRow(ctx, `INSERT INTO case_document_revisions (id, company_id, document_id, revision_number, title,
		format, body, change_summary, restored_from_id, created_by_agent_id, created_by_user_id, created_by_run_id, issue_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) RETURNING `+revCols,
		newID(), c.CompanyID, d.ID, d.LatestRevisionNumber+1, title, in.format, in.body, in.changeSummary, in.restoredFrom,
		at.AgentID, at.UserID, at.RunID, nullIfEmpty(runIssue)))
	if err != nil {
		return nil, fmt.Errorf("error writing revision of document %s: %w", d.ID, err)
	}
	d, err = scanDoc(tx.QueryRow(ctx, `UPDATE case_documents SET title = $2, format = $3, body = $4, latest_revision_id = $5,
		revision_number = $6, updated_by_agent_id = $7, updated_by_user_id = $8, updated_at = clock_timestamp()
		WHERE id = $1 RETURNING `+docCols, d.ID, title, in.format, in.body, rev.ID, rev.RevisionNumber, at.AgentID, at.UserID))
	if err != nil {
		return nil, fmt.Errorf("error updating document %s: %w", rev.DocumentID, err)
	}
	if err := reanchorTx(ctx, tx, d, rev); err != nil {
		return nil, err
	}
	payload := map[string]any{"key": key, "documentId": d.ID, "revisionId": rev.ID, "revisionNumber": rev.RevisionNumber}
	if in.restoredFrom != nil {
		payload["restoredFromRevisionId"] = *in.restoredFrom
	}
	if err := eventTx(ctx, tx, c.CompanyID, c.ID, "document_revised", at, runIssue, payload); err != nil {
		return nil, err
	}
	if err := autoLinkTx(ctx, tx, c, runIssue, "work", at); err != nil {
		return nil, err
	}
	return &docWrite{Document: d, Revision: rev}, nil
}

// latestRevision reads a document's latest revision.
func latestRevision(ctx context.Context, q querier, d *Document) (*Revision, error) {
	rev, err := scanRev(q.QueryRow(ctx, `SELECT `+revCols+` FROM case_document_revisions WHERE document_id = $1
		ORDER BY revision_number DESC LIMIT 1`, d.ID))
	if err != nil {
		return nil, fmt.Errorf("error reading latest revision of document %s: %w", d.ID, err)
	}
	return rev, nil
}

func (x *Cases) handleDocPut(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var body DocPutBody
	if err := sdk.DecodeJSON(r, &body); err != nil {
		x.writeErr(rw, err)
		return
	}
	var d []detail
	bad := func(path, msg string) { d = append(d, detail{Path: path, Message: msg}) }
	if body.Body == nil {
		bad("body", "is required")
	} else if utf8.RuneCountInString(*body.Body) > docBodyMaxLen {
		bad("body", "must be at most 200000 characters")
	}
	if body.Title != nil && utf8.RuneCountInString(*body.Title) > docTitleMaxLen {
		bad("title", "must be at most 500 characters")
	}
	format := docFormatDefault
	if body.Format != nil {
		if !docFormats[*body.Format] {
			bad("format", "must be markdown, text, html or json")
		}
		format = *body.Format
	}
	if body.ChangeSummary != nil && utf8.RuneCountInString(*body.ChangeSummary) > docChangeSummaryMax {
		bad("changeSummary", "must be at most 1000 characters")
	}
	var base string
	if body.BaseRevisionID != nil {
		base = strings.ToLower(strings.TrimSpace(*body.BaseRevisionID))
		if !isUUID(base) {
			bad("baseRevisionId", "must be a UUID")
		}
	}
	if err := validation(d); err != nil {
		x.writeErr(rw, err)
		return
	}
	c, key, err := x.caseAndKey(r)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	runIssue := x.runIssue(ctx, c.CompanyID)
	at := attributionOf(sdk.ActorFrom(ctx))
	var out *docWrite
	created := false
	err = x.inTx(ctx, func(tx pgx.Tx) error {
		doc, err := docByKey(ctx, tx, c.ID, key, true)
		if err != nil {
			return err
		}
		if doc == nil {
			if body.BaseRevisionID != nil {
				return conflict(msgDocNotYet)
			}
			created = true
		} else {
			if doc.Locked {
				return lockedErr()
			}
			latest, err := latestRevision(ctx, tx, doc)
			if err != nil {
				return err
			}
			if body.BaseRevisionID == nil {
				return staleErr(msgDocNeedsBase, latest)
			}
			if base != latest.ID {
				return staleErr(msgDocStale, latest)
			}
		}
		out, err = x.appendRevisionTx(ctx, tx, c, key, doc, &revisionInput{body: *body.Body, format: format, title: body.Title,
			changeSummary: body.ChangeSummary}, at, runIssue)
		return err
	})
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	sdk.WriteJSON(rw, status, out)
}

func (x *Cases) handleDocRevisions(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	c, key, err := x.caseAndKey(r)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	doc, err := docByKey(ctx, x.pool, c.ID, key, false)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	if doc == nil {
		x.writeErr(rw, notFound(msgDocNotFound))
		return
	}
	rows, err := x.pool.Query(ctx, `SELECT `+revCols+` FROM case_document_revisions WHERE document_id = $1 ORDER BY revision_number DESC`, doc.ID)
	if err != nil {
		x.writeErr(rw, fmt.Errorf("error listing revisions of document %s: %w", doc.ID, err))
		return
	}
	revs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*Revision, error) { return scanRev(row) })
	if err != nil {
		x.writeErr(rw, fmt.Errorf("error listing revisions of document %s: %w", doc.ID, err))
		return
	}
	var agents, issues []string
	for _, v := range revs {
		agents = append(agents, deref(v.CreatedByAgentID))
		issues = append(issues, deref(v.IssueID))
	}
	names := x.agentNames(ctx, agents)
	briefs := x.issueSummaries(ctx, c.CompanyID, issues)
	for _, v := range revs {
		if v.CreatedByAgentID != nil {
			if n := names[*v.CreatedByAgentID]; n != "" {
				v.ActorAgentName = ptr(n)
			}
		}
		if v.IssueID != nil {
			v.Issue = briefs[*v.IssueID]
		}
	}
	if revs == nil {
		revs = []*Revision{}
	}
	sdk.WriteJSON(rw, http.StatusOK, map[string]any{"key": key, "document": map[string]any{"id": doc.ID, "title": doc.Title,
		"format": doc.Format, "latestRevisionId": doc.LatestRevisionID, "latestRevisionNumber": doc.LatestRevisionNumber,
		"locked": doc.Locked}, "revisions": revisionsJSON(revs)})
}

// revisionsJSON renders revisions with actorAgentName and issue always present (null when none).
func revisionsJSON(revs []*Revision) []map[string]any {
	out := make([]map[string]any, 0, len(revs))
	for _, v := range revs {
		out = append(out, map[string]any{"id": v.ID, "companyId": v.CompanyID, "documentId": v.DocumentID,
			"revisionNumber": v.RevisionNumber, "title": v.Title, "format": v.Format, "body": v.Body, "changeSummary": v.ChangeSummary,
			"restoredFromRevisionId": v.RestoredFromID, "createdAt": v.CreatedAt, "createdByAgentId": v.CreatedByAgentID,
			"createdByUserId": v.CreatedByUserID, "createdByRunId": v.CreatedByRunID, "issueId": v.IssueID,
			"actorAgentName": v.ActorAgentName, "issue": v.Issue})
	}
	return out
}

func (x *Cases) handleDocRestore(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	c, key, err := x.caseAndKey(r)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	revID := strings.ToLower(r.PathValue("revisionId"))
	runIssue := x.runIssue(ctx, c.CompanyID)
	at := attributionOf(sdk.ActorFrom(ctx))
	var out *docWrite
	err = x.inTx(ctx, func(tx pgx.Tx) error {
		doc, err := docByKey(ctx, tx, c.ID, key, true)
		if err != nil {
			return err
		}
		if doc == nil {
			return notFound(msgDocNotFound)
		}
		if doc.Locked {
			return lockedErr()
		}
		if !isUUID(revID) {
			return notFound(msgRevisionNotFound)
		}
		old, err := scanRev(tx.QueryRow(ctx, `SELECT `+revCols+` FROM case_document_revisions WHERE id = $1 AND document_id = $2`, revID, doc.ID))
		if errors.Is(err, pgx.ErrNoRows) {
			return notFound(msgRevisionNotFound)
		}
		if err != nil {
			return fmt.Errorf("error reading revision %s: %w", revID, err)
		}
		if doc.LatestRevisionID != nil && *doc.LatestRevisionID == old.ID {
			return &sdk.Error{Status: http.StatusConflict, Message: msgRevisionIsLatest, Code: "revision_already_latest"}
		}
		summary := fmt.Sprintf("Restored revision %d", old.RevisionNumber)
		out, err = x.appendRevisionTx(ctx, tx, c, key, doc, &revisionInput{body: old.Body, format: old.Format, title: old.Title,
			changeSummary: &summary, restoredFrom: &old.ID}, at, runIssue)
		return err
	})
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, out)
}

func (x *Cases) handleDocDelete(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	c, key, err := x.caseAndKey(r)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	err = x.inTx(ctx, func(tx pgx.Tx) error {
		doc, err := docByKey(ctx, tx, c.ID, key, true)
		if err != nil || doc == nil {
			return err
		}
		if doc.Locked {
			return lockedErr()
		}
		if _, err := tx.Exec(ctx, `DELETE FROM case_documents WHERE id = $1`, doc.ID); err != nil {
			return fmt.Errorf("error deleting document %s: %w", doc.ID, err)
		}
		return nil
	})
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, map[string]bool{"ok": true})
}

func (x *Cases) handleDocLock(rw http.ResponseWriter, r *http.Request)   { x.setLock(rw, r, true) }
func (x *Cases) handleDocUnlock(rw http.ResponseWriter, r *http.Request) { x.setLock(rw, r, false) }

// setLock locks or unlocks a document; either is idempotent and answers the current state.
func (x *Cases) setLock(rw http.ResponseWriter, r *http.Request, lock bool) {
	ctx := r.Context()
	c, key, err := x.caseAndKey(r)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	at := attributionOf(sdk.ActorFrom(ctx))
	var doc *Document
	if lock {
		doc, err = scanDoc(x.pool.QueryRow(ctx, `UPDATE case_documents SET locked_at = COALESCE(locked_at, clock_timestamp()),
			locked_by_agent_id = CASE WHEN locked_at IS NULL THEN $3 ELSE locked_by_agent_id END,
			locked_by_user_id = CASE WHEN locked_at IS NULL THEN $4 ELSE locked_by_user_id END
			WHERE case_id = $1 AND key = $2 RETURNING `+docCols, c.ID, key, at.AgentID, at.UserID))
	} else {
		doc, err = scanDoc(x.pool.QueryRow(ctx, `UPDATE case_documents SET locked_at = NULL, locked_by_agent_id = NULL,
			locked_by_user_id = NULL WHERE case_id = $1 AND key = $2 RETURNING `+docCols, c.ID, key))
	}
	if errors.Is(err, pgx.ErrNoRows) {
		x.writeErr(rw, notFound(msgDocNotFound))
		return
	}
	if err != nil {
		x.writeErr(rw, fmt.Errorf("error changing the lock of document %s: %w", key, err))
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, &LockState{DocumentID: doc.ID, Key: key, Locked: doc.Locked, LockedAt: doc.LockedAt,
		LockedByAgentID: doc.LockedByAgentID, LockedByUserID: doc.LockedByUserID})
}
