package kernel_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/kernel"
)

func TestActivityRoutes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := ktStart(t, ktLocal())
	company := env.Company(t, map[string]any{"name": "Activity Co"})["id"].(string)
	other := env.Company(t, map[string]any{"name": "Other Co"})["id"].(string)
	agentID, agentKey := env.Agent(t, company, "Logger")
	otherAgent, _ := env.Agent(t, other, "Stranger")
	path := "/api/companies/" + company + "/activity"

	created := env.Do(t, "POST", path, map[string]any{
		"actorType": "user", "actorId": "local-board", "action": "issue.created", "entityType": "issue",
		"entityId": "ISS-1", "agentId": agentID, "details": map[string]any{"title": "first"},
	}).RequireStatus(t, http.StatusCreated).Object(t)
	require.Equal(t, company, created["companyId"])
	require.Equal(t, "issue.created", created["action"])
	require.Equal(t, agentID, created["agentId"])
	require.Equal(t, map[string]any{"title": "first"}, created["details"])
	require.NotEmpty(t, created["id"])
	require.NotEmpty(t, created["createdAt"])

	// Defaults: actorType system, details {}.
	plain := env.Do(t, "POST", path, map[string]any{"actorId": "cron", "action": "issue.updated", "entityType": "issue", "entityId": "ISS-1"}).
		RequireStatus(t, http.StatusCreated).Object(t)
	require.Equal(t, "system", plain["actorType"])
	require.Equal(t, map[string]any{}, plain["details"])
	require.Nil(t, plain["agentId"])

	for i := range 3 {
		env.Do(t, "POST", path, map[string]any{"actorType": "agent", "actorId": agentID, "action": "project.created",
			"entityType": "project", "entityId": fmt.Sprintf("P-%d", i)}).RequireStatus(t, http.StatusCreated)
	}
	// Another company's entries never show up.
	_, err := env.K.ActivityInsert(ctx, &kernel.ActivityInsertParams{CompanyID: other, Action: "issue.created", EntityType: "issue", EntityID: "ISS-1"})
	require.NoError(t, err)

	list := func(query string) []map[string]any {
		return env.Do(t, "GET", path+query, nil).RequireStatus(t, http.StatusOK).List(t)
	}
	actions := func(entries []map[string]any) []string {
		out := []string{}
		for _, e := range entries {
			out = append(out, e["action"].(string))
		}
		return out
	}

	all := list("")
	require.Equal(t, []string{"project.created", "project.created", "project.created", "issue.updated", "issue.created", "company.created"}, actions(all))
	require.Equal(t, "P-2", all[0]["entityId"], "newest first")

	for _, tc := range []struct {
		name, query string
		want        []string
	}{
		{"EntityType", "?entityType=issue", []string{"issue.updated", "issue.created"}},
		{"Entity", "?entityType=project&entityId=P-1", []string{"project.created"}},
		{"Agent", "?agentId=" + agentID, []string{"issue.created"}},
		{"Action", "?action=company.created", []string{"company.created"}},
		{"NoMatch", "?action=nothing.happened", []string{}},
		{"Limit", "?limit=2", []string{"project.created", "project.created"}},
		{"Offset", "?limit=2&offset=3", []string{"issue.updated", "issue.created"}},
		{"OffsetPastEnd", "?offset=100", []string{}},
		{"OtherCompanyAgent", "?agentId=" + otherAgent, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, actions(list(tc.query)))
		})
	}
	require.Equal(t, "P-0", list("?limit=1&offset=2")[0]["entityId"])

	t.Run("LimitBounds", func(t *testing.T) {
		for i := range 60 {
			_, err := env.K.ActivityInsert(ctx, &kernel.ActivityInsertParams{CompanyID: company, Action: "bulk.logged", EntityType: "bulk", EntityID: fmt.Sprint(i)})
			require.NoError(t, err)
		}
		require.Len(t, list(""), 50, "default limit")
		require.Len(t, list("?limit=500"), 66)
		require.Len(t, list("?limit=1"), 1)
		for _, q := range []string{"?limit=0", "?limit=501", "?limit=-1", "?limit=ten"} {
			env.Do(t, "GET", path+q, nil).RequireValidation(t, "limit")
		}
		env.Do(t, "GET", path+"?offset=-1", nil).RequireValidation(t, "offset")
		env.Do(t, "GET", path+"?agentId=not-a-uuid", nil).RequireValidation(t, "agentId")
	})

	t.Run("CreateValidation", func(t *testing.T) {
		good := func() map[string]any {
			return map[string]any{"actorType": "user", "actorId": "u", "action": "a.b", "entityType": "e", "entityId": "1"}
		}
		for _, tc := range []struct {
			name   string
			mutate func(map[string]any)
			path   string
		}{
			{"MissingAction", func(b map[string]any) { delete(b, "action") }, "action"},
			{"BlankActorID", func(b map[string]any) { b["actorId"] = " " }, "actorId"},
			{"MissingEntityType", func(b map[string]any) { delete(b, "entityType") }, "entityType"},
			{"MissingEntityID", func(b map[string]any) { delete(b, "entityId") }, "entityId"},
			{"BadActorType", func(b map[string]any) { b["actorType"] = "robot" }, "actorType"},
			{"AgentNotUUID", func(b map[string]any) { b["agentId"] = "agent-1" }, "agentId"},
			{"AgentOfOtherCompany", func(b map[string]any) { b["agentId"] = otherAgent }, "agentId"},
			{"UnknownAgent", func(b map[string]any) { b["agentId"] = uuid.NewString() }, "agentId"},
			{"DetailsNotObject", func(b map[string]any) { b["details"] = []int{1} }, "details"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				b := good()
				tc.mutate(b)
				env.Do(t, "POST", path, b).RequireValidation(t, tc.path)
			})
		}
		b := good()
		b["details"] = nil
		env.Do(t, "POST", path, b).RequireStatus(t, http.StatusCreated)
	})

	t.Run("AgentAccess", func(t *testing.T) {
		env.Do(t, "GET", path+"?limit=1", nil, ktBearer(agentKey)).RequireStatus(t, http.StatusOK)
		env.Do(t, "GET", "/api/companies/"+other+"/activity", nil, ktBearer(agentKey)).RequireStatus(t, http.StatusForbidden)
		env.Do(t, "POST", path, map[string]any{"actorId": "x", "action": "a", "entityType": "e", "entityId": "1"}, ktBearer(agentKey)).
			RequireError(t, http.StatusForbidden, "Board access required")
	})

	t.Run("MissingCompany", func(t *testing.T) {
		env.Do(t, "GET", "/api/companies/"+uuid.NewString()+"/activity", nil).RequireError(t, http.StatusNotFound, "Company not found")
	})
}

func TestActivityScan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := ktStart(t, ktLocal())
	company := env.Company(t, map[string]any{"name": "Scan Co"})["id"].(string)
	project := uuid.NewString()
	insert := func(action, entityType, entityID string, details any) *kernel.ActivityEntry {
		e, err := env.K.ActivityInsert(ctx, &kernel.ActivityInsertParams{CompanyID: company, Action: action,
			EntityType: entityType, EntityID: entityID, Details: details})
		require.NoError(t, err)
		return e
	}
	first := insert("issue.created", "issue", "a", map[string]any{"projectId": project})
	insert("issue.read_marked", "issue", "a", nil)
	third := insert("project.updated", "project", project, nil)
	insert("issue.created", "issue", "b", map[string]any{"projectId": uuid.NewString()})

	scan := func(p kernel.ActivityScanParams) []string {
		p.CompanyID = company
		p.ExcludeActions = append(p.ExcludeActions, "company.created")
		entries, err := env.K.ActivityScan(ctx, &p)
		require.NoError(t, err)
		out := []string{}
		for _, e := range entries {
			out = append(out, e.Action+":"+e.EntityID)
		}
		return out
	}
	tests := []struct {
		name string
		p    kernel.ActivityScanParams
		want []string
	}{
		{"everything, oldest first", kernel.ActivityScanParams{},
			[]string{"issue.created:a", "issue.read_marked:a", "project.updated:" + project, "issue.created:b"}},
		{"excluded actions", kernel.ActivityScanParams{ExcludeActions: []string{"issue.read_marked"}},
			[]string{"issue.created:a", "project.updated:" + project, "issue.created:b"}},
		{"project scope", kernel.ActivityScanParams{ProjectID: project},
			[]string{"issue.created:a", "project.updated:" + project}},
		{"cursor with id", kernel.ActivityScanParams{After: first.CreatedAt, AfterID: first.ID},
			[]string{"issue.read_marked:a", "project.updated:" + project, "issue.created:b"}},
		{"until is inclusive", kernel.ActivityScanParams{Until: third.CreatedAt, Limit: 2},
			[]string{"issue.created:a", "issue.read_marked:a"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, scan(tc.p))
		})
	}
	require.Len(t, scan(kernel.ActivityScanParams{Until: third.CreatedAt}), 3, "created at or before the third entry")
	_, err := env.K.ActivityScan(ctx, &kernel.ActivityScanParams{CompanyID: company, After: first.CreatedAt, AfterID: "nope"})
	require.Error(t, err)
}
