package work_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/extensions/work"
	"github.com/keelhq/keel/kernel"
	extensionv1 "github.com/keelhq/keel/sdk/proto/extension/v1"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
	"github.com/keelhq/keel/sdktest"
)

// waitWorkReady waits until the work extension serves requests: a host may start serving
// while the extension is still retrying its start (for example after a transient database
// provisioning error when parallel test hosts share one PostgreSQL cluster).
func waitWorkReady(t *testing.T, h *sdktest.Host) *sdktest.Host {
	t.Helper()
	sdktest.WaitFor(t, time.Minute, func() bool {
		res := h.Do("GET", "/api/plugins/work", nil)
		return res.Status == http.StatusOK && res.Map(t)["status"] == "ready"
	}, "the work extension to be ready")
	return h
}

// areaIssueSeq numbers the titles of the issues newAreaIssue creates.
var areaIssueSeq atomic.Int64

// areaIssue is an issue created for a test.
type areaIssue struct {
	ID         string
	Identifier string
}

// newAreaIssue creates an issue of the company through POST /api/companies/{companyId}/issues,
// assigned to assigneeAgentID when it is not empty.
func newAreaIssue(t *testing.T, h *sdktest.Host, companyID, assigneeAgentID string) *areaIssue {
	t.Helper()
	body := map[string]any{"title": fmt.Sprintf("Area issue %d", areaIssueSeq.Add(1))}
	if assigneeAgentID != "" {
		body["assigneeAgentId"] = assigneeAgentID
	}
	res := h.Do("POST", "/api/companies/"+companyID+"/issues", body)
	require.Equal(t, http.StatusCreated, res.Status, "create issue: %s", res.Body)
	var iss areaIssue
	res.JSON(t, &iss)
	require.NotEmpty(t, iss.ID)
	require.NotEmpty(t, iss.Identifier)
	return &iss
}

// activityOf returns the activity entries of an entity, newest first.
func activityOf(t *testing.T, h *sdktest.Host, companyID, entityID string) []*kernel.ActivityEntry {
	t.Helper()
	entries, err := h.Kernel.ActivityList(context.Background(), &kernel.ActivityListParams{CompanyID: companyID, EntityID: entityID, Limit: 500})
	require.NoError(t, err)
	return entries
}

// requireActivity checks that the entity has an entry for the action whose details hold the
// key with the value, and returns it.
func requireActivity(t *testing.T, h *sdktest.Host, companyID, entityID, action, key, value string) *kernel.ActivityEntry {
	t.Helper()
	for _, e := range activityOf(t, h, companyID, entityID) {
		if e.Action != action {
			continue
		}
		var details map[string]any
		require.NoError(t, json.Unmarshal(e.Details, &details))
		if key == "" || details[key] == value {
			return e
		}
	}
	t.Fatalf("no %s activity with %s=%s on %s", action, key, value, entityID)
	return nil
}

// requireError checks an API error's status and text.
func requireError(t *testing.T, res *sdktest.Response, status int, message string) map[string]any {
	t.Helper()
	require.Equal(t, status, res.Status, "%s", res.Body)
	m := res.Map(t)
	require.Equal(t, message, m["error"], "%s", res.Body)
	return m
}

// requireValidation checks a 400 Validation error naming the field.
func requireValidation(t *testing.T, res *sdktest.Response, path string) {
	t.Helper()
	m := requireError(t, res, http.StatusBadRequest, "Validation error")
	details, _ := m["details"].([]any)
	require.NotEmpty(t, details, "%s", res.Body)
	require.Equal(t, path, details[0].(map[string]any)["path"], "%s", res.Body)
}

func TestComments(t *testing.T) {
	t.Parallel()
	h := waitWorkReady(t, startWork(t))
	companyID := h.CreateCompany("Comment Co")
	assignee := h.CreateAgent(companyID, "Builder", "engineer")
	reviewer := h.CreateAgent(companyID, "Research Lead", "researcher")
	otherCompanyID := h.CreateCompany("Other Co")
	outsider := h.CreateAgent(otherCompanyID, "Outsider", "engineer")

	postComment := func(t *testing.T, issueRef string, body any, headers ...string) *sdktest.Response {
		t.Helper()
		return h.Do("POST", "/api/issues/"+issueRef+"/comments", body, headers...)
	}

	t.Run("CreateGetList", func(t *testing.T) {
		iss := newAreaIssue(t, h, companyID, "")
		res := postComment(t, iss.ID, map[string]any{"body": "first smoke comment"})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		c := res.Map(t)
		for _, k := range []string{"id", "companyId", "issueId", "authorAgentId", "authorUserId", "onBehalfOfUserId", "authorType",
			"createdByRunId", "body", "presentation", "metadata", "deletedAt", "createdAt", "updatedAt"} {
			require.Contains(t, c, k)
		}
		require.Equal(t, companyID, c["companyId"])
		require.Equal(t, iss.ID, c["issueId"])
		require.Equal(t, "user", c["authorType"])
		require.Equal(t, "local-board", c["authorUserId"])
		require.Nil(t, c["authorAgentId"])
		require.Nil(t, c["deletedAt"])
		require.Equal(t, "first smoke comment", c["body"])

		res = h.Do("GET", "/api/issues/"+iss.ID+"/comments/"+c["id"].(string), nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, c["id"], res.Map(t)["id"])

		res = h.Do("GET", "/api/issues/"+iss.Identifier+"/comments", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		var list []map[string]any
		res.JSON(t, &list)
		require.Len(t, list, 1)
		require.Equal(t, c["id"], list[0]["id"])

		requireActivity(t, h, companyID, iss.ID, "issue.comment.created", "commentId", c["id"].(string))
	})

	t.Run("AgentAuthorAndPresentation", func(t *testing.T) {
		iss := newAreaIssue(t, h, companyID, "")
		runID := uuid.NewString()
		res := postComment(t, iss.Identifier, map[string]any{
			"body": "status update", "authorType": "agent",
			"presentation": map[string]any{"kind": "system_notice", "tone": "info"}, "metadata": map[string]any{"version": 1, "sections": []any{}},
		}, reviewer.As(runID)...)
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		c := res.Map(t)
		require.Equal(t, "agent", c["authorType"])
		require.Equal(t, reviewer.ID, c["authorAgentId"])
		require.Nil(t, c["authorUserId"])
		require.Equal(t, runID, c["createdByRunId"])
		require.Nil(t, c["onBehalfOfUserId"])
		require.Equal(t, "system_notice", c["presentation"].(map[string]any)["kind"])
		require.EqualValues(t, 1, c["metadata"].(map[string]any)["version"])
	})

	t.Run("OnlyTheBoardWritesAsSystemOrForAUser", func(t *testing.T) {
		iss := newAreaIssue(t, h, companyID, "")
		runID := uuid.NewString()
		requireError(t, postComment(t, iss.ID, map[string]any{"body": "I am the system now", "authorType": "system"}, reviewer.As(runID)...),
			http.StatusForbidden, "Only the board can write system comments")
		requireError(t, postComment(t, iss.ID, map[string]any{"body": "the CEO says ship it", "onBehalfOfUserId": "user-7"}, reviewer.As(runID)...),
			http.StatusForbidden, "Only the board can write a comment on behalf of a user")
		res := postComment(t, iss.ID, map[string]any{"body": "relayed", "onBehalfOfUserId": "user-7"})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		require.Equal(t, "user-7", res.Map(t)["onBehalfOfUserId"])
	})

	t.Run("Validation", func(t *testing.T) {
		iss := newAreaIssue(t, h, companyID, "")
		requireValidation(t, postComment(t, iss.ID, map[string]any{}), "body")
		requireValidation(t, postComment(t, iss.ID, map[string]any{"body": nil}), "body")
		requireValidation(t, postComment(t, iss.ID, map[string]any{"body": "   "}), "body")
		requireValidation(t, postComment(t, iss.ID, map[string]any{"body": strings.Repeat("x", work.CommentBodyMaxLen+1)}), "body")
		require.Equal(t, http.StatusCreated, postComment(t, iss.ID, map[string]any{"body": "unknown fields are ignored", "bogus": 1}).Status)
		requireValidation(t, postComment(t, iss.ID, map[string]any{"body": 5}), "body")
		requireValidation(t, postComment(t, iss.ID, map[string]any{"body": "x", "authorType": "robot"}), "authorType")
		requireValidation(t, postComment(t, iss.ID, map[string]any{"body": "x", "authorType": "agent"}), "authorType")
		requireValidation(t, postComment(t, iss.ID, map[string]any{"body": "x", "authorType": "user"}, assignee.As("")...), "authorType")
		requireValidation(t, postComment(t, iss.ID, map[string]any{"body": "x", "presentation": "loud"}), "presentation")
		requireValidation(t, postComment(t, iss.ID, map[string]any{"body": "x", "presentation": map[string]any{"kind": "shout"}}), "presentation.kind")
		requireValidation(t, postComment(t, iss.ID, map[string]any{"body": "x", "metadata": []any{1}}), "metadata")

		res := postComment(t, iss.ID, map[string]any{"body": strings.Repeat("é", work.CommentBodyMaxLen)})
		require.Equal(t, http.StatusCreated, res.Status, "a body of exactly the limit in characters is fine")
		res = postComment(t, iss.ID, map[string]any{"body": "notice", "authorType": "system"})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		require.Equal(t, "system", res.Map(t)["authorType"])
	})

	t.Run("NotFound", func(t *testing.T) {
		iss := newAreaIssue(t, h, companyID, "")
		requireError(t, postComment(t, uuid.NewString(), map[string]any{"body": "x"}), http.StatusNotFound, "Issue not found")
		requireError(t, h.Do("GET", "/api/issues/NOPE-999/comments", nil), http.StatusNotFound, "Issue not found")
		requireError(t, h.Do("GET", "/api/issues/"+iss.ID+"/comments/"+uuid.NewString(), nil), http.StatusNotFound, "Comment not found")
		requireError(t, h.Do("GET", "/api/issues/"+iss.ID+"/comments/not-a-uuid", nil), http.StatusNotFound, "Comment not found")
		requireError(t, h.Do("DELETE", "/api/issues/"+iss.ID+"/comments/"+uuid.NewString(), nil), http.StatusNotFound, "Comment not found")

		other := newAreaIssue(t, h, companyID, "")
		res := postComment(t, other.ID, map[string]any{"body": "elsewhere"})
		require.Equal(t, http.StatusCreated, res.Status)
		requireError(t, h.Do("GET", "/api/issues/"+iss.ID+"/comments/"+res.Map(t)["id"].(string), nil), http.StatusNotFound, "Comment not found")
	})

	t.Run("ListOrderCursorLimit", func(t *testing.T) {
		iss := newAreaIssue(t, h, companyID, "")
		var ids []string
		for i := range 5 {
			res := postComment(t, iss.ID, map[string]any{"body": fmt.Sprintf("comment %d", i)})
			require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
			ids = append(ids, res.Map(t)["id"].(string))
		}
		list := func(query string) []string {
			t.Helper()
			res := h.Do("GET", "/api/issues/"+iss.ID+"/comments"+query, nil)
			require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
			var cs []map[string]any
			res.JSON(t, &cs)
			out := make([]string, 0, len(cs))
			for _, c := range cs {
				out = append(out, c["id"].(string))
			}
			return out
		}
		require.Equal(t, ids, list(""), "oldest first, newest last")
		require.Equal(t, ids, list("?order=asc"))
		require.Equal(t, []string{ids[4], ids[3], ids[2], ids[1], ids[0]}, list("?order=desc"))
		require.Equal(t, ids[:2], list("?limit=2"))
		require.Equal(t, ids[2:], list("?after="+ids[1]))
		require.Equal(t, ids[2:4], list("?after="+ids[1]+"&limit=2"))
		require.Equal(t, []string{ids[4], ids[3], ids[2]}, list("?after="+ids[1]+"&order=desc"))
		require.Empty(t, list("?after="+ids[4]))

		res := h.Do("GET", "/api/issues/"+iss.ID+"/comments/"+ids[1], nil)
		var second struct {
			CreatedAt time.Time `json:"createdAt"`
		}
		res.JSON(t, &second)
		require.Equal(t, ids[2:], list("?after="+second.CreatedAt.Format(time.RFC3339Nano)))
		require.Equal(t, ids, list("?after="+second.CreatedAt.Add(-time.Hour).UTC().Format(time.RFC3339)))

		requireValidation(t, h.Do("GET", "/api/issues/"+iss.ID+"/comments?order=sideways", nil), "order")
		requireValidation(t, h.Do("GET", "/api/issues/"+iss.ID+"/comments?after=yesterday", nil), "after")
		requireValidation(t, h.Do("GET", "/api/issues/"+iss.ID+"/comments?after="+uuid.NewString(), nil), "after")
		requireValidation(t, h.Do("GET", "/api/issues/"+iss.ID+"/comments?limit=501", nil), "limit")
		requireValidation(t, h.Do("GET", "/api/issues/"+iss.ID+"/comments?limit=0", nil), "limit")
	})

	t.Run("Delete", func(t *testing.T) {
		iss := newAreaIssue(t, h, companyID, "")
		res := postComment(t, iss.ID, map[string]any{"body": "mine"}, reviewer.As("")...)
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		byAgent := res.Map(t)["id"].(string)
		res = postComment(t, iss.ID, map[string]any{"body": "the board's"})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		byBoard := res.Map(t)["id"].(string)

		requireError(t, h.Do("DELETE", "/api/issues/"+iss.ID+"/comments/"+byAgent, nil, assignee.As("")...),
			http.StatusForbidden, "Only the comment's author or the board can delete it")
		requireError(t, h.Do("DELETE", "/api/issues/"+iss.ID+"/comments/"+byBoard, nil, reviewer.As("")...),
			http.StatusForbidden, "Only the comment's author or the board can delete it")

		runID := uuid.NewString()
		res = h.Do("DELETE", "/api/issues/"+iss.ID+"/comments/"+byAgent, nil, reviewer.As(runID)...)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		deleted := res.Map(t)
		require.NotNil(t, deleted["deletedAt"])
		require.Equal(t, "agent", deleted["deletedByType"])
		require.Equal(t, reviewer.ID, deleted["deletedByAgentId"])
		require.Equal(t, runID, deleted["deletedByRunId"])

		res = h.Do("DELETE", "/api/issues/"+iss.ID+"/comments/"+byBoard, nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, "user", res.Map(t)["deletedByType"])

		requireError(t, h.Do("GET", "/api/issues/"+iss.ID+"/comments/"+byAgent, nil), http.StatusNotFound, "Comment not found")
		requireError(t, h.Do("DELETE", "/api/issues/"+iss.ID+"/comments/"+byAgent, nil), http.StatusNotFound, "Comment not found")
		res = h.Do("GET", "/api/issues/"+iss.ID+"/comments", nil)
		require.Equal(t, http.StatusOK, res.Status)
		require.JSONEq(t, "[]", string(res.Body))

		requireActivity(t, h, companyID, iss.ID, "issue.comment.deleted", "commentId", byAgent)
		requireActivity(t, h, companyID, iss.ID, "issue.comment.deleted", "commentId", byBoard)
	})

	t.Run("MentionAndAssigneeWakes", func(t *testing.T) {
		// The test host runs no agents extension, so a wake is dropped as "method not
		// provided": the comment must still succeed (mention parsing is unit-tested below).
		iss := newAreaIssue(t, h, companyID, assignee.ID)
		for _, tc := range []struct {
			name    string
			body    string
			headers []string
		}{
			{"BoardMentionsTwoAgents", "@research-lead and @Builder, please look", nil},
			{"OtherAgentMentionsAssignee", "@builder done on my side", reviewer.As(uuid.NewString())},
			{"AssigneeMentionsItself", "note to @Builder self", assignee.As(uuid.NewString())},
			{"NoMentions", "plain comment, mail bob@builder.dev", nil},
		} {
			res := postComment(t, iss.ID, map[string]any{"body": tc.body}, tc.headers...)
			require.Equal(t, http.StatusCreated, res.Status, "%s: %s", tc.name, res.Body)
		}
	})

	t.Run("CrossCompanyRefused", func(t *testing.T) {
		iss := newAreaIssue(t, h, companyID, "")
		res := postComment(t, iss.ID, map[string]any{"body": "hello"})
		require.Equal(t, http.StatusCreated, res.Status)
		commentID := res.Map(t)["id"].(string)

		requireError(t, postComment(t, iss.ID, map[string]any{"body": "intrusion"}, outsider.As("")...), http.StatusForbidden, "You do not have access to this company")
		requireError(t, h.Do("GET", "/api/issues/"+iss.ID+"/comments", nil, outsider.As("")...), http.StatusForbidden, "You do not have access to this company")
		requireError(t, h.Do("GET", "/api/issues/"+iss.ID+"/comments/"+commentID, nil, outsider.As("")...), http.StatusForbidden, "You do not have access to this company")
		requireError(t, h.Do("DELETE", "/api/issues/"+iss.ID+"/comments/"+commentID, nil, outsider.As("")...), http.StatusForbidden, "You do not have access to this company")
	})

	t.Run("MethodCommentsAdd", func(t *testing.T) {
		iss := newAreaIssue(t, h, companyID, assignee.ID)
		invoke := func(companyID string, actor *extensionv1.Actor, input any) *hostv1.InvokeResponse {
			t.Helper()
			in, err := json.Marshal(input)
			require.NoError(t, err)
			res, err := h.Supervisor.Invoke(context.Background(), "kernel", &hostv1.InvokeRequest{
				Method: "work.comments.add", InputJson: in, Actor: actor, CompanyId: companyID})
			require.NoError(t, err)
			return res
		}
		runID := uuid.NewString()
		agentActor := &extensionv1.Actor{Type: "agent", AgentId: reviewer.ID, CompanyId: companyID, RunId: runID}
		res := invoke(companyID, agentActor, map[string]any{"issueId": iss.Identifier, "body": "from a method @Builder"})
		require.Nil(t, res.Error, "%v", res.Error)
		var c map[string]any
		require.NoError(t, json.Unmarshal(res.OutputJson, &c))
		require.Equal(t, iss.ID, c["issueId"])
		require.Equal(t, reviewer.ID, c["authorAgentId"])
		require.Equal(t, runID, c["createdByRunId"])
		require.Equal(t, "agent", c["authorType"])

		res = invoke(companyID, nil, map[string]any{"issueId": iss.ID, "body": "from the system"})
		require.Nil(t, res.Error, "%v", res.Error)
		require.NoError(t, json.Unmarshal(res.OutputJson, &c))
		require.Equal(t, "system", c["authorType"])

		res = invoke(otherCompanyID, &extensionv1.Actor{Type: "agent", AgentId: outsider.ID, CompanyId: otherCompanyID},
			map[string]any{"issueId": iss.ID, "body": "not my company"})
		require.NotNil(t, res.Error)
		require.EqualValues(t, http.StatusForbidden, res.Error.Status)

		res = invoke(companyID, agentActor, map[string]any{"issueId": uuid.NewString(), "body": "x"})
		require.NotNil(t, res.Error)
		require.EqualValues(t, http.StatusNotFound, res.Error.Status)
		require.Equal(t, "Issue not found", res.Error.Message)

		res = invoke(companyID, agentActor, map[string]any{"issueId": iss.ID, "body": ""})
		require.NotNil(t, res.Error)
		require.EqualValues(t, http.StatusBadRequest, res.Error.Status)
	})
}

func TestParseMentions(t *testing.T) {
	t.Parallel()
	candidates := []work.MentionCandidate{
		{ID: "ceo", Name: "CEO", URLKey: "ceo"},
		{ID: "lead", Name: "Research Lead", URLKey: "research-lead"},
		{ID: "dev", Name: "Dev", URLKey: "dev"},
		{ID: "devlead", Name: "Dev Lead", URLKey: "dev-lead-2"},
		{ID: "zoe", Name: "Zoë", URLKey: "zoe"},
	}
	for _, tc := range []struct {
		name string
		body string
		want []string
	}{
		{"Name", "@CEO please review", []string{"ceo"}},
		{"CaseInsensitive", "hey @ceo", []string{"ceo"}},
		{"URLKey", "cc @research-lead", []string{"lead"}},
		{"NameWithSpace", "@Research Lead can you check", []string{"lead"}},
		{"NameWithSpaceLowercase", "@research lead?", []string{"lead"}},
		{"Punctuation", "(@CEO), thanks", []string{"ceo"}},
		{"EndOfText", "over to @Dev", []string{"dev"}},
		{"LongestNameWins", "@Dev Lead owns this", []string{"devlead"}},
		{"ShorterNameWhenLongerAbsent", "@Dev Leader", []string{"dev"}},
		{"URLKeyOfLongerName", "@dev-lead-2 and @dev", []string{"devlead", "dev"}},
		{"OrderOfFirstMention", "@Zoë then @CEO then @zoe", []string{"zoe", "ceo"}},
		{"NonASCIIFold", "@ZOË", []string{"zoe"}},
		{"Duplicates", "@CEO @ceo @CEO", []string{"ceo"}},
		{"EmailIsNotAMention", "mail ceo@ceo.com", nil},
		{"WordContinues", "@CEOs and @dev_team and @Dev-ops", nil},
		{"DoubleAt", "@@CEO", []string{"ceo"}},
		{"BareAt", "@ alone @", nil},
		{"Unknown", "@nobody", nil},
		{"NoAt", "CEO and Dev", nil},
		{"Empty", "", nil},
		{"Multiline", "first line\n@CEO\n@dev", []string{"ceo", "dev"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, work.ParseMentions(tc.body, candidates))
		})
	}
	t.Run("SameNameMentionsBoth", func(t *testing.T) {
		t.Parallel()
		twins := []work.MentionCandidate{{ID: "a", Name: "Twin", URLKey: "twin"}, {ID: "b", Name: "Twin", URLKey: "twin-2"}}
		require.Equal(t, []string{"a", "b"}, work.ParseMentions("@twin", twins))
		require.Equal(t, []string{"b"}, work.ParseMentions("@twin-2", twins))
	})
	t.Run("EmptyNamesNeverMatch", func(t *testing.T) {
		t.Parallel()
		require.Nil(t, work.ParseMentions("@ @x", []work.MentionCandidate{{ID: "e", Name: "  ", URLKey: ""}}))
	})
	t.Run("OverlongNamesNeverMatch", func(t *testing.T) {
		t.Parallel()
		long := strings.Repeat("n", 257)
		require.Nil(t, work.ParseMentions("@"+long, []work.MentionCandidate{{ID: "l", Name: long}}))
		require.Equal(t, []string{"l"}, work.ParseMentions("@"+long[:256], []work.MentionCandidate{{ID: "l", Name: long[:256]}}))
	})
}

func FuzzMentions(f *testing.F) {
	for _, seed := range [][2]string{
		{"@CEO hi", "CEO"}, {"mail a@b.c", "b"}, {"@Zoë", "ZOË"}, {"@@x-y", "x"}, {"(@Research Lead)", "Research Lead"},
		{"@\xff\xfe", "\xff"}, {"@K", "\u212a"}, {"", ""}, {"@ß", "SS"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, body, name string) {
		candidates := []work.MentionCandidate{{ID: "x", Name: name, URLKey: "x-key"}, {ID: "y", Name: "CEO", URLKey: "ceo"}}
		got := work.ParseMentions(body, candidates)
		seen := map[string]bool{}
		for _, id := range got {
			require.True(t, id == "x" || id == "y", "unknown id %q", id)
			require.False(t, seen[id], "duplicate id %q", id)
			seen[id] = true
		}
		if !strings.Contains(body, "@") {
			require.Empty(t, got)
		}
		// Mentioning the candidate by its exact name always finds it.
		if trimmed := strings.TrimSpace(name); trimmed != "" && len(trimmed) <= 256 && utf8.ValidString(name) {
			require.Equal(t, []string{"x"}, work.ParseMentions("see @"+trimmed+" now", candidates[:1]), "name %q", name)
		}
	})
}
