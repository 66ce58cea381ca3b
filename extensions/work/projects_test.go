package work_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

// pgsIssue describes an issue the projects, goals, approvals and search tests insert
// directly (they do not depend on the issues routes).
type pgsIssue struct {
	Company, Identifier, Title, Description string
	Status, Priority, AssigneeAgentID       string
	ProjectID                               string
	UpdatedAt, CreatedAt                    time.Time
}

// pgsSeedIssue inserts an issue into ext_work.issues as the superuser and returns its id.
func pgsSeedIssue(t *testing.T, h *sdktest.Host, in pgsIssue) string {
	t.Helper()
	id := uuid.NewString()
	_, num, _ := strings.Cut(in.Identifier, "-")
	n, err := strconv.Atoi(num)
	require.NoError(t, err, "identifier %s", in.Identifier)
	if in.Status == "" {
		in.Status = "todo"
	}
	if in.Priority == "" {
		in.Priority = "medium"
	}
	if in.UpdatedAt.IsZero() {
		in.UpdatedAt = time.Now()
	}
	if in.CreatedAt.IsZero() {
		in.CreatedAt = in.UpdatedAt
	}
	nullable := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	_, err = h.Kernel.Pool.Exec(context.Background(), `INSERT INTO ext_work.issues
		(id, company_id, title, description, status, priority, issue_number, identifier, assignee_agent_id, project_id, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
		id, in.Company, in.Title, nullable(in.Description), in.Status, in.Priority, n, in.Identifier,
		nullable(in.AssigneeAgentID), nullable(in.ProjectID), in.CreatedAt, in.UpdatedAt)
	require.NoError(t, err)
	return id
}

// pgsActions lists the activity actions recorded for an entity, oldest first.
func pgsActions(t *testing.T, h *sdktest.Host, companyID, entityID string) []string {
	t.Helper()
	res := h.Do("GET", "/api/companies/"+companyID+"/activity?limit=500&entityId="+entityID, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var list []struct {
		Action string `json:"action"`
	}
	res.JSON(t, &list)
	out := make([]string, 0, len(list))
	for i := len(list) - 1; i >= 0; i-- {
		out = append(out, list[i].Action)
	}
	return out
}

// pgsValidation asserts a 400 Validation error naming the path.
func pgsValidation(t *testing.T, res *sdktest.Response, path string) {
	t.Helper()
	require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
	var body struct {
		Error   string `json:"error"`
		Details []struct {
			Path string `json:"path"`
		} `json:"details"`
	}
	res.JSON(t, &body)
	require.Equal(t, "Validation error", body.Error)
	var paths []string
	for _, d := range body.Details {
		paths = append(paths, d.Path)
	}
	require.Contains(t, paths, path, "%s", res.Body)
}

type projectJSON struct {
	ID          string   `json:"id"`
	CompanyID   string   `json:"companyId"`
	GoalID      *string  `json:"goalId"`
	Name        string   `json:"name"`
	Description *string  `json:"description"`
	Status      string   `json:"status"`
	LeadAgentID *string  `json:"leadAgentId"`
	TargetDate  *string  `json:"targetDate"`
	Color       *string  `json:"color"`
	Icon        *string  `json:"icon"`
	PauseReason *string  `json:"pauseReason"`
	PausedAt    *string  `json:"pausedAt"`
	URLKey      string   `json:"urlKey"`
	GoalIDs     []string `json:"goalIds"`
	Goals       []struct {
		ID    string `json:"id"`
		Title string `json:"title"`
	} `json:"goals"`
	Workspaces       []workspaceJSON `json:"workspaces"`
	PrimaryWorkspace *workspaceJSON  `json:"primaryWorkspace"`
}

type workspaceJSON struct {
	ID         string         `json:"id"`
	ProjectID  string         `json:"projectId"`
	Name       string         `json:"name"`
	SourceType string         `json:"sourceType"`
	Cwd        *string        `json:"cwd"`
	RepoURL    *string        `json:"repoUrl"`
	Visibility string         `json:"visibility"`
	IsPrimary  bool           `json:"isPrimary"`
	Metadata   map[string]any `json:"metadata"`
}

func TestProjects(t *testing.T) {
	t.Parallel()
	h := startWork(t)
	co := h.CreateCompany("Projects Co")
	other := h.CreateCompany("Other Co")
	lead := h.CreateAgent(co, "Lead", "pm")
	outsider := h.CreateAgent(other, "Outsider", "engineer")

	res := h.Do("POST", "/api/companies/"+co+"/goals", map[string]any{"title": "Ship the smoke test", "level": "company"})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	goalID := res.Map(t)["id"].(string)
	res = h.Do("POST", "/api/companies/"+other+"/goals", map[string]any{"title": "Other goal"})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	otherGoalID := res.Map(t)["id"].(string)

	var p projectJSON
	t.Run("CreateWithDefaults", func(t *testing.T) {
		res := h.Do("POST", "/api/companies/"+co+"/projects", map[string]any{"name": "  Smoke Project  "})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		var got projectJSON
		res.JSON(t, &got)
		require.Equal(t, "Smoke Project", got.Name)
		require.Equal(t, "backlog", got.Status)
		require.Equal(t, "smoke-project", got.URLKey)
		require.Empty(t, got.GoalIDs)
		require.Empty(t, got.Workspaces)
		require.Nil(t, got.PrimaryWorkspace)
		require.Nil(t, got.PausedAt)
	})

	t.Run("CreateFull", func(t *testing.T) {
		res := h.Do("POST", "/api/companies/"+co+"/projects", map[string]any{
			"name": "Website", "description": "The public site", "status": "in_progress", "leadAgentId": lead.ID,
			"targetDate": "2026-12-31", "color": "#AABBCC", "icon": "globe", "goalIds": []string{goalID},
			"workspace": map[string]any{"repoUrl": "https://github.com/acme/site.git", "repoRef": "main"},
		})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		res.JSON(t, &p)
		require.Equal(t, "in_progress", p.Status)
		require.Equal(t, lead.ID, *p.LeadAgentID)
		require.Equal(t, "2026-12-31", *p.TargetDate)
		require.Equal(t, "#aabbcc", *p.Color)
		require.Equal(t, []string{goalID}, p.GoalIDs)
		require.Equal(t, goalID, *p.GoalID)
		require.Equal(t, "Ship the smoke test", p.Goals[0].Title)
		require.Len(t, p.Workspaces, 1)
		ws := p.Workspaces[0]
		require.Equal(t, "site", ws.Name)
		require.Equal(t, "git_repo", ws.SourceType)
		require.True(t, ws.IsPrimary)
		require.Equal(t, ws.ID, p.PrimaryWorkspace.ID)
		require.Equal(t, []string{"project.created", "project.workspace_created"}, pgsActions(t, h, co, p.ID))
	})

	t.Run("CreateValidation", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			body any
			path string
		}{
			{"MissingName", map[string]any{"description": "x"}, "name"},
			{"LongName", map[string]any{"name": strings.Repeat("n", 201)}, "name"},
			{"BadStatus", map[string]any{"name": "x", "status": "done"}, "status"},
			{"BadColor", map[string]any{"name": "x", "color": "red"}, "color"},
			{"BadDate", map[string]any{"name": "x", "targetDate": "31/12/2026"}, "targetDate"},
			{"LeadOfOtherCompany", map[string]any{"name": "x", "leadAgentId": outsider.ID}, "leadAgentId"},
			{"GoalOfOtherCompany", map[string]any{"name": "x", "goalIds": []string{otherGoalID}}, "goalIds"},
			{"WorkspaceWithoutPlace", map[string]any{"name": "x", "workspace": map[string]any{"name": "w"}}, "workspace.cwd"},
			{"WrongType", map[string]any{"name": 5}, "name"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				pgsValidation(t, h.Do("POST", "/api/companies/"+co+"/projects", tc.body), tc.path)
			})
		}
	})

	t.Run("GetAndList", func(t *testing.T) {
		res := h.Do("GET", "/api/projects/"+p.ID, nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		var got projectJSON
		res.JSON(t, &got)
		require.Equal(t, []string{goalID}, got.GoalIDs)
		require.Len(t, got.Workspaces, 1)

		res = h.Do("GET", "/api/companies/"+co+"/projects", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		var list []projectJSON
		res.JSON(t, &list)
		require.Len(t, list, 2)
		require.Equal(t, p.ID, list[0].ID, "newest first")
		require.Equal(t, []string{goalID}, list[0].GoalIDs)

		res = h.Do("GET", "/api/companies/"+co+"/projects?status=in_progress", nil)
		res.JSON(t, &list)
		require.Len(t, list, 1)
		pgsValidation(t, h.Do("GET", "/api/companies/"+co+"/projects?status=nope", nil), "status")

		require.Equal(t, http.StatusNotFound, h.Do("GET", "/api/projects/"+uuid.NewString(), nil).Status)
		require.Equal(t, http.StatusNotFound, h.Do("GET", "/api/projects/not-a-uuid", nil).Status)
	})

	t.Run("PatchAndPause", func(t *testing.T) {
		res := h.Do("PATCH", "/api/projects/"+p.ID, map[string]any{"name": "Website v2", "color": nil, "goalIds": []string{}})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		var got projectJSON
		res.JSON(t, &got)
		require.Equal(t, "Website v2", got.Name)
		require.Nil(t, got.Color)
		require.Empty(t, got.GoalIDs)
		require.Nil(t, got.GoalID)
		require.Equal(t, "in_progress", got.Status, "untouched")

		res = h.Do("PATCH", "/api/projects/"+p.ID, map[string]any{"pauseReason": "budget review"})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		res.JSON(t, &got)
		require.Equal(t, "budget review", *got.PauseReason)
		require.NotNil(t, got.PausedAt)
		pausedAt := *got.PausedAt

		res = h.Do("PATCH", "/api/projects/"+p.ID, map[string]any{"pauseReason": "still reviewing"})
		res.JSON(t, &got)
		require.Equal(t, pausedAt, *got.PausedAt, "pausedAt keeps the first pause")

		res = h.Do("PATCH", "/api/projects/"+p.ID, map[string]any{"pauseReason": nil})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		res.JSON(t, &got)
		require.Nil(t, got.PauseReason)
		require.Nil(t, got.PausedAt)

		pgsValidation(t, h.Do("PATCH", "/api/projects/"+p.ID, map[string]any{"name": nil}), "name")
		pgsValidation(t, h.Do("PATCH", "/api/projects/"+p.ID, map[string]any{"pauseReason": ""}), "pauseReason")
		pgsValidation(t, h.Do("PATCH", "/api/projects/"+p.ID, map[string]any{"status": "paused"}), "status")
		pgsValidation(t, h.Do("PATCH", "/api/projects/"+p.ID, map[string]any{"leadAgentId": outsider.ID}), "leadAgentId")
		require.Contains(t, pgsActions(t, h, co, p.ID), "project.updated")
	})

	t.Run("Workspaces", func(t *testing.T) {
		base := "/api/projects/" + p.ID + "/workspaces"
		pgsValidation(t, h.Do("POST", base, map[string]any{"name": "nowhere"}), "cwd")
		pgsValidation(t, h.Do("POST", base, map[string]any{"cwd": "/srv", "sourceType": "ftp"}), "sourceType")

		res := h.Do("POST", base, map[string]any{"cwd": "/srv/site", "isPrimary": true, "metadata": map[string]any{"k": "v"}})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		var second workspaceJSON
		res.JSON(t, &second)
		require.True(t, second.IsPrimary)
		require.Equal(t, "local_path", second.SourceType)
		require.Equal(t, "site", second.Name)
		require.Equal(t, "v", second.Metadata["k"])

		res = h.Do("GET", base, nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		var list []workspaceJSON
		res.JSON(t, &list)
		require.Len(t, list, 2)
		first := list[0]
		require.False(t, first.IsPrimary, "setting a primary clears the others")

		res = h.Do("PATCH", base+"/"+first.ID, map[string]any{"isPrimary": true, "name": "Repo"})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		var patched workspaceJSON
		res.JSON(t, &patched)
		require.True(t, patched.IsPrimary)
		require.Equal(t, "Repo", patched.Name)
		res = h.Do("GET", "/api/projects/"+p.ID, nil)
		var got projectJSON
		res.JSON(t, &got)
		require.Equal(t, first.ID, got.PrimaryWorkspace.ID)
		for _, ws := range got.Workspaces {
			require.Equal(t, ws.ID == first.ID, ws.IsPrimary)
		}

		pgsValidation(t, h.Do("PATCH", base+"/"+first.ID, map[string]any{"repoUrl": nil}), "cwd")
		require.Equal(t, http.StatusNotFound, h.Do("PATCH", base+"/"+uuid.NewString(), map[string]any{"name": "x"}).Status)

		res = h.Do("DELETE", base+"/"+first.ID, nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		res = h.Do("GET", base, nil)
		res.JSON(t, &list)
		require.Len(t, list, 1)
		require.True(t, list[0].IsPrimary, "the remaining workspace becomes primary")
		require.Equal(t, http.StatusNotFound, h.Do("DELETE", base+"/"+first.ID, nil).Status)

		actions := pgsActions(t, h, co, p.ID)
		require.Contains(t, actions, "project.workspace_updated")
		require.Contains(t, actions, "project.workspace_deleted")
	})

	t.Run("CrossCompanyRefused", func(t *testing.T) {
		as := outsider.As("")
		require.Equal(t, http.StatusForbidden, h.Do("GET", "/api/projects/"+p.ID, nil, as...).Status)
		require.Equal(t, http.StatusForbidden, h.Do("PATCH", "/api/projects/"+p.ID, map[string]any{"name": "x"}, as...).Status)
		require.Equal(t, http.StatusForbidden, h.Do("DELETE", "/api/projects/"+p.ID, nil, as...).Status)
		require.Equal(t, http.StatusForbidden, h.Do("GET", "/api/projects/"+p.ID+"/workspaces", nil, as...).Status)
		require.Equal(t, http.StatusForbidden, h.Do("GET", "/api/companies/"+co+"/projects", nil, as...).Status)
		require.Equal(t, http.StatusForbidden, h.Do("POST", "/api/companies/"+co+"/projects", map[string]any{"name": "x"}, as...).Status)
		// The company's own agent may.
		require.Equal(t, http.StatusOK, h.Do("GET", "/api/projects/"+p.ID, nil, lead.As("")...).Status)
	})

	t.Run("Delete", func(t *testing.T) {
		res := h.Do("DELETE", "/api/projects/"+p.ID, nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, http.StatusNotFound, h.Do("GET", "/api/projects/"+p.ID, nil).Status)
		require.Equal(t, http.StatusNotFound, h.Do("DELETE", "/api/projects/"+p.ID, nil).Status)
		require.Contains(t, pgsActions(t, h, co, p.ID), "project.deleted")
	})
}
