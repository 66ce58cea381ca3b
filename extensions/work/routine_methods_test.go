package work_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	extensionv1 "github.com/keelhq/keel/sdk/proto/extension/v1"
)

func TestRoutineSupportMethods(t *testing.T) {
	t.Parallel()
	h := issStart(t)
	co := h.CreateCompany("Routine Support")
	other := h.CreateCompany("Routine Support Other")
	system := &extensionv1.Actor{Type: "system"}

	res := h.Do("POST", "/api/companies/"+co+"/projects", map[string]any{"name": "Ops"})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	projectID := res.Map(t)["id"].(string)
	goalID := issSeedGoal(t, h, co, "Grow")

	t.Run("ProjectsGetShowsThePauseState", func(t *testing.T) {
		out, e := issCall(t, h, "projects.get", co, system, map[string]any{"projectId": projectID})
		require.Nil(t, e)
		var p map[string]any
		require.NoError(t, json.Unmarshal(out, &p))
		require.Equal(t, projectID, p["id"])
		require.Contains(t, p, "pauseReason")
		require.Nil(t, p["pauseReason"])

		res := h.Do("PATCH", "/api/projects/"+projectID, map[string]any{"pauseReason": "manual"})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		out, e = issCall(t, h, "projects.get", co, system, map[string]any{"projectId": projectID})
		require.Nil(t, e)
		require.NoError(t, json.Unmarshal(out, &p))
		require.Equal(t, "manual", p["pauseReason"])
		res = h.Do("PATCH", "/api/projects/"+projectID, map[string]any{"pauseReason": nil})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)

		_, e = issCall(t, h, "projects.get", other, system, map[string]any{"projectId": projectID})
		require.NotNil(t, e)
		require.EqualValues(t, http.StatusNotFound, e.Status)
		require.Equal(t, "Project not found", e.Message)
		_, e = issCall(t, h, "projects.get", co, system, map[string]any{"projectId": "nope"})
		require.NotNil(t, e)
		require.EqualValues(t, http.StatusNotFound, e.Status)
	})

	t.Run("ProjectsList", func(t *testing.T) {
		out, e := issCall(t, h, "projects.list", co, system, map[string]any{})
		require.Nil(t, e)
		var ps []map[string]any
		require.NoError(t, json.Unmarshal(out, &ps))
		require.Len(t, ps, 1)
		require.Equal(t, projectID, ps[0]["id"])
		require.Contains(t, ps[0], "workspaces")
		out, e = issCall(t, h, "projects.list", other, system, map[string]any{})
		require.Nil(t, e)
		require.NoError(t, json.Unmarshal(out, &ps))
		require.Empty(t, ps, "another company's projects are not listed")
	})

	t.Run("GoalsGet", func(t *testing.T) {
		out, e := issCall(t, h, "goals.get", co, system, map[string]any{"goalId": goalID})
		require.Nil(t, e)
		var g map[string]any
		require.NoError(t, json.Unmarshal(out, &g))
		require.Equal(t, "Grow", g["title"])
		_, e = issCall(t, h, "goals.get", other, system, map[string]any{"goalId": goalID})
		require.NotNil(t, e)
		require.Equal(t, "Goal not found", e.Message)
	})

	t.Run("IssuesBriefsKeepInputOrderAndSkipStrangers", func(t *testing.T) {
		a := issCreate(t, h, co, map[string]any{"title": "A", "projectId": projectID, "priority": "high"})
		b := issCreate(t, h, co, map[string]any{"title": "B"})
		x := issCreate(t, h, other, map[string]any{"title": "X"})
		out, e := issCall(t, h, "issues.briefs", co, system, map[string]any{
			"issueIds": []string{b["id"].(string), x["id"].(string), "not-a-uuid", a["id"].(string), b["id"].(string)}})
		require.Nil(t, e)
		var briefs []map[string]any
		require.NoError(t, json.Unmarshal(out, &briefs))
		require.Len(t, briefs, 2)
		require.Equal(t, b["id"], briefs[0]["id"])
		require.Nil(t, briefs[0]["projectId"])
		require.Equal(t, a["id"], briefs[1]["id"])
		require.Equal(t, projectID, briefs[1]["projectId"])
		require.Equal(t, "high", briefs[1]["priority"])
		for _, f := range []string{"identifier", "title", "status", "originKind", "updatedAt"} {
			require.Contains(t, briefs[1], f)
		}
		_, e = issCall(t, h, "issues.briefs", "", system, map[string]any{"issueIds": []string{a["id"].(string)}})
		require.NotNil(t, e)
		require.EqualValues(t, http.StatusBadRequest, e.Status)
	})
}
