package cases

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/keelhq/keel/sdk"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

// The request helpers are the SDK's; these names keep the area files short.
var (
	notFound      = sdk.NotFound
	conflict      = sdk.Conflict
	unprocessable = sdk.Unprocessable
	invalid       = sdk.Invalid
	isUUID        = sdk.IsUUID
)

type detail = sdk.ValidationDetail

// Error texts (spec part 2 "Errors"; the ones the spec leaves open are plain English).
const (
	msgCaseNotFound       = "Case not found"
	msgProjectCompany     = "Project does not belong to company"
	msgOwnParent          = "A case cannot be its own parent"
	msgParentCycle        = "A case cannot be its own ancestor"
	msgParentNotFound     = "Parent case not found"
	msgLabelsCompany      = "One or more labels do not belong to company"
	msgIssueCompany       = "Issue does not belong to case company"
	msgIssueNotFound      = "Issue not found"
	msgDocNotFound        = "Case document not found"
	msgThreadNotFound     = "Annotation thread not found"
	msgDocNotYet          = "Case document does not exist yet"
	msgDocNeedsBase       = "Case document update requires baseRevisionId"
	msgDocStale           = "Case document was updated by someone else"
	msgDocLocked          = "Document is locked"
	msgRevisionNotFound   = "Case document revision not found"
	msgRevisionIsLatest   = "Revision is already the latest"
	msgAnnotationStale    = "Annotation base revision is not the latest revision"
	msgSelectorUnmatched  = "Annotation selector does not match the document"
	msgLinkNotFound       = "Case issue link not found"
	msgAttachmentNotFound = "Attachment not found"
)

// validation is the 400 "Validation error" with details, or nil without any.
func validation(d []detail) error {
	if len(d) == 0 {
		return nil
	}
	return sdk.ValidationError(d...)
}

// nowUTC is the current time at the database's precision.
func nowUTC() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// newID returns a time-ordered UUID.
func newID() string { return uuid.Must(uuid.NewV7()).String() }

// attachmentMaxBytesFromEnv reads SERVICE_ATTACHMENT_MAX_BYTES (default 10 MiB).
func attachmentMaxBytesFromEnv() int64 {
	if v, err := strconv.ParseInt(strings.TrimSpace(os.Getenv("SERVICE_ATTACHMENT_MAX_BYTES")), 10, 64); err == nil && v > 0 {
		return v
	}
	return 10 << 20
}

// attribution is who did a write: a board user, or an agent (in a run or not), or the system.
type attribution struct {
	ActorType string
	AgentID   *string
	UserID    *string
	RunID     *string
}

// attributionOf returns the attribution of an actor.
func attributionOf(a *sdk.Actor) attribution {
	switch {
	case a == nil:
		return attribution{ActorType: "system"}
	case a.Type == "agent":
		at := attribution{ActorType: "agent", AgentID: ptr(a.AgentId)}
		if a.RunId != "" {
			at.RunID = ptr(a.RunId)
		}
		return at
	case a.Type == "board":
		return attribution{ActorType: "user", UserID: ptr(a.UserId)}
	}
	return attribution{ActorType: "system"}
}

// runContext is the agent run a request acts in and the issue it is scoped to.
type runContext struct {
	RunID   string
	IssueID string
}

// runIssue returns the issue of the agent run the request acts in, "" when the actor is
// not an agent in a run of its own or the run has no issue. A run owner that cannot
// answer is logged and treated as no issue: the write itself does not depend on it.
func (x *Cases) runIssue(ctx context.Context, companyID string) string {
	a := sdk.ActorFrom(ctx)
	if a == nil || a.Type != "agent" || !isUUID(a.RunId) {
		return ""
	}
	var run struct {
		Found   bool   `json:"found"`
		AgentID string `json:"agentId"`
		IssueID string `json:"issueId"`
	}
	if err := x.host.Call(ctx, "agents.runStatus", sdk.SystemActor(), companyID, map[string]string{"runId": a.RunId}, &run); err != nil {
		x.log.Warn("error reading the run of a case write", "run", a.RunId, "error", err)
		return ""
	}
	if !run.Found || run.AgentID != a.AgentId || !isUUID(run.IssueID) {
		return ""
	}
	return run.IssueID
}

// IssueSummary is the compact issue of links, events and revisions.
type IssueSummary struct {
	ID         string `json:"id"`
	Identifier string `json:"identifier"`
	Title      string `json:"title"`
	Status     string `json:"status"`
}

// issueSummaries reads compact issues of a company from the work owner; unknown ids are
// left out, and an owner that cannot answer leaves them all out (logged).
func (x *Cases) issueSummaries(ctx context.Context, companyID string, ids []string) map[string]*IssueSummary {
	out := map[string]*IssueSummary{}
	seen := map[string]bool{}
	var want []string
	for _, id := range ids {
		if id != "" && !seen[id] {
			seen[id] = true
			want = append(want, id)
		}
	}
	for len(want) > 0 {
		batch := want
		if len(batch) > 500 {
			batch = batch[:500]
		}
		want = want[len(batch):]
		var rows []*IssueSummary
		if err := x.host.Call(ctx, "work.issues.briefs", sdk.SystemActor(), companyID, map[string]any{"issueIds": batch}, &rows); err != nil {
			x.log.Warn("error reading issue summaries", "error", err)
			return out
		}
		for _, r := range rows {
			out[r.ID] = r
		}
	}
	return out
}

// agentNames reads agents' display names; an agent that cannot be read has none.
func (x *Cases) agentNames(ctx context.Context, ids []string) map[string]string {
	out := map[string]string{}
	for _, id := range ids {
		if id == "" {
			continue
		}
		if _, ok := out[id]; ok {
			continue
		}
		ag, err := x.host.Principals.GetAgent(ctx, &hostv1.GetAgentRequest{AgentId: id})
		if err != nil {
			x.log.Debug("error reading agent name", "agent", id, "error", err)
			out[id] = ""
			continue
		}
		out[id] = ag.GetName()
	}
	return out
}

// resolveIssue reads an issue (UUID or identifier) the caller may reach: the work owner
// answers as the system, and the caller's access to the issue's company is checked here.
func (x *Cases) resolveIssue(ctx context.Context, ref string) (*issueRef, error) {
	var iss issueRef
	if err := x.host.Call(ctx, "work.issues.get", sdk.SystemActor(), "", map[string]string{"id": ref}, &iss); err != nil {
		var e *sdk.Error
		if errors.As(err, &e) && (e.Status == http.StatusNotFound || e.Status == http.StatusBadRequest) {
			return nil, notFound(msgIssueNotFound)
		}
		return nil, fmt.Errorf("error reading issue %s: %w", ref, err)
	}
	if !sdk.CanAccessCompany(sdk.ActorFrom(ctx), iss.CompanyID) {
		return nil, notFound(msgIssueNotFound)
	}
	return &iss, nil
}

// issueRef is what the cases extension reads of an issue.
type issueRef struct {
	ID         string `json:"id"`
	CompanyID  string `json:"companyId"`
	Identifier string `json:"identifier"`
	Title      string `json:"title"`
	Status     string `json:"status"`
}

// issueInCompany checks that an issue id names an issue of the company (422 otherwise).
func (x *Cases) issueInCompany(ctx context.Context, companyID, issueID string) (*IssueSummary, error) {
	var rows []*IssueSummary
	if err := x.host.Call(ctx, "work.issues.briefs", sdk.SystemActor(), companyID, map[string]any{"issueIds": []string{issueID}}, &rows); err != nil {
		return nil, fmt.Errorf("error reading issue %s: %w", issueID, err)
	}
	if len(rows) != 1 {
		return nil, unprocessable(msgIssueCompany)
	}
	return rows[0], nil
}

// eventTx records a case event inside a write's transaction and moves the case's last
// activity.
func eventTx(ctx context.Context, tx pgx.Tx, companyID, caseID, kind string, at attribution, issueID string, payload map[string]any) error {
	if payload == nil {
		payload = map[string]any{}
	}
	b, err := json.Marshal(payload)
	if err != nil {
		return fmt.Errorf("error encoding %s event: %w", kind, err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO case_events (id, company_id, case_id, kind, actor_type, actor_user_id, actor_agent_id,
		run_id, issue_id, payload) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		newID(), companyID, caseID, kind, at.ActorType, at.UserID, at.AgentID, at.RunID, nullIfEmpty(issueID), b); err != nil {
		return fmt.Errorf("error recording %s event of case %s: %w", kind, caseID, err)
	}
	if _, err := tx.Exec(ctx, `UPDATE cases SET last_activity_at = clock_timestamp() WHERE id = $1`, caseID); err != nil {
		return fmt.Errorf("error touching case %s: %w", caseID, err)
	}
	return nil
}

// autoLinkTx links the issue of the request's run to a case with role inside a write's
// transaction (rule 7; origin when the run creates the case). A pair already linked keeps
// its link; no issue, no link.
func autoLinkTx(ctx context.Context, tx pgx.Tx, c *Case, issueID, role string, at attribution) error {
	if issueID == "" {
		return nil
	}
	_, err := linkTx(ctx, tx, c, issueID, role, at, true)
	return err
}

// linkTx links an issue to a case, or returns the existing link of the pair; a new link
// records issue_linked (autoLinked says whether a run made it).
func linkTx(ctx context.Context, tx pgx.Tx, c *Case, issueID, role string, at attribution, auto bool) (*IssueLink, error) {
	l, err := scanLink(tx.QueryRow(ctx, `INSERT INTO case_issue_links (id, company_id, case_id, issue_id, role, created_by_agent_id,
		created_by_user_id, created_by_run_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (case_id, issue_id) DO NOTHING RETURNING `+linkCols,
		newID(), c.CompanyID, c.ID, issueID, role, at.AgentID, at.UserID, at.RunID))
	if errors.Is(err, pgx.ErrNoRows) {
		return scanLink(tx.QueryRow(ctx, `SELECT `+linkCols+` FROM case_issue_links WHERE case_id = $1 AND issue_id = $2`, c.ID, issueID))
	}
	if err != nil {
		return nil, fmt.Errorf("error linking issue %s to case %s: %w", issueID, c.ID, err)
	}
	if err := eventTx(ctx, tx, c.CompanyID, c.ID, "issue_linked", at, issueID,
		map[string]any{"role": role, "issueId": issueID, "linkId": l.ID, "autoLinked": auto}); err != nil {
		return nil, err
	}
	return l, nil
}

// activity appends an activity entry for a case write; a failure is logged, not returned:
// the write it records has already happened.
func (x *Cases) activity(ctx context.Context, companyID, action, entityID string, details map[string]any) {
	err := x.host.LogActivity(ctx, &sdk.ActivityEntry{CompanyID: companyID, Actor: sdk.ActorFrom(ctx), Action: action,
		EntityType: "case", EntityID: entityID, Details: details})
	if err != nil {
		x.log.Warn("error appending activity", "action", action, "case", entityID, "error", err)
	}
}

// ptr returns a pointer to v.
func ptr[T any](v T) *T { return &v }

// nullIfEmpty is nil for "" and s otherwise.
func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// deref returns *p or "".
func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// boolParam reads a boolean query parameter ("true"/"1" or "false"/"0").
func boolParam(r *http.Request, name string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(r.URL.Query().Get(name))) {
	case "":
		return false, nil
	case "true", "1":
		return true, nil
	case "false", "0":
		return false, nil
	}
	return false, invalid(name, "must be true, false, 1 or 0")
}
