package work_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBudgetRefsMethod checks work.budgetRefs: the named issues, projects and goals of the
// call's company (others, unknown ids and non-UUIDs are left out), the projects and goals
// of the issues found, every project paused by budget, and the company from the input when
// the call carries none.
func TestBudgetRefsMethod(t *testing.T) {
	t.Parallel()
	h := issStart(t)
	company := h.CreateCompany("Budget Refs")
	other := h.CreateCompany("Budget Refs Other")
	create := func(companyID, kind string, body map[string]any) string {
		t.Helper()
		res := h.Do("POST", "/api/companies/"+companyID+"/"+kind, body)
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		return res.Map(t)["id"].(string)
	}
	alpha := create(company, "projects", map[string]any{"name": "Alpha"})
	beta := create(company, "projects", map[string]any{"name": "Beta"})
	paused := create(company, "projects", map[string]any{"name": "Zeta over budget"})
	create(company, "projects", map[string]any{"name": "Unnamed here"})
	foreignProject := create(other, "projects", map[string]any{"name": "Foreign"})
	_, e := issCall(t, h, "projects.pauseForBudget", company, issBoard, map[string]any{"projectId": paused})
	require.Nil(t, e, "%v", e)
	goal := create(company, "goals", map[string]any{"title": "Ship it"})
	goal2 := create(company, "goals", map[string]any{"title": "Another goal"})
	foreignGoal := create(other, "goals", map[string]any{"title": "Foreign goal"})
	withBoth := issCreate(t, h, company, map[string]any{"title": "Attributed", "projectId": beta, "goalId": goal})["id"].(string)
	plain := issCreate(t, h, company, map[string]any{"title": "Plain"})["id"].(string)
	foreignIssue := issCreate(t, h, other, map[string]any{"title": "Foreign issue", "projectId": foreignProject})["id"].(string)
	missing := "00000000-0000-0000-0000-00000000abcd"

	type refs struct {
		Issues []struct {
			ID        string  `json:"id"`
			ProjectID *string `json:"projectId"`
			GoalID    *string `json:"goalId"`
		} `json:"issues"`
		Projects []struct {
			ID          string  `json:"id"`
			Name        string  `json:"name"`
			PauseReason *string `json:"pauseReason"`
			PausedAt    *string `json:"pausedAt"`
		} `json:"projects"`
		Goals []struct {
			ID    string `json:"id"`
			Title string `json:"title"`
		} `json:"goals"`
		PausedByBudgetCount int `json:"pausedByBudgetCount"`
	}
	call := func(companyID string, in map[string]any) refs {
		t.Helper()
		out, e := issCall(t, h, "budgetRefs", companyID, issBoard, in)
		require.Nil(t, e, "%v", e)
		var r refs
		require.NoError(t, json.Unmarshal(out, &r), "%s", out)
		return r
	}
	ids := func(r refs) (issues, projects, goals []string) {
		issues, projects, goals = []string{}, []string{}, []string{}
		for _, i := range r.Issues {
			issues = append(issues, i.ID)
		}
		for _, p := range r.Projects {
			projects = append(projects, p.Name)
		}
		for _, g := range r.Goals {
			goals = append(goals, g.Title)
		}
		return issues, projects, goals
	}

	t.Run("IssuesBringTheirProjectsAndGoals", func(t *testing.T) {
		r := call(company, map[string]any{"issueIds": []string{withBoth, plain, foreignIssue, missing, "not-a-uuid", withBoth}})
		issues, projects, goals := ids(r)
		want := []string{withBoth, plain}
		if want[0] > want[1] {
			want[0], want[1] = want[1], want[0]
		}
		require.Equal(t, want, issues, "the company's issues, ordered by id, once each")
		for _, i := range r.Issues {
			if i.ID == withBoth {
				require.Equal(t, beta, *i.ProjectID)
				require.Equal(t, goal, *i.GoalID)
			} else {
				require.Nil(t, i.ProjectID)
				require.Nil(t, i.GoalID)
			}
		}
		require.Equal(t, []string{"Beta", "Zeta over budget"}, projects, "the issue's project and every project paused by budget")
		require.Equal(t, []string{"Ship it"}, goals)
		require.Equal(t, 1, r.PausedByBudgetCount)
		p := r.Projects[1]
		require.Equal(t, paused, p.ID)
		require.Equal(t, "budget", *p.PauseReason)
		require.NotNil(t, p.PausedAt)
		require.Nil(t, r.Projects[0].PauseReason)
		require.Nil(t, r.Projects[0].PausedAt)
	})
	t.Run("NamedProjectsAndGoals", func(t *testing.T) {
		r := call(company, map[string]any{"projectIds": []string{beta, alpha, foreignProject, "x"}, "goalIds": []string{goal2, goal, foreignGoal, missing}})
		issues, projects, goals := ids(r)
		require.Empty(t, issues)
		require.Equal(t, []string{"Alpha", "Beta", "Zeta over budget"}, projects)
		require.Equal(t, []string{"Another goal", "Ship it"}, goals, "ordered by title")
	})
	t.Run("NothingNamed", func(t *testing.T) {
		r := call(company, map[string]any{})
		issues, projects, goals := ids(r)
		require.Empty(t, issues)
		require.Equal(t, []string{"Zeta over budget"}, projects, "the projects paused by budget are always listed")
		require.Empty(t, goals)
		require.NotNil(t, r.Issues, "empty lists, not null")
		require.NotNil(t, r.Goals)
	})
	t.Run("OtherCompanySeesItsOwn", func(t *testing.T) {
		r := call(other, map[string]any{"issueIds": []string{withBoth, foreignIssue}, "projectIds": []string{alpha}, "goalIds": []string{goal}})
		issues, projects, goals := ids(r)
		require.Equal(t, []string{foreignIssue}, issues)
		require.Equal(t, []string{"Foreign"}, projects)
		require.Empty(t, goals)
		require.Equal(t, 0, r.PausedByBudgetCount)
	})
	t.Run("CompanyFromInput", func(t *testing.T) {
		r := call("", map[string]any{"companyId": company, "goalIds": []string{goal}})
		_, projects, goals := ids(r)
		require.Equal(t, []string{"Zeta over budget"}, projects)
		require.Equal(t, []string{"Ship it"}, goals)
	})
	t.Run("Errors", func(t *testing.T) {
		_, e := issCall(t, h, "budgetRefs", "", issBoard, map[string]any{})
		require.NotNil(t, e)
		require.EqualValues(t, http.StatusBadRequest, e.Status)
		require.Contains(t, string(e.DetailsJson)+e.Message, "companyId")
	})
}
