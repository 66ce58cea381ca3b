package work

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
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
	ID          string     `json:"id"`
	Name        string     `json:"name"`
	PauseReason *string    `json:"pauseReason"`
	PausedAt    *time.Time `json:"pausedAt"`
}

type budgetGoalRef struct {
	ID    string `json:"id"`
	Title string `json:"title"`
}

// budgetIssueRef is an issue of work.budgetRefs: what a cost attributed to it derives.
type budgetIssueRef struct {
	ID        string  `json:"id"`
	ProjectID *string `json:"projectId"`
	GoalID    *string `json:"goalId"`
}

// The statements of work.budgetRefs take the ids as uuid[] parameters, so that each is
// prepared once per connection and planned from its cached plan, whatever the ids (the costs
// owner calls it for every cost event that names an issue, project or goal). $1 is the
// company, $2 the named ids, $3 the named issues, whose projects and goals the project and
// goal reads add: the issues are filtered by the company there as in the issue read, so that
// the three go to the database together, in one round trip.
const (
	budgetIssuesSQL = `SELECT id::text, project_id::text, goal_id::text FROM issues
		WHERE company_id = $1 AND id = ANY($2::uuid[]) ORDER BY id`
	budgetProjectsSQL = `SELECT id::text, name, pause_reason, paused_at FROM projects
		WHERE company_id = $1 AND (id = ANY($2::uuid[]) OR pause_reason = '` + budgetPauseReason + `'
			OR id IN (SELECT project_id FROM issues WHERE company_id = $1 AND id = ANY($3::uuid[])))
		ORDER BY name, id`
	budgetGoalsSQL = `SELECT id::text, title FROM goals
		WHERE company_id = $1 AND (id = ANY($2::uuid[])
			OR id IN (SELECT goal_id FROM issues WHERE company_id = $1 AND id = ANY($3::uuid[])))
		ORDER BY title, id`
)

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
	issueIDs, projectIDs, goalIDs := uuidsOnly(in.IssueIDs), uuidsOnly(in.ProjectIDs), uuidsOnly(in.GoalIDs)
	issues, projects, goals := []budgetIssueRef{}, []budgetProjectRef{}, []budgetGoalRef{}
	b := &pgx.Batch{}
	if len(issueIDs) > 0 {
		b.Queue(budgetIssuesSQL, companyID, issueIDs).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var r budgetIssueRef
				if err := rows.Scan(&r.ID, &r.ProjectID, &r.GoalID); err != nil {
					return err
				}
				issues = append(issues, r)
			}
			return rows.Err()
		})
	}
	b.Queue(budgetProjectsSQL, companyID, projectIDs, issueIDs).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var r budgetProjectRef
			if err := rows.Scan(&r.ID, &r.Name, &r.PauseReason, &r.PausedAt); err != nil {
				return err
			}
			if r.PausedAt != nil {
				at := r.PausedAt.UTC()
				r.PausedAt = &at
			}
			projects = append(projects, r)
		}
		return rows.Err()
	})
	if len(goalIDs) > 0 || len(issueIDs) > 0 {
		b.Queue(budgetGoalsSQL, companyID, goalIDs, issueIDs).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var r budgetGoalRef
				if err := rows.Scan(&r.ID, &r.Title); err != nil {
					return err
				}
				goals = append(goals, r)
			}
			return rows.Err()
		})
	}
	if err := w.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("error reading issues, projects and goals of company %s: %w", companyID, err)
	}
	paused := 0
	for _, p := range projects {
		if p.PauseReason != nil && *p.PauseReason == budgetPauseReason {
			paused++
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
