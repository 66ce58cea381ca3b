package statuscards

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/keelhq/keel/sdk"
)

// CardCreateBody is the body of POST /api/companies/{companyId}/status-cards.
type CardCreateBody struct {
	// InterestPrompt is the card's standing request (trimmed, 1-20000; agents 4000).
	InterestPrompt string `json:"interestPrompt"`
	// Title is 1-300 characters; the compiler sets it unless pinned.
	Title *string `json:"title,omitempty"`
	// TitlePinned keeps the title across recompiles (default false).
	TitlePinned *bool `json:"titlePinned,omitempty"`
	// AgentID overrides the built-in summarizer with an agent of the company.
	AgentID *string `json:"agentId,omitempty"`
	// RefreshPolicy defaults to mode manual.
	RefreshPolicy *RefreshPolicyBody `json:"refreshPolicy,omitempty"`
}

// CardPatchBody is the body of PATCH /api/status-cards/{id}; at least one field.
type CardPatchBody struct {
	InterestPrompt sdk.PatchField[string] `json:"interestPrompt,omitempty"`
	// Title is 1-300 characters or null.
	Title       sdk.PatchField[string] `json:"title,omitempty"`
	TitlePinned sdk.PatchField[bool]   `json:"titlePinned,omitempty"`
	// AgentID is an agent of the company, or null for the built-in summarizer.
	AgentID sdk.PatchField[string] `json:"agentId,omitempty"`
	// RefreshPolicy replaces the stored policy and reschedules.
	RefreshPolicy sdk.PatchField[RefreshPolicyBody] `json:"refreshPolicy,omitempty"`
	// Archived archives (cancelling generation) or restores the card.
	Archived sdk.PatchField[bool] `json:"archived,omitempty"`
}

// RefreshBody is the body of POST /api/status-cards/{id}/refresh.
type RefreshBody struct {
	// Full forces a full rebuild (default false).
	Full bool `json:"full,omitempty"`
}

// listQuery documents the list's query parameters.
type listQuery struct {
	Archived string `query:"archived" doc:"true lists archived cards, false (default) live ones"`
}

// GenerationAnswer is the answer of recompile and refresh.
type GenerationAnswer struct {
	Card              *Card      `json:"card"`
	GeneratingIssue   *issueView `json:"generatingIssue"`
	AlreadyGenerating bool       `json:"alreadyGenerating"`
	Enqueued          *bool      `json:"enqueued,omitempty"`
	Kind              string     `json:"kind,omitempty"`
	Changes           []Change   `json:"changes,omitempty"`
}

// DryRunAnswer is the answer of the dry-run.
type DryRunAnswer struct {
	CardID          string        `json:"cardId"`
	QueryVersion    int           `json:"queryVersion"`
	Queries         []queryResult `json:"queries"`
	MentionedIssues []fpRow       `json:"mentionedIssues"`
}

func init() {
	addRoutes(
		route{Method: "GET", Path: "/api/companies/{companyId}/status-cards", CompanyFromPath: true, Query: listQuery{},
			Response: []*Card{}, Summary: "List a company's status cards, hydrated, most recently updated first (archived=true for archived ones)",
			Handle: (*StatusCards).handleList},
		route{Method: "POST", Path: "/api/companies/{companyId}/status-cards", Body: CardCreateBody{}, Status: http.StatusCreated,
			Response: new(Card), Errors: []int{http.StatusUnprocessableEntity},
			Summary: "Create a status card: queues its compile task for the summarizer and answers the card in state compiling (needs tasks:assign)",
			Handle:  (*StatusCards).handleCreate},
		route{Method: "GET", Path: "/api/status-cards/{id}", Response: new(Card), Errors: []int{http.StatusNotFound},
			Summary: "Read a status card with its summary, today's spend and watched issue count", Handle: (*StatusCards).handleGet},
		route{Method: "PATCH", Path: "/api/status-cards/{id}", Body: CardPatchBody{}, Response: new(Card),
			Errors:  []int{http.StatusNotFound, http.StatusUnprocessableEntity},
			Summary: "Update a status card's prompt, title, summarizer, refresh policy or archive flag (needs tasks:assign)",
			Handle:  (*StatusCards).handlePatch},
		route{Method: "DELETE", Path: "/api/status-cards/{id}", Status: http.StatusNoContent, Errors: []int{http.StatusNotFound},
			Summary: "Delete a status card and its update history (needs tasks:assign)", Handle: (*StatusCards).handleDelete},
		route{Method: "GET", Path: "/api/status-cards/{id}/updates", Response: []*Entry{}, Errors: []int{http.StatusNotFound},
			Summary: "A status card's update ledger, newest first", Handle: (*StatusCards).handleUpdates},
		route{Method: "GET", Path: "/api/status-cards/{id}/summary-revisions", Response: []*Revision{}, Errors: []int{http.StatusNotFound},
			Summary: "A status card's past summaries, newest first", Handle: (*StatusCards).handleRevisions},
		route{Method: "POST", Path: "/api/status-cards/{id}/recompile", Status: http.StatusAccepted, Response: new(GenerationAnswer),
			Errors:  []int{http.StatusNotFound, http.StatusUnprocessableEntity},
			Summary: "Queue a recompile of a status card's queries (200 when joining the compile already running for this prompt)",
			Handle:  (*StatusCards).handleRecompile},
		route{Method: "POST", Path: "/api/status-cards/{id}/refresh", Body: RefreshBody{}, Status: http.StatusAccepted,
			Response: new(GenerationAnswer), Errors: []int{http.StatusNotFound, http.StatusConflict, http.StatusUnprocessableEntity},
			Summary: "Refresh a status card's summary now, bypassing debounce, caps and active hours (full=true rebuilds)",
			Handle:  (*StatusCards).handleRefresh},
		route{Method: "GET", Path: "/api/status-cards/{id}/dry-run", Response: new(DryRunAnswer), Errors: []int{http.StatusNotFound},
			Summary: "Run a status card's compiled queries without writing or spending tokens (needs company_scope:read)",
			Handle:  (*StatusCards).handleDryRun},
	)
}

// cleanText trims a text field and checks its length; "" and ok=false when it is bad.
func cleanText(d *[]sdk.ValidationDetail, path, s string, min, max int) string {
	s = strings.TrimSpace(s)
	n := utf8.RuneCountInString(s)
	switch {
	case !utf8.ValidString(s) || strings.ContainsRune(s, 0):
		*d = append(*d, sdk.ValidationDetail{Path: path, Message: "must be valid UTF-8 text without NUL characters"})
	case n < min || n > max:
		*d = append(*d, sdk.ValidationDetail{Path: path, Message: fmt.Sprintf("must be %d to %d characters", min, max)})
	}
	return s
}

func (x *StatusCards) handleList(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := r.PathValue("companyId")
	archived := false
	switch strings.ToLower(strings.TrimSpace(r.URL.Query().Get("archived"))) {
	case "", "false", "0":
	case "true", "1":
		archived = true
	default:
		x.writeErr(rw, sdk.Invalid("archived", "must be true or false"))
		return
	}
	rows, err := x.pool.Query(ctx, `SELECT `+cardCols+` FROM status_cards WHERE company_id = $1 AND (archived_at IS NOT NULL) = $2
		ORDER BY updated_at DESC, id DESC`, companyID, archived)
	if err != nil {
		x.writeErr(rw, fmt.Errorf("error listing status cards: %w", err))
		return
	}
	cards, err := scanCards(rows)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	x.hydrate(ctx, x.now(), cards...)
	sdk.WriteJSON(rw, http.StatusOK, cards)
}

func (x *StatusCards) handleGet(rw http.ResponseWriter, r *http.Request) {
	c, err := x.readCard(r.Context(), r.PathValue("id"))
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	x.hydrate(r.Context(), x.now(), c)
	sdk.WriteJSON(rw, http.StatusOK, c)
}

// authorize checks who may create a card in a company: company access (agents their own
// company), tasks:assign, and the agent caps.
func (x *StatusCards) authorizeCreate(ctx context.Context, companyID string) error {
	a := sdk.ActorFrom(ctx)
	if !sdk.IsUUID(companyID) {
		return sdk.NotFound("Company not found")
	}
	if isAgent(a) && a.CompanyId != companyID {
		return sdk.Forbidden(msgAgentWrongCompany)
	}
	if err := sdk.RequireCompanyAccess(ctx, companyID); err != nil {
		return err
	}
	return x.host.RequirePermission(ctx, companyID, "tasks:assign")
}

// checkAgent checks a summarizer override: an agent of the company (422 otherwise).
func (x *StatusCards) checkAgent(ctx context.Context, companyID, agentID string) (string, error) {
	agentID = strings.ToLower(strings.TrimSpace(agentID))
	if !sdk.IsUUID(agentID) {
		return "", sdk.Invalid("agentId", "must be a UUID or null")
	}
	var ag struct {
		ID        string `json:"id"`
		CompanyID string `json:"companyId"`
	}
	if err := x.host.Call(ctx, "agents.get", sdk.SystemActor(), companyID, map[string]string{"agentId": agentID}, &ag); err != nil {
		if s := statusOf(err); s == http.StatusNotFound || s == http.StatusBadRequest || s == http.StatusForbidden {
			return "", sdk.Unprocessable(msgSummarizerCompany)
		}
		return "", fmt.Errorf("error reading agent %s: %w", agentID, err)
	}
	if ag.CompanyID != "" && ag.CompanyID != companyID {
		return "", sdk.Unprocessable(msgSummarizerCompany)
	}
	return agentID, nil
}

func (x *StatusCards) handleCreate(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := strings.ToLower(r.PathValue("companyId"))
	card, err := x.create(ctx, companyID, r)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusCreated, card)
}

func (x *StatusCards) create(ctx context.Context, companyID string, r *http.Request) (*Card, error) {
	// Who may create comes first: a viewer or an outsider learns nothing from validation.
	if err := x.authorizeCreate(ctx, companyID); err != nil {
		return nil, err
	}
	var body CardCreateBody
	if err := sdk.DecodeJSON(r, &body); err != nil {
		return nil, err
	}
	var d []sdk.ValidationDetail
	prompt := cleanText(&d, "interestPrompt", body.InterestPrompt, 1, promptMax)
	var title *string
	if body.Title != nil {
		title = ptr(cleanText(&d, "title", *body.Title, 1, titleMax))
	}
	policy := defaultPolicy()
	if body.RefreshPolicy != nil {
		var pd []sdk.ValidationDetail
		policy, pd = body.RefreshPolicy.policy("refreshPolicy")
		d = append(d, pd...)
	}
	if len(d) > 0 {
		return nil, sdk.ValidationError(d...)
	}
	a := sdk.ActorFrom(ctx)
	c := &Card{ID: newID(), CompanyID: companyID, Title: title, TitlePinned: body.TitlePinned != nil && *body.TitlePinned,
		InterestPrompt: prompt, RefreshPolicy: policy, State: stateCompiling, Queries: json.RawMessage("[]")}
	if isAgent(a) {
		if utf8.RuneCountInString(prompt) > agentPromptMax {
			return nil, sdk.Unprocessable(msgAgentPromptTooLong)
		}
		var n int
		if err := x.pool.QueryRow(ctx, `SELECT count(*) FROM status_cards WHERE company_id = $1 AND created_by_agent_id = $2`,
			companyID, a.AgentId).Scan(&n); err != nil {
			return nil, fmt.Errorf("error counting an agent's status cards: %w", err)
		}
		if n >= agentCardCap {
			return nil, sdk.Unprocessable(msgAgentCardCap)
		}
		c.CreatedByAgentID = ptr(a.AgentId)
	} else {
		uid := a.GetUserId()
		if uid == "" {
			uid = "system"
		}
		c.CreatedByUserID = &uid
	}
	if body.AgentID != nil {
		id, err := x.checkAgent(ctx, companyID, *body.AgentID)
		if err != nil {
			return nil, err
		}
		c.AgentID = &id
	}
	// The summarizer must be there before anything is written.
	if _, _, err := x.designatedAgent(ctx, c); err != nil {
		return nil, err
	}
	now := x.now()
	policyJSON, err := json.Marshal(policy)
	if err != nil {
		return nil, fmt.Errorf("error encoding refresh policy: %w", err)
	}
	if _, err := x.pool.Exec(ctx, `INSERT INTO status_cards (id, company_id, created_by_user_id, created_by_agent_id, title, title_pinned,
		interest_prompt, agent_id, refresh_policy, state, next_eval_at, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'compiling', $10, $11, $11)`,
		c.ID, companyID, c.CreatedByUserID, c.CreatedByAgentID, c.Title, c.TitlePinned, c.InterestPrompt, c.AgentID, policyJSON,
		nextEval(policy, now), now); err != nil {
		return nil, fmt.Errorf("error creating status card: %w", err)
	}
	c, err = cardGet(ctx, x.pool, c.ID)
	if err != nil {
		return nil, err
	}
	out, _, warning, err := x.enqueue(ctx, c, &enqueueParams{kind: kindCompile, trigger: triggerManual, now: now})
	if err != nil {
		// The card exists only with its compile task queued.
		if _, derr := x.pool.Exec(ctx, `DELETE FROM status_cards WHERE id = $1`, c.ID); derr != nil {
			err = errors.Join(err, derr)
		}
		return nil, err
	}
	x.activity(ctx, companyID, "status_card.created", out.ID, map[string]any{"title": out.Title, "agentId": out.AgentID,
		"mode": policy.Mode, "generatingIssueId": out.GeneratingIssueID})
	x.hydrate(ctx, now, out)
	out.Warning = warning
	return out, nil
}

// nextEval is when the scheduler first looks at a card with this policy: never for manual
// cards, after one interval for interval cards, after one debounce for reactive ones.
func nextEval(p *RefreshPolicy, now time.Time) *time.Time {
	switch p.Mode {
	case modeInterval:
		return ptr(now.Add(time.Duration(*p.IntervalMinutes) * time.Minute))
	case modeReactive:
		return ptr(now.Add(time.Duration(*p.DebounceSeconds) * time.Second))
	}
	return nil
}

func (x *StatusCards) handlePatch(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var body CardPatchBody
	if err := sdk.DecodeJSON(r, &body); err != nil {
		x.writeErr(rw, err)
		return
	}
	out, err := x.patch(ctx, r.PathValue("id"), &body)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, out)
}

func (x *StatusCards) patch(ctx context.Context, id string, body *CardPatchBody) (*Card, error) {
	if !body.InterestPrompt.Set && !body.Title.Set && !body.TitlePinned.Set && !body.AgentID.Set && !body.RefreshPolicy.Set &&
		!body.Archived.Set {
		return nil, sdk.ValidationError(sdk.ValidationDetail{Path: "", Message: msgAtLeastOneField})
	}
	var d []sdk.ValidationDetail
	var prompt string
	if body.InterestPrompt.Set {
		if body.InterestPrompt.Null {
			d = append(d, sdk.ValidationDetail{Path: "interestPrompt", Message: "must not be null"})
		} else {
			prompt = cleanText(&d, "interestPrompt", body.InterestPrompt.Value, 1, promptMax)
		}
	}
	var title *string
	if body.Title.Set && !body.Title.Null {
		title = ptr(cleanText(&d, "title", body.Title.Value, 1, titleMax))
	}
	if body.TitlePinned.Set && body.TitlePinned.Null {
		d = append(d, sdk.ValidationDetail{Path: "titlePinned", Message: "must be a boolean"})
	}
	if body.Archived.Set && body.Archived.Null {
		d = append(d, sdk.ValidationDetail{Path: "archived", Message: "must be a boolean"})
	}
	var policy *RefreshPolicy
	if body.RefreshPolicy.Set {
		pb := body.RefreshPolicy.Value
		if body.RefreshPolicy.Null {
			pb = RefreshPolicyBody{}
		}
		var pd []sdk.ValidationDetail
		policy, pd = pb.policy("refreshPolicy")
		d = append(d, pd...)
	}
	if len(d) > 0 {
		return nil, sdk.ValidationError(d...)
	}
	c, err := x.manageCard(ctx, id)
	if err != nil {
		return nil, err
	}
	a := sdk.ActorFrom(ctx)
	if body.InterestPrompt.Set && isAgent(a) && utf8.RuneCountInString(prompt) > agentPromptMax {
		return nil, sdk.Unprocessable(msgAgentPromptTooLong)
	}
	var agentID *string
	if body.AgentID.Set && !body.AgentID.Null {
		id, err := x.checkAgent(ctx, c.CompanyID, body.AgentID.Value)
		if err != nil {
			return nil, err
		}
		agentID = &id
	}
	now := x.now()
	archive := body.Archived.Set && body.Archived.Value && c.ArchivedAt == nil
	restore := body.Archived.Set && !body.Archived.Value && c.ArchivedAt != nil
	recompile := body.InterestPrompt.Set && prompt != c.InterestPrompt && !archive && (c.ArchivedAt == nil || restore)
	var cancelIssue string
	err = pgx.BeginFunc(ctx, x.pool, func(tx pgx.Tx) error {
		cur, err := cardForUpdate(ctx, tx, c.ID)
		if err != nil {
			return err
		}
		if cur == nil {
			return sdk.NotFound(msgCardNotFound)
		}
		set := []string{"updated_at = $2"}
		args := []any{c.ID, now}
		add := func(expr string, v any) {
			args = append(args, v)
			set = append(set, fmt.Sprintf(expr, len(args)))
		}
		if body.InterestPrompt.Set {
			add("interest_prompt = $%d", prompt)
		}
		if body.Title.Set {
			add("title = $%d", title)
		}
		if body.TitlePinned.Set {
			add("title_pinned = $%d", body.TitlePinned.Value)
		}
		if body.AgentID.Set && deref(agentID) != deref(cur.AgentID) {
			add("agent_id = $%d", agentID)
			set = append(set, "last_update_run_kind = NULL")
		}
		if policy != nil {
			b, err := json.Marshal(policy)
			if err != nil {
				return fmt.Errorf("error encoding refresh policy: %w", err)
			}
			add("refresh_policy = $%d", b)
			set = append(set, "dirty_at = NULL")
			if cur.ArchivedAt == nil || restore {
				add("next_eval_at = $%d", nextEval(policy, now))
			}
		}
		if recompile {
			set = append(set, "state = 'compiling'", "last_update_run_kind = NULL", "failure_reason = NULL")
			if cancelIssue, err = x.cancelGeneration(ctx, tx, cur, "superseded by a new interest prompt", now); err != nil {
				return err
			}
		}
		if archive {
			add("archived_at = $%d", now)
			add("archived_by_user_id = $%d", nilIfEmpty(a.GetUserId(), !isAgent(a)))
			add("archived_by_agent_id = $%d", nilIfEmpty(a.GetAgentId(), isAgent(a)))
			set = append(set, "next_eval_at = NULL", "dirty_at = NULL")
			if cancelIssue, err = x.cancelGeneration(ctx, tx, cur, "status card archived", now); err != nil {
				return err
			}
		}
		if restore {
			set = append(set, "archived_at = NULL", "archived_by_user_id = NULL", "archived_by_agent_id = NULL")
			p := cur.RefreshPolicy
			if policy != nil {
				p = policy
			}
			add("next_eval_at = $%d", nextEval(p, now))
		}
		_, err = tx.Exec(ctx, `UPDATE status_cards SET `+strings.Join(set, ", ")+` WHERE id = $1`, args...)
		if err != nil {
			return fmt.Errorf("error updating status card %s: %w", c.ID, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if cancelIssue != "" {
		if err := x.setIssueStatus(ctx, c.CompanyID, cancelIssue, "cancelled"); err != nil {
			x.log.Warn("error cancelling a generation task", "card", c.ID, "issue", cancelIssue, "error", err)
		}
	}
	if c, err = cardGet(ctx, x.pool, c.ID); err != nil {
		return nil, err
	}
	warning := ""
	switch {
	case recompile:
		out, _, w, err := x.enqueue(ctx, c, &enqueueParams{kind: kindCompile, trigger: triggerManual, now: now})
		if err != nil && !errors.Is(err, errAlreadyGenerating) {
			return nil, err
		}
		if out != nil {
			c, warning = out, w
		}
	case restore && c.QueryVersion > 0 && c.generatingEntryID == nil:
		fp, err := x.watch(ctx, c)
		if err != nil {
			return nil, err
		}
		out, _, w, err := x.enqueue(ctx, c, &enqueueParams{kind: kindFull, trigger: triggerRestore, now: now, fingerprint: fp,
			changes: diff(c.Fingerprint, fp)})
		if err != nil && !errors.Is(err, errAlreadyGenerating) {
			return nil, err
		}
		if out != nil {
			c, warning = out, w
		}
	}
	action := "status_card.updated"
	if archive {
		action = "status_card.archived"
	} else if restore {
		action = "status_card.unarchived"
	}
	x.activity(ctx, c.CompanyID, action, c.ID, map[string]any{"state": c.State, "generatingIssueId": c.GeneratingIssueID})
	x.hydrate(ctx, now, c)
	c.Warning = warning
	return c, nil
}

// nilIfEmpty is nil for "" or when !when, and &s otherwise.
func nilIfEmpty(s string, when bool) *string {
	if s == "" || !when {
		return nil
	}
	return &s
}

func (x *StatusCards) handleDelete(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	c, err := x.manageCard(ctx, r.PathValue("id"))
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	if _, err := x.pool.Exec(ctx, `DELETE FROM status_cards WHERE id = $1`, c.ID); err != nil {
		x.writeErr(rw, fmt.Errorf("error deleting status card %s: %w", c.ID, err))
		return
	}
	if c.GeneratingIssueID != nil {
		if err := x.setIssueStatus(ctx, c.CompanyID, *c.GeneratingIssueID, "cancelled"); err != nil {
			x.log.Warn("error cancelling a generation task", "card", c.ID, "error", err)
		}
	}
	x.activity(ctx, c.CompanyID, "status_card.deleted", c.ID, map[string]any{"title": c.Title})
	rw.WriteHeader(http.StatusNoContent)
}

func (x *StatusCards) handleUpdates(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	c, err := x.readCard(ctx, r.PathValue("id"))
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	rows, err := x.pool.Query(ctx, `SELECT `+entryCols+` FROM status_card_updates WHERE card_id = $1
		ORDER BY started_at DESC, id DESC LIMIT 500`, c.ID)
	if err != nil {
		x.writeErr(rw, fmt.Errorf("error listing updates of status card %s: %w", c.ID, err))
		return
	}
	defer rows.Close()
	out := []*Entry{}
	var issues []string
	for rows.Next() {
		e, err := scanEntry(rows)
		if err != nil {
			x.writeErr(rw, err)
			return
		}
		if e.GenerationIssueID != nil {
			issues = append(issues, *e.GenerationIssueID)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		x.writeErr(rw, fmt.Errorf("error listing updates of status card %s: %w", c.ID, err))
		return
	}
	rows.Close()
	// Tokens and cost come from the costs owner's events of each entry's run.
	if u, err := x.usage(ctx, c.CompanyID, uniq(issues), time.Time{}); err != nil {
		x.log.Warn("error reading the usage of status card updates", "card", c.ID, "error", err)
	} else {
		for _, e := range out {
			if e.RunID == nil {
				continue
			}
			if ru := u.ByRun[*e.RunID]; ru != nil {
				e.InputTokens, e.OutputTokens, e.CostCents = ru.InputTokens, ru.OutputTokens, ru.CostCents
				if e.Model == nil && ru.Model != "" {
					e.Model = ptr(ru.Model)
				}
			}
		}
	}
	sdk.WriteJSON(rw, http.StatusOK, out)
}

func (x *StatusCards) handleRevisions(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	c, err := x.readCard(ctx, r.PathValue("id"))
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	rows, err := x.pool.Query(ctx, `SELECT id::text, revision_number, title, body, change_summary, created_at
		FROM status_card_revisions WHERE card_id = $1 ORDER BY revision_number DESC LIMIT 500`, c.ID)
	if err != nil {
		x.writeErr(rw, fmt.Errorf("error listing summary revisions of status card %s: %w", c.ID, err))
		return
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*Revision, error) {
		rv := new(Revision)
		return rv, row.Scan(&rv.ID, &rv.RevisionNumber, &rv.Title, &rv.Body, &rv.ChangeSummary, &rv.CreatedAt)
	})
	if err != nil {
		x.writeErr(rw, fmt.Errorf("error reading summary revisions of status card %s: %w", c.ID, err))
		return
	}
	if out == nil {
		out = []*Revision{}
	}
	sdk.WriteJSON(rw, http.StatusOK, out)
}

func (x *StatusCards) handleDryRun(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	c, err := x.readCard(ctx, r.PathValue("id"))
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	a := sdk.ActorFrom(ctx)
	lowTrust := a.GetKeyScope() == "task_bridge" || a.GetKeyScope() == "skill_test"
	if lowTrust || x.host.RequirePermission(ctx, c.CompanyID, "company_scope:read") != nil {
		x.writeErr(rw, sdk.Forbidden(msgDryRunBoundary))
		return
	}
	queries, _, err := x.runQueries(ctx, c.CompanyID, c.Queries)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	mentioned, err := x.fingerprints(ctx, c.CompanyID, c.MentionedIssueIDs, nil)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	if mentioned == nil {
		mentioned = []fpRow{}
	}
	sdk.WriteJSON(rw, http.StatusOK, &DryRunAnswer{CardID: c.ID, QueryVersion: c.QueryVersion, Queries: queries, MentionedIssues: mentioned})
}
