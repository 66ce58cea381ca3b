package work_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	extensionv1 "github.com/keelhq/keel/sdk/proto/extension/v1"
)

func TestDashboardCountsMethod(t *testing.T) {
	t.Parallel()
	h := issStart(t)
	company := h.CreateCompany("Dash Counts")
	other := h.CreateCompany("Dash Other")
	outsider := h.CreateAgent(other, "Outsider", "engineer")

	for _, st := range []string{"backlog", "todo", "in_progress", "in_progress", "in_review", "blocked", "done", "cancelled", "cancelled"} {
		issCreate(t, h, company, map[string]any{"title": "Task " + st, "status": st})
	}
	issCreate(t, h, other, map[string]any{"title": "Elsewhere", "status": "todo"})

	approval := func(companyID string) string {
		res := h.Do("POST", "/api/companies/"+companyID+"/approvals", map[string]any{"type": "request_board_approval", "payload": map[string]any{}})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		return res.Map(t)["id"].(string)
	}
	approval(company)
	approval(company)
	approval(other)
	for path, id := range map[string]string{"approve": approval(company), "request-revision": approval(company)} {
		res := h.Do("POST", "/api/approvals/"+id+"/"+path, map[string]any{})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	}

	project := func(name string) string {
		res := h.Do("POST", "/api/companies/"+company+"/projects", map[string]any{"name": name})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		return res.Map(t)["id"].(string)
	}
	budgetPause := func(projectID string) {
		_, e := issCall(t, h, "projects.pauseForBudget", company, issBoard, map[string]any{"projectId": projectID})
		require.Nil(t, e, "%v", e)
	}
	budgetPause(project("Over budget"))
	archived := project("Archived over budget")
	budgetPause(archived)
	_, err := h.Kernel.Pool.Exec(context.Background(), `UPDATE ext_work.projects SET archived_at = now() WHERE id = $1`, archived)
	require.NoError(t, err)
	res := h.Do("PATCH", "/api/projects/"+project("On hold"), map[string]any{"pauseReason": "waiting on legal"})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	project("Live")

	counts := func(companyID string, actor *extensionv1.Actor, in any) (map[string]any, *extensionv1.Error) {
		out, e := issCall(t, h, "dashboardCounts", companyID, actor, in)
		if e != nil {
			return nil, e
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal(out, &m))
		return m, nil
	}
	want := map[string]any{"open": 6.0, "inProgress": 2.0, "blocked": 1.0, "done": 1.0, "pendingApprovals": 2.0, "pausedProjectsByBudget": 1.0}
	got, e := counts(company, issBoard, map[string]any{})
	require.Nil(t, e, "%v", e)
	require.Equal(t, want, got)
	got, e = counts("", issBoard, map[string]any{"companyId": company})
	require.Nil(t, e, "%v", e)
	require.Equal(t, want, got, "the input's company when the call has none")
	got, e = counts(other, issBoard, map[string]any{"companyId": other})
	require.Nil(t, e, "%v", e)
	require.Equal(t, map[string]any{"open": 1.0, "inProgress": 0.0, "blocked": 0.0, "done": 0.0, "pendingApprovals": 1.0,
		"pausedProjectsByBudget": 0.0}, got)

	// Refusals: another company than the call's, no company, an actor outside the company, unknown input.
	_, e = counts(company, issBoard, map[string]any{"companyId": other})
	require.NotNil(t, e)
	require.EqualValues(t, http.StatusForbidden, e.Status)
	_, e = counts("", issBoard, map[string]any{})
	require.NotNil(t, e)
	require.EqualValues(t, http.StatusBadRequest, e.Status)
	_, e = counts(company, &extensionv1.Actor{Type: "agent", AgentId: outsider.ID, CompanyId: other}, map[string]any{})
	require.NotNil(t, e)
	require.EqualValues(t, http.StatusForbidden, e.Status)
	_, e = counts(company, issBoard, map[string]any{"bogus": 1})
	require.NotNil(t, e)
	require.EqualValues(t, http.StatusBadRequest, e.Status)
}
