package statuscards_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

// summarizerScript is the whole summarizer "agent": it reads the environment keel gives a
// run, finds the card from its generation task (originId), writes the compiled queries and
// the first summary with its run's own credentials.
const summarizerScript = `set -eu
auth="Authorization: Bearer $SERVICE_API_KEY"
run="X-Service-Run-Id: $SERVICE_RUN_ID"
json="Content-Type: application/json"
task=$(curl -sS -f -H "$auth" -H "$run" "$SERVICE_API_URL/api/issues/$SERVICE_TASK_ID")
card=$(printf '%s' "$task" | sed -n 's/.*"originId":"\([^"]*\)".*/\1/p')
echo "compiling card $card from task $SERVICE_TASK_ID"
curl -sS -f -X PUT -H "$auth" -H "$run" -H "$json" \
  -d "{\"queries\":[{\"q\":\"launch\",\"scope\":\"issues\"}],\"title\":\"Launch blockers\",\"changeSummary\":\"First compile\",\"generationIssueId\":\"$SERVICE_TASK_ID\"}" \
  "$SERVICE_API_URL/api/status-cards/$card/query" >/dev/null
curl -sS -f -X PUT -H "$auth" -H "$run" -H "$json" \
  -d "{\"markdown\":\"# Launch\\n\\nNothing blocks the launch.\",\"changeSummary\":\"First summary\",\"generationIssueId\":\"$SERVICE_TASK_ID\",\"model\":\"script-1\"}" \
  "$SERVICE_API_URL/api/status-cards/$card/summary" >/dev/null
echo "summarized"
`

// TestStatusCards runs the status-card tests on one host with enableStatusCards on; each
// subtest works in its own company.
func TestStatusCards(t *testing.T) {
	t.Parallel()
	h := startHost(t, true)

	t.Run("ProcessSummarizerCompilesAndSummarizes", func(t *testing.T) {
		t.Parallel()
		co := h.CreateCompany("Launch Co")
		res := h.Do("POST", "/api/companies/"+co+"/agents", map[string]any{"name": "Scripted Summarizer", "role": "general",
			"adapterType": "process", "adapterConfig": map[string]any{"command": "/bin/sh", "args": []string{"-c", summarizerScript},
				"timeoutSec": 60}})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		agentID := res.Map(t)["id"].(string)
		launch := ok(t, h.Do("POST", "/api/companies/"+co+"/issues", map[string]any{"title": "Fix the launch checklist"}), http.StatusCreated)
		ok(t, h.Do("POST", "/api/companies/"+co+"/issues", map[string]any{"title": "Unrelated chore"}), http.StatusCreated)

		card := ok(t, h.Do("POST", "/api/companies/"+co+"/status-cards", map[string]any{
			"interestPrompt": "  What is blocking the launch?  ", "agentId": agentID}), http.StatusCreated)
		require.Equal(t, "compiling", card["state"])
		require.Equal(t, "What is blocking the launch?", card["interestPrompt"])
		require.NotEmpty(t, card["generatingIssueId"])
		require.Equal(t, float64(0), card["queryVersion"])
		id := card["id"].(string)
		t.Cleanup(func() {
			if t.Failed() {
				var runs []map[string]any
				h.Do("GET", "/api/companies/"+co+"/heartbeat-runs?agentId="+agentID, nil).JSON(t, &runs)
				for _, r := range runs {
					t.Logf("run %v %v: %s", r["id"], r["status"], h.Do("GET", "/api/heartbeat-runs/"+r["id"].(string)+"/log", nil).Body)
				}
			}
		})

		var got map[string]any
		sdktest.WaitFor(t, 90*time.Second, func() bool {
			got = ok(t, h.Do("GET", "/api/status-cards/"+id, nil), http.StatusOK)
			return got["state"] == "active"
		}, "the script to compile and summarize the card")
		require.Equal(t, "Launch blockers", got["title"])
		require.Equal(t, float64(1), got["queryVersion"])
		require.Equal(t, agentID, got["queryCompiledByAgentId"])
		require.Equal(t, "# Launch\n\nNothing blocks the launch.", got["summaryBody"])
		require.Equal(t, "full", got["lastUpdateRunKind"])
		require.Equal(t, "script-1", got["lastModel"])
		require.Nil(t, got["generatingIssueId"])
		require.NotNil(t, got["documentId"])
		require.Equal(t, float64(1), got["watchedIssueCount"], "the launch issue only")
		require.Contains(t, got["fingerprint"].(map[string]any), launch["id"])
		require.Equal(t, float64(0), got["todayTokens"])

		ups := list(t, h.Do("GET", "/api/status-cards/"+id+"/updates", nil))
		require.Len(t, ups, 2)
		require.Equal(t, "full", ups[0]["kind"])
		require.Equal(t, "ok", ups[0]["status"])
		require.Equal(t, "compile", ups[1]["kind"])
		require.Equal(t, "ok", ups[1]["status"])
		require.Equal(t, "First compile", ups[1]["changeSummary"])
		require.Equal(t, ups[0]["runId"], ups[1]["runId"], "one run compiled and summarized")
		require.NotEmpty(t, ups[0]["runId"])

		revs := list(t, h.Do("GET", "/api/status-cards/"+id+"/summary-revisions", nil))
		require.Len(t, revs, 1)
		require.Equal(t, float64(1), revs[0]["revisionNumber"])
		require.Equal(t, "First summary", revs[0]["changeSummary"])
		task := ok(t, h.Do("GET", "/api/issues/"+ups[0]["generationIssueId"].(string), nil), http.StatusOK)
		require.Equal(t, agentID, task["assigneeAgentId"], "the generation task is the summarizer's")
		require.Equal(t, "status_card", task["originKind"])
	})

	t.Run("ReactiveDebounceAndHourlyCap", func(t *testing.T) { t.Parallel(); testReactiveDebounceAndHourlyCap(t, h) })
	t.Run("ActiveHoursAcrossMidnight", func(t *testing.T) { t.Parallel(); testActiveHoursAcrossMidnight(t, h) })
	t.Run("DailyTokenCap", func(t *testing.T) { t.Parallel(); testDailyTokenCap(t, h) })
	t.Run("TriggerBooleans", func(t *testing.T) { t.Parallel(); testTriggerBooleans(t, h) })
	t.Run("ConcurrentTicksGenerateOnce", func(t *testing.T) { t.Parallel(); testConcurrentTicksGenerateOnce(t, h) })

	t.Run("BuiltInSummarizer", func(t *testing.T) {
		t.Parallel()
		res := h.Do("PATCH", "/api/instance/settings/experimental", map[string]any{"enableBuiltInAgents": true})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		waitStatus(t, h, "builtinagents", "ready")
		co := h.CreateCompany("Built In Co")
		launch := ok(t, h.Do("POST", "/api/companies/"+co+"/issues", map[string]any{"title": "Launch party"}), http.StatusCreated)
		prov := ok(t, h.Do("POST", "/api/companies/"+co+"/built-in-agents/summarizer/provision", map[string]any{
			"adapterType": "process", "adapterConfig": map[string]any{"command": "/bin/sh", "args": []string{"-c", summarizerScript},
				"timeoutSec": 60}}), http.StatusOK)
		agentID := prov["agent"].(map[string]any)["id"].(string)

		card := ok(t, h.Do("POST", "/api/companies/"+co+"/status-cards", map[string]any{"interestPrompt": "Is the launch on?"}),
			http.StatusCreated)
		require.Equal(t, "compiling", card["state"])
		require.Nil(t, card["agentId"], "the built-in summarizer, no override")
		id := card["id"].(string)
		var got map[string]any
		sdktest.WaitFor(t, 90*time.Second, func() bool {
			got = ok(t, h.Do("GET", "/api/status-cards/"+id, nil), http.StatusOK)
			return got["state"] == "active"
		}, "the built-in summarizer to compile and summarize the card")
		require.Equal(t, agentID, got["queryCompiledByAgentId"])
		require.Contains(t, got["fingerprint"].(map[string]any), launch["id"])

		// A paused summarizer still takes the work, with the warning.
		ok(t, h.Do("POST", "/api/agents/"+agentID+"/pause", map[string]any{}), http.StatusOK)
		res = h.Do("POST", "/api/status-cards/"+id+"/recompile", nil)
		require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
		require.Equal(t, "built_in_agent_paused", res.Map(t)["card"].(map[string]any)["warning"])
	})

	t.Run("AgentsManageOwnCards", func(t *testing.T) { t.Parallel(); testAgentsManageOwnCards(t, h) })
	t.Run("ArchiveAndRestore", func(t *testing.T) { t.Parallel(); testArchiveAndRestore(t, h) })
	t.Run("GenerationLifecycle", func(t *testing.T) { t.Parallel(); testGenerationLifecycle(t, h) })
	t.Run("WritesAndRefresh", func(t *testing.T) { t.Parallel(); testWritesAndRefresh(t, h) })

	t.Run("SummarizerNotConfigured", func(t *testing.T) {
		t.Parallel()
		co := h.CreateCompany("No Summarizer Co")
		m := wantErr(t, h.Do("POST", "/api/companies/"+co+"/status-cards", map[string]any{"interestPrompt": "Anything?"}),
			http.StatusUnprocessableEntity, "Summarizer built-in agent is not configured")
		require.Equal(t, "summarizer_not_configured", m["code"])
		require.Empty(t, list(t, h.Do("GET", "/api/companies/"+co+"/status-cards", nil)), "nothing was created")
	})

	t.Run("Validation", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, h, "Validation Co")
		base := "/api/companies/" + f.co + "/status-cards"
		for _, tc := range []struct {
			name string
			body map[string]any
			path string
			msg  string
		}{
			{"EmptyPrompt", map[string]any{"interestPrompt": "   "}, "interestPrompt", ""},
			{"LongPrompt", map[string]any{"interestPrompt": strings.Repeat("x", 20001)}, "interestPrompt", ""},
			{"LongTitle", map[string]any{"interestPrompt": "x", "title": strings.Repeat("t", 301)}, "title", ""},
			{"IntervalWithoutMinutes", map[string]any{"interestPrompt": "x", "refreshPolicy": map[string]any{"mode": "interval"}},
				"refreshPolicy.intervalMinutes", "Required for interval mode"},
			{"ReactiveWithoutDebounce", map[string]any{"interestPrompt": "x", "refreshPolicy": map[string]any{"mode": "reactive"}},
				"refreshPolicy.debounceSeconds", "Required for reactive mode"},
			{"BadZone", map[string]any{"interestPrompt": "x", "refreshPolicy": map[string]any{"activeHours": map[string]any{
				"start": "09:00", "end": "17:00", "timezone": "Mars/Olympus"}}}, "refreshPolicy.activeHours.timezone", ""},
			{"BadClock", map[string]any{"interestPrompt": "x", "refreshPolicy": map[string]any{"activeHours": map[string]any{
				"start": "9am", "end": "17:00", "timezone": "UTC"}}}, "refreshPolicy.activeHours.start", ""},
			{"ZeroCap", map[string]any{"interestPrompt": "x", "refreshPolicy": map[string]any{"dailyTokenCap": 0}},
				"refreshPolicy.dailyTokenCap", ""},
		} {
			m := wantErr(t, h.Do("POST", base, tc.body), http.StatusBadRequest, "Validation error")
			d := m["details"].([]any)[0].(map[string]any)
			require.Equal(t, tc.path, d["path"], tc.name)
			if tc.msg != "" {
				require.Equal(t, tc.msg, d["message"], tc.name)
			}
		}
		other := h.CreateCompany("Other Validation Co")
		stranger := h.CreateAgent(other, "Stranger", "general")
		wantErr(t, h.Do("POST", base, map[string]any{"interestPrompt": "x", "agentId": stranger.ID}), http.StatusUnprocessableEntity,
			"Summarizer agent must belong to this company")
		id := f.create(t, map[string]any{"interestPrompt": "Anything?", "title": "Pinned", "titlePinned": true})["id"].(string)
		m := wantErr(t, h.Do("PATCH", "/api/status-cards/"+id, map[string]any{}), http.StatusBadRequest, "Validation error")
		require.Equal(t, "At least one field is required", m["details"].([]any)[0].(map[string]any)["message"])
		wantErr(t, h.Do("GET", "/api/status-cards/"+newUUID(t), nil), http.StatusNotFound, "Status card not found")
		wantErr(t, h.Do("POST", "/api/status-cards/"+id+"/refresh", nil), http.StatusConflict, "Compile the status-card query before refreshing it")
		// A title pinned at create survives the compile.
		f.compile(t, id)
		require.Equal(t, "Pinned", f.card(t, id)["title"])
	})
}
