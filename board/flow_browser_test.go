package board_test

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

// flowScript is the agent of the board flow: it checks its issue out, says it waits, waits
// until the test lets it go (after the decision was decided on the board), then comments
// and marks the issue done, all through the API with its run's own credentials.
const flowScript = `set -eu
auth="Authorization: Bearer $SERVICE_API_KEY"
run="X-Service-Run-Id: $SERVICE_RUN_ID"
json="Content-Type: application/json"
curl -sS -f -X POST -H "$auth" -H "$run" -H "$json" \
  -d "{\"agentId\":\"$SERVICE_AGENT_ID\",\"expectedStatuses\":[\"todo\",\"backlog\"]}" \
  "$SERVICE_API_URL/api/issues/$SERVICE_TASK_ID/checkout" >/dev/null
echo "checked out the issue; waiting for the go-ahead"
while [ ! -f %q ]; do sleep 0.2; done
echo "go-ahead received"
curl -sS -f -X POST -H "$auth" -H "$run" -H "$json" \
  -d '{"body":"Shipped after the board decided."}' "$SERVICE_API_URL/api/issues/$SERVICE_TASK_ID/comments" >/dev/null
curl -sS -f -X PATCH -H "$auth" -H "$run" -H "$json" \
  -d '{"status":"done"}' "$SERVICE_API_URL/api/issues/$SERVICE_TASK_ID" >/dev/null
echo "finished"
`

// TestBrowserBoardFlow is issue 22's whole flow in headless Chromium, each step through the
// board's own forms: sign in, create a company, hire an agent, create an issue assigned to
// it, watch the issue move to in_progress and its run's log stream live, decide the
// decision the run raised from the inbox, watch the issue reach done and the run succeed
// without a reload, then install a plugin from a path, open the page it contributes and
// disable it. Every page on the way passes axe-core and leaves no CSP violation.
func TestBrowserBoardFlow(t *testing.T) {
	b := newChrome(t)
	ctx := b.ctx
	text := func(sel string) string {
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		require.NoError(t, err, sel)
		return s
	}

	// A company, from the companies page.
	b.open("/companies", "#co-name")
	b.do(chromedp.SendKeys(chromedp.CSS("#co-name"), "Flow Robotics"), chromedp.Submit(chromedp.CSS("#co-name")),
		chromedp.WaitVisible(chromedp.Search(`//main//h1[contains(., "Flow Robotics")]`)))
	var companies []map[string]any
	b.callStatus("GET", "/api/companies", nil, &companies)
	var co string
	for _, c := range companies {
		if c["name"] == "Flow Robotics" {
			co = c["id"].(string)
		}
	}
	require.NotEmpty(t, co, "the company made on the board")

	// An agent, from the hire form; its script is set through the API (the config form has
	// its own tests).
	b.open("/c/"+co+"/agents", "#hire-name")
	b.checkAccessibility("agents")
	b.do(chromedp.SendKeys(chromedp.CSS("#hire-name"), "Builder"), chromedp.SetValue(chromedp.CSS("#hire-role"), "engineer"),
		chromedp.SetValue(chromedp.CSS("#hire-adapter"), "process"), chromedp.Submit(chromedp.CSS("#hire-name")),
		chromedp.WaitVisible(chromedp.Search(`//h1[contains(., "Builder")]`)))
	var agents []map[string]any
	b.callStatus("GET", "/api/companies/"+co+"/agents", nil, &agents)
	require.Len(t, agents, 1)
	agentID := agents[0]["id"].(string)
	flag := filepath.Join(t.TempDir(), "go-ahead")
	b.call("PATCH", "/api/agents/"+agentID, map[string]any{"adapterConfig": map[string]any{
		"command": "/bin/sh", "args": []string{"-c", fmt.Sprintf(flowScript, flag)}, "timeoutSec": 300}})

	// An issue assigned to the agent, from the new-issue form: the issue page opens and
	// moves to in_progress by itself when the run checks the issue out.
	b.open("/c/"+co+"/issues", "details.new-issue summary")
	b.do(chromedp.Click(chromedp.CSS("details.new-issue summary")), chromedp.WaitVisible(chromedp.CSS("#n-title")),
		chromedp.SendKeys(chromedp.CSS("#n-title"), "Ship the arm controller"),
		chromedp.SetValue(chromedp.CSS("#n-agent"), agentID), chromedp.Submit(chromedp.CSS("#n-title")),
		chromedp.WaitVisible(chromedp.CSS("#issue-live")))
	if os.Getenv("KEEL_FLOW_DEBUG") != "" { // what the run engine did, for a run that never shows
		for i := 0; i < 30; i++ {
			var runs []map[string]any
			var ag, wake map[string]any
			b.callStatus("GET", "/api/companies/"+co+"/heartbeat-runs?agentId="+agentID, nil, &runs)
			b.callStatus("GET", "/api/agents/"+agentID, nil, &ag)
			b.callStatus("GET", "/api/companies/"+co+"/activity?limit=20", nil, &wake)
			t.Logf("runs=%v agent.status=%v", runs, ag["status"])
			time.Sleep(2 * time.Second)
		}
		var act []map[string]any
		b.callStatus("GET", "/api/companies/"+co+"/activity?limit=30", nil, &act)
		for _, a := range act {
			t.Logf("activity %v %v %v", a["action"], a["entityType"], a["details"])
		}
	}
	b.do(chromedp.WaitVisible(chromedp.Search(`//*[@id="issue-status" and normalize-space()="in_progress"]`)))
	b.checkAccessibility("issue")

	// The run's page, in a second tab, streams the run's log while it runs.
	var runID string
	sdktest.WaitFor(t, time.Minute, func() bool {
		var runs []map[string]any
		b.callStatus("GET", "/api/companies/"+co+"/heartbeat-runs?agentId="+agentID, nil, &runs)
		for _, r := range runs {
			if r["status"] == "running" {
				runID = r["id"].(string)
				return true
			}
		}
		return false
	}, "the agent's run to start")
	runTab, cancelRunTab := chromedp.NewContext(ctx)
	defer cancelRunTab()
	require.NoError(t, chromedp.Do(runTab, chromedp.EmulateViewport(1280, 800),
		chromedp.Navigate(b.h.URL+"/c/"+co+"/runs/"+runID),
		chromedp.WaitVisible(chromedp.Search(`//*[contains(text(), "waiting for the go-ahead")]`))))

	// The run raises a decision; the inbox, in a third tab, decides it.
	jwt := b.h.AgentJWT(&sdktest.Agent{ID: agentID, CompanyID: co}, runID)
	var decision map[string]any
	status := b.callStatusAs("POST", "/api/companies/"+co+"/decisions", map[string]any{
		"title": "Ship the arm controller now?", "body": "The interlock is wired; firmware is flashed.",
		"options": []map[string]any{
			{"id": "ship", "label": "Ship it", "style": "primary", "effects": []map[string]any{}},
			{"id": "wait", "label": "Wait", "effects": []map[string]any{}},
		}}, &decision, "Bearer "+jwt)
	require.Equal(t, 201, status, "%v", decision)
	inboxTab, cancelInboxTab := chromedp.NewContext(ctx)
	defer cancelInboxTab()
	require.NoError(t, chromedp.Do(inboxTab, chromedp.EmulateViewport(1280, 800),
		chromedp.Navigate(b.h.URL+"/c/"+co+"/inbox"),
		chromedp.WaitVisible(chromedp.Search(`//*[contains(text(), "Ship the arm controller now?")]`)),
		chromedp.Click(chromedp.CSS(`button[name="optionId"][value="ship"]`)),
	))
	sdktest.WaitFor(t, time.Minute, func() bool {
		var d map[string]any
		b.callStatus("GET", "/api/decisions/"+decision["id"].(string), nil, &d)
		return d["status"] == "decided"
	}, "the decision to be decided from the inbox")
	require.NoError(t, os.WriteFile(flag, nil, 0o644))

	// Without a reload: the run's page shows the end of its log and its success, the issue's
	// page its new status and the agent's comment.
	require.NoError(t, chromedp.Do(runTab,
		chromedp.WaitVisible(chromedp.Search(`//*[contains(text(), "finished")]`)),
		chromedp.WaitVisible(chromedp.Search(`//span[contains(@class, "r-succeeded")]`))))
	b.do(chromedp.WaitVisible(chromedp.Search(`//*[@id="issue-status" and normalize-space()="done"]`)),
		chromedp.WaitVisible(chromedp.Search(`//li[contains(., "Shipped after the board decided.")]`)))
	require.Equal(t, "done", text("#issue-status"))
	cancelInboxTab()
	cancelRunTab()

	// A plugin installed from a path on the plugins page; its page appears in the sidebar,
	// and disabling it takes the page away.
	dir := sdktest.BuildProcessExtension(t, "../examples/ui-slots")
	b.open("/instance/plugins", "#pl-package")
	b.checkAccessibility("plugins")
	b.do(chromedp.SendKeys(chromedp.CSS("#pl-package"), dir), chromedp.Click(chromedp.CSS("#pl-path")),
		chromedp.Submit(chromedp.CSS("#pl-package")))
	ready := func() bool {
		var p map[string]any
		return b.callStatus("GET", "/api/plugins/example.ui_slots", nil, &p) == 200 && p["status"] == "ready"
	}
	deadline := time.Now().Add(2 * time.Minute)
	for !ready() {
		if time.Now().After(deadline) {
			page, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
			var list any
			b.callStatus("GET", "/api/plugins?manifest=false", nil, &list)
			t.Fatalf("the plugin installed on the board is not ready; the page shows:\n%s\nplugins: %v", page, list)
		}
		time.Sleep(200 * time.Millisecond)
	}
	b.open("/c/"+co, "main h1")
	b.do(chromedp.Click(chromedp.Search(`//nav//a[contains(., "UI example")]`)),
		chromedp.WaitVisible(chromedp.CSS("#ui-greeting")))
	b.checkAccessibility("plugin page")
	b.open("/instance/plugins/example.ui_slots", "main h1")
	b.do(chromedp.Click(chromedp.Search(`//button[text()="Disable"]`)),
		chromedp.WaitVisible(chromedp.Search(`//button[text()="Enable"]`)))
	var p map[string]any
	b.callStatus("GET", "/api/plugins/example.ui_slots", nil, &p)
	require.Equal(t, "disabled", p["status"])
	b.open("/c/"+co, "main h1")
	nav := text("nav.sidebar")
	require.NotContains(t, nav, "UI example", "a disabled plugin's sidebar link is gone")
}
