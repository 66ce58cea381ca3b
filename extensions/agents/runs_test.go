package agents_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

func TestRunRoutes(t *testing.T) {
	t.Parallel()
	h := startAgents(t)
	company := h.CreateCompany("Runs Co")
	ag := hbAgent(t, h, company, "Runner", "fake", nil, nil)
	sleeper := hbAgent(t, h, company, "Sleeper", "fake", map[string]any{"sleepMs": 30000}, nil)

	run := wake(t, h, ag.ID, map[string]any{"payload": map[string]any{"issueId": uuid.NewString()}})
	runID := run["id"].(string)
	done := waitRun(t, h, runID, 20*time.Second, "succeeded")
	// Every key of reference-samples/heartbeat_runs.json.
	for _, k := range []string{
		"agentId", "companyId", "contextSnapshot", "continuationAttempt", "createdAt", "error", "errorCode",
		"exitCode", "externalRunId", "finishedAt", "id", "invocationSource", "lastOutputAt", "lastOutputBytes",
		"lastOutputSeq", "lastOutputStream", "lastUsefulActionAt", "livenessReason", "livenessState", "logBytes",
		"logCompressed", "logRef", "logSha256", "logStore", "nextAction", "processGroupId", "processLossRetryCount",
		"processPid", "processStartedAt", "resultJson", "retryOfRunId", "scheduledRetryAt", "scheduledRetryAttempt",
		"scheduledRetryReason", "sessionIdAfter", "sessionIdBefore", "signal", "startedAt", "status",
		"stderrExcerpt", "stdoutExcerpt", "triggerDetail", "updatedAt", "usageJson", "wakeupRequestId"} {
		require.Contains(t, done, k)
	}
	require.Equal(t, "local_file", done["logStore"])
	require.Equal(t, "runs/"+runID+".log", done["logRef"])
	require.NotEmpty(t, done["logSha256"])
	require.Contains(t, done["stdoutExcerpt"], "hello from run "+runID)
	require.Contains(t, done["stderrExcerpt"], "a warning")

	t.Run("list filters by agent and status", func(t *testing.T) {
		res := h.Do("GET", "/api/companies/"+company+"/heartbeat-runs?agentId="+ag.ID, nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		var runs []map[string]any
		res.JSON(t, &runs)
		require.Len(t, runs, 1)
		require.Equal(t, runID, runs[0]["id"])
		res = h.Do("GET", "/api/companies/"+company+"/heartbeat-runs?status=failed", nil)
		res.JSON(t, &runs)
		require.Empty(t, runs)
		res = h.Do("GET", "/api/companies/"+company+"/heartbeat-runs?limit=0", nil)
		require.Equal(t, http.StatusBadRequest, res.Status)
		// Pages: offset skips runs, newest first.
		res = h.Do("GET", "/api/companies/"+company+"/heartbeat-runs?agentId="+ag.ID+"&limit=1&offset=0", nil)
		res.JSON(t, &runs)
		require.Len(t, runs, 1)
		res = h.Do("GET", "/api/companies/"+company+"/heartbeat-runs?agentId="+ag.ID+"&offset=1", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		res.JSON(t, &runs)
		require.Empty(t, runs)
		res = h.Do("GET", "/api/companies/"+company+"/heartbeat-runs?offset=-1", nil)
		require.Equal(t, http.StatusBadRequest, res.Status)
	})

	t.Run("events record the spawn and the output", func(t *testing.T) {
		res := h.Do("GET", "/api/heartbeat-runs/"+runID+"/events", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		var events []map[string]any
		res.JSON(t, &events)
		types := map[string]int{}
		var lastSeq float64
		for _, e := range events {
			types[e["eventType"].(string)]++
			require.Greater(t, e["seq"].(float64), lastSeq)
			lastSeq = e["seq"].(float64)
		}
		require.Equal(t, 1, types["spawn"])
		require.GreaterOrEqual(t, types["log"], 3)
	})

	t.Run("log is plain text from an offset", func(t *testing.T) {
		res := h.Do("GET", "/api/heartbeat-runs/"+runID+"/log", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.True(t, strings.HasPrefix(res.Header.Get("Content-Type"), "text/plain"))
		require.Contains(t, string(res.Body), "hello from run "+runID)
		require.Equal(t, "false", res.Header.Get("X-Run-Live"))
		require.EqualValues(t, len(res.Body), done["logBytes"])
		res = h.Do("GET", "/api/heartbeat-runs/"+runID+"/log?offset=7", nil)
		require.Len(t, res.Body, int(done["logBytes"].(float64))-7)
	})

	t.Run("live runs, follow and cancel", func(t *testing.T) {
		live := wake(t, h, sleeper.ID, nil)
		liveID := live["id"].(string)
		waitRun(t, h, liveID, 10*time.Second, "running")
		res := h.Do("GET", "/api/companies/"+company+"/live-runs", nil)
		var runs []map[string]any
		res.JSON(t, &runs)
		require.Len(t, runs, 1)
		require.Equal(t, liveID, runs[0]["id"])

		// Follow from the end: the request waits until the cancel adds output.
		res = h.Do("GET", "/api/heartbeat-runs/"+liveID+"/log", nil)
		offset := res.Header.Get("X-Log-Offset")
		followed := make(chan string, 1)
		go func() {
			r := h.Do("GET", "/api/heartbeat-runs/"+liveID+"/log?follow=1&offset="+offset, nil)
			followed <- string(r.Body)
		}()
		time.Sleep(300 * time.Millisecond)

		// Another agent may not cancel it.
		other := hbAgent(t, h, company, "Meddler", "fake", nil, nil)
		res = h.Do("POST", "/api/heartbeat-runs/"+liveID+"/cancel", nil, other.As("")...)
		require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)

		start := time.Now()
		res = h.Do("POST", "/api/heartbeat-runs/"+liveID+"/cancel", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, "cancelled", res.Map(t)["status"])
		select {
		case body := <-followed:
			require.NotEmpty(t, body)
		case <-time.After(10 * time.Second):
			t.Fatal("follow did not return")
		}
		final := waitRun(t, h, liveID, 10*time.Second, "cancelled")
		sdktest.WaitFor(t, 10*time.Second, func() bool { return getRun(t, h, liveID)["finishedAt"] != nil }, "finishedAt")
		require.Less(t, time.Since(start), 10*time.Second)
		require.Equal(t, "cancelled", final["errorCode"])

		res = h.Do("POST", "/api/heartbeat-runs/"+uuid.NewString()+"/cancel", nil)
		require.Equal(t, http.StatusNotFound, res.Status)
	})

	t.Run("cancelAgentRuns cancels queued and running runs", func(t *testing.T) {
		ag := hbAgent(t, h, company, "Busy", "fake", map[string]any{"sleepMs": 30000},
			map[string]any{"heartbeat": map[string]any{"maxConcurrentRuns": 1}})
		first := wake(t, h, ag.ID, map[string]any{"payload": map[string]any{"issueId": uuid.NewString()}})
		second := wake(t, h, ag.ID, map[string]any{"payload": map[string]any{"issueId": uuid.NewString()}})
		waitRun(t, h, first["id"].(string), 10*time.Second, "running")
		require.Equal(t, "queued", getRun(t, h, second["id"].(string))["status"])
		out := invoke(t, h, "agents.cancelAgentRuns", company, map[string]any{"agentId": ag.ID})
		require.EqualValues(t, 2, out["cancelled"])
		waitRun(t, h, first["id"].(string), 10*time.Second, "cancelled")
		waitRun(t, h, second["id"].(string), time.Second, "cancelled")
	})

	t.Run("a cancel recorded by another node stops the run here", func(t *testing.T) {
		ag := hbAgent(t, h, company, "Remote", "fake", map[string]any{"sleepMs": 60000}, nil)
		run := wake(t, h, ag.ID, nil)
		id := run["id"].(string)
		sdktest.WaitFor(t, 10*time.Second, func() bool { return getRun(t, h, id)["processPid"] != nil }, "the run to execute")
		// Another node's cancel writes the status; it cannot reach this node's adapter.
		_, err := h.Kernel.Pool.Exec(t.Context(), `UPDATE ext_agents.heartbeat_runs SET status = 'cancelled', error_code = 'cancelled'
			WHERE id = $1`, id)
		require.NoError(t, err)
		start := time.Now()
		sdktest.WaitFor(t, 20*time.Second, func() bool { return getRun(t, h, id)["finishedAt"] != nil }, "the executor to stop the run")
		require.Less(t, time.Since(start), 20*time.Second, "well before the 60 s the adapter would sleep")
		final := getRun(t, h, id)
		require.Equal(t, "cancelled", final["status"])
		require.Contains(t, string(h.Do("GET", "/api/heartbeat-runs/"+id+"/log", nil).Body), "bye")
	})

	t.Run("a node without the log file serves the log from the run's events", func(t *testing.T) {
		ag := hbAgent(t, h, company, "Elsewhere", "fake", nil, nil)
		id := wake(t, h, ag.ID, nil)["id"].(string)
		waitRun(t, h, id, 20*time.Second, "succeeded")
		local := string(h.Do("GET", "/api/heartbeat-runs/"+id+"/log", nil).Body)
		require.Contains(t, local, "hello from run")
		// As if another node had executed the run: this node has no file.
		require.NoError(t, os.Remove(filepath.Join(h.Config().Home, "extensions", "agents", "runs", id+".log")))
		res := h.Do("GET", "/api/heartbeat-runs/"+id+"/log", nil)
		require.Equal(t, http.StatusOK, res.Status)
		require.Equal(t, local, string(res.Body))
		res = h.Do("GET", "/api/heartbeat-runs/"+id+"/log?offset=5", nil)
		require.Equal(t, local[5:], string(res.Body))
		require.Equal(t, strconv.Itoa(len(local)), res.Header.Get("X-Log-Offset"))
	})

	t.Run("runs of another company are hidden", func(t *testing.T) {
		other := h.CreateCompany("Stranger Co")
		o := hbAgent(t, h, other, "Stranger", "fake", nil, nil)
		res := h.Do("GET", "/api/heartbeat-runs/"+runID, nil, o.As("")...)
		require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
		res = h.Do("GET", "/api/heartbeat-runs/"+uuid.NewString(), nil)
		require.Equal(t, http.StatusNotFound, res.Status)
		require.Equal(t, "Heartbeat run not found", res.Map(t)["error"])
	})
}
