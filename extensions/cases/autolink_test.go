package cases_test

import (
	"net/http"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

// links returns a case's issue links as issueId → role.
func links(t *testing.T, h *sdktest.Host, caseID string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, l := range ok(t, h.Do("GET", "/api/cases/"+caseID, nil), http.StatusOK)["issueLinks"].([]any) {
		m := l.(map[string]any)
		out[m["issueId"].(string)] = m["role"].(string)
	}
	return out
}

// testAutoLinks drives rule 7 from a real agent run: the run's issue is linked as origin
// when the run creates a case, and as work when it writes a document, updates a case,
// restores a revision or uploads a file; an agent outside a run links nothing.
func testAutoLinks(t *testing.T, h *sdktest.Host) {
	f := newRunFixture(t, h, "Runner Co")

	// Created from the run: origin, with an auto-link event enriched with the agent and issue.
	c := f.create(t, http.StatusCreated, map[string]any{"caseType": "matter", "title": "from a run"}, f.inRun...)
	require.Equal(t, map[string]string{f.origin: "origin"}, links(t, h, c["id"].(string)))
	require.Equal(t, f.agent.ID, c["createdByAgentId"])
	ev := list(t, h.Do("GET", "/api/cases/"+c["id"].(string)+"/events", nil))
	require.Equal(t, []any{"issue_linked", "created"}, []any{ev[0]["kind"], ev[1]["kind"]})
	require.Equal(t, true, ev[0]["payload"].(map[string]any)["autoLinked"])
	require.Equal(t, "origin", ev[0]["payload"].(map[string]any)["role"])
	for _, e := range ev {
		require.Equal(t, f.agent.Name, e["actorAgentName"])
		require.Equal(t, f.origin, e["issue"].(map[string]any)["id"])
		require.Equal(t, f.runID, e["runId"])
	}
	items := list(t, h.Do("GET", "/api/issues/"+f.origin+"/cases", nil))
	require.Len(t, items, 1)
	require.Equal(t, "origin", items[0]["role"])

	// A document write by the run: work, attributed on the revision.
	d := f.create(t, http.StatusCreated, map[string]any{"caseType": "matter", "key": "doc", "title": "board's"})
	require.Empty(t, links(t, h, d["id"].(string)))
	w := ok(t, h.Do("PUT", "/api/cases/"+d["id"].(string)+"/documents/notes", map[string]any{"body": "by the agent"}, f.inRun...), http.StatusCreated)
	require.Equal(t, map[string]string{f.origin: "work"}, links(t, h, d["id"].(string)))
	revs := ok(t, h.Do("GET", "/api/cases/"+d["id"].(string)+"/documents/notes/revisions", nil), http.StatusOK)["revisions"].([]any)
	r := revs[0].(map[string]any)
	require.Equal(t, f.agent.Name, r["actorAgentName"])
	require.Equal(t, f.origin, r["issue"].(map[string]any)["id"])
	require.Equal(t, f.runID, r["createdByRunId"])
	ev = list(t, h.Do("GET", "/api/cases/"+d["id"].(string)+"/events", nil))
	require.Equal(t, "issue_linked", ev[0]["kind"])
	require.Equal(t, map[string]any{"role": "work", "issueId": f.origin, "linkId": ev[0]["payload"].(map[string]any)["linkId"], "autoLinked": true},
		ev[0]["payload"])
	// A second write keeps the one link.
	base := w["revision"].(map[string]any)["id"].(string)
	w2 := ok(t, h.Do("PUT", "/api/cases/"+d["id"].(string)+"/documents/notes", map[string]any{"body": "again", "baseRevisionId": base}, f.inRun...), http.StatusOK)
	require.Len(t, links(t, h, d["id"].(string)), 1)

	// A case update, a restore and an upload by the run: work.
	for _, act := range []struct {
		name string
		do   func(caseID string) *sdktest.Response
		want int
	}{
		{"Update", func(id string) *sdktest.Response {
			return h.Do("PATCH", "/api/cases/"+id, map[string]any{"status": "in_progress"}, f.inRun...)
		}, http.StatusOK},
		{"Upsert", func(id string) *sdktest.Response {
			return h.Do("POST", "/api/companies/"+f.co+"/cases", map[string]any{"caseType": "matter", "key": id, "title": "upserted"}, f.inRun...)
		}, http.StatusOK},
		{"Upload", func(id string) *sdktest.Response {
			body, ct := multipartBody(t, part{field: "file", fileName: "a.txt", data: []byte("abc")})
			return h.Do("POST", "/api/cases/"+id+"/attachments", body, append([]string{"Content-Type", ct}, f.inRun...)...)
		}, http.StatusCreated},
		{"Restore", func(id string) *sdktest.Response {
			v1 := ok(t, h.Do("PUT", "/api/cases/"+id+"/documents/r", map[string]any{"body": "one"}), http.StatusCreated)["revision"].(map[string]any)["id"].(string)
			ok(t, h.Do("PUT", "/api/cases/"+id+"/documents/r", map[string]any{"body": "two", "baseRevisionId": v1}), http.StatusOK)
			return h.Do("POST", "/api/cases/"+id+"/documents/r/revisions/"+v1+"/restore", nil, f.inRun...)
		}, http.StatusOK},
	} {
		target := f.create(t, http.StatusCreated, map[string]any{"caseType": "matter", "key": uuid.NewString(), "title": act.name})
		id := target["id"].(string)
		if act.name == "Upsert" {
			// The upsert names the case by its key.
			id = target["key"].(string)
			ok(t, act.do(id), act.want)
			require.Equal(t, map[string]string{f.origin: "work"}, links(t, h, target["id"].(string)), act.name)
			continue
		}
		ok(t, act.do(id), act.want)
		require.Equal(t, map[string]string{f.origin: "work"}, links(t, h, id), act.name)
	}

	// No run, or a run that is not this agent's: no link.
	n := f.create(t, http.StatusCreated, map[string]any{"caseType": "matter", "key": "norun", "title": "no run"}, f.agent.As("")...)
	require.Empty(t, links(t, h, n["id"].(string)))
	ok(t, h.Do("PUT", "/api/cases/"+n["id"].(string)+"/documents/x", map[string]any{"body": "x"},
		"Authorization", "Bearer "+h.AgentJWT(f.agent, uuid.NewString())), http.StatusCreated)
	require.Empty(t, links(t, h, n["id"].(string)))
	_ = w2
}
