package work

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/keelhq/keel/sdk"
)

// Provided methods the routines extension reads the work graph with: a project with its
// pause state, a goal, and brief views of many issues at once. Each reads only the call's
// company: a row of another company is "not found" (or left out of a batch).
func init() {
	addMethods(map[string]method{
		"projects.get": {
			Description: "Read a project of the call's company. Input: {projectId}. Output: the project as GET /api/projects/{id} " +
				"shows it (status, pauseReason, pausedAt, archivedAt, goals, workspaces). 404 \"Project not found\" otherwise.",
			Call: (*Work).methodProjectsGet,
		},
		"projects.list": {
			Description: "List the call's company's projects with their workspaces (newest first, at most 500). Input: {}. " +
				"Output: [project as GET /api/projects/{id} shows it].",
			Call: (*Work).methodProjectsList,
		},
		"goals.get": {
			Description: "Read a goal of the call's company. Input: {goalId}. Output: the goal. 404 \"Goal not found\" otherwise.",
			Call:        (*Work).methodGoalsGet,
		},
		"issues.briefs": {
			Description: "Brief views of issues of the call's company. Input: {issueIds (at most 500)}. Output: [{id, identifier, title, " +
				"status, priority, projectId, originKind, originId, originRunId, updatedAt}] in input order; unknown ids and issues " +
				"of other companies are left out.",
			Call: (*Work).methodIssuesBriefs,
		},
	})
}

// IssueBriefView is one entry of work.issues.briefs.
type IssueBriefView struct {
	ID          string    `bun:"id" json:"id"`
	Identifier  string    `bun:"identifier" json:"identifier"`
	Title       string    `bun:"title" json:"title"`
	Status      string    `bun:"status" json:"status"`
	Priority    string    `bun:"priority" json:"priority"`
	ProjectID   *string   `bun:"project_id" json:"projectId"`
	OriginKind  string    `bun:"origin_kind" json:"originKind"`
	OriginID    *string   `bun:"origin_id" json:"originId"`
	OriginRunID *string   `bun:"origin_run_id" json:"originRunId"`
	UpdatedAt   time.Time `bun:"updated_at" json:"updatedAt"`
}

// issueBriefsMax bounds one work.issues.briefs call.
const issueBriefsMax = 500

// routineMethodCompany returns the call's company, which a method reading by id requires.
func routineMethodCompany(call *sdk.MethodCall) (string, error) {
	if call.CompanyID == "" {
		return "", invalid("companyId", "the call must name a company")
	}
	return call.CompanyID, nil
}

func (w *Work) methodProjectsGet(ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in struct {
		ProjectID string `json:"projectId"`
	}
	if err := issuesMethodDecode(call, &in); err != nil {
		return nil, err
	}
	companyID, err := routineMethodCompany(call)
	if err != nil {
		return nil, err
	}
	p, err := w.projectGet(ctx, w.db, strings.ToLower(strings.TrimSpace(in.ProjectID)), false)
	if err != nil {
		return nil, err
	}
	if p == nil || p.CompanyID != companyID {
		return nil, notFound("Project not found")
	}
	if err := w.projectsDecorate(ctx, w.db, []*Project{p}); err != nil {
		return nil, err
	}
	return p, nil
}

func (w *Work) methodProjectsList(ctx context.Context, call *sdk.MethodCall) (any, error) {
	companyID, err := routineMethodCompany(call)
	if err != nil {
		return nil, err
	}
	var ps []*Project
	if err := w.db.NewSelect().Model((*Project)(nil)).Where("company_id = ?", companyID).
		Order("created_at DESC", "id DESC").Limit(500).Scan(ctx, &ps); err != nil {
		return nil, fmt.Errorf("error listing the projects of company %s: %w", companyID, err)
	}
	if err := w.projectsDecorate(ctx, w.db, ps); err != nil {
		return nil, err
	}
	if ps == nil {
		ps = []*Project{}
	}
	return ps, nil
}

func (w *Work) methodGoalsGet(ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in struct {
		GoalID string `json:"goalId"`
	}
	if err := issuesMethodDecode(call, &in); err != nil {
		return nil, err
	}
	companyID, err := routineMethodCompany(call)
	if err != nil {
		return nil, err
	}
	g, err := goalGet(ctx, w.db, strings.ToLower(strings.TrimSpace(in.GoalID)))
	if err != nil {
		return nil, err
	}
	if g == nil || g.CompanyID != companyID {
		return nil, notFound("Goal not found")
	}
	return g, nil
}

func (w *Work) methodIssuesBriefs(ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in struct {
		IssueIDs []string `json:"issueIds"`
	}
	if err := issuesMethodDecode(call, &in); err != nil {
		return nil, err
	}
	companyID, err := routineMethodCompany(call)
	if err != nil {
		return nil, err
	}
	if len(in.IssueIDs) > issueBriefsMax {
		return nil, invalid("issueIds", fmt.Sprintf("must hold at most %d ids", issueBriefsMax))
	}
	ids := make([]string, 0, len(in.IssueIDs))
	for _, id := range in.IssueIDs {
		if id = strings.ToLower(strings.TrimSpace(id)); isUUID(id) {
			ids = append(ids, id)
		}
	}
	out := []IssueBriefView{}
	if len(ids) == 0 {
		return out, nil
	}
	var rows []IssueBriefView
	if err := w.db.NewRaw(`SELECT id, identifier, title, status, priority, project_id, origin_kind, origin_id, origin_run_id, updated_at
		FROM issues WHERE company_id = ? AND id IN (?)`, companyID, bun.In(ids)).Scan(ctx, &rows); err != nil {
		return nil, fmt.Errorf("error reading issue briefs: %w", err)
	}
	byID := make(map[string]IssueBriefView, len(rows))
	for _, r := range rows {
		byID[r.ID] = r
	}
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if r, ok := byID[id]; ok && !seen[id] {
			seen[id] = true
			out = append(out, r)
		}
	}
	return out, nil
}
