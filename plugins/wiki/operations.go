package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/keelhq/keel/sdk"
)

// Operation types and statuses.
const (
	opQuery      = "query"
	opFileAsPage = "file-as-page"

	opQueued  = "queued"
	opRunning = "running"
	opDone    = "done"
	opFailed  = "failed"
	opBlocked = "blocked"
)

// operationTypes are the operation types an operations list may filter on.
var operationTypes = map[string]bool{"ingest": true, "query": true, "lint": true, "file-as-page": true, "index": true, "distill": true, "backfill": true}

// Operation is one wiki operation as the API shows it.
type Operation struct {
	ID                    string          `json:"id"`
	OperationType         string          `json:"operationType"`
	Status                string          `json:"status"`
	HiddenIssueID         *string         `json:"hiddenIssueId"`
	HiddenIssueIdentifier *string         `json:"hiddenIssueIdentifier"`
	HiddenIssueTitle      *string         `json:"hiddenIssueTitle"`
	HiddenIssueStatus     *string         `json:"hiddenIssueStatus"`
	ProjectID             *string         `json:"projectId"`
	RunIDs                json.RawMessage `json:"runIds"`
	CostCents             int             `json:"costCents"`
	Warnings              json.RawMessage `json:"warnings"`
	AffectedPages         json.RawMessage `json:"affectedPages"`
	Metadata              json.RawMessage `json:"metadata"`
	CreatedAt             time.Time       `json:"createdAt"`
	UpdatedAt             time.Time       `json:"updatedAt"`
}

// issue is the part of a work issue the wiki reads.
type issue struct {
	ID         string `json:"id"`
	Identifier string `json:"identifier"`
	Title      string `json:"title"`
	Status     string `json:"status"`
}

// opIssue is an operation's hidden issue as routes answer it.
type opIssue struct {
	ID         string `json:"id"`
	Identifier string `json:"identifier"`
	Title      string `json:"title"`
	Status     string `json:"status"`
}

// createdOp is a new operation with its issue and the maintainer's state.
type createdOp struct {
	ID          string
	Issue       *issue
	AgentID     string
	AgentStatus string
	ProjectID   string
}

// createOperation makes the maintainer agent and the project when missing, creates the
// operation's hidden issue through the work owner (assigned to the maintainer, in the
// wiki's project, origin plugin:<plugin>:operation:<type>) and records the operation.
func (w *Wiki) createOperation(ctx context.Context, sp *Space, opType, title, description, priority string, metadata map[string]any) (*createdOp, error) {
	// A reconcile makes what is missing and reads each resource's current state (the
	// maintainer's status decides whether the operation can run).
	l, err := w.host.ReconcileManaged(ctx, sp.CompanyID)
	if err != nil {
		return nil, fmt.Errorf("error resolving the wiki maintainer: %w", err)
	}
	op := &createdOp{ID: uuid.NewString()}
	agent, project := l.Find(sdk.ManagedAgentKind, maintainerKey), l.Find(sdk.ManagedProjectKind, projectKey)
	if agent != nil && agent.ResourceID != nil {
		op.AgentID, op.AgentStatus = *agent.ResourceID, agent.OwnerStatus
	}
	if project != nil && project.ResourceID != nil {
		op.ProjectID = *project.ResourceID
	}
	originID := "wiki:" + sp.WikiID + ":operation:" + op.ID
	billing := "plugin-llm-wiki:" + sp.WikiID
	if sp.Slug != defaultSpace {
		originID = "wiki:" + sp.WikiID + ":space:" + sp.Slug + ":operation:" + op.ID
		billing += ":" + sp.Slug
		title += " [space: " + sp.DisplayName + " / " + sp.Slug + "]"
		description += fmt.Sprintf("\n\nThis operation belongs to the LLM Wiki space %q. Pass wikiId %q and spaceSlug %q on every LLM Wiki tool call; "+
			"do not read or write other spaces.", sp.DisplayName, sp.WikiID, sp.Slug)
	}
	in := map[string]any{"title": truncate(title, 500), "description": description, "status": "todo", "priority": priority,
		"billingCode": billing, "originKind": "plugin:" + pluginKey + ":operation:" + opType, "originId": originID, "hidden": true}
	if op.ProjectID != "" {
		in["projectId"] = op.ProjectID
	}
	if op.AgentID != "" && op.AgentStatus != "terminated" && op.AgentStatus != "pending_approval" {
		in["assigneeAgentId"] = op.AgentID
	}
	var iss issue
	if err := w.host.Call(ctx, "work.issues.create", sdk.SystemActor(), sp.CompanyID, in, &iss); err != nil {
		return nil, fmt.Errorf("error creating the operation issue: %w", err)
	}
	op.Issue = &iss
	meta, _ := json.Marshal(metadata)
	if metadata == nil {
		meta = []byte(`{}`)
	}
	if _, err := w.db.ExecContext(ctx, `INSERT INTO wiki_operations (id, company_id, wiki_id, space_id, operation_type, status,
		hidden_issue_id, hidden_issue_identifier, hidden_issue_title, project_id, metadata) VALUES ($1, $2, $3, $4, $5, 'queued', $6, $7, $8, $9, $10)`,
		op.ID, sp.CompanyID, sp.WikiID, sp.ID, opType, iss.ID, iss.Identifier, iss.Title, nullable(op.ProjectID), string(meta)); err != nil {
		return nil, fmt.Errorf("error recording the operation: %w", err)
	}
	return op, nil
}

// markOperation sets an operation's status, merging metadata and adding affected pages,
// warnings and a run.
func (w *Wiki) markOperation(ctx context.Context, opID, status string, metadata map[string]any, affected []string, warning, runID string) error {
	meta, _ := json.Marshal(metadata)
	if metadata == nil {
		meta = []byte(`{}`)
	}
	aff, _ := json.Marshal(affected)
	if affected == nil {
		aff = []byte(`[]`)
	}
	warn, run := "[]", "[]"
	if warning != "" {
		b, _ := json.Marshal([]string{warning})
		warn = string(b)
	}
	if runID != "" {
		b, _ := json.Marshal([]string{runID})
		run = string(b)
	}
	_, err := w.db.ExecContext(ctx, `UPDATE wiki_operations SET status = $2, metadata = metadata || $3::jsonb,
		affected_pages = affected_pages || $4::jsonb, warnings = warnings || $5::jsonb, run_ids = run_ids || $6::jsonb, updated_at = now()
		WHERE id = $1`, opID, status, string(meta), string(aff), warn, run)
	if err != nil {
		return fmt.Errorf("error updating operation %s: %w", opID, err)
	}
	return nil
}

// setIssue moves an operation's issue and comments on it, through the work owner.
func (w *Wiki) setIssue(ctx context.Context, companyID, issueID, status, comment string) error {
	in := map[string]any{"id": issueID, "status": status}
	if status == "blocked" {
		// Entering blocked needs a reason the work owner understands: the board must act.
		in["unblockDescriptor"] = map[string]any{"owner": "board", "action": "Resume the wiki maintainer agent, then ask again"}
	}
	if comment != "" {
		in["comment"] = comment
	}
	if err := w.host.Call(ctx, "work.issues.update", sdk.SystemActor(), companyID, in, nil); err != nil {
		return fmt.Errorf("error updating operation issue %s: %w", issueID, err)
	}
	return nil
}

func (w *Wiki) listOperations(r *http.Request) (int, any, error) {
	ctx := r.Context()
	q := r.URL.Query()
	sp, err := w.routeSpace(r, q.Get("wikiId"), q.Get("spaceSlug"), true)
	if err != nil {
		return 0, nil, err
	}
	limit, err := queryLimit(r, 50, 500)
	if err != nil {
		return 0, nil, err
	}
	opType, status := q.Get("operationType"), q.Get("status")
	if opType == "all" {
		opType = ""
	}
	if status == "all" {
		status = ""
	}
	if opType != "" && !operationTypes[opType] {
		return 0, nil, sdk.Invalid("operationType", "must be all, ingest, query, lint, file-as-page, index, distill or backfill")
	}
	rows, err := w.db.QueryContext(ctx, `SELECT id, operation_type, status, hidden_issue_id, hidden_issue_identifier, hidden_issue_title,
		project_id, run_ids, cost_cents, warnings, affected_pages, metadata, created_at, updated_at FROM wiki_operations
		WHERE space_id = $1 AND ($2 = '' OR operation_type = $2) AND ($3 = '' OR status = $3)
		ORDER BY created_at DESC, id DESC LIMIT $4`, sp.ID, opType, status, limit)
	if err != nil {
		return 0, nil, fmt.Errorf("error listing operations: %w", err)
	}
	defer rows.Close()
	out := []*Operation{}
	for rows.Next() {
		var o Operation
		var runs, warns, aff, meta []byte
		if err := rows.Scan(&o.ID, &o.OperationType, &o.Status, &o.HiddenIssueID, &o.HiddenIssueIdentifier, &o.HiddenIssueTitle,
			&o.ProjectID, &runs, &o.CostCents, &warns, &aff, &meta, &o.CreatedAt, &o.UpdatedAt); err != nil {
			return 0, nil, fmt.Errorf("error listing operations: %w", err)
		}
		o.RunIDs, o.Warnings, o.AffectedPages, o.Metadata = runs, warns, aff, meta
		out = append(out, &o)
	}
	if err := rows.Err(); err != nil {
		return 0, nil, fmt.Errorf("error listing operations: %w", err)
	}
	// The issue's current status comes from its owner.
	for _, o := range out {
		if o.HiddenIssueID == nil {
			continue
		}
		var iss issue
		if err := w.host.Call(ctx, "work.issues.get", sdk.SystemActor(), sp.CompanyID, map[string]string{"id": *o.HiddenIssueID}, &iss); err == nil {
			o.HiddenIssueStatus, o.HiddenIssueTitle, o.HiddenIssueIdentifier = &iss.Status, &iss.Title, &iss.Identifier
		}
	}
	return http.StatusOK, map[string]any{"operations": out}, nil
}

// queryChannel is the stream channel of a query session.
func queryChannel(opID string) string { return "llm-wiki:query:" + opID }

func (w *Wiki) startQuery(r *http.Request) (int, any, error) {
	ctx := r.Context()
	var body struct {
		scopeBody
		Question string `json:"question"`
		Title    string `json:"title"`
	}
	if err := decode(r, &body); err != nil {
		return 0, nil, err
	}
	body.Question = strings.TrimSpace(body.Question)
	if body.Question == "" {
		return 0, nil, sdk.Invalid("question", "is required")
	}
	if len(body.Question) > 20000 {
		return 0, nil, sdk.Invalid("question", "must be at most 20000 characters")
	}
	sp, err := w.routeSpace(r, body.WikiID, body.SpaceSlug, false)
	if err != nil {
		return 0, nil, err
	}
	title := body.Title
	if title == "" {
		title = "Wiki query: " + truncate(strings.ReplaceAll(body.Question, "\n", " "), 120)
	}
	desc := "Answer this question from the LLM Wiki (wikiId " + sp.WikiID + ", spaceSlug " + sp.Slug + "):\n\n> " +
		strings.ReplaceAll(body.Question, "\n", "\n> ") + "\n\n" + "Search with wiki_search, read the pages you cite with wiki_read_page, " +
		"and post your answer, with citations to wiki paths, as a comment on this issue; then mark the issue done."
	op, err := w.createOperation(ctx, sp, opQuery, title, desc, "medium", map[string]any{"question": body.Question})
	if err != nil {
		return 0, nil, err
	}
	if op.AgentID == "" || op.AgentStatus == "paused" || op.AgentStatus == "terminated" || op.AgentStatus == "pending_approval" {
		state := op.AgentStatus
		if op.AgentID == "" {
			state = "missing"
		}
		msg := fmt.Sprintf("The wiki maintainer agent is %s: resume it (or reset it) to ask the wiki", state)
		if err := w.markOperation(ctx, op.ID, opBlocked, nil, nil, msg, ""); err != nil {
			return 0, nil, err
		}
		if err := w.setIssue(ctx, sp.CompanyID, op.Issue.ID, "blocked", "Wiki query blocked: "+msg+"."); err != nil {
			return 0, nil, err
		}
		return 0, nil, &sdk.Error{Status: http.StatusConflict, Code: "maintainer_unavailable", Message: msg,
			Details: map[string]any{"operationId": op.ID, "issueId": op.Issue.ID}}
	}
	if _, err := w.db.ExecContext(ctx, `INSERT INTO wiki_query_sessions (id, company_id, wiki_id, space_id, hidden_issue_id, question)
		VALUES ($1, $2, $3, $4, $5, $6)`, op.ID, sp.CompanyID, sp.WikiID, sp.ID, op.Issue.ID, body.Question); err != nil {
		return 0, nil, fmt.Errorf("error recording the query session: %w", err)
	}
	if err := w.markOperation(ctx, op.ID, opRunning, nil, nil, "", ""); err != nil {
		return 0, nil, err
	}
	channel := queryChannel(op.ID)
	if err := w.host.EmitStream(ctx, channel, sp.CompanyID, map[string]any{"type": "query.started", "operationId": op.ID,
		"querySessionId": op.ID, "issueId": op.Issue.ID, "agentId": op.AgentID, "question": body.Question}); err != nil {
		sdk.LoggerFrom(ctx).Warn("could not emit query.started", "error", err)
	}
	w.followQuery(sp.CompanyID, op.ID, op.Issue.ID)
	return http.StatusCreated, map[string]any{"status": "running", "wikiId": sp.WikiID, "spaceSlug": sp.Slug, "operationId": op.ID,
		"querySessionId": op.ID, "issue": op.Issue, "agentId": op.AgentID, "channel": channel}, nil
}

func (w *Wiki) fileAsPage(r *http.Request) (int, any, error) {
	ctx := r.Context()
	var body struct {
		scopeBody
		QuerySessionID string `json:"querySessionId"`
		Question       string `json:"question"`
		Answer         string `json:"answer"`
		Path           string `json:"path"`
		Title          string `json:"title"`
		Contents       string `json:"contents"`
		ExpectedHash   string `json:"expectedHash"`
	}
	if err := decode(r, &body); err != nil {
		return 0, nil, err
	}
	if err := checkPagePath(body.Path); err != nil {
		return 0, nil, err
	}
	if err := refuseProtected(body.Path); err != nil {
		return 0, nil, err
	}
	sp, f, err := w.routeFolder(r, body.WikiID, body.SpaceSlug)
	if err != nil {
		return 0, nil, err
	}
	if body.QuerySessionID != "" {
		if !sdk.IsUUID(body.QuerySessionID) {
			return 0, nil, sdk.Invalid("querySessionId", "must be a UUID")
		}
		var q, a sql.NullString
		err := w.db.QueryRowContext(ctx, `SELECT question, answer FROM wiki_query_sessions WHERE id = $1 AND space_id = $2`,
			body.QuerySessionID, sp.ID).Scan(&q, &a)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, nil, sdk.NotFound("LLM Wiki query session not found")
		}
		if err != nil {
			return 0, nil, fmt.Errorf("error reading the query session: %w", err)
		}
		if body.Question == "" {
			body.Question = q.String
		}
		if body.Answer == "" {
			body.Answer = a.String
		}
	}
	if body.Title == "" {
		body.Title = strings.TrimSuffix(body.Path[strings.LastIndex(body.Path, "/")+1:], ".md")
	}
	contents := body.Contents
	if contents == "" {
		if strings.TrimSpace(body.Answer) == "" {
			return 0, nil, sdk.Invalid("answer", "is required when contents is not given")
		}
		contents = "# " + body.Title + "\n\n> Filed from query: " + body.Question + "\n\n" + body.Answer + "\n"
	}
	op, err := w.createOperation(ctx, sp, opFileAsPage, "File query answer as "+body.Path,
		"File a query answer as the wiki page `"+body.Path+"`.", "low", map[string]any{"path": body.Path, "querySessionId": nullable(body.QuerySessionID)})
	if err != nil {
		return 0, nil, err
	}
	var refs []map[string]any
	if body.QuerySessionID != "" {
		refs = []map[string]any{{"querySessionId": body.QuerySessionID}}
	}
	res, err := w.writePage(ctx, &pageWrite{Space: sp, Folder: f, Path: body.Path, Contents: []byte(contents), ExpectedHash: body.ExpectedHash,
		Summary: "Filed query answer", Writer: writerBoard, Actor: sdk.ActorFrom(ctx), OperationID: op.ID, SourceRefs: refs})
	if err != nil {
		if merr := w.markOperation(ctx, op.ID, opFailed, nil, nil, err.Error(), ""); merr != nil {
			sdk.LoggerFrom(ctx).Warn("could not mark the operation failed", "operation", op.ID, "error", merr)
		}
		if ierr := w.setIssue(ctx, sp.CompanyID, op.Issue.ID, "cancelled", "Filing failed: "+err.Error()); ierr != nil {
			sdk.LoggerFrom(ctx).Warn("could not cancel the operation issue", "operation", op.ID, "error", ierr)
		}
		return 0, nil, err
	}
	if err := w.markOperation(ctx, op.ID, opDone, nil, []string{body.Path}, "", ""); err != nil {
		return 0, nil, err
	}
	if err := w.setIssue(ctx, sp.CompanyID, op.Issue.ID, "done", "Filed query answer as `"+body.Path+"`."); err != nil {
		return 0, nil, err
	}
	op.Issue.Status = "done"
	if body.QuerySessionID != "" {
		filed, _ := json.Marshal([]map[string]any{{"path": body.Path, "operationId": op.ID, "revisionId": res.RevisionID, "filedAt": w.now()}})
		if _, err := w.db.ExecContext(ctx, `UPDATE wiki_query_sessions SET filed_outputs = filed_outputs || $2::jsonb, updated_at = now() WHERE id = $1`,
			body.QuerySessionID, string(filed)); err != nil {
			return 0, nil, fmt.Errorf("error recording the filed page: %w", err)
		}
	}
	return http.StatusCreated, map[string]any{"status": "ok", "wikiId": sp.WikiID, "spaceSlug": sp.Slug, "path": body.Path, "operationId": op.ID,
		"issue": op.Issue, "page": map[string]any{"path": res.Path, "title": res.Title, "pageType": res.PageType, "revisionId": res.RevisionID, "hash": res.Hash}}, nil
}
