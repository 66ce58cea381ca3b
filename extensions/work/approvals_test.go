package work_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	extensionv1 "github.com/keelhq/keel/sdk/proto/extension/v1"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
	"github.com/keelhq/keel/sdktest"
)

type approvalJSON struct {
	ID                 string         `json:"id"`
	CompanyID          string         `json:"companyId"`
	Type               string         `json:"type"`
	RequestedByAgentID *string        `json:"requestedByAgentId"`
	RequestedByUserID  *string        `json:"requestedByUserId"`
	Status             string         `json:"status"`
	Payload            map[string]any `json:"payload"`
	DecisionNote       *string        `json:"decisionNote"`
	DecidedByUserID    *string        `json:"decidedByUserId"`
	DecidedAt          *string        `json:"decidedAt"`
	IssueIDs           []string       `json:"issueIds"`
}

// pgsInvoke calls a provided method of the work extension the way another extension would.
func pgsInvoke(t *testing.T, h *sdktest.Host, method, companyID string, actor *extensionv1.Actor, input any) (json.RawMessage, *extensionv1.Error) {
	t.Helper()
	in, err := json.Marshal(input)
	require.NoError(t, err)
	res, err := h.Supervisor.Invoke(context.Background(), "test", &hostv1.InvokeRequest{Method: method, InputJson: in, Actor: actor, CompanyId: companyID})
	require.NoError(t, err)
	return res.OutputJson, res.Error
}

func TestApprovals(t *testing.T) {
	t.Parallel()
	h := startWork(t)
	co := h.CreateCompany("Approvals Co")
	other := h.CreateCompany("Rival Co")
	ceo := h.CreateAgent(co, "CEO", "ceo")
	worker := h.CreateAgent(co, "Worker", "engineer")
	outsider := h.CreateAgent(other, "Outsider", "engineer")
	iss1 := pgsSeedIssue(t, h, pgsIssue{Company: co, Identifier: "APP-1", Title: "Plan the launch"})
	iss2 := pgsSeedIssue(t, h, pgsIssue{Company: co, Identifier: "APP-2", Title: "Budget the launch"})
	otherIss := pgsSeedIssue(t, h, pgsIssue{Company: other, Identifier: "RIV-1", Title: "Rival work"})
	base := "/api/companies/" + co + "/approvals"

	decode := func(t *testing.T, res *sdktest.Response, status int) approvalJSON {
		t.Helper()
		require.Equal(t, status, res.Status, "%s", res.Body)
		var a approvalJSON
		res.JSON(t, &a)
		return a
	}

	var boardReq, agentReq approvalJSON
	t.Run("CreateByBoard", func(t *testing.T) {
		boardReq = decode(t, h.Do("POST", base, map[string]any{"type": "request_board_approval",
			"payload": map[string]any{"summary": "Go public"}, "issueIds": []string{iss1, "app-2"}}), http.StatusCreated)
		require.Equal(t, "pending", boardReq.Status)
		require.Equal(t, "local-board", *boardReq.RequestedByUserID)
		require.Nil(t, boardReq.RequestedByAgentID)
		require.Equal(t, "Go public", boardReq.Payload["summary"])
		require.ElementsMatch(t, []string{iss1, iss2}, boardReq.IssueIDs)
	})

	t.Run("CreateByAgentRequestsForItself", func(t *testing.T) {
		agentReq = decode(t, h.Do("POST", base, map[string]any{"type": "approve_ceo_strategy",
			"payload": map[string]any{"plan": "v1"}, "issueIds": []string{iss1}}, ceo.As("")...), http.StatusCreated)
		require.Equal(t, ceo.ID, *agentReq.RequestedByAgentID)
		require.Nil(t, agentReq.RequestedByUserID)
		res := h.Do("POST", base, map[string]any{"type": "approve_ceo_strategy", "requestedByAgentId": worker.ID}, ceo.As("")...)
		require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
		require.Equal(t, []string{"approval.created"}, pgsActions(t, h, co, agentReq.ID))
	})

	t.Run("CreateValidation", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			body any
			path string
		}{
			{"MissingType", map[string]any{"payload": map[string]any{}}, "type"},
			{"BadType", map[string]any{"type": "buy_a_boat"}, "type"},
			{"PayloadNotObject", map[string]any{"type": "request_board_approval", "payload": []int{1}}, "payload"},
			{"IssueOfOtherCompany", map[string]any{"type": "request_board_approval", "issueIds": []string{otherIss}}, "issueIds[0]"},
			{"MissingIssue", map[string]any{"type": "request_board_approval", "issueIds": []string{"APP-99"}}, "issueIds[0]"},
			{"HireWithoutAgent", map[string]any{"type": "hire_agent", "payload": map[string]any{}}, "payload.agentId"},
			{"HireOfOtherCompany", map[string]any{"type": "hire_agent", "payload": map[string]any{"agentId": outsider.ID}}, "payload.agentId"},
			{"RequesterOfOtherCompany", map[string]any{"type": "request_board_approval", "requestedByAgentId": outsider.ID}, "requestedByAgentId"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				pgsValidation(t, h.Do("POST", base, tc.body), tc.path)
			})
		}
	})

	t.Run("ListAndGet", func(t *testing.T) {
		var list []approvalJSON
		res := h.Do("GET", base, nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		res.JSON(t, &list)
		require.Len(t, list, 2)
		require.Equal(t, agentReq.ID, list[0].ID, "newest first")
		res = h.Do("GET", base+"?type=approve_ceo_strategy&status=pending", nil)
		res.JSON(t, &list)
		require.Len(t, list, 1)
		res = h.Do("GET", base+"?requestedByAgentId="+ceo.ID, nil)
		res.JSON(t, &list)
		require.Len(t, list, 1)
		pgsValidation(t, h.Do("GET", base+"?status=maybe", nil), "status")

		got := decode(t, h.Do("GET", "/api/approvals/"+boardReq.ID, nil), http.StatusOK)
		require.ElementsMatch(t, []string{iss1, iss2}, got.IssueIDs)
		require.Equal(t, http.StatusNotFound, h.Do("GET", "/api/approvals/"+uuid.NewString(), nil).Status)

		res = h.Do("GET", "/api/approvals/"+boardReq.ID+"/issues", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		var issues []struct {
			ID         string `json:"id"`
			Identifier string `json:"identifier"`
		}
		res.JSON(t, &issues)
		require.Len(t, issues, 2)
		require.Equal(t, "APP-1", issues[0].Identifier)
	})

	t.Run("RevisionCycle", func(t *testing.T) {
		id := agentReq.ID
		// Deciding is for the board.
		require.Equal(t, http.StatusForbidden, h.Do("POST", "/api/approvals/"+id+"/approve", nil, ceo.As("")...).Status)

		a := decode(t, h.Do("POST", "/api/approvals/"+id+"/request-revision", map[string]any{"decisionNote": "Add numbers"}), http.StatusOK)
		require.Equal(t, "revision_requested", a.Status)
		require.Equal(t, "Add numbers", *a.DecisionNote)
		require.Equal(t, "local-board", *a.DecidedByUserID)
		require.NotNil(t, a.DecidedAt)

		// Only the requesting agent (or the board) resubmits.
		require.Equal(t, http.StatusForbidden, h.Do("POST", "/api/approvals/"+id+"/resubmit", nil, worker.As("")...).Status)
		pgsValidation(t, h.Do("POST", "/api/approvals/"+id+"/resubmit", map[string]any{"payload": "text"}, ceo.As("")...), "payload")
		a = decode(t, h.Do("POST", "/api/approvals/"+id+"/resubmit", map[string]any{"payload": map[string]any{"plan": "v2"}}, ceo.As("")...), http.StatusOK)
		require.Equal(t, "pending", a.Status)
		require.Equal(t, "v2", a.Payload["plan"])
		require.Nil(t, a.DecisionNote)
		require.Nil(t, a.DecidedAt)
		res := h.Do("POST", "/api/approvals/"+id+"/resubmit", nil, ceo.As("")...)
		require.Equal(t, http.StatusConflict, res.Status, "%s", res.Body)

		// A second revision round, resubmitted by the board without a new payload.
		decode(t, h.Do("POST", "/api/approvals/"+id+"/request-revision", nil), http.StatusOK)
		a = decode(t, h.Do("POST", "/api/approvals/"+id+"/resubmit", nil), http.StatusOK)
		require.Equal(t, "v2", a.Payload["plan"], "payload kept")

		a = decode(t, h.Do("POST", "/api/approvals/"+id+"/approve", map[string]any{"decisionNote": "Ship it"}), http.StatusOK)
		require.Equal(t, "approved", a.Status)
		require.Equal(t, "Ship it", *a.DecisionNote)
		require.Equal(t, []string{iss1}, a.IssueIDs)

		for _, action := range []string{"approve", "reject", "request-revision"} {
			res := h.Do("POST", "/api/approvals/"+id+"/"+action, nil)
			require.Equal(t, http.StatusConflict, res.Status, "%s: %s", action, res.Body)
			require.Equal(t, "Approval is not pending", res.Map(t)["error"])
		}
		require.Equal(t, http.StatusConflict, h.Do("POST", "/api/approvals/"+id+"/resubmit", nil).Status)
		require.Equal(t, []string{"approval.created", "approval.revision_requested", "approval.resubmitted",
			"approval.revision_requested", "approval.resubmitted", "approval.decided"}, pgsActions(t, h, co, id))

		a = decode(t, h.Do("POST", "/api/approvals/"+boardReq.ID+"/reject", map[string]any{"decisionNote": "Not now"}), http.StatusOK)
		require.Equal(t, "rejected", a.Status)
		pgsValidation(t, h.Do("POST", "/api/approvals/"+boardReq.ID+"/reject", map[string]any{"decisionNote": 5}), "decisionNote")
	})

	t.Run("Comments", func(t *testing.T) {
		url := "/api/approvals/" + boardReq.ID + "/comments"
		res := h.Do("POST", url, map[string]any{"body": "Why now?"})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		res = h.Do("POST", url, map[string]any{"body": "Because."}, ceo.As("")...)
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		pgsValidation(t, h.Do("POST", url, map[string]any{"body": "  "}), "body")
		res = h.Do("GET", url, nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		var list []struct {
			Body          string  `json:"body"`
			AuthorAgentID *string `json:"authorAgentId"`
			AuthorUserID  *string `json:"authorUserId"`
		}
		res.JSON(t, &list)
		require.Len(t, list, 2)
		require.Equal(t, "Why now?", list[0].Body)
		require.Equal(t, "local-board", *list[0].AuthorUserID)
		require.Equal(t, ceo.ID, *list[1].AuthorAgentID)
		require.Contains(t, pgsActions(t, h, co, boardReq.ID), "approval.comment_added")
	})

	t.Run("IssueLinks", func(t *testing.T) {
		res := h.Do("GET", "/api/issues/APP-1/approvals", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		var list []approvalJSON
		res.JSON(t, &list)
		require.Len(t, list, 2)

		fresh := decode(t, h.Do("POST", base, map[string]any{"type": "request_board_approval"}), http.StatusCreated)
		decode(t, h.Do("POST", "/api/issues/"+iss2+"/approvals", map[string]any{"approvalId": fresh.ID}), http.StatusCreated)
		again := decode(t, h.Do("POST", "/api/issues/APP-2/approvals", map[string]any{"approvalId": fresh.ID}), http.StatusOK)
		require.Equal(t, []string{iss2}, again.IssueIDs)
		require.Equal(t, http.StatusNotFound, h.Do("POST", "/api/issues/"+iss2+"/approvals", map[string]any{"approvalId": uuid.NewString()}).Status)
		pgsValidation(t, h.Do("POST", "/api/issues/"+iss2+"/approvals", map[string]any{}), "approvalId")
		require.Equal(t, http.StatusNotFound, h.Do("GET", "/api/issues/APP-77/approvals", nil).Status)

		res = h.Do("DELETE", "/api/issues/"+iss2+"/approvals/"+fresh.ID, nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, http.StatusNotFound, h.Do("DELETE", "/api/issues/"+iss2+"/approvals/"+fresh.ID, nil).Status)
		actions := pgsActions(t, h, co, iss2)
		require.Contains(t, actions, "issue.approval_linked")
		require.Contains(t, actions, "issue.approval_unlinked")

		// Another company's approval cannot be linked.
		rival := decode(t, h.Do("POST", "/api/companies/"+other+"/approvals", map[string]any{"type": "request_board_approval"}), http.StatusCreated)
		require.Equal(t, http.StatusNotFound, h.Do("POST", "/api/issues/"+iss2+"/approvals", map[string]any{"approvalId": rival.ID}).Status)
	})

	t.Run("CrossCompanyRefused", func(t *testing.T) {
		as := outsider.As("")
		id := boardReq.ID
		require.Equal(t, http.StatusForbidden, h.Do("GET", "/api/approvals/"+id, nil, as...).Status)
		require.Equal(t, http.StatusForbidden, h.Do("GET", "/api/approvals/"+id+"/issues", nil, as...).Status)
		require.Equal(t, http.StatusForbidden, h.Do("GET", "/api/approvals/"+id+"/comments", nil, as...).Status)
		require.Equal(t, http.StatusForbidden, h.Do("POST", "/api/approvals/"+id+"/comments", map[string]any{"body": "x"}, as...).Status)
		require.Equal(t, http.StatusForbidden, h.Do("POST", "/api/approvals/"+id+"/resubmit", nil, as...).Status)
		require.Equal(t, http.StatusForbidden, h.Do("GET", base, nil, as...).Status)
		require.Equal(t, http.StatusForbidden, h.Do("POST", base, map[string]any{"type": "request_board_approval"}, as...).Status)
		require.Equal(t, http.StatusForbidden, h.Do("GET", "/api/issues/"+iss1+"/approvals", nil, as...).Status)
		require.Equal(t, http.StatusForbidden, h.Do("DELETE", "/api/issues/"+iss1+"/approvals/"+id, nil, as...).Status)
	})

	t.Run("Methods", func(t *testing.T) {
		out, perr := pgsInvoke(t, h, "work.approvals.create", co, &extensionv1.Actor{Type: "system"}, map[string]any{
			"type": "budget_override_required", "requestedByAgentId": worker.ID, "payload": map[string]any{"incidentId": "inc-1"},
		})
		require.Nil(t, perr)
		var a approvalJSON
		require.NoError(t, json.Unmarshal(out, &a))
		require.Equal(t, "budget_override_required", a.Type)
		require.Equal(t, worker.ID, *a.RequestedByAgentID)
		require.Equal(t, co, a.CompanyID)

		out, perr = pgsInvoke(t, h, "work.approvals.get", co, &extensionv1.Actor{Type: "system"}, map[string]any{"approvalId": a.ID})
		require.Nil(t, perr)
		var got approvalJSON
		require.NoError(t, json.Unmarshal(out, &got))
		require.Equal(t, a.ID, got.ID)

		_, perr = pgsInvoke(t, h, "work.approvals.get", other, &extensionv1.Actor{Type: "system"}, map[string]any{"approvalId": a.ID})
		require.NotNil(t, perr)
		require.EqualValues(t, http.StatusNotFound, perr.Status)
		_, perr = pgsInvoke(t, h, "work.approvals.create", co, &extensionv1.Actor{Type: "system"}, map[string]any{"type": "nope"})
		require.NotNil(t, perr)
		require.EqualValues(t, http.StatusBadRequest, perr.Status)
	})
}

func TestApprovalHireFlow(t *testing.T) {
	t.Parallel()
	h := startWork(t)
	ctx := context.Background()
	co := h.CreateCompany("Hiring Co")
	ceo := h.CreateAgent(co, "CEO", "ceo")
	hire := h.CreateAgent(co, "New Hire", "engineer")
	reject := h.CreateAgent(co, "Second Hire", "engineer")
	for _, a := range []*sdktest.Agent{hire, reject} {
		_, err := h.Kernel.AgentSetStatus(ctx, a.ID, "pending_approval")
		require.NoError(t, err)
	}
	create := func(t *testing.T, agentID string) approvalJSON {
		t.Helper()
		res := h.Do("POST", "/api/companies/"+co+"/approvals",
			map[string]any{"type": "hire_agent", "payload": map[string]any{"agentId": agentID, "adapterType": "process"}}, ceo.As("")...)
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		var a approvalJSON
		res.JSON(t, &a)
		return a
	}

	t.Run("ApproveActivatesAgent", func(t *testing.T) {
		a := create(t, hire.ID)
		res := h.Do("POST", "/api/approvals/"+a.ID+"/approve", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		got, err := h.Kernel.AgentGetByID(ctx, hire.ID)
		require.NoError(t, err)
		require.Equal(t, "idle", got.Status)
		require.Contains(t, pgsActions(t, h, co, hire.ID), "agent.hire_approved")
		require.Equal(t, http.StatusConflict, h.Do("POST", "/api/approvals/"+a.ID+"/approve", nil).Status)
	})

	t.Run("RejectLeavesAgentPending", func(t *testing.T) {
		a := create(t, reject.ID)
		res := h.Do("POST", "/api/approvals/"+a.ID+"/reject", map[string]any{"decisionNote": "Not this quarter"})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		got, err := h.Kernel.AgentGetByID(ctx, reject.ID)
		require.NoError(t, err)
		require.Equal(t, "pending_approval", got.Status)
		require.Equal(t, []string{"approval.created", "approval.decided"}, pgsActions(t, h, co, a.ID))
	})

	t.Run("ApproveAfterTerminationConflicts", func(t *testing.T) {
		gone := h.CreateAgent(co, "Gone Hire", "engineer")
		_, err := h.Kernel.AgentSetStatus(ctx, gone.ID, "pending_approval")
		require.NoError(t, err)
		a := create(t, gone.ID)
		_, err = h.Kernel.AgentSetStatus(ctx, gone.ID, "terminated")
		require.NoError(t, err)
		res := h.Do("POST", "/api/approvals/"+a.ID+"/approve", nil)
		require.Equal(t, http.StatusConflict, res.Status, "%s", res.Body)
		res = h.Do("GET", "/api/approvals/"+a.ID, nil)
		require.Equal(t, "pending", res.Map(t)["status"], "a failed activation leaves the approval pending")
	})
}
