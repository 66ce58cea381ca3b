package work_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

// feedbackTrace is the trace shape the tests read.
type feedbackTrace struct {
	ID              string          `json:"id"`
	IssueID         string          `json:"issueId"`
	IssueIdentifier string          `json:"issueIdentifier"`
	ProjectID       *string         `json:"projectId"`
	Vote            string          `json:"vote"`
	Status          string          `json:"status"`
	TargetType      string          `json:"targetType"`
	TargetID        string          `json:"targetId"`
	TargetLabel     string          `json:"targetLabel"`
	Reason          *string         `json:"reason"`
	Payload         json.RawMessage `json:"payload"`
}

func getTraces(t *testing.T, h *sdktest.Host, path string, q url.Values) []feedbackTrace {
	t.Helper()
	res := h.Do("GET", path+"?"+q.Encode(), nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var out []feedbackTrace
	res.JSON(t, &out)
	return out
}

func TestFeedback(t *testing.T) {
	t.Parallel()
	h := waitWorkReady(t, startWork(t))
	companyID := h.CreateCompany("Feedback Co")
	writer := h.CreateAgent(companyID, "Writer", "engineer")
	otherCompanyID := h.CreateCompany("Feedback Other Co")
	outsider := h.CreateAgent(otherCompanyID, "Outsider", "engineer")

	iss := newAreaIssue(t, h, companyID, "")
	agentComment := h.Do("POST", "/api/issues/"+iss.ID+"/comments", map[string]any{"body": "agent work", "authorType": "agent"}, writer.As("")...)
	require.Equal(t, http.StatusCreated, agentComment.Status, "%s", agentComment.Body)
	agentCommentID := agentComment.Map(t)["id"].(string)
	userComment := h.Do("POST", "/api/issues/"+iss.ID+"/comments", map[string]any{"body": "board note"})
	require.Equal(t, http.StatusCreated, userComment.Status, "%s", userComment.Body)
	userCommentID := userComment.Map(t)["id"].(string)
	agentRev := putDocument(t, h, iss.ID, "plan", map[string]any{"body": "the plan"}, http.StatusCreated, writer.As("")...)
	userRev := putDocument(t, h, iss.ID, "notes", map[string]any{"body": "board notes"}, http.StatusCreated)

	votePath := "/api/issues/" + iss.ID + "/feedback-votes"
	vote := func(body map[string]any, headers ...string) *sdktest.Response {
		return h.Do("POST", votePath, body, headers...)
	}

	t.Run("OpenAPI", func(t *testing.T) {
		res := h.Do("GET", "/api/openapi.json", nil)
		require.Equal(t, http.StatusOK, res.Status)
		var doc struct {
			Paths map[string]map[string]struct {
				Parameters []struct {
					Name string `json:"name"`
				} `json:"parameters"`
			} `json:"paths"`
		}
		res.JSON(t, &doc)
		for _, p := range []string{"/api/issues/{id}/feedback-votes", "/api/issues/{id}/feedback-traces",
			"/api/companies/{companyId}/feedback-traces", "/api/companies/{companyId}/feedback-traces/export"} {
			require.Contains(t, doc.Paths, p)
		}
		var names []string
		for _, p := range doc.Paths["/api/companies/{companyId}/feedback-traces/export"]["get"].Parameters {
			names = append(names, p.Name)
		}
		for _, n := range []string{"targetType", "vote", "status", "projectId", "issueId", "from", "to", "sharedOnly", "includePayload", "format"} {
			require.Contains(t, names, n)
		}
	})

	t.Run("Validation", func(t *testing.T) {
		requireValidation(t, vote(map[string]any{"targetType": "issue", "targetId": agentCommentID, "vote": "up"}), "targetType")
		requireValidation(t, vote(map[string]any{"targetType": "issue_comment", "targetId": "nope", "vote": "up"}), "targetId")
		requireValidation(t, vote(map[string]any{"targetType": "issue_comment", "targetId": agentCommentID, "vote": "sideways"}), "vote")
		long := string(bytes.Repeat([]byte("x"), 2001))
		requireValidation(t, vote(map[string]any{"targetType": "issue_comment", "targetId": agentCommentID, "vote": "up", "reason": long}), "reason")
	})

	t.Run("OnlyAgentAuthoredTargets", func(t *testing.T) {
		requireError(t, vote(map[string]any{"targetType": "issue_comment", "targetId": userCommentID, "vote": "up"}),
			http.StatusUnprocessableEntity, "Feedback voting is only available on agent-authored issue comments")
		requireError(t, vote(map[string]any{"targetType": "issue_document_revision", "targetId": userRev.Revision.ID, "vote": "down"}),
			http.StatusUnprocessableEntity, "Feedback voting is only available on agent-authored issue document revisions")
		// A target of another type or of another issue is not found on this issue.
		requireError(t, vote(map[string]any{"targetType": "issue_comment", "targetId": agentRev.Revision.ID, "vote": "up"}),
			http.StatusNotFound, "Comment not found")
		requireError(t, vote(map[string]any{"targetType": "issue_document_revision", "targetId": agentCommentID, "vote": "up"}),
			http.StatusNotFound, "Document revision not found")
		gone := h.Do("POST", "/api/issues/"+iss.ID+"/comments", map[string]any{"body": "retracted", "authorType": "agent"}, writer.As("")...)
		require.Equal(t, http.StatusCreated, gone.Status, "%s", gone.Body)
		goneID := gone.Map(t)["id"].(string)
		require.Equal(t, http.StatusOK, h.Do("DELETE", "/api/issues/"+iss.ID+"/comments/"+goneID, nil).Status)
		requireError(t, vote(map[string]any{"targetType": "issue_comment", "targetId": goneID, "vote": "up"}),
			http.StatusNotFound, "Comment not found")
		requireError(t, h.Do("POST", "/api/issues/00000000-0000-0000-0000-000000000001/feedback-votes",
			map[string]any{"targetType": "issue_comment", "targetId": agentCommentID, "vote": "up"}), http.StatusNotFound, "Issue not found")
		other := newAreaIssue(t, h, companyID, "")
		requireError(t, h.Do("POST", "/api/issues/"+other.ID+"/feedback-votes", map[string]any{"targetType": "issue_comment", "targetId": agentCommentID, "vote": "up"}),
			http.StatusNotFound, "Comment not found")
	})

	t.Run("PermissionsAndIsolation", func(t *testing.T) {
		body := map[string]any{"targetType": "issue_comment", "targetId": agentCommentID, "vote": "up"}
		requireError(t, vote(body, writer.As("")...), http.StatusForbidden, "Board access required")
		requireError(t, vote(body, outsider.As("")...), http.StatusNotFound, "Issue not found")
		requireError(t, h.Do("GET", votePath, nil, outsider.As("")...), http.StatusNotFound, "Issue not found")
		requireError(t, h.Do("GET", "/api/issues/"+iss.ID+"/feedback-traces", nil, outsider.As("")...), http.StatusNotFound, "Issue not found")
		requireError(t, h.Do("GET", "/api/issues/"+iss.ID+"/feedback-traces", nil, writer.As("")...), http.StatusForbidden, "Board access required")
		requireError(t, h.Do("GET", "/api/companies/"+companyID+"/feedback-traces", nil, writer.As("")...), http.StatusForbidden, "Board access required")
	})

	t.Run("VotesTracesAndExport", func(t *testing.T) {
		res := vote(map[string]any{"targetType": "issue_comment", "targetId": agentCommentID, "vote": "up", "reason": "  clear  "})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		first := res.Map(t)
		require.Equal(t, "up", first["vote"])
		require.Equal(t, "clear", first["reason"])
		require.Equal(t, "local-board", first["voterUserId"])
		require.Equal(t, writer.ID, first["authorAgentId"])
		require.Equal(t, "local_only", first["status"])

		// A second vote by the same user on the same target replaces the first.
		res = vote(map[string]any{"targetType": "issue_comment", "targetId": agentCommentID, "vote": "down"})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		second := res.Map(t)
		require.Equal(t, first["id"], second["id"])
		require.Equal(t, "down", second["vote"])
		require.Nil(t, second["reason"])
		res = h.Do("GET", "/api/issues/"+iss.Identifier+"/feedback-votes", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		var votes []map[string]any
		res.JSON(t, &votes)
		require.Len(t, votes, 1)
		require.Equal(t, "down", votes[0]["vote"])
		// Agents of the company read the votes on their work.
		require.Equal(t, http.StatusOK, h.Do("GET", votePath, nil, writer.As("")...).Status)
		requireActivity(t, h, companyID, iss.ID, "issue.feedback_vote.recorded", "voteId", first["id"].(string))

		// Once the company shares feedback data, new votes are recorded as shared.
		res = h.Do("PATCH", "/api/companies/"+companyID, map[string]any{"feedbackDataSharingEnabled": true, "feedbackDataSharingTermsVersion": "v1"})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		res = vote(map[string]any{"targetType": "issue_document_revision", "targetId": agentRev.Revision.ID, "vote": "up"})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		require.Equal(t, "shared", res.Map(t)["status"])

		companyPath := "/api/companies/" + companyID + "/feedback-traces"
		all := getTraces(t, h, companyPath, nil)
		require.Len(t, all, 2)
		require.Equal(t, "issue_document_revision", all[0].TargetType, "newest first")
		require.Equal(t, iss.Identifier+" plan revision 1", all[0].TargetLabel)
		require.Equal(t, "Comment on "+iss.Identifier, all[1].TargetLabel)
		require.Equal(t, iss.Identifier, all[1].IssueIdentifier)
		require.Nil(t, all[0].Payload, "payloads only on request")
		require.Len(t, getTraces(t, h, "/api/issues/"+iss.ID+"/feedback-traces", nil), 2)
		require.Empty(t, getTraces(t, h, "/api/companies/"+otherCompanyID+"/feedback-traces", nil))

		future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
		for _, tc := range []struct {
			name string
			q    url.Values
			want []string // target ids
		}{
			{"targetType", url.Values{"targetType": {"issue_comment"}}, []string{agentCommentID}},
			{"vote", url.Values{"vote": {"up"}}, []string{agentRev.Revision.ID}},
			{"status", url.Values{"status": {"local_only"}}, []string{agentCommentID}},
			{"sharedOnly", url.Values{"sharedOnly": {"true"}}, []string{agentRev.Revision.ID}},
			{"issueId", url.Values{"issueId": {iss.ID}}, []string{agentRev.Revision.ID, agentCommentID}},
			{"otherIssue", url.Values{"issueId": {"00000000-0000-0000-0000-000000000001"}}, nil},
			{"projectId", url.Values{"projectId": {"00000000-0000-0000-0000-000000000001"}}, nil},
			{"fromFuture", url.Values{"from": {future}}, nil},
			{"toPast", url.Values{"to": {past}}, nil},
			{"window", url.Values{"from": {past}, "to": {future}, "vote": {"down"}}, []string{agentCommentID}},
			{"dates", url.Values{"from": {time.Now().UTC().AddDate(0, 0, -1).Format(time.DateOnly)}, "to": {time.Now().UTC().Format(time.DateOnly)}, "vote": {"down"}},
				[]string{agentCommentID}},
			{"datesBefore", url.Values{"to": {time.Now().UTC().AddDate(0, 0, -2).Format(time.DateOnly)}}, nil},
		} {
			t.Run(tc.name, func(t *testing.T) {
				var got []string
				for _, tr := range getTraces(t, h, companyPath, tc.q) {
					got = append(got, tr.TargetID)
				}
				require.Equal(t, tc.want, got)
			})
		}
		for param, v := range map[string]string{"targetType": "issue", "vote": "meh", "status": "sent", "projectId": "x",
			"issueId": "PAP-1", "from": "yesterday", "to": "2026-13-01", "sharedOnly": "maybe", "includePayload": "yes please"} {
			requireValidation(t, h.Do("GET", companyPath+"?"+url.Values{param: {v}}.Encode(), nil), param)
		}

		withPayload := getTraces(t, h, companyPath, url.Values{"includePayload": {"true"}})
		require.Contains(t, string(withPayload[0].Payload), "the plan")
		require.Contains(t, string(withPayload[1].Payload), "agent work", "the company's own reads carry every payload")

		// The export: ndjson by default, payloads only for traces shared with consent.
		res = h.Do("GET", companyPath+"/export?includePayload=true", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Contains(t, res.Header.Get("Content-Type"), "application/x-ndjson")
		require.Contains(t, res.Header.Get("Content-Disposition"), ".ndjson")
		var lines []feedbackTrace
		sc := bufio.NewScanner(bytes.NewReader(res.Body))
		for sc.Scan() {
			var tr feedbackTrace
			require.NoError(t, json.Unmarshal(sc.Bytes(), &tr), "%s", sc.Bytes())
			lines = append(lines, tr)
		}
		require.Len(t, lines, 2)
		require.Contains(t, string(lines[0].Payload), "the plan")
		require.Nil(t, lines[1].Payload, "a local_only trace's payload stays in the instance")

		res = h.Do("GET", companyPath+"/export?format=json&vote=down", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Contains(t, res.Header.Get("Content-Type"), "application/json")
		var arr []feedbackTrace
		res.JSON(t, &arr)
		require.Len(t, arr, 1)
		require.Equal(t, agentCommentID, arr[0].TargetID)
		requireValidation(t, h.Do("GET", companyPath+"/export?format=xml", nil), "format")
		requireError(t, h.Do("GET", companyPath+"/export", nil, writer.As("")...), http.StatusForbidden, "Board access required")

		// With sharing switched off again, the export carries no payload at all.
		res = h.Do("PATCH", "/api/companies/"+companyID, map[string]any{"feedbackDataSharingEnabled": false})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		res = h.Do("GET", companyPath+"/export?format=json&includePayload=true", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		arr = nil
		res.JSON(t, &arr)
		require.Len(t, arr, 2)
		require.Nil(t, arr[0].Payload)
		require.Nil(t, arr[1].Payload)
	})

	t.Run("InstanceNotAllowed", func(t *testing.T) {
		// The instance's general setting not_allowed overrides a company's consent.
		setPref := func(v string) {
			res := h.Do("PATCH", "/api/instance/settings/general", map[string]any{"feedbackDataSharingPreference": v})
			require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		}
		setPref("not_allowed")
		defer setPref("prompt")
		res := h.Do("PATCH", "/api/companies/"+companyID, map[string]any{"feedbackDataSharingEnabled": true})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		c := h.Do("POST", "/api/issues/"+iss.ID+"/comments", map[string]any{"body": "more agent work", "authorType": "agent"}, writer.As("")...)
		require.Equal(t, http.StatusCreated, c.Status, "%s", c.Body)
		res = vote(map[string]any{"targetType": "issue_comment", "targetId": c.Map(t)["id"], "vote": "up"})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		require.Equal(t, "local_only", res.Map(t)["status"])
		res = h.Do("GET", "/api/companies/"+companyID+"/feedback-traces/export?format=json&includePayload=true&sharedOnly=true", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		var arr []feedbackTrace
		res.JSON(t, &arr)
		require.Len(t, arr, 1, "the revision vote recorded under consent is still a shared trace")
		require.Nil(t, arr[0].Payload, "but no payload leaves the instance")
	})
}

// BenchmarkFeedbackExport exports 20,000 feedback traces with payloads as ndjson through the
// host (seeded with one INSERT … SELECT through the superuser pool; seeding only).
func BenchmarkFeedbackExport(b *testing.B) {
	const n = 20000
	h := sdktest.Start(b, sdktest.Options{Builtins: true})
	sdktest.WaitFor(b, time.Minute, func() bool {
		res := h.Do("GET", "/api/plugins/work", nil)
		return res.Status == http.StatusOK && res.Map(b)["status"] == "ready"
	}, "the work extension to be ready")
	companyID := h.CreateCompany("Feedback Bench Co")
	res := h.Do("POST", "/api/companies/"+companyID+"/issues", map[string]any{"title": "Bench issue"})
	require.Equal(b, http.StatusCreated, res.Status, "%s", res.Body)
	issueID := res.Map(b)["id"].(string)
	_, err := h.Kernel.Pool.Exec(context.Background(), `INSERT INTO ext_work.feedback_votes
			(id, company_id, issue_id, target_type, target_id, target_label, voter_user_id, vote, status, payload, created_at)
		SELECT gen_random_uuid(), $1, $2, 'issue_comment', gen_random_uuid(), 'Comment on bench', 'user-' || k,
			CASE WHEN k % 2 = 0 THEN 'up' ELSE 'down' END, CASE WHEN k % 3 = 0 THEN 'shared' ELSE 'local_only' END,
			jsonb_build_object('comment', jsonb_build_object('body', repeat('agent output ', 40))), now() - k * interval '1 second'
		FROM generate_series(1, $3) AS k`, companyID, issueID, n)
	require.NoError(b, err)
	res = h.Do("PATCH", "/api/companies/"+companyID, map[string]any{"feedbackDataSharingEnabled": true})
	require.Equal(b, http.StatusOK, res.Status, "%s", res.Body)
	path := "/api/companies/" + companyID + "/feedback-traces/export?includePayload=true"
	var size int
	for b.Loop() {
		res := h.Do("GET", path, nil)
		require.Equal(b, http.StatusOK, res.Status)
		size = len(res.Body)
	}
	require.Equal(b, n, bytes.Count(h.Do("GET", path, nil).Body, []byte("\n")))
	b.ReportMetric(float64(size), "bytes/export")
}
