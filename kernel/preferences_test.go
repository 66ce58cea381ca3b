package kernel_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// TestSidebarPreferences checks that sidebar orders round-trip at the instance and company
// level, belong to the user alone, are validated, and may be kept by a viewer.
func TestSidebarPreferences(t *testing.T) {
	t.Parallel()
	env, _, owner, company := peopleCompany(t)
	ctx := context.Background()

	t.Run("InstanceLevelRoundTrip", func(t *testing.T) {
		t.Parallel()
		_, me := env.User(t, "Prefs", false)
		got := env.Do(t, "GET", "/api/sidebar-preferences/me", nil, ktSession(me)).RequireStatus(t, http.StatusOK).Object(t)
		require.Equal(t, []any{}, got["orderedIds"])
		require.Nil(t, got["updatedAt"])
		a, b := uuid.NewString(), strings.ToUpper(uuid.NewString())
		saved := env.Do(t, "PATCH", "/api/sidebar-preferences/me", map[string]any{"orderedIds": []string{a, b}}, ktSession(me)).
			RequireStatus(t, http.StatusOK).Object(t)
		require.Equal(t, []any{a, strings.ToLower(b)}, saved["orderedIds"])
		require.NotNil(t, saved["updatedAt"])
		require.Equal(t, saved, env.Do(t, "GET", "/api/sidebar-preferences/me", nil, ktSession(me)).RequireStatus(t, http.StatusOK).Object(t))
		// PUT (the reference product's verb) replaces it too; an empty order is an order.
		env.Do(t, "PUT", "/api/sidebar-preferences/me", map[string]any{"orderedIds": []string{}}, ktSession(me)).RequireStatus(t, http.StatusOK)
		require.Equal(t, []any{}, env.Do(t, "GET", "/api/sidebar-preferences/me", nil, ktSession(me)).Object(t)["orderedIds"])
		// Another user's preferences are their own.
		require.Equal(t, []any{}, env.Do(t, "GET", "/api/sidebar-preferences/me", nil, ktSession(owner)).Object(t)["orderedIds"])
	})

	t.Run("CompanyLevelRoundTrip", func(t *testing.T) {
		t.Parallel()
		p1, p2 := uuid.NewString(), uuid.NewString()
		path := "/api/companies/" + company + "/sidebar-preferences/me"
		env.Do(t, "PUT", path, map[string]any{"orderedIds": []string{p2, p1}}, ktSession(owner)).RequireStatus(t, http.StatusOK)
		got := env.Do(t, "GET", path, nil, ktSession(owner)).RequireStatus(t, http.StatusOK).Object(t)
		require.Equal(t, []any{p2, p1}, got["orderedIds"])
		// The instance-level order is a different row.
		require.NotEqual(t, []any{p2, p1}, env.Do(t, "GET", "/api/sidebar-preferences/me", nil, ktSession(owner)).Object(t)["orderedIds"])
		// A second company of the same user keeps its own order.
		other := env.Company(t, map[string]any{"name": "Other Prefs Co"}, ktSession(owner))["id"].(string)
		require.Equal(t, []any{}, env.Do(t, "GET", "/api/companies/"+other+"/sidebar-preferences/me", nil, ktSession(owner)).Object(t)["orderedIds"])
	})

	t.Run("Validation", func(t *testing.T) {
		t.Parallel()
		many := make([]string, 501)
		for i := range many {
			many[i] = uuid.NewString()
		}
		dup := uuid.NewString()
		for _, c := range []struct {
			body any
			path string
		}{
			{map[string]any{}, "orderedIds"},
			{map[string]any{"orderedIds": []string{"not-a-uuid"}}, "orderedIds[0]"},
			{map[string]any{"orderedIds": []string{dup, dup}}, "orderedIds[1]"},
			{map[string]any{"orderedIds": many}, "orderedIds"},
			{map[string]any{"orderedIds": "x"}, "orderedIds"},
			{map[string]any{"orderedIds": []int{1}}, "orderedIds"},
		} {
			env.Do(t, "PATCH", "/api/sidebar-preferences/me", c.body, ktSession(owner)).RequireValidation(t, c.path)
			env.Do(t, "PUT", "/api/companies/"+company+"/sidebar-preferences/me", c.body, ktSession(owner)).RequireValidation(t, c.path)
		}
	})

	t.Run("Access", func(t *testing.T) {
		t.Parallel()
		viewerID, viewer := env.User(t, "Viewer", false)
		require.NoError(t, env.K.MembershipEnsure(ctx, company, "user", viewerID, "viewer"))
		_, stranger := env.User(t, "Stranger", false)
		path := "/api/companies/" + company + "/sidebar-preferences/me"
		id := uuid.NewString()
		// A viewer changes nothing in the company, but keeps their own sidebar.
		env.Do(t, "PUT", path, map[string]any{"orderedIds": []string{id}}, ktSession(viewer)).RequireStatus(t, http.StatusOK)
		require.Equal(t, []any{id}, env.Do(t, "GET", path, nil, ktSession(viewer)).Object(t)["orderedIds"])
		env.Do(t, "GET", path, nil, ktSession(stranger)).RequireError(t, http.StatusForbidden, "You do not have access to this company")
		env.Do(t, "PUT", path, map[string]any{"orderedIds": []string{}}, ktSession(stranger)).RequireStatus(t, http.StatusForbidden)
		env.Do(t, "GET", "/api/sidebar-preferences/me", nil).RequireStatus(t, http.StatusUnauthorized)
		_, key := env.Agent(t, company, "Prefs Bot")
		env.Do(t, "GET", "/api/sidebar-preferences/me", nil, ktBearer(key)).RequireError(t, http.StatusForbidden, "Board access required")
		env.Do(t, "GET", path, nil, ktBearer(key)).RequireError(t, http.StatusForbidden, "Board access required")
	})
}

// TestInboxDismissals checks dismiss versus snooze, their validation texts, the per-user
// list, restoring, and who may call.
func TestInboxDismissals(t *testing.T) {
	t.Parallel()
	env, _, owner, company := peopleCompany(t)
	ctx := context.Background()
	path := "/api/companies/" + company + "/inbox-dismissals"

	t.Run("DismissAndSnooze", func(t *testing.T) {
		t.Parallel()
		meID, me := env.User(t, "Dismisser", false)
		require.NoError(t, env.K.MembershipEnsure(ctx, company, "user", meID, "operator"))
		approvalKey := "approval:" + uuid.NewString()
		d := env.Do(t, "POST", path, map[string]any{"itemKey": approvalKey}, ktSession(me)).RequireStatus(t, http.StatusCreated).Object(t)
		require.Equal(t, "dismiss", d["kind"])
		require.Nil(t, d["snoozedUntil"])
		require.Equal(t, meID, d["userId"])
		until := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Millisecond)
		s := env.Do(t, "POST", path, map[string]any{"itemKey": "run:" + uuid.NewString(), "kind": "snooze",
			"snoozedUntil": until.Format("2006-01-02T15:04:05.000Z")}, ktSession(me)).RequireStatus(t, http.StatusCreated).Object(t)
		require.Equal(t, "snooze", s["kind"])
		got, err := time.Parse(time.RFC3339Nano, s["snoozedUntil"].(string))
		require.NoError(t, err)
		require.True(t, got.Equal(until), "%v vs %v", got, until)
		env.Do(t, "POST", path, map[string]any{"itemKey": "join:" + uuid.NewString(), "snoozedUntil": nil}, ktSession(me)).RequireStatus(t, http.StatusCreated)
		env.Do(t, "POST", path, map[string]any{"itemKey": "attention:decision:abc"}, ktSession(me)).RequireStatus(t, http.StatusCreated)

		list := env.Do(t, "GET", path, nil, ktSession(me)).RequireStatus(t, http.StatusOK).List(t)
		require.Len(t, list, 4)
		// Dismissing a snoozed item again turns it into a dismissal, one row per item.
		again := env.Do(t, "POST", path, map[string]any{"itemKey": s["itemKey"]}, ktSession(me)).RequireStatus(t, http.StatusCreated).Object(t)
		require.Equal(t, s["id"], again["id"])
		require.Equal(t, "dismiss", again["kind"])
		require.Nil(t, again["snoozedUntil"])
		require.Len(t, env.Do(t, "GET", path, nil, ktSession(me)).List(t), 4)
		// The owner's inbox is untouched by another user's dismissals.
		require.Empty(t, env.Do(t, "GET", path, nil, ktSession(owner)).List(t))

		// A snooze whose time has passed is no longer in effect.
		_, err = env.K.Pool.Exec(ctx, `UPDATE kernel.inbox_dismissals SET kind = 'snooze', snoozed_until = now() - interval '1 minute'
			WHERE company_id = $1 AND item_key = $2`, company, approvalKey)
		require.NoError(t, err)
		for _, d := range env.Do(t, "GET", path, nil, ktSession(me)).List(t) {
			require.NotEqual(t, approvalKey, d["itemKey"])
		}

		// Restoring removes it; a second restore finds nothing.
		env.Do(t, "DELETE", path+"/"+strings.Replace(s["itemKey"].(string), ":", "%3A", 1), nil, ktSession(me)).RequireStatus(t, http.StatusNoContent)
		env.Do(t, "DELETE", path+"/"+s["itemKey"].(string), nil, ktSession(me)).RequireError(t, http.StatusNotFound, "Inbox dismissal not found")
		require.Len(t, env.Do(t, "GET", path, nil, ktSession(me)).List(t), 2)
		actions := strings.Join(env.Actions(t, company), ",")
		for _, a := range []string{"inbox.dismissed", "inbox.snoozed", "inbox.restored"} {
			require.Contains(t, actions, a)
		}
	})

	t.Run("Validation", func(t *testing.T) {
		t.Parallel()
		future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		for _, c := range []struct {
			name string
			body map[string]any
			path string
			msg  string
		}{
			{"MissingKey", map[string]any{}, "itemKey", "is required"},
			{"UnknownPrefix", map[string]any{"itemKey": "issue:123"}, "itemKey", "Unsupported inbox item key"},
			{"BarePrefix", map[string]any{"itemKey": "run:"}, "itemKey", "Unsupported inbox item key"},
			{"NoPrefix", map[string]any{"itemKey": "approval"}, "itemKey", "Unsupported inbox item key"},
			{"TooLong", map[string]any{"itemKey": "run:" + strings.Repeat("x", 600)}, "itemKey", "Unsupported inbox item key"},
			{"BadKind", map[string]any{"itemKey": "run:1", "kind": "archive"}, "kind", "kind must be dismiss or snooze"},
			{"DismissWithTime", map[string]any{"itemKey": "run:1", "snoozedUntil": future}, "snoozedUntil",
				"snoozedUntil is only allowed when kind is snooze"},
			{"ExplicitDismissWithTime", map[string]any{"itemKey": "run:1", "kind": "dismiss", "snoozedUntil": future}, "snoozedUntil",
				"snoozedUntil is only allowed when kind is snooze"},
			{"SnoozeWithoutTime", map[string]any{"itemKey": "run:1", "kind": "snooze"}, "snoozedUntil",
				"snoozedUntil is required when kind is snooze"},
			{"SnoozeNotATime", map[string]any{"itemKey": "run:1", "kind": "snooze", "snoozedUntil": "tomorrow"}, "snoozedUntil",
				"snoozedUntil must be an ISO timestamp"},
			{"SnoozeNumber", map[string]any{"itemKey": "run:1", "kind": "snooze", "snoozedUntil": 1700000000}, "snoozedUntil",
				"snoozedUntil must be an ISO timestamp"},
			{"SnoozeDateOnly", map[string]any{"itemKey": "run:1", "kind": "snooze", "snoozedUntil": "2999-01-01"}, "snoozedUntil",
				"snoozedUntil must be an ISO timestamp"},
			{"SnoozeInThePast", map[string]any{"itemKey": "run:1", "kind": "snooze", "snoozedUntil": "2001-01-01T00:00:00Z"}, "snoozedUntil",
				"snoozedUntil must be in the future"},
		} {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				m := env.Do(t, "POST", path, c.body, ktSession(owner)).RequireError(t, http.StatusBadRequest, "Validation error")
				require.Contains(t, m["details"], map[string]any{"path": c.path, "message": c.msg}, "%v", m)
			})
		}
	})

	t.Run("Access", func(t *testing.T) {
		t.Parallel()
		viewerID, viewer := env.User(t, "Inbox Viewer", false)
		require.NoError(t, env.K.MembershipEnsure(ctx, company, "user", viewerID, "viewer"))
		// A viewer's inbox is theirs to tidy.
		env.Do(t, "POST", path, map[string]any{"itemKey": "run:" + uuid.NewString()}, ktSession(viewer)).RequireStatus(t, http.StatusCreated)
		_, stranger := env.User(t, "Inbox Stranger", false)
		env.Do(t, "POST", path, map[string]any{"itemKey": "run:1"}, ktSession(stranger)).
			RequireError(t, http.StatusForbidden, "You do not have access to this company")
		env.Do(t, "GET", path, nil, ktSession(stranger)).RequireError(t, http.StatusForbidden, "You do not have access to this company")
		env.Do(t, "POST", path, map[string]any{"itemKey": "run:1"}).RequireStatus(t, http.StatusUnauthorized)
		_, key := env.Agent(t, company, "Inbox Bot")
		env.Do(t, "POST", path, map[string]any{"itemKey": "run:1"}, ktBearer(key)).RequireError(t, http.StatusForbidden, "Board access required")
		env.Do(t, "GET", path, nil, ktBearer(key)).RequireError(t, http.StatusForbidden, "Board access required")
	})
}

// TestSidebarBadgesJoinRequests checks the kernel's own badge: pending join requests count
// for callers who may approve them, and a dismissed or snoozed one is left out. A bare
// kernel has no work or agents owner, so those counts are zero.
func TestSidebarBadgesJoinRequests(t *testing.T) {
	t.Parallel()
	env, _, owner, company := peopleCompany(t)
	ctx := context.Background()
	badges := func(opt ktOpt) map[string]any {
		t.Helper()
		return env.Do(t, "GET", "/api/companies/"+company+"/sidebar-badges", nil, opt).RequireStatus(t, http.StatusOK).Object(t)
	}
	want := func(inbox, joins float64) map[string]any {
		return map[string]any{"inbox": inbox, "approvals": float64(0), "failedRuns": float64(0), "joinRequests": joins}
	}
	require.Equal(t, want(0, 0), badges(ktSession(owner)))
	var requests []string
	for _, name := range []string{"Bot A", "Bot B", "Bot C"} {
		inv := createInvite(t, env, company, owner, map[string]any{"allowedJoinTypes": "agent"})
		res := env.Do(t, "POST", "/api/invites/"+inv["token"].(string)+"/accept", map[string]any{"requestType": "agent", "agentName": name}).
			RequireStatus(t, http.StatusCreated).Object(t)
		requests = append(requests, res["id"].(string))
	}
	require.Equal(t, want(3, 3), badges(ktSession(owner)))

	path := "/api/companies/" + company + "/inbox-dismissals"
	env.Do(t, "POST", path, map[string]any{"itemKey": "join:" + requests[0]}, ktSession(owner)).RequireStatus(t, http.StatusCreated)
	env.Do(t, "POST", path, map[string]any{"itemKey": "join:" + requests[1], "kind": "snooze",
		"snoozedUntil": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}, ktSession(owner)).RequireStatus(t, http.StatusCreated)
	require.Equal(t, want(1, 1), badges(ktSession(owner)))
	// The snooze ends: the request counts again.
	_, err := env.K.Pool.Exec(ctx, `UPDATE kernel.inbox_dismissals SET snoozed_until = now() - interval '1 second' WHERE item_key = $1`,
		"join:"+requests[1])
	require.NoError(t, err)
	require.Equal(t, want(2, 2), badges(ktSession(owner)))

	// Members who may not approve joins see none; agents of the company may read badges.
	opID, operator := env.User(t, "Badge Operator", false)
	require.NoError(t, env.K.MembershipEnsure(ctx, company, "user", opID, "operator"))
	require.Equal(t, want(0, 0), badges(ktSession(operator)))
	_, key := env.Agent(t, company, "Badge Bot")
	require.Equal(t, want(0, 0), badges(ktBearer(key)))
	_, stranger := env.User(t, "Badge Stranger", false)
	env.Do(t, "GET", "/api/companies/"+company+"/sidebar-badges", nil, ktSession(stranger)).
		RequireError(t, http.StatusForbidden, "You do not have access to this company")
	env.Do(t, "GET", "/api/companies/"+company+"/sidebar-badges", nil).RequireStatus(t, http.StatusUnauthorized)
}
