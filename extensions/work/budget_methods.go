package work

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/keelhq/keel/sdk"
)

// budgetPauseReason is the pauseReason budget enforcement sets and clears; a project paused
// for any other reason is left alone by the budget methods.
const budgetPauseReason = "budget"

// Provided methods for budget enforcement ("work.projects.pauseForBudget",
// "work.projects.resumeFromBudget") and the costs extension's project and goal lookups
// ("work.budgetRefs"). The call's company scopes every project they name.
func init() {
	addMethods(map[string]method{
		"projects.pauseForBudget": {
			Description: "Pause a project of the call's company for budget enforcement: input {projectId}. Sets pauseReason \"budget\" " +
				"(a project already paused keeps its reason). Output: {project, paused (whether this call paused it), " +
				"issueIds (its issues that are not done or cancelled, whose runs the caller cancels)}.",
			Call: callProjectsPauseForBudget,
		},
		"projects.resumeFromBudget": {
			Description: "Resume a project paused by budget enforcement: input {projectId}. Only a pauseReason of \"budget\" is " +
				"cleared. Output: {project, resumed}.",
			Call: callProjectsResumeFromBudget,
		},
		"budgetRefs": {
			ReadOnly: true,
			Description: "Look up issues, projects and goals of the call's company for cost attribution and budget views: " +
				"input {issueIds?, projectIds?, goalIds?}. Output: {issues: [{id, projectId, goalId}] (the named ones that exist; " +
				"their projects and goals are looked up too), projects: [{id, name, pauseReason, pausedAt}] (the named ones " +
				"that exist, plus every project paused by budget), goals: [{id, title}], pausedByBudgetCount}.",
			Call: callBudgetRefs,
		},
	})
}

// budgetProjectInput is the input of the pause and resume methods.
type budgetProjectInput struct {
	ProjectID string `json:"projectId"`
}

// budgetProject loads the project a budget method names, inside the call's company.
func (w *Work) budgetProject(ctx context.Context, db bun.IDB, call *sdk.MethodCall, projectID string, forUpdate bool) (*Project, error) {
	if !isUUID(projectID) {
		return nil, invalid("projectId", "must be a UUID")
	}
	p, err := w.projectGet(ctx, db, projectID, forUpdate)
	if err != nil {
		return nil, err
	}
	if p == nil || (call.CompanyID != "" && p.CompanyID != call.CompanyID) {
		return nil, notFound("Project not found")
	}
	return p, nil
}

func callProjectsPauseForBudget(w *Work, ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in budgetProjectInput
	if err := bindStrict(call, &in); err != nil {
		return nil, err
	}
	var p *Project
	paused := false
	err := w.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var err error
		if p, err = w.budgetProject(ctx, tx, call, in.ProjectID, true); err != nil {
			return err
		}
		if p.PauseReason != nil {
			return nil
		}
		reason, now := budgetPauseReason, time.Now().UTC()
		p.PauseReason, p.PausedAt, p.UpdatedAt, paused = &reason, &now, now, true
		if _, err := tx.NewUpdate().Model(p).Column("pause_reason", "paused_at", "updated_at").WherePK().Exec(ctx); err != nil {
			return fmt.Errorf("error pausing project %s: %w", p.ID, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var issueIDs []string
	if err := w.db.NewSelect().Table("issues").Column("id").Where("company_id = ? AND project_id = ?", p.CompanyID, p.ID).
		Where("status NOT IN ('done', 'cancelled')").OrderExpr("created_at").Limit(5000).Scan(ctx, &issueIDs); err != nil {
		return nil, fmt.Errorf("error listing live issues of project %s: %w", p.ID, err)
	}
	if issueIDs == nil {
		issueIDs = []string{}
	}
	if err := w.projectsDecorate(ctx, w.db, []*Project{p}); err != nil {
		return nil, err
	}
	if paused {
		ctx = methodContext(ctx, call, p.CompanyID)
		w.activityOrLog(ctx, p.CompanyID, "project.paused", "project", p.ID,
			map[string]any{"pauseReason": budgetPauseReason, "projectId": p.ID})
	}
	return map[string]any{"project": p, "paused": paused, "issueIds": issueIDs}, nil
}

func callProjectsResumeFromBudget(w *Work, ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in budgetProjectInput
	if err := bindStrict(call, &in); err != nil {
		return nil, err
	}
	var p *Project
	resumed := false
	err := w.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var err error
		if p, err = w.budgetProject(ctx, tx, call, in.ProjectID, true); err != nil {
			return err
		}
		if p.PauseReason == nil || *p.PauseReason != budgetPauseReason {
			return nil
		}
		p.PauseReason, p.PausedAt, p.UpdatedAt, resumed = nil, nil, time.Now().UTC(), true
		if _, err := tx.NewUpdate().Model(p).Column("pause_reason", "paused_at", "updated_at").WherePK().Exec(ctx); err != nil {
			return fmt.Errorf("error resuming project %s: %w", p.ID, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := w.projectsDecorate(ctx, w.db, []*Project{p}); err != nil {
		return nil, err
	}
	if resumed {
		ctx = methodContext(ctx, call, p.CompanyID)
		w.activityOrLog(ctx, p.CompanyID, "project.resumed", "project", p.ID,
			map[string]any{"previousPauseReason": budgetPauseReason, "projectId": p.ID})
	}
	return map[string]any{"project": p, "resumed": resumed}, nil
}

// budgetProjectRef and budgetGoalRef are the rows of work.budgetRefs.
type budgetProjectRef struct {
	ID          string     `bun:"id" json:"id"`
	Name        string     `bun:"name" json:"name"`
	PauseReason *string    `bun:"pause_reason" json:"pauseReason"`
	PausedAt    *time.Time `bun:"paused_at" json:"pausedAt"`
}

type budgetGoalRef struct {
	ID    string `bun:"id" json:"id"`
	Title string `bun:"title" json:"title"`
}

// budgetIssueRef is an issue of work.budgetRefs: what a cost attributed to it derives.
type budgetIssueRef struct {
	ID        string  `bun:"id" json:"id"`
	ProjectID *string `bun:"project_id" json:"projectId"`
	GoalID    *string `bun:"goal_id" json:"goalId"`
}

func callBudgetRefs(w *Work, ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in struct {
		CompanyID  string   `json:"companyId"`
		IssueIDs   []string `json:"issueIds"`
		ProjectIDs []string `json:"projectIds"`
		GoalIDs    []string `json:"goalIds"`
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
	issues := []budgetIssueRef{}
	if issueIDs := uuidsOnly(in.IssueIDs); len(issueIDs) > 0 {
		if err := w.db.NewSelect().Table("issues").Column("id", "project_id", "goal_id").
			Where("company_id = ? AND id IN (?)", companyID, bun.In(issueIDs)).OrderExpr("id").Scan(ctx, &issues); err != nil {
			return nil, fmt.Errorf("error reading issues of company %s: %w", companyID, err)
		}
		for _, iss := range issues {
			if iss.ProjectID != nil {
				in.ProjectIDs = append(in.ProjectIDs, *iss.ProjectID)
			}
			if iss.GoalID != nil {
				in.GoalIDs = append(in.GoalIDs, *iss.GoalID)
			}
		}
	}
	projectIDs, goalIDs := uuidsOnly(in.ProjectIDs), uuidsOnly(in.GoalIDs)
	projects := []budgetProjectRef{}
	if err := w.db.NewSelect().Table("projects").Column("id", "name", "pause_reason", "paused_at").
		Where("company_id = ?", companyID).
		Where("(id IN (?) OR pause_reason = ?)", bun.In(append(projectIDs, "00000000-0000-0000-0000-000000000000")), budgetPauseReason).
		OrderExpr("name, id").Scan(ctx, &projects); err != nil {
		return nil, fmt.Errorf("error reading projects of company %s: %w", companyID, err)
	}
	paused := 0
	for _, p := range projects {
		if p.PauseReason != nil && *p.PauseReason == budgetPauseReason {
			paused++
		}
	}
	goals := []budgetGoalRef{}
	if len(goalIDs) > 0 {
		if err := w.db.NewSelect().Table("goals").Column("id", "title").Where("company_id = ? AND id IN (?)", companyID, bun.In(goalIDs)).
			OrderExpr("title, id").Scan(ctx, &goals); err != nil {
			return nil, fmt.Errorf("error reading goals of company %s: %w", companyID, err)
		}
	}
	return map[string]any{"issues": issues, "projects": projects, "goals": goals, "pausedByBudgetCount": paused}, nil
}

// uuidsOnly keeps the canonical UUIDs of ids, without repeats.
func uuidsOnly(ids []string) []string {
	out := []string{}
	for _, id := range uniqueStrings(ids) {
		if isUUID(id) {
			out = append(out, id)
		}
	}
	return out
}
