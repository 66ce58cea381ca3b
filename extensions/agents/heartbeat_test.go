package agents_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

func TestWakeupRunsAgent(t *testing.T) {
	t.Parallel()
	h := startAgents(t)
	company := h.CreateCompany("Wake Co")
	ag := hbAgent(t, h, company, "Waker", "fake", nil, nil)

	run := wake(t, h, ag.ID, map[string]any{"reason": "manual poke", "triggerDetail": "manual", "payload": map[string]any{"x": 1}})
	require.Equal(t, "on_demand", run["invocationSource"])
	require.Equal(t, "manual", run["triggerDetail"])
	require.Equal(t, ag.ID, run["agentId"])
	require.Equal(t, "manual poke", run["contextSnapshot"].(map[string]any)["wakeReason"])
	done := waitRun(t, h, run["id"].(string), 20*time.Second, "succeeded", "failed")
	require.Equal(t, "succeeded", done["status"], "%v", done)
	require.NotNil(t, done["finishedAt"])
	require.EqualValues(t, 0, done["exitCode"])
	require.NotNil(t, done["processPid"])

	// The agent is idle again and its last heartbeat is recorded.
	sdktest.WaitFor(t, 5*time.Second, func() bool {
		return dbString(t, h, `SELECT status FROM kernel.agents WHERE id = $1`, ag.ID) == "idle"
	}, "agent idle")
	var actions []string
	rows, err := h.Kernel.Pool.Query(context.Background(), `SELECT action FROM kernel.activity_log WHERE company_id = $1 ORDER BY created_at`, company)
	require.NoError(t, err)
	for rows.Next() {
		var a string
		require.NoError(t, rows.Scan(&a))
		actions = append(actions, a)
	}
	rows.Close()
	require.Subset(t, actions, []string{"heartbeat.invoked", "heartbeat.run_started", "heartbeat.run_finished"})

	require.NotEmpty(t, dbString(t, h, `SELECT last_heartbeat_at::text FROM ext_agents.agent_configs WHERE agent_id = $1`, ag.ID))

	// invoke accepts an empty body.
	res := h.Do("POST", "/api/agents/"+ag.ID+"/heartbeat/invoke", nil)
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
	require.Equal(t, "on_demand", res.Map(t)["invocationSource"])

	// Validation.
	res = h.Do("POST", "/api/agents/"+ag.ID+"/wakeup", map[string]any{"source": "bogus"})
	require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
	res = h.Do("POST", "/api/agents/"+ag.ID+"/wakeup", map[string]any{"source": "sideways", "nope": 1})
	require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
	res = h.Do("POST", "/api/agents/"+uuid.NewString()+"/wakeup", nil)
	require.Equal(t, http.StatusNotFound, res.Status, "%s", res.Body)
}

func TestWakeupRules(t *testing.T) {
	t.Parallel()
	h := startAgents(t)
	ctx := context.Background()
	company := h.CreateCompany("Rules Co")
	slow := map[string]any{"sleepMs": 4000}
	a := hbAgent(t, h, company, "Alpha", "fake", nil, nil)
	b := hbAgent(t, h, company, "Bravo", "fake", nil, nil)

	lastWakeError := func(agentID string) string {
		return dbString(t, h, `SELECT error FROM ext_agents.agent_wakeup_requests WHERE agent_id = $1 AND status = 'skipped'
			ORDER BY requested_at DESC LIMIT 1`, agentID)
	}

	t.Run("an agent may wake only itself", func(t *testing.T) {
		res := h.Do("POST", "/api/agents/"+b.ID+"/wakeup", nil, a.As("")...)
		require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
		require.Equal(t, "Agent can only invoke itself", res.Map(t)["error"])
		res = h.Do("POST", "/api/agents/"+b.ID+"/heartbeat/invoke", nil, a.As("")...)
		require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
		res = h.Do("POST", "/api/agents/"+a.ID+"/wakeup", map[string]any{"reason": "self"}, a.As("")...)
		require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
		require.Equal(t, a.ID, res.Map(t)["agentId"])
	})

	t.Run("an agent of another company cannot wake", func(t *testing.T) {
		other := h.CreateCompany("Other Co")
		o := hbAgent(t, h, other, "Outsider", "fake", nil, nil)
		res := h.Do("POST", "/api/agents/"+a.ID+"/wakeup", nil, o.As("")...)
		require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
	})

	t.Run("idempotency key returns the same run", func(t *testing.T) {
		first := wake(t, h, b.ID, map[string]any{"idempotencyKey": "k-1", "payload": map[string]any{"issueId": uuid.NewString()}})
		second := wake(t, h, b.ID, map[string]any{"idempotencyKey": "k-1", "payload": map[string]any{"issueId": uuid.NewString()}})
		require.Equal(t, first["id"], second["id"])
		third := wake(t, h, b.ID, map[string]any{"idempotencyKey": "k-2"})
		require.NotEqual(t, first["id"], third["id"])
	})

	t.Run("an agent's own comment does not wake it", func(t *testing.T) {
		out := wake(t, h, b.ID, map[string]any{"source": "automation", "payload": map[string]any{"commentAuthorAgentId": b.ID}})
		require.Equal(t, "skipped", out["status"])
		require.Equal(t, "wakeup_skipped", out["reason"])
		require.Equal(t, "comment.self_authored", lastWakeError(b.ID))
	})

	t.Run("wakeOnDemand false refuses every wake but the timer's", func(t *testing.T) {
		quiet := hbAgent(t, h, company, "Quiet", "fake", nil, map[string]any{"heartbeat": map[string]any{"wakeOnDemand": false}})
		for _, source := range []string{"assignment", "on_demand", "automation"} {
			out := wake(t, h, quiet.ID, map[string]any{"source": source})
			require.Equal(t, "skipped", out["status"], "%s: %v", source, out)
			require.Equal(t, "heartbeat.wakeOnDemand.disabled", lastWakeError(quiet.ID), source)
		}
		res := h.Do("POST", "/api/companies/"+company+"/issues", map[string]any{"title": "For the quiet one", "assigneeAgentId": quiet.ID})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		require.Equal(t, "0", dbString(t, h, `SELECT count(*)::text FROM ext_agents.heartbeat_runs WHERE agent_id = $1`, quiet.ID))
	})

	t.Run("paused, terminated and pending agents are skipped", func(t *testing.T) {
		for _, st := range []string{"paused", "pending_approval", "terminated"} {
			ag := hbAgent(t, h, company, "Sleepy "+st, "fake", nil, nil)
			_, err := h.Kernel.AgentSetStatus(ctx, ag.ID, st)
			require.NoError(t, err)
			out := wake(t, h, ag.ID, nil)
			require.Equal(t, "skipped", out["status"], "%s: %v", st, out)
			require.NotEmpty(t, out["message"])
			require.Equal(t, "agent."+st, lastWakeError(ag.ID))
		}
	})

	t.Run("an invalid chain of command is refused", func(t *testing.T) {
		boss := hbAgent(t, h, company, "Gone Boss", "fake", nil, nil)
		report := hbAgent(t, h, company, "Orphan", "fake", nil, nil)
		res := h.Do("PATCH", "/api/agents/"+report.ID, map[string]any{"reportsTo": boss.ID})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		_, err := h.Kernel.AgentSetStatus(ctx, boss.ID, "terminated")
		require.NoError(t, err)
		for _, path := range []string{"/wakeup", "/heartbeat/invoke"} {
			res = h.Do("POST", "/api/agents/"+report.ID+path, nil)
			require.Equal(t, http.StatusConflict, res.Status, "%s: %s", path, res.Body)
			require.Equal(t, "invalid_org_chain", res.Map(t)["code"])
			require.Contains(t, res.Map(t)["error"], "Gone Boss")
		}
	})

	t.Run("an inactive company is refused for the board and skipped for the system", func(t *testing.T) {
		c2 := h.CreateCompany("Dormant Co")
		ag := hbAgent(t, h, c2, "Dormant", "fake", nil, nil)
		_, err := h.Kernel.Pool.Exec(ctx, `UPDATE kernel.companies SET status = 'paused' WHERE id = $1`, c2)
		require.NoError(t, err)
		res := h.Do("POST", "/api/agents/"+ag.ID+"/wakeup", nil)
		require.Equal(t, http.StatusConflict, res.Status, "%s", res.Body)
		require.Equal(t, "Company is not active", res.Map(t)["error"])
		require.Equal(t, "company.inactive", lastWakeError(ag.ID))
		out := invoke(t, h, "agents.wakeup", c2, map[string]any{"agentId": ag.ID, "companyId": c2, "source": "assignment", "reason": "issue_assigned"})
		require.Equal(t, "skipped", out["status"])
	})

	t.Run("an issue held by another agent's live run suppresses the wake", func(t *testing.T) {
		holder := hbAgent(t, h, company, "Holder", "fake", slow, nil)
		res := h.Do("POST", "/api/companies/"+company+"/issues", map[string]any{"title": "Locked work"})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		issueID := res.Map(t)["id"].(string)
		held := wake(t, h, holder.ID, map[string]any{"payload": map[string]any{"issueId": issueID}})
		_, err := h.Kernel.Pool.Exec(ctx, `UPDATE ext_work.issues SET execution_run_id = $2 WHERE id = $1`, issueID, held["id"])
		require.NoError(t, err)
		out := wake(t, h, b.ID, map[string]any{"payload": map[string]any{"issueId": issueID}})
		require.Equal(t, "skipped", out["status"], "%v", out)
		require.Equal(t, issueID, out["issueId"])
		require.Equal(t, held["id"], out["executionRunId"])
		require.Equal(t, holder.ID, out["executionAgentId"])
		require.Equal(t, "Holder", out["executionAgentName"])
		require.Equal(t, "issue.execution_locked", lastWakeError(b.ID))
		// The holder itself may be woken for its issue.
		own := wake(t, h, holder.ID, map[string]any{"payload": map[string]any{"issueId": issueID}})
		require.NotEqual(t, "skipped", own["status"])
	})

	t.Run("a queued run for the same issue absorbs the wake", func(t *testing.T) {
		ag := hbAgent(t, h, company, "Coalescer", "fake", slow, map[string]any{"heartbeat": map[string]any{"maxConcurrentRuns": 1}})
		first := wake(t, h, ag.ID, map[string]any{"payload": map[string]any{"issueId": uuid.NewString()}})
		waitRun(t, h, first["id"].(string), 10*time.Second, "running")
		issue := uuid.NewString()
		queued := wake(t, h, ag.ID, map[string]any{"payload": map[string]any{"issueId": issue}})
		require.Equal(t, "queued", queued["status"])
		again := wake(t, h, ag.ID, map[string]any{"payload": map[string]any{"issueId": issue}})
		require.Equal(t, queued["id"], again["id"])
		require.Equal(t, "1", dbString(t, h, `SELECT coalesced_count::text FROM ext_agents.agent_wakeup_requests WHERE id = $1`, queued["wakeupRequestId"]))
		require.Equal(t, "coalesced", dbString(t, h, `SELECT status FROM ext_agents.agent_wakeup_requests WHERE run_id = $1 ORDER BY requested_at DESC LIMIT 1`, queued["id"]))
		other := wake(t, h, ag.ID, map[string]any{"payload": map[string]any{"issueId": uuid.NewString()}})
		require.NotEqual(t, queued["id"], other["id"])
	})

	t.Run("runStatus reports runs", func(t *testing.T) {
		run := wake(t, h, a.ID, map[string]any{"reason": "status"})
		out := invoke(t, h, "agents.runStatus", company, map[string]any{"runId": run["id"]})
		require.Equal(t, true, out["found"])
		require.Equal(t, a.ID, out["agentId"])
		out = invoke(t, h, "agents.runStatus", company, map[string]any{"runId": uuid.NewString()})
		require.Equal(t, false, out["found"])
	})
}

// TestAssignmentWakesAgent goes through the work extension: assigning an issue calls
// agents.wakeup, and the run carries the issue in its context and environment.
func TestAssignmentWakesAgent(t *testing.T) {
	t.Parallel()
	h := startAgents(t)
	company := h.CreateCompany("Assign Co")
	ag := hbAgent(t, h, company, "Assignee", "fake", nil, nil)
	res := h.Do("POST", "/api/companies/"+company+"/issues", map[string]any{"title": "Do it", "assigneeAgentId": ag.ID, "status": "todo"})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	issueID := res.Map(t)["id"].(string)
	var runID string
	sdktest.WaitFor(t, 10*time.Second, func() bool {
		runID = dbString(t, h, `SELECT max(id::text) FROM ext_agents.heartbeat_runs WHERE agent_id = $1`, ag.ID)
		return runID != ""
	}, "a run for the assignee")
	run := waitRun(t, h, runID, 20*time.Second, "succeeded")
	require.Equal(t, "assignment", run["invocationSource"])
	snap := run["contextSnapshot"].(map[string]any)
	require.Equal(t, issueID, snap["issueId"])
	require.Equal(t, "issue_assigned", snap["wakeReason"])
	env := run["resultJson"].(map[string]any)["env"].(map[string]any)
	require.Equal(t, issueID, env["SERVICE_TASK_ID"])
	require.Equal(t, "issue_assigned", env["SERVICE_WAKE_REASON"])
}
