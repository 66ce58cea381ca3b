package work_test

import (
	"net/http"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func TestIssueBlockers(t *testing.T) {
	t.Parallel()
	h := issStart(t)
	company := h.CreateCompany("Blocker Co")
	other := h.CreateCompany("Other Blocker Co")
	worker := h.CreateAgent(company, "Worker", "engineer")
	todo := []string{"todo"}

	diag := func(t *testing.T, ref string) map[string]any {
		t.Helper()
		res := h.Do("GET", "/api/issues/"+ref+"/diagnostics/blockers", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		return res.Map(t)
	}

	t.Run("ReadinessDoneResolvesCancelledDoesNot", func(t *testing.T) {
		b1 := issCreate(t, h, company, map[string]any{"title": "Blocker one", "status": "todo"})
		b2 := issCreate(t, h, company, map[string]any{"title": "Blocker two", "status": "todo"})
		iss := issCreate(t, h, company, map[string]any{"title": "Waits", "assigneeAgentId": worker.ID,
			"blockedByIssueIds": []string{b1["id"].(string), b2["identifier"].(string)}})
		id := iss["id"].(string)
		require.Len(t, iss["blockedBy"], 2)
		require.Len(t, issGet(t, h, b1["id"].(string))["blocks"], 1)
		issActivity(t, h, company, id, "issue.relations.updated")

		d := diag(t, id)
		require.Equal(t, false, d["ready"])
		require.ElementsMatch(t, []any{b1["id"], b2["id"]}, d["unresolvedBlockerIssueIds"])

		m := issWantErr(t, issCheckout(h, id, worker.ID, todo, worker.As("run-1")...), http.StatusUnprocessableEntity,
			"Issue is blocked by unresolved blockers")
		require.ElementsMatch(t, []any{b1["id"], b2["id"]}, m["details"].(map[string]any)["unresolvedBlockerIssueIds"])

		// b1 done resolves; b2 cancelled stays unresolved.
		for _, st := range []string{"in_progress", "done"} {
			require.Equal(t, http.StatusOK, issPatch(t, h, b1["id"].(string), map[string]any{"status": st, "assigneeUserId": "user-7"}).Status)
		}
		require.Equal(t, http.StatusOK, issPatch(t, h, b2["id"].(string), map[string]any{"status": "cancelled"}).Status)
		d = diag(t, id)
		require.Equal(t, false, d["ready"])
		require.Equal(t, []any{b2["id"]}, d["unresolvedBlockerIssueIds"])
		for _, b := range d["blockers"].([]any) {
			bm := b.(map[string]any)
			require.Equal(t, bm["status"] == "done", bm["resolved"], "%v", bm)
		}
		m = issWantErr(t, issCheckout(h, id, worker.ID, todo, worker.As("run-1")...), http.StatusUnprocessableEntity,
			"Issue is blocked by unresolved blockers")
		require.Equal(t, []any{b2["id"]}, m["details"].(map[string]any)["unresolvedBlockerIssueIds"])

		// Dropping the cancelled blocker makes it ready.
		res := issPatch(t, h, id, map[string]any{"blockedByIssueIds": []string{b1["id"].(string)}})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		d = diag(t, id)
		require.Equal(t, true, d["ready"])
		require.Equal(t, []any{}, d["unresolvedBlockerIssueIds"])
		res = issCheckout(h, id, worker.ID, todo, worker.As("run-1")...)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	})

	t.Run("DoneBlockerWakesNothingBreaks", func(t *testing.T) {
		// Without an agents extension the wake is dropped; completing the blocker must still succeed.
		b := issCreate(t, h, company, map[string]any{"title": "Last blocker", "status": "todo"})
		issCreate(t, h, company, map[string]any{"title": "Ready soon", "assigneeAgentId": worker.ID, "blockedByIssueIds": []string{b["id"].(string)}})
		require.Equal(t, http.StatusOK, issPatch(t, h, b["id"].(string), map[string]any{"status": "in_progress", "assigneeUserId": "user-7"}).Status)
		require.Equal(t, http.StatusOK, issPatch(t, h, b["id"].(string), map[string]any{"status": "done"}).Status)
	})

	t.Run("CycleRefused", func(t *testing.T) {
		a := issCreate(t, h, company, map[string]any{"title": "A"})
		b := issCreate(t, h, company, map[string]any{"title": "B", "blockedByIssueIds": []string{a["id"].(string)}})
		c := issCreate(t, h, company, map[string]any{"title": "C", "blockedByIssueIds": []string{b["id"].(string)}})
		ia, ib, ic := a["identifier"].(string), b["identifier"].(string), c["identifier"].(string)
		// a blocks b blocks c; c blocking a would close a → b → c → a.
		issWantErr(t, issPatch(t, h, a["id"].(string), map[string]any{"blockedByIssueIds": []string{c["id"].(string)}}),
			http.StatusUnprocessableEntity, "Blocker cycle detected: "+ia+" → "+ib+" → "+ic+" → "+ia)
		issWantErr(t, issPatch(t, h, b["id"].(string), map[string]any{"blockedByIssueIds": []string{c["id"].(string)}}),
			http.StatusUnprocessableEntity, "Blocker cycle detected: "+ib+" → "+ic+" → "+ib)
		issWantErr(t, issPatch(t, h, a["id"].(string), map[string]any{"blockedByIssueIds": []string{a["id"].(string)}}),
			http.StatusUnprocessableEntity, "Blocker cycle detected: "+ia+" → "+ia)
		require.Equal(t, []any{}, issGet(t, h, a["id"].(string))["blockedBy"], "a refused set changes nothing")
		// Replacing b's blockers removes the a → b edge, after which c may block a.
		require.Equal(t, http.StatusOK, issPatch(t, h, b["id"].(string), map[string]any{"blockedByIssueIds": []string{}}).Status)
		res := issPatch(t, h, a["id"].(string), map[string]any{"blockedByIssueIds": []string{c["id"].(string)}})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	})

	t.Run("SameCompanyOnly", func(t *testing.T) {
		foreign := issCreate(t, h, other, map[string]any{"title": "Foreign"})
		iss := issCreate(t, h, company, map[string]any{"title": "Local"})
		for _, ref := range []string{foreign["id"].(string), foreign["identifier"].(string), uuid.NewString()} {
			issWantErr(t, issPatch(t, h, iss["id"].(string), map[string]any{"blockedByIssueIds": []string{ref}}),
				http.StatusUnprocessableEntity, "One or more blocker issues do not belong to company")
		}
	})

	t.Run("DiagnosticsErrors", func(t *testing.T) {
		issWantErr(t, h.Do("GET", "/api/issues/"+uuid.NewString()+"/diagnostics/blockers", nil), http.StatusNotFound, "Issue not found")
		outsider := h.CreateAgent(other, "Outsider", "engineer")
		iss := issCreate(t, h, company, map[string]any{"title": "Private"})
		res := h.Do("GET", "/api/issues/"+iss["id"].(string)+"/diagnostics/blockers", nil, outsider.As("")...)
		require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
	})
}
