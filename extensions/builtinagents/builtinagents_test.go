package builtinagents_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/kernel"
	"github.com/keelhq/keel/sdktest"
)

func TestBuiltInAgents(t *testing.T) {
	t.Parallel()
	h := startHost(t, true)

	t.Run("ListsTheRegistryRedacted", func(t *testing.T) {
		t.Parallel()
		co := company(t, h, "Registry Co", false)
		res := h.Do("GET", path(co, ""), nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		var list []*builtIn
		res.JSON(t, &list)
		keys := []string{}
		for _, b := range list {
			keys = append(keys, b.Key)
			require.Equal(t, "not_provisioned", b.State, b.Key)
			require.False(t, b.Configured, b.Key)
		}
		require.Equal(t, []string{"briefs", "learning", "reflection-coach", "summarizer"}, keys)
		require.Equal(t, "beta_local", list[0].DefaultAdapterType)
		require.Equal(t, "alpha_local", list[3].DefaultAdapterType)

		provision(t, h, co, "summarizer", map[string]any{"adapterType": "process",
			"adapterConfig": map[string]any{"command": "/usr/bin/secret-tool", "env": map[string]any{"TOKEN": "hunter22"}}}, http.StatusOK)
		res = h.Do("GET", path(co, ""), nil)
		require.Equal(t, http.StatusOK, res.Status)
		require.NotContains(t, string(res.Body), "hunter22")
		require.NotContains(t, string(res.Body), "secret-tool")
		res.JSON(t, &list)
		require.Equal(t, "ready", list[3].State)
		require.Equal(t, map[string]any{"command": "***REDACTED***", "env": "***REDACTED***"}, list[3].Agent.AdapterConfig)
	})

	t.Run("UnknownKeyIs404", func(t *testing.T) {
		t.Parallel()
		co := company(t, h, "Unknown Co", false)
		res := h.Do("GET", path(co, "/nope/status"), nil)
		require.Equal(t, http.StatusNotFound, res.Status)
		require.Equal(t, "Built-in agent not found", res.Map(t)["error"])
	})

	t.Run("ProvisionDirectly", func(t *testing.T) {
		t.Parallel()
		co := company(t, h, "Direct Co", false)
		// No adapter details: the default adapter without a model needs setup.
		b := provision(t, h, co, "summarizer", nil, http.StatusOK)
		require.Equal(t, "needs_setup", b.State)
		require.False(t, b.Configured)
		require.Equal(t, "alpha_local", b.Agent.AdapterType)
		require.Equal(t, []string{"model"}, b.MissingAdapterFields)
		require.Zero(t, b.Agent.BudgetMonthlyCents)
		require.Equal(t, "summarizer", b.Agent.Marker["key"])
		require.Equal(t, []any{"status_cards"}, b.Agent.Marker["featureKeys"])
		require.Equal(t, "Summarizer", b.Agent.Name)
		require.Equal(t, []string{"status-card-summary"}, b.Agent.DesiredSkills)
		require.Nil(t, b.ApprovalID)

		// resolve answers features that need the built-in; require is the 412.
		out, res := invoke(t, h, "kernel", "builtinagents.resolve", co, map[string]any{"key": "summarizer"})
		require.Nil(t, res.Error)
		var r map[string]any
		require.NoError(t, json.Unmarshal(out, &r))
		require.Equal(t, map[string]any{"key": "summarizer", "agentId": *b.AgentID, "state": "needs_setup", "paused": false,
			"configured": false}, r)
		_, res = invoke(t, h, "kernel", "builtinagents.resolve", co, map[string]any{"key": "summarizer", "require": true})
		require.NotNil(t, res.Error)
		require.EqualValues(t, http.StatusPreconditionFailed, res.Error.Status)
		require.Equal(t, "built_in_agent_not_configured", res.Error.Code)

		// First-time configuration applies directly.
		b = provision(t, h, co, "summarizer", map[string]any{"adapterConfig": map[string]any{"model": "m-1"}}, http.StatusOK)
		require.Equal(t, "ready", b.State)
		require.True(t, b.Configured)
		out, res = invoke(t, h, "kernel", "builtinagents.resolve", co, map[string]any{"key": "summarizer", "require": true})
		require.Nil(t, res.Error)
		require.NoError(t, json.Unmarshal(out, &r))
		require.Equal(t, true, r["configured"])

		// The same adapter again changes nothing; a different one is a reconfiguration.
		provision(t, h, co, "summarizer", map[string]any{"adapterType": "alpha_local", "adapterConfig": map[string]any{"model": "m-1"}}, http.StatusOK)
		for _, body := range []map[string]any{
			{"adapterType": "process", "adapterConfig": map[string]any{"command": "/bin/true"}},
			{"adapterConfig": map[string]any{"model": "m-2"}},
		} {
			res := h.Do("POST", path(co, "/summarizer/provision"), body)
			require.Equal(t, http.StatusConflict, res.Status, "%s", res.Body)
			m := res.Map(t)
			require.Equal(t, "built_in_agent_reconfiguration_requires_approval", m["error"])
			require.Equal(t, "built_in_agent_reconfiguration_requires_approval", m["code"])
		}
	})

	t.Run("ProvisionValidation", func(t *testing.T) {
		t.Parallel()
		co := company(t, h, "Validation Co", false)
		for _, body := range []map[string]any{
			{"adapterType": "http"},
			{"adapterConfig": []any{1}},
			{"budgetMonthlyCents": -1},
		} {
			res := h.Do("POST", path(co, "/briefs/provision"), body)
			require.Equal(t, http.StatusBadRequest, res.Status, "%v: %s", body, res.Body)
		}
		require.Equal(t, "not_provisioned", status(t, h, co, "briefs").State)
	})

	t.Run("ProvisionUnderBoardApproval", func(t *testing.T) {
		t.Parallel()
		co := company(t, h, "Approval Co", true)
		b := provision(t, h, co, "briefs", nil, http.StatusAccepted)
		require.Equal(t, "pending_approval", b.State)
		require.NotNil(t, b.ApprovalID)
		approval := ok(t, h.Do("GET", "/api/approvals/"+*b.ApprovalID, nil), http.StatusOK)
		require.Equal(t, "hire_agent", approval["type"])
		require.Equal(t, "pending", approval["status"])
		require.Equal(t, *b.AgentID, approval["payload"].(map[string]any)["agentId"])

		// Adapter details while the approval is pending are refused; none repeats the 202.
		res := h.Do("POST", path(co, "/briefs/provision"), map[string]any{"adapterConfig": map[string]any{"model": "m"}})
		require.Equal(t, http.StatusConflict, res.Status, "%s", res.Body)
		require.Equal(t, "built_in_agent_pending_approval", res.Map(t)["error"])
		provision(t, h, co, "briefs", nil, http.StatusAccepted)

		ok(t, h.Do("POST", "/api/approvals/"+*b.ApprovalID+"/approve", map[string]any{}), http.StatusOK)
		b = status(t, h, co, "briefs")
		require.Equal(t, "needs_setup", b.State)
		require.Equal(t, "beta_local", b.Agent.AdapterType)

		// First-time configuration applies directly under board approval: no new approval.
		b = provision(t, h, co, "briefs", map[string]any{"adapterConfig": map[string]any{"model": "b-1"}}, http.StatusOK)
		require.Equal(t, "ready", b.State)
		var approvals []map[string]any
		h.Do("GET", "/api/companies/"+co+"/approvals", nil).JSON(t, &approvals)
		require.Len(t, approvals, 1)
	})

	t.Run("ApprovedReflectionCoachIsPaused", func(t *testing.T) {
		t.Parallel()
		co := company(t, h, "Approved Coach Co", true)
		b := provision(t, h, co, "reflection-coach", processAdapter, http.StatusAccepted)
		rtID := *b.Resources.Routines[0].RoutineID
		require.Nil(t, routine(t, h, rtID)["assigneeAgentId"], "a pending agent cannot be a routine's assignee yet")
		ok(t, h.Do("POST", "/api/approvals/"+*b.ApprovalID+"/approve", map[string]any{}), http.StatusOK)
		waitState(t, h, co, "reflection-coach", "paused")
		sdktest.WaitFor(t, 60*time.Second, func() bool { return routine(t, h, rtID)["assigneeAgentId"] == *b.AgentID },
			"the routine to get the approved agent")
		rt := routine(t, h, rtID)
		require.Equal(t, "paused", rt["status"])
		require.False(t, scheduleEnabled(t, rt))
	})

	t.Run("RejectedApprovalLeavesItNotProvisioned", func(t *testing.T) {
		t.Parallel()
		co := company(t, h, "Rejected Co", true)
		b := provision(t, h, co, "learning", processAdapter, http.StatusAccepted)
		ok(t, h.Do("POST", "/api/approvals/"+*b.ApprovalID+"/reject", map[string]any{}), http.StatusOK)
		waitState(t, h, co, "learning", "not_provisioned")
		require.Equal(t, "terminated", agentRecord(t, h, *b.AgentID)["status"])
		// Provisioning again asks again.
		b2 := provision(t, h, co, "learning", processAdapter, http.StatusAccepted)
		require.NotEqual(t, *b.AgentID, *b2.AgentID)
	})

	t.Run("ReflectionCoachStartsPaused", func(t *testing.T) {
		t.Parallel()
		co := company(t, h, "Coach Co", false)
		b := provision(t, h, co, "reflection-coach", processAdapter, http.StatusOK)
		require.Equal(t, "paused", b.State)
		require.True(t, b.Paused)
		require.True(t, b.Configured)
		require.Equal(t, "paused", b.Agent.Status)
		require.Zero(t, b.Agent.BudgetMonthlyCents)
		require.Equal(t, []string{"reflection-coach"}, b.Agent.DesiredSkills)
		out, res := invoke(t, h, "kernel", "builtinagents.resolve", co, map[string]any{"key": "reflection-coach", "require": true})
		require.Nil(t, res.Error)
		var r map[string]any
		require.NoError(t, json.Unmarshal(out, &r))
		require.Equal(t, "built_in_agent_paused", r["warning"])

		// Review-only permission keys, not the direct-write ones.
		perms := agentPermissions(t, h, co, *b.AgentID)
		require.True(t, perms["agents:suggest-changes"])
		require.True(t, perms["skills:suggest-changes"])
		require.False(t, perms["agents:configure"])
		require.False(t, perms["skills:create"])

		// The weekly routine starts disabled.
		require.Len(t, b.Resources.Routines, 1)
		require.NotNil(t, b.Resources.Routines[0].TriggerID)
		rtID := *b.Resources.Routines[0].RoutineID
		rt := routine(t, h, rtID)
		require.Equal(t, "paused", rt["status"])
		require.False(t, scheduleEnabled(t, rt))
		require.Equal(t, "Recent agent reflection", rt["title"])

		// Enable resumes the agent and activates routine and schedule; disable pauses both.
		en := ok(t, h.Do("POST", path(co, "/reflection-coach/routines/recent-agent-reflection/enable"), nil), http.StatusOK)
		require.Equal(t, "ready", en["builtIn"].(map[string]any)["state"])
		rt = routine(t, h, rtID)
		require.Equal(t, "active", rt["status"])
		require.True(t, scheduleEnabled(t, rt))
		require.Equal(t, *b.AgentID, rt["assigneeAgentId"])
		ok(t, h.Do("POST", path(co, "/reflection-coach/routines/recent-agent-reflection/disable"), nil), http.StatusOK)
		rt = routine(t, h, rtID)
		require.Equal(t, "paused", rt["status"])
		require.False(t, scheduleEnabled(t, rt))

		// One run outside the schedule.
		run := ok(t, h.Do("POST", path(co, "/reflection-coach/routines/recent-agent-reflection/run"), nil), http.StatusAccepted)
		require.Equal(t, rtID, run["routineId"])

		res2 := h.Do("POST", path(co, "/reflection-coach/routines/nope/enable"), nil)
		require.Equal(t, http.StatusNotFound, res2.Status)
		require.Equal(t, "Routine not found", res2.Map(t)["error"])
	})

	t.Run("MarkerIsImmutable", func(t *testing.T) {
		t.Parallel()
		co := company(t, h, "Marker Co", false)
		b := provision(t, h, co, "summarizer", processAdapter, http.StatusOK)
		id := *b.AgentID
		for _, meta := range []any{
			map[string]any{"serviceBuiltInAgent": map[string]any{"key": "briefs", "featureKeys": []any{}}},
			map[string]any{"serviceBuiltInAgent": nil},
			nil,
		} {
			res := h.Do("PATCH", "/api/agents/"+id, map[string]any{"metadata": meta})
			require.Equal(t, http.StatusForbidden, res.Status, "%v: %s", meta, res.Body)
			require.Equal(t, "metadata.serviceBuiltInAgent is managed by the built-in agent service and cannot be changed", res.Map(t)["error"])
		}
		// Other metadata may change; the marker stays.
		rec := ok(t, h.Do("PATCH", "/api/agents/"+id, map[string]any{"metadata": map[string]any{"team": "ops"}}), http.StatusOK)
		meta := rec["metadata"].(map[string]any)
		require.Equal(t, "ops", meta["team"])
		require.Equal(t, "summarizer", meta["serviceBuiltInAgent"].(map[string]any)["key"])
		// Nobody creates or hires an agent carrying the marker.
		for _, route := range []string{"/agents", "/agent-hires"} {
			res := h.Do("POST", "/api/companies/"+co+route, map[string]any{"name": "Fake " + route, "metadata": map[string]any{
				"serviceBuiltInAgent": map[string]any{"key": "summarizer"}}})
			require.Equal(t, http.StatusForbidden, res.Status, "%s: %s", route, res.Body)
		}
		// Only the built-in agent service may call the agents owner's built-in methods.
		_, res := invoke(t, h, "kernel", "agents.updateBuiltIn", co, map[string]any{"agentId": id, "patch": map[string]any{"name": "X"}})
		require.NotNil(t, res.Error)
		require.EqualValues(t, http.StatusForbidden, res.Error.Status)
		_, res = invoke(t, h, "kernel", "agents.createBuiltIn", co, map[string]any{"name": "X",
			"metadata": map[string]any{"serviceBuiltInAgent": map[string]any{"key": "x"}}})
		require.NotNil(t, res.Error)
		require.EqualValues(t, http.StatusForbidden, res.Error.Status)
	})

	t.Run("ResetEachResource", func(t *testing.T) {
		t.Parallel()
		co := company(t, h, "Reset Co", false)
		b := provision(t, h, co, "reflection-coach", processAdapter, http.StatusOK)
		id, rtID := *b.AgentID, *b.Resources.Routines[0].RoutineID
		ok(t, h.Do("PATCH", "/api/agents/"+id, map[string]any{"name": "Renamed Coach", "role": "qa", "desiredSkills": []string{}}), http.StatusOK)
		ok(t, h.Do("PUT", path(co, "/reflection-coach/instructions"), map[string]any{"markdown": "# Mine"}), http.StatusOK)
		ok(t, h.Do("PATCH", "/api/routines/"+rtID, map[string]any{"title": "Changed title"}), http.StatusOK)
		b = status(t, h, co, "reflection-coach")
		require.True(t, b.Resources.Instructions.Modified)
		require.False(t, b.Resources.Skills[0].Attached)

		// agent: name and role come back; the adapter and the other pieces stay as they are.
		b = decode(t, h.Do("POST", path(co, "/reflection-coach/reset"), map[string]any{"resources": []string{"agent"}}), http.StatusOK)
		require.Equal(t, []string{"agent"}, b.Changes)
		rec := agentRecord(t, h, id)
		require.Equal(t, "Reflection Coach", rec["name"])
		require.Equal(t, "general", rec["role"])
		require.Equal(t, "process", rec["adapterType"])
		require.Equal(t, "/bin/true", rec["adapterConfig"].(map[string]any)["command"])
		require.True(t, b.Resources.Instructions.Modified)
		require.Equal(t, "Changed title", routine(t, h, rtID)["title"])

		b = decode(t, h.Do("POST", path(co, "/reflection-coach/reset"), map[string]any{"resources": []string{"skill"}}), http.StatusOK)
		require.True(t, b.Resources.Skills[0].Attached)
		require.Equal(t, []string{"reflection-coach"}, b.Agent.DesiredSkills)
		require.True(t, b.Resources.Instructions.Modified)

		b = decode(t, h.Do("POST", path(co, "/reflection-coach/reset"), map[string]any{"resources": []string{"instructions"}}), http.StatusOK)
		require.False(t, b.Resources.Instructions.Modified)
		require.Equal(t, "Changed title", routine(t, h, rtID)["title"])

		ok(t, h.Do("POST", path(co, "/reflection-coach/routines/recent-agent-reflection/enable"), nil), http.StatusOK)
		b = decode(t, h.Do("POST", path(co, "/reflection-coach/reset"), map[string]any{"resources": []string{"routine"}}), http.StatusOK)
		rt := routine(t, h, rtID)
		require.Equal(t, "Recent agent reflection", rt["title"])
		require.Equal(t, "paused", rt["status"])
		require.False(t, scheduleEnabled(t, rt))
		require.Equal(t, rtID, *b.Resources.Routines[0].RoutineID)

		// Everything at once, and a bad resource.
		b = decode(t, h.Do("POST", path(co, "/reflection-coach/reset"), nil), http.StatusOK)
		require.Equal(t, []string{"agent", "skill", "instructions", "routine"}, b.Changes)
		res := h.Do("POST", path(co, "/reflection-coach/reset"), map[string]any{"resources": []string{"budget"}})
		require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
		res = h.Do("POST", path(co, "/briefs/reset"), nil)
		require.Equal(t, http.StatusConflict, res.Status, "%s", res.Body)
	})

	t.Run("ReconcileTwiceChangesNothing", func(t *testing.T) {
		t.Parallel()
		co := company(t, h, "Reconcile Co", false)
		first := decode(t, h.Do("POST", path(co, "/reflection-coach/reconcile"), nil), http.StatusOK)
		require.Equal(t, []string{"agent", "instructions", "skill:reflection-coach", "routine:recent-agent-reflection"}, first.Changes)
		require.Equal(t, "needs_setup", first.State)
		before := agentRecord(t, h, *first.AgentID)
		second := decode(t, h.Do("POST", path(co, "/reflection-coach/reconcile"), nil), http.StatusOK)
		require.Empty(t, second.Changes)
		require.Equal(t, *first.AgentID, *second.AgentID)
		require.Equal(t, *first.Resources.Routines[0].RoutineID, *second.Resources.Routines[0].RoutineID)
		after := agentRecord(t, h, *first.AgentID)
		require.Equal(t, before["updatedAt"], after["updatedAt"])
		require.Equal(t, before["metadata"], after["metadata"])
		var routines []map[string]any
		h.Do("GET", "/api/companies/"+co+"/routines", nil).JSON(t, &routines)
		require.Len(t, routines, 1)

		// A removed piece comes back, the adapter is left alone.
		ok(t, h.Do("PATCH", "/api/agents/"+*first.AgentID, map[string]any{"desiredSkills": []string{}, "adapterType": "process",
			"adapterConfig": map[string]any{"command": "/bin/echo"}}), http.StatusOK)
		third := decode(t, h.Do("POST", path(co, "/reflection-coach/reconcile"), nil), http.StatusOK)
		require.Equal(t, []string{"agent"}, third.Changes)
		rec := agentRecord(t, h, *first.AgentID)
		require.Equal(t, "process", rec["adapterType"])
		require.Equal(t, []any{"reflection-coach"}, rec["desiredSkills"])
	})

	t.Run("AdoptsAMarkedAgentItLostTrackOf", func(t *testing.T) {
		t.Parallel()
		co := company(t, h, "Adopt Co", false)
		b := provision(t, h, co, "summarizer", processAdapter, http.StatusOK)
		conn, err := pgx.Connect(context.Background(), h.DatabaseURL)
		require.NoError(t, err)
		defer conn.Close(context.Background())
		_, err = conn.Exec(context.Background(), `DELETE FROM ext_builtinagents.builtin_agents WHERE company_id = $1`, co)
		require.NoError(t, err)
		again := provision(t, h, co, "summarizer", processAdapter, http.StatusOK)
		require.Equal(t, *b.AgentID, *again.AgentID)
		require.Equal(t, "ready", again.State)
	})

	t.Run("NameTaken", func(t *testing.T) {
		t.Parallel()
		co := company(t, h, "Taken Co", false)
		ok(t, h.Do("POST", "/api/companies/"+co+"/agents", map[string]any{"name": "Briefs Agent"}), http.StatusCreated)
		// The kernel gives a new agent a free name; a reset to the taken one is the agents
		// owner's 409, passed on as it is.
		b := provision(t, h, co, "briefs", nil, http.StatusOK)
		require.Equal(t, "Briefs Agent 2", b.Agent.Name)
		res := h.Do("POST", path(co, "/briefs/reset"), map[string]any{"resources": []string{"agent"}})
		require.Equal(t, http.StatusConflict, res.Status, "%s", res.Body)
		require.Equal(t, "Agent name already in use", res.Map(t)["error"])
	})

	t.Run("NeedsAgentsCreate", func(t *testing.T) {
		t.Parallel()
		co := company(t, h, "Perm Co", false)
		worker := h.CreateAgent(co, "Worker", "engineer")
		for _, op := range []string{"provision", "reconcile", "reset"} {
			res := h.Do("POST", path(co, "/briefs/"+op), nil, worker.As("")...)
			require.Equal(t, http.StatusForbidden, res.Status, "%s: %s", op, res.Body)
		}
		res := h.Do("POST", path(co, "/reflection-coach/routines/recent-agent-reflection/run"), nil, worker.As("")...)
		require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
		// Reading is open to the company's agents.
		require.Equal(t, http.StatusOK, h.Do("GET", path(co, ""), nil, worker.As("")...).Status)
	})
}

// waitState waits until a built-in reaches a state (moves made by delivered events).
func waitState(t *testing.T, h *sdktest.Host, co, key, state string) {
	t.Helper()
	sdktest.WaitFor(t, 60*time.Second, func() bool {
		res := h.Do("GET", path(co, "/"+key+"/status"), nil)
		var b builtIn
		return res.Status == http.StatusOK && json.Unmarshal(res.Body, &b) == nil && b.State == state
	}, key+" to be "+state)
}

// agentPermissions reports which of the keys the tests look at an agent holds.
func agentPermissions(t *testing.T, h *sdktest.Host, co, agentID string) map[string]bool {
	t.Helper()
	a := &kernel.Actor{Type: kernel.ActorAgent, AgentID: agentID, CompanyID: co, Source: "agent_key"}
	out := map[string]bool{}
	for _, key := range []string{"agents:suggest-changes", "skills:suggest-changes", "agents:configure", "skills:create"} {
		has, err := h.Kernel.HasPermission(context.Background(), a, co, key)
		require.NoError(t, err)
		out[key] = has
	}
	return out
}
