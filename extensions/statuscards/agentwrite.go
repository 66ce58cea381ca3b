package statuscards

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelhq/keel/sdk"
)

// The designated agent's two writes. Both are accepted only from the agent the card's
// in-flight generation was assigned to, authenticated with the credentials of a run whose
// context issue is that generation task (its run JWT, or its API key with the run-id header).

// QueryWriteBody is the body of PUT /api/status-cards/{id}/query.
type QueryWriteBody struct {
	// Queries are 1-10 company-search query objects (q, scope, limit, status, …).
	Queries []json.RawMessage `json:"queries"`
	// Title is 1-300 characters, ignored when the card's title is pinned.
	Title string `json:"title"`
	// ChangeSummary is 1-2000 characters.
	ChangeSummary string `json:"changeSummary"`
	// GenerationIssueID is the card's compile task.
	GenerationIssueID string `json:"generationIssueId"`
}

// SummaryWriteBody is the body of PUT /api/status-cards/{id}/summary (REFERENCE.md 5).
type SummaryWriteBody struct {
	// Markdown is the summary, 1-200000 characters.
	Markdown string `json:"markdown"`
	// Title is at most 300 characters, ignored when the card's title is pinned.
	Title *string `json:"title,omitempty"`
	// ChangeSummary is 1-2000 characters.
	ChangeSummary string `json:"changeSummary"`
	// GenerationIssueID is the card's generation task.
	GenerationIssueID string `json:"generationIssueId"`
	// Model names the model that wrote the summary.
	Model *string `json:"model,omitempty"`
}

func init() {
	addRoutes(
		route{Method: "PUT", Path: "/api/status-cards/{id}/query", Body: QueryWriteBody{}, Response: new(Card),
			Errors: []int{http.StatusNotFound, http.StatusConflict},
			Summary: "The designated agent stores a card's compiled queries from its generation task (increments queryVersion, " +
				"records a compile entry; the card stays compiling until its first summary)",
			Handle: (*StatusCards).handleQueryWrite},
		route{Method: "PUT", Path: "/api/status-cards/{id}/summary", Body: SummaryWriteBody{}, Response: new(Card),
			Errors: []int{http.StatusNotFound, http.StatusConflict},
			Summary: "The designated agent writes a card's summary from its generation task (a new summary revision; the card " +
				"becomes active and its fingerprint moves to the update's snapshot)",
			Handle: (*StatusCards).handleSummaryWrite},
	)
}

// checkWriter checks that the request comes from the designated agent of the card's
// in-flight generation, in a run of its generation task, and returns the entry.
func (x *StatusCards) checkWriter(ctx context.Context, c *Card, generationIssueID string) (*Entry, string, error) {
	a := sdk.ActorFrom(ctx)
	if !isAgent(a) {
		return nil, "", sdk.Forbidden(msgDesignatedAgentOnly)
	}
	if c.generatingEntryID == nil || c.GeneratingIssueID == nil || !strings.EqualFold(*c.GeneratingIssueID, generationIssueID) {
		return nil, "", sdk.Conflict(msgNotGenerationTask)
	}
	e, err := entryGet(ctx, x.pool, *c.generatingEntryID)
	if err != nil {
		return nil, "", err
	}
	if e == nil || deref(e.agentID) != a.AgentId || !sdk.IsUUID(a.RunId) {
		return nil, "", sdk.Forbidden(msgDesignatedAgentOnly)
	}
	var run struct {
		Found   bool   `json:"found"`
		AgentID string `json:"agentId"`
		IssueID string `json:"issueId"`
	}
	if err := x.host.Call(ctx, "agents.runStatus", sdk.SystemActor(), c.CompanyID, map[string]string{"runId": a.RunId}, &run); err != nil {
		return nil, "", fmt.Errorf("error reading run %s: %w", a.RunId, err)
	}
	if !run.Found || run.AgentID != a.AgentId || !strings.EqualFold(run.IssueID, generationIssueID) {
		return nil, "", sdk.Forbidden(msgDesignatedAgentOnly)
	}
	return e, a.RunId, nil
}

func (x *StatusCards) handleQueryWrite(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var body QueryWriteBody
	if err := sdk.DecodeJSON(r, &body); err != nil {
		x.writeErr(rw, err)
		return
	}
	out, err := x.writeQuery(ctx, r.PathValue("id"), &body)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, out)
}

func (x *StatusCards) writeQuery(ctx context.Context, id string, body *QueryWriteBody) (*Card, error) {
	var d []sdk.ValidationDetail
	if len(body.Queries) < 1 || len(body.Queries) > queriesMax {
		d = append(d, sdk.ValidationDetail{Path: "queries", Message: fmt.Sprintf("must hold 1 to %d queries", queriesMax)})
	}
	title := cleanText(&d, "title", body.Title, 1, titleMax)
	summary := cleanText(&d, "changeSummary", body.ChangeSummary, 1, changeSummaryMax)
	if !sdk.IsUUID(strings.ToLower(body.GenerationIssueID)) {
		d = append(d, sdk.ValidationDetail{Path: "generationIssueId", Message: "must be a UUID"})
	}
	if len(d) > 0 {
		return nil, sdk.ValidationError(d...)
	}
	c, err := x.readCard(ctx, id)
	if err != nil {
		return nil, err
	}
	e, runID, err := x.checkWriter(ctx, c, body.GenerationIssueID)
	if err != nil {
		return nil, err
	}
	// Each query runs once through the work owner's search, which validates it and answers
	// its normalized form: that form is what the card stores.
	normalized := make([]json.RawMessage, 0, len(body.Queries))
	for i, q := range body.Queries {
		var ans searchAnswer
		if err := x.host.Call(ctx, "work.search", sdk.SystemActor(), c.CompanyID, q, &ans); err != nil {
			var se *sdk.Error
			if errors.As(err, &se) && se.Status == http.StatusBadRequest {
				d = append(d, sdk.ValidationDetail{Path: fmt.Sprintf("queries[%d]", i), Message: queryProblem(se)})
				continue
			}
			return nil, err
		}
		normalized = append(normalized, ans.Query)
	}
	if len(d) > 0 {
		return nil, sdk.ValidationError(d...)
	}
	queriesJSON, err := json.Marshal(normalized)
	if err != nil {
		return nil, fmt.Errorf("error encoding compiled queries: %w", err)
	}
	now := x.now()
	a := sdk.ActorFrom(ctx)
	// The snapshot the first summary covers is taken with the new queries.
	probe := *c
	probe.Queries = queriesJSON
	fp, err := x.watch(ctx, &probe)
	if err != nil {
		return nil, err
	}
	fpJSON, err := json.Marshal(fp)
	if err != nil {
		return nil, fmt.Errorf("error encoding fingerprint: %w", err)
	}
	err = pgx.BeginFunc(ctx, x.pool, func(tx pgx.Tx) error {
		cur, err := cardForUpdate(ctx, tx, c.ID)
		if err != nil {
			return err
		}
		if cur == nil || deref(cur.generatingEntryID) != e.ID {
			return sdk.Conflict(msgNotGenerationTask)
		}
		var version int
		if err := tx.QueryRow(ctx, `UPDATE status_cards SET queries = $2, query_version = query_version + 1, query_compiled_at = $3,
			query_compiled_by_agent_id = $4, title = CASE WHEN title_pinned THEN title ELSE $5 END, last_update_run_kind = NULL,
			updated_at = $3 WHERE id = $1 RETURNING query_version`, c.ID, queriesJSON, now, a.AgentId, title).Scan(&version); err != nil {
			return fmt.Errorf("error storing the queries of status card %s: %w", c.ID, err)
		}
		if e.Kind == kindCompile {
			// The compile is done; the same task goes on to write the first summary.
			if _, err := tx.Exec(ctx, `UPDATE status_card_updates SET status = 'ok', finished_at = $2, change_summary = $3, run_id = $4,
				query_version = $5 WHERE id = $1`, e.ID, now, summary, runID, version); err != nil {
				return fmt.Errorf("error recording the compile of status card %s: %w", c.ID, err)
			}
			next := newID()
			if _, err := tx.Exec(ctx, `INSERT INTO status_card_updates (id, company_id, card_id, kind, trigger, status, agent_id,
				generation_issue_id, query_version, fingerprint, started_at) VALUES ($1, $2, $3, 'full', $4, 'running', $5, $6, $7, $8, $9)`,
				next, c.CompanyID, c.ID, e.Trigger, a.AgentId, e.GenerationIssueID, version, fpJSON, now.Add(time.Microsecond)); err != nil {
				return fmt.Errorf("error recording the first update of status card %s: %w", c.ID, err)
			}
			if _, err := tx.Exec(ctx, `UPDATE status_cards SET generating_entry_id = $2 WHERE id = $1`, c.ID, next); err != nil {
				return fmt.Errorf("error recording the first update of status card %s: %w", c.ID, err)
			}
			return nil
		}
		// A compile written during an update: its own entry; the update goes on with the new queries.
		if _, err := tx.Exec(ctx, `INSERT INTO status_card_updates (id, company_id, card_id, kind, trigger, status, agent_id,
			generation_issue_id, run_id, query_version, change_summary, started_at, finished_at)
			VALUES ($1, $2, $3, 'compile', $4, 'ok', $5, $6, $7, $8, $9, $10, $10)`,
			newID(), c.CompanyID, c.ID, e.Trigger, a.AgentId, e.GenerationIssueID, runID, version, summary, now); err != nil {
			return fmt.Errorf("error recording the compile of status card %s: %w", c.ID, err)
		}
		_, err = tx.Exec(ctx, `UPDATE status_card_updates SET fingerprint = $2, query_version = $3 WHERE id = $1`, e.ID, fpJSON, version)
		return err
	})
	if err != nil {
		return nil, err
	}
	x.activity(ctx, c.CompanyID, "status_card.query_compiled", c.ID, map[string]any{"queries": len(normalized), "runId": runID})
	out, err := cardGet(ctx, x.pool, c.ID)
	if err != nil {
		return nil, err
	}
	x.hydrate(ctx, now, out)
	return out, nil
}

// queryProblem describes why the work owner refused a query.
func queryProblem(e *sdk.Error) string {
	if ds, ok := e.Details.([]any); ok {
		var parts []string
		for _, d := range ds {
			if m, ok := d.(map[string]any); ok {
				parts = append(parts, fmt.Sprintf("%v %v", m["path"], m["message"]))
			}
		}
		if len(parts) > 0 {
			return "is not a valid search query: " + strings.Join(parts, "; ")
		}
	}
	return "is not a valid search query: " + e.Message
}

func (x *StatusCards) handleSummaryWrite(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var body SummaryWriteBody
	if err := sdk.DecodeJSON(r, &body); err != nil {
		x.writeErr(rw, err)
		return
	}
	out, err := x.writeSummary(ctx, r.PathValue("id"), &body)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, out)
}

func (x *StatusCards) writeSummary(ctx context.Context, id string, body *SummaryWriteBody) (*Card, error) {
	var d []sdk.ValidationDetail
	markdown := body.Markdown
	if n := len([]rune(markdown)); strings.TrimSpace(markdown) == "" || n > summaryMax {
		d = append(d, sdk.ValidationDetail{Path: "markdown", Message: fmt.Sprintf("must be 1 to %d characters", summaryMax)})
	} else if strings.ContainsRune(markdown, 0) {
		d = append(d, sdk.ValidationDetail{Path: "markdown", Message: "must be valid UTF-8 text without NUL characters"})
	}
	var title *string
	if body.Title != nil {
		title = ptr(cleanText(&d, "title", *body.Title, 1, titleMax))
	}
	summary := cleanText(&d, "changeSummary", body.ChangeSummary, 1, changeSummaryMax)
	var model *string
	if body.Model != nil && strings.TrimSpace(*body.Model) != "" {
		model = ptr(cleanText(&d, "model", *body.Model, 1, modelMax))
	}
	if !sdk.IsUUID(strings.ToLower(body.GenerationIssueID)) {
		d = append(d, sdk.ValidationDetail{Path: "generationIssueId", Message: "must be a UUID"})
	}
	if len(d) > 0 {
		return nil, sdk.ValidationError(d...)
	}
	c, err := x.readCard(ctx, id)
	if err != nil {
		return nil, err
	}
	e, runID, err := x.checkWriter(ctx, c, body.GenerationIssueID)
	if err != nil {
		return nil, err
	}
	if c.QueryVersion == 0 {
		return nil, sdk.Conflict(msgNoQueriesYet)
	}
	fp := e.fingerprint
	if fp == nil {
		if fp, err = x.watch(ctx, c); err != nil {
			return nil, err
		}
	}
	mentioned, err := x.mentionedIssues(ctx, c.CompanyID, markdown)
	if err != nil {
		return nil, err
	}
	mentionedIDs := make([]string, 0, len(mentioned))
	for _, row := range mentioned {
		mentionedIDs = append(mentionedIDs, row.ID)
		if _, ok := fp[row.ID]; !ok {
			ent := row.FPEntry
			ent.Identifier = row.Identifier
			fp[row.ID] = &ent
		}
	}
	fpJSON, err := json.Marshal(fp)
	if err != nil {
		return nil, fmt.Errorf("error encoding fingerprint: %w", err)
	}
	kind := e.Kind
	if kind == kindCompile {
		kind = kindFull
	}
	now := x.now()
	err = pgx.BeginFunc(ctx, x.pool, func(tx pgx.Tx) error {
		cur, err := cardForUpdate(ctx, tx, c.ID)
		if err != nil {
			return err
		}
		if cur == nil || deref(cur.generatingEntryID) != e.ID {
			return sdk.Conflict(msgNotGenerationTask)
		}
		revTitle := cur.Title
		if title != nil && !cur.TitlePinned {
			revTitle = title
		}
		if _, err := tx.Exec(ctx, `INSERT INTO status_card_revisions (id, company_id, card_id, revision_number, title, body,
			change_summary, update_id, created_at)
			VALUES ($1, $2, $3, (SELECT coalesce(max(revision_number), 0) + 1 FROM status_card_revisions WHERE card_id = $3),
			$4, $5, $6, $7, $8)`, newID(), c.CompanyID, c.ID, revTitle, markdown, summary, e.ID, now); err != nil {
			return fmt.Errorf("error recording a summary revision of status card %s: %w", c.ID, err)
		}
		if _, err := tx.Exec(ctx, `UPDATE status_card_updates SET status = 'ok', finished_at = $2, change_summary = $3, run_id = $4,
			model = $5, kind = $6 WHERE id = $1`, e.ID, now, summary, runID, model, kind); err != nil {
			return fmt.Errorf("error recording the update of status card %s: %w", c.ID, err)
		}
		_, err = tx.Exec(ctx, `UPDATE status_cards SET summary_body = $2, document_id = coalesce(document_id, $3), title = $4,
			last_update_run_kind = $5, last_generated_at = $6, last_model = $7, generating_entry_id = NULL, generating_issue_id = NULL,
			state = 'active', failure_reason = NULL, fingerprint = $8, fingerprint_at = $9, mentioned_issue_ids = $10,
			pending_change_count = 0, updated_at = $6 WHERE id = $1`,
			c.ID, markdown, newID(), revTitle, kind, now, model, fpJSON, e.StartedAt, mentionedIDs)
		if err != nil {
			return fmt.Errorf("error storing the summary of status card %s: %w", c.ID, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// The summary completes the generation task.
	if err := x.setIssueStatus(ctx, c.CompanyID, body.GenerationIssueID, "done"); err != nil {
		x.log.Warn("error completing a generation task", "card", c.ID, "error", err)
	}
	x.activity(ctx, c.CompanyID, "status_card.summary_written", c.ID, map[string]any{"kind": kind, "runId": runID, "model": model})
	out, err := cardGet(ctx, x.pool, c.ID)
	if err != nil {
		return nil, err
	}
	x.hydrate(ctx, now, out)
	return out, nil
}
