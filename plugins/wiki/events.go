package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/keelhq/keel/sdk"
)

// activityEvent is the part of a work activity entry (the event payload) the wiki reads.
type activityEvent struct {
	EntityType string `json:"entityType"`
	EntityID   string `json:"entityId"`
	Details    struct {
		CommentID      string `json:"commentId"`
		Key            string `json:"key"`
		DocumentID     string `json:"documentId"`
		RevisionID     string `json:"revisionId"`
		RevisionNumber int    `json:"revisionNumber"`
	} `json:"details"`
}

// issueDetail is the part of a work issue event ingestion reads.
type issueDetail struct {
	ID          string  `json:"id"`
	Identifier  string  `json:"identifier"`
	Title       string  `json:"title"`
	Description *string `json:"description"`
	Status      string  `json:"status"`
	Priority    string  `json:"priority"`
	ProjectID   *string `json:"projectId"`
	OriginKind  string  `json:"originKind"`
}

// comment is the part of a work comment the wiki reads.
type comment struct {
	ID            string  `json:"id"`
	IssueID       string  `json:"issueId"`
	Body          string  `json:"body"`
	AuthorAgentID *string `json:"authorAgentId"`
	AuthorType    string  `json:"authorType"`
}

// documentText is the part of work.documents.get's answer the wiki reads.
type documentText struct {
	ID             string  `json:"id"`
	Title          *string `json:"title"`
	Body           string  `json:"body"`
	Clipped        bool    `json:"clipped"`
	RevisionNumber int     `json:"revisionNumber"`
}

// OnEvent completes query sessions from the maintainer's answer and, when event ingestion
// is on, captures issue, comment and document events as sources of the default space.
// Only the work owner's own events count; wiki operation issues are never ingested.
func (w *Wiki) OnEvent(ctx context.Context, ev *sdk.Event) error {
	if w.db == nil || !ev.From("work") || !sdk.IsUUID(ev.CompanyID) {
		return nil
	}
	var a activityEvent
	if err := json.Unmarshal(ev.Payload, &a); err != nil || a.EntityType != "issue" || !sdk.IsUUID(a.EntityID) {
		return nil
	}
	issueID := strings.ToLower(a.EntityID)
	if ev.Type == "issue.comment.created" && sdk.IsUUID(a.Details.CommentID) {
		handled, err := w.answerQuery(ctx, ev.CompanyID, issueID, a.Details.CommentID)
		if err != nil || handled {
			return err
		}
	}
	if !w.anyIngestion(ctx, ev.CompanyID) {
		return nil
	}
	return w.ingestEvent(ctx, ev, issueID, &a)
}

// answerQuery completes the query session whose hidden issue got a comment from its
// maintainer agent: the comment is the answer, streamed on the session's channel.
func (w *Wiki) answerQuery(ctx context.Context, companyID, issueID, commentID string) (bool, error) {
	var opID, status string
	err := w.db.QueryRowContext(ctx, `SELECT id, status FROM wiki_query_sessions WHERE company_id = $1 AND hidden_issue_id = $2`,
		companyID, issueID).Scan(&opID, &status)
	if errors.Is(err, sql.ErrNoRows) {
		var isOp bool
		if err := w.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM wiki_operations WHERE company_id = $1 AND hidden_issue_id = $2)`,
			companyID, issueID).Scan(&isOp); err != nil {
			return false, fmt.Errorf("error reading operations: %w", err)
		}
		return isOp, nil // comments on other operation issues are not ingested either
	}
	if err != nil {
		return false, fmt.Errorf("error reading query sessions: %w", err)
	}
	if status != "active" {
		return true, nil
	}
	var c comment
	if err := w.host.Call(ctx, "work.comments.get", sdk.SystemActor(), companyID, map[string]string{"issueId": issueID, "commentId": commentID}, &c); err != nil {
		return true, fmt.Errorf("error reading the answer comment: %w", err)
	}
	if c.AuthorType != "agent" {
		return true, nil // the board's own comments are not the answer
	}
	answer := strings.TrimSpace(c.Body)
	channel := queryChannel(opID)
	_ = w.host.EmitStream(ctx, channel, companyID, map[string]any{"type": "agent.event", "eventType": "chunk", "stream": "stdout",
		"message": truncate(answer, 6000), "agentId": c.AuthorAgentID})
	res, err := w.db.ExecContext(ctx, `UPDATE wiki_query_sessions SET status = 'completed', answer = $2, updated_at = now()
		WHERE id = $1 AND status = 'active'`, opID, answer)
	if err != nil {
		return true, fmt.Errorf("error completing the query session: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return true, nil // a redelivery
	}
	if err := w.markOperation(ctx, opID, opDone, map[string]any{"answerLength": len(answer)}, nil, "", ""); err != nil {
		return true, err
	}
	_ = w.host.EmitStream(ctx, channel, companyID, map[string]any{"type": "query.done", "operationId": opID, "querySessionId": opID,
		"answer": truncate(answer, 6000)})
	// The maintainer usually closes its task itself; while its run holds the issue the
	// work owner may refuse this move, which is fine.
	if err := w.setIssue(ctx, companyID, issueID, "done", ""); err != nil {
		sdk.LoggerFrom(ctx).Info("query issue left to its run", "issue", issueID, "error", err)
	}
	return true, nil
}

// ingestEvent captures one issue, comment or document event as a source of the default
// space, clipped to the per-source cap and de-duplicated by its source key.
func (w *Wiki) ingestEvent(ctx context.Context, ev *sdk.Event, issueID string, a *activityEvent) error {
	var iss issueDetail
	if err := w.host.Call(ctx, "work.issues.get", sdk.SystemActor(), ev.CompanyID, map[string]string{"id": issueID}, &iss); err != nil {
		var e *sdk.Error
		if errors.As(err, &e) && e.Status == 404 {
			return nil // missing_issue
		}
		return fmt.Errorf("error reading issue %s: %w", issueID, err)
	}
	if strings.HasPrefix(iss.OriginKind, "plugin:"+pluginKey+":operation") {
		return nil // plugin_operation
	}
	kind := map[string]string{"issue.created": "issue", "issue.updated": "issue", "issue.comment.created": "comment",
		"issue.document.created": "document", "issue.document.updated": "document"}[ev.Type]
	if kind == "" {
		return nil // unsupported_event
	}
	targets, err := w.ingestTargets(ctx, ev.CompanyID, kind, iss.ProjectID)
	if err != nil || len(targets) == 0 {
		return err // source_disabled
	}
	maxChars := 0
	for _, t := range targets {
		maxChars = max(maxChars, t.max)
	}
	var key, title, sourceType, body string
	switch ev.Type {
	case "issue.created", "issue.updated":
		key = ev.Type + ":" + issueID + ":" + ev.ID
		sourceType, title = "issue", iss.Identifier+" "+iss.Title
		desc := ""
		if iss.Description != nil {
			desc = *iss.Description
		}
		body = fmt.Sprintf("# %s: %s\n\n- Event: %s\n- Status: %s\n- Priority: %s\n\n%s\n", iss.Identifier, iss.Title, ev.Type, iss.Status, iss.Priority, desc)
	case "issue.comment.created":
		if !sdk.IsUUID(a.Details.CommentID) {
			return nil
		}
		var c comment
		if err := w.host.Call(ctx, "work.comments.get", sdk.SystemActor(), ev.CompanyID, map[string]string{"issueId": issueID, "commentId": a.Details.CommentID}, &c); err != nil {
			var e *sdk.Error
			if errors.As(err, &e) && e.Status == 404 {
				return nil // missing_comment
			}
			return fmt.Errorf("error reading comment %s: %w", a.Details.CommentID, err)
		}
		key = "comment:" + c.ID
		sourceType, title = "issue_comment", "Comment on "+iss.Identifier+" "+iss.Title
		body = fmt.Sprintf("# Comment on %s: %s\n\n- Author: %s\n\n%s\n", iss.Identifier, iss.Title, c.AuthorType, c.Body)
	case "issue.document.created", "issue.document.updated":
		rev := a.Details.RevisionID
		if rev == "" {
			rev = fmt.Sprint(a.Details.RevisionNumber)
		}
		if rev == "" || rev == "0" {
			rev = ev.ID
		}
		key = "document:" + issueID + ":" + a.Details.Key + ":revision:" + rev
		// The work owner reads the revision's text, clipped to the per-source cap, so a large
		// document never crosses the wire whole.
		in := map[string]any{"issueId": issueID, "key": a.Details.Key, "maxCharacters": maxChars}
		if sdk.IsUUID(a.Details.RevisionID) {
			in["revisionId"] = a.Details.RevisionID
		}
		var d documentText
		if err := w.host.Call(ctx, "work.documents.get", sdk.SystemActor(), ev.CompanyID, in, &d); err != nil {
			var e *sdk.Error
			if errors.As(err, &e) && e.Status == 404 {
				return nil // missing_document
			}
			return fmt.Errorf("error reading document %s of issue %s: %w", a.Details.Key, issueID, err)
		}
		docTitle := a.Details.Key
		if d.Title != nil && *d.Title != "" {
			docTitle = *d.Title
		}
		sourceType, title = "issue_document", "Document "+docTitle+" of "+iss.Identifier+" "+iss.Title
		text := d.Body
		if d.Clipped {
			text += fmt.Sprintf("\n\n[Clipped at %d characters for this source.]", maxChars)
		}
		body = fmt.Sprintf("# Document %s of %s: %s\n\n- Key: %s\n- Revision: %d\n- Document: %s\n\n%s\n",
			docTitle, iss.Identifier, iss.Title, a.Details.Key, d.RevisionNumber, d.ID, text)
	default:
		return nil // unsupported_event
	}
	root, err := w.rootPath(ctx, ev.CompanyID, defaultWikiID, nil)
	if err != nil {
		return nil // no folder yet: nothing to capture into
	}
	meta, _ := json.Marshal(map[string]any{"eventId": ev.ID, "eventType": ev.Type, "issueId": issueID, "issueIdentifier": iss.Identifier,
		"projectId": iss.ProjectID})
	for _, t := range targets {
		text := body
		if len([]rune(text)) > t.max {
			text = string([]rune(text)[:t.max]) + fmt.Sprintf("\n\n[Clipped at %d characters for this source.]\n", t.max)
		}
		res, err := w.captureSource(ctx, t.space, spaceFolder(root, t.space), &SourceCapture{SourceType: sourceType, Title: title,
			Contents: text, RawPath: "raw/events/" + slugify(key) + ".md", Metadata: meta, sourceKey: key})
		if err != nil {
			return err
		}
		if res.Duplicate {
			continue // a redelivered event was recorded the first time
		}
		if err := w.recordCursor(ctx, t.space, ev, &iss, sourceType, key, res.SourceID); err != nil {
			return err
		}
	}
	return nil
}

// recordCursor notes an ingested event on its distillation cursor (the project's when the
// issue has one, else the company's): one more pending event, the newest observation and
// what it was, for the maintainer's cursor-window routine.
func (w *Wiki) recordCursor(ctx context.Context, sp *Space, ev *sdk.Event, iss *issueDetail, sourceKind, sourceKey, sourceID string) error {
	scope, scopeKey := "company", sp.CompanyID
	if iss.ProjectID != nil && sdk.IsUUID(*iss.ProjectID) {
		scope, scopeKey = "project", *iss.ProjectID
	}
	meta, _ := json.Marshal(map[string]any{"lastEventId": ev.ID, "lastEventType": ev.Type, "lastSourceKind": sourceKind,
		"lastSourceKey": sourceKey, "lastSourceId": sourceID, "lastIssueId": iss.ID, "lastIssueIdentifier": iss.Identifier})
	_, err := w.db.ExecContext(ctx, `INSERT INTO distillation_cursors (id, company_id, wiki_id, space_id, source_scope, scope_key,
			project_id, last_observed_at, pending_event_count, metadata)
		VALUES ($1, $2, $3, $4, $5, $6, $7, now(), 1, $8)
		ON CONFLICT (space_id, source_scope, scope_key, source_kind) DO UPDATE SET
			last_observed_at = greatest(distillation_cursors.last_observed_at, excluded.last_observed_at),
			pending_event_count = distillation_cursors.pending_event_count + 1,
			metadata = distillation_cursors.metadata || excluded.metadata, updated_at = now()`,
		uuid.NewString(), sp.CompanyID, sp.WikiID, sp.ID, scope, scopeKey, iss.ProjectID, meta)
	if err != nil {
		return fmt.Errorf("error recording the distillation cursor: %w", err)
	}
	return nil
}
