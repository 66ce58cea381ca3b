package routines

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keelhq/keel/sdk"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

// What the routines extension reads and writes through other owners: agent identities
// (kernel), projects, goals and issues (work), run contexts (agents) and webhook secrets
// (secrets). Nothing here touches another owner's tables.

// originRoutineExecution is the originKind of the issues routines create.
const originRoutineExecution = "routine_execution"

// openIssueStatuses are the statuses of a live (not finished) issue.
const openIssueStatuses = "backlog,todo,in_progress,in_review,blocked"

// issueBrief is an issue as run and routine reads show it.
type issueBrief struct {
	ID          string    `json:"id"`
	Identifier  string    `json:"identifier"`
	Title       string    `json:"title"`
	Status      string    `json:"status"`
	Priority    string    `json:"priority"`
	UpdatedAt   time.Time `json:"updatedAt"`
	ProjectID   *string   `json:"-"`
	OriginID    *string   `json:"-"`
	OriginRunID *string   `json:"-"`
}

// issueWire decodes the issue fields routines read from work's outputs.
type issueWire struct {
	ID          string    `json:"id"`
	Identifier  string    `json:"identifier"`
	Title       string    `json:"title"`
	Status      string    `json:"status"`
	Priority    string    `json:"priority"`
	UpdatedAt   time.Time `json:"updatedAt"`
	ProjectID   *string   `json:"projectId"`
	OriginID    *string   `json:"originId"`
	OriginRunID *string   `json:"originRunId"`
}

func (w *issueWire) brief() *issueBrief {
	return &issueBrief{ID: w.ID, Identifier: w.Identifier, Title: w.Title, Status: w.Status, Priority: w.Priority,
		UpdatedAt: w.UpdatedAt, ProjectID: w.ProjectID, OriginID: w.OriginID, OriginRunID: w.OriginRunID}
}

// isNotFound reports whether an owner answered 404.
func isNotFound(err error) bool {
	var e *sdk.Error
	return errors.As(err, &e) && e.Status == http.StatusNotFound
}

// agentIdentity reads an agent's kernel identity (nil when there is none).
func (x *Routines) agentIdentity(ctx context.Context, agentID string) (*hostv1.AgentIdentity, error) {
	if !isUUID(agentID) {
		return nil, nil
	}
	a, err := x.host.Principals.GetAgent(ctx, &hostv1.GetAgentRequest{AgentId: agentID})
	if err != nil {
		if status.Code(err) == codes.NotFound {
			return nil, nil
		}
		return nil, fmt.Errorf("error reading agent %s: %w", agentID, err)
	}
	return a, nil
}

// checkAssignee checks that an agent may receive a routine's runs: same company, not
// terminated, not pending approval (422 otherwise).
func (x *Routines) checkAssignee(ctx context.Context, companyID, agentID string) error {
	a, err := x.agentIdentity(ctx, agentID)
	if err != nil {
		return err
	}
	if a == nil || a.CompanyId != companyID {
		return unprocessable("Assignee agent not found in company")
	}
	switch a.Status {
	case "terminated":
		return unprocessable("Cannot assign routines to a terminated agent")
	case "pending_approval":
		return unprocessable("Cannot assign routines to an agent pending approval")
	}
	return nil
}

// agentSummary is the assignee block of a routine read.
type agentSummary struct {
	ID     string  `json:"id"`
	Name   string  `json:"name"`
	Role   string  `json:"role"`
	Title  *string `json:"title"`
	URLKey string  `json:"urlKey"`
	Status string  `json:"status"`
}

// agentDetails reads the assignee block: the agents extension's record when it is loaded,
// else the kernel identity.
func (x *Routines) agentDetails(ctx context.Context, companyID, agentID string) (*agentSummary, error) {
	var rec agentSummary
	err := x.call(ctx, "agents.get", companyID, map[string]string{"agentId": agentID}, &rec)
	switch {
	case err == nil:
		return &rec, nil
	case isNotFound(err):
		return nil, nil
	case !sdk.IsMethodNotProvided(err):
		return nil, fmt.Errorf("error reading agent %s: %w", agentID, err)
	}
	a, err := x.agentIdentity(ctx, agentID)
	if err != nil || a == nil {
		return nil, err
	}
	return &agentSummary{ID: a.Id, Name: a.Name, Role: a.Role, URLKey: a.UrlKey, Status: a.Status}, nil
}

// projectInfo is what routines read of a project.
type projectInfo struct {
	ID          string  `json:"id"`
	CompanyID   string  `json:"companyId"`
	PauseReason *string `json:"pauseReason"`
	// Raw is the project as work shows it.
	Raw json.RawMessage `json:"-"`
}

// project reads a project of the company (nil when there is none).
func (x *Routines) project(ctx context.Context, companyID, projectID string) (*projectInfo, error) {
	var raw json.RawMessage
	if err := x.call(ctx, "work.projects.get", companyID, map[string]string{"projectId": projectID}, &raw); err != nil {
		if isNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("error reading project %s: %w", projectID, err)
	}
	var p projectInfo
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, fmt.Errorf("error reading project %s: %w", projectID, err)
	}
	p.Raw = raw
	return &p, nil
}

// goalExists reports whether a goal belongs to the company.
func (x *Routines) goalExists(ctx context.Context, companyID, goalID string) (bool, error) {
	if err := x.call(ctx, "work.goals.get", companyID, map[string]string{"goalId": goalID}, nil); err != nil {
		if isNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("error reading goal %s: %w", goalID, err)
	}
	return true, nil
}

// issue reads an issue of the company as work shows it (nil when there is none).
func (x *Routines) issue(ctx context.Context, companyID, issueID string) (json.RawMessage, error) {
	var raw json.RawMessage
	if err := x.call(ctx, "work.issues.get", companyID, map[string]string{"id": issueID}, &raw); err != nil {
		if isNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("error reading issue %s: %w", issueID, err)
	}
	return raw, nil
}

// issueBriefs reads brief views of issues of the company, by id; unknown ids are absent.
func (x *Routines) issueBriefs(ctx context.Context, companyID string, ids []string) (map[string]*issueBrief, error) {
	out := map[string]*issueBrief{}
	seen := map[string]bool{}
	var uniq []string
	for _, id := range ids {
		if id != "" && !seen[id] {
			seen[id] = true
			uniq = append(uniq, id)
		}
	}
	for len(uniq) > 0 {
		n := min(len(uniq), 500)
		var rows []issueWire
		if err := x.call(ctx, "work.issues.briefs", companyID, map[string]any{"issueIds": uniq[:n]}, &rows); err != nil {
			return nil, fmt.Errorf("error reading issues: %w", err)
		}
		for i := range rows {
			out[rows[i].ID] = rows[i].brief()
		}
		uniq = uniq[n:]
	}
	return out, nil
}

// liveExecutionIssues returns the live (not finished) execution issues of routines of the
// company, newest update first, as raw issues and briefs. routineID narrows to one routine.
func (x *Routines) liveExecutionIssues(ctx context.Context, companyID, routineID string, limit int) ([]json.RawMessage, []*issueBrief, error) {
	in := map[string]any{"originKind": originRoutineExecution, "status": openIssueStatuses, "limit": limit,
		"sortField": "updatedAt", "sortDir": "desc"}
	if routineID != "" {
		in["originId"] = routineID
	}
	var raws []json.RawMessage
	if err := x.call(ctx, "work.issues.list", companyID, in, &raws); err != nil {
		return nil, nil, fmt.Errorf("error listing execution issues: %w", err)
	}
	briefs := make([]*issueBrief, len(raws))
	for i, raw := range raws {
		var w issueWire
		if err := json.Unmarshal(raw, &w); err != nil {
			return nil, nil, fmt.Errorf("error reading execution issue: %w", err)
		}
		briefs[i] = w.brief()
	}
	return raws, briefs, nil
}

// issueCreateInput is the work.issues.create input of an execution issue.
type issueCreateInput struct {
	Title           string  `json:"title"`
	Description     *string `json:"description,omitempty"`
	Status          string  `json:"status"`
	Priority        string  `json:"priority"`
	AssigneeAgentID string  `json:"assigneeAgentId"`
	ProjectID       *string `json:"projectId,omitempty"`
	GoalID          *string `json:"goalId,omitempty"`
	ParentID        *string `json:"parentId,omitempty"`
	OriginKind      string  `json:"originKind"`
	OriginID        string  `json:"originId"`
	OriginRunID     string  `json:"originRunId"`
	IdempotencyKey  string  `json:"idempotencyKey"`
}

// createIssue creates an execution issue; work wakes the assignee on assignment.
func (x *Routines) createIssue(ctx context.Context, companyID string, in *issueCreateInput) (*issueWire, error) {
	var out issueWire
	if err := x.call(ctx, "work.issues.create", companyID, in, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// runIssue returns the context issue of an agent run ("" when none or unknown).
func (x *Routines) runIssue(ctx context.Context, companyID, runID string) (string, error) {
	var out struct {
		Found   bool   `json:"found"`
		IssueID string `json:"issueId"`
	}
	if err := x.call(ctx, "agents.runStatus", companyID, map[string]string{"runId": runID}, &out); err != nil {
		if sdk.IsMethodNotProvided(err) || isNotFound(err) {
			return "", nil
		}
		return "", fmt.Errorf("error reading agent run %s: %w", runID, err)
	}
	return out.IssueID, nil
}

// managedSecret is the output of secrets.createManaged and secrets.rotateManaged.
type managedSecret struct {
	SecretID string `json:"secretId"`
	Version  int    `json:"version"`
	Value    string `json:"value"`
}
