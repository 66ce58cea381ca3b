package work_test

import (
	"net/http"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func TestIssueMarks(t *testing.T) {
	t.Parallel()
	h := issStart(t)
	company := h.CreateCompany("Marks Co")
	other := h.CreateCompany("Other Marks Co")
	worker := h.CreateAgent(company, "Worker", "engineer")
	outsider := h.CreateAgent(other, "Outsider", "engineer")
	iss := issCreate(t, h, company, map[string]any{"title": "Inbox item"})
	id := iss["id"].(string)

	for _, tc := range []struct {
		path, field, setAction, unsetAction string
	}{
		{"read", "readAt", "issue.read_marked", "issue.read_unmarked"},
		{"inbox-archive", "archivedAt", "issue.inbox_archived", "issue.inbox_unarchived"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			// Board user.
			res := h.Do("POST", "/api/issues/"+iss["identifier"].(string)+"/"+tc.path, nil)
			require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
			m := res.Map(t)
			require.Equal(t, id, m["issueId"])
			require.Equal(t, "local-board", m["userId"])
			require.Nil(t, m["agentId"])
			require.NotNil(t, m[tc.field])
			require.Equal(t, iss["identifier"], issActivity(t, h, company, id, tc.setAction)["identifier"])
			// Setting again refreshes the time.
			res = h.Do("POST", "/api/issues/"+id+"/"+tc.path, nil)
			require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
			require.Equal(t, 2, issActivityCount(t, h, company, id, tc.setAction))

			// Agent.
			res = h.Do("POST", "/api/issues/"+id+"/"+tc.path, nil, worker.As("")...)
			require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
			require.Equal(t, worker.ID, res.Map(t)["agentId"])
			require.Nil(t, res.Map(t)["userId"])

			// Removing.
			res = h.Do("DELETE", "/api/issues/"+id+"/"+tc.path, nil)
			require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
			require.Nil(t, res.Map(t)[tc.field])
			require.Equal(t, 1, issActivityCount(t, h, company, id, tc.unsetAction))
			// Removing a mark that is not there succeeds without activity.
			res = h.Do("DELETE", "/api/issues/"+id+"/"+tc.path, nil)
			require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
			require.Equal(t, 1, issActivityCount(t, h, company, id, tc.unsetAction))
			// The agent's mark is its own.
			res = h.Do("DELETE", "/api/issues/"+id+"/"+tc.path, nil, worker.As("")...)
			require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
			require.Equal(t, 2, issActivityCount(t, h, company, id, tc.unsetAction))

			// Errors.
			issWantErr(t, h.Do("POST", "/api/issues/"+uuid.NewString()+"/"+tc.path, nil), http.StatusNotFound, "Issue not found")
			require.Equal(t, http.StatusForbidden, h.Do("POST", "/api/issues/"+id+"/"+tc.path, nil, outsider.As("")...).Status)
			require.Equal(t, http.StatusForbidden, h.Do("DELETE", "/api/issues/"+id+"/"+tc.path, nil, outsider.As("")...).Status)
		})
	}
}
