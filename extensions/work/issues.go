package work

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/uptrace/bun"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/idem"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

// Limits of issue fields.
const (
	issueTitleMax          = 500
	issueDescriptionMax    = 200_000
	issueIdempotencyKeyMax = 255
	issueShortTextMax      = 255
	issueListQueryMax      = 200
	issueListDefaultLimit  = 50
	issueListMaxLimit      = 500
)

var (
	issuePriorities   = []string{"critical", "high", "medium", "low"}
	issueWorkModes    = []string{"standard", "ask", "planning", "skill_test"}
	issueReviewPolicy = []string{"anyone", "not_creator", "human_only"}
	issueSortFields   = []string{"updatedAt", "createdAt", "priority", "status"}
)

// IssueCreateBody is the body of POST /api/companies/{companyId}/issues and the input of
// the issues.create method (REFERENCE.md 2.2 "Create body").
type IssueCreateBody struct {
	Title       string  `json:"title" jsonschema:"minLength=1,maxLength=500"`
	Description *string `json:"description,omitempty"`
	// Status defaults to todo when an assignee is given, else backlog.
	Status   *string `json:"status,omitempty" jsonschema:"enum=backlog,enum=todo,enum=in_progress,enum=in_review,enum=blocked,enum=done,enum=cancelled"`
	Priority *string `json:"priority,omitempty" jsonschema:"enum=critical,enum=high,enum=medium,enum=low"`
	WorkMode *string `json:"workMode,omitempty" jsonschema:"enum=standard,enum=ask,enum=planning,enum=skill_test"`
	// ParentID is an issue of the same company (UUID or identifier).
	ParentID           *string `json:"parentId,omitempty"`
	ProjectID          *string `json:"projectId,omitempty" jsonschema:"format=uuid"`
	ProjectWorkspaceID *string `json:"projectWorkspaceId,omitempty" jsonschema:"format=uuid"`
	GoalID             *string `json:"goalId,omitempty" jsonschema:"format=uuid"`
	// BlockedByIssueIDs are issues of the same company (UUIDs or identifiers) that block this one.
	BlockedByIssueIDs []string `json:"blockedByIssueIds,omitempty"`
	// UnblockDescriptor is {owner: {agentId}|{userId}|"board", action}, only with status blocked.
	UnblockDescriptor json.RawMessage `json:"unblockDescriptor,omitempty"`
	// AssigneeAgentID is an agent UUID or URL key (shortname) of a non-terminated agent of the company.
	AssigneeAgentID   *string  `json:"assigneeAgentId,omitempty"`
	AssigneeUserID    *string  `json:"assigneeUserId,omitempty"`
	ReviewPolicy      *string  `json:"reviewPolicy,omitempty" jsonschema:"enum=anyone,enum=not_creator,enum=human_only"`
	BillingCode       *string  `json:"billingCode,omitempty"`
	LabelIDs          []string `json:"labelIds,omitempty"`
	RequestDepth      *int     `json:"requestDepth,omitempty" jsonschema:"minimum=0"`
	IdempotencyKey    *string  `json:"idempotencyKey,omitempty" jsonschema:"maxLength=255"`
	OriginKind        *string  `json:"originKind,omitempty"`
	OriginID          *string  `json:"originId,omitempty"`
	OriginRunID       *string  `json:"originRunId,omitempty"`
	OriginFingerprint *string  `json:"originFingerprint,omitempty"`
}

// IssueChildCreateBody is the body of POST /api/issues/{id}/children.
type IssueChildCreateBody struct {
	IssueCreateBody
	// AcceptanceCriteria are appended to the description as a checklist.
	AcceptanceCriteria []string `json:"acceptanceCriteria,omitempty"`
	// BlockParentUntilDone makes the child a blocker of the parent.
	BlockParentUntilDone bool `json:"blockParentUntilDone,omitempty"`
}

// IssuePatchBody is the body of PATCH /api/issues/{id}: every field optional; null clears a
// nullable field. Origin fields and the idempotency key are fixed at creation.
type IssuePatchBody struct {
	Title              patchField[string]          `json:"title,omitempty"`
	Description        patchField[string]          `json:"description,omitempty"`
	Status             patchField[string]          `json:"status,omitempty"`
	Priority           patchField[string]          `json:"priority,omitempty"`
	WorkMode           patchField[string]          `json:"workMode,omitempty"`
	ParentID           patchField[string]          `json:"parentId,omitempty"`
	ProjectID          patchField[string]          `json:"projectId,omitempty"`
	ProjectWorkspaceID patchField[string]          `json:"projectWorkspaceId,omitempty"`
	GoalID             patchField[string]          `json:"goalId,omitempty"`
	BlockedByIssueIDs  patchField[[]string]        `json:"blockedByIssueIds,omitempty"`
	UnblockDescriptor  patchField[json.RawMessage] `json:"unblockDescriptor,omitempty"`
	AssigneeAgentID    patchField[string]          `json:"assigneeAgentId,omitempty"`
	AssigneeUserID     patchField[string]          `json:"assigneeUserId,omitempty"`
	ReviewPolicy       patchField[string]          `json:"reviewPolicy,omitempty"`
	BillingCode        patchField[string]          `json:"billingCode,omitempty"`
	LabelIDs           patchField[[]string]        `json:"labelIds,omitempty"`
	RequestDepth       patchField[int]             `json:"requestDepth,omitempty"`
	// Comment adds a comment in the same call.
	Comment *string `json:"comment,omitempty"`
}

// IssueView is an issue as routes return it: the row plus its labels, and on single-issue
// responses its blockers and the issues it blocks.
type IssueView struct {
	*Issue
	Labels    []Label       `json:"labels"`
	LabelIDs  []string      `json:"labelIds"`
	BlockedBy *[]IssueBrief `json:"blockedBy,omitempty"`
	Blocks    *[]IssueBrief `json:"blocks,omitempty"`
}

// IssueDetail is GET /api/issues/{id}: the view plus ancestors (nearest first), project and goal.
type IssueDetail struct {
	IssueView
	Ancestors []IssueBrief       `json:"ancestors"`
	Project   *IssueProjectBrief `json:"project"`
	Goal      *IssueGoalBrief    `json:"goal"`
}

// IssueChange is one changed field: its old and new value.
type IssueChange struct {
	From any `json:"from"`
	To   any `json:"to"`
}

// IssuePatchResult is the PATCH response: the view, the changes and the added comment.
type IssuePatchResult struct {
	IssueView
	Changes map[string]IssueChange `json:"changes"`
	Comment *Comment               `json:"comment,omitempty"`
}

func init() {
	addRoutes(
		route{Method: "POST", Path: "/api/companies/{companyId}/issues", Status: http.StatusCreated, Response: new(IssueView), CompanyFromPath: true,
			Summary: "Create an issue (201; 200 with the existing issue for a repeated idempotencyKey)", Body: IssueCreateBody{},
			Handle: (*Work).issueCreateRoute},
		route{Method: "GET", Path: "/api/companies/{companyId}/issues", Query: issueListQuery{}, Response: new([]IssueView), CompanyFromPath: true,
			Summary: "List a company's issues (filters status, assigneeAgentId ('null' = unassigned), assigneeUserId, projectId, " +
				"parentId, goalId, labelId, q, originKind, originKindPrefix, originId, includeRoutineExecutions; sortField " +
				"updatedAt|createdAt|priority|status, sortDir; limit 1-500 default 50, offset)",
			Cache: true, Handle: (*Work).issueListRoute},
		route{Method: "GET", Path: "/api/companies/{companyId}/issues/count", Query: issueListQuery{}, Response: new(map[string]int), CompanyFromPath: true,
			Summary: "Count a company's issues with the list filters", Cache: true, Handle: (*Work).issueCountRoute},
		route{Method: "GET", Path: "/api/issues/{id}", Response: new(IssueDetail),
			Summary: "Get an issue by UUID or identifier with labels, blockers, blocked issues, ancestors, project and goal",
			Handle:  (*Work).issueGetRoute},
		route{Method: "PATCH", Path: "/api/issues/{id}", Response: new(IssuePatchResult),
			Summary: "Update an issue (status moves follow the transition table; comment adds a comment)", Body: IssuePatchBody{},
			Handle: (*Work).issuePatchRoute},
		route{Method: "DELETE", Path: "/api/issues/{id}", Response: new(Issue), Access: sdk.AccessBoard,
			Summary: "Delete an issue; its children lose their parent", Handle: (*Work).issueDeleteRoute},
		route{Method: "POST", Path: "/api/issues/{id}/children", Status: http.StatusCreated, Response: new(IssueView),
			Summary: "Create a child issue (acceptanceCriteria, blockParentUntilDone)", Body: IssueChildCreateBody{},
			Handle: (*Work).issueChildCreateRoute},
	)
}

// --- routes -------------------------------------------------------------------------------

func (w *Work) issueCreateRoute(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var body IssueCreateBody
	if err := decodeBody(r, &body); err != nil {
		w.writeErr(rw, err)
		return
	}
	view, created, err := w.issueCreate(ctx, sdk.CompanyIDFrom(ctx), &body, nil)
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	st := http.StatusCreated
	if !created {
		st = http.StatusOK
	}
	sdk.WriteJSON(rw, st, view)
}

func (w *Work) issueChildCreateRoute(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	parent, err := w.issueByRef(ctx, r.PathValue("id"))
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	var body IssueChildCreateBody
	if err := decodeBody(r, &body); err != nil {
		w.writeErr(rw, err)
		return
	}
	if body.ParentID != nil && *body.ParentID != parent.ID && !strings.EqualFold(*body.ParentID, parent.Identifier) {
		w.writeErr(rw, invalid("parentId", "is the issue of the route"))
		return
	}
	body.ParentID = &parent.ID
	view, created, err := w.issueCreate(ctx, parent.CompanyID, &body.IssueCreateBody, &issueChildExtra{
		Parent: parent, AcceptanceCriteria: body.AcceptanceCriteria, BlockParentUntilDone: body.BlockParentUntilDone,
	})
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	st := http.StatusCreated
	if !created {
		st = http.StatusOK
	}
	sdk.WriteJSON(rw, st, view)
}

func (w *Work) issueListRoute(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	p, err := issueListParamsFrom(sdk.CompanyIDFrom(ctx), r.URL.Query())
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	views, err := w.issueList(ctx, p)
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, views)
}

func (w *Work) issueCountRoute(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	p, err := issueListParamsFrom(sdk.CompanyIDFrom(ctx), r.URL.Query())
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	n, err := newIssueStore(w.db).IssueCount(ctx, p)
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, map[string]int{"count": n})
}

func (w *Work) issueGetRoute(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	iss, err := w.issueByRef(ctx, r.PathValue("id"))
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	d, err := w.issueDetail(ctx, iss)
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, d)
}

func (w *Work) issuePatchRoute(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	iss, err := w.issueByRef(ctx, r.PathValue("id"))
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	var body IssuePatchBody
	if err := decodeBody(r, &body); err != nil {
		w.writeErr(rw, err)
		return
	}
	res, err := w.issueUpdate(ctx, iss, &body)
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, res)
}

func (w *Work) issueDeleteRoute(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	iss, err := w.issueByRef(ctx, r.PathValue("id"))
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	st := newIssueStore(w.db)
	// Issues this one blocks may become ready once it is gone.
	ready, err := st.IssueDependentsReady(ctx, &IssueDependentsReadyParams{BlockerID: iss.ID, IgnoreBlocker: true})
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	deleted, err := st.IssueDelete(ctx, &IssueDeleteParams{ID: iss.ID})
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	w.removeAttachmentFiles(deleted.AttachmentPaths)
	w.activityOrLog(ctx, iss.CompanyID, "issue.deleted", "issue", iss.ID, map[string]any{"identifier": iss.Identifier, "title": iss.Title})
	w.wakeUnblocked(ctx, iss, ready)
	sdk.WriteJSON(rw, http.StatusOK, iss)
}

// --- list ---------------------------------------------------------------------------------

// issueListParamsFrom validates list query parameters (400 Validation error naming each bad one).
func issueListParamsFrom(companyID string, q url.Values) (*IssueListParams, error) {
	p := &IssueListParams{CompanyID: companyID, SortField: "updatedAt", SortDir: "desc"}
	var details []validationDetail
	bad := func(path, msg string) { details = append(details, validationDetail{Path: path, Message: msg}) }
	uuidParam := func(name string) string {
		v := strings.TrimSpace(q.Get(name))
		if v != "" && !isUUID(v) {
			bad(name, "must be a UUID")
			return ""
		}
		return v
	}
	textParam := func(name string) string {
		v := strings.TrimSpace(q.Get(name))
		if utf8.RuneCountInString(v) > issueShortTextMax {
			bad(name, fmt.Sprintf("must be at most %d characters", issueShortTextMax))
			return ""
		}
		return v
	}
	boolParam := func(name string) *bool {
		switch strings.ToLower(strings.TrimSpace(q.Get(name))) {
		case "":
			return nil
		case "true", "1":
			t := true
			return &t
		case "false", "0":
			f := false
			return &f
		}
		bad(name, "must be true or false")
		return nil
	}
	if s := strings.TrimSpace(q.Get("status")); s != "" {
		for _, st := range strings.Split(s, ",") {
			st = strings.TrimSpace(st)
			if !isIssueStatus(st) {
				bad("status", fmt.Sprintf("unknown status %q", st))
				continue
			}
			if !slices.Contains(p.Statuses, st) {
				p.Statuses = append(p.Statuses, st)
			}
		}
	}
	if v := strings.TrimSpace(q.Get("assigneeAgentId")); strings.EqualFold(v, "null") {
		p.Unassigned = true
	} else {
		p.AssigneeAgentID = uuidParam("assigneeAgentId")
	}
	p.AssigneeUserID = textParam("assigneeUserId")
	p.ProjectID = uuidParam("projectId")
	parentName := "parentId"
	if q.Get(parentName) == "" && q.Get("parentIssueId") != "" {
		parentName = "parentIssueId"
	}
	if v := strings.TrimSpace(q.Get(parentName)); strings.EqualFold(v, "null") {
		p.TopLevel = true
	} else {
		p.ParentID = uuidParam(parentName)
	}
	p.GoalID = uuidParam("goalId")
	p.LabelID = uuidParam("labelId")
	p.Q = strings.TrimSpace(q.Get("q"))
	if utf8.RuneCountInString(p.Q) > issueListQueryMax {
		bad("q", fmt.Sprintf("must be at most %d characters", issueListQueryMax))
	}
	p.OriginKind = textParam("originKind")
	p.OriginKindPrefix = textParam("originKindPrefix")
	p.OriginID = textParam("originId")
	if inc := boolParam("includeRoutineExecutions"); inc != nil && !*inc {
		p.ExcludeRoutineExecutions = true
	}
	if exc := boolParam("excludeRoutineExecutions"); exc != nil && *exc {
		p.ExcludeRoutineExecutions = true
	}
	if v := q.Get("sortField"); v != "" {
		if !slices.Contains(issueSortFields, v) {
			bad("sortField", "must be one of updatedAt, createdAt, priority, status")
		}
		p.SortField = v
	}
	if v := strings.ToLower(q.Get("sortDir")); v != "" {
		if v != "asc" && v != "desc" {
			bad("sortDir", "must be asc or desc")
		}
		p.SortDir = v
	}
	limit, offset, err := page(&http.Request{URL: &url.URL{RawQuery: q.Encode()}}, issueListDefaultLimit, issueListMaxLimit)
	if err != nil {
		var e *sdk.Error
		if errors.As(err, &e) {
			if d, ok := e.Details.([]validationDetail); ok {
				details = append(details, d...)
			}
		}
	}
	p.Limit, p.Offset = limit, offset
	if len(details) > 0 {
		return nil, validationError(details...)
	}
	return p, nil
}

// issueList returns a page of issue views (labels included).
func (w *Work) issueList(ctx context.Context, p *IssueListParams) ([]IssueView, error) {
	list, err := newIssueStore(w.db).IssueList(ctx, w.pool, p)
	if err != nil {
		return nil, err
	}
	return w.issueViews(ctx, list)
}

// --- views --------------------------------------------------------------------------------

// issueViews adds labels to issues.
func (w *Work) issueViews(ctx context.Context, list []*Issue) ([]IssueView, error) {
	ids := make([]string, len(list))
	for i, iss := range list {
		ids[i] = iss.ID
	}
	labels, err := newIssueStore(w.db).IssueLabelsListPool(ctx, w.pool, &IssueLabelsListParams{IssueIDs: ids})
	if err != nil {
		return nil, err
	}
	out := make([]IssueView, len(list))
	for i, iss := range list {
		ls := labels[iss.ID]
		if ls == nil {
			ls = []Label{}
		}
		v := IssueView{Issue: iss, Labels: ls, LabelIDs: make([]string, len(ls))}
		for j, l := range ls {
			v.LabelIDs[j] = l.ID
		}
		out[i] = v
	}
	return out, nil
}

// issueView returns one issue with labels, blockers and the issues it blocks.
func (w *Work) issueView(ctx context.Context, iss *Issue) (*IssueView, error) {
	views, err := w.issueViews(ctx, []*Issue{iss})
	if err != nil {
		return nil, err
	}
	v := views[0]
	st := newIssueStore(w.db)
	blockers, err := st.IssueBlockersList(ctx, &IssueBlockersListParams{IssueID: iss.ID})
	if err != nil {
		return nil, err
	}
	by := make([]IssueBrief, len(blockers))
	for i, b := range blockers {
		by[i] = b.IssueBrief
	}
	blocks, err := st.IssueBlocksList(ctx, &IssueBlocksListParams{IssueID: iss.ID})
	if err != nil {
		return nil, err
	}
	v.BlockedBy, v.Blocks = &by, &blocks
	return &v, nil
}

// issueDetail is the single-issue response.
func (w *Work) issueDetail(ctx context.Context, iss *Issue) (*IssueDetail, error) {
	v, err := w.issueView(ctx, iss)
	if err != nil {
		return nil, err
	}
	st := newIssueStore(w.db)
	anc, err := st.IssueAncestorsList(ctx, &IssueAncestorsListParams{IssueID: iss.ID})
	if err != nil {
		return nil, err
	}
	proj, goal, err := st.IssueRelatedBriefs(ctx, &IssueRelatedBriefsParams{ProjectID: issueDeref(iss.ProjectID), GoalID: issueDeref(iss.GoalID)})
	if err != nil {
		return nil, err
	}
	return &IssueDetail{IssueView: *v, Ancestors: anc, Project: proj, Goal: goal}, nil
}

func issueDeref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// --- create -------------------------------------------------------------------------------

// issueChildExtra carries what POST /api/issues/{id}/children adds to a create.
type issueChildExtra struct {
	Parent               *Issue
	AcceptanceCriteria   []string
	BlockParentUntilDone bool
}

// issueCreate validates and creates an issue in a company; created is false when an issue
// with the same idempotency key already existed (it is returned unchanged).
func (w *Work) issueCreate(ctx context.Context, companyID string, body *IssueCreateBody, child *issueChildExtra) (*IssueView, bool, error) {
	actor := sdk.ActorFrom(ctx)
	st := newIssueStore(w.db)
	if err := issueCreateValidate(body, child); err != nil {
		return nil, false, err
	}
	if body.IdempotencyKey != nil {
		existing, err := st.IssueGetByIdempotencyKey(ctx, &IssueGetByIdempotencyKeyParams{CompanyID: companyID, Key: *body.IdempotencyKey})
		if err != nil {
			return nil, false, err
		}
		if existing != nil {
			v, err := w.issueView(ctx, existing)
			return v, false, err
		}
	}
	iss := &Issue{
		ID: uuid.NewString(), CompanyID: companyID, Title: strings.TrimSpace(body.Title), Description: body.Description,
		Priority: "medium", WorkMode: "standard", ReviewPolicy: body.ReviewPolicy, BillingCode: body.BillingCode,
		IdempotencyKey: body.IdempotencyKey, OriginKind: "manual", OriginID: body.OriginID, OriginRunID: body.OriginRunID,
		OriginFingerprint: body.OriginFingerprint, UnblockDescriptor: body.UnblockDescriptor, AssigneeUserID: body.AssigneeUserID,
	}
	if body.Priority != nil {
		iss.Priority = *body.Priority
	}
	if body.WorkMode != nil {
		iss.WorkMode = *body.WorkMode
	}
	if body.OriginKind != nil {
		iss.OriginKind = *body.OriginKind
	}
	if body.RequestDepth != nil {
		iss.RequestDepth = *body.RequestDepth
	}
	switch actor.Type {
	case "agent":
		iss.CreatedByAgentID = issueStrPtr(actor.AgentId)
	case "board":
		iss.CreatedByUserID = issueStrPtr(actor.UserId)
		iss.ResponsibleUserID = issueStrPtr(actor.UserId)
	}
	// References.
	if child != nil {
		iss.ParentID = &child.Parent.ID
		if body.ProjectID == nil {
			iss.ProjectID = child.Parent.ProjectID
		}
		if body.GoalID == nil {
			iss.GoalID = child.Parent.GoalID
		}
		if body.RequestDepth == nil {
			iss.RequestDepth = child.Parent.RequestDepth + 1
		}
		if iss.ResponsibleUserID == nil {
			iss.ResponsibleUserID = child.Parent.ResponsibleUserID
		}
		if len(child.AcceptanceCriteria) > 0 {
			var b strings.Builder
			if iss.Description != nil && strings.TrimSpace(*iss.Description) != "" {
				b.WriteString(strings.TrimRight(*iss.Description, "\n"))
				b.WriteString("\n\n")
			}
			b.WriteString("## Acceptance criteria\n\n")
			for _, c := range child.AcceptanceCriteria {
				b.WriteString("- [ ] " + strings.TrimSpace(c) + "\n")
			}
			iss.Description = issueStrPtr(b.String())
		}
	} else if body.ParentID != nil {
		parent, err := w.issueRefInCompany(ctx, companyID, *body.ParentID, "Parent issue")
		if err != nil {
			return nil, false, err
		}
		iss.ParentID = &parent.ID
	}
	if body.ProjectID != nil {
		iss.ProjectID = body.ProjectID
	}
	if body.GoalID != nil {
		iss.GoalID = body.GoalID
	}
	iss.ProjectWorkspaceID = body.ProjectWorkspaceID
	if err := w.issueCheckRefs(ctx, companyID, iss.ProjectID, iss.ProjectWorkspaceID, iss.GoalID); err != nil {
		return nil, false, err
	}
	blockerIDs, err := w.issueBlockerRefs(ctx, companyID, body.BlockedByIssueIDs)
	if err != nil {
		return nil, false, err
	}
	labelIDs, err := w.issueCheckLabels(ctx, companyID, body.LabelIDs)
	if err != nil {
		return nil, false, err
	}
	if body.AssigneeAgentID != nil {
		ag, err := w.issueAssigneeAgent(ctx, companyID, *body.AssigneeAgentID)
		if err != nil {
			return nil, false, err
		}
		iss.AssigneeAgentID = &ag.Id
	}
	if err := w.issueAssignCheck(ctx, companyID, issueDeref(iss.AssigneeAgentID), issueDeref(iss.AssigneeUserID)); err != nil {
		return nil, false, err
	}
	statusTo := StatusBacklog
	if iss.AssigneeAgentID != nil || iss.AssigneeUserID != nil {
		statusTo = StatusTodo
	}
	if body.Status != nil {
		statusTo = *body.Status
	}
	issueStatusStamps(iss, statusTo, time.Now().UTC())
	// Number and insert.
	iss.IssueNumber, iss.Identifier, err = w.numbers.next(ctx, companyID, w.issueNumbersReserve)
	if err != nil {
		if status.Code(err) == codes.NotFound {
			return nil, false, notFound("Company not found")
		}
		return nil, false, fmt.Errorf("error numbering issue: %w", err)
	}
	// A plain issue has no labels and no blocker edges: it is one row, and its view needs no reads.
	plain := len(labelIDs) == 0 && len(blockerIDs) == 0 && (child == nil || !child.BlockParentUntilDone)
	var fx effects
	if plain && !idem.Keyed(ctx) && w.pool != nil {
		err = w.issueInsertBatch(ctx, &fx, companyID, iss, child)
	} else {
		err = w.issueInsertTx(ctx, &fx, companyID, iss, labelIDs, blockerIDs, child)
	}
	if err != nil {
		if body.IdempotencyKey != nil && issueUniqueViolation(err, "issues_idempotency_key") {
			existing, gerr := st.IssueGetByIdempotencyKey(ctx, &IssueGetByIdempotencyKeyParams{CompanyID: companyID, Key: *body.IdempotencyKey})
			if gerr == nil && existing != nil {
				v, verr := w.issueView(ctx, existing)
				return v, false, verr
			}
		}
		return nil, false, err
	}
	w.deliver(ctx, &fx)
	if plain {
		return &IssueView{Issue: iss, Labels: []Label{}, LabelIDs: []string{}, BlockedBy: &[]IssueBrief{}, Blocks: &[]IssueBrief{}}, true, nil
	}
	v, err := w.issueView(ctx, iss)
	return v, true, err
}

// issueInsertBatch writes a new issue that has no labels and no blocker edges, with its
// activity entries and wake in the outbox, in one round trip: the statements go as one
// batch outside a transaction, which PostgreSQL runs as one implicit transaction, so they
// commit together or not at all (a BEGIN and a COMMIT would be two more round trips).
func (w *Work) issueInsertBatch(ctx context.Context, fx *effects, companyID string, iss *Issue, child *issueChildExtra) error {
	b := &pgx.Batch{}
	b.Queue(issueInsertSQL(), issueInsertArgs(iss)...).QueryRow(func(row pgx.Row) error {
		return row.Scan(&iss.CreatedAt, &iss.UpdatedAt)
	})
	if err := w.issueCreatedEffectsOn(ctx, b, fx, companyID, iss, nil, child); err != nil {
		return err
	}
	if err := w.pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("error inserting issue: %w", err)
	}
	return nil
}

// issueInsertTx writes a new issue with its labels and blocker edges, its activity entries
// and wake in the outbox, and the Idempotency-Key's answer, in one transaction.
func (w *Work) issueInsertTx(ctx context.Context, fx *effects, companyID string, iss *Issue, labelIDs, blockerIDs []string, child *issueChildExtra) error {
	return w.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		ts := newIssueStore(tx)
		if err := ts.IssueInsert(ctx, &IssueInsertParams{Issue: iss}); err != nil {
			return err
		}
		if len(labelIDs) > 0 {
			if err := ts.IssueLabelsReplace(ctx, &IssueLabelsReplaceParams{CompanyID: companyID, IssueID: iss.ID, LabelIDs: labelIDs}); err != nil {
				return err
			}
		}
		if len(blockerIDs) > 0 || (child != nil && child.BlockParentUntilDone) {
			// A new issue has no edges yet, so no cycle can form; the lock orders this write
			// with concurrent blocker edits of the company.
			if err := ts.IssueBlockersLock(ctx, &IssueBlockersLockParams{CompanyID: companyID}); err != nil {
				return err
			}
		}
		if len(blockerIDs) > 0 {
			if _, _, err := ts.IssueBlockersReplace(ctx, &IssueBlockersReplaceParams{CompanyID: companyID, IssueID: iss.ID,
				BlockerIDs: blockerIDs, CreatedByAgentID: iss.CreatedByAgentID, CreatedByUserID: iss.CreatedByUserID}); err != nil {
				return err
			}
		}
		if child != nil && child.BlockParentUntilDone {
			if err := ts.IssueBlockerAdd(ctx, &IssueBlockerAddParams{CompanyID: companyID, BlockerID: iss.ID, IssueID: child.Parent.ID,
				CreatedByAgentID: iss.CreatedByAgentID, CreatedByUserID: iss.CreatedByUserID}); err != nil {
				return err
			}
		}
		// The entries and the assignee's wake commit with the issue (sdk/outbox).
		if err := w.issueCreatedEffectsTx(ctx, tx, fx, companyID, iss, blockerIDs, child); err != nil {
			return err
		}
		return idem.Record(ctx, tx, http.StatusCreated, "/api/issues/"+iss.ID)
	})
}

func issueStrPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// issueCreateValidate checks the create body's own fields (400 Validation error).
func issueCreateValidate(b *IssueCreateBody, child *issueChildExtra) error {
	var d []validationDetail
	bad := func(path, msg string) { d = append(d, validationDetail{Path: path, Message: msg}) }
	title := strings.TrimSpace(b.Title)
	switch {
	case title == "":
		bad("title", "is required")
	case utf8.RuneCountInString(title) > issueTitleMax:
		bad("title", fmt.Sprintf("must be at most %d characters", issueTitleMax))
	}
	if b.Description != nil && utf8.RuneCountInString(*b.Description) > issueDescriptionMax {
		bad("description", fmt.Sprintf("must be at most %d characters", issueDescriptionMax))
	}
	enum := func(path string, v *string, allowed []string) {
		if v != nil && !slices.Contains(allowed, *v) {
			bad(path, "must be one of "+strings.Join(allowed, ", "))
		}
	}
	enum("status", b.Status, issueStatuses)
	enum("priority", b.Priority, issuePriorities)
	enum("workMode", b.WorkMode, issueWorkModes)
	enum("reviewPolicy", b.ReviewPolicy, issueReviewPolicy)
	uuidField := func(path string, v *string) {
		if v != nil && !isUUID(*v) {
			bad(path, "must be a UUID")
		}
	}
	uuidField("projectId", b.ProjectID)
	uuidField("projectWorkspaceId", b.ProjectWorkspaceID)
	uuidField("goalId", b.GoalID)
	for i, id := range b.LabelIDs {
		if !isUUID(id) {
			bad(fmt.Sprintf("labelIds.%d", i), "must be a UUID")
		}
	}
	for i, id := range b.BlockedByIssueIDs {
		if strings.TrimSpace(id) == "" {
			bad(fmt.Sprintf("blockedByIssueIds.%d", i), "must be an issue id or identifier")
		}
	}
	if b.ParentID != nil && strings.TrimSpace(*b.ParentID) == "" {
		bad("parentId", "must be an issue id or identifier")
	}
	if b.AssigneeAgentID != nil && strings.TrimSpace(*b.AssigneeAgentID) == "" {
		bad("assigneeAgentId", "must be an agent id or URL key")
	}
	if b.AssigneeUserID != nil && (*b.AssigneeUserID == "" || len(*b.AssigneeUserID) > issueShortTextMax) {
		bad("assigneeUserId", "must be a user id")
	}
	if b.AssigneeAgentID != nil && b.AssigneeUserID != nil {
		bad("assigneeUserId", "an issue is assigned to an agent or a user, not both")
	}
	if b.RequestDepth != nil && (*b.RequestDepth < 0 || *b.RequestDepth > 1000) {
		bad("requestDepth", "must be between 0 and 1000")
	}
	if b.IdempotencyKey != nil && (*b.IdempotencyKey == "" || len(*b.IdempotencyKey) > issueIdempotencyKeyMax) {
		bad("idempotencyKey", fmt.Sprintf("must be 1 to %d characters", issueIdempotencyKeyMax))
	}
	if b.OriginKind != nil && (*b.OriginKind == "" || len(*b.OriginKind) > issueShortTextMax) {
		bad("originKind", fmt.Sprintf("must be 1 to %d characters", issueShortTextMax))
	}
	for path, v := range map[string]*string{"originId": b.OriginID, "originRunId": b.OriginRunID,
		"originFingerprint": b.OriginFingerprint, "billingCode": b.BillingCode} {
		if v != nil && len(*v) > issueShortTextMax {
			bad(path, fmt.Sprintf("must be at most %d characters", issueShortTextMax))
		}
	}
	if len(b.UnblockDescriptor) > 0 && string(b.UnblockDescriptor) != "null" {
		if b.Status == nil || *b.Status != StatusBlocked {
			bad("unblockDescriptor", "is only allowed with status blocked")
		} else if msg := unblockDescriptorCheck(b.UnblockDescriptor); msg != "" {
			bad("unblockDescriptor", msg)
		}
	} else {
		b.UnblockDescriptor = nil
	}
	if child != nil {
		for i, c := range child.AcceptanceCriteria {
			if strings.TrimSpace(c) == "" || utf8.RuneCountInString(c) > 2000 {
				bad(fmt.Sprintf("acceptanceCriteria.%d", i), "must be 1 to 2000 characters")
			}
		}
	}
	if len(d) > 0 {
		return validationError(d...)
	}
	return nil
}

// unblockDescriptorCheck validates {owner: {agentId}|{userId}|"board", action} and returns
// a message, or "" when valid.
func unblockDescriptorCheck(raw json.RawMessage) string {
	var ud struct {
		Owner  json.RawMessage `json:"owner"`
		Action *string         `json:"action"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&ud); err != nil {
		return "must be {owner, action}"
	}
	if ud.Action == nil || strings.TrimSpace(*ud.Action) == "" || len(*ud.Action) > 2000 {
		return "action is required (at most 2000 characters)"
	}
	var board string
	if json.Unmarshal(ud.Owner, &board) == nil {
		if board == "board" {
			return ""
		}
		return `owner must be "board", {agentId} or {userId}`
	}
	var o struct {
		AgentID *string `json:"agentId"`
		UserID  *string `json:"userId"`
	}
	if err := json.Unmarshal(ud.Owner, &o); err != nil || (o.AgentID == nil) == (o.UserID == nil) {
		return `owner must be "board", {agentId} or {userId}`
	}
	if o.AgentID != nil && !isUUID(*o.AgentID) {
		return "owner.agentId must be a UUID"
	}
	return ""
}

// --- references ---------------------------------------------------------------------------

// issueRefInCompany resolves an issue reference (UUID or identifier) that must be an issue
// of the company; what names the role in the 422 message ("Parent issue").
func (w *Work) issueRefInCompany(ctx context.Context, companyID, ref, what string) (*Issue, error) {
	iss, err := w.issueGet(ctx, nil, strings.TrimSpace(ref))
	if err != nil {
		return nil, err
	}
	if iss == nil {
		return nil, unprocessable(what + " not found")
	}
	if iss.CompanyID != companyID {
		return nil, unprocessable(what + " must belong to the same company")
	}
	return iss, nil
}

// issueBlockerRefs resolves blocker references to ids of issues of the company, without
// duplicates (422 when any is missing or elsewhere).
func (w *Work) issueBlockerRefs(ctx context.Context, companyID string, refs []string) ([]string, error) {
	out := []string{}
	var uuids []string
	for _, ref := range refs {
		ref = strings.TrimSpace(ref)
		if isUUID(ref) {
			uuids = append(uuids, strings.ToLower(ref))
			continue
		}
		iss, err := w.issueGet(ctx, nil, ref)
		if err != nil {
			return nil, err
		}
		if iss == nil || iss.CompanyID != companyID {
			return nil, unprocessable("One or more blocker issues do not belong to company")
		}
		uuids = append(uuids, iss.ID)
	}
	for _, id := range uuids {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	found, err := newIssueStore(w.db).IssueIDsInCompany(ctx, &IssueIDsInCompanyParams{CompanyID: companyID, IDs: out})
	if err != nil {
		return nil, err
	}
	if len(found) != len(out) {
		return nil, unprocessable("One or more blocker issues do not belong to company")
	}
	return out, nil
}

// issueCheckLabels checks that label ids are labels of the company and drops duplicates.
func (w *Work) issueCheckLabels(ctx context.Context, companyID string, ids []string) ([]string, error) {
	out := []string{}
	for _, id := range ids {
		id = strings.ToLower(id)
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	n, err := newIssueStore(w.db).LabelIDsInCompany(ctx, &LabelIDsInCompanyParams{CompanyID: companyID, IDs: out})
	if err != nil {
		return nil, err
	}
	if n != len(out) {
		return nil, unprocessable("One or more labels do not belong to company")
	}
	return out, nil
}

// issueCheckRefs checks that the project, workspace (of that project when both are given)
// and goal exist in the company (422).
func (w *Work) issueCheckRefs(ctx context.Context, companyID string, projectID, workspaceID, goalID *string) error {
	st := &issueStore{db: w.db, pool: w.pool}
	check := func(table, id, projectID, msg string) error {
		ok, err := st.IssueRefExists(ctx, &IssueRefExistsParams{Table: table, CompanyID: companyID, ID: id, ProjectID: projectID})
		if err != nil {
			return err
		}
		if !ok {
			return unprocessable(msg)
		}
		return nil
	}
	if projectID != nil {
		if err := check("projects", *projectID, "", "Project not found in company"); err != nil {
			return err
		}
	}
	if workspaceID != nil {
		if err := check("project_workspaces", *workspaceID, issueDeref(projectID), "Project workspace not found in company"); err != nil {
			return err
		}
	}
	if goalID != nil {
		if err := check("goals", *goalID, "", "Goal not found in company"); err != nil {
			return err
		}
	}
	return nil
}

// issueAssigneeAgent resolves an agent UUID or URL key (case-insensitive) to a
// non-terminated agent of the company (422 otherwise).
func (w *Work) issueAssigneeAgent(ctx context.Context, companyID, ref string) (*hostv1.AgentIdentity, error) {
	ref = strings.TrimSpace(ref)
	var ag *hostv1.AgentIdentity
	if isUUID(ref) {
		a, err := w.host.Principals.GetAgent(ctx, &hostv1.GetAgentRequest{AgentId: ref})
		if err != nil && status.Code(err) != codes.NotFound {
			return nil, fmt.Errorf("error reading agent %s: %w", ref, err)
		}
		ag = a
	} else {
		res, err := w.host.Principals.ListAgents(ctx, &hostv1.ListAgentsRequest{CompanyId: companyID})
		if err != nil {
			return nil, fmt.Errorf("error listing agents of company %s: %w", companyID, err)
		}
		for _, a := range res.Agents {
			if strings.EqualFold(a.UrlKey, ref) {
				ag = a
				break
			}
		}
	}
	if ag == nil || ag.CompanyId != companyID {
		return nil, unprocessable("Assignee agent not found in company")
	}
	switch ag.Status {
	case "terminated":
		return nil, unprocessable("Cannot assign issues to a terminated agent")
	case "pending_approval":
		return nil, unprocessable("Cannot assign issues to an agent pending approval")
	}
	return ag, nil
}

// issueAssignCheck requires tasks:assign to assign an issue to anyone but the caller
// (system actors, other extensions acting on their own, are trusted).
func (w *Work) issueAssignCheck(ctx context.Context, companyID, agentID, userID string) error {
	a := sdk.ActorFrom(ctx)
	if a.Type == "system" || (agentID == "" && userID == "") {
		return nil
	}
	if (a.Type == "agent" && userID == "" && agentID == a.AgentId) || (a.Type == "board" && agentID == "" && userID == a.UserId) {
		return nil
	}
	return w.requirePermission(ctx, companyID, "tasks:assign")
}

// --- update -------------------------------------------------------------------------------

// issuePatchValidate checks the patch body's own fields (400 Validation error).
func issuePatchValidate(b *IssuePatchBody) error {
	var d []validationDetail
	bad := func(path, msg string) { d = append(d, validationDetail{Path: path, Message: msg}) }
	notNull := func(path string, set, null bool) {
		if set && null {
			bad(path, "cannot be null")
		}
	}
	notNull("title", b.Title.Set, b.Title.Null)
	notNull("status", b.Status.Set, b.Status.Null)
	notNull("priority", b.Priority.Set, b.Priority.Null)
	notNull("workMode", b.WorkMode.Set, b.WorkMode.Null)
	notNull("requestDepth", b.RequestDepth.Set, b.RequestDepth.Null)
	if b.Title.Set && !b.Title.Null {
		t := strings.TrimSpace(b.Title.Value)
		if t == "" {
			bad("title", "is required")
		} else if utf8.RuneCountInString(t) > issueTitleMax {
			bad("title", fmt.Sprintf("must be at most %d characters", issueTitleMax))
		}
	}
	if b.Description.Set && utf8.RuneCountInString(b.Description.Value) > issueDescriptionMax {
		bad("description", fmt.Sprintf("must be at most %d characters", issueDescriptionMax))
	}
	enum := func(path string, o patchField[string], allowed []string) {
		if o.Set && !o.Null && !slices.Contains(allowed, o.Value) {
			bad(path, "must be one of "+strings.Join(allowed, ", "))
		}
	}
	enum("status", b.Status, issueStatuses)
	enum("priority", b.Priority, issuePriorities)
	enum("workMode", b.WorkMode, issueWorkModes)
	enum("reviewPolicy", b.ReviewPolicy, issueReviewPolicy)
	for path, o := range map[string]patchField[string]{"projectId": b.ProjectID, "projectWorkspaceId": b.ProjectWorkspaceID, "goalId": b.GoalID} {
		if o.Set && !o.Null && !isUUID(o.Value) {
			bad(path, "must be a UUID")
		}
	}
	for i, id := range b.LabelIDs.Value {
		if !isUUID(id) {
			bad(fmt.Sprintf("labelIds.%d", i), "must be a UUID")
		}
	}
	if b.AssigneeAgentID.Set && !b.AssigneeAgentID.Null && strings.TrimSpace(b.AssigneeAgentID.Value) == "" {
		bad("assigneeAgentId", "must be an agent id or URL key")
	}
	if b.AssigneeUserID.Set && !b.AssigneeUserID.Null && (b.AssigneeUserID.Value == "" || len(b.AssigneeUserID.Value) > issueShortTextMax) {
		bad("assigneeUserId", "must be a user id")
	}
	if b.AssigneeAgentID.Set && !b.AssigneeAgentID.Null && b.AssigneeUserID.Set && !b.AssigneeUserID.Null {
		bad("assigneeUserId", "an issue is assigned to an agent or a user, not both")
	}
	if b.RequestDepth.Set && (b.RequestDepth.Value < 0 || b.RequestDepth.Value > 1000) {
		bad("requestDepth", "must be between 0 and 1000")
	}
	if b.BillingCode.Set && len(b.BillingCode.Value) > issueShortTextMax {
		bad("billingCode", fmt.Sprintf("must be at most %d characters", issueShortTextMax))
	}
	if b.UnblockDescriptor.Set && !b.UnblockDescriptor.Null {
		if msg := unblockDescriptorCheck(b.UnblockDescriptor.Value); msg != "" {
			bad("unblockDescriptor", msg)
		}
	}
	if b.ParentID.Set && !b.ParentID.Null && strings.TrimSpace(b.ParentID.Value) == "" {
		bad("parentId", "must be an issue id or identifier")
	}
	// The comment is checked up front so a bad one does not leave the update half done.
	if b.Comment != nil && (strings.TrimSpace(*b.Comment) == "" || utf8.RuneCountInString(*b.Comment) > CommentBodyMaxLen) {
		bad("comment", fmt.Sprintf("must be 1 to %d characters", CommentBodyMaxLen))
	}
	if len(d) > 0 {
		return validationError(d...)
	}
	return nil
}

// issueUpdate applies a PATCH to an issue of a company the caller may reach. The status
// move is checked against the row locked in the transaction, so two concurrent moves cannot
// both pass from the same old status.
func (w *Work) issueUpdate(ctx context.Context, seen *Issue, b *IssuePatchBody) (*IssuePatchResult, error) {
	if err := issuePatchValidate(b); err != nil {
		return nil, err
	}
	companyID := seen.CompanyID
	actor := sdk.ActorFrom(ctx)
	// Resolve references outside the transaction.
	var parentID *string
	if b.ParentID.Set && !b.ParentID.Null {
		p, err := w.issueRefInCompany(ctx, companyID, b.ParentID.Value, "Parent issue")
		if err != nil {
			return nil, err
		}
		if p.ID == seen.ID {
			return nil, unprocessable("An issue cannot be its own parent")
		}
		parentID = &p.ID
	}
	optRef := func(o patchField[string]) *string {
		if o.Set && !o.Null {
			return &o.Value
		}
		return nil
	}
	if ws := optRef(b.ProjectWorkspaceID); ws != nil || optRef(b.ProjectID) != nil || optRef(b.GoalID) != nil {
		// A new workspace must belong to the issue's (new or current) project.
		project := optRef(b.ProjectID)
		if ws != nil && project == nil && !b.ProjectID.Set {
			project = seen.ProjectID
		}
		if err := w.issueCheckRefs(ctx, companyID, project, ws, optRef(b.GoalID)); err != nil {
			return nil, err
		}
	}
	var blockerIDs []string
	if b.BlockedByIssueIDs.Set {
		ids, err := w.issueBlockerRefs(ctx, companyID, b.BlockedByIssueIDs.Value)
		if err != nil {
			return nil, err
		}
		blockerIDs = ids
	}
	var labelIDs []string
	if b.LabelIDs.Set {
		ids, err := w.issueCheckLabels(ctx, companyID, b.LabelIDs.Value)
		if err != nil {
			return nil, err
		}
		labelIDs = ids
	}
	var assigneeAgentID *string
	if b.AssigneeAgentID.Set && !b.AssigneeAgentID.Null {
		ag, err := w.issueAssigneeAgent(ctx, companyID, b.AssigneeAgentID.Value)
		if err != nil {
			return nil, err
		}
		assigneeAgentID = &ag.Id
	}
	var before Issue
	var after *Issue
	var changes map[string]IssueChange
	var blockersAdded, blockersRemoved []string
	var oldLabelIDs []string
	var fx effects
	err := w.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		ts := newIssueStore(tx)
		cur, err := ts.IssueGet(ctx, &IssueGetParams{ID: seen.ID, ForUpdate: true})
		if err != nil {
			return err
		}
		if cur == nil {
			return notFound("Issue not found")
		}
		before = *cur
		next := *cur
		var cols []string
		changes = map[string]IssueChange{}
		set := func(col, field string, from, to any) {
			cols = append(cols, col)
			changes[field] = IssueChange{From: from, To: to}
		}
		if b.Title.Set {
			if t := strings.TrimSpace(b.Title.Value); t != cur.Title {
				next.Title = t
				set("title", "title", cur.Title, t)
			}
		}
		if b.Description.Set {
			var d *string
			if !b.Description.Null {
				d = &b.Description.Value
			}
			if !issueEqStr(d, cur.Description) {
				next.Description = d
				set("description", "description", cur.Description, d)
			}
		}
		if b.Priority.Set && b.Priority.Value != cur.Priority {
			next.Priority = b.Priority.Value
			set("priority", "priority", cur.Priority, next.Priority)
		}
		if b.WorkMode.Set && b.WorkMode.Value != cur.WorkMode {
			next.WorkMode = b.WorkMode.Value
			set("work_mode", "workMode", cur.WorkMode, next.WorkMode)
		}
		optStr := func(o patchField[string], curV *string, col, field string, dst **string) {
			if !o.Set {
				return
			}
			var v *string
			if !o.Null {
				v = &o.Value
			}
			if !issueEqStr(v, curV) {
				*dst = v
				set(col, field, curV, v)
			}
		}
		optStr(b.ReviewPolicy, cur.ReviewPolicy, "review_policy", "reviewPolicy", &next.ReviewPolicy)
		optStr(b.BillingCode, cur.BillingCode, "billing_code", "billingCode", &next.BillingCode)
		optStr(b.ProjectID, cur.ProjectID, "project_id", "projectId", &next.ProjectID)
		optStr(b.ProjectWorkspaceID, cur.ProjectWorkspaceID, "project_workspace_id", "projectWorkspaceId", &next.ProjectWorkspaceID)
		optStr(b.GoalID, cur.GoalID, "goal_id", "goalId", &next.GoalID)
		if b.ParentID.Set && !issueEqStr(parentID, cur.ParentID) {
			if parentID != nil {
				cycle, err := ts.IssueParentCycle(ctx, &IssueParentCycleParams{IssueID: cur.ID, ParentID: *parentID})
				if err != nil {
					return err
				}
				if cycle {
					return unprocessable("Parent cycle detected: an issue cannot become a child of its own descendant")
				}
			}
			next.ParentID = parentID
			set("parent_id", "parentId", cur.ParentID, parentID)
		}
		if b.RequestDepth.Set && b.RequestDepth.Value != cur.RequestDepth {
			next.RequestDepth = b.RequestDepth.Value
			set("request_depth", "requestDepth", cur.RequestDepth, next.RequestDepth)
		}
		// Assignment: a new agent assignee drops the previous checkout and execution locks.
		if b.AssigneeAgentID.Set && !issueEqStr(assigneeAgentID, cur.AssigneeAgentID) {
			next.AssigneeAgentID = assigneeAgentID
			set("assignee_agent_id", "assigneeAgentId", cur.AssigneeAgentID, assigneeAgentID)
			if cur.CheckoutRunID != nil || cur.ExecutionRunID != nil {
				next.CheckoutRunID, next.ExecutionRunID, next.ExecutionAgentNameKey, next.ExecutionLockedAt = nil, nil, nil, nil
				cols = append(cols, "checkout_run_id", "execution_run_id", "execution_agent_name_key", "execution_locked_at")
				changes["checkoutRunId"] = IssueChange{From: cur.CheckoutRunID, To: nil}
			}
			if assigneeAgentID != nil && cur.AssigneeUserID != nil && !b.AssigneeUserID.Set {
				next.AssigneeUserID = nil
				set("assignee_user_id", "assigneeUserId", cur.AssigneeUserID, nil)
			}
		}
		if b.AssigneeUserID.Set {
			var u *string
			if !b.AssigneeUserID.Null {
				u = &b.AssigneeUserID.Value
			}
			if !issueEqStr(u, cur.AssigneeUserID) {
				next.AssigneeUserID = u
				set("assignee_user_id", "assigneeUserId", cur.AssigneeUserID, u)
				if u != nil && next.AssigneeAgentID != nil && !b.AssigneeAgentID.Set {
					next.AssigneeAgentID = nil
					set("assignee_agent_id", "assigneeAgentId", cur.AssigneeAgentID, nil)
				}
			}
		}
		if next.AssigneeAgentID != nil && next.AssigneeUserID != nil {
			return validationError(validationDetail{Path: "assigneeUserId", Message: "an issue is assigned to an agent or a user, not both"})
		}
		if !issueEqStr(next.AssigneeAgentID, cur.AssigneeAgentID) || !issueEqStr(next.AssigneeUserID, cur.AssigneeUserID) {
			if err := w.issueAssignCheck(ctx, companyID, issueDeref(next.AssigneeAgentID), issueDeref(next.AssigneeUserID)); err != nil {
				return err
			}
		}
		// Status.
		statusMoved := b.Status.Set && b.Status.Value != cur.Status
		if statusMoved {
			if err := issueTransitionCheck(cur.Status, b.Status.Value); err != nil {
				return err
			}
			if b.Status.Value == StatusInProgress {
				if err := issueTargetCheck(StatusInProgress, issueTargetState{
					HasAssignee: next.AssigneeAgentID != nil || next.AssigneeUserID != nil}); err != nil {
					return err
				}
			}
			issueStatusStamps(&next, b.Status.Value, time.Now().UTC())
			set("status", "status", cur.Status, next.Status)
			if !issueEqTime(next.StartedAt, cur.StartedAt) {
				set("started_at", "startedAt", cur.StartedAt, next.StartedAt)
			}
			if !issueEqTime(next.CompletedAt, cur.CompletedAt) {
				set("completed_at", "completedAt", cur.CompletedAt, next.CompletedAt)
			}
			if !issueEqTime(next.CancelledAt, cur.CancelledAt) {
				set("cancelled_at", "cancelledAt", cur.CancelledAt, next.CancelledAt)
			}
			if isTerminalIssueStatus(next.Status) && (next.CheckoutRunID != nil || next.ExecutionRunID != nil) {
				// A finished issue holds no run locks.
				next.CheckoutRunID, next.ExecutionRunID, next.ExecutionAgentNameKey, next.ExecutionLockedAt = nil, nil, nil, nil
				cols = append(cols, "checkout_run_id", "execution_run_id", "execution_agent_name_key", "execution_locked_at")
			}
		}
		if b.UnblockDescriptor.Set {
			if !b.UnblockDescriptor.Null {
				if next.Status != StatusBlocked {
					return validationError(validationDetail{Path: "unblockDescriptor", Message: "is only allowed with status blocked"})
				}
				next.UnblockDescriptor = b.UnblockDescriptor.Value
			} else {
				next.UnblockDescriptor = nil
			}
		}
		if !bytes.Equal(next.UnblockDescriptor, cur.UnblockDescriptor) {
			set("unblock_descriptor", "unblockDescriptor", cur.UnblockDescriptor, next.UnblockDescriptor)
		}
		if len(cols) > 0 {
			cols = issueUniq(cols)
			if err := ts.IssueUpdate(ctx, &IssueUpdateParams{Issue: &next, Columns: cols}); err != nil {
				return err
			}
		}
		if b.LabelIDs.Set {
			cl, err := ts.IssueLabelsList(ctx, &IssueLabelsListParams{IssueIDs: []string{cur.ID}})
			if err != nil {
				return err
			}
			oldLabelIDs = []string{}
			for _, l := range cl[cur.ID] {
				oldLabelIDs = append(oldLabelIDs, l.ID)
			}
			if !issueSameSet(oldLabelIDs, labelIDs) {
				if err := ts.IssueLabelsReplace(ctx, &IssueLabelsReplaceParams{CompanyID: companyID, IssueID: cur.ID, LabelIDs: labelIDs}); err != nil {
					return err
				}
				changes["labelIds"] = IssueChange{From: oldLabelIDs, To: labelIDs}
			}
		}
		if b.BlockedByIssueIDs.Set {
			if err := ts.IssueBlockersLock(ctx, &IssueBlockersLockParams{CompanyID: companyID}); err != nil {
				return err
			}
			if err := w.issueBlockerCycleCheck(ctx, ts, cur, blockerIDs); err != nil {
				return err
			}
			var agentID, userID *string
			if actor.Type == "agent" {
				agentID = issueStrPtr(actor.AgentId)
			} else if actor.Type == "board" {
				userID = issueStrPtr(actor.UserId)
			}
			added, removed, err := ts.IssueBlockersReplace(ctx, &IssueBlockersReplaceParams{CompanyID: companyID, IssueID: cur.ID,
				BlockerIDs: blockerIDs, CreatedByAgentID: agentID, CreatedByUserID: userID})
			if err != nil {
				return err
			}
			blockersAdded, blockersRemoved = added, removed
			if len(added)+len(removed) > 0 {
				old := append([]string{}, removed...)
				for _, id := range blockerIDs {
					if !slices.Contains(added, id) {
						old = append(old, id)
					}
				}
				changes["blockedByIssueIds"] = IssueChange{From: old, To: blockerIDs}
			}
		}
		if statusMoved && next.Status == StatusBlocked {
			// Checked last: the patch may add the blockers or the descriptor it needs.
			st := issueTargetState{HasUnblockDescriptor: len(next.UnblockDescriptor) > 0 && string(next.UnblockDescriptor) != "null"}
			if !st.HasUnblockDescriptor {
				unresolved, err := ts.IssueUnresolvedBlockers(ctx, &IssueUnresolvedBlockersParams{IssueID: cur.ID})
				if err != nil {
					return err
				}
				st.HasUnresolvedBlockers = len(unresolved) > 0
			}
			if !st.HasUnblockDescriptor && !st.HasUnresolvedBlockers {
				pending, err := ts.IssuePendingApprovalExists(ctx, &IssuePendingApprovalExistsParams{IssueID: cur.ID})
				if err != nil {
					return err
				}
				st.HasPendingApproval = pending
			}
			if err := issueTargetCheck(StatusBlocked, st); err != nil {
				return err
			}
		}
		after = &next
		// The entries and wakes the update causes commit with it (sdk/outbox).
		if len(changes) > 0 {
			if err := w.activityTx(ctx, tx, &fx, companyID, "issue.updated", "issue", after.ID, map[string]any{
				"identifier": after.Identifier, "changes": changes}); err != nil {
				return err
			}
		}
		if len(blockersAdded)+len(blockersRemoved) > 0 {
			if err := w.activityTx(ctx, tx, &fx, companyID, "issue.relations.updated", "issue", after.ID, map[string]any{
				"identifier": after.Identifier, "blockedByIssueIds": blockerIDs, "added": issueNonNil(blockersAdded),
				"removed": issueNonNil(blockersRemoved)}); err != nil {
				return err
			}
		}
		// Wakes: a new agent assignee; issues this one unblocked by finishing.
		if after.AssigneeAgentID != nil && !issueEqStr(after.AssigneeAgentID, before.AssigneeAgentID) && !isTerminalIssueStatus(after.Status) {
			if err := w.wakeTx(ctx, tx, &fx, &WakeRequest{AgentID: *after.AssigneeAgentID, CompanyID: companyID, Source: "assignment",
				Reason: "issue_assigned", Payload: map[string]any{"issueId": after.ID}}); err != nil {
				return err
			}
		}
		if after.Status == StatusDone && before.Status != StatusDone {
			ready, err := ts.IssueDependentsReady(ctx, &IssueDependentsReadyParams{BlockerID: after.ID})
			if err != nil {
				return err
			}
			for _, wake := range unblockedWakes(after, ready) {
				if err := w.wakeTx(ctx, tx, &fx, wake); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	w.deliver(ctx, &fx)
	res := &IssuePatchResult{Changes: changes}
	if b.Comment != nil {
		c, err := w.commentInsert(ctx, &CommentInsertParams{Issue: after, Body: *b.Comment})
		if err != nil {
			var e *sdk.Error
			if errors.As(err, &e) {
				return nil, err
			}
			return nil, fmt.Errorf("error adding the comment of an issue update: %w", err)
		}
		res.Comment = c
	}
	fresh, err := newIssueStore(w.db).IssueGet(ctx, &IssueGetParams{ID: after.ID})
	if err != nil {
		return nil, err
	}
	if fresh == nil {
		return nil, notFound("Issue not found")
	}
	v, err := w.issueView(ctx, fresh)
	if err != nil {
		return nil, err
	}
	res.IssueView = *v
	return res, nil
}

// wakeUnblocked wakes the assignees of issues that a blocker's completion (or deletion) left
// without unresolved blockers.
func (w *Work) wakeUnblocked(ctx context.Context, blocker *Issue, ready []IssueDependent) {
	for _, wake := range unblockedWakes(blocker, ready) {
		w.wake(ctx, wake)
	}
}

// unblockedWakes are the wakes of the assignees of issues a blocker left ready.
func unblockedWakes(blocker *Issue, ready []IssueDependent) []*WakeRequest {
	var out []*WakeRequest
	for _, d := range ready {
		if d.AssigneeAgentID == nil {
			continue
		}
		out = append(out, &WakeRequest{AgentID: *d.AssigneeAgentID, CompanyID: d.CompanyID, Source: "automation", Reason: "issue_blockers_resolved",
			Payload:        map[string]any{"issueId": d.ID, "resolvedBlockerIssueId": blocker.ID},
			IdempotencyKey: "issue_blockers_resolved:" + d.ID + ":" + blocker.ID})
	}
	return out
}

func issueEqStr(a, b *string) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

func issueEqTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Equal(*b)
}

func issueUniq(in []string) []string {
	out := make([]string, 0, len(in))
	for _, s := range in {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func issueSameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, s := range a {
		if !slices.Contains(b, s) {
			return false
		}
	}
	return true
}

func issueNonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// issueCreatedEffectsTx adds what an issue create causes to the outbox inside its
// transaction: the issue.created entry, relation entries and the assignee's wake.
func (w *Work) issueCreatedEffectsTx(ctx context.Context, tx bun.Tx, fx *effects, companyID string, iss *Issue, blockerIDs []string, child *issueChildExtra) error {
	return w.issueCreatedEffectsOn(ctx, tx.Tx, fx, companyID, iss, blockerIDs, child)
}

// issueCreatedEffectsOn is issueCreatedEffectsTx through any writer the outbox takes.
func (w *Work) issueCreatedEffectsOn(ctx context.Context, db any, fx *effects, companyID string, iss *Issue, blockerIDs []string, child *issueChildExtra) error {
	for _, e := range issueCreatedEntries(companyID, iss, blockerIDs, child) {
		if err := w.activityOn(ctx, db, fx, companyID, e.action, "issue", e.entityID, e.details); err != nil {
			return err
		}
	}
	if wake := issueCreatedWake(companyID, iss); wake != nil {
		return w.wakeOn(ctx, db, fx, wake)
	}
	return nil
}

// issueEntry is one activity entry about an issue.
type issueEntry struct {
	action, entityID string
	details          map[string]any
}

// issueCreatedEntries are the activity entries of an issue create.
func issueCreatedEntries(companyID string, iss *Issue, blockerIDs []string, child *issueChildExtra) []issueEntry {
	out := []issueEntry{{"issue.created", iss.ID, map[string]any{
		"identifier": iss.Identifier, "title": iss.Title, "status": iss.Status, "priority": iss.Priority,
		"assigneeAgentId": iss.AssigneeAgentID, "assigneeUserId": iss.AssigneeUserID, "parentId": iss.ParentID,
		"originKind": iss.OriginKind, "originId": iss.OriginID,
	}}}
	if len(blockerIDs) > 0 {
		out = append(out, issueEntry{"issue.relations.updated", iss.ID, map[string]any{
			"identifier": iss.Identifier, "blockedByIssueIds": blockerIDs, "added": blockerIDs, "removed": []string{}}})
	}
	if child != nil && child.BlockParentUntilDone {
		out = append(out, issueEntry{"issue.relations.updated", child.Parent.ID, map[string]any{
			"identifier": child.Parent.Identifier, "added": []string{iss.ID}, "removed": []string{}}})
	}
	return out
}

// issueCreatedWake is the wake an issue create causes: its agent assignee, unless the issue
// is created finished.
func issueCreatedWake(companyID string, iss *Issue) *WakeRequest {
	if iss.AssigneeAgentID == nil || isTerminalIssueStatus(iss.Status) {
		return nil
	}
	return &WakeRequest{AgentID: *iss.AssigneeAgentID, CompanyID: companyID, Source: "assignment", Reason: "issue_assigned",
		Payload: map[string]any{"issueId": iss.ID}, IdempotencyKey: "issue_assigned:" + iss.ID + ":" + *iss.AssigneeAgentID}
}

// issueListQuery documents the query parameters of the issue list and count.
type issueListQuery struct {
	Status                   string `query:"status" doc:"Comma-separated statuses"`
	AssigneeAgentID          string `query:"assigneeAgentId" doc:"An agent id, or null for unassigned issues"`
	AssigneeUserID           string `query:"assigneeUserId"`
	ProjectID                string `query:"projectId" jsonschema:"format=uuid"`
	ParentID                 string `query:"parentId" doc:"Issues whose parent is this issue id"`
	GoalID                   string `query:"goalId" jsonschema:"format=uuid"`
	LabelID                  string `query:"labelId" jsonschema:"format=uuid"`
	Q                        string `query:"q" doc:"Text search over identifier, title and description"`
	OriginKind               string `query:"originKind"`
	OriginKindPrefix         string `query:"originKindPrefix"`
	OriginID                 string `query:"originId"`
	IncludeRoutineExecutions bool   `query:"includeRoutineExecutions"`
	ExcludeRoutineExecutions bool   `query:"excludeRoutineExecutions"`
	SortField                string `query:"sortField" jsonschema:"enum=updatedAt,enum=createdAt,enum=priority,enum=status"`
	SortDir                  string `query:"sortDir" jsonschema:"enum=asc,enum=desc"`
	Limit                    int    `query:"limit" jsonschema:"minimum=1,maximum=500" doc:"Page size (default 50)"`
	Offset                   int    `query:"offset" jsonschema:"minimum=0"`
}
