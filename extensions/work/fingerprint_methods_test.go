package work_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	extensionv1 "github.com/keelhq/keel/sdk/proto/extension/v1"
)

// TestIssueFingerprints reads change-detection fingerprints by id and by identifier: unknown
// ids, other companies' issues and the excluded origin kind are left out, and the latest
// human comment is the newest comment by a user.
func TestIssueFingerprints(t *testing.T) {
	t.Parallel()
	h := issStart(t)
	co := h.CreateCompany("Fingerprint Co")
	other := h.CreateCompany("Fingerprint Other Co")
	system := &extensionv1.Actor{Type: "system"}
	issue := func(company string, body map[string]any) map[string]any {
		res := h.Do("POST", "/api/companies/"+company+"/issues", body)
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		return res.Map(t)
	}
	a := issue(co, map[string]any{"title": "A"})
	b := issue(co, map[string]any{"title": "B"})
	task := issue(co, map[string]any{"title": "Task", "originKind": "status_card", "originId": "card"})
	foreign := issue(other, map[string]any{"title": "Foreign"})
	res := h.Do("POST", "/api/issues/"+a["id"].(string)+"/comments", map[string]any{"body": "A human says hi"})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)

	out, e := issCall(t, h, "issues.fingerprints", co, system, map[string]any{
		"issueIds":          []string{a["id"].(string), task["id"].(string), foreign["id"].(string), uuid.NewString(), "nope"},
		"identifiers":       []string{b["identifier"].(string), "ZZZ-999"},
		"excludeOriginKind": "status_card"})
	require.Nil(t, e)
	var rows []map[string]any
	require.NoError(t, json.Unmarshal(out, &rows))
	got := map[string]map[string]any{}
	for _, r := range rows {
		got[r["id"].(string)] = r
	}
	require.Len(t, got, 2)
	require.NotNil(t, got[a["id"].(string)]["latestHumanCommentAt"])
	require.Nil(t, got[b["id"].(string)]["latestHumanCommentAt"])
	require.Equal(t, b["identifier"], got[b["id"].(string)]["identifier"])
	require.Equal(t, "backlog", got[b["id"].(string)]["status"])
}
