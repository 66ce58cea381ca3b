package cases

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/keelhq/keel/sdk"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

// Case limits (spec part 2 "Limits").
const (
	caseTypeMaxLen  = 120
	caseTitleMaxLen = 500
	caseSummaryMax  = 8000
	caseKeyMaxLen   = 200
	caseLabelsMax   = 100
	caseListDefault = 100
	caseListMax     = 200
)

func init() {
	addRoutes(
		route{Method: http.MethodGet, Path: "/api/companies/{companyId}/cases", Query: caseListQuery{}, Response: new([]ListedCase), CompanyFromPath: true,
			Summary: "List a company's cases, newest activity first (type(s), status(es)/active, project(s), includeNoProject, label, parent, q, includeAncestors, limit 1-200)",
			Handle:  (*Cases).handleList},
		route{Method: http.MethodPost, Path: "/api/companies/{companyId}/cases", Status: http.StatusCreated, Response: new(CaseDetail), CompanyFromPath: true,
			Summary: "Upsert a case keyed on (caseType, key): 201 created, 200 updated; unknown fields rejected",
			Body:    CaseCreateBody{}, Handle: (*Cases).handleCreate},
		route{Method: http.MethodGet, Path: "/api/cases/{id}", Response: new(CaseDetail),
			Summary: "Get a case by UUID or identifier with parent, labels, issue links, documents and attachments",
			Handle:  (*Cases).handleGet},
		route{Method: http.MethodPatch, Path: "/api/cases/{id}", Response: new(Case),
			Summary: "Update a case (title, summary, status, fields, projectId, parentCaseId, labels/labelIds); unknown fields rejected",
			Body:    CasePatchBody{}, Handle: (*Cases).handlePatch},
	)
}

// CaseCreateBody is the body of POST /api/companies/{companyId}/cases.
type CaseCreateBody struct {
	// CaseType is a free string, 1-120 characters.
	CaseType string `json:"caseType" jsonschema:"minLength=1,maxLength=120"`
	// Title is 1-500 characters.
	Title string `json:"title" jsonschema:"minLength=1,maxLength=500"`
	// Key is a stable key within the caseType; null (or absent) is the one keyless case of the type.
	Key *string `json:"key,omitempty" jsonschema:"maxLength=200"`
	// Summary is up to 8000 characters.
	Summary sdk.PatchField[string] `json:"summary,omitempty"`
	// Status defaults to draft.
	Status *string `json:"status,omitempty" jsonschema:"enum=draft,enum=in_progress,enum=in_review,enum=approved,enum=done,enum=cancelled"`
	// Fields is an arbitrary JSON object.
	Fields json.RawMessage `json:"fields,omitempty"`
	// ProjectID is a project of the company.
	ProjectID sdk.PatchField[string] `json:"projectId,omitempty"`
	// ParentCaseID is another case of the company.
	ParentCaseID sdk.PatchField[string] `json:"parentCaseId,omitempty"`
}

// CasePatchBody is the body of PATCH /api/cases/{id}.
type CasePatchBody struct {
	Title        *string                `json:"title,omitempty" jsonschema:"minLength=1,maxLength=500"`
	Summary      sdk.PatchField[string] `json:"summary,omitempty"`
	Status       *string                `json:"status,omitempty" jsonschema:"enum=draft,enum=in_progress,enum=in_review,enum=approved,enum=done,enum=cancelled"`
	Fields       json.RawMessage        `json:"fields,omitempty"`
	ProjectID    sdk.PatchField[string] `json:"projectId,omitempty"`
	ParentCaseID sdk.PatchField[string] `json:"parentCaseId,omitempty"`
	// Labels and LabelIDs (either name) replace the case's labels: up to 100 label UUIDs; empty clears.
	Labels   *[]string `json:"labels,omitempty" jsonschema:"maxItems=100"`
	LabelIDs *[]string `json:"labelIds,omitempty" jsonschema:"maxItems=100"`
}

// caseUpdate is a validated change to a case.
type caseUpdate struct {
	title        *string
	summary      sdk.PatchField[string]
	status       *string
	fields       json.RawMessage
	projectID    sdk.PatchField[string]
	parentCaseID sdk.PatchField[string]
	labelIDs     *[]string
}

// validateCommon checks the fields create and update share and normalizes ids.
func validateCommon(u *caseUpdate, bad func(path, msg string)) {
	if u.title != nil {
		t := strings.TrimSpace(*u.title)
		if n := utf8.RuneCountInString(t); n < 1 || n > caseTitleMaxLen {
			bad("title", "must be 1 to 500 characters")
		}
		u.title = &t
	}
	if u.summary.Set && !u.summary.Null && utf8.RuneCountInString(u.summary.Value) > caseSummaryMax {
		bad("summary", "must be at most 8000 characters")
	}
	if u.status != nil && !statuses[*u.status] {
		bad("status", "must be one of draft, in_progress, in_review, approved, done, cancelled")
	}
	if len(u.fields) > 0 {
		t := bytes.TrimSpace(u.fields)
		if len(t) == 0 || t[0] != '{' {
			bad("fields", "must be an object")
		}
	}
	if u.projectID.Set && !u.projectID.Null {
		u.projectID.Value = strings.ToLower(strings.TrimSpace(u.projectID.Value))
		if !isUUID(u.projectID.Value) {
			bad("projectId", "must be a UUID")
		}
	}
	if u.parentCaseID.Set && !u.parentCaseID.Null {
		u.parentCaseID.Value = strings.ToLower(strings.TrimSpace(u.parentCaseID.Value))
		if !isUUID(u.parentCaseID.Value) {
			bad("parentCaseId", "must be a UUID")
		}
	}
	if u.labelIDs != nil {
		if len(*u.labelIDs) > caseLabelsMax {
			bad("labelIds", "must hold at most 100 labels")
		}
		seen := map[string]bool{}
		ids := []string{}
		for i, id := range *u.labelIDs {
			id = strings.ToLower(strings.TrimSpace(id))
			if !isUUID(id) {
				bad(fmt.Sprintf("labelIds.%d", i), "must be a UUID")
				continue
			}
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
		u.labelIDs = &ids
	}
}

// checkRefs checks the project, parent and labels an update names against the company
// (422 with the spec's texts) and returns the company's labels by id when labels are set.
func (x *Cases) checkRefs(ctx context.Context, companyID, caseID string, u *caseUpdate) (map[string]Label, error) {
	if u.projectID.Set && !u.projectID.Null {
		err := x.host.Call(ctx, "work.projects.get", sdk.SystemActor(), companyID, map[string]string{"projectId": u.projectID.Value}, nil)
		var e *sdk.Error
		switch {
		case errors.As(err, &e) && e.Status == http.StatusNotFound:
			return nil, unprocessable(msgProjectCompany)
		case err != nil:
			return nil, fmt.Errorf("error reading project %s: %w", u.projectID.Value, err)
		}
	}
	if u.parentCaseID.Set && !u.parentCaseID.Null {
		if u.parentCaseID.Value == caseID {
			return nil, unprocessable(msgOwnParent)
		}
		var parentCompany string
		err := x.pool.QueryRow(ctx, `SELECT company_id FROM cases WHERE id = $1`, u.parentCaseID.Value).Scan(&parentCompany)
		if errors.Is(err, pgx.ErrNoRows) || err == nil && parentCompany != companyID {
			return nil, unprocessable(msgParentNotFound)
		}
		if err != nil {
			return nil, fmt.Errorf("error reading parent case: %w", err)
		}
		if caseID != "" {
			var cycle bool
			if err := x.pool.QueryRow(ctx, `WITH RECURSIVE up(id, parent_case_id, depth) AS (
					SELECT id, parent_case_id, 0 FROM cases WHERE id = $1
					UNION ALL SELECT c.id, c.parent_case_id, up.depth + 1 FROM cases c JOIN up ON c.id = up.parent_case_id WHERE up.depth < 1000)
				SELECT EXISTS (SELECT 1 FROM up WHERE id = $2)`, u.parentCaseID.Value, caseID).Scan(&cycle); err != nil {
				return nil, fmt.Errorf("error checking case ancestry: %w", err)
			}
			if cycle {
				return nil, unprocessable(msgParentCycle)
			}
		}
	}
	if u.labelIDs == nil {
		return nil, nil
	}
	labels, err := x.companyLabels(ctx, companyID)
	if err != nil {
		return nil, err
	}
	for _, id := range *u.labelIDs {
		if _, ok := labels[id]; !ok {
			return nil, unprocessable(msgLabelsCompany)
		}
	}
	return labels, nil
}

// reparentTx serializes a company's re-parenting writes (taken first in the transaction,
// before any case row) and checks, inside it, that a new parent is neither the case nor one
// of its descendants: two concurrent re-parents can then neither form a cycle nor deadlock.
func reparentTx(ctx context.Context, tx pgx.Tx, companyID, caseID string, u *caseUpdate) error {
	if !u.parentCaseID.Set || u.parentCaseID.Null {
		return nil
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, "cases-reparent:"+companyID); err != nil {
		return fmt.Errorf("error locking re-parenting: %w", err)
	}
	if caseID == "" {
		return nil
	}
	if u.parentCaseID.Value == caseID {
		return unprocessable(msgOwnParent)
	}
	var cycle bool
	if err := tx.QueryRow(ctx, `WITH RECURSIVE up(id, parent_case_id, depth) AS (
			SELECT id, parent_case_id, 0 FROM cases WHERE id = $1
			UNION ALL SELECT c.id, c.parent_case_id, up.depth + 1 FROM cases c JOIN up ON c.id = up.parent_case_id WHERE up.depth < 1000)
		SELECT EXISTS (SELECT 1 FROM up WHERE id = $2)`, u.parentCaseID.Value, caseID).Scan(&cycle); err != nil {
		return fmt.Errorf("error checking case ancestry: %w", err)
	}
	if cycle {
		return unprocessable(msgParentCycle)
	}
	return nil
}

// Label is a company label as a case shows it.
type Label struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Color string `json:"color"`
}

// companyLabels reads the company's labels from the work owner.
func (x *Cases) companyLabels(ctx context.Context, companyID string) (map[string]Label, error) {
	var list []Label
	if err := x.host.Call(ctx, "work.labels.list", sdk.SystemActor(), companyID, map[string]any{}, &list); err != nil {
		return nil, fmt.Errorf("error reading the labels of company %s: %w", companyID, err)
	}
	out := make(map[string]Label, len(list))
	for _, l := range list {
		out[l.ID] = l
	}
	return out, nil
}

// issuePrefix reads the company's issue prefix, which case identifiers share.
func (x *Cases) issuePrefix(ctx context.Context, companyID string) (string, error) {
	res, err := x.host.Companies.Get(ctx, &hostv1.GetCompanyRequest{CompanyId: companyID})
	if err != nil {
		return "", fmt.Errorf("error reading company %s: %w", companyID, err)
	}
	var co struct {
		IssuePrefix string `json:"issuePrefix"`
	}
	if err := json.Unmarshal(res.GetCompanyJson(), &co); err != nil {
		return "", fmt.Errorf("error decoding company %s: %w", companyID, err)
	}
	if co.IssuePrefix == "" {
		co.IssuePrefix = "CMP"
	}
	return co.IssuePrefix, nil
}

func (x *Cases) handleCreate(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := sdk.CompanyIDFrom(ctx)
	if err := sdk.RequireCompanyAccess(ctx, companyID); err != nil {
		x.writeErr(rw, err)
		return
	}
	var body CaseCreateBody
	if err := sdk.DecodeJSONStrict(r, &body); err != nil {
		x.writeErr(rw, err)
		return
	}
	var d []detail
	bad := func(path, msg string) { d = append(d, detail{Path: path, Message: msg}) }
	caseType := strings.TrimSpace(body.CaseType)
	if n := utf8.RuneCountInString(caseType); n < 1 || n > caseTypeMaxLen {
		bad("caseType", "must be 1 to 120 characters")
	}
	if body.Key != nil {
		if n := utf8.RuneCountInString(*body.Key); n < 1 || n > caseKeyMaxLen {
			bad("key", "must be 1 to 200 characters or null")
		}
	}
	u := &caseUpdate{title: &body.Title, summary: body.Summary, status: body.Status, fields: body.Fields,
		projectID: body.ProjectID, parentCaseID: body.ParentCaseID}
	validateCommon(u, bad)
	if err := validation(d); err != nil {
		x.writeErr(rw, err)
		return
	}
	if _, err := x.checkRefs(ctx, companyID, "", u); err != nil {
		x.writeErr(rw, err)
		return
	}
	prefix, err := x.issuePrefix(ctx, companyID)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	runIssue := x.runIssue(ctx, companyID)
	at := attributionOf(sdk.ActorFrom(ctx))
	var out *Case
	created := false
	err = x.inTx(ctx, func(tx pgx.Tx) error {
		if err := reparentTx(ctx, tx, companyID, "", u); err != nil {
			return err
		}
		// Upserts of one (caseType, key) take turns; others run side by side.
		keyJSON, _ := json.Marshal([]any{companyID, caseType, body.Key})
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, string(keyJSON)); err != nil {
			return fmt.Errorf("error locking case key: %w", err)
		}
		existing, err := scanCase(tx.QueryRow(ctx, `SELECT `+caseCols+` FROM cases WHERE company_id = $1 AND case_type = $2
			AND key IS NOT DISTINCT FROM $3 FOR UPDATE`, companyID, caseType, body.Key))
		switch {
		case err == nil:
			if u.parentCaseID.Set && u.parentCaseID.Value == existing.ID {
				return unprocessable(msgOwnParent)
			}
			if err := reparentTx(ctx, tx, companyID, existing.ID, u); err != nil {
				return err
			}
			out, err = x.applyUpdate(ctx, tx, existing, u, nil, at)
			if err != nil {
				return err
			}
			return autoLinkTx(ctx, tx, out, runIssue, "work", at)
		case !errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("error reading case: %w", err)
		}
		var num int64
		if err := tx.QueryRow(ctx, `INSERT INTO case_counters (company_id, last_number) VALUES ($1, 1)
			ON CONFLICT (company_id) DO UPDATE SET last_number = case_counters.last_number + 1 RETURNING last_number`,
			companyID).Scan(&num); err != nil {
			return fmt.Errorf("error numbering case: %w", err)
		}
		status := StatusDraft
		if u.status != nil {
			status = *u.status
		}
		fields := json.RawMessage(`{}`)
		if len(u.fields) > 0 {
			fields = u.fields
		}
		var summary, project, parent *string
		if u.summary.Set && !u.summary.Null {
			summary = &u.summary.Value
		}
		if u.projectID.Set && !u.projectID.Null {
			project = &u.projectID.Value
		}
		if u.parentCaseID.Set && !u.parentCaseID.Null {
			parent = &u.parentCaseID.Value
		}
		out, err = scanCase(tx.QueryRow(ctx, `INSERT INTO cases (id, company_id, case_number, identifier, case_type, key, title,
			summary, status, fields, project_id, parent_case_id, created_by_agent_id, created_by_user_id, created_by_run_id, completed_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, CASE WHEN $16 THEN clock_timestamp() END)
			RETURNING `+caseCols,
			newID(), companyID, num, fmt.Sprintf("%s-C%d", prefix, num), caseType, body.Key, *u.title, summary, status, fields,
			project, parent, at.AgentID, at.UserID, at.RunID, terminal(status)))
		if err != nil {
			return fmt.Errorf("error inserting case: %w", err)
		}
		created = true
		if err := eventTx(ctx, tx, companyID, out.ID, "created", at, runIssue,
			map[string]any{"caseType": out.CaseType, "key": out.Key}); err != nil {
			return err
		}
		if parent != nil {
			if err := eventTx(ctx, tx, companyID, *parent, "child_linked", at, "",
				map[string]any{"childCaseId": out.ID, "childIdentifier": out.Identifier}); err != nil {
				return err
			}
		}
		return autoLinkTx(ctx, tx, out, runIssue, "origin", at)
	})
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		x.activity(ctx, companyID, "case.created", out.ID, map[string]any{"identifier": out.Identifier, "caseType": out.CaseType})
	}
	detail, err := x.caseDetail(ctx, out)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, status, detail)
}

func (x *Cases) handlePatch(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var body CasePatchBody
	if err := sdk.DecodeJSONStrict(r, &body); err != nil {
		x.writeErr(rw, err)
		return
	}
	var d []detail
	bad := func(path, msg string) { d = append(d, detail{Path: path, Message: msg}) }
	labels := body.LabelIDs
	if labels == nil {
		labels = body.Labels
	}
	u := &caseUpdate{title: body.Title, summary: body.Summary, status: body.Status, fields: body.Fields,
		projectID: body.ProjectID, parentCaseID: body.ParentCaseID, labelIDs: labels}
	validateCommon(u, bad)
	if err := validation(d); err != nil {
		x.writeErr(rw, err)
		return
	}
	c, err := x.caseByRef(ctx, x.pool, r.PathValue("id"), false)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	companyLabels, err := x.checkRefs(ctx, c.CompanyID, c.ID, u)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	runIssue := x.runIssue(ctx, c.CompanyID)
	at := attributionOf(sdk.ActorFrom(ctx))
	var out *Case
	err = x.inTx(ctx, func(tx pgx.Tx) error {
		if err := reparentTx(ctx, tx, c.CompanyID, c.ID, u); err != nil {
			return err
		}
		locked, err := x.caseByRef(ctx, tx, c.ID, true)
		if err != nil {
			return err
		}
		if out, err = x.applyUpdate(ctx, tx, locked, u, companyLabels, at); err != nil {
			return err
		}
		return autoLinkTx(ctx, tx, out, runIssue, "work", at)
	})
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	x.activity(ctx, out.CompanyID, "case.updated", out.ID, map[string]any{"identifier": out.Identifier})
	sdk.WriteJSON(rw, http.StatusOK, out)
}

// applyUpdate writes a validated update to a locked case and records its events:
// status_changed, fields_changed, label_added/label_removed, child_linked on a new parent,
// and updated for the rest (title, summary, project, parent).
func (x *Cases) applyUpdate(ctx context.Context, tx pgx.Tx, c *Case, u *caseUpdate, labels map[string]Label, at attribution) (*Case, error) {
	var changes []string
	next := *c
	if u.title != nil && *u.title != c.Title {
		next.Title = *u.title
		changes = append(changes, "title")
	}
	if u.summary.Set {
		var s *string
		if !u.summary.Null {
			s = ptr(u.summary.Value)
		}
		if deref(s) != deref(c.Summary) || (s == nil) != (c.Summary == nil) {
			next.Summary = s
			changes = append(changes, "summary")
		}
	}
	if u.projectID.Set {
		var p *string
		if !u.projectID.Null {
			p = ptr(u.projectID.Value)
		}
		if deref(p) != deref(c.ProjectID) {
			next.ProjectID = p
			changes = append(changes, "projectId")
		}
	}
	parentChanged := false
	if u.parentCaseID.Set {
		var p *string
		if !u.parentCaseID.Null {
			p = ptr(u.parentCaseID.Value)
		}
		if deref(p) != deref(c.ParentCaseID) {
			next.ParentCaseID = p
			changes = append(changes, "parentCaseId")
			parentChanged = true
		}
	}
	statusChanged := u.status != nil && *u.status != c.Status
	if statusChanged {
		next.Status = *u.status
	}
	fieldsChanged := len(u.fields) > 0 && !jsonEqual(u.fields, c.Fields)
	if fieldsChanged {
		next.Fields = u.fields
	}
	if len(changes) > 0 || statusChanged || fieldsChanged {
		updated, err := scanCase(tx.QueryRow(ctx, `UPDATE cases SET title = $2, summary = $3, project_id = $4, parent_case_id = $5,
			status = $6, fields = $7, updated_at = clock_timestamp(),
			completed_at = CASE WHEN $8 THEN (CASE WHEN $9 THEN clock_timestamp() ELSE completed_at END) ELSE NULL END
			WHERE id = $1 RETURNING `+caseCols,
			c.ID, next.Title, next.Summary, next.ProjectID, next.ParentCaseID, next.Status, next.Fields,
			terminal(next.Status), statusChanged))
		if err != nil {
			return nil, fmt.Errorf("error updating case %s: %w", c.ID, err)
		}
		next = *updated
	}
	if statusChanged {
		if err := eventTx(ctx, tx, c.CompanyID, c.ID, "status_changed", at, "", map[string]any{"from": c.Status, "to": next.Status}); err != nil {
			return nil, err
		}
	}
	if fieldsChanged {
		var before, after any
		_ = json.Unmarshal(c.Fields, &before)
		_ = json.Unmarshal(next.Fields, &after)
		if err := eventTx(ctx, tx, c.CompanyID, c.ID, "fields_changed", at, "", map[string]any{"from": before, "to": after}); err != nil {
			return nil, err
		}
	}
	if parentChanged && next.ParentCaseID != nil {
		if err := eventTx(ctx, tx, c.CompanyID, *next.ParentCaseID, "child_linked", at, "",
			map[string]any{"childCaseId": c.ID, "childIdentifier": c.Identifier, "previousParentCaseId": c.ParentCaseID}); err != nil {
			return nil, err
		}
	}
	if len(changes) > 0 {
		if err := eventTx(ctx, tx, c.CompanyID, c.ID, "updated", at, "", map[string]any{"changes": changes}); err != nil {
			return nil, err
		}
	}
	if u.labelIDs != nil {
		if err := replaceLabelsTx(ctx, tx, c, *u.labelIDs, labels, at); err != nil {
			return nil, err
		}
	}
	return &next, nil
}

// replaceLabelsTx sets a case's labels, recording label_added and label_removed.
func replaceLabelsTx(ctx context.Context, tx pgx.Tx, c *Case, ids []string, labels map[string]Label, at attribution) error {
	rows, err := tx.Query(ctx, `SELECT label_id::text FROM case_labels WHERE case_id = $1`, c.ID)
	if err != nil {
		return fmt.Errorf("error reading labels of case %s: %w", c.ID, err)
	}
	current, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("error reading labels of case %s: %w", c.ID, err)
	}
	have := map[string]bool{}
	for _, id := range current {
		have[id] = true
	}
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
		if have[id] {
			continue
		}
		if _, err := tx.Exec(ctx, `INSERT INTO case_labels (case_id, label_id, company_id) VALUES ($1, $2, $3)`, c.ID, id, c.CompanyID); err != nil {
			return fmt.Errorf("error labelling case %s: %w", c.ID, err)
		}
		if err := eventTx(ctx, tx, c.CompanyID, c.ID, "label_added", at, "", map[string]any{"labelId": id, "name": labels[id].Name}); err != nil {
			return err
		}
	}
	sort.Strings(current)
	for _, id := range current {
		if want[id] {
			continue
		}
		if _, err := tx.Exec(ctx, `DELETE FROM case_labels WHERE case_id = $1 AND label_id = $2`, c.ID, id); err != nil {
			return fmt.Errorf("error unlabelling case %s: %w", c.ID, err)
		}
		if err := eventTx(ctx, tx, c.CompanyID, c.ID, "label_removed", at, "", map[string]any{"labelId": id, "name": labels[id].Name}); err != nil {
			return err
		}
	}
	return nil
}

// jsonEqual compares two JSON documents by value.
func jsonEqual(a, b json.RawMessage) bool {
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}

// CaseSummary is the compact case of a parent and of an issue's cases.
type CaseSummary struct {
	ID         string `json:"id"`
	Identifier string `json:"identifier"`
	Title      string `json:"title"`
	CaseType   string `json:"caseType"`
	Status     string `json:"status"`
}

// CaseDetail is GET /api/cases/{id}.
type CaseDetail struct {
	*Case
	Parent      *CaseSummary    `json:"parent"`
	Labels      []Label         `json:"labels"`
	IssueLinks  []*IssueLink    `json:"issueLinks"`
	Documents   []DocumentEntry `json:"documents"`
	Attachments []*Attachment   `json:"attachments"`
}

// DocumentEntry is one document of a case detail.
type DocumentEntry struct {
	Key      string    `json:"key"`
	Document *Document `json:"document"`
}

func (x *Cases) handleGet(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	c, err := x.caseByRef(ctx, x.pool, r.PathValue("id"), false)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	d, err := x.caseDetail(ctx, c)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, d)
}

// caseDetail reads what a case detail adds to the case.
func (x *Cases) caseDetail(ctx context.Context, c *Case) (*CaseDetail, error) {
	d := &CaseDetail{Case: c, Labels: []Label{}, IssueLinks: []*IssueLink{}, Documents: []DocumentEntry{}, Attachments: []*Attachment{}}
	if c.ParentCaseID != nil {
		p := new(CaseSummary)
		err := x.pool.QueryRow(ctx, `SELECT id, identifier, title, case_type, status FROM cases WHERE id = $1`, *c.ParentCaseID).
			Scan(&p.ID, &p.Identifier, &p.Title, &p.CaseType, &p.Status)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("error reading parent of case %s: %w", c.ID, err)
		}
		if err == nil {
			d.Parent = p
		}
	}
	rows, err := x.pool.Query(ctx, `SELECT label_id::text FROM case_labels WHERE case_id = $1 ORDER BY created_at, label_id`, c.ID)
	if err != nil {
		return nil, fmt.Errorf("error reading labels of case %s: %w", c.ID, err)
	}
	labelIDs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("error reading labels of case %s: %w", c.ID, err)
	}
	if len(labelIDs) > 0 {
		all, err := x.companyLabels(ctx, c.CompanyID)
		if err != nil {
			return nil, err
		}
		for _, id := range labelIDs {
			if l, ok := all[id]; ok {
				d.Labels = append(d.Labels, l)
			}
		}
	}
	if d.IssueLinks, err = x.caseLinks(ctx, c); err != nil {
		return nil, err
	}
	docs, err := x.caseDocuments(ctx, c.ID)
	if err != nil {
		return nil, err
	}
	for _, doc := range docs {
		d.Documents = append(d.Documents, DocumentEntry{Key: doc.Key, Document: doc})
	}
	if d.Attachments, err = x.caseAttachments(ctx, c.ID); err != nil {
		return nil, err
	}
	return d, nil
}
