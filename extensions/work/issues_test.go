package work_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/kernel"
	extensionv1 "github.com/keelhq/keel/sdk/proto/extension/v1"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
	"github.com/keelhq/keel/sdktest"
)

// --- helpers of the issues-area tests (prefixed iss to stay apart from other areas) -------

// issStart starts a host and waits until the work extension is ready. Hosts started in
// parallel on the shared test cluster can race provisioning the cluster-wide ext_work role
// ("tuple concurrently updated"; the advisory lock in host/dbprov.go is per database); the
// supervisor retries, so the extension comes up shortly after sdktest.Start returns.
func issStart(t *testing.T) *sdktest.Host {
	t.Helper()
	h := startWork(t)
	sdktest.WaitFor(t, 60*time.Second, func() bool {
		res := h.Do("GET", "/api/plugins/work", nil)
		var m map[string]any
		return res.Status == http.StatusOK && json.Unmarshal(res.Body, &m) == nil && m["status"] == "ready"
	}, "the work extension to be ready")
	return h
}

// issCreate creates an issue through the API and returns it (201 required).
func issCreate(t *testing.T, h *sdktest.Host, companyID string, body map[string]any, headers ...string) map[string]any {
	t.Helper()
	res := h.Do("POST", "/api/companies/"+companyID+"/issues", body, headers...)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	return res.Map(t)
}

// issPatch patches an issue and returns the response.
func issPatch(t *testing.T, h *sdktest.Host, ref string, body map[string]any, headers ...string) *sdktest.Response {
	t.Helper()
	return h.Do("PATCH", "/api/issues/"+ref, body, headers...)
}

// issGet reads an issue (200 required).
func issGet(t *testing.T, h *sdktest.Host, ref string) map[string]any {
	t.Helper()
	res := h.Do("GET", "/api/issues/"+ref, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	return res.Map(t)
}

// issList lists a company's issues with a raw query string (200 required).
func issList(t *testing.T, h *sdktest.Host, companyID, query string) []map[string]any {
	t.Helper()
	res := h.Do("GET", "/api/companies/"+companyID+"/issues?"+query, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var out []map[string]any
	res.JSON(t, &out)
	return out
}

// issIdentifiers returns the identifiers of listed issues in order.
func issIdentifiers(list []map[string]any) []string {
	out := make([]string, len(list))
	for i, m := range list {
		out[i], _ = m["identifier"].(string)
	}
	return out
}

// issWantErr checks an API error's status and text and returns the body.
func issWantErr(t *testing.T, res *sdktest.Response, status int, message string) map[string]any {
	t.Helper()
	require.Equal(t, status, res.Status, "%s", res.Body)
	m := res.Map(t)
	require.Equal(t, message, m["error"], "%s", res.Body)
	return m
}

// issWantValidation checks a 400 Validation error naming the path.
func issWantValidation(t *testing.T, res *sdktest.Response, path string) {
	t.Helper()
	m := issWantErr(t, res, http.StatusBadRequest, "Validation error")
	details, _ := m["details"].([]any)
	var paths []string
	for _, d := range details {
		paths = append(paths, d.(map[string]any)["path"].(string))
	}
	require.Contains(t, paths, path, "%s", res.Body)
}

// issActivity returns the details of the newest activity entry of an entity with an
// action, failing when there is none.
func issActivity(t *testing.T, h *sdktest.Host, companyID, entityID, action string) map[string]any {
	t.Helper()
	entries, err := h.Kernel.ActivityList(context.Background(), &kernel.ActivityListParams{
		CompanyID: companyID, EntityID: entityID, Action: action, Limit: 50})
	require.NoError(t, err)
	require.NotEmpty(t, entries, "no %s activity on %s", action, entityID)
	require.Equal(t, "issue", entries[0].EntityType)
	var d map[string]any
	require.NoError(t, json.Unmarshal(entries[0].Details, &d))
	return d
}

// issActivityCount counts the activity entries of an entity with an action.
func issActivityCount(t *testing.T, h *sdktest.Host, companyID, entityID, action string) int {
	t.Helper()
	entries, err := h.Kernel.ActivityList(context.Background(), &kernel.ActivityListParams{
		CompanyID: companyID, EntityID: entityID, Action: action, Limit: 500})
	require.NoError(t, err)
	return len(entries)
}

// issSeedProject inserts a project (and optionally a workspace) straight into ext_work.
func issSeedProject(t *testing.T, h *sdktest.Host, companyID, name string) (projectID, workspaceID string) {
	t.Helper()
	projectID, workspaceID = uuid.NewString(), uuid.NewString()
	ctx := context.Background()
	_, err := h.Kernel.Pool.Exec(ctx, `INSERT INTO ext_work.projects (id, company_id, name) VALUES ($1, $2, $3)`, projectID, companyID, name)
	require.NoError(t, err)
	_, err = h.Kernel.Pool.Exec(ctx, `INSERT INTO ext_work.project_workspaces (id, company_id, project_id, name, cwd)
		VALUES ($1, $2, $3, 'main', '/tmp')`, workspaceID, companyID, projectID)
	require.NoError(t, err)
	return projectID, workspaceID
}

// issSeedGoal inserts a goal straight into ext_work.
func issSeedGoal(t *testing.T, h *sdktest.Host, companyID, title string) string {
	t.Helper()
	id := uuid.NewString()
	_, err := h.Kernel.Pool.Exec(context.Background(), `INSERT INTO ext_work.goals (id, company_id, title) VALUES ($1, $2, $3)`, id, companyID, title)
	require.NoError(t, err)
	return id
}

// issCall invokes a provided method of the work extension as the kernel would.
func issCall(t *testing.T, h *sdktest.Host, method, companyID string, actor *extensionv1.Actor, input any) (json.RawMessage, *extensionv1.Error) {
	t.Helper()
	in, err := json.Marshal(input)
	require.NoError(t, err)
	res, err := h.Supervisor.Invoke(context.Background(), "kernel", &hostv1.InvokeRequest{
		Method: "work." + method, InputJson: in, Actor: actor, CompanyId: companyID})
	require.NoError(t, err)
	return res.OutputJson, res.Error
}

var issBoard = &extensionv1.Actor{Type: "board", UserId: "local-board", Source: "local_implicit", IsInstanceAdmin: true}

// --- tests ----------------------------------------------------------------------------------

func TestIssueCreate(t *testing.T) {
	t.Parallel()
	h := issStart(t)
	company := h.CreateCompany("Acme Issues")
	other := h.CreateCompany("Beta Works")
	worker := h.CreateAgent(company, "Smoke Worker", "engineer")
	ceo := h.CreateAgent(company, "Chief", "ceo")
	outsider := h.CreateAgent(other, "Outsider", "engineer")

	t.Run("UnassignedDefaults", func(t *testing.T) {
		iss := issCreate(t, h, company, map[string]any{"title": "Unassigned smoke issue", "description": "body", "priority": "high"})
		require.Equal(t, "backlog", iss["status"])
		require.Equal(t, "high", iss["priority"])
		require.Equal(t, "standard", iss["workMode"])
		require.Equal(t, "manual", iss["originKind"])
		require.Equal(t, "local-board", iss["createdByUserId"])
		require.Nil(t, iss["createdByAgentId"])
		require.Regexp(t, `^ACM-\d+$`, iss["identifier"])
		require.Equal(t, company, iss["companyId"])
		for _, k := range []string{"labels", "labelIds", "blockedBy", "blocks"} {
			require.Equal(t, []any{}, iss[k], k)
		}
		for _, k := range []string{"startedAt", "completedAt", "cancelledAt", "checkoutRunId", "assigneeAgentId", "parentId"} {
			require.Contains(t, iss, k)
			require.Nil(t, iss[k], k)
		}
		d := issActivity(t, h, company, iss["id"].(string), "issue.created")
		require.Equal(t, iss["identifier"], d["identifier"])
	})

	t.Run("AssignedByIDAndShortname", func(t *testing.T) {
		a := issCreate(t, h, company, map[string]any{"title": "Assigned by id", "assigneeAgentId": worker.ID})
		require.Equal(t, "todo", a["status"])
		require.Equal(t, worker.ID, a["assigneeAgentId"])
		b := issCreate(t, h, company, map[string]any{"title": "Assigned by shortname", "assigneeAgentId": "SMOKE-worker"})
		require.Equal(t, "todo", b["status"])
		require.Equal(t, worker.ID, b["assigneeAgentId"])
		u := issCreate(t, h, company, map[string]any{"title": "Assigned to a user", "assigneeUserId": "user-1"})
		require.Equal(t, "todo", u["status"])
		explicit := issCreate(t, h, company, map[string]any{"title": "Assigned backlog", "assigneeAgentId": worker.ID, "status": "backlog"})
		require.Equal(t, "backlog", explicit["status"])
	})

	t.Run("StatusStampsOnCreate", func(t *testing.T) {
		ip := issCreate(t, h, company, map[string]any{"title": "Started", "status": "in_progress"})
		require.NotNil(t, ip["startedAt"])
		done := issCreate(t, h, company, map[string]any{"title": "Finished", "status": "done"})
		require.NotNil(t, done["completedAt"])
		require.Nil(t, done["startedAt"])
		c := issCreate(t, h, company, map[string]any{"title": "Dropped", "status": "cancelled"})
		require.NotNil(t, c["cancelledAt"])
	})

	t.Run("Validation", func(t *testing.T) {
		post := func(body any) *sdktest.Response { return h.Do("POST", "/api/companies/"+company+"/issues", body) }
		issWantValidation(t, post(map[string]any{}), "title")
		issWantValidation(t, post(map[string]any{"title": "   "}), "title")
		issWantValidation(t, post(map[string]any{"title": strings.Repeat("x", 501)}), "title")
		issCreate(t, h, company, map[string]any{"title": strings.Repeat("é", 500)})
		issWantValidation(t, post(map[string]any{"title": "x", "priority": "urgent"}), "priority")
		issWantValidation(t, post(map[string]any{"title": "x", "status": "open"}), "status")
		issWantValidation(t, post(map[string]any{"title": "x", "workMode": "yolo"}), "workMode")
		issWantValidation(t, post(map[string]any{"title": "x", "reviewPolicy": "nobody"}), "reviewPolicy")
		issCreate(t, h, company, map[string]any{"title": "unknown fields are ignored", "bogus": 1})
		issWantValidation(t, post(map[string]any{"title": 5}), "title")
		issWantValidation(t, post(map[string]any{"title": "x", "idempotencyKey": strings.Repeat("k", 256)}), "idempotencyKey")
		issWantValidation(t, post(map[string]any{"title": "x", "projectId": "nope"}), "projectId")
		issWantValidation(t, post(map[string]any{"title": "x", "labelIds": []string{"nope"}}), "labelIds.0")
		issWantValidation(t, post(map[string]any{"title": "x", "requestDepth": -1}), "requestDepth")
		issWantValidation(t, post(map[string]any{"title": "x", "assigneeAgentId": worker.ID, "assigneeUserId": "u"}), "assigneeUserId")
		issWantValidation(t, post(map[string]any{"title": "x", "unblockDescriptor": map[string]any{"owner": "board", "action": "approve"}}), "unblockDescriptor")
		issWantValidation(t, post(map[string]any{"title": "x", "status": "blocked", "unblockDescriptor": map[string]any{"owner": "ceo"}}), "unblockDescriptor")
		issWantValidation(t, post(`{"title":`), "")
		blocked := issCreate(t, h, company, map[string]any{"title": "Waiting on the board", "status": "blocked",
			"unblockDescriptor": map[string]any{"owner": map[string]any{"agentId": ceo.ID}, "action": "approve the budget"}})
		require.Equal(t, "approve the budget", blocked["unblockDescriptor"].(map[string]any)["action"])
	})

	t.Run("IdempotencyKey", func(t *testing.T) {
		first := issCreate(t, h, company, map[string]any{"title": "Once", "idempotencyKey": "routine-run-1"})
		res := h.Do("POST", "/api/companies/"+company+"/issues", map[string]any{"title": "Once again", "idempotencyKey": "routine-run-1"})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, first["id"], res.Map(t)["id"])
		require.Equal(t, "Once", res.Map(t)["title"])
		// The same key in another company is another issue.
		issCreate(t, h, other, map[string]any{"title": "Once", "idempotencyKey": "routine-run-1"})
	})

	t.Run("Origin", func(t *testing.T) {
		iss := issCreate(t, h, company, map[string]any{"title": "From a plugin", "originKind": "plugin:acme.sync",
			"originId": "ext-1", "originRunId": "run-9", "originFingerprint": "fp", "requestDepth": 2, "billingCode": "B-1"})
		require.Equal(t, "plugin:acme.sync", iss["originKind"])
		require.Equal(t, "ext-1", iss["originId"])
		require.Equal(t, "run-9", iss["originRunId"])
		require.Equal(t, "fp", iss["originFingerprint"])
		require.EqualValues(t, 2, iss["requestDepth"])
		require.Equal(t, "B-1", iss["billingCode"])
	})

	t.Run("References", func(t *testing.T) {
		projectID, workspaceID := issSeedProject(t, h, company, "Smoke Project")
		goalID := issSeedGoal(t, h, company, "Ship the smoke test")
		otherProject, otherWorkspace := issSeedProject(t, h, other, "Elsewhere")
		otherGoal := issSeedGoal(t, h, other, "Elsewhere")
		parent := issCreate(t, h, company, map[string]any{"title": "Parent"})
		iss := issCreate(t, h, company, map[string]any{"title": "Child", "parentId": parent["identifier"],
			"projectId": projectID, "projectWorkspaceId": workspaceID, "goalId": goalID})
		require.Equal(t, parent["id"], iss["parentId"])
		require.Equal(t, projectID, iss["projectId"])
		require.Equal(t, workspaceID, iss["projectWorkspaceId"])
		require.Equal(t, goalID, iss["goalId"])
		post := func(body map[string]any) *sdktest.Response {
			body["title"] = "x"
			return h.Do("POST", "/api/companies/"+company+"/issues", body)
		}
		foreign := issCreate(t, h, other, map[string]any{"title": "Foreign"})
		issWantErr(t, post(map[string]any{"parentId": foreign["id"]}), http.StatusUnprocessableEntity, "Parent issue must belong to the same company")
		issWantErr(t, post(map[string]any{"parentId": uuid.NewString()}), http.StatusUnprocessableEntity, "Parent issue not found")
		issWantErr(t, post(map[string]any{"projectId": otherProject}), http.StatusUnprocessableEntity, "Project not found in company")
		issWantErr(t, post(map[string]any{"projectId": projectID, "projectWorkspaceId": otherWorkspace}), http.StatusUnprocessableEntity,
			"Project workspace not found in company")
		issWantErr(t, post(map[string]any{"goalId": otherGoal}), http.StatusUnprocessableEntity, "Goal not found in company")
		issWantErr(t, post(map[string]any{"goalId": uuid.NewString()}), http.StatusUnprocessableEntity, "Goal not found in company")
		issWantErr(t, post(map[string]any{"blockedByIssueIds": []string{foreign["id"].(string)}}), http.StatusUnprocessableEntity,
			"One or more blocker issues do not belong to company")
		issWantErr(t, post(map[string]any{"assigneeAgentId": outsider.ID}), http.StatusUnprocessableEntity, "Assignee agent not found in company")
		issWantErr(t, post(map[string]any{"assigneeAgentId": "nobody"}), http.StatusUnprocessableEntity, "Assignee agent not found in company")
	})

	t.Run("AssigneeMustBeLive", func(t *testing.T) {
		gone := h.CreateAgent(company, "Gone Agent", "engineer")
		_, err := h.Kernel.AgentSetStatus(context.Background(), gone.ID, "terminated")
		require.NoError(t, err)
		res := h.Do("POST", "/api/companies/"+company+"/issues", map[string]any{"title": "x", "assigneeAgentId": gone.ID})
		issWantErr(t, res, http.StatusUnprocessableEntity, "Cannot assign issues to a terminated agent")
	})

	t.Run("AssignmentPermission", func(t *testing.T) {
		// An agent may create issues for itself; assigning to another agent needs tasks:assign.
		self := issCreate(t, h, company, map[string]any{"title": "Mine", "assigneeAgentId": worker.ID}, worker.As("")...)
		require.Equal(t, worker.ID, self["createdByAgentId"])
		require.Nil(t, self["createdByUserId"])
		res := h.Do("POST", "/api/companies/"+company+"/issues", map[string]any{"title": "For the chief", "assigneeAgentId": ceo.ID}, worker.As("")...)
		require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
		require.Contains(t, res.Map(t)["error"], "tasks:assign")
		// The CEO holds tasks:assign.
		issCreate(t, h, company, map[string]any{"title": "Delegated", "assigneeAgentId": worker.ID}, ceo.As("")...)
	})

	t.Run("CrossCompany", func(t *testing.T) {
		res := h.Do("POST", "/api/companies/"+other+"/issues", map[string]any{"title": "Intrusion"}, worker.As("")...)
		require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
		res = h.Do("POST", "/api/companies/"+uuid.NewString()+"/issues", map[string]any{"title": "Nowhere"})
		require.Equal(t, http.StatusNotFound, res.Status, "%s", res.Body)
	})

	t.Run("ConcurrentCreatesGetDistinctIdentifiers", func(t *testing.T) {
		c := h.CreateCompany("Parallel Inc")
		const n = 40
		var wg sync.WaitGroup
		ids := make([]string, n)
		errs := make([]string, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res := h.Do("POST", "/api/companies/"+c+"/issues", map[string]any{"title": fmt.Sprintf("Parallel %d", i)})
				if res.Status != http.StatusCreated {
					errs[i] = fmt.Sprintf("%d %s", res.Status, res.Body)
					return
				}
				var m map[string]any
				if err := json.Unmarshal(res.Body, &m); err != nil {
					errs[i] = err.Error()
					return
				}
				ids[i] = m["identifier"].(string)
			}()
		}
		wg.Wait()
		seen := map[string]bool{}
		for i := range n {
			require.Empty(t, errs[i])
			require.False(t, seen[ids[i]], "duplicate identifier %s", ids[i])
			seen[ids[i]] = true
		}
		require.Len(t, seen, n)
		res := h.Do("GET", "/api/companies/"+c+"/issues/count", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.EqualValues(t, n, res.Map(t)["count"])
	})
}

func TestIssueGetDeleteAndChildren(t *testing.T) {
	t.Parallel()
	h := issStart(t)
	company := h.CreateCompany("Gamma Labs")
	other := h.CreateCompany("Delta Corp")
	worker := h.CreateAgent(company, "Worker", "engineer")
	outsider := h.CreateAgent(other, "Outsider", "engineer")

	t.Run("GetByIDAndIdentifierCaseInsensitive", func(t *testing.T) {
		projectID, _ := issSeedProject(t, h, company, "Smoke Project")
		goalID := issSeedGoal(t, h, company, "Ship it")
		root := issCreate(t, h, company, map[string]any{"title": "Root"})
		mid := issCreate(t, h, company, map[string]any{"title": "Mid", "parentId": root["id"]})
		leaf := issCreate(t, h, company, map[string]any{"title": "Leaf", "parentId": mid["id"], "projectId": projectID, "goalId": goalID})
		ident := leaf["identifier"].(string)
		for _, ref := range []string{leaf["id"].(string), ident, strings.ToLower(ident), strings.ToUpper(leaf["id"].(string))} {
			got := issGet(t, h, ref)
			require.Equal(t, leaf["id"], got["id"], ref)
		}
		got := issGet(t, h, strings.ToLower(ident))
		anc := got["ancestors"].([]any)
		require.Len(t, anc, 2)
		require.Equal(t, mid["identifier"], anc[0].(map[string]any)["identifier"])
		require.Equal(t, root["identifier"], anc[1].(map[string]any)["identifier"])
		require.Equal(t, map[string]any{"id": projectID, "name": "Smoke Project"}, got["project"])
		require.Equal(t, map[string]any{"id": goalID, "title": "Ship it"}, got["goal"])
		rootGot := issGet(t, h, root["identifier"].(string))
		require.Equal(t, []any{}, rootGot["ancestors"])
		require.Nil(t, rootGot["project"])
		require.Nil(t, rootGot["goal"])
	})

	t.Run("NotFoundAndForbidden", func(t *testing.T) {
		issWantErr(t, h.Do("GET", "/api/issues/"+uuid.NewString(), nil), http.StatusNotFound, "Issue not found")
		issWantErr(t, h.Do("GET", "/api/issues/GAM-99999", nil), http.StatusNotFound, "Issue not found")
		issWantErr(t, h.Do("GET", "/api/issues/garbage", nil), http.StatusNotFound, "Issue not found")
		iss := issCreate(t, h, company, map[string]any{"title": "Private"})
		res := h.Do("GET", "/api/issues/"+iss["id"].(string), nil, outsider.As("")...)
		require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
		res = h.Do("PATCH", "/api/issues/"+iss["id"].(string), map[string]any{"title": "Mine now"}, outsider.As("")...)
		require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
		res = h.Do("POST", "/api/issues/"+iss["id"].(string)+"/children", map[string]any{"title": "Sneaky"}, outsider.As("")...)
		require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
		res = h.Do("GET", "/api/companies/"+company+"/issues", nil, outsider.As("")...)
		require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
		require.Equal(t, http.StatusOK, h.Do("GET", "/api/issues/"+iss["id"].(string), nil, worker.As("")...).Status)
	})

	t.Run("Delete", func(t *testing.T) {
		parent := issCreate(t, h, company, map[string]any{"title": "Doomed"})
		child := issCreate(t, h, company, map[string]any{"title": "Survivor", "parentId": parent["id"]})
		dependent := issCreate(t, h, company, map[string]any{"title": "Waits", "blockedByIssueIds": []string{parent["id"].(string)}})
		pid := parent["id"].(string)
		res := h.Do("DELETE", "/api/issues/"+pid, nil, worker.As("")...)
		require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
		res = h.Do("DELETE", "/api/issues/"+pid, nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, pid, res.Map(t)["id"])
		issWantErr(t, h.Do("GET", "/api/issues/"+pid, nil), http.StatusNotFound, "Issue not found")
		require.Nil(t, issGet(t, h, child["id"].(string))["parentId"])
		require.Equal(t, []any{}, issGet(t, h, dependent["id"].(string))["blockedBy"])
		d := issActivity(t, h, company, pid, "issue.deleted")
		require.Equal(t, parent["identifier"], d["identifier"])
		issWantErr(t, h.Do("DELETE", "/api/issues/"+pid, nil), http.StatusNotFound, "Issue not found")
	})

	t.Run("Children", func(t *testing.T) {
		projectID, _ := issSeedProject(t, h, company, "Kids")
		parent := issCreate(t, h, company, map[string]any{"title": "Epic", "projectId": projectID, "requestDepth": 1})
		pid := parent["id"].(string)
		res := h.Do("POST", "/api/issues/"+parent["identifier"].(string)+"/children", map[string]any{
			"title": "Part one", "description": "Do the first part.", "assigneeAgentId": worker.ID,
			"acceptanceCriteria": []string{"tests pass", "docs updated"}, "blockParentUntilDone": true,
		})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		child := res.Map(t)
		require.Equal(t, pid, child["parentId"])
		require.Equal(t, projectID, child["projectId"])
		require.EqualValues(t, 2, child["requestDepth"])
		require.Equal(t, "todo", child["status"])
		require.Equal(t, "Do the first part.\n\n## Acceptance criteria\n\n- [ ] tests pass\n- [ ] docs updated\n", child["description"])
		require.Len(t, child["blocks"], 1)
		got := issGet(t, h, pid)
		blockedBy := got["blockedBy"].([]any)
		require.Len(t, blockedBy, 1)
		require.Equal(t, child["id"], blockedBy[0].(map[string]any)["id"])
		issActivity(t, h, company, pid, "issue.relations.updated")
		issActivity(t, h, company, child["id"].(string), "issue.created")

		plain := h.Do("POST", "/api/issues/"+pid+"/children", map[string]any{"title": "Part two"})
		require.Equal(t, http.StatusCreated, plain.Status, "%s", plain.Body)
		require.Nil(t, plain.Map(t)["description"])
		require.Len(t, issGet(t, h, pid)["blockedBy"], 1)

		issWantValidation(t, h.Do("POST", "/api/issues/"+pid+"/children", map[string]any{"title": "x", "parentId": uuid.NewString()}), "parentId")
		issWantValidation(t, h.Do("POST", "/api/issues/"+pid+"/children", map[string]any{"title": "x", "acceptanceCriteria": []string{" "}}), "acceptanceCriteria.0")
		issWantErr(t, h.Do("POST", "/api/issues/"+uuid.NewString()+"/children", map[string]any{"title": "x"}), http.StatusNotFound, "Issue not found")
	})
}

func TestIssuePatch(t *testing.T) {
	t.Parallel()
	h := issStart(t)
	company := h.CreateCompany("Epsilon")
	other := h.CreateCompany("Zeta")
	worker := h.CreateAgent(company, "Worker", "engineer")
	second := h.CreateAgent(company, "Second", "engineer")
	foreignLabel := h.Do("POST", "/api/companies/"+other+"/labels", map[string]any{"name": "foreign", "color": "#000000"}).Map(t)

	t.Run("PartialUpdateAndChanges", func(t *testing.T) {
		iss := issCreate(t, h, company, map[string]any{"title": "Draft", "description": "old", "billingCode": "B1"})
		id := iss["id"].(string)
		res := issPatch(t, h, id, map[string]any{"title": "Final", "priority": "critical", "description": nil})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		m := res.Map(t)
		require.Equal(t, "Final", m["title"])
		require.Equal(t, "critical", m["priority"])
		require.Nil(t, m["description"])
		require.Equal(t, "B1", m["billingCode"])
		changes := m["changes"].(map[string]any)
		require.Equal(t, map[string]any{"from": "Draft", "to": "Final"}, changes["title"])
		require.Equal(t, map[string]any{"from": "medium", "to": "critical"}, changes["priority"])
		require.Contains(t, changes, "description")
		require.NotContains(t, changes, "billingCode")
		d := issActivity(t, h, company, id, "issue.updated")
		require.Equal(t, map[string]any{"from": "Draft", "to": "Final"}, d["changes"].(map[string]any)["title"])
		// A patch that changes nothing records nothing.
		before := issActivityCount(t, h, company, id, "issue.updated")
		res = issPatch(t, h, id, map[string]any{"title": "Final"})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, map[string]any{}, res.Map(t)["changes"])
		require.Equal(t, before, issActivityCount(t, h, company, id, "issue.updated"))
	})

	t.Run("Validation", func(t *testing.T) {
		id := issCreate(t, h, company, map[string]any{"title": "V"})["id"].(string)
		issWantValidation(t, issPatch(t, h, id, map[string]any{"title": nil}), "title")
		issWantValidation(t, issPatch(t, h, id, map[string]any{"title": ""}), "title")
		issWantValidation(t, issPatch(t, h, id, map[string]any{"status": "nope"}), "status")
		issWantValidation(t, issPatch(t, h, id, map[string]any{"priority": nil}), "priority")
		issWantValidation(t, issPatch(t, h, id, map[string]any{"goalId": "x"}), "goalId")
		issWantValidation(t, issPatch(t, h, id, map[string]any{"unblockDescriptor": map[string]any{"owner": "board", "action": "x"}}), "unblockDescriptor")
		issWantErr(t, issPatch(t, h, id, map[string]any{"labelIds": []string{foreignLabel["id"].(string)}}), http.StatusUnprocessableEntity,
			"One or more labels do not belong to company")
		issWantErr(t, issPatch(t, h, uuid.NewString(), map[string]any{"title": "x"}), http.StatusNotFound, "Issue not found")
		issWantValidation(t, issPatch(t, h, id, map[string]any{"comment": strings.Repeat("c", 100_001)}), "comment")
		otherProject, _ := issSeedProject(t, h, other, "Theirs")
		projectID, workspaceID := issSeedProject(t, h, company, "Ours")
		issWantErr(t, issPatch(t, h, id, map[string]any{"projectId": otherProject}), http.StatusUnprocessableEntity, "Project not found in company")
		issWantErr(t, issPatch(t, h, id, map[string]any{"goalId": uuid.NewString()}), http.StatusUnprocessableEntity, "Goal not found in company")
		res := issPatch(t, h, id, map[string]any{"projectId": projectID, "projectWorkspaceId": workspaceID})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, projectID, res.Map(t)["projectId"])
		_, strayWorkspace := issSeedProject(t, h, company, "Another")
		issWantErr(t, issPatch(t, h, id, map[string]any{"projectWorkspaceId": strayWorkspace}), http.StatusUnprocessableEntity,
			"Project workspace not found in company")
		require.Equal(t, "V", issGet(t, h, id)["title"], "refused patches change nothing")
	})

	t.Run("SkipAheadLikeTheReference", func(t *testing.T) {
		id := issCreate(t, h, company, map[string]any{"title": "Skip ahead"})["id"].(string)
		res := issPatch(t, h, id, map[string]any{"status": "done"})
		require.Equal(t, http.StatusOK, res.Status, "backlog → done is accepted: %s", res.Body)
		require.NotNil(t, res.Map(t)["completedAt"])
	})

	t.Run("Reassign", func(t *testing.T) {
		iss := issCreate(t, h, company, map[string]any{"title": "Hand over", "assigneeAgentId": worker.ID})
		id := iss["id"].(string)
		res := h.Do("POST", "/api/issues/"+id+"/checkout", map[string]any{"agentId": worker.ID, "expectedStatuses": []string{"todo"}}, worker.As("run-1")...)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		res = issPatch(t, h, id, map[string]any{"assigneeAgentId": "second"})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		m := res.Map(t)
		require.Equal(t, second.ID, m["assigneeAgentId"])
		require.Nil(t, m["checkoutRunId"], "a new assignee drops the old run's locks")
		require.Nil(t, m["executionRunId"])
		require.Equal(t, map[string]any{"from": worker.ID, "to": second.ID}, m["changes"].(map[string]any)["assigneeAgentId"])
		// A user assignee replaces the agent.
		res = issPatch(t, h, id, map[string]any{"assigneeUserId": "user-7"})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Nil(t, res.Map(t)["assigneeAgentId"])
		require.Equal(t, "user-7", res.Map(t)["assigneeUserId"])
		// Agents without tasks:assign cannot hand issues to others.
		res = issPatch(t, h, id, map[string]any{"assigneeAgentId": second.ID}, worker.As("")...)
		require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
		res = issPatch(t, h, id, map[string]any{"assigneeAgentId": worker.ID}, worker.As("")...)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		res = issPatch(t, h, id, map[string]any{"assigneeAgentId": nil})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Nil(t, res.Map(t)["assigneeAgentId"])
	})

	t.Run("ParentCycle", func(t *testing.T) {
		a := issCreate(t, h, company, map[string]any{"title": "A"})
		b := issCreate(t, h, company, map[string]any{"title": "B", "parentId": a["id"]})
		c := issCreate(t, h, company, map[string]any{"title": "C", "parentId": b["id"]})
		issWantErr(t, issPatch(t, h, a["id"].(string), map[string]any{"parentId": c["id"]}), http.StatusUnprocessableEntity,
			"Parent cycle detected: an issue cannot become a child of its own descendant")
		issWantErr(t, issPatch(t, h, a["id"].(string), map[string]any{"parentId": a["identifier"]}), http.StatusUnprocessableEntity,
			"An issue cannot be its own parent")
		res := issPatch(t, h, c["id"].(string), map[string]any{"parentId": nil})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Nil(t, res.Map(t)["parentId"])
	})

	t.Run("UnblockDescriptor", func(t *testing.T) {
		id := issCreate(t, h, company, map[string]any{"title": "Needs the board", "status": "todo"})["id"].(string)
		res := issPatch(t, h, id, map[string]any{"status": "blocked", "unblockDescriptor": map[string]any{"owner": "board", "action": "approve"}})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, "board", res.Map(t)["unblockDescriptor"].(map[string]any)["owner"])
		res = issPatch(t, h, id, map[string]any{"status": "todo"})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Nil(t, res.Map(t)["unblockDescriptor"], "leaving blocked drops the descriptor")
	})

	t.Run("Comment", func(t *testing.T) {
		id := issCreate(t, h, company, map[string]any{"title": "Discuss", "status": "todo", "assigneeUserId": "user-7"})["id"].(string)
		res := issPatch(t, h, id, map[string]any{"status": "in_progress", "comment": "moved by the board"})
		if res.Status != http.StatusOK && strings.Contains(string(res.Body), "not implemented yet") {
			t.Skip("comments are still a stub")
		}
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		m := res.Map(t)
		require.Equal(t, "in_progress", m["status"])
		require.NotNil(t, m["comment"], "%s", res.Body)
		require.NotEmpty(t, m["comment"].(map[string]any)["id"])
		issWantValidation(t, issPatch(t, h, id, map[string]any{"comment": "  "}), "comment")
	})

	t.Run("LabelsAndBlockersViaPatch", func(t *testing.T) {
		l1 := h.Do("POST", "/api/companies/"+company+"/labels", map[string]any{"name": "bug", "color": "#ff0000"}).Map(t)
		l2 := h.Do("POST", "/api/companies/"+company+"/labels", map[string]any{"name": "Area", "color": "#00FF00"}).Map(t)
		blocker := issCreate(t, h, company, map[string]any{"title": "First"})
		iss := issCreate(t, h, company, map[string]any{"title": "Second", "labelIds": []string{l1["id"].(string)}})
		id := iss["id"].(string)
		require.Equal(t, []any{l1["id"]}, iss["labelIds"])
		res := issPatch(t, h, id, map[string]any{"labelIds": []string{l1["id"].(string), l2["id"].(string)},
			"blockedByIssueIds": []string{blocker["identifier"].(string)}})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		m := res.Map(t)
		require.ElementsMatch(t, []any{l1["id"], l2["id"]}, m["labelIds"])
		require.Equal(t, "Area", m["labels"].([]any)[0].(map[string]any)["name"], "labels sort by name")
		require.Len(t, m["blockedBy"], 1)
		require.Contains(t, m["changes"], "labelIds")
		require.Contains(t, m["changes"], "blockedByIssueIds")
		d := issActivity(t, h, company, id, "issue.relations.updated")
		require.Equal(t, []any{blocker["id"]}, d["added"])
		res = issPatch(t, h, id, map[string]any{"labelIds": []string{}, "blockedByIssueIds": []string{}})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, []any{}, res.Map(t)["labelIds"])
		require.Equal(t, []any{}, res.Map(t)["blockedBy"])
	})
}

func TestIssueMethods(t *testing.T) {
	t.Parallel()
	h := issStart(t)
	company := h.CreateCompany("Methods Inc")
	other := h.CreateCompany("Other Inc")
	worker := h.CreateAgent(company, "Worker", "engineer")
	system := &extensionv1.Actor{Type: "system"}

	out, e := issCall(t, h, "issues.create", company, system, map[string]any{"title": "From a routine",
		"originKind": "routine_execution", "originId": "routine-1", "assigneeAgentId": worker.ID})
	require.Nil(t, e)
	var created map[string]any
	require.NoError(t, json.Unmarshal(out, &created))
	require.Equal(t, "todo", created["status"])
	require.Equal(t, true, created["created"])
	require.Equal(t, "routine_execution", created["originKind"])
	id := created["id"].(string)

	_, e = issCall(t, h, "issues.create", company, system, map[string]any{})
	require.NotNil(t, e)
	require.EqualValues(t, http.StatusBadRequest, e.Status)

	out, e = issCall(t, h, "issues.get", company, system, map[string]any{"identifier": strings.ToLower(created["identifier"].(string))})
	require.Nil(t, e)
	require.Contains(t, string(out), id)
	_, e = issCall(t, h, "issues.get", other, system, map[string]any{"id": id})
	require.NotNil(t, e)
	require.EqualValues(t, http.StatusNotFound, e.Status)

	out, e = issCall(t, h, "issues.update", company, issBoard, map[string]any{"id": id, "status": "in_progress", "priority": "low"})
	require.Nil(t, e, "%v", e)
	var upd map[string]any
	require.NoError(t, json.Unmarshal(out, &upd))
	require.Equal(t, "in_progress", upd["status"])
	_, e = issCall(t, h, "issues.update", company, issBoard, map[string]any{"id": id, "status": "blocked"})
	require.NotNil(t, e, "blocked needs blockers, a pending approval or an unblockDescriptor")
	require.EqualValues(t, http.StatusUnprocessableEntity, e.Status)

	issCreate(t, h, company, map[string]any{"title": "Manual one"})
	out, e = issCall(t, h, "issues.list", company, issBoard, map[string]any{"includeRoutineExecutions": false, "limit": 10})
	require.Nil(t, e)
	var list []map[string]any
	require.NoError(t, json.Unmarshal(out, &list))
	require.Len(t, list, 1)
	require.Equal(t, "Manual one", list[0]["title"])
	out, e = issCall(t, h, "issues.list", "", issBoard, map[string]any{"companyId": company, "status": []string{"in_progress"}})
	require.Nil(t, e)
	require.NoError(t, json.Unmarshal(out, &list))
	require.Len(t, list, 1)
	_, e = issCall(t, h, "issues.list", company, issBoard, map[string]any{"limit": 0})
	require.NotNil(t, e)
	require.EqualValues(t, http.StatusBadRequest, e.Status)
	_, e = issCall(t, h, "issues.list", company, &extensionv1.Actor{Type: "agent", AgentId: worker.ID, CompanyId: company},
		map[string]any{"companyId": other})
	require.NotNil(t, e)

	blocker := issCreate(t, h, company, map[string]any{"title": "Blocker"})
	blocked := issCreate(t, h, company, map[string]any{"title": "Blocked", "blockedByIssueIds": []string{blocker["id"].(string)}})
	out, e = issCall(t, h, "blockers.resolve", company, system, map[string]any{"issueId": blocked["id"]})
	require.Nil(t, e)
	require.JSONEq(t, fmt.Sprintf(`{"resolved":false,"unresolvedBlockerIssueIds":[%q]}`, blocker["id"]), string(out))

	root := issCreate(t, h, company, map[string]any{"title": "Tree root", "status": "todo"})
	kid := issCreate(t, h, company, map[string]any{"title": "Kid", "parentId": root["id"], "status": "todo"})
	grandkid := issCreate(t, h, company, map[string]any{"title": "Grandkid", "parentId": kid["id"], "status": "in_progress"})
	doneKid := issCreate(t, h, company, map[string]any{"title": "Done kid", "parentId": root["id"], "status": "done"})
	out, e = issCall(t, h, "issues.cancelTree", company, issBoard, map[string]any{"issueId": root["id"]})
	require.Nil(t, e)
	var tree struct {
		IssueIDs []string `json:"issueIds"`
	}
	require.NoError(t, json.Unmarshal(out, &tree))
	require.ElementsMatch(t, []string{root["id"].(string), kid["id"].(string), grandkid["id"].(string)}, tree.IssueIDs)
	require.Equal(t, "cancelled", issGet(t, h, grandkid["id"].(string))["status"])
	require.NotNil(t, issGet(t, h, grandkid["id"].(string))["cancelledAt"])
	require.Equal(t, "done", issGet(t, h, doneKid["id"].(string))["status"])

	out, e = issCall(t, h, "targets.read", company, system, map[string]any{"issueIds": []string{kid["id"].(string), root["id"].(string)}})
	require.Nil(t, e)
	var snaps []map[string]any
	require.NoError(t, json.Unmarshal(out, &snaps))
	require.Len(t, snaps, 2)
	require.Equal(t, kid["id"], snaps[0]["id"])
	require.Equal(t, "cancelled", snaps[0]["status"])
	require.Contains(t, snaps[0], "updatedAt")
	require.Contains(t, snaps[0], "assigneeAgentId")
	require.Contains(t, snaps[0], "assigneeUserId")
	// The root has two children (kid, done kid) and three descendants (plus the grandkid).
	require.EqualValues(t, 1, snaps[0]["childCount"])
	require.EqualValues(t, 1, snaps[0]["descendantCount"])
	require.EqualValues(t, 2, snaps[1]["childCount"])
	require.EqualValues(t, 3, snaps[1]["descendantCount"])
	foreign := issCreate(t, h, other, map[string]any{"title": "Foreign"})
	_, e = issCall(t, h, "targets.read", company, system, map[string]any{"issueIds": []string{kid["id"].(string), foreign["id"].(string)}})
	require.NotNil(t, e)
	require.EqualValues(t, http.StatusUnprocessableEntity, e.Status)
	require.Equal(t, "All referenced issues must exist in the company", e.Message)
}

func TestIssueList(t *testing.T) {
	t.Parallel()
	h := issStart(t)
	company := h.CreateCompany("Listing Co")
	other := h.CreateCompany("Noise Co")
	worker := h.CreateAgent(company, "Worker", "engineer")
	projectID, _ := issSeedProject(t, h, company, "P")
	goalID := issSeedGoal(t, h, company, "G")
	label := h.Do("POST", "/api/companies/"+company+"/labels", map[string]any{"name": "frontend", "color": "#123456"}).Map(t)

	// Created in order, so the default sort (updatedAt desc) lists them newest first.
	a := issCreate(t, h, company, map[string]any{"title": "Fix the login flow", "priority": "low"})
	b := issCreate(t, h, company, map[string]any{"title": "Write release notes", "assigneeAgentId": worker.ID, "priority": "critical",
		"projectId": projectID, "labelIds": []string{label["id"].(string)}})
	c := issCreate(t, h, company, map[string]any{"title": "Routine sweep", "originKind": "routine_execution", "originId": "r-1"})
	d := issCreate(t, h, company, map[string]any{"title": "Plugin sync", "originKind": "plugin:acme.sync", "originId": "ext-9",
		"parentId": a["id"], "goalId": goalID, "assigneeUserId": "user-1", "priority": "high"})
	issCreate(t, h, other, map[string]any{"title": "Fix the login flow elsewhere"})
	ids := func(list []map[string]any) []string { return issIdentifiers(list) }
	ident := func(m map[string]any) string { return m["identifier"].(string) }

	t.Run("DefaultOrderAndShape", func(t *testing.T) {
		list := issList(t, h, company, "")
		require.Equal(t, []string{ident(d), ident(c), ident(b), ident(a)}, ids(list))
		require.Equal(t, []any{label["id"]}, list[2]["labelIds"])
		require.NotContains(t, list[0], "blockedBy", "lists skip relations")
	})

	t.Run("Paging", func(t *testing.T) {
		require.Equal(t, []string{ident(c), ident(b)}, ids(issList(t, h, company, "limit=2&offset=1")))
		require.Empty(t, issList(t, h, company, "offset=10"))
		require.Len(t, issList(t, h, company, "limit=500"), 4)
		for _, q := range []string{"limit=0", "limit=501", "limit=x", "offset=-1"} {
			res := h.Do("GET", "/api/companies/"+company+"/issues?"+q, nil)
			issWantErr(t, res, http.StatusBadRequest, "Validation error")
		}
	})

	t.Run("Filters", func(t *testing.T) {
		cases := []struct {
			query string
			want  []map[string]any
		}{
			{"status=todo", []map[string]any{d, b}},
			{"status=backlog,todo", []map[string]any{d, c, b, a}},
			{"assigneeAgentId=" + worker.ID, []map[string]any{b}},
			{"assigneeAgentId=null", []map[string]any{d, c, a}},
			{"assigneeUserId=user-1", []map[string]any{d}},
			{"projectId=" + projectID, []map[string]any{b}},
			{"parentId=" + a["id"].(string), []map[string]any{d}},
			{"parentIssueId=" + a["id"].(string), []map[string]any{d}},
			{"parentId=null", []map[string]any{c, b, a}},
			{"goalId=" + goalID, []map[string]any{d}},
			{"labelId=" + label["id"].(string), []map[string]any{b}},
			{"originKind=routine_execution", []map[string]any{c}},
			{"originKindPrefix=plugin:", []map[string]any{d}},
			{"originKindPrefix=plugin%25", nil},
			{"originId=ext-9", []map[string]any{d}},
			{"includeRoutineExecutions=false", []map[string]any{d, b, a}},
			{"excludeRoutineExecutions=true", []map[string]any{d, b, a}},
			{"includeRoutineExecutions=true", []map[string]any{d, c, b, a}},
			{"q=login", []map[string]any{a}},
			{"q=LOG", []map[string]any{a}},
			{"q=release+notes", []map[string]any{b}},
			{"q=" + strings.ToLower(ident(c)), []map[string]any{c}},
			{"q=nothing-matches-this", nil},
			{"sortField=priority", []map[string]any{b, d, c, a}},
			{"sortField=priority&sortDir=asc", []map[string]any{a, c, d, b}},
			{"sortField=createdAt&sortDir=asc", []map[string]any{a, b, c, d}},
			{"sortField=status&status=todo", []map[string]any{d, b}},
			{"status=todo&assigneeAgentId=null&includeRoutineExecutions=false", []map[string]any{d}},
		}
		for _, tc := range cases {
			want := make([]string, len(tc.want))
			for i, m := range tc.want {
				want[i] = ident(m)
			}
			require.Equal(t, want, ids(issList(t, h, company, tc.query)), tc.query)
			res := h.Do("GET", "/api/companies/"+company+"/issues/count?"+tc.query, nil)
			require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
			require.EqualValues(t, len(want), res.Map(t)["count"], tc.query)
		}
	})

	t.Run("BadFilters", func(t *testing.T) {
		for q, path := range map[string]string{
			"status=open": "status", "assigneeAgentId=bob": "assigneeAgentId", "projectId=1": "projectId",
			"parentId=x": "parentId", "goalId=x": "goalId", "labelId=x": "labelId", "sortField=title": "sortField",
			"sortDir=up": "sortDir", "includeRoutineExecutions=maybe": "includeRoutineExecutions",
			"q=" + strings.Repeat("a", 201): "q", "limit=0": "limit",
		} {
			issWantValidation(t, h.Do("GET", "/api/companies/"+company+"/issues?"+q, nil), path)
			issWantValidation(t, h.Do("GET", "/api/companies/"+company+"/issues/count?"+q, nil), path)
		}
	})

	t.Run("UpdatedMovesToTop", func(t *testing.T) {
		res := issPatch(t, h, a["id"].(string), map[string]any{"description": "touched"})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, ident(a), ids(issList(t, h, company, "limit=1"))[0])
	})
}

func TestIssueTransitionsHTTP(t *testing.T) {
	t.Parallel()
	h := issStart(t)
	company := h.CreateCompany("Transit Co")
	statuses := []string{"backlog", "todo", "in_progress", "in_review", "blocked", "done", "cancelled"}
	// Like the reference product, a move between any two statuses is accepted when the
	// target's precondition holds: here every issue has an assignee, and a move to blocked
	// carries an unblockDescriptor.
	for _, from := range statuses {
		for _, to := range statuses {
			iss := issCreate(t, h, company, map[string]any{"title": from + " to " + to, "status": from, "assigneeUserId": "user-7"})
			body := map[string]any{"status": to}
			if to == "blocked" && from != "blocked" {
				body["unblockDescriptor"] = map[string]any{"owner": "board", "action": "decide"}
			}
			res := issPatch(t, h, iss["id"].(string), body)
			require.Equal(t, http.StatusOK, res.Status, "%s → %s: %s", from, to, res.Body)
			m := res.Map(t)
			require.Equal(t, to, m["status"])
			if from == to {
				require.NotContains(t, m["changes"], "status")
				continue
			}
			require.Equal(t, map[string]any{"from": from, "to": to}, m["changes"].(map[string]any)["status"])
			switch to {
			case "in_progress":
				require.NotNil(t, m["startedAt"], "%s → %s", from, to)
			case "done":
				require.NotNil(t, m["completedAt"])
			case "cancelled":
				require.NotNil(t, m["cancelledAt"])
			}
			require.Equal(t, to, issActivity(t, h, company, iss["id"].(string), "issue.updated")["changes"].(map[string]any)["status"].(map[string]any)["to"])
		}
	}

	t.Run("InProgressNeedsAnAssignee", func(t *testing.T) {
		id := issCreate(t, h, company, map[string]any{"title": "Nobody's", "status": "todo"})["id"].(string)
		issWantErr(t, issPatch(t, h, id, map[string]any{"status": "in_progress"}), http.StatusUnprocessableEntity,
			"in_progress issues require an assignee")
		require.Equal(t, "todo", issGet(t, h, id)["status"])
		res := issPatch(t, h, id, map[string]any{"status": "in_progress", "assigneeUserId": "user-7"})
		require.Equal(t, http.StatusOK, res.Status, "an assignee in the same patch is enough: %s", res.Body)
		require.NotNil(t, res.Map(t)["startedAt"])
	})

	t.Run("BlockedNeedsAReason", func(t *testing.T) {
		const msg = "Entering blocked requires unresolved blockers, a pending interaction/approval, or unblockDescriptor"
		id := issCreate(t, h, company, map[string]any{"title": "Stuck", "status": "todo"})["id"].(string)
		issWantErr(t, issPatch(t, h, id, map[string]any{"status": "blocked"}), http.StatusUnprocessableEntity, msg)
		require.Equal(t, "todo", issGet(t, h, id)["status"])

		// An unresolved blocker given in the same patch.
		blocker := issCreate(t, h, company, map[string]any{"title": "Blocker", "status": "todo"})["id"].(string)
		res := issPatch(t, h, id, map[string]any{"status": "blocked", "blockedByIssueIds": []string{blocker}})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, http.StatusOK, issPatch(t, h, id, map[string]any{"status": "todo"}).Status)
		// A done blocker does not count.
		require.Equal(t, http.StatusOK, issPatch(t, h, blocker, map[string]any{"status": "done"}).Status)
		issWantErr(t, issPatch(t, h, id, map[string]any{"status": "blocked"}), http.StatusUnprocessableEntity, msg)

		// A pending approval linked to the issue.
		waiting := issCreate(t, h, company, map[string]any{"title": "Awaiting approval", "status": "todo"})
		res = h.Do("POST", "/api/companies/"+company+"/approvals", map[string]any{"type": "request_board_approval",
			"payload": map[string]any{"summary": "ok?"}, "issueIds": []string{waiting["id"].(string)}})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		res = issPatch(t, h, waiting["id"].(string), map[string]any{"status": "blocked"})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	})

	t.Run("ReopenKeepsStamps", func(t *testing.T) {
		id := issCreate(t, h, company, map[string]any{"title": "Reopened", "status": "todo"})["id"].(string)
		done := issPatch(t, h, id, map[string]any{"status": "done"}).Map(t)
		require.NotNil(t, done["completedAt"])
		res := issPatch(t, h, id, map[string]any{"status": "todo"})
		require.Equal(t, http.StatusOK, res.Status, "done → todo is accepted: %s", res.Body)
		require.Equal(t, done["completedAt"], res.Map(t)["completedAt"])
		cancelled := issPatch(t, h, id, map[string]any{"status": "cancelled"}).Map(t)
		require.NotNil(t, cancelled["cancelledAt"])
	})

	t.Run("StartedAtKeepsFirstEntry", func(t *testing.T) {
		iss := issCreate(t, h, company, map[string]any{"title": "Loop", "status": "todo", "assigneeUserId": "user-7"})
		id := iss["id"].(string)
		first := issPatch(t, h, id, map[string]any{"status": "in_progress"}).Map(t)["startedAt"]
		require.NotNil(t, first)
		require.Equal(t, http.StatusOK, issPatch(t, h, id, map[string]any{"status": "in_review"}).Status)
		again := issPatch(t, h, id, map[string]any{"status": "in_progress"}).Map(t)
		require.Equal(t, first, again["startedAt"])
		require.NotContains(t, again["changes"], "startedAt")
		done := issPatch(t, h, id, map[string]any{"status": "done"}).Map(t)
		require.NotNil(t, done["completedAt"])
		require.Equal(t, first, done["startedAt"])
	})
}

// TestIssueMethodsHiddenAndCommentGet checks a plugin's operation issue: created hidden
// through issues.create, it is absent from the issue list and count (every filter and sort
// the board uses), the issues.list method, search and the dashboard counts, but read and
// commented by id; comments.get reads one comment of the call's company only.
func TestIssueMethodsHiddenAndCommentGet(t *testing.T) {
	t.Parallel()
	h := issStart(t)
	company := h.CreateCompany("Hidden Inc")
	other := h.CreateCompany("Other Hidden Inc")
	system := &extensionv1.Actor{Type: "system"}
	visible := issCreate(t, h, company, map[string]any{"title": "Visible zephyr task", "status": "todo"})

	out, e := issCall(t, h, "issues.create", company, system, map[string]any{"title": "Wiki query zephyr", "status": "todo",
		"originKind": "plugin:keelhq.llm_wiki:operation:query", "originId": "wiki:default:operation:1", "hidden": true,
		"description": "zephyr"})
	require.Nil(t, e, "%v", e)
	var created map[string]any
	require.NoError(t, json.Unmarshal(out, &created))
	require.NotNil(t, created["hiddenAt"])
	id := created["id"].(string)

	base := "/api/companies/" + company + "/issues"
	for _, q := range []string{"", "?status=todo", "?q=zephyr", "?q=" + created["identifier"].(string),
		"?originKind=plugin:keelhq.llm_wiki:operation:query", "?originKindPrefix=plugin:", "?originId=wiki:default:operation:1",
		"?assigneeAgentId=null", "?parentId=null", "?sortField=createdAt", "?sortField=priority", "?sortField=status&sortDir=asc"} {
		res := h.Do("GET", base+q, nil)
		require.Equal(t, http.StatusOK, res.Status, "%s: %s", q, res.Body)
		require.NotContains(t, string(res.Body), id, "GET issues%s lists the hidden issue", q)
		var list []map[string]any
		res.JSON(t, &list)
		var n map[string]int
		h.Do("GET", base+"/count"+q, nil).JSON(t, &n)
		require.Equal(t, len(list), n["count"], "GET issues/count%s counts the hidden issue", q)
	}
	require.Contains(t, string(h.Do("GET", base, nil).Body), visible["id"].(string))
	out, e = issCall(t, h, "issues.list", company, system, map[string]any{"originKindPrefix": "plugin:"})
	require.Nil(t, e, "%v", e)
	require.JSONEq(t, "[]", string(out), "issues.list leaves hidden issues out for every caller")

	res := h.Do("GET", "/api/companies/"+company+"/search?q=zephyr", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.NotContains(t, string(res.Body), id, "search leaves the hidden issue out")
	require.Contains(t, string(res.Body), visible["id"].(string))

	out, e = issCall(t, h, "dashboardCounts", company, system, map[string]any{})
	require.Nil(t, e, "%v", e)
	var counts map[string]any
	require.NoError(t, json.Unmarshal(out, &counts))
	require.EqualValues(t, 1, counts["open"], "the dashboard counts the visible issue only")

	got := h.Do("GET", "/api/issues/"+id, nil)
	require.Equal(t, http.StatusOK, got.Status, "a hidden issue is read by id")
	require.Equal(t, id, got.Map(t)["id"])

	res = h.Do("POST", "/api/issues/"+id+"/comments", map[string]any{"body": "The answer."})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	commentID := res.Map(t)["id"].(string)
	out, e = issCall(t, h, "comments.get", company, system, map[string]any{"issueId": id, "commentId": commentID})
	require.Nil(t, e, "%v", e)
	require.Contains(t, string(out), "The answer.")
	_, e = issCall(t, h, "comments.get", other, system, map[string]any{"issueId": id, "commentId": commentID})
	require.NotNil(t, e)
	require.EqualValues(t, http.StatusNotFound, e.Status)
	_, e = issCall(t, h, "comments.get", company, system, map[string]any{"issueId": id, "commentId": "nope"})
	require.NotNil(t, e)
	require.EqualValues(t, http.StatusNotFound, e.Status)
}

// TestIssueCreateConcurrentNumbers creates issues concurrently in one company (their number
// reservations coalesce into shared host calls) and in a neighbour: every issue has its own
// identifier, the numbers are exactly 1..n with no gap, and the next create goes on from n.
func TestIssueCreateConcurrentNumbers(t *testing.T) {
	t.Parallel()
	h := issStart(t)
	company := h.CreateCompany("Numbering Co")
	neighbour := h.CreateCompany("Neighbour Numbering Co")
	prefix := h.Do("GET", "/api/companies/"+company, nil).Map(t)["issuePrefix"].(string)
	const workers, each = 16, 8
	var mu sync.Mutex
	seen := map[string]bool{}
	numbers := map[int64]bool{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				target := company
				if w%4 == 3 {
					target = neighbour
				}
				res := h.Do("POST", "/api/companies/"+target+"/issues", map[string]any{"title": fmt.Sprintf("Concurrent %d/%d", w, i)})
				if !assert.Equal(t, http.StatusCreated, res.Status, "%s", res.Body) {
					return
				}
				if target != company {
					continue
				}
				var iss struct {
					Identifier  string `json:"identifier"`
					IssueNumber int64  `json:"issueNumber"`
				}
				if !assert.NoError(t, json.Unmarshal(res.Body, &iss)) {
					return
				}
				mu.Lock()
				assert.False(t, seen[iss.Identifier], "identifier %s handed out twice", iss.Identifier)
				assert.Equal(t, fmt.Sprintf("%s-%d", prefix, iss.IssueNumber), iss.Identifier)
				seen[iss.Identifier], numbers[iss.IssueNumber] = true, true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	n := (workers - workers/4) * each
	require.Len(t, numbers, n)
	for k := int64(1); k <= int64(n); k++ {
		require.True(t, numbers[k], "number %d missing", k)
	}
	require.Len(t, issList(t, h, company, "limit=500"), n)
	require.EqualValues(t, n, h.Do("GET", "/api/companies/"+company, nil).Map(t)["issueCounter"])
	next := issCreate(t, h, company, map[string]any{"title": "After the rush"})
	require.Equal(t, fmt.Sprintf("%s-%d", prefix, n+1), next["identifier"])
	require.EqualValues(t, workers/4*each, h.Do("GET", "/api/companies/"+neighbour, nil).Map(t)["issueCounter"])
}
