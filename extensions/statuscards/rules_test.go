package statuscards_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

// testAgentsManageOwnCards: agents author cards in their own company only, manage only the
// cards they authored, keep prompts to 4000 characters and author at most 20 cards.
func testAgentsManageOwnCards(t *testing.T, h *sdktest.Host) {
	f := newFixture(t, h, "Agent Author Co")
	ceo := h.CreateAgent(f.co, "Chief", "ceo")
	outsider := h.CreateAgent(h.CreateCompany("Outsider Co"), "Outsider", "ceo")
	base := "/api/companies/" + f.co + "/status-cards"
	body := func(prompt string) map[string]any {
		return map[string]any{"interestPrompt": prompt, "agentId": f.summarizer.ID}
	}

	mine := ok(t, h.Do("POST", base, body("Mine?"), ceo.As("")...), http.StatusCreated)
	require.Equal(t, ceo.ID, mine["createdByAgentId"])
	require.Nil(t, mine["createdByUserId"])
	boards := f.create(t, body("The board's?"))
	require.NotNil(t, boards["createdByUserId"])

	wantErr(t, h.Do("POST", base, body("Elsewhere?"), outsider.As("")...), http.StatusForbidden,
		"Agent cannot author status cards for this company")
	wantErr(t, h.Do("POST", base, body(strings.Repeat("p", 4001)), ceo.As("")...), http.StatusUnprocessableEntity,
		"Agent-authored status card prompts cannot exceed 4000 characters")
	wantErr(t, h.Do("PATCH", "/api/status-cards/"+boards["id"].(string), map[string]any{"title": "Mine now"}, ceo.As("")...),
		http.StatusForbidden, "Agents can only manage status cards they authored")
	wantErr(t, h.Do("POST", "/api/status-cards/"+boards["id"].(string)+"/recompile", nil, ceo.As("")...),
		http.StatusForbidden, "Agents can only manage status cards they authored")
	wantErr(t, h.Do("DELETE", "/api/status-cards/"+boards["id"].(string), nil, ceo.As("")...),
		http.StatusForbidden, "Agents can only manage status cards they authored")
	got := ok(t, h.Do("PATCH", "/api/status-cards/"+mine["id"].(string), map[string]any{"title": "Mine indeed", "titlePinned": true},
		ceo.As("")...), http.StatusOK)
	require.Equal(t, "Mine indeed", got["title"])
	// Reads need company access only.
	ok(t, h.Do("GET", "/api/status-cards/"+boards["id"].(string), nil, ceo.As("")...), http.StatusOK)
	wantErr(t, h.Do("GET", "/api/status-cards/"+boards["id"].(string), nil, outsider.As("")...), http.StatusNotFound, "Status card not found")

	// The cap: 20 cards per agent per company; deleting frees a slot.
	var last string
	for i := 1; i < 20; i++ {
		last = ok(t, h.Do("POST", base, body("More?"), ceo.As("")...), http.StatusCreated)["id"].(string)
	}
	wantErr(t, h.Do("POST", base, body("One too many?"), ceo.As("")...), http.StatusUnprocessableEntity,
		"Agents can author at most 20 status cards")
	require.Equal(t, http.StatusNoContent, h.Do("DELETE", "/api/status-cards/"+last, nil, ceo.As("")...).Status)
	wantErr(t, h.Do("GET", "/api/status-cards/"+last, nil), http.StatusNotFound, "Status card not found")
	ok(t, h.Do("POST", base, body("Room again?"), ceo.As("")...), http.StatusCreated)
}

// testArchiveAndRestore: archiving cancels the in-flight generation and stops scheduling;
// archived cards refuse compiles and refreshes; restoring a compiled card queues a full
// refresh with trigger restore.
func testArchiveAndRestore(t *testing.T, h *sdktest.Host) {
	f := newFixture(t, h, "Archive Co")
	fresh := f.create(t, map[string]any{"interestPrompt": "Still compiling?"})
	id := fresh["id"].(string)
	task := fresh["generatingIssueId"].(string)
	c := ok(t, h.Do("PATCH", "/api/status-cards/"+id, map[string]any{"archived": true}), http.StatusOK)
	require.NotNil(t, c["archivedAt"])
	require.NotNil(t, c["archivedByUserId"])
	require.Nil(t, c["generatingIssueId"])
	require.Nil(t, c["nextEvalAt"])
	require.Equal(t, "cancelled", ok(t, h.Do("GET", "/api/issues/"+task, nil), http.StatusOK)["status"])
	up := f.updates(t, id)[0]
	require.Equal(t, "failed", up["status"])
	require.Equal(t, "status card archived", up["error"])
	wantErr(t, h.Do("POST", "/api/status-cards/"+id+"/refresh", nil), http.StatusUnprocessableEntity, "Archived status cards cannot be refreshed")
	wantErr(t, h.Do("POST", "/api/status-cards/"+id+"/recompile", nil), http.StatusUnprocessableEntity, "Archived status cards cannot be compiled")
	require.Empty(t, list(t, h.Do("GET", "/api/companies/"+f.co+"/status-cards", nil)))
	require.Len(t, list(t, h.Do("GET", "/api/companies/"+f.co+"/status-cards?archived=true", nil)), 1)
	// Not compiled yet: restoring queues nothing.
	c = ok(t, h.Do("PATCH", "/api/status-cards/"+id, map[string]any{"archived": false}), http.StatusOK)
	require.Nil(t, c["archivedAt"])
	require.Nil(t, c["generatingIssueId"])

	active := f.activeCard(t, map[string]any{"mode": "interval", "intervalMinutes": 30})
	ok(t, h.Do("PATCH", "/api/status-cards/"+active, map[string]any{"archived": true}), http.StatusOK)
	c = ok(t, h.Do("PATCH", "/api/status-cards/"+active, map[string]any{"archived": false}), http.StatusOK)
	require.NotNil(t, c["generatingIssueId"])
	require.NotNil(t, c["nextEvalAt"])
	up = f.updates(t, active)[0]
	require.Equal(t, "full", up["kind"])
	require.Equal(t, "restore", up["trigger"])
	require.Equal(t, "running", up["status"])
}

// testGenerationLifecycle: recompiles join a compile already running for the same prompt,
// editing the prompt supersedes it, and a task that ends without a summary moves the card
// to error.
func testGenerationLifecycle(t *testing.T, h *sdktest.Host) {
	f := newFixture(t, h, "Lifecycle Co")
	card := f.create(t, map[string]any{"interestPrompt": "First question?"})
	id := card["id"].(string)
	first := card["generatingIssueId"].(string)

	res := ok(t, h.Do("POST", "/api/status-cards/"+id+"/recompile", nil), http.StatusOK)
	require.Equal(t, true, res["alreadyGenerating"])
	require.Equal(t, first, res["generatingIssue"].(map[string]any)["id"])

	c := ok(t, h.Do("PATCH", "/api/status-cards/"+id, map[string]any{"interestPrompt": "Second question?"}), http.StatusOK)
	require.Equal(t, "compiling", c["state"])
	second := c["generatingIssueId"].(string)
	require.NotEqual(t, first, second)
	require.Equal(t, "cancelled", ok(t, h.Do("GET", "/api/issues/"+first, nil), http.StatusOK)["status"])
	ups := f.updates(t, id)
	require.Equal(t, "compile", ups[0]["kind"])
	require.Equal(t, "running", ups[0]["status"])
	require.Equal(t, "failed", ups[1]["status"])

	// The task ends without a summary.
	ok(t, h.Do("PATCH", "/api/issues/"+second, map[string]any{"status": "cancelled"}), http.StatusOK)
	sdktest.WaitFor(t, 60*time.Second, func() bool { return f.card(t, id)["state"] == "error" }, "the card to move to error")
	c = f.card(t, id)
	require.Contains(t, c["failureReason"], "cancelled")
	require.Nil(t, c["generatingIssueId"])
	require.Equal(t, "failed", f.updates(t, id)[0]["status"])

	// A recompile starts over.
	res = ok(t, h.Do("POST", "/api/status-cards/"+id+"/recompile", nil), http.StatusAccepted)
	require.Equal(t, false, res["alreadyGenerating"])
	require.Equal(t, "compiling", res["card"].(map[string]any)["state"])
	f.compile(t, id)
	f.summarize(t, id, "# Back")
	require.Equal(t, "active", f.card(t, id)["state"])
}

// testWritesAndRefresh: only the designated agent writes, from its generation task; manual
// refreshes queue an incremental update for changes, nothing without them, and a full one
// on request; the dry-run runs the queries without writing.
func testWritesAndRefresh(t *testing.T, h *sdktest.Host) {
	f := newFixture(t, h, "Writes Co")
	watched := f.issue(t, map[string]any{"title": "Watched thing"})["id"].(string)
	card := f.create(t, map[string]any{"interestPrompt": "Anything?"})
	id := card["id"].(string)
	task, as := f.inRun(t, id)
	put := func(headers []string, gen string) *sdktest.Response {
		return h.Do("PUT", "/api/status-cards/"+id+"/query", map[string]any{"queries": []map[string]any{{"q": "thing"}},
			"title": "T", "changeSummary": "c", "generationIssueId": gen}, headers...)
	}
	other := h.CreateAgent(f.co, "Other", "general")
	wantErr(t, put(nil, task), http.StatusForbidden, "Only the card's designated agent may write it, from its generation task")
	wantErr(t, put(other.As(""), task), http.StatusForbidden, "Only the card's designated agent may write it, from its generation task")
	wantErr(t, put(f.summarizer.As(""), task), http.StatusForbidden, "Only the card's designated agent may write it, from its generation task")
	wantErr(t, put(as, newUUID(t)), http.StatusConflict, "generationIssueId is not the card's current generation task")
	m := wantErr(t, h.Do("PUT", "/api/status-cards/"+id+"/query", map[string]any{"queries": []map[string]any{{"scope": "nowhere"}},
		"title": "T", "changeSummary": "c", "generationIssueId": task}, as...), http.StatusBadRequest, "Validation error")
	require.Equal(t, "queries[0]", m["details"].([]any)[0].(map[string]any)["path"])
	wantErr(t, h.Do("PUT", "/api/status-cards/"+id+"/summary", map[string]any{"markdown": "# Early", "changeSummary": "c",
		"generationIssueId": task}, as...), http.StatusConflict, "Write the compiled queries before the summary")
	c := ok(t, put(as, task), http.StatusOK)
	require.Equal(t, float64(1), c["queryVersion"])
	require.Equal(t, "compiling", c["state"])
	require.Equal(t, "T", c["title"])
	require.Equal(t, "thing", c["queries"].([]any)[0].(map[string]any)["q"])

	// A summary that mentions an issue outside the queries adds it to the watched set.
	outside := f.issue(t, map[string]any{"title": "Mentioned elsewhere"})
	c = f.summarize(t, id, "See "+outside["identifier"].(string)+" for context.")
	require.Equal(t, []any{outside["id"]}, c["mentionedIssueIds"])
	require.Equal(t, float64(2), c["watchedIssueCount"])

	res := ok(t, h.Do("POST", "/api/status-cards/"+id+"/refresh", nil), http.StatusOK)
	require.Equal(t, false, res["enqueued"], "nothing changed")
	f.setStatus(t, watched, "todo")
	res = ok(t, h.Do("POST", "/api/status-cards/"+id+"/refresh", nil), http.StatusAccepted)
	require.Equal(t, "incremental", res["kind"])
	require.Equal(t, true, res["enqueued"])
	res = ok(t, h.Do("POST", "/api/status-cards/"+id+"/refresh", map[string]any{"full": true}), http.StatusOK)
	require.Equal(t, true, res["alreadyGenerating"], "joins the update in flight")
	f.summarize(t, id, "# Updated")
	res = ok(t, h.Do("POST", "/api/status-cards/"+id+"/refresh", map[string]any{"full": true}), http.StatusAccepted)
	require.Equal(t, "full", res["kind"])
	rebuilt := "# Rebuilt\n\nStill see " + outside["identifier"].(string) + "."
	f.summarize(t, id, rebuilt)
	revs := list(t, h.Do("GET", "/api/status-cards/"+id+"/summary-revisions", nil))
	require.Len(t, revs, 3)
	require.Equal(t, rebuilt, revs[0]["body"])
	require.Equal(t, float64(3), revs[0]["revisionNumber"])

	dry := ok(t, h.Do("GET", "/api/status-cards/"+id+"/dry-run", nil), http.StatusOK)
	require.Equal(t, id, dry["cardId"])
	require.Equal(t, float64(1), dry["queryVersion"])
	q := dry["queries"].([]any)[0].(map[string]any)
	require.Equal(t, watched, q["result"].([]any)[0].(map[string]any)["id"])
	require.Equal(t, outside["id"], dry["mentionedIssues"].([]any)[0].(map[string]any)["id"])
	wantErr(t, h.Do("GET", "/api/status-cards/"+id+"/dry-run", nil, other.As("")...), http.StatusForbidden,
		"Status-card dry-run is outside this actor's low-trust authorization boundary")
	require.Len(t, f.updates(t, id), 4, "compile, first summary, incremental, full, and nothing from the dry-run")
}
