package work

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"github.com/keelhq/keel/sdk"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

// Approval types and statuses (REFERENCE 2.5).
const (
	ApprovalTypeHireAgent              = "hire_agent"
	ApprovalTypeApproveCEOStrategy     = "approve_ceo_strategy"
	ApprovalTypeBudgetOverrideRequired = "budget_override_required"
	ApprovalTypeRequestBoardApproval   = "request_board_approval"

	ApprovalStatusPending           = "pending"
	ApprovalStatusRevisionRequested = "revision_requested"
	ApprovalStatusApproved          = "approved"
	ApprovalStatusRejected          = "rejected"
	ApprovalStatusCancelled         = "cancelled"
)

var (
	approvalTypes = []string{ApprovalTypeHireAgent, ApprovalTypeApproveCEOStrategy,
		ApprovalTypeBudgetOverrideRequired, ApprovalTypeRequestBoardApproval}
	approvalStatuses = []string{ApprovalStatusPending, ApprovalStatusRevisionRequested,
		ApprovalStatusApproved, ApprovalStatusRejected, ApprovalStatusCancelled}
)

const (
	approvalPayloadMaxBytes = 1 << 20
	approvalNoteMax         = 10000
	approvalCommentMax      = 20000
)

// Approval is a row of ext_work.approvals and its API shape: a request for a board
// decision. The single read and create add issueIds, the linked issues.
type Approval struct {
	bun.BaseModel `bun:"table:approvals"`

	ID                 string          `bun:"id,pk,type:uuid" json:"id"`
	CompanyID          string          `bun:"company_id,type:uuid" json:"companyId"`
	Type               string          `bun:"type" json:"type"`
	RequestedByAgentID *string         `bun:"requested_by_agent_id,type:uuid" json:"requestedByAgentId"`
	RequestedByUserID  *string         `bun:"requested_by_user_id" json:"requestedByUserId"`
	Status             string          `bun:"status" json:"status"`
	Payload            json.RawMessage `bun:"payload,type:jsonb,nullzero" json:"payload"`
	DecisionNote       *string         `bun:"decision_note" json:"decisionNote"`
	DecidedByUserID    *string         `bun:"decided_by_user_id" json:"decidedByUserId"`
	DecidedAt          *time.Time      `bun:"decided_at" json:"decidedAt"`
	CreatedAt          time.Time       `bun:"created_at,nullzero,notnull,default:current_timestamp" json:"createdAt"`
	UpdatedAt          time.Time       `bun:"updated_at,nullzero,notnull,default:current_timestamp" json:"updatedAt"`

	IssueIDs []string `bun:"-" json:"issueIds,omitempty"`
}

// ApprovalComment is one comment on an approval.
type ApprovalComment struct {
	bun.BaseModel `bun:"table:approval_comments"`

	ID            string    `bun:"id,pk,type:uuid" json:"id"`
	CompanyID     string    `bun:"company_id,type:uuid" json:"companyId"`
	ApprovalID    string    `bun:"approval_id,type:uuid" json:"approvalId"`
	AuthorAgentID *string   `bun:"author_agent_id,type:uuid" json:"authorAgentId"`
	AuthorUserID  *string   `bun:"author_user_id" json:"authorUserId"`
	Body          string    `bun:"body" json:"body"`
	CreatedAt     time.Time `bun:"created_at,nullzero,notnull,default:current_timestamp" json:"createdAt"`
	UpdatedAt     time.Time `bun:"updated_at,nullzero,notnull,default:current_timestamp" json:"updatedAt"`
}

func init() {
	addRoutes(
		route{Method: "GET", Path: "/api/companies/{companyId}/approvals", Query: approvalListQuery{}, Response: new([]*Approval), CompanyFromPath: true,
			Summary: "List the company's approvals, newest first (filters status, type, requestedByAgentId)", Handle: handleApprovalList},
		route{Method: "POST", Path: "/api/companies/{companyId}/approvals", Status: http.StatusCreated, Response: new(Approval), CompanyFromPath: true,
			Summary: "Request an approval (an agent requests for itself)", Body: approvalCreateBody{}, Handle: handleApprovalCreate},
		route{Method: "GET", Path: "/api/approvals/{id}", Response: new(Approval), Summary: "Read an approval with its linked issue ids", Handle: handleApprovalGet},
		route{Method: "GET", Path: "/api/approvals/{id}/issues", Response: new([]*Issue), Summary: "List the issues linked to an approval", Handle: handleApprovalIssues},
		route{Method: "POST", Path: "/api/approvals/{id}/approve", Response: new(Approval), Access: sdk.AccessBoard,
			Summary: "Approve a pending approval (a hire_agent approval activates the agent)", Body: approvalDecisionBody{},
			Handle: approvalDecisionHandler(ApprovalStatusApproved)},
		route{Method: "POST", Path: "/api/approvals/{id}/reject", Response: new(Approval), Access: sdk.AccessBoard,
			Summary: "Reject a pending approval", Body: approvalDecisionBody{}, Handle: approvalDecisionHandler(ApprovalStatusRejected)},
		route{Method: "POST", Path: "/api/approvals/{id}/request-revision", Response: new(Approval), Access: sdk.AccessBoard,
			Summary: "Send a pending approval back to its requester for revision", Body: approvalDecisionBody{},
			Handle: approvalDecisionHandler(ApprovalStatusRevisionRequested)},
		route{Method: "POST", Path: "/api/approvals/{id}/resubmit", Response: new(Approval),
			Summary: "Resubmit an approval sent back for revision (the requesting agent or the board)", Body: approvalResubmitBody{},
			Handle: handleApprovalResubmit},
		route{Method: "GET", Path: "/api/approvals/{id}/comments", Response: new([]*ApprovalComment), Summary: "List an approval's comments, oldest first", Handle: handleApprovalCommentList},
		route{Method: "POST", Path: "/api/approvals/{id}/comments", Status: http.StatusCreated, Response: new(ApprovalComment), Summary: "Comment on an approval", Body: approvalCommentBody{},
			Handle: handleApprovalCommentCreate},
		route{Method: "GET", Path: "/api/issues/{id}/approvals", Response: new([]*Approval), Summary: "List the approvals linked to an issue", Handle: handleIssueApprovalList},
		route{Method: "POST", Path: "/api/issues/{id}/approvals", Status: http.StatusCreated, Response: new(Approval), Summary: "Link an approval to an issue", Body: issueApprovalLinkBody{},
			Handle: handleIssueApprovalLink},
		route{Method: "DELETE", Path: "/api/issues/{id}/approvals/{approvalId}", Response: new(map[string]any), Summary: "Unlink an approval from an issue",
			Handle: handleIssueApprovalUnlink},
	)
	addMethods(map[string]method{
		"approvals.create": {
			Description: "Create an approval: input {companyId?, type, requestedByAgentId?, payload, issueIds?}; the call's company " +
				"wins over companyId. Returns the approval.",
			Call: callApprovalCreate,
		},
		"approvals.get": {
			Description: "Read an approval: input {approvalId}. Returns the approval with issueIds; 404 outside the call's company.",
			Call:        callApprovalGet,
		},
	})
}

// approvalCreateBody is the body of POST /api/companies/{companyId}/approvals.
type approvalCreateBody struct {
	Type string `json:"type" jsonschema:"required,enum=hire_agent,enum=approve_ceo_strategy,enum=budget_override_required,enum=request_board_approval"`
	// RequestedByAgentID is ignored for agents, which always request for themselves.
	RequestedByAgentID *string `json:"requestedByAgentId,omitempty"`
	// Payload is an object; a hire_agent payload carries agentId, the pending agent.
	Payload json.RawMessage `json:"payload,omitempty" jsonschema:"type=object"`
	// IssueIDs are issues of the company (ids or identifiers) to link.
	IssueIDs []string `json:"issueIds,omitempty"`
}

type approvalDecisionBody struct {
	DecisionNote *string `json:"decisionNote,omitempty"`
}

type approvalResubmitBody struct {
	Payload json.RawMessage `json:"payload,omitempty" jsonschema:"type=object"`
}

type approvalCommentBody struct {
	Body string `json:"body" jsonschema:"required"`
}

type issueApprovalLinkBody struct {
	ApprovalID string `json:"approvalId" jsonschema:"required"`
}

// approvalPayload checks a payload (an object; {} when absent) and, for hire_agent, that
// it names an agent of the company. It returns the payload to store.
func (w *Work) approvalPayload(ctx context.Context, probs *fieldProblems, companyID, typ string, raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		raw = json.RawMessage(`{}`)
	}
	var obj map[string]any
	if raw[0] != '{' || json.Unmarshal(raw, &obj) != nil {
		probs.add("payload", "must be an object")
		return nil, nil
	}
	if len(raw) > approvalPayloadMaxBytes {
		probs.add("payload", fmt.Sprintf("must be at most %d bytes", approvalPayloadMaxBytes))
		return nil, nil
	}
	if typ == ApprovalTypeHireAgent {
		agentID, _ := obj["agentId"].(string)
		a, err := w.lookupCompanyAgent(ctx, companyID, agentID)
		if err != nil {
			return nil, err
		}
		if a == nil {
			probs.add("payload.agentId", "must be an agent of this company")
		}
	}
	// Compact it so that the stored payload is canonical JSON.
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("error encoding approval payload: %w", err)
	}
	return b, nil
}

// approvalCreate validates and stores an approval requested by the context's actor. A
// trusted caller (another extension) may name any agent of the company as the requester;
// an agent calling the API always requests for itself.
func (w *Work) approvalCreate(ctx context.Context, companyID string, in *approvalCreateBody, trusted bool) (*Approval, error) {
	actor := sdk.ActorFrom(ctx)
	var probs fieldProblems
	a := &Approval{ID: uuid.NewString(), CompanyID: companyID, Status: ApprovalStatusPending}
	if oneOf(&probs, "type", in.Type, approvalTypes) {
		a.Type = in.Type
	}
	if in.RequestedByAgentID != nil && strings.TrimSpace(*in.RequestedByAgentID) != "" {
		id := strings.ToLower(strings.TrimSpace(*in.RequestedByAgentID))
		a.RequestedByAgentID = &id
	}
	switch actor.Type {
	case "agent":
		if !trusted && a.RequestedByAgentID != nil && *a.RequestedByAgentID != actor.AgentId {
			return nil, forbidden("Agents can only request approvals for themselves")
		}
		if a.RequestedByAgentID == nil || !trusted {
			id := actor.AgentId
			a.RequestedByAgentID = &id
		}
	case "board":
		if actor.UserId != "" {
			uid := actor.UserId
			a.RequestedByUserID = &uid
		}
	}
	if a.RequestedByAgentID != nil && (actor.Type != "agent" || *a.RequestedByAgentID != actor.AgentId) {
		if err := w.checkCompanyAgent(ctx, &probs, "requestedByAgentId", companyID, a.RequestedByAgentID); err != nil {
			return nil, err
		}
	}
	payload, err := w.approvalPayload(ctx, &probs, companyID, a.Type, in.Payload)
	if err != nil {
		return nil, err
	}
	a.Payload = payload
	var issueIDs []string
	for i, ref := range in.IssueIDs {
		iss, err := w.issueGet(ctx, nil, strings.TrimSpace(ref))
		if err != nil {
			return nil, err
		}
		if iss == nil || iss.CompanyID != companyID {
			probs.add(fmt.Sprintf("issueIds[%d]", i), "must be an issue of this company")
			continue
		}
		if !slices.Contains(issueIDs, iss.ID) {
			issueIDs = append(issueIDs, iss.ID)
		}
	}
	if err := probs.err(); err != nil {
		return nil, err
	}
	err = w.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewInsert().Model(a).Returning("*").Exec(ctx); err != nil {
			return fmt.Errorf("error inserting approval: %w", err)
		}
		for _, id := range issueIDs {
			if _, err := approvalLink(ctx, tx, actor, id, a); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	a.IssueIDs = issueIDs
	if a.IssueIDs == nil {
		a.IssueIDs = []string{}
	}
	w.activityOrLog(ctx, companyID, "approval.created", "approval", a.ID,
		map[string]any{"type": a.Type, "requestedByAgentId": a.RequestedByAgentID, "issueIds": a.IssueIDs})
	return a, nil
}

// approvalLink links an approval to an issue; it reports whether a link was added.
func approvalLink(ctx context.Context, db bun.IDB, actor *sdk.Actor, issueID string, a *Approval) (bool, error) {
	var agentID, userID *string
	switch actor.Type {
	case "agent":
		agentID = &actor.AgentId
	case "board":
		if actor.UserId != "" {
			userID = &actor.UserId
		}
	}
	res, err := db.NewRaw(`INSERT INTO issue_approvals (issue_id, approval_id, company_id, linked_by_agent_id, linked_by_user_id)
		VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`, issueID, a.ID, a.CompanyID, agentID, userID).Exec(ctx)
	if err != nil {
		return false, fmt.Errorf("error linking approval %s to issue %s: %w", a.ID, issueID, err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// approvalGet loads an approval by id (nil when missing).
func approvalGet(ctx context.Context, db bun.IDB, id string) (*Approval, error) {
	if !isUUID(id) {
		return nil, nil
	}
	a := new(Approval)
	if err := db.NewSelect().Model(a).Where("id = ?", id).Scan(ctx); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, nil
		}
		return nil, fmt.Errorf("error reading approval %s: %w", id, err)
	}
	return a, nil
}

// approvalByRef loads the approval a route names and checks company access (404, 403).
func (w *Work) approvalByRef(ctx context.Context, id string) (*Approval, error) {
	a, err := approvalGet(ctx, w.db, id)
	if err != nil {
		return nil, err
	}
	if a == nil {
		return nil, notFound("Approval not found")
	}
	if err := requireCompanyAccess(ctx, a.CompanyID); err != nil {
		return nil, err
	}
	return a, nil
}

// approvalIssueIDs lists the issues linked to an approval, oldest link first.
func approvalIssueIDs(ctx context.Context, db bun.IDB, approvalID string) ([]string, error) {
	ids := []string{}
	if err := db.NewRaw(`SELECT issue_id::text FROM issue_approvals WHERE approval_id = ? ORDER BY created_at, issue_id`, approvalID).
		Scan(ctx, &ids); err != nil {
		return nil, fmt.Errorf("error reading issues of approval %s: %w", approvalID, err)
	}
	return ids, nil
}

func handleApprovalList(w *Work, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	limit, offset, err := page(r, 50, 500)
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	qs := r.URL.Query()
	q := w.db.NewSelect().Model((*Approval)(nil)).Where("company_id = ?", r.PathValue("companyId"))
	var probs fieldProblems
	for _, f := range []struct {
		name string
		list []string
	}{{"status", approvalStatuses}, {"type", approvalTypes}} {
		if s := qs.Get(f.name); s != "" {
			vals := strings.Split(strings.ReplaceAll(s, " ", ""), ",")
			for _, v := range vals {
				oneOf(&probs, f.name, v, f.list)
			}
			q = q.Where("? IN (?)", bun.Ident(f.name), bun.In(vals))
		}
	}
	if s := qs.Get("requestedByAgentId"); s != "" {
		if !isUUID(s) {
			probs.add("requestedByAgentId", "must be an agent id")
		}
		q = q.Where("requested_by_agent_id = ?", s)
	}
	if err := probs.err(); err != nil {
		w.writeErr(rw, err)
		return
	}
	list := []*Approval{}
	if err := q.Order("created_at DESC", "id DESC").Limit(int64(limit)).Offset(int64(offset)).Scan(ctx, &list); err != nil {
		w.writeErr(rw, fmt.Errorf("error listing approvals: %w", err))
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, list)
}

func handleApprovalCreate(w *Work, rw http.ResponseWriter, r *http.Request) {
	var body approvalCreateBody
	if err := decodeBody(r, &body); err != nil {
		w.writeErr(rw, err)
		return
	}
	a, err := w.approvalCreate(r.Context(), r.PathValue("companyId"), &body, false)
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusCreated, a)
}

func handleApprovalGet(w *Work, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	a, err := w.approvalByRef(ctx, r.PathValue("id"))
	if err == nil {
		a.IssueIDs, err = approvalIssueIDs(ctx, w.db, a.ID)
	}
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, a)
}

func handleApprovalIssues(w *Work, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	a, err := w.approvalByRef(ctx, r.PathValue("id"))
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	issues := []*Issue{}
	if err := w.db.NewSelect().Model(&issues).
		Where("id IN (SELECT issue_id FROM issue_approvals WHERE approval_id = ?)", a.ID).
		Order("issue_number").Scan(ctx); err != nil {
		w.writeErr(rw, fmt.Errorf("error listing issues of approval %s: %w", a.ID, err))
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, issues)
}

// approvalDecisionHandler serves approve, reject and request-revision.
func approvalDecisionHandler(status string) func(w *Work, rw http.ResponseWriter, r *http.Request) {
	return func(w *Work, rw http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		cur, err := w.approvalByRef(ctx, r.PathValue("id"))
		if err != nil {
			w.writeErr(rw, err)
			return
		}
		// Deciding approvals (hires, budget overrides) is for those who may manage agents:
		// owners and admins, not operators.
		if err := w.host.RequirePermission(ctx, cur.CompanyID, "agents:create"); err != nil {
			w.writeErr(rw, err)
			return
		}
		var body approvalDecisionBody
		if err := decodeBody(r, &body); err != nil {
			w.writeErr(rw, err)
			return
		}
		var probs fieldProblems
		var note *string
		if body.DecisionNote != nil {
			optText(&probs, "decisionNote", patchField[string]{Set: true, Value: *body.DecisionNote}, approvalNoteMax, &note)
		}
		if err := probs.err(); err != nil {
			w.writeErr(rw, err)
			return
		}
		a, err := w.approvalDecide(ctx, cur, status, note)
		if err != nil {
			w.writeErr(rw, err)
			return
		}
		sdk.WriteJSON(rw, http.StatusOK, a)
	}
}

// approvalDecide records a board decision on a pending (or revision_requested) approval;
// anything else is a 409 "Approval is not pending". Approving a hire_agent approval
// activates the agent within the same transaction: through agents.approveHire when an
// agents extension is loaded, otherwise by moving the kernel identity from
// pending_approval to idle. Rejecting a hire leaves the agent pending_approval (the
// decision is recorded; the agents owner may terminate it on approval.decided). The
// requesting agent is woken on approve and reject (reason approval_resolved) and on a
// revision request (reason approval_revision_requested).
func (w *Work) approvalDecide(ctx context.Context, cur *Approval, status string, note *string) (*Approval, error) {
	actor := sdk.ActorFrom(ctx)
	var decidedBy *string
	if actor.UserId != "" {
		uid := actor.UserId
		decidedBy = &uid
	}
	a := new(Approval)
	err := w.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		err := tx.NewRaw(`UPDATE approvals SET status = ?, decision_note = ?, decided_by_user_id = ?, decided_at = now(), updated_at = now()
			WHERE id = ? AND status IN ('pending', 'revision_requested') RETURNING *`, status, note, decidedBy, cur.ID).Scan(ctx, a)
		if errors.Is(err, sql.ErrNoRows) {
			return conflict("Approval is not pending")
		}
		if err != nil {
			return fmt.Errorf("error deciding approval %s: %w", cur.ID, err)
		}
		if status == ApprovalStatusApproved && a.Type == ApprovalTypeHireAgent {
			return w.approvalActivateHire(ctx, a)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if a.IssueIDs, err = approvalIssueIDs(ctx, w.db, a.ID); err != nil {
		return nil, err
	}
	if status == ApprovalStatusRevisionRequested {
		w.activityOrLog(ctx, a.CompanyID, "approval.revision_requested", "approval", a.ID,
			map[string]any{"type": a.Type, "decisionNote": a.DecisionNote})
	} else {
		w.activityOrLog(ctx, a.CompanyID, "approval.decided", "approval", a.ID,
			map[string]any{"type": a.Type, "status": a.Status, "decisionNote": a.DecisionNote, "requestedByAgentId": a.RequestedByAgentID})
	}
	if a.RequestedByAgentID != nil {
		reason := "approval_resolved"
		if status == ApprovalStatusRevisionRequested {
			reason = "approval_revision_requested"
		}
		w.wake(ctx, &WakeRequest{AgentID: *a.RequestedByAgentID, CompanyID: a.CompanyID, Source: "automation", Reason: reason,
			Payload:        map[string]any{"approvalId": a.ID, "approvalStatus": a.Status, "issueIds": a.IssueIDs},
			IdempotencyKey: "approval:" + a.ID + ":" + a.Status + ":" + a.UpdatedAt.UTC().Format(time.RFC3339Nano)})
	}
	return a, nil
}

// approvalActivateHire activates the agent a hire_agent approval names.
func (w *Work) approvalActivateHire(ctx context.Context, a *Approval) error {
	var payload struct {
		AgentID string `json:"agentId"`
	}
	_ = json.Unmarshal(a.Payload, &payload)
	err := w.host.Call(ctx, "agents.approveHire", sdk.ActorFrom(ctx), a.CompanyID,
		map[string]any{"approvalId": a.ID, "agentId": payload.AgentID}, nil)
	switch {
	case err == nil:
		return nil
	case !sdk.IsMethodNotProvided(err):
		var e *sdk.Error
		if errors.As(err, &e) {
			return err
		}
		return fmt.Errorf("error approving hire of agent %s: %w", payload.AgentID, err)
	}
	// No agents extension: the kernel-owned identity is all there is to activate.
	ag, err := w.lookupCompanyAgent(ctx, a.CompanyID, payload.AgentID)
	if err != nil {
		return err
	}
	switch {
	case ag == nil:
		return conflict("The agent of this hire no longer exists")
	case ag.Status == "terminated":
		return conflict("The agent of this hire was terminated")
	case ag.Status != "pending_approval":
		return nil // already activated some other way
	}
	if _, err := w.host.Principals.SetAgentStatus(ctx, &hostv1.SetAgentStatusRequest{AgentId: ag.Id, Status: "idle"}); err != nil {
		return fmt.Errorf("error activating agent %s: %w", ag.Id, err)
	}
	w.activityOrLog(ctx, a.CompanyID, "agent.hire_approved", "agent", ag.Id,
		map[string]any{"approvalId": a.ID, "previousStatus": ag.Status, "status": "idle"})
	return nil
}

func handleApprovalResubmit(w *Work, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	cur, err := w.approvalByRef(ctx, r.PathValue("id"))
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	actor := sdk.ActorFrom(ctx)
	if actor.Type == "agent" && (cur.RequestedByAgentID == nil || *cur.RequestedByAgentID != actor.AgentId) {
		w.writeErr(rw, forbidden("Only the requesting agent or the board can resubmit an approval"))
		return
	}
	var body approvalResubmitBody
	if err := decodeBody(r, &body); err != nil {
		w.writeErr(rw, err)
		return
	}
	var payload json.RawMessage
	if len(bytes.TrimSpace(body.Payload)) > 0 && !bytes.Equal(bytes.TrimSpace(body.Payload), []byte("null")) {
		var probs fieldProblems
		if payload, err = w.approvalPayload(ctx, &probs, cur.CompanyID, cur.Type, body.Payload); err != nil {
			w.writeErr(rw, err)
			return
		}
		if err := probs.err(); err != nil {
			w.writeErr(rw, err)
			return
		}
	}
	a := new(Approval)
	err = w.db.NewRaw(`UPDATE approvals SET status = 'pending', payload = coalesce(?::jsonb, payload),
			decision_note = NULL, decided_by_user_id = NULL, decided_at = NULL, updated_at = now()
		WHERE id = ? AND status = 'revision_requested' RETURNING *`, nullableJSON(payload), cur.ID).Scan(ctx, a)
	if errors.Is(err, sql.ErrNoRows) {
		w.writeErr(rw, conflict("Approval is not awaiting revision"))
		return
	}
	if err == nil {
		a.IssueIDs, err = approvalIssueIDs(ctx, w.db, a.ID)
	}
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	w.activityOrLog(ctx, a.CompanyID, "approval.resubmitted", "approval", a.ID,
		map[string]any{"type": a.Type, "payloadChanged": payload != nil})
	sdk.WriteJSON(rw, http.StatusOK, a)
}

// nullableJSON is a jsonb argument: nil for SQL NULL.
func nullableJSON(b json.RawMessage) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}

func handleApprovalCommentList(w *Work, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	a, err := w.approvalByRef(ctx, r.PathValue("id"))
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	list := []*ApprovalComment{}
	if err := w.db.NewSelect().Model(&list).Where("approval_id = ?", a.ID).Order("created_at", "id").Scan(ctx); err != nil {
		w.writeErr(rw, fmt.Errorf("error listing comments of approval %s: %w", a.ID, err))
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, list)
}

func handleApprovalCommentCreate(w *Work, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	a, err := w.approvalByRef(ctx, r.PathValue("id"))
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	var body approvalCommentBody
	if err := decodeBody(r, &body); err != nil {
		w.writeErr(rw, err)
		return
	}
	var probs fieldProblems
	c := &ApprovalComment{ID: uuid.NewString(), CompanyID: a.CompanyID, ApprovalID: a.ID,
		Body: cleanText(&probs, "body", body.Body, approvalCommentMax)}
	if c.Body == "" {
		probs.add("body", "is required")
	}
	if err := probs.err(); err != nil {
		w.writeErr(rw, err)
		return
	}
	switch actor := sdk.ActorFrom(ctx); actor.Type {
	case "agent":
		c.AuthorAgentID = &actor.AgentId
	case "board":
		if actor.UserId != "" {
			c.AuthorUserID = &actor.UserId
		}
	}
	if _, err := w.db.NewInsert().Model(c).Returning("*").Exec(ctx); err != nil {
		w.writeErr(rw, fmt.Errorf("error inserting approval comment: %w", err))
		return
	}
	w.activityOrLog(ctx, a.CompanyID, "approval.comment_added", "approval", a.ID, map[string]any{"commentId": c.ID})
	sdk.WriteJSON(rw, http.StatusCreated, c)
}

func handleIssueApprovalList(w *Work, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	iss, err := w.issueByRef(ctx, r.PathValue("id"))
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	list := []*Approval{}
	if err := w.db.NewSelect().Model(&list).
		Where("id IN (SELECT approval_id FROM issue_approvals WHERE issue_id = ?)", iss.ID).
		Order("created_at DESC", "id DESC").Scan(ctx); err != nil {
		w.writeErr(rw, fmt.Errorf("error listing approvals of issue %s: %w", iss.ID, err))
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, list)
}

func handleIssueApprovalLink(w *Work, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	iss, err := w.issueByRef(ctx, r.PathValue("id"))
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	var body issueApprovalLinkBody
	if err := decodeBody(r, &body); err != nil {
		w.writeErr(rw, err)
		return
	}
	if strings.TrimSpace(body.ApprovalID) == "" {
		w.writeErr(rw, invalid("approvalId", "is required"))
		return
	}
	a, err := approvalGet(ctx, w.db, strings.TrimSpace(body.ApprovalID))
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	if a == nil || a.CompanyID != iss.CompanyID {
		w.writeErr(rw, notFound("Approval not found"))
		return
	}
	added, err := approvalLink(ctx, w.db, sdk.ActorFrom(ctx), iss.ID, a)
	if err == nil {
		a.IssueIDs, err = approvalIssueIDs(ctx, w.db, a.ID)
	}
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	if !added {
		sdk.WriteJSON(rw, http.StatusOK, a)
		return
	}
	w.activityOrLog(ctx, iss.CompanyID, "issue.approval_linked", "issue", iss.ID, map[string]any{"approvalId": a.ID})
	sdk.WriteJSON(rw, http.StatusCreated, a)
}

func handleIssueApprovalUnlink(w *Work, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	iss, err := w.issueByRef(ctx, r.PathValue("id"))
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	approvalID := r.PathValue("approvalId")
	if !isUUID(approvalID) {
		w.writeErr(rw, notFound("Approval is not linked to this issue"))
		return
	}
	res, err := w.db.NewRaw(`DELETE FROM issue_approvals WHERE issue_id = ? AND approval_id = ?`, iss.ID, approvalID).Exec(ctx)
	if err != nil {
		w.writeErr(rw, fmt.Errorf("error unlinking approval %s from issue %s: %w", approvalID, iss.ID, err))
		return
	}
	if n, _ := res.RowsAffected(); n == 0 {
		w.writeErr(rw, notFound("Approval is not linked to this issue"))
		return
	}
	w.activityOrLog(ctx, iss.CompanyID, "issue.approval_unlinked", "issue", iss.ID, map[string]any{"approvalId": approvalID})
	sdk.WriteJSON(rw, http.StatusOK, map[string]any{"ok": true, "issueId": iss.ID, "approvalId": approvalID})
}

// methodContext returns ctx carrying a provided method's actor and company, so that the
// shared code paths (activity, wakes) attribute the work as an HTTP request would.
func methodContext(ctx context.Context, call *sdk.MethodCall, companyID string) context.Context {
	actor := call.Actor
	if actor == nil {
		actor = sdk.SystemActor()
	}
	return sdk.WithRequestInfo(ctx, actor, companyID, "", nil)
}

// bindStrict decodes a method input strictly (unknown fields are a 400 Validation error).
func bindStrict(call *sdk.MethodCall, v any) error {
	in := bytes.TrimSpace(call.Input)
	if len(in) == 0 {
		in = []byte("{}")
	}
	r, _ := http.NewRequest(http.MethodPost, "/", bytes.NewReader(in))
	return decodeBody(r, v)
}

func callApprovalCreate(w *Work, ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in struct {
		approvalCreateBody
		CompanyID string `json:"companyId"`
	}
	if err := bindStrict(call, &in); err != nil {
		return nil, err
	}
	companyID := call.CompanyID
	if companyID == "" {
		companyID = in.CompanyID
	}
	if !isUUID(companyID) {
		return nil, invalid("companyId", "is required")
	}
	ctx = methodContext(ctx, call, companyID)
	if actor := sdk.ActorFrom(ctx); actor.Type != "system" && !sdk.CanAccessCompany(actor, companyID) {
		return nil, forbidden("You do not have access to this company")
	}
	return w.approvalCreate(ctx, companyID, &in.approvalCreateBody, true)
}

func callApprovalGet(w *Work, ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in struct {
		ApprovalID string `json:"approvalId"`
	}
	if err := bindStrict(call, &in); err != nil {
		return nil, err
	}
	a, err := approvalGet(ctx, w.db, in.ApprovalID)
	if err != nil {
		return nil, err
	}
	if a == nil || (call.CompanyID != "" && a.CompanyID != call.CompanyID) {
		return nil, notFound("Approval not found")
	}
	if a.IssueIDs, err = approvalIssueIDs(ctx, w.db, a.ID); err != nil {
		return nil, err
	}
	return a, nil
}

// approvalListQuery documents the query parameters of the approval list.
type approvalListQuery struct {
	Status             string `query:"status"`
	Type               string `query:"type"`
	RequestedByAgentID string `query:"requestedByAgentId" jsonschema:"format=uuid"`
}
