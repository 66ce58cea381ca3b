package routines_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

func TestRoutineCRUD(t *testing.T) {
	t.Parallel()
	h := startHost(t, sdktest.Options{})
	f := newFixture(t, h, "Crud")
	other := newFixture(t, h, "Crud Other")
	projectID := f.project(t, "Ops")
	res := h.Do("POST", "/api/companies/"+f.co+"/goals", map[string]any{"title": "Grow"})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	goalID := res.Map(t)["id"].(string)
	res = h.Do("POST", "/api/companies/"+f.co+"/issues", map[string]any{"title": "Parent"})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	parentID := res.Map(t)["id"].(string)

	t.Run("CreateDefaults", func(t *testing.T) {
		rt := f.routine(t, map[string]any{"title": "Daily digest"})
		require.Equal(t, "active", rt["status"], "an assignee makes it active")
		require.Equal(t, "medium", rt["priority"])
		require.Equal(t, "coalesce_if_active", rt["concurrencyPolicy"])
		require.Equal(t, "skip_missed", rt["catchUpPolicy"])
		require.Equal(t, "always", rt["activityGatePolicy"])
		require.Equal(t, "company", rt["activityGateScope"])
		require.Equal(t, []any{}, rt["variables"])
		require.Equal(t, "manual", rt["originKind"])
		require.Equal(t, "local-board", rt["createdByUserId"])
		for _, k := range []string{"id", "companyId", "projectId", "goalId", "parentIssueId", "description", "assigneeAgentId",
			"lastTriggeredAt", "lastEnqueuedAt", "createdAt", "updatedAt", "updatedByUserId", "responsibleUserId"} {
			require.Contains(t, rt, k)
		}
		e := activityEntries(t, h, f.co, "routine.created", rt["id"].(string))
		require.Len(t, e, 1)
		require.Equal(t, "user", e[0].ActorType)

		unassigned := f.routine(t, map[string]any{"title": "Someday", "assigneeAgentId": nil})
		require.Equal(t, "paused", unassigned["status"], "no assignee makes it paused")
		res := h.Do("POST", "/api/companies/"+f.co+"/routines", map[string]any{"title": "x", "status": "active"})
		wantErr(t, res, http.StatusUnprocessableEntity, "An active routine needs an assignee")
	})

	t.Run("CreateWithEverything", func(t *testing.T) {
		rt := f.routine(t, map[string]any{"title": "Review {{team}} for {{date}}", "description": "Scope: {{scope}}",
			"projectId": projectID, "goalId": goalID, "parentIssueId": parentID, "priority": "high",
			"concurrencyPolicy": "always_enqueue", "catchUpPolicy": "enqueue_missed_with_cap",
			"activityGatePolicy": "require_external_activity", "activityGateScope": "project",
			"variables": []map[string]any{{"name": "team", "label": "Team", "type": "text", "required": true, "defaultValue": "core"},
				{"name": "scope", "type": "select", "options": []string{"all", "mine"}, "defaultValue": "all"}}})
		require.Equal(t, projectID, rt["projectId"])
		require.Equal(t, "enqueue_missed_with_cap", rt["catchUpPolicy"])
		vars := rt["variables"].([]any)
		require.Len(t, vars, 2)
		require.Equal(t, "scope", vars[1].(map[string]any)["label"], "label defaults to the name")
		e := activityEntries(t, h, f.co, "routine.created", rt["id"].(string))
		require.Equal(t, projectID, details(t, e[0])["projectId"])

		d := f.get(t, rt["id"].(string))
		require.Equal(t, projectID, d["project"].(map[string]any)["id"])
		require.Contains(t, d["project"], "pauseReason")
		assignee := d["assignee"].(map[string]any)
		require.Equal(t, f.agent.ID, assignee["id"])
		for _, k := range []string{"name", "role", "title", "urlKey"} {
			require.Contains(t, assignee, k)
		}
		require.Equal(t, parentID, d["parentIssue"].(map[string]any)["id"])
		require.Equal(t, []any{}, d["triggers"])
		require.Equal(t, []any{}, d["recentRuns"])
		require.Nil(t, d["activeIssue"])
	})

	t.Run("CreateValidation", func(t *testing.T) {
		base := "/api/companies/" + f.co + "/routines"
		cases := []struct {
			name string
			body map[string]any
			path string
		}{
			{"missing title", map[string]any{"assigneeAgentId": f.agent.ID}, "title"},
			{"long title", map[string]any{"title": strings.Repeat("t", 201)}, "title"},
			{"bad priority", map[string]any{"title": "x", "priority": "urgent"}, "priority"},
			{"bad concurrency", map[string]any{"title": "x", "concurrencyPolicy": "sometimes"}, "concurrencyPolicy"},
			{"bad catch-up", map[string]any{"title": "x", "catchUpPolicy": "all"}, "catchUpPolicy"},
			{"bad gate", map[string]any{"title": "x", "activityGatePolicy": "maybe"}, "activityGatePolicy"},
			{"bad scope", map[string]any{"title": "x", "activityGateScope": "team"}, "activityGateScope"},
			{"bad status", map[string]any{"title": "x", "status": "running"}, "status"},
			{"unknown variable", map[string]any{"title": "Hi {{who}}"}, "title"},
			{"unknown variable in description", map[string]any{"title": "x", "description": "{{nope}}"}, "description"},
			{"malformed reference", map[string]any{"title": "Hi {{who"}, "title"},
			{"bad variable name", map[string]any{"title": "x", "variables": []map[string]any{{"name": "9lives"}}}, "variables.0.name"},
			{"bad default", map[string]any{"title": "x", "variables": []map[string]any{{"name": "n", "type": "number", "defaultValue": "many"}}},
				"variables.0.defaultValue"},
			{"bad project id", map[string]any{"title": "x", "projectId": "nope"}, "projectId"},
		}
		for _, tc := range cases {
			body := tc.body
			if _, ok := body["assigneeAgentId"]; !ok {
				body["assigneeAgentId"] = f.agent.ID
			}
			wantValidation(t, h.Do("POST", base, body), tc.path)
		}
		otherProject := other.project(t, "Theirs")
		for name, body := range map[string]map[string]any{
			"Project not found in this company":      {"title": "x", "assigneeAgentId": f.agent.ID, "projectId": otherProject},
			"Goal not found in this company":         {"title": "x", "assigneeAgentId": f.agent.ID, "goalId": "00000000-0000-0000-0000-000000000001"},
			"Parent issue not found in this company": {"title": "x", "assigneeAgentId": f.agent.ID, "parentIssueId": "00000000-0000-0000-0000-000000000001"},
			"Assignee agent not found in company":    {"title": "x", "assigneeAgentId": other.agent.ID},
		} {
			wantErr(t, h.Do("POST", base, body), http.StatusUnprocessableEntity, name)
		}
	})

	t.Run("ListNewestUpdateFirst", func(t *testing.T) {
		g := newFixture(t, h, "Lister")
		a := g.routine(t, map[string]any{"title": "A"})
		b := g.routine(t, map[string]any{"title": "B"})
		res := h.Do("PATCH", "/api/routines/"+a["id"].(string), map[string]any{"description": "touched"})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		res = h.Do("GET", "/api/companies/"+g.co+"/routines", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		var list []map[string]any
		res.JSON(t, &list)
		require.Len(t, list, 2)
		require.Equal(t, a["id"], list[0]["id"])
		require.Equal(t, b["id"], list[1]["id"])
		for _, item := range list {
			require.Equal(t, []any{}, item["triggers"])
			require.Contains(t, item, "lastRun")
			require.Contains(t, item, "activeIssue")
		}
		require.Equal(t, http.StatusOK, h.Do("GET", "/api/companies/"+g.co+"/routines", nil, g.agent.As("")...).Status)
		wantErr(t, h.Do("GET", "/api/companies/"+g.co+"/routines", nil, f.agent.As("")...), http.StatusForbidden, "")
	})

	t.Run("Patch", func(t *testing.T) {
		rt := f.routine(t, map[string]any{"title": "Patch me"})
		id := rt["id"].(string)
		res := h.Do("PATCH", "/api/routines/"+id, map[string]any{"title": "Patched", "priority": "low", "status": "paused",
			"activityGatePolicy": "require_external_activity", "projectId": projectID})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		got := res.Map(t)
		require.Equal(t, "Patched", got["title"])
		require.Equal(t, "paused", got["status"])
		require.Equal(t, "require_external_activity", got["activityGatePolicy"])
		e := activityEntries(t, h, f.co, "routine.updated", id)
		require.Len(t, e, 1)
		d := details(t, e[0])
		require.Equal(t, projectID, d["projectId"])
		require.Equal(t, "paused", d["status"])

		res = h.Do("PATCH", "/api/routines/"+id, map[string]any{"status": "active", "activityGatePolicy": "always"})
		require.Equal(t, "active", res.Map(t)["status"])
		// Removing the assignee pauses; activating without one is refused.
		res = h.Do("PATCH", "/api/routines/"+id, map[string]any{"assigneeAgentId": nil})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, "paused", res.Map(t)["status"])
		wantErr(t, h.Do("PATCH", "/api/routines/"+id, map[string]any{"status": "active"}), http.StatusUnprocessableEntity,
			"An active routine needs an assignee")
		res = h.Do("PATCH", "/api/routines/"+id, map[string]any{"assigneeAgentId": f.agent.ID, "status": "active"})
		require.Equal(t, "active", res.Map(t)["status"])

		wantValidation(t, h.Do("PATCH", "/api/routines/"+id, map[string]any{"title": "{{x}}"}), "title")
		wantValidation(t, h.Do("PATCH", "/api/routines/"+id, map[string]any{"title": nil}), "title")
		wantErr(t, h.Do("PATCH", "/api/routines/"+id, map[string]any{"goalId": "00000000-0000-0000-0000-000000000002"}),
			http.StatusUnprocessableEntity, "Goal not found in this company")

		res = h.Do("PATCH", "/api/routines/"+id, map[string]any{"status": "archived"})
		require.Equal(t, "archived", res.Map(t)["status"])
		wantErr(t, h.Do("PATCH", "/api/routines/"+id, map[string]any{"status": "active"}), http.StatusConflict, "")
		wantErr(t, h.Do("PATCH", "/api/routines/00000000-0000-0000-0000-000000000000", map[string]any{"title": "x"}),
			http.StatusNotFound, "Routine not found")
		wantErr(t, h.Do("GET", "/api/routines/not-a-uuid", nil), http.StatusNotFound, "Routine not found")
	})

	t.Run("AgentRules", func(t *testing.T) {
		g := newFixture(t, h, "Agent Rules")
		peer := h.CreateAgent(g.co, "Peer", "engineer")
		me := g.agent.As("")
		res := h.Do("POST", "/api/companies/"+g.co+"/routines", map[string]any{"title": "Mine", "assigneeAgentId": g.agent.ID}, me...)
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		mine := res.Map(t)
		require.Equal(t, g.agent.ID, mine["createdByAgentId"])
		wantErr(t, h.Do("POST", "/api/companies/"+g.co+"/routines", map[string]any{"title": "Theirs", "assigneeAgentId": peer.ID}, me...),
			http.StatusForbidden, "Agents can only create routines assigned to themselves")
		wantErr(t, h.Do("POST", "/api/companies/"+g.co+"/routines", map[string]any{"title": "Nobody's"}, me...),
			http.StatusForbidden, "Agents can only create routines assigned to themselves")

		theirs := g.routine(t, map[string]any{"title": "Peer's", "assigneeAgentId": peer.ID})
		require.Equal(t, http.StatusOK, h.Do("GET", "/api/routines/"+theirs["id"].(string), nil, me...).Status, "agents read any routine")
		wantErr(t, h.Do("PATCH", "/api/routines/"+theirs["id"].(string), map[string]any{"title": "Taken"}, me...),
			http.StatusForbidden, "Agents can only manage routines assigned to themselves")
		wantErr(t, h.Do("PATCH", "/api/routines/"+theirs["id"].(string), map[string]any{"status": "active"}, me...),
			http.StatusForbidden, "Agents can only manage routines assigned to themselves")
		wantErr(t, h.Do("PATCH", "/api/routines/"+mine["id"].(string), map[string]any{"assigneeAgentId": peer.ID}, me...),
			http.StatusForbidden, "Agents cannot reassign routines to another agent")
		res = h.Do("PATCH", "/api/routines/"+mine["id"].(string), map[string]any{"status": "paused"}, me...)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, g.agent.ID, res.Map(t)["updatedByAgentId"])
		wantErr(t, h.Do("POST", "/api/routines/"+theirs["id"].(string)+"/triggers", map[string]any{"kind": "api"}, me...),
			http.StatusForbidden, "Agents can only manage routines assigned to themselves")
		wantErr(t, h.Do("POST", "/api/routines/"+theirs["id"].(string)+"/run", map[string]any{}, me...),
			http.StatusForbidden, "Agents can only manage routines assigned to themselves")
		// Another company's agent cannot see the routine at all.
		wantErr(t, h.Do("GET", "/api/routines/"+mine["id"].(string), nil, f.agent.As("")...), http.StatusForbidden, "")
	})
}
