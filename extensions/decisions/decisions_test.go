package decisions_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/kernel"
	"github.com/keelhq/keel/sdktest"
)

// TestDecisions drives the decision routes through a real host: one host, subtests in
// their own companies.
func TestDecisions(t *testing.T) {
	h := startHost(t)
	f := newFixture(t, h, "Decisive")

	t.Run("CreateRules", func(t *testing.T) {
		wantErr(t, h.Do("POST", "/api/companies/"+f.co+"/decisions", f.simple("board")), http.StatusForbidden, "Agent run context required")
		wantErr(t, h.Do("POST", "/api/companies/"+f.co+"/decisions", f.simple("no run"), f.agent.As("")...),
			http.StatusForbidden, "Agent run context required")
		wantErr(t, h.Do("POST", "/api/companies/"+f.co+"/decisions", f.simple("foreign run"), "Authorization", "Bearer "+h.AgentJWT(f.agent, uuid.NewString())),
			http.StatusForbidden, "Decision provenance requires the origin run")

		body := f.simple("unknown field")
		body["bogus"] = 1
		wantErr(t, f.propose(body), http.StatusBadRequest, "Validation error")
		body = f.simple("duplicate options")
		body["options"] = []any{map[string]any{"id": "a", "label": "A"}, map[string]any{"id": "a", "label": "B"}}
		wantErr(t, f.propose(body), http.StatusBadRequest, "Validation error")
		body = f.simple("tree without destructive")
		body["options"] = []any{map[string]any{"id": "a", "label": "A", "effects": []any{
			map[string]any{"type": "cancel_issue_tree", "targetIssueId": f.origin, "reasonComment": "stop"}}}}
		wantErr(t, f.propose(body), http.StatusBadRequest, "Validation error")
		body = f.simple("missing target")
		body["options"] = []any{map[string]any{"id": "a", "label": "A", "effects": []any{
			map[string]any{"type": "comment_on_issue", "targetIssueId": uuid.NewString(), "bodyMarkdown": "x"}}}}
		wantErr(t, f.propose(body), http.StatusUnprocessableEntity, "All referenced issues must exist in the company")
		body = f.simple("far expiry")
		body["expiresAt"] = time.Now().Add(40 * 24 * time.Hour).UTC().Format(time.RFC3339)
		wantErr(t, f.propose(body), http.StatusUnprocessableEntity, "expiresAt must be within 30 days")
		other := f.issue(t, map[string]any{"title": "someone else's"})["id"].(string)
		body = f.simple("no authority")
		body["options"] = []any{map[string]any{"id": "a", "label": "A", "effects": []any{
			map[string]any{"type": "update_issue_status", "targetIssueId": other, "status": "done"}}}}
		wantErr(t, f.propose(body), http.StatusForbidden, "Decision effect exceeds the origin authority boundary")

		// The limits of a create body, each a 400 Validation error (or 422 for the expiry window).
		opt := func(id string, effects ...any) map[string]any {
			return map[string]any{"id": id, "label": id, "effects": append([]any{}, effects...)}
		}
		comment := map[string]any{"type": "comment_on_issue", "targetIssueId": f.origin, "bodyMarkdown": "x"}
		many := func(n int, mk func(i int) any) []any {
			out := make([]any, n)
			for i := range out {
				out[i] = mk(i)
			}
			return out
		}
		for name, c := range map[string]struct {
			change map[string]any
			status int
			text   string
		}{
			"no options":          {map[string]any{"options": []any{}}, http.StatusBadRequest, "Validation error"},
			"nine options":        {map[string]any{"options": many(9, func(i int) any { return opt(fmt.Sprint("o", i)) })}, http.StatusBadRequest, "Validation error"},
			"eleven effects":      {map[string]any{"options": []any{opt("a", many(11, func(int) any { return comment })...)}}, http.StatusBadRequest, "Validation error"},
			"five inputs":         {map[string]any{"inputs": many(5, func(i int) any { return map[string]any{"id": fmt.Sprint("i", i), "label": "L"} })}, http.StatusBadRequest, "Validation error"},
			"duplicate inputs":    {map[string]any{"inputs": []any{map[string]any{"id": "i", "label": "L"}, map[string]any{"id": "i", "label": "M"}}}, http.StatusBadRequest, "Validation error"},
			"unknown input ref":   {map[string]any{"options": []any{opt("a", map[string]any{"type": "comment_on_issue", "targetIssueId": f.origin, "bodyMarkdown": "{{input.nope}}"})}}, http.StatusBadRequest, "Validation error"},
			"long title":          {map[string]any{"title": strings.Repeat("t", 501)}, http.StatusBadRequest, "Validation error"},
			"no body":             {map[string]any{"body": nil}, http.StatusBadRequest, "Validation error"},
			"long rule key":       {map[string]any{"ruleKey": strings.Repeat("r", 241)}, http.StatusBadRequest, "Validation error"},
			"bad style":           {map[string]any{"options": []any{map[string]any{"id": "a", "label": "A", "style": "loud"}}}, http.StatusBadRequest, "Validation error"},
			"bad effect type":     {map[string]any{"options": []any{opt("a", map[string]any{"type": "launch", "targetIssueId": f.origin})}}, http.StatusBadRequest, "Validation error"},
			"lenient tree cancel": {map[string]any{"options": []any{map[string]any{"id": "a", "label": "A", "style": "destructive", "effects": []any{map[string]any{"type": "cancel_issue_tree", "targetIssueId": f.origin, "reasonComment": "x", "staleness": "lenient"}}}}}, http.StatusBadRequest, "Validation error"},
			"bad policy":          {map[string]any{"continuationPolicy": "wake_everyone"}, http.StatusBadRequest, "Validation error"},
			"past expiry":         {map[string]any{"expiresAt": time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)}, http.StatusUnprocessableEntity, "expiresAt must be within 30 days"},
		} {
			body := f.simple(name)
			for k, v := range c.change {
				body[k] = v
			}
			wantErr(t, f.propose(body), c.status, c.text)
		}

		// A run without an issue (an on-demand wake) is not an origin.
		idle := h.CreateAgent(f.co, "Idle", "engineer")
		res := h.Do("POST", "/api/agents/"+idle.ID+"/wakeup", map[string]any{"source": "on_demand"})
		require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
		idleRun, _ := res.Map(t)["id"].(string)
		require.NotEmpty(t, idleRun, "%s", res.Body)
		wantErr(t, h.Do("POST", "/api/companies/"+f.co+"/decisions", f.simple("no issue"), "Authorization", "Bearer "+h.AgentJWT(idle, idleRun)),
			http.StatusUnprocessableEntity, "Origin run is not issue-scoped")

		d := f.mustPropose(t, f.simple("fine"))
		require.Equal(t, "open", d["status"])
		require.Equal(t, f.agent.ID, d["originAgentId"])
		require.Equal(t, f.origin, d["originIssueId"])
		require.Regexp(t, `^decision-spec-v1\.[0-9a-f]{64}$`, d["signedSpec"])
		require.Contains(t, d["targetSnapshots"], f.origin)
		res = h.Do("GET", "/api/decisions/"+d["id"].(string), nil, f.agent.As("")...)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, []any{}, res.Map(t)["executions"])
	})

	t.Run("EveryEffectType", func(t *testing.T) {
		target := f.issue(t, map[string]any{"title": "target", "assigneeAgentId": f.agent.ID})["id"].(string)
		blocker := f.issue(t, map[string]any{"title": "blocker"})["id"].(string)
		blocked := f.issue(t, map[string]any{"title": "blocked", "assigneeAgentId": f.agent.ID, "blockedByIssueIds": []string{blocker}})["id"].(string)
		tree := f.issue(t, map[string]any{"title": "tree root", "assigneeAgentId": f.agent.ID})["id"].(string)
		child := f.issue(t, map[string]any{"title": "tree child", "parentId": tree})["id"].(string)
		d := f.mustPropose(t, map[string]any{"title": "do it all", "body": "all six",
			"inputs": []any{map[string]any{"id": "why", "label": "Why", "required": true, "maxLength": 20}},
			"options": []any{map[string]any{"id": "all", "label": "All", "style": "destructive", "effects": []any{
				map[string]any{"type": "comment_on_issue", "targetIssueId": f.origin, "bodyMarkdown": "because {{input.why}}"},
				map[string]any{"type": "create_issue", "targetIssueId": f.origin, "draft": map[string]any{"title": "follow-up"}},
				map[string]any{"type": "update_issue_status", "targetIssueId": target, "status": "in_review", "comment": "moving"},
				map[string]any{"type": "assign_issue", "targetIssueId": target, "assigneeUserId": "local-board", "staleness": "lenient"},
				map[string]any{"type": "resolve_blocker", "targetIssueId": blocked, "removeBlockedByIssueIds": []string{blocker}},
				map[string]any{"type": "cancel_issue_tree", "targetIssueId": tree, "reasonComment": "no longer needed: {{input.why}}"},
			}}}})
		id := d["id"].(string)
		wantErr(t, f.decide(id, map[string]any{"optionId": "nope"}), http.StatusUnprocessableEntity, "Unknown optionId")
		wantErr(t, f.decide(id, map[string]any{"optionId": "all"}), http.StatusUnprocessableEntity, "Input why is required")
		wantErr(t, f.decide(id, map[string]any{"optionId": "all", "inputValues": map[string]string{"why": "far far too long for this"}}),
			http.StatusUnprocessableEntity, "Input why is too long")
		start := time.Now()
		res := f.decide(id, map[string]any{"optionId": "all", "inputValues": map[string]string{"why": "scope cut"}})
		t.Logf("deciding with six effects took %s", time.Since(start))
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		out := res.Map(t)
		require.Equal(t, "decided", out["status"])
		require.Equal(t, "succeeded", out["executionStatus"], "%s", res.Body)
		execs := out["executions"].([]any)
		require.Len(t, execs, 6)
		for i, e := range execs {
			require.Equal(t, "executed", e.(map[string]any)["status"], "effect %d: %v", i, e)
			require.EqualValues(t, i, e.(map[string]any)["effectIndex"])
		}
		for _, e := range execs {
			require.NotEmpty(t, e.(map[string]any)["activityLogId"])
		}
		for action, n := range map[string]int{"decision.created": 1, "decision.decided": 1, "decision.effect_executed": 6} {
			entries, err := h.Kernel.ActivityList(context.Background(), &kernel.ActivityListParams{CompanyID: f.co, Action: action,
				EntityID: id, Limit: 50})
			require.NoError(t, err)
			require.Len(t, entries, n, action)
		}
		require.Equal(t, "in_review", f.getIssue(t, target)["status"])
		require.Equal(t, "local-board", f.getIssue(t, target)["assigneeUserId"])
		require.Empty(t, f.getIssue(t, blocked)["blockedBy"])
		require.Equal(t, "cancelled", f.getIssue(t, tree)["status"])
		require.Equal(t, "cancelled", f.getIssue(t, child)["status"])
		created := execs[1].(map[string]any)["result"].(map[string]any)["issueId"].(string)
		require.Equal(t, f.origin, f.getIssue(t, created)["parentId"])
		res = h.Do("GET", "/api/issues/"+f.origin+"/comments", nil)
		require.Contains(t, string(res.Body), "because scope cut")

		// A replay resumes the outcome; another choice is refused.
		res = f.decide(id, map[string]any{"optionId": "all", "inputValues": map[string]string{"why": "scope cut"}})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Len(t, res.Map(t)["executions"], 6)
		m := wantErr(t, f.decide(id, map[string]any{"optionId": "all", "inputValues": map[string]string{"why": "other"}}),
			http.StatusConflict, "decision_already_resolved")
		require.Equal(t, "decision_already_resolved", m["code"])
		wantErr(t, h.Do("POST", "/api/decisions/"+id+"/cancel", nil), http.StatusConflict, "decision_already_resolved")
	})

	t.Run("PartialWhenAStrictTargetMoved", func(t *testing.T) {
		moving := f.issue(t, map[string]any{"title": "moving", "assigneeAgentId": f.agent.ID})["id"].(string)
		d := f.mustPropose(t, map[string]any{"title": "partial", "body": "b", "options": []any{
			map[string]any{"id": "go", "label": "Go", "effects": []any{
				map[string]any{"type": "update_issue_status", "targetIssueId": moving, "status": "done"},
				map[string]any{"type": "comment_on_issue", "targetIssueId": moving, "bodyMarkdown": "lenient", "staleness": "lenient"},
			}}}})
		id := d["id"].(string)
		res := h.Do("PATCH", "/api/issues/"+moving, map[string]any{"status": "backlog"})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)

		require.Equal(t, http.StatusForbidden, h.Do("GET", "/api/companies/"+f.co+"/decisions", nil, f.agent.As("")...).Status,
			"the list is the board's")
		res = h.Do("GET", "/api/companies/"+f.co+"/decisions?status=open&targetIssueId="+moving, nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		var list []map[string]any
		res.JSON(t, &list)
		require.Len(t, list, 1)
		require.Equal(t, map[string]any{moving: true}, list[0]["targetChanged"])

		res = f.decide(id, map[string]any{"optionId": "go"})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		out := res.Map(t)
		require.Equal(t, "partial", out["executionStatus"])
		execs := out["executions"].([]any)
		require.Equal(t, "skipped", execs[0].(map[string]any)["status"])
		require.Equal(t, "target_changed", execs[0].(map[string]any)["error"])
		require.Equal(t, "executed", execs[1].(map[string]any)["status"])
		require.Equal(t, "backlog", f.getIssue(t, moving)["status"])
	})

	t.Run("TamperedSignatureRefused", func(t *testing.T) {
		d := f.mustPropose(t, f.simple("tamper"))
		id := d["id"].(string)
		conn, err := pgx.Connect(context.Background(), h.DatabaseURL)
		require.NoError(t, err)
		defer conn.Close(context.Background())
		_, err = conn.Exec(context.Background(), `UPDATE ext_decisions.decisions
			SET options = jsonb_set(options, '{0,effects,0,bodyMarkdown}', '"tampered"') WHERE id = $1`, id)
		require.NoError(t, err)
		wantErr(t, f.decide(id, map[string]any{"optionId": "yes"}), http.StatusForbidden, "Decision signature verification failed")
		wantErr(t, h.Do("POST", "/api/decisions/"+id+"/dismiss", map[string]any{}), http.StatusForbidden,
			"Decision signature verification failed")
		res := h.Do("GET", "/api/decisions/"+id, nil)
		require.Equal(t, "open", res.Map(t)["status"])
	})

	t.Run("IdempotentCreate", func(t *testing.T) {
		body := f.simple("idem")
		body["idempotencyKey"] = "idem-1"
		first := f.mustPropose(t, body)
		again := f.mustPropose(t, body)
		require.Equal(t, first["id"], again["id"])
		body["title"] = "idem changed"
		wantErr(t, f.propose(body), http.StatusConflict, "Decision idempotency key already used with a different payload")

		// The Idempotency-Key header is honoured too, from the create's transaction.
		hdr := append([]string{"Idempotency-Key", "hdr-1"}, f.inRun...)
		res := h.Do("POST", "/api/companies/"+f.co+"/decisions", f.simple("by header"), hdr...)
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		replayed := h.Do("POST", "/api/companies/"+f.co+"/decisions", f.simple("by header"), hdr...)
		require.Equal(t, http.StatusCreated, replayed.Status, "%s", replayed.Body)
		require.Equal(t, "true", replayed.Header.Get("Idempotent-Replayed"))
		require.Equal(t, res.Map(t)["id"], replayed.Map(t)["id"])
	})

	t.Run("DismissAndCancel", func(t *testing.T) {
		d := f.mustPropose(t, f.simple("dismiss me"))
		res := h.Do("POST", "/api/decisions/"+d["id"].(string)+"/dismiss", map[string]any{"reason": "not now"})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		out := res.Map(t)
		require.Equal(t, "decided", out["status"])
		require.Equal(t, "no", out["chosenOptionId"])
		require.Equal(t, "succeeded", out["executionStatus"])
		require.Equal(t, true, out["metadata"].(map[string]any)["dismissed"])

		body := f.simple("dismissed outright")
		body["options"] = body["options"].([]any)[:1]
		d = f.mustPropose(t, body)
		res = h.Do("POST", "/api/decisions/"+d["id"].(string)+"/dismiss", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, "dismissed", res.Map(t)["chosenOptionId"])

		d = f.mustPropose(t, f.simple("cancel me"))
		id := d["id"].(string)
		other := h.CreateAgent(f.co, "Bystander", "engineer")
		wantErr(t, h.Do("POST", "/api/decisions/"+id+"/cancel", nil, other.As("")...), http.StatusForbidden, "Only the origin agent may cancel")
		wantErr(t, h.Do("GET", "/api/decisions/"+id, nil, other.As("")...), http.StatusForbidden, "Only the origin agent may read this decision")
		res = h.Do("POST", "/api/decisions/"+id+"/cancel", nil, f.agent.As("")...)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, "cancelled", res.Map(t)["status"])
		res = h.Do("POST", "/api/decisions/"+id+"/cancel", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, "cancelled", res.Map(t)["status"])
		wantErr(t, f.decide(id, map[string]any{"optionId": "yes"}), http.StatusConflict, "decision_already_resolved")
	})

	t.Run("ExpiryByTime", func(t *testing.T) {
		body := f.simple("expiring")
		body["expiresAt"] = time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		d := f.mustPropose(t, body)
		id := d["id"].(string)
		out := sweep(t, h, time.Now().Add(2*time.Hour))
		require.Contains(t, out.Expired, id)
		res := h.Do("GET", "/api/decisions/"+id, nil)
		require.Equal(t, "expired", res.Map(t)["status"])
		m := wantErr(t, f.decide(id, map[string]any{"optionId": "yes"}), http.StatusConflict, "decision_expired")
		require.Equal(t, "decision_expired", m["code"])
		wantErr(t, h.Do("POST", "/api/decisions/"+id+"/cancel", nil), http.StatusConflict, "decision_already_resolved")

		// Deciding one whose expiresAt passed before any sweep saw it: 409, and it is marked expired.
		id = f.mustPropose(t, f.simple("aged out"))["id"].(string)
		_, err := h.Kernel.Pool.Exec(context.Background(), `UPDATE ext_decisions.decisions SET expires_at = now() - interval '1 second'
			WHERE id = $1`, id)
		require.NoError(t, err)
		m = wantErr(t, f.decide(id, map[string]any{"optionId": "yes"}), http.StatusConflict, "decision_expired")
		require.Equal(t, "decision_expired", m["code"])
		got := h.Do("GET", "/api/decisions/"+id, nil).Map(t)
		require.Equal(t, "expired", got["status"])
		require.Equal(t, []any{}, got["executions"])
	})

	t.Run("ExpiryWhenAStrictTargetDisappears", func(t *testing.T) {
		doomed := f.issue(t, map[string]any{"title": "doomed", "assigneeAgentId": f.agent.ID})["id"].(string)
		strict := f.mustPropose(t, map[string]any{"title": "strict", "body": "b", "options": []any{
			map[string]any{"id": "c", "label": "C", "effects": []any{
				map[string]any{"type": "comment_on_issue", "targetIssueId": doomed, "bodyMarkdown": "x"}}}}})
		lenient := f.mustPropose(t, map[string]any{"title": "lenient", "body": "b", "options": []any{
			map[string]any{"id": "c", "label": "C", "effects": []any{
				map[string]any{"type": "comment_on_issue", "targetIssueId": doomed, "bodyMarkdown": "x", "staleness": "lenient"}}}}})
		res := h.Do("DELETE", "/api/issues/"+doomed, nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		out := sweep(t, h, time.Now())
		require.Contains(t, out.Expired, strict["id"])
		require.NotContains(t, out.Expired, lenient["id"])
		require.Equal(t, "expired", h.Do("GET", "/api/decisions/"+strict["id"].(string), nil).Map(t)["status"])
		require.Equal(t, "open", h.Do("GET", "/api/decisions/"+lenient["id"].(string), nil).Map(t)["status"])
	})

	t.Run("ResumeAfterACrashRunsNoEffectTwice", func(t *testing.T) {
		d := f.mustPropose(t, map[string]any{"title": "crashy", "body": "b", "options": []any{
			map[string]any{"id": "go", "label": "Go", "effects": []any{
				map[string]any{"type": "comment_on_issue", "targetIssueId": f.origin, "bodyMarkdown": "first, maybe posted"},
				map[string]any{"type": "comment_on_issue", "targetIssueId": f.origin, "bodyMarkdown": "second, never started"},
			}}}})
		id := d["id"].(string)
		// The state a process dying inside effect 0 leaves: decided, running, effect 0 claimed.
		conn, err := pgx.Connect(context.Background(), h.DatabaseURL)
		require.NoError(t, err)
		defer conn.Close(context.Background())
		_, err = conn.Exec(context.Background(), `UPDATE ext_decisions.decisions SET status = 'decided', execution_status = 'running',
			chosen_option_id = 'go', input_values = '{}', decided_by_user_id = 'local-board', decided_at = now() - interval '5 minutes',
			updated_at = now() - interval '5 minutes' WHERE id = $1`, id)
		require.NoError(t, err)
		_, err = conn.Exec(context.Background(), `INSERT INTO ext_decisions.decision_effect_executions (decision_id, effect_index,
			effect_type, target_issue_id, status) VALUES ($1, 0, 'comment_on_issue', $2, 'claimed')`, id, f.origin)
		require.NoError(t, err)
		out := sweep(t, h, time.Now())
		require.Contains(t, out.Resumed, id)
		got := h.Do("GET", "/api/decisions/"+id, nil).Map(t)
		require.Equal(t, "partial", got["executionStatus"])
		execs := got["executions"].([]any)
		require.Equal(t, "failed", execs[0].(map[string]any)["status"])
		require.Equal(t, "executed", execs[1].(map[string]any)["status"])
		comments := string(h.Do("GET", "/api/issues/"+f.origin+"/comments", nil).Body)
		require.NotContains(t, comments, "first, maybe posted")
		require.Contains(t, comments, "second, never started")
		// A second sweep finds nothing left to do.
		require.NotContains(t, sweep(t, h, time.Now()).Resumed, id)
	})

	t.Run("ContinuationWake", func(t *testing.T) {
		// Fresh agents: a wake for an issue merges into a run of the same agent and issue
		// that is still queued (the agents owner's rule), which other subtests may leave.
		c := newFixture(t, h, "Woken on cancel")
		body := c.simple("wake me")
		body["continuationPolicy"] = "wake_origin_agent"
		d := c.mustPropose(t, body)
		id := d["id"].(string)
		res := h.Do("POST", "/api/decisions/"+id+"/cancel", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		p := c.wakePayload(t, id)
		require.Equal(t, "cancelled", p["outcome"])
		require.Equal(t, c.origin, p["issueId"])
		require.Equal(t, id, p["decisionId"])

		// Expiry wakes too.
		body = c.simple("wake me when it ages out")
		body["continuationPolicy"] = "wake_origin_agent"
		body["expiresAt"] = time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		id = c.mustPropose(t, body)["id"].(string)
		require.Contains(t, sweep(t, h, time.Now().Add(2*time.Hour)).Expired, id)
		require.Equal(t, "expired", c.wakePayload(t, id)["outcome"])

		// A decided outcome wakes too (another agent, so no wake of the first coalesces).
		g := newFixture(t, h, "Woken")
		body = g.simple("wake on decide")
		body["continuationPolicy"] = "wake_origin_agent"
		id = g.mustPropose(t, body)["id"].(string)
		require.Equal(t, http.StatusOK, g.decide(id, map[string]any{"optionId": "yes", "idempotencyKey": "k1"}).Status)
		require.Equal(t, "decided", g.wakePayload(t, id)["outcome"])
		// The same decide idempotency key resumes the outcome.
		res = g.decide(id, map[string]any{"optionId": "yes", "idempotencyKey": "k1"})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, "succeeded", res.Map(t)["executionStatus"])
	})

	t.Run("OpenCap", func(t *testing.T) {
		g := newFixture(t, h, "Capped")
		var first string
		for i := range 50 {
			d := g.mustPropose(t, g.simple("one of many"))
			if i == 0 {
				first = d["id"].(string)
			}
		}
		wantErr(t, g.propose(g.simple("one too many")), http.StatusTooManyRequests, "Open decision cap reached")
		require.Equal(t, http.StatusOK, h.Do("POST", "/api/decisions/"+first+"/cancel", nil).Status)
		g.mustPropose(t, g.simple("room again"))
	})

	t.Run("CompanyDeletePurges", func(t *testing.T) {
		g := newFixture(t, h, "Doomed")
		g.mustPropose(t, g.simple("doomed"))
		_, e := invoke(t, h, "decisions.queues.seed", g.co, map[string]any{"items": []any{
			map[string]any{"signal": "plan_document_confirmation", "sourceKind": "review", "sourceId": "r-1"}}})
		require.Nil(t, e)
		res := h.Do("PUT", "/api/companies/"+g.co+"/decision-triage/review/r-1", map[string]any{"decideBy": "today"})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		res = h.Do("POST", "/api/companies/"+g.co+"/decision-archive-proposals", map[string]any{"items": []any{
			map[string]any{"sourceKind": "review", "sourceId": "r-1"}}})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		require.Equal(t, http.StatusOK, h.Do("GET", "/api/companies/"+g.co+"/decision-queues", nil).Status)
		res = h.Do("DELETE", "/api/companies/"+g.co, nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		conn, err := pgx.Connect(context.Background(), h.DatabaseURL)
		require.NoError(t, err)
		defer conn.Close(context.Background())
		sdktest.WaitFor(t, 30*time.Second, func() bool {
			var n int
			require.NoError(t, conn.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM ext_decisions.decisions WHERE company_id = $1)
				+ (SELECT count(*) FROM ext_decisions.decision_queues WHERE company_id = $1)
				+ (SELECT count(*) FROM ext_decisions.decision_item_states WHERE company_id = $1)
				+ (SELECT count(*) FROM ext_decisions.decision_archive_proposals WHERE company_id = $1)
				+ (SELECT count(*) FROM ext_decisions.decision_archive_proposal_batches WHERE company_id = $1)
				+ (SELECT count(*) FROM ext_decisions.decision_feed_marks WHERE company_id = $1)`, g.co).Scan(&n))
			return n == 0
		}, "the deleted company's decisions and queues to go")
	})

	t.Run("BundleAllOrNothing", func(t *testing.T) {
		one, two := f.simple("bundled one"), f.simple("bundled two")
		one["idempotencyKey"], two["idempotencyKey"] = "same-key", "same-key"
		before := h.Do("GET", "/api/companies/"+f.co+"/decisions?limit=100", nil)
		wantErr(t, h.Do("POST", "/api/companies/"+f.co+"/decision-bundles", map[string]any{"title": "half", "decisions": []any{one, two}},
			f.inRun...), http.StatusConflict, "Decision idempotency key already used with a different payload")
		after := h.Do("GET", "/api/companies/"+f.co+"/decisions?limit=100", nil)
		require.JSONEq(t, string(before.Body), string(after.Body))
		// The first decision and the bundle row were inserted before the second failed: the
		// transaction took them back.
		var rows int
		require.NoError(t, h.Kernel.Pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM ext_decisions.decision_bundles
			WHERE company_id = $1 AND title = 'half') + (SELECT count(*) FROM ext_decisions.decisions WHERE company_id = $1
			AND idempotency_key = 'same-key')`, f.co).Scan(&rows))
		require.Zero(t, rows)

		res := h.Do("POST", "/api/companies/"+f.co+"/decision-bundles", map[string]any{"title": "whole",
			"decisions": []any{f.simple("b1"), f.simple("b2")}}, f.inRun...)
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		b := res.Map(t)
		require.Len(t, b["decisions"], 2)
		res = h.Do("GET", "/api/companies/"+f.co+"/decisions?bundleId="+b["id"].(string), nil)
		var list []map[string]any
		res.JSON(t, &list)
		require.Len(t, list, 2)
		wantErr(t, h.Do("GET", "/api/companies/"+f.co+"/decisions?status=bogus", nil), http.StatusBadRequest, "Invalid decision filters")
		for _, q := range []string{"limit=0", "limit=101", "bundleId=x", "originAgentId=x", "targetIssueId=x"} {
			wantErr(t, h.Do("GET", "/api/companies/"+f.co+"/decisions?"+q, nil), http.StatusBadRequest, "Invalid decision filters")
		}
		res = h.Do("GET", "/api/companies/"+f.co+"/decisions?limit=1&originAgentId="+f.agent.ID, nil)
		res.JSON(t, &list)
		require.Len(t, list, 1)
		require.Equal(t, b["decisions"].([]any)[1].(map[string]any)["id"], list[0]["id"], "newest first")
		res = h.Do("GET", "/api/companies/"+f.co+"/decisions?originAgentId="+uuid.NewString(), nil)
		res.JSON(t, &list)
		require.Empty(t, list)
	})

	t.Run("RaceToDecide", func(t *testing.T) {
		d := f.mustPropose(t, f.simple("race"))
		id := d["id"].(string)
		var wg sync.WaitGroup
		statuses := make([]int, 2)
		for i, opt := range []string{"yes", "no"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				statuses[i] = f.decide(id, map[string]any{"optionId": opt}).Status
			}()
		}
		wg.Wait()
		require.ElementsMatch(t, []int{http.StatusOK, http.StatusConflict}, statuses)
		res := h.Do("GET", "/api/decisions/"+id, nil)
		out := res.Map(t)
		require.LessOrEqual(t, len(out["executions"].([]any)), 1)
	})

	t.Run("Stats", func(t *testing.T) {
		g := newFixture(t, h, "Counted")
		mk := func(rule string) string {
			b := g.simple("s")
			b["ruleKey"] = rule
			return g.mustPropose(t, b)["id"].(string)
		}
		a1, a2, r1, c1 := mk("r"), mk("r"), mk("r"), mk("r")
		require.Equal(t, http.StatusOK, g.decide(a1, map[string]any{"optionId": "yes"}).Status)
		require.Equal(t, http.StatusOK, g.decide(a2, map[string]any{"optionId": "no"}).Status)
		require.Equal(t, http.StatusOK, h.Do("POST", "/api/decisions/"+r1+"/dismiss", nil).Status)
		require.Equal(t, http.StatusOK, h.Do("POST", "/api/decisions/"+c1+"/cancel", nil).Status)
		mk("other")
		b := g.simple("expiring")
		b["ruleKey"] = "other"
		b["expiresAt"] = time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		e1 := g.mustPropose(t, b)["id"].(string)
		require.Contains(t, sweep(t, h, time.Now().Add(2*time.Hour)).Expired, e1)
		res := h.Do("GET", "/api/companies/"+g.co+"/decisions/stats?groupBy=ruleKey", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		s := res.Map(t)
		require.Equal(t, map[string]any{"proposed": 6.0, "accepted": 2.0, "rejected": 1.0, "expired": 1.0}, s["totals"])
		groups := s["groups"].([]any)
		require.Len(t, groups, 2)
		gr := groups[1].(map[string]any)
		require.Equal(t, "r", gr["ruleKey"])
		require.EqualValues(t, 4, gr["proposed"])
		require.ElementsMatch(t, []any{map[string]any{"optionId": "yes", "count": 1.0}, map[string]any{"optionId": "no", "count": 1.0}},
			gr["chosenOptions"])
		wantErr(t, h.Do("GET", "/api/companies/"+g.co+"/decisions/stats", nil), http.StatusBadRequest, "Invalid decision stats filters")
		wantErr(t, h.Do("GET", "/api/companies/"+g.co+"/decisions/stats?groupBy=ruleKey&x=1", nil), http.StatusBadRequest,
			"Invalid decision stats filters")
		wantErr(t, h.Do("GET", "/api/companies/"+g.co+"/decisions/stats?groupBy=ruleKey&originAgentId="+uuid.NewString(), nil,
			g.agent.As("")...), http.StatusForbidden, "Agents may only read their own decision stats")
		res = h.Do("GET", "/api/companies/"+g.co+"/decisions/stats?groupBy=ruleKey", nil, g.agent.As("")...)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.EqualValues(t, 6, res.Map(t)["totals"].(map[string]any)["proposed"])
		future := url.QueryEscape(time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
		res = h.Do("GET", "/api/companies/"+g.co+"/decisions/stats?groupBy=ruleKey&since="+future, nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.EqualValues(t, 0, res.Map(t)["totals"].(map[string]any)["proposed"])
	})

	t.Run("AnotherCompanysAgentRefused", func(t *testing.T) {
		d := f.mustPropose(t, f.simple("private"))
		id := d["id"].(string)
		outsider := newFixture(t, h, "Outsider")
		as := outsider.inRun
		require.Equal(t, http.StatusForbidden, h.Do("POST", "/api/companies/"+f.co+"/decisions", f.simple("x"), as...).Status)
		require.Equal(t, http.StatusForbidden, h.Do("GET", "/api/companies/"+f.co+"/decisions/stats?groupBy=ruleKey", nil, as...).Status)
		wantErr(t, h.Do("GET", "/api/decisions/"+id, nil, as...), http.StatusNotFound, "Decision not found")
		wantErr(t, h.Do("POST", "/api/decisions/"+id+"/cancel", nil, as...), http.StatusNotFound, "Decision not found")
		require.Equal(t, http.StatusForbidden, h.Do("POST", "/api/decisions/"+id+"/decide", map[string]any{"optionId": "yes"}, as...).Status)
		require.Equal(t, http.StatusForbidden, h.Do("POST", "/api/decisions/"+id+"/dismiss", map[string]any{}, as...).Status)
		require.Equal(t, http.StatusForbidden, h.Do("GET", "/api/companies/"+f.co+"/decisions", nil, as...).Status)
		require.Equal(t, http.StatusForbidden, h.Do("POST", "/api/companies/"+f.co+"/decision-bundles",
			map[string]any{"title": "x", "decisions": []any{f.simple("x")}}, as...).Status)
		for _, path := range []string{"/decision-queues", "/decision-queue-seed-rules", "/decision-triage/decision/" + id,
			"/decision-archive-proposals"} {
			require.Equal(t, http.StatusForbidden, h.Do("GET", "/api/companies/"+f.co+path, nil, as...).Status, path)
		}
		require.Equal(t, "open", h.Do("GET", "/api/decisions/"+id, nil).Map(t)["status"])
		// A proposal in the outsider's own company may not target this company's issues.
		body := outsider.simple("cross")
		body["options"] = []any{map[string]any{"id": "a", "label": "A", "effects": []any{
			map[string]any{"type": "comment_on_issue", "targetIssueId": f.origin, "bodyMarkdown": "x"}}}}
		wantErr(t, outsider.propose(body), http.StatusUnprocessableEntity, "All referenced issues must exist in the company")
	})

	t.Run("Queues", func(t *testing.T) {
		base := "/api/companies/" + f.co + "/decision-queue"
		res := h.Do("GET", base+"-seed-rules", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		var cat []map[string]any
		res.JSON(t, &cat)
		require.Len(t, cat, 3)
		require.Equal(t, "prs", cat[0]["key"])

		// An engineer agent holds neither queue permission.
		require.Equal(t, http.StatusForbidden, h.Do("GET", base+"s", nil, f.agent.As("")...).Status)
		require.Equal(t, http.StatusForbidden, h.Do("POST", base+"s", map[string]any{"key": "mine", "title": "Mine"}, f.agent.As("")...).Status)

		// Granted the keys, an agent reads and manages queues.
		reader := h.CreateAgent(f.co, "Queue keeper", "engineer")
		require.NoError(t, h.Kernel.GrantPermission(context.Background(), f.co, "agent", reader.ID, "decision_queue:read", ""))
		require.Equal(t, http.StatusOK, h.Do("GET", base+"s", nil, reader.As("")...).Status)
		require.Equal(t, http.StatusForbidden, h.Do("POST", base+"s", map[string]any{"key": "agents", "title": "Agents"}, reader.As("")...).Status)
		require.NoError(t, h.Kernel.GrantPermission(context.Background(), f.co, "agent", reader.ID, "decision_queue:manage", ""))
		res = h.Do("POST", base+"s", map[string]any{"key": "agents", "title": "Agents"}, reader.As("")...)
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		require.Equal(t, "agent", res.Map(t)["createdByType"])
		require.Equal(t, reader.ID, res.Map(t)["createdByAgentId"])

		res = h.Do("POST", base+"s", map[string]any{"key": "Not Kebab", "title": "x"})
		wantErr(t, res, http.StatusBadRequest, "Validation error")
		res = h.Do("POST", base+"s", map[string]any{"key": "triage", "title": "Triage", "retentionDays": 30})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		require.Equal(t, false, res.Map(t)["seedRulesEnabled"])
		wantErr(t, h.Do("POST", base+"s", map[string]any{"key": "triage", "title": "Again"}), http.StatusConflict, "Decision queue key already exists")
		wantErr(t, h.Do("PATCH", base+"s/triage", map[string]any{}), http.StatusBadRequest, "Validation error")
		res = h.Do("PATCH", base+"s/triage", map[string]any{"title": "Triage lane"})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, "Triage lane", res.Map(t)["title"])
		wantErr(t, h.Do("PATCH", base+"s/missing", map[string]any{"title": "x"}), http.StatusNotFound, "Decision queue not found")

		res = h.Do("POST", base+"s/triage/items", map[string]any{"sourceKind": "decision", "sourceId": "d-1"})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		wantErr(t, h.Do("POST", base+"s/triage/items", map[string]any{"sourceKind": "bogus", "sourceId": "d-1"}),
			http.StatusBadRequest, "Validation error")
		res = h.Do("GET", base+"s/triage/items", nil)
		var items []map[string]any
		res.JSON(t, &items)
		require.Len(t, items, 1)
		require.Equal(t, http.StatusOK, h.Do("DELETE", base+"s/triage/items/decision/d-1", nil).Status)
		require.Equal(t, http.StatusNotFound, h.Do("DELETE", base+"s/triage/items/decision/d-1", nil).Status)

		// Seeding creates the built-in queue and adds items; turning seeding off stops additions.
		seed := func(id string) map[string]any {
			out, e := invoke(t, h, "decisions.queues.seed", f.co, map[string]any{"items": []any{
				map[string]any{"signal": "ask_user_questions", "sourceKind": "issue_thread_interaction", "sourceId": id}}})
			require.Nil(t, e)
			var m map[string]any
			require.NoError(t, json.Unmarshal(out, &m))
			return m
		}
		// (The items read above built the attention feed, which made the questions queue
		// already when this company has open decisions.)
		require.Equal(t, 1.0, seed("q-1")["itemsSeeded"])
		require.Equal(t, map[string]any{"queuesSeeded": []any{}, "itemsSeeded": 0.0}, seed("q-1"))
		res = h.Do("GET", base+"s", nil)
		var queues []map[string]any
		res.JSON(t, &queues)
		require.Len(t, queues, 3)
		require.Equal(t, "questions", queues[0]["key"])
		require.Equal(t, true, queues[0]["seedRulesEnabled"])
		require.Equal(t, http.StatusOK, h.Do("PATCH", base+"s/questions", map[string]any{"seedRulesEnabled": false}).Status)
		require.Equal(t, 0.0, seed("q-2")["itemsSeeded"])
		// The list read built the attention feed too (this company's open decisions joined
		// the questions queue while seeding was on); the offered q-1 stayed, q-2 never came.
		res = h.Do("GET", base+"s/questions/items", nil)
		res.JSON(t, &items)
		var offered []any
		for _, it := range items {
			if it["sourceKind"] == "issue_thread_interaction" {
				offered = append(offered, it["sourceId"])
			}
		}
		require.Equal(t, []any{"q-1"}, offered)
		entries, err := h.Kernel.ActivityList(context.Background(), &kernel.ActivityListParams{CompanyID: f.co,
			Action: "decision_queue_item.seeded", Limit: 200})
		require.NoError(t, err)
		require.Len(t, entries, len(items))
		entries, err = h.Kernel.ActivityList(context.Background(), &kernel.ActivityListParams{CompanyID: f.co,
			Action: "decision_queue.seeded", Limit: 10})
		require.NoError(t, err)
		require.Len(t, entries, 1)
	})

	t.Run("AttentionFeedSeedsTheQuestionsQueue", func(t *testing.T) {
		g := newFixture(t, h, "Feed")
		base := "/api/companies/" + g.co + "/decision-queue"
		one := g.mustPropose(t, g.simple("first question"))["id"].(string)
		two := g.mustPropose(t, g.simple("second question"))["id"].(string)
		decided := g.mustPropose(t, g.simple("answered before the feed"))["id"].(string)
		require.Equal(t, http.StatusOK, g.decide(decided, map[string]any{"optionId": "no"}).Status)

		itemIDs := func(query string) []string {
			t.Helper()
			res := h.Do("GET", base+"s/questions/items"+query, nil)
			require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
			var items []map[string]any
			res.JSON(t, &items)
			var ids []string
			for _, it := range items {
				require.Equal(t, "decision", it["sourceKind"])
				require.Equal(t, "seed:ask_user_questions", it["addedBy"])
				ids = append(ids, it["sourceId"].(string))
			}
			return ids
		}
		res := h.Do("GET", base+"s", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		var queues []map[string]any
		res.JSON(t, &queues)
		require.Len(t, queues, 1)
		require.Equal(t, "questions", queues[0]["key"])
		require.Equal(t, true, queues[0]["seedRulesEnabled"])
		require.EqualValues(t, 2, queues[0]["itemCount"])
		require.ElementsMatch(t, []string{one, two}, itemIDs(""))
		for action, n := range map[string]int{"decision_queue.seeded": 1, "decision_queue_item.seeded": 2} {
			entries, err := h.Kernel.ActivityList(context.Background(), &kernel.ActivityListParams{CompanyID: g.co, Action: action, Limit: 10})
			require.NoError(t, err)
			require.Len(t, entries, n, action)
		}

		// Reading again adds nothing; a new question joins on the next read.
		three := g.mustPropose(t, g.simple("third question"))["id"].(string)
		require.ElementsMatch(t, []string{one, two, three}, itemIDs(""))

		// An archived item leaves the lane (and is not offered again) until revived.
		res = h.Do("POST", "/api/companies/"+g.co+"/decision-retention/decision/"+one+"/archive", map[string]any{"reason": "stale"})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.ElementsMatch(t, []string{two, three}, itemIDs(""))
		require.ElementsMatch(t, []string{one, two, three}, itemIDs("?includeArchived=true"))

		// seedRulesEnabled false stops additions and keeps what is there.
		res = h.Do("PATCH", base+"s/questions", map[string]any{"seedRulesEnabled": false})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		g.mustPropose(t, g.simple("fourth question"))
		require.ElementsMatch(t, []string{two, three}, itemIDs(""))
		wantErr(t, h.Do("GET", base+"s/questions/items?includeArchived=maybe", nil), http.StatusBadRequest, "Validation error")
	})

	t.Run("TriageRetentionArchive", func(t *testing.T) {
		co := "/api/companies/" + f.co
		triage := func(kind, id string) string { return co + "/decision-triage/" + kind + "/" + id }
		retention := func(kind, id string) string { return co + "/decision-retention/" + kind + "/" + id }

		res := h.Do("GET", triage("review", "r-a"), nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		st := res.Map(t)
		require.Nil(t, st["decideBy"])
		require.Equal(t, false, st["keep"])
		require.Nil(t, st["archivedAt"])
		require.EqualValues(t, 0, st["pendingArchiveProposals"])
		wantErr(t, h.Do("GET", triage("bogus", "r-a"), nil), http.StatusBadRequest, "Validation error")
		require.Equal(t, http.StatusForbidden, h.Do("GET", triage("review", "r-a"), nil, f.agent.As("")...).Status)
		require.Equal(t, http.StatusForbidden, h.Do("PUT", triage("review", "r-a"), map[string]any{"decideBy": "today"},
			f.agent.As("")...).Status)

		for _, bad := range []map[string]any{{"decideBy": "tomorrow"}, {"decideBy": "2026-13-40"},
			{"snoozedUntil": time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)}, {"snoozedUntil": "soon"}} {
			wantErr(t, h.Do("PUT", triage("review", "r-a"), bad), http.StatusBadRequest, "Validation error")
		}
		now := time.Now().UTC()
		sunday := now.AddDate(0, 0, (7-int(now.Weekday()))%7).Format(time.DateOnly)
		for decideBy, date := range map[string]any{"today": now.Format(time.DateOnly), "this_week": sunday,
			"2031-02-03": "2031-02-03", "whenever": nil} {
			res = h.Do("PUT", triage("review", "r-a"), map[string]any{"decideBy": decideBy})
			require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
			st = res.Map(t)
			require.Equal(t, decideBy, st["decideBy"])
			require.Equal(t, date, st["decideByDate"], decideBy)
		}
		res = h.Do("PUT", triage("review", "r-a"), map[string]any{"decideBy": nil})
		require.Nil(t, res.Map(t)["decideBy"])

		// A lane with a one-day retention holding three items; one snoozed.
		res = h.Do("POST", co+"/decision-queues", map[string]any{"key": "reviews", "title": "Reviews", "retentionDays": 1})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		for _, id := range []string{"r-a", "r-b", "r-c"} {
			res = h.Do("POST", co+"/decision-queues/reviews/items", map[string]any{"sourceKind": "review", "sourceId": id})
			require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		}
		lane := func(query string) []string {
			t.Helper()
			res := h.Do("GET", co+"/decision-queues/reviews/items"+query, nil)
			require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
			var items []map[string]any
			res.JSON(t, &items)
			var ids []string
			for _, it := range items {
				ids = append(ids, it["sourceId"].(string))
			}
			return ids
		}
		snooze := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		res = h.Do("PUT", triage("review", "r-b"), map[string]any{"decideBy": "today", "snoozedUntil": snooze})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.ElementsMatch(t, []string{"r-a", "r-c"}, lane(""))
		require.ElementsMatch(t, []string{"r-a", "r-b", "r-c"}, lane("?includeSnoozed=true"))

		// Archive proposals: idempotent by key, then accepted by archiving or rejected by keep.
		proposals := co + "/decision-archive-proposals"
		body := map[string]any{"idempotencyKey": "tidy-1", "items": []any{
			map[string]any{"sourceKind": "review", "sourceId": "r-a", "reason": "merged long ago"},
			map[string]any{"sourceKind": "review", "sourceId": "r-c", "reason": "superseded"}}}
		res = h.Do("POST", proposals, body)
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		batch := res.Map(t)
		require.Len(t, batch["proposals"], 2)
		first := batch["proposals"].([]any)[0].(map[string]any)
		require.Equal(t, "pending", first["status"])
		require.Equal(t, "r-a", first["sourceId"])
		require.Equal(t, "user", first["proposedByType"])
		res = h.Do("POST", proposals, body)
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		require.Equal(t, batch["id"], res.Map(t)["id"])
		body["items"] = body["items"].([]any)[:1]
		wantErr(t, h.Do("POST", proposals, body), http.StatusConflict,
			"Decision archive proposal idempotency key already used with a different payload")
		wantErr(t, h.Do("POST", proposals, map[string]any{"items": []any{}}), http.StatusBadRequest, "Validation error")
		wantErr(t, h.Do("POST", proposals, map[string]any{"items": []any{map[string]any{"sourceKind": "review"}}}),
			http.StatusBadRequest, "Validation error")
		require.Equal(t, http.StatusForbidden, h.Do("POST", proposals, body, f.agent.As("")...).Status)
		require.EqualValues(t, 1, h.Do("GET", triage("review", "r-a"), nil).Map(t)["pendingArchiveProposals"])

		res = h.Do("POST", retention("review", "r-a")+"/archive", map[string]any{"reason": "done with it"})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		st = res.Map(t)
		require.NotNil(t, st["archivedAt"])
		require.Equal(t, "done with it", st["archiveReason"])
		require.Equal(t, "user", st["archivedByType"])
		require.EqualValues(t, 0, st["pendingArchiveProposals"])
		require.ElementsMatch(t, []string{"r-c"}, lane(""))
		require.ElementsMatch(t, []string{"r-a", "r-c"}, lane("?includeArchived=true"))

		wantErr(t, h.Do("PATCH", retention("review", "r-c"), map[string]any{}), http.StatusBadRequest, "Validation error")
		res = h.Do("PATCH", retention("review", "r-c"), map[string]any{"keep": true})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, true, res.Map(t)["keep"])
		var list []map[string]any
		res = h.Do("GET", proposals+"?status=accepted", nil)
		res.JSON(t, &list)
		require.Len(t, list, 1)
		require.Equal(t, "r-a", list[0]["sourceId"])
		res = h.Do("GET", proposals+"?status=rejected", nil)
		res.JSON(t, &list)
		require.Len(t, list, 1)
		require.Equal(t, "r-c", list[0]["sourceId"])
		wantErr(t, h.Do("GET", proposals+"?status=maybe", nil), http.StatusBadRequest, "Validation error")

		// Two days on, retention removes every item of the one-day lane but the kept one.
		out := sweep(t, h, time.Now().Add(48*time.Hour))
		require.GreaterOrEqual(t, out.PrunedItems, 2)
		require.Equal(t, []string{"r-c"}, lane("?includeArchived=true&includeSnoozed=true"))

		res = h.Do("POST", retention("review", "r-a")+"/revive", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Nil(t, res.Map(t)["archivedAt"])
		entries, err := h.Kernel.ActivityList(context.Background(), &kernel.ActivityListParams{CompanyID: f.co,
			EntityType: "decision_item", Limit: 50})
		require.NoError(t, err)
		actions := map[string]bool{}
		for _, e := range entries {
			actions[e.Action] = true
		}
		require.Equal(t, map[string]bool{"decision_item.triaged": true, "decision_item.archived": true,
			"decision_item.retention_updated": true, "decision_item.revived": true}, actions)
	})

	t.Run("TreeSnapshotAndAFailedOutcome", func(t *testing.T) {
		root := f.issue(t, map[string]any{"title": "tree to cut", "assigneeAgentId": f.agent.ID})["id"].(string)
		f.issue(t, map[string]any{"title": "branch", "parentId": root})
		d := f.mustPropose(t, map[string]any{"title": "cut the tree", "body": "b", "options": []any{
			map[string]any{"id": "cut", "label": "Cut", "style": "destructive", "effects": []any{
				map[string]any{"type": "cancel_issue_tree", "targetIssueId": root, "reasonComment": "cut"}}}}})
		snap := d["targetSnapshots"].(map[string]any)[root].(map[string]any)
		require.EqualValues(t, 1, snap["childCount"])
		require.EqualValues(t, 1, snap["descendantCount"])
		require.Equal(t, f.agent.ID, snap["assigneeAgentId"])
		require.Contains(t, snap, "assigneeUserId")

		note := f.mustPropose(t, map[string]any{"title": "note on the tree", "body": "b", "options": []any{
			map[string]any{"id": "note", "label": "Note", "effects": []any{
				map[string]any{"type": "comment_on_issue", "targetIssueId": root, "bodyMarkdown": "noted"}}}}})["id"].(string)

		// The tree grows after the proposals: the strict tree effect is skipped, nothing ran;
		// a strict comment on the same issue is not moved by a new child.
		f.issue(t, map[string]any{"title": "new branch", "parentId": root})
		res := h.Do("GET", "/api/companies/"+f.co+"/decisions?targetIssueId="+root, nil)
		var list []map[string]any
		res.JSON(t, &list)
		require.Len(t, list, 2)
		changed := map[any]any{}
		for _, row := range list {
			changed[row["id"]] = row["targetChanged"]
		}
		require.Equal(t, map[any]any{d["id"]: map[string]any{root: true}, note: map[string]any{}}, changed)
		res = f.decide(note, map[string]any{"optionId": "note"})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, "succeeded", res.Map(t)["executionStatus"])
		res = f.decide(d["id"].(string), map[string]any{"optionId": "cut"})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		out := res.Map(t)
		require.Equal(t, "failed", out["executionStatus"])
		require.Equal(t, "skipped", out["executions"].([]any)[0].(map[string]any)["status"])
		require.NotEqual(t, "cancelled", f.getIssue(t, root)["status"])
	})

	t.Run("RaceOfTheSameChoice", func(t *testing.T) {
		body := f.simple("same choice race")
		body["options"].([]any)[0].(map[string]any)["effects"].([]any)[0].(map[string]any)["bodyMarkdown"] = "raced once " + uuid.NewString()
		marker := body["options"].([]any)[0].(map[string]any)["effects"].([]any)[0].(map[string]any)["bodyMarkdown"].(string)
		id := f.mustPropose(t, body)["id"].(string)
		var wg sync.WaitGroup
		statuses := make([]int, 4)
		for i := range statuses {
			wg.Add(1)
			go func() {
				defer wg.Done()
				statuses[i] = f.decide(id, map[string]any{"optionId": "yes"}).Status
			}()
		}
		wg.Wait()
		// One request decides; the others replay the same outcome (rule 6).
		require.Equal(t, []int{200, 200, 200, 200}, statuses)
		sdktest.WaitFor(t, 30*time.Second, func() bool {
			return h.Do("GET", "/api/decisions/"+id, nil).Map(t)["executionStatus"] == "succeeded"
		}, "the raced decision to settle")
		got := h.Do("GET", "/api/decisions/"+id, nil).Map(t)
		require.Len(t, got["executions"], 1)
		entries, err := h.Kernel.ActivityList(context.Background(), &kernel.ActivityListParams{CompanyID: f.co,
			Action: "decision.decided", EntityID: id, Limit: 10})
		require.NoError(t, err)
		require.Len(t, entries, 1)
		comments := string(h.Do("GET", "/api/issues/"+f.origin+"/comments", nil).Body)
		require.Equal(t, 1, strings.Count(comments, marker))
	})
}
