package agents_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	extensionv1 "github.com/keelhq/keel/sdk/proto/extension/v1"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
	"github.com/keelhq/keel/sdktest"
)

func TestAgentCreateReadList(t *testing.T) {
	t.Parallel()
	h := startAgents(t)
	company := h.CreateCompany("Smoke")
	ceo, worker := orgChart(t, h, company)

	require.Equal(t, "idle", ceo["status"])
	require.Equal(t, "smoke-ceo", ceo["urlKey"])
	require.Equal(t, "process", ceo["adapterType"])
	require.Equal(t, map[string]any{"canCreateAgents": true, "canAssignTasks": false}, ceo["permissions"])
	require.Equal(t, map[string]any{"heartbeat": map[string]any{"enabled": false}}, ceo["runtimeConfig"])
	require.Equal(t, map[string]any{"canCreateAgents": false, "canAssignTasks": false}, worker["permissions"])
	require.Equal(t, ceo["id"], worker["reportsTo"])
	require.Equal(t, "echo things", worker["capabilities"])
	chain := worker["orgChainHealth"].(map[string]any)
	require.Equal(t, "healthy", chain["status"])
	require.Len(t, chain["fullChain"], 2)

	dup := createAgent(t, h, company, map[string]any{"name": "Smoke Worker", "budgetMonthlyCents": 500})
	require.Equal(t, "Smoke Worker 2", dup["name"])
	require.Equal(t, "smoke-worker-2", dup["urlKey"])
	require.Equal(t, "general", dup["role"])
	require.EqualValues(t, 500, dup["budgetMonthlyCents"])

	t.Run("get by id adds chainOfCommand and access", func(t *testing.T) {
		res := h.Do("GET", "/api/agents/"+worker["id"].(string), nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		got := res.Map(t)
		require.Equal(t, []any{map[string]any{"id": ceo["id"], "name": "Smoke CEO", "role": "ceo", "title": "Chief"}}, got["chainOfCommand"])
		access := got["access"].(map[string]any)
		require.Equal(t, false, access["canAssignTasks"])
		require.NotEmpty(t, access["reason"])
		res = h.Do("GET", "/api/agents/"+ceo["id"].(string), nil)
		require.Equal(t, true, res.Map(t)["access"].(map[string]any)["canAssignTasks"])
		require.Equal(t, []any{}, res.Map(t)["chainOfCommand"], "a top agent has an empty chain, not a missing one")
	})

	t.Run("get by shortname", func(t *testing.T) {
		res := h.Do("GET", "/api/agents/smoke-worker?companyId="+company, nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, worker["id"], res.Map(t)["id"])
		res = h.Do("GET", "/api/agents/smoke-worker", nil)
		require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
		res = h.Do("GET", "/api/agents/nobody?companyId="+company, nil)
		require.Equal(t, http.StatusNotFound, res.Status, "%s", res.Body)
		res = h.Do("GET", "/api/agents/00000000-0000-4000-8000-000000000000", nil)
		require.Equal(t, http.StatusNotFound, res.Status, "%s", res.Body)
		require.Equal(t, "Agent not found", res.Map(t)["error"])
	})

	t.Run("list excludes terminated agents", func(t *testing.T) {
		res := h.Do("POST", "/api/agents/"+dup["id"].(string)+"/terminate", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		res = h.Do("GET", "/api/companies/"+company+"/agents", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		var list []map[string]any
		res.JSON(t, &list)
		require.Len(t, list, 2)
		for _, a := range list {
			require.NotEqual(t, dup["id"], a["id"])
			require.NotNil(t, a["adapterConfig"])
		}
		res = h.Do("GET", "/api/agents/"+dup["id"].(string), nil)
		require.Equal(t, http.StatusOK, res.Status, "terminated agents stay readable by id: %s", res.Body)
		require.Equal(t, "terminated", res.Map(t)["status"])
	})
}

func TestAgentCreateValidation(t *testing.T) {
	t.Parallel()
	h := startAgents(t)
	company := h.CreateCompany("Validation")
	other := h.CreateCompany("Other")
	stranger := createAgent(t, h, other, map[string]any{"name": "Stranger"})
	for _, tc := range []struct {
		name string
		body map[string]any
		path string
	}{
		{"missing name", map[string]any{"role": "engineer"}, "name"},
		{"unknown role", map[string]any{"name": "X", "role": "wizard"}, "role"},
		{"negative budget", map[string]any{"name": "X", "budgetMonthlyCents": -1}, "budgetMonthlyCents"},
		{"adapterConfig not an object", map[string]any{"name": "X", "adapterConfig": []int{1}}, "adapterConfig"},
		{"reportsTo another company", map[string]any{"name": "X", "reportsTo": stranger["id"]}, "reportsTo"},
		{"reportsTo not a uuid", map[string]any{"name": "X", "reportsTo": "boss"}, "reportsTo"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := h.Do("POST", "/api/companies/"+company+"/agents", tc.body)
			require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
			got := res.Map(t)
			require.Equal(t, "Validation error", got["error"])
			require.Equal(t, tc.path, got["details"].([]any)[0].(map[string]any)["path"], "%s", res.Body)
		})
	}
	t.Run("unknown fields are ignored", func(t *testing.T) {
		ag := createAgent(t, h, company, map[string]any{"name": "Colourful", "favouriteColour": "blue"})
		require.NotContains(t, ag, "favouriteColour")
	})
	t.Run("agents cannot use the board create route", func(t *testing.T) {
		ceo := createAgent(t, h, company, map[string]any{"name": "Boss", "role": "ceo"})
		res := h.Do("POST", "/api/companies/"+company+"/agents", map[string]any{"name": "Y"}, agentKey(t, h, ceo["id"].(string))...)
		require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
	})
}

func TestAgentRedaction(t *testing.T) {
	t.Parallel()
	h := startAgents(t)
	company := h.CreateCompany("Redaction")
	ceo, worker := orgChart(t, h, company)
	workerKey := agentKey(t, h, worker["id"].(string))
	ceoKey := agentKey(t, h, ceo["id"].(string))

	res := h.Do("GET", "/api/companies/"+company+"/agents", nil, workerKey...)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var list []map[string]any
	res.JSON(t, &list)
	require.Len(t, list, 2)
	for _, a := range list {
		if a["id"] == worker["id"] {
			require.Equal(t, worker["adapterConfig"], a["adapterConfig"], "an agent reads its own configuration")
		} else {
			require.Equal(t, map[string]any{}, a["adapterConfig"])
			require.Equal(t, true, a["configRedacted"])
		}
	}
	res = h.Do("GET", "/api/agents/"+ceo["id"].(string), nil, workerKey...)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, map[string]any{}, res.Map(t)["adapterConfig"])

	res = h.Do("GET", "/api/agents/"+worker["id"].(string), nil, ceoKey...)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, worker["adapterConfig"], res.Map(t)["adapterConfig"], "the CEO holds agents:create")

	// The legacy canCreateAgents flag also lets an agent read peers' configuration.
	res = h.Do("PATCH", "/api/agents/"+worker["id"].(string)+"/permissions", map[string]any{"canCreateAgents": true})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	res = h.Do("GET", "/api/agents/"+ceo["id"].(string), nil, workerKey...)
	require.Equal(t, ceo["adapterConfig"], res.Map(t)["adapterConfig"])

	other := h.CreateCompany("Elsewhere")
	res = h.Do("GET", "/api/companies/"+other+"/agents", nil, workerKey...)
	require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
	res = h.Do("GET", "/api/agents/"+ceo["id"].(string), nil)
	require.Equal(t, http.StatusOK, res.Status)
}

func TestAgentPatch(t *testing.T) {
	t.Parallel()
	h := startAgents(t)
	company := h.CreateCompany("Patch")
	ceo, worker := orgChart(t, h, company)
	wid, cid := worker["id"].(string), ceo["id"].(string)

	res := h.Do("PATCH", "/api/agents/"+wid, map[string]any{"adapterConfig": map[string]any{"cwd": "/tmp"}, "title": "Builder"})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	got := res.Map(t)
	require.Equal(t, map[string]any{"command": "/bin/echo", "args": []any{"worker-heartbeat"}, "cwd": "/tmp"}, got["adapterConfig"])
	require.Equal(t, "Builder", got["title"])

	res = h.Do("PATCH", "/api/agents/"+wid, map[string]any{"adapterConfig": map[string]any{"url": "http://x"}, "replaceAdapterConfig": true})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, map[string]any{"url": "http://x"}, res.Map(t)["adapterConfig"])

	for _, tc := range []struct {
		name   string
		id     string
		body   map[string]any
		status int
		msg    string
	}{
		{"permissions refused", wid, map[string]any{"permissions": map[string]any{"canCreateAgents": true}}, http.StatusBadRequest, "Validation error"},
		{"unknown field ignored", wid, map[string]any{"colour": "red"}, http.StatusOK, ""},
		{"self report", wid, map[string]any{"reportsTo": wid}, http.StatusUnprocessableEntity, ""},
		{"cycle", cid, map[string]any{"reportsTo": wid}, http.StatusUnprocessableEntity, ""},
		{"rename collision", wid, map[string]any{"name": "smoke ceo"}, http.StatusConflict, "Agent name already in use"},
		{"pending status refused", wid, map[string]any{"status": "pending_approval"}, http.StatusBadRequest, "Validation error"},
		{"bad status", wid, map[string]any{"status": "sleeping"}, http.StatusBadRequest, "Validation error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := h.Do("PATCH", "/api/agents/"+tc.id, tc.body)
			require.Equal(t, tc.status, res.Status, "%s", res.Body)
			if tc.msg != "" {
				require.Equal(t, tc.msg, res.Map(t)["error"])
			}
		})
	}

	t.Run("rename and role change reach the kernel identity", func(t *testing.T) {
		res := h.Do("PATCH", "/api/agents/"+wid, map[string]any{"name": "Fresh Name", "role": "engineer"})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		got := res.Map(t)
		require.Equal(t, "Fresh Name", got["name"])
		require.Equal(t, "engineer", got["role"])
		id, err := h.Kernel.AgentGetByID(t.Context(), wid)
		require.NoError(t, err)
		require.Equal(t, "fresh-name", id.URLKey)
		require.Equal(t, "engineer", id.Role)
	})

	t.Run("status patches", func(t *testing.T) {
		res := h.Do("PATCH", "/api/agents/"+wid, map[string]any{"status": "paused"})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, "paused", res.Map(t)["status"])
		res = h.Do("PATCH", "/api/agents/"+wid, map[string]any{"status": "idle"})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, "idle", res.Map(t)["status"])

		res = h.Do("POST", "/api/agents/"+wid+"/terminate", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		res = h.Do("PATCH", "/api/agents/"+wid, map[string]any{"status": "idle"})
		require.Equal(t, http.StatusConflict, res.Status, "%s", res.Body)
		require.Equal(t, "Terminated agents cannot be resumed through a patch", res.Map(t)["error"])
	})

	t.Run("agent callers need agents:create", func(t *testing.T) {
		plain := createAgent(t, h, company, map[string]any{"name": "Plain", "role": "engineer"})
		key := agentKey(t, h, plain["id"].(string))
		res := h.Do("PATCH", "/api/agents/"+cid, map[string]any{"title": "Hacked"}, key...)
		require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
		res = h.Do("PATCH", "/api/agents/"+plain["id"].(string), map[string]any{"title": "By the CEO"}, agentKey(t, h, cid)...)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	})
}

func TestAgentHire(t *testing.T) {
	t.Parallel()
	h := startAgents(t)
	company := h.CreateCompany("Hire")
	ceo := createAgent(t, h, company, map[string]any{"name": "Boss", "role": "ceo"})

	res := h.Do("POST", "/api/companies/"+company+"/agent-hires", map[string]any{"name": "Direct Hire", "role": "engineer"})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	got := res.Map(t)
	require.Nil(t, got["approval"])
	require.Equal(t, "idle", got["agent"].(map[string]any)["status"])

	res = h.Do("PATCH", "/api/companies/"+company, map[string]any{"requireBoardApprovalForNewAgents": true})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)

	issue := h.Do("POST", "/api/companies/"+company+"/issues", map[string]any{"title": "We need help"})
	require.Equal(t, http.StatusCreated, issue.Status, "%s", issue.Body)
	issueID := issue.Map(t)["id"].(string)

	// The CEO agent hires (it holds agents:create); the hire waits for the board.
	res = h.Do("POST", "/api/companies/"+company+"/agent-hires", map[string]any{"name": "Pending Hire", "role": "engineer",
		"reportsTo": ceo["id"], "sourceIssueId": issueID}, agentKey(t, h, ceo["id"].(string))...)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	got = res.Map(t)
	hired := got["agent"].(map[string]any)
	approval := got["approval"].(map[string]any)
	require.Equal(t, "pending_approval", hired["status"])
	require.Equal(t, "hire_agent", approval["type"])
	require.Equal(t, "pending", approval["status"])
	require.Equal(t, hired["id"], approval["payload"].(map[string]any)["agentId"])
	require.Equal(t, []any{issueID}, approval["issueIds"])
	hid := hired["id"].(string)

	res = h.Do("PATCH", "/api/agents/"+hid, map[string]any{"status": "idle"})
	require.Equal(t, http.StatusConflict, res.Status, "%s", res.Body)
	require.Equal(t, "Pending approval agents cannot be activated through a patch", res.Map(t)["error"])

	res = h.Do("POST", "/api/approvals/"+approval["id"].(string)+"/approve", map[string]any{})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	res = h.Do("GET", "/api/agents/"+hid, nil)
	require.Equal(t, "idle", res.Map(t)["status"], "%s", res.Body)

	t.Run("agents without agents:create cannot hire", func(t *testing.T) {
		plain := createAgent(t, h, company, map[string]any{"name": "Plain"})
		res := h.Do("POST", "/api/companies/"+company+"/agent-hires", map[string]any{"name": "Sneaky"}, agentKey(t, h, plain["id"].(string))...)
		require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
	})
	t.Run("hire validation", func(t *testing.T) {
		res := h.Do("POST", "/api/companies/"+company+"/agent-hires", map[string]any{"role": "engineer"})
		require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
	})
}

// call invokes a provided method of the agents extension as the kernel would.
func call(t *testing.T, h *sdktest.Host, method, companyID string, input any) (json.RawMessage, *extensionv1.Error) {
	t.Helper()
	in, err := json.Marshal(input)
	require.NoError(t, err)
	res, err := h.Supervisor.Invoke(context.Background(), "kernel", &hostv1.InvokeRequest{
		Method: "agents." + method, InputJson: in, CompanyId: companyID,
		Actor: &extensionv1.Actor{Type: "board", UserId: "local-board", Source: "local_implicit", IsInstanceAdmin: true}})
	require.NoError(t, err)
	return res.OutputJson, res.Error
}

func TestProvidedMethods(t *testing.T) {
	t.Parallel()
	h := startAgents(t)
	company := h.CreateCompany("Methods")
	other := h.CreateCompany("Methods Other")
	ceo, worker := orgChart(t, h, company)

	out, e := call(t, h, "get", company, map[string]any{"agentId": worker["id"]})
	require.Nil(t, e)
	var got map[string]any
	require.NoError(t, json.Unmarshal(out, &got))
	require.Equal(t, worker["adapterConfig"], got["adapterConfig"])
	require.Equal(t, ceo["id"], got["reportsTo"])

	_, e = call(t, h, "get", other, map[string]any{"agentId": worker["id"]})
	require.NotNil(t, e)
	require.EqualValues(t, http.StatusNotFound, e.Status)

	out, e = call(t, h, "list", company, map[string]any{})
	require.Nil(t, e)
	var list []map[string]any
	require.NoError(t, json.Unmarshal(out, &list))
	require.Len(t, list, 2)

	res := h.Do("PATCH", "/api/companies/"+company, map[string]any{"requireBoardApprovalForNewAgents": true})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	res = h.Do("POST", "/api/companies/"+company+"/agent-hires", map[string]any{"name": "Waiting"})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	pending := res.Map(t)
	pid := pending["agent"].(map[string]any)["id"]
	out, e = call(t, h, "approveHire", company, map[string]any{"approvalId": pending["approval"].(map[string]any)["id"], "agentId": pid})
	require.Nil(t, e)
	require.NoError(t, json.Unmarshal(out, &got))
	require.Equal(t, "idle", got["status"])

	res = h.Do("GET", "/api/companies/"+company+"/activity", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	for _, action := range []string{"agent.created", "agent.hired", "agent.approved"} {
		require.Contains(t, string(res.Body), `"`+action+`"`)
	}
}
