package cases

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/keelhq/keel/sdk"
)

// commentMaxLen bounds an annotation comment.
const commentMaxLen = 20000

func init() {
	const p = "/api/cases/{id}/documents/{key}/annotations"
	addRoutes(
		route{Method: http.MethodGet, Path: p, Response: new([]*Thread), Summary: "List a case document's annotation threads (status open|resolved|all, default open; includeComments)",
			Handle: (*Cases).handleThreadList},
		route{Method: http.MethodPost, Path: p, Status: http.StatusCreated, Response: new(Thread),
			Summary: "Open an annotation thread on a text range of the current revision with its first comment (422 when the selector matches nothing)",
			Body:    AnnotationCreateBody{}, Handle: (*Cases).handleThreadCreate},
		route{Method: http.MethodGet, Path: p + "/{threadId}", Response: new(Thread), Summary: "Get an annotation thread with its comments",
			Handle: (*Cases).handleThreadGet},
		route{Method: http.MethodPatch, Path: p + "/{threadId}", Response: new(Thread), Summary: "Resolve or reopen an annotation thread",
			Body: ThreadPatchBody{}, Handle: (*Cases).handleThreadPatch},
		route{Method: http.MethodPost, Path: p + "/{threadId}/comments", Status: http.StatusCreated, Response: new(Comment), Summary: "Add a comment to an annotation thread",
			Body: CommentBody{}, Handle: (*Cases).handleCommentCreate},
	)
}

// SelectorInput selects a text range: the quoted text (quote, or exact as in a W3C
// TextQuoteSelector) with optional prefix and suffix context, and/or character offsets
// (startOffset/endOffset, or start/end as in a TextPositionSelector).
type SelectorInput struct {
	Type        string  `json:"type,omitempty"`
	Quote       *string `json:"quote,omitempty"`
	Exact       *string `json:"exact,omitempty"`
	Prefix      string  `json:"prefix,omitempty"`
	Suffix      string  `json:"suffix,omitempty"`
	StartOffset *int    `json:"startOffset,omitempty"`
	EndOffset   *int    `json:"endOffset,omitempty"`
	Start       *int    `json:"start,omitempty"`
	End         *int    `json:"end,omitempty"`
}

// AnnotationCreateBody is the body of POST …/annotations: the passage (selector, anchor, or
// the selector's fields at the top level), the revision it was read from (optional; it
// must be the latest) and the first comment.
type AnnotationCreateBody struct {
	SelectorInput
	// Selector and Anchor (either name) hold the passage.
	Selector *SelectorInput `json:"selector,omitempty"`
	Anchor   *SelectorInput `json:"anchor,omitempty"`
	// BaseRevisionID (or revisionId) is the revision the passage was read from.
	BaseRevisionID *string `json:"baseRevisionId,omitempty" jsonschema:"format=uuid"`
	RevisionID     *string `json:"revisionId,omitempty" jsonschema:"format=uuid"`
	// Body (or comment) is the first comment, 1-20000 characters.
	Body    *string `json:"body,omitempty" jsonschema:"maxLength=20000"`
	Comment *string `json:"comment,omitempty" jsonschema:"maxLength=20000"`
}

// CommentBody is the body of POST …/comments.
type CommentBody struct {
	Body *string `json:"body" jsonschema:"required,minLength=1,maxLength=20000"`
}

// ThreadPatchBody is the body of PATCH …/annotations/{threadId}.
type ThreadPatchBody struct {
	Status string `json:"status" jsonschema:"enum=open,enum=resolved"`
}

// Thread is an annotation thread and its API shape.
type Thread struct {
	ID                string     `json:"id"`
	CompanyID         string     `json:"companyId"`
	CaseID            string     `json:"caseId"`
	DocumentID        string     `json:"documentId"`
	DocumentKey       string     `json:"documentKey"`
	RevisionID        string     `json:"revisionId"`
	AnchorState       string     `json:"anchorState"`
	Anchor            Anchor     `json:"anchor"`
	Status            string     `json:"status"`
	CreatedByAgentID  *string    `json:"createdByAgentId"`
	CreatedByUserID   *string    `json:"createdByUserId"`
	CreatedByRunID    *string    `json:"createdByRunId"`
	ResolvedAt        *time.Time `json:"resolvedAt"`
	ResolvedByAgentID *string    `json:"resolvedByAgentId"`
	ResolvedByUserID  *string    `json:"resolvedByUserId"`
	CreatedAt         time.Time  `json:"createdAt"`
	UpdatedAt         time.Time  `json:"updatedAt"`
	CommentCount      int        `json:"commentCount"`
	Comments          []*Comment `json:"comments,omitempty"`
}

// threadCols are the columns scanThread reads, in order (alias t; the comment count last).
const threadCols = `t.id, t.company_id, t.case_id, t.document_id, d.key, t.revision_id, t.anchor_state, t.quote, t.prefix,
	t.suffix, t.start_offset, t.end_offset, t.status, t.created_by_agent_id, t.created_by_user_id, t.created_by_run_id,
	t.resolved_at, t.resolved_by_agent_id, t.resolved_by_user_id, t.created_at, t.updated_at,
	(SELECT count(*) FROM case_annotation_comments cc WHERE cc.thread_id = t.id)`

// threadFrom is the FROM clause threadCols reads.
const threadFrom = ` FROM case_annotation_threads t JOIN case_documents d ON d.id = t.document_id`

// scanThread reads one thread row.
func scanThread(row pgx.Row) (*Thread, error) {
	t := new(Thread)
	if err := row.Scan(&t.ID, &t.CompanyID, &t.CaseID, &t.DocumentID, &t.DocumentKey, &t.RevisionID, &t.AnchorState,
		&t.Anchor.Quote, &t.Anchor.Prefix, &t.Anchor.Suffix, &t.Anchor.Start, &t.Anchor.End, &t.Status, &t.CreatedByAgentID,
		&t.CreatedByUserID, &t.CreatedByRunID, &t.ResolvedAt, &t.ResolvedByAgentID, &t.ResolvedByUserID, &t.CreatedAt,
		&t.UpdatedAt, &t.CommentCount); err != nil {
		return nil, err
	}
	return t, nil
}

// Comment is an annotation comment.
type Comment struct {
	ID               string    `json:"id"`
	CompanyID        string    `json:"companyId"`
	ThreadID         string    `json:"threadId"`
	Body             string    `json:"body"`
	CreatedByAgentID *string   `json:"createdByAgentId"`
	CreatedByUserID  *string   `json:"createdByUserId"`
	CreatedByRunID   *string   `json:"createdByRunId"`
	CreatedAt        time.Time `json:"createdAt"`
	ActorAgentName   *string   `json:"actorAgentName"`
}

// commentCols are the columns scanComment reads, in order.
const commentCols = `id, company_id, thread_id, body, created_by_agent_id, created_by_user_id, created_by_run_id, created_at`

// scanComment reads one comment row.
func scanComment(row pgx.Row) (*Comment, error) {
	c := new(Comment)
	if err := row.Scan(&c.ID, &c.CompanyID, &c.ThreadID, &c.Body, &c.CreatedByAgentID, &c.CreatedByUserID, &c.CreatedByRunID,
		&c.CreatedAt); err != nil {
		return nil, err
	}
	return c, nil
}

// reanchorTx moves every open thread of a document to a new revision: a thread whose
// quote is still there takes its new offsets and context; one whose text is gone is
// orphaned, keeping its last anchor (and is tried again on later revisions).
func reanchorTx(ctx context.Context, tx pgx.Tx, d *Document, rev *Revision) error {
	rows, err := tx.Query(ctx, `SELECT id, quote, prefix, suffix, start_offset, end_offset FROM case_annotation_threads
		WHERE document_id = $1 AND status = 'open' ORDER BY id FOR UPDATE`, d.ID)
	if err != nil {
		return fmt.Errorf("error reading threads of document %s: %w", d.ID, err)
	}
	type item struct {
		id string
		a  Anchor
	}
	items, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (item, error) {
		var it item
		err := row.Scan(&it.id, &it.a.Quote, &it.a.Prefix, &it.a.Suffix, &it.a.Start, &it.a.End)
		return it, err
	})
	if err != nil {
		return fmt.Errorf("error reading threads of document %s: %w", d.ID, err)
	}
	for _, it := range items {
		if a, ok := locate(rev.Body, it.a); ok {
			_, err = tx.Exec(ctx, `UPDATE case_annotation_threads SET revision_id = $2, anchor_state = 'anchored', quote = $3,
				prefix = $4, suffix = $5, start_offset = $6, end_offset = $7, updated_at = clock_timestamp() WHERE id = $1`,
				it.id, rev.ID, a.Quote, a.Prefix, a.Suffix, a.Start, a.End)
		} else {
			_, err = tx.Exec(ctx, `UPDATE case_annotation_threads SET anchor_state = 'orphaned', updated_at = clock_timestamp()
				WHERE id = $1`, it.id)
		}
		if err != nil {
			return fmt.Errorf("error re-anchoring thread %s: %w", it.id, err)
		}
	}
	return nil
}

// docForRoute resolves the case and the existing document of an annotation route.
func (x *Cases) docForRoute(r *http.Request) (*Case, *Document, error) {
	c, key, err := x.caseAndKey(r)
	if err != nil {
		return nil, nil, err
	}
	d, err := docByKey(r.Context(), x.pool, c.ID, key, false)
	if err != nil {
		return nil, nil, err
	}
	if d == nil {
		return nil, nil, notFound(msgDocNotFound)
	}
	return c, d, nil
}

// threadByID reads a thread of a document (404 "Annotation thread not found" otherwise).
func threadByID(ctx context.Context, q querier, d *Document, id string) (*Thread, error) {
	id = strings.ToLower(id)
	if !isUUID(id) {
		return nil, notFound(msgThreadNotFound)
	}
	t, err := scanThread(q.QueryRow(ctx, `SELECT `+threadCols+threadFrom+` WHERE t.id = $1 AND t.document_id = $2`, id, d.ID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound(msgThreadNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("error reading thread %s: %w", id, err)
	}
	return t, nil
}

// withComments loads the comments of threads, oldest first, with author agent names.
func (x *Cases) withComments(ctx context.Context, threads []*Thread) error {
	if len(threads) == 0 {
		return nil
	}
	ids := make([]string, 0, len(threads))
	byID := map[string]*Thread{}
	for _, t := range threads {
		ids = append(ids, t.ID)
		byID[t.ID] = t
		t.Comments = []*Comment{}
	}
	rows, err := x.pool.Query(ctx, `SELECT `+commentCols+` FROM case_annotation_comments WHERE thread_id = ANY($1::uuid[])
		ORDER BY created_at, id`, ids)
	if err != nil {
		return fmt.Errorf("error reading comments: %w", err)
	}
	comments, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*Comment, error) { return scanComment(row) })
	if err != nil {
		return fmt.Errorf("error reading comments: %w", err)
	}
	var agents []string
	for _, c := range comments {
		agents = append(agents, deref(c.CreatedByAgentID))
	}
	names := x.agentNames(ctx, agents)
	for _, c := range comments {
		if n := names[deref(c.CreatedByAgentID)]; n != "" {
			c.ActorAgentName = ptr(n)
		}
		byID[c.ThreadID].Comments = append(byID[c.ThreadID].Comments, c)
	}
	return nil
}

func (x *Cases) handleThreadList(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	status := r.URL.Query().Get("status")
	switch status {
	case "":
		status = "open"
	case "open", "resolved", "all":
	default:
		x.writeErr(rw, invalid("status", "must be open, resolved or all"))
		return
	}
	include, err := boolParam(r, "includeComments")
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	_, d, err := x.docForRoute(r)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	rows, err := x.pool.Query(ctx, `SELECT `+threadCols+threadFrom+` WHERE t.document_id = $1 AND ($2 = 'all' OR t.status = $2)
		ORDER BY t.start_offset, t.created_at, t.id`, d.ID, status)
	if err != nil {
		x.writeErr(rw, fmt.Errorf("error listing threads: %w", err))
		return
	}
	threads, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*Thread, error) { return scanThread(row) })
	if err != nil {
		x.writeErr(rw, fmt.Errorf("error listing threads: %w", err))
		return
	}
	if include {
		if err := x.withComments(ctx, threads); err != nil {
			x.writeErr(rw, err)
			return
		}
	}
	if threads == nil {
		threads = []*Thread{}
	}
	sdk.WriteJSON(rw, http.StatusOK, threads)
}

func (x *Cases) handleThreadGet(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	_, d, err := x.docForRoute(r)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	t, err := threadByID(ctx, x.pool, d, r.PathValue("threadId"))
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	if err := x.withComments(ctx, []*Thread{t}); err != nil {
		x.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, t)
}

// commentText validates a comment body.
func commentText(p *string, path string) (string, error) {
	if p == nil || strings.TrimSpace(*p) == "" {
		return "", invalid(path, "is required")
	}
	if utf8.RuneCountInString(*p) > commentMaxLen {
		return "", invalid(path, "must be at most 20000 characters")
	}
	return *p, nil
}

// selectorOf merges the passage of a create body: selector, else anchor, else the
// top-level fields.
func selectorOf(b *AnnotationCreateBody) (quote *string, prefix, suffix string, start, end *int) {
	s := &b.SelectorInput
	if b.Selector != nil {
		s = b.Selector
	} else if b.Anchor != nil {
		s = b.Anchor
	}
	quote = s.Quote
	if quote == nil {
		quote = s.Exact
	}
	start, end = s.StartOffset, s.EndOffset
	if start == nil {
		start = s.Start
	}
	if end == nil {
		end = s.End
	}
	return quote, s.Prefix, s.Suffix, start, end
}

func (x *Cases) handleThreadCreate(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var body AnnotationCreateBody
	if err := sdk.DecodeJSON(r, &body); err != nil {
		x.writeErr(rw, err)
		return
	}
	first := body.Body
	if first == nil {
		first = body.Comment
	}
	text, err := commentText(first, "body")
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	quote, prefix, suffix, start, end := selectorOf(&body)
	if (quote == nil || *quote == "") && (start == nil || end == nil) {
		x.writeErr(rw, invalid("selector", "needs a quote or startOffset and endOffset"))
		return
	}
	base := body.BaseRevisionID
	if base == nil {
		base = body.RevisionID
	}
	if base != nil && !isUUID(strings.ToLower(*base)) {
		x.writeErr(rw, invalid("baseRevisionId", "must be a UUID"))
		return
	}
	c, d, err := x.docForRoute(r)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	at := attributionOf(sdk.ActorFrom(ctx))
	var out *Thread
	err = x.inTx(ctx, func(tx pgx.Tx) error {
		// Pinned to the current revision: the document row is locked against a new one.
		doc, err := docByKey(ctx, tx, c.ID, d.Key, true)
		if err != nil {
			return err
		}
		if doc == nil {
			return notFound(msgDocNotFound)
		}
		latest, err := latestRevision(ctx, tx, doc)
		if err != nil {
			return err
		}
		if base != nil && strings.ToLower(*base) != latest.ID {
			return staleErr(msgAnnotationStale, latest)
		}
		a, ok := anchorFor(latest.Body, quote, prefix, suffix, start, end)
		if !ok {
			return unprocessable(msgSelectorUnmatched)
		}
		id := newID()
		if _, err := tx.Exec(ctx, `INSERT INTO case_annotation_threads (id, company_id, case_id, document_id, revision_id, quote,
			prefix, suffix, start_offset, end_offset, created_by_agent_id, created_by_user_id, created_by_run_id)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
			id, c.CompanyID, c.ID, doc.ID, latest.ID, a.Quote, a.Prefix, a.Suffix, a.Start, a.End, at.AgentID, at.UserID, at.RunID); err != nil {
			return fmt.Errorf("error creating thread: %w", err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO case_annotation_comments (id, company_id, thread_id, body, created_by_agent_id,
			created_by_user_id, created_by_run_id) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
			newID(), c.CompanyID, id, text, at.AgentID, at.UserID, at.RunID); err != nil {
			return fmt.Errorf("error adding comment: %w", err)
		}
		out, err = threadByID(ctx, tx, doc, id)
		return err
	})
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	if err := x.withComments(ctx, []*Thread{out}); err != nil {
		x.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusCreated, out)
}

// anchorFor resolves a selector against a body: offsets that hold the quote (or offsets
// alone) select exactly; otherwise the quote is searched with its context, the offsets as
// a hint.
func anchorFor(body string, quote *string, prefix, suffix string, start, end *int) (Anchor, bool) {
	runes := []rune(body)
	if start != nil && end != nil && *start >= 0 && *start < *end && *end <= len(runes) {
		if quote == nil || *quote == "" || string(runes[*start:*end]) == *quote {
			return anchorAt(runes, *start, *end), true
		}
	}
	if quote == nil || *quote == "" {
		return Anchor{}, false
	}
	hint := 0
	if start != nil {
		hint = *start
	}
	return locate(body, Anchor{Quote: *quote, Prefix: prefix, Suffix: suffix, Start: hint})
}

func (x *Cases) handleCommentCreate(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var body CommentBody
	if err := sdk.DecodeJSON(r, &body); err != nil {
		x.writeErr(rw, err)
		return
	}
	text, err := commentText(body.Body, "body")
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	c, d, err := x.docForRoute(r)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	t, err := threadByID(ctx, x.pool, d, r.PathValue("threadId"))
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	at := attributionOf(sdk.ActorFrom(ctx))
	cm, err := scanComment(x.pool.QueryRow(ctx, `INSERT INTO case_annotation_comments (id, company_id, thread_id, body,
		created_by_agent_id, created_by_user_id, created_by_run_id) VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING `+commentCols,
		newID(), c.CompanyID, t.ID, text, at.AgentID, at.UserID, at.RunID))
	if err != nil {
		x.writeErr(rw, fmt.Errorf("error adding comment to thread %s: %w", t.ID, err))
		return
	}
	if cm.CreatedByAgentID != nil {
		if n := x.agentNames(ctx, []string{*cm.CreatedByAgentID})[*cm.CreatedByAgentID]; n != "" {
			cm.ActorAgentName = ptr(n)
		}
	}
	sdk.WriteJSON(rw, http.StatusCreated, cm)
}

func (x *Cases) handleThreadPatch(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var body ThreadPatchBody
	if err := sdk.DecodeJSON(r, &body); err != nil {
		x.writeErr(rw, err)
		return
	}
	if body.Status != "open" && body.Status != "resolved" {
		x.writeErr(rw, invalid("status", "must be open or resolved"))
		return
	}
	_, d, err := x.docForRoute(r)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	t, err := threadByID(ctx, x.pool, d, r.PathValue("threadId"))
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	at := attributionOf(sdk.ActorFrom(ctx))
	if body.Status == "resolved" {
		_, err = x.pool.Exec(ctx, `UPDATE case_annotation_threads SET status = 'resolved', resolved_at = COALESCE(resolved_at, clock_timestamp()),
			resolved_by_agent_id = CASE WHEN status = 'open' THEN $2 ELSE resolved_by_agent_id END,
			resolved_by_user_id = CASE WHEN status = 'open' THEN $3 ELSE resolved_by_user_id END, updated_at = clock_timestamp()
			WHERE id = $1`, t.ID, at.AgentID, at.UserID)
	} else {
		// A reopened thread is re-anchored on the current revision when it lags behind.
		err = x.inTx(ctx, func(tx pgx.Tx) error {
			doc, err := docByKey(ctx, tx, d.CaseID, d.Key, true)
			if err != nil || doc == nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE case_annotation_threads SET status = 'open', resolved_at = NULL, resolved_by_agent_id = NULL,
				resolved_by_user_id = NULL, updated_at = clock_timestamp() WHERE id = $1`, t.ID); err != nil {
				return err
			}
			if doc.LatestRevisionID != nil && *doc.LatestRevisionID != t.RevisionID {
				latest, err := latestRevision(ctx, tx, doc)
				if err != nil {
					return err
				}
				return reanchorTx(ctx, tx, doc, latest)
			}
			return nil
		})
	}
	if err != nil {
		x.writeErr(rw, fmt.Errorf("error changing thread %s: %w", t.ID, err))
		return
	}
	if t, err = threadByID(ctx, x.pool, d, t.ID); err != nil {
		x.writeErr(rw, err)
		return
	}
	if err := x.withComments(ctx, []*Thread{t}); err != nil {
		x.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, t)
}
