package work

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/keelhq/keel/sdk"
)

// Provided methods of the issues area ("work.<name>"). The call's actor acts (its access and
// permissions apply as on the routes; a system actor is trusted) and the call's company
// scopes every issue it names: an issue of another company is "Issue not found".
func init() {
	addMethods(map[string]method{
		"issues.create": {
			Description: "Create an issue in the call's company. Input: the create body of POST /api/companies/{companyId}/issues " +
				"(title, description, status, priority, assigneeAgentId, parentId, blockedByIssueIds, labelIds, idempotencyKey, " +
				"originKind/originId/originRunId/originFingerprint, …) and hidden (kept out of every issue list, count, search and dashboard count; read by id). Output: the issue with labels, blockedBy and blocks, plus " +
				"created=false when the idempotency key matched an existing issue.",
			Call: (*Work).methodIssuesCreate,
		},
		"issues.update": {
			Description: "Update an issue of the call's company. Input: {id (UUID or identifier), …the PATCH /api/issues/{id} body}. " +
				"Output: the issue, changes and comment.",
			Call: (*Work).methodIssuesUpdate,
		},
		"issues.get": {
			ReadOnly:    true,
			Description: "Read an issue of the call's company. Input: {id} or {identifier}. Output: the issue as GET /api/issues/{id} shows it.",
			Call:        (*Work).methodIssuesGet,
		},
		"issues.list": {
			Description: "List issues of a company. Input: {companyId (defaults to the call's company), status (list or comma string), " +
				"assigneeAgentId ('null' = unassigned), assigneeUserId, projectId, parentId, goalId, labelId, q, originKind, " +
				"originKindPrefix, originId, includeRoutineExecutions, sortField, sortDir, limit (1-500, default 50), offset}. " +
				"Output: an array of issues, newest update first by default; hidden issues are never listed.",
			Call: (*Work).methodIssuesList,
		},
		"blockers.resolve": {
			Description: "Check an issue's readiness. Input: {issueId}. Output: {resolved (true when every blocker is done), " +
				"unresolvedBlockerIssueIds}.",
			Call: (*Work).methodBlockersResolve,
		},
		"issues.cancelTree": {
			Description: "Cancel an issue and every non-terminal descendant. Input: {issueId}. Output: {issueIds: the issues cancelled}.",
			Call:        (*Work).methodIssuesCancelTree,
		},
		"targets.read": {
			Description: "Snapshot issues of the call's company. Input: {issueIds}. Output: [{id, identifier, title, status, " +
				"assigneeAgentId, assigneeUserId, updatedAt, childCount, descendantCount}] in input order; 422 \"All referenced issues must exist in the company\" when any is unknown.",
			Call: (*Work).methodTargetsRead,
		},
	})
}

// issuesMethodContext carries the call's actor and company like a routed request.
func issuesMethodContext(ctx context.Context, call *sdk.MethodCall) context.Context {
	actor := call.Actor
	if actor == nil {
		actor = sdk.SystemActor()
	}
	return sdk.WithRequestInfo(ctx, actor, call.CompanyID, "", nil)
}

// issuesMethodDecode strictly decodes a method input (unknown fields are a 400 Validation
// error): method inputs are an internal contract between extensions, unlike request bodies.
func issuesMethodDecode(call *sdk.MethodCall, v any) error {
	return sdk.DecodeJSONStrict(&http.Request{Body: io.NopCloser(bytes.NewReader(call.Input))}, v)
}

// issuesMethodCompany returns the call's company, which the caller must be able to reach.
func issuesMethodCompany(ctx context.Context, call *sdk.MethodCall, override string) (string, error) {
	companyID := call.CompanyID
	if override != "" {
		if companyID != "" && !strings.EqualFold(override, companyID) {
			return "", forbidden("companyId does not match the call's company")
		}
		companyID = strings.ToLower(override)
	}
	if companyID == "" {
		return "", invalid("companyId", "is required")
	}
	if !isUUID(companyID) {
		return "", invalid("companyId", "must be a UUID")
	}
	if err := requireCompanyAccess(ctx, companyID); err != nil {
		return "", err
	}
	return companyID, nil
}

// methodIssue loads an issue that must belong to the call's company (and be reachable).
func (w *Work) issuesMethodIssue(ctx context.Context, call *sdk.MethodCall, ref string) (*Issue, error) {
	if strings.TrimSpace(ref) == "" {
		return nil, invalid("id", "is required")
	}
	iss, err := w.issueByRef(ctx, ref)
	if err != nil {
		return nil, err
	}
	if call.CompanyID != "" && iss.CompanyID != call.CompanyID {
		return nil, notFound("Issue not found")
	}
	return iss, nil
}

func (w *Work) methodIssuesCreate(ctx context.Context, call *sdk.MethodCall) (any, error) {
	ctx = issuesMethodContext(ctx, call)
	var in struct {
		IssueCreateBody
		CompanyID string `json:"companyId,omitempty"`
		// Hidden keeps the issue out of every issue list, count, search and dashboard count
		// (a plugin's operation issues); it is still read, updated and worked on by id.
		Hidden bool `json:"hidden,omitempty"`
	}
	if err := issuesMethodDecode(call, &in); err != nil {
		return nil, err
	}
	companyID, err := issuesMethodCompany(ctx, call, in.CompanyID)
	if err != nil {
		return nil, err
	}
	v, created, err := w.issueCreate(ctx, companyID, &in.IssueCreateBody, nil)
	if err != nil {
		return nil, err
	}
	if in.Hidden && created && v.HiddenAt == nil {
		now := time.Now().UTC()
		if _, err := w.db.NewRaw(`UPDATE issues SET hidden_at = ? WHERE id = ?`, now, v.ID).Exec(ctx); err != nil {
			return nil, fmt.Errorf("error hiding issue %s: %w", v.ID, err)
		}
		v.HiddenAt = &now
	}
	return struct {
		*IssueView
		Created bool `json:"created"`
	}{v, created}, nil
}

func (w *Work) methodIssuesUpdate(ctx context.Context, call *sdk.MethodCall) (any, error) {
	ctx = issuesMethodContext(ctx, call)
	var in struct {
		IssuePatchBody
		ID string `json:"id"`
	}
	if err := issuesMethodDecode(call, &in); err != nil {
		return nil, err
	}
	iss, err := w.issuesMethodIssue(ctx, call, in.ID)
	if err != nil {
		return nil, err
	}
	return w.issueUpdate(ctx, iss, &in.IssuePatchBody)
}

func (w *Work) methodIssuesGet(ctx context.Context, call *sdk.MethodCall) (any, error) {
	ctx = issuesMethodContext(ctx, call)
	var in struct {
		ID         string `json:"id"`
		Identifier string `json:"identifier"`
	}
	if err := issuesMethodDecode(call, &in); err != nil {
		return nil, err
	}
	ref := in.ID
	if ref == "" {
		ref = in.Identifier
	}
	iss, err := w.issuesMethodIssue(ctx, call, ref)
	if err != nil {
		return nil, err
	}
	return w.issueDetail(ctx, iss)
}

func (w *Work) methodIssuesList(ctx context.Context, call *sdk.MethodCall) (any, error) {
	ctx = issuesMethodContext(ctx, call)
	var in map[string]any
	if len(bytes.TrimSpace(call.Input)) > 0 {
		if err := json.Unmarshal(call.Input, &in); err != nil {
			return nil, invalid("", "malformed JSON: "+err.Error())
		}
	}
	override, _ := in["companyId"].(string)
	companyID, err := issuesMethodCompany(ctx, call, override)
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	for k, v := range in {
		if k == "companyId" || v == nil {
			continue
		}
		switch x := v.(type) {
		case string:
			q.Set(k, x)
		case bool:
			q.Set(k, strconv.FormatBool(x))
		case float64:
			q.Set(k, strconv.FormatFloat(x, 'f', -1, 64))
		case []any:
			parts := make([]string, 0, len(x))
			for _, e := range x {
				parts = append(parts, fmt.Sprint(e))
			}
			q.Set(k, strings.Join(parts, ","))
		default:
			return nil, invalid(k, "must be a string, number, boolean or list")
		}
	}
	p, err := issueListParamsFrom(companyID, q)
	if err != nil {
		return nil, err
	}
	return w.issueList(ctx, p)
}

func (w *Work) methodBlockersResolve(ctx context.Context, call *sdk.MethodCall) (any, error) {
	ctx = issuesMethodContext(ctx, call)
	var in struct {
		IssueID string `json:"issueId"`
	}
	if err := issuesMethodDecode(call, &in); err != nil {
		return nil, err
	}
	iss, err := w.issuesMethodIssue(ctx, call, in.IssueID)
	if err != nil {
		return nil, err
	}
	d, err := w.issueBlockersDiagnostics(ctx, iss)
	if err != nil {
		return nil, err
	}
	return map[string]any{"resolved": d.Ready, "unresolvedBlockerIssueIds": d.UnresolvedBlockerIssueIDs}, nil
}

func (w *Work) methodIssuesCancelTree(ctx context.Context, call *sdk.MethodCall) (any, error) {
	ctx = issuesMethodContext(ctx, call)
	var in struct {
		IssueID string `json:"issueId"`
	}
	if err := issuesMethodDecode(call, &in); err != nil {
		return nil, err
	}
	iss, err := w.issuesMethodIssue(ctx, call, in.IssueID)
	if err != nil {
		return nil, err
	}
	cancelled, err := newIssueStore(w.db).IssueDescendantsCancel(ctx, &IssueDescendantsCancelParams{IssueID: iss.ID})
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(cancelled))
	for i, c := range cancelled {
		ids[i] = c.ID
		w.activityOrLog(ctx, iss.CompanyID, "issue.updated", "issue", c.ID, map[string]any{
			"identifier": c.Identifier, "changes": map[string]IssueChange{"status": {From: c.Status, To: StatusCancelled}},
			"cancelledWithTree": iss.ID})
	}
	return map[string]any{"issueIds": ids}, nil
}

func (w *Work) methodTargetsRead(ctx context.Context, call *sdk.MethodCall) (any, error) {
	ctx = issuesMethodContext(ctx, call)
	var in struct {
		IssueIDs []string `json:"issueIds"`
	}
	if err := issuesMethodDecode(call, &in); err != nil {
		return nil, err
	}
	companyID, err := issuesMethodCompany(ctx, call, "")
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(in.IssueIDs))
	for _, id := range in.IssueIDs {
		if !isUUID(id) {
			return nil, unprocessable("All referenced issues must exist in the company")
		}
		ids = append(ids, strings.ToLower(id))
	}
	snaps, err := newIssueStore(w.db).IssueSnapshotsList(ctx, &IssueSnapshotsListParams{CompanyID: companyID, IDs: ids})
	if err != nil {
		return nil, err
	}
	byID := map[string]IssueSnapshot{}
	for _, s := range snaps {
		byID[s.ID] = s
	}
	out := make([]IssueSnapshot, 0, len(ids))
	for _, id := range ids {
		s, ok := byID[id]
		if !ok {
			return nil, unprocessable("All referenced issues must exist in the company")
		}
		out = append(out, s)
	}
	return out, nil
}
