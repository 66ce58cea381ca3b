package work_test

import (
	"net/http"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

type goalJSON struct {
	ID           string  `json:"id"`
	CompanyID    string  `json:"companyId"`
	Title        string  `json:"title"`
	Description  *string `json:"description"`
	Level        string  `json:"level"`
	Status       string  `json:"status"`
	ParentID     *string `json:"parentId"`
	OwnerAgentID *string `json:"ownerAgentId"`
}

func TestGoals(t *testing.T) {
	t.Parallel()
	h := startWork(t)
	co := h.CreateCompany("Goals Co")
	other := h.CreateCompany("Elsewhere")
	owner := h.CreateAgent(co, "Owner", "ceo")
	outsider := h.CreateAgent(other, "Outsider", "engineer")

	create := func(t *testing.T, companyID string, body map[string]any) goalJSON {
		t.Helper()
		res := h.Do("POST", "/api/companies/"+companyID+"/goals", body)
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		var g goalJSON
		res.JSON(t, &g)
		return g
	}
	var root, mid, leaf goalJSON

	t.Run("CreateDefaultsAndTree", func(t *testing.T) {
		root = create(t, co, map[string]any{"title": "Be profitable", "level": "company", "status": "active", "ownerAgentId": owner.ID})
		require.Equal(t, "company", root.Level)
		require.Equal(t, "active", root.Status)
		require.Equal(t, owner.ID, *root.OwnerAgentID)
		mid = create(t, co, map[string]any{"title": "Grow sales", "parentId": root.ID, "level": "team"})
		leaf = create(t, co, map[string]any{"title": "  Call ten customers ", "parentId": mid.ID})
		require.Equal(t, "Call ten customers", leaf.Title)
		require.Equal(t, "task", leaf.Level, "default level")
		require.Equal(t, "planned", leaf.Status, "default status")
		require.Equal(t, mid.ID, *leaf.ParentID)
		require.Equal(t, []string{"goal.created"}, pgsActions(t, h, co, leaf.ID))
	})

	otherGoal := create(t, other, map[string]any{"title": "Other"})

	t.Run("CreateValidation", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			body map[string]any
			path string
		}{
			{"MissingTitle", map[string]any{"level": "task"}, "title"},
			{"BlankTitle", map[string]any{"title": "   "}, "title"},
			{"BadLevel", map[string]any{"title": "x", "level": "galaxy"}, "level"},
			{"BadStatus", map[string]any{"title": "x", "status": "done"}, "status"},
			{"ParentOfOtherCompany", map[string]any{"title": "x", "parentId": otherGoal.ID}, "parentId"},
			{"MissingParent", map[string]any{"title": "x", "parentId": uuid.NewString()}, "parentId"},
			{"OwnerOfOtherCompany", map[string]any{"title": "x", "ownerAgentId": outsider.ID}, "ownerAgentId"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				pgsValidation(t, h.Do("POST", "/api/companies/"+co+"/goals", tc.body), tc.path)
			})
		}
	})

	t.Run("GetAndList", func(t *testing.T) {
		res := h.Do("GET", "/api/goals/"+mid.ID, nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		var g goalJSON
		res.JSON(t, &g)
		require.Equal(t, "Grow sales", g.Title)
		require.Equal(t, http.StatusNotFound, h.Do("GET", "/api/goals/"+uuid.NewString(), nil).Status)

		var list []goalJSON
		res = h.Do("GET", "/api/companies/"+co+"/goals", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		res.JSON(t, &list)
		require.Len(t, list, 3)
		res = h.Do("GET", "/api/companies/"+co+"/goals?parentId=null", nil)
		res.JSON(t, &list)
		require.Len(t, list, 1)
		require.Equal(t, root.ID, list[0].ID)
		res = h.Do("GET", "/api/companies/"+co+"/goals?level=team,task", nil)
		res.JSON(t, &list)
		require.Len(t, list, 2)
		pgsValidation(t, h.Do("GET", "/api/companies/"+co+"/goals?status=bogus", nil), "status")
	})

	t.Run("PatchAndCycles", func(t *testing.T) {
		res := h.Do("PATCH", "/api/goals/"+leaf.ID, map[string]any{"status": "achieved", "description": "done by Friday"})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		var g goalJSON
		res.JSON(t, &g)
		require.Equal(t, "achieved", g.Status)
		require.Equal(t, "done by Friday", *g.Description)
		require.Equal(t, "Call ten customers", g.Title, "untouched")
		require.Equal(t, []string{"goal.created", "goal.updated"}, pgsActions(t, h, co, leaf.ID))

		pgsValidation(t, h.Do("PATCH", "/api/goals/"+root.ID, map[string]any{"parentId": leaf.ID}), "parentId")
		pgsValidation(t, h.Do("PATCH", "/api/goals/"+root.ID, map[string]any{"parentId": root.ID}), "parentId")
		pgsValidation(t, h.Do("PATCH", "/api/goals/"+root.ID, map[string]any{"title": nil}), "title")
		pgsValidation(t, h.Do("PATCH", "/api/goals/"+root.ID, map[string]any{"ownerAgentId": outsider.ID}), "ownerAgentId")

		// Moving a leaf under the root is fine; clearing a parent too.
		res = h.Do("PATCH", "/api/goals/"+leaf.ID, map[string]any{"parentId": root.ID})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		res = h.Do("PATCH", "/api/goals/"+mid.ID, map[string]any{"parentId": nil, "ownerAgentId": nil})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		res.JSON(t, &g)
		require.Nil(t, g.ParentID)
	})

	t.Run("CrossCompanyRefused", func(t *testing.T) {
		as := outsider.As("")
		require.Equal(t, http.StatusForbidden, h.Do("GET", "/api/goals/"+root.ID, nil, as...).Status)
		require.Equal(t, http.StatusForbidden, h.Do("PATCH", "/api/goals/"+root.ID, map[string]any{"title": "x"}, as...).Status)
		require.Equal(t, http.StatusForbidden, h.Do("DELETE", "/api/goals/"+root.ID, nil, as...).Status)
		require.Equal(t, http.StatusForbidden, h.Do("GET", "/api/companies/"+co+"/goals", nil, as...).Status)
		require.Equal(t, http.StatusOK, h.Do("GET", "/api/goals/"+root.ID, nil, owner.As("")...).Status)
	})

	t.Run("Delete", func(t *testing.T) {
		res := h.Do("DELETE", "/api/goals/"+root.ID, nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, http.StatusNotFound, h.Do("GET", "/api/goals/"+root.ID, nil).Status)
		res = h.Do("GET", "/api/goals/"+leaf.ID, nil)
		var g goalJSON
		res.JSON(t, &g)
		require.Nil(t, g.ParentID, "children of a deleted goal become top-level")
		require.Contains(t, pgsActions(t, h, co, root.ID), "goal.deleted")
	})
}
