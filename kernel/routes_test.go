package kernel

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRouteTable(t *testing.T) {
	t.Parallel()
	route := func(method, pattern, owner string) *Route {
		return &Route{Method: method, Pattern: pattern, Owner: owner}
	}

	t.Run("MatchesStaticBeforeParam", func(t *testing.T) {
		t.Parallel()
		tbl := NewRouteTable()
		require.NoError(t, tbl.Add(route("GET", "/api/agents/{agentId}", "agents"), route("GET", "/api/agents/me", "agents")))
		m, _ := tbl.Match("GET", "/api/agents/me")
		require.Equal(t, "/api/agents/me", m.Route.Pattern)
		m, _ = tbl.Match("GET", "/api/agents/123")
		require.Equal(t, "/api/agents/{agentId}", m.Route.Pattern)
		require.Equal(t, map[string]string{"agentId": "123"}, m.Params)
	})

	t.Run("BacktracksFromStaticDeadEnd", func(t *testing.T) {
		t.Parallel()
		tbl := NewRouteTable()
		require.NoError(t, tbl.Add(route("GET", "/api/a/b/c", "x"), route("GET", "/api/a/{p}/d", "y")))
		m, _ := tbl.Match("GET", "/api/a/b/d")
		require.NotNil(t, m)
		require.Equal(t, "b", m.Params["p"])
	})

	t.Run("ParamsNamedByTheMatchedRoute", func(t *testing.T) {
		t.Parallel()
		tbl := NewRouteTable()
		require.NoError(t, tbl.Add(route("POST", "/api/invites/{inviteId}/revoke", "k"), route("POST", "/api/invites/{token}/accept", "k")))
		m, _ := tbl.Match("POST", "/api/invites/abc/accept")
		require.Equal(t, map[string]string{"token": "abc"}, m.Params)
		m, _ = tbl.Match("POST", "/api/invites/def/revoke")
		require.Equal(t, map[string]string{"inviteId": "def"}, m.Params)
	})

	t.Run("ReportsOtherMethod", func(t *testing.T) {
		t.Parallel()
		tbl := NewRouteTable()
		require.NoError(t, tbl.Add(route("GET", "/api/x", "k")))
		m, exists := tbl.Match("POST", "/api/x")
		require.Nil(t, m)
		require.True(t, exists)
		m, exists = tbl.Match("GET", "/api/y")
		require.Nil(t, m)
		require.False(t, exists)
	})

	t.Run("RefusesCollisionsAtomically", func(t *testing.T) {
		t.Parallel()
		tbl := NewRouteTable()
		require.NoError(t, tbl.Add(route("GET", "/api/companies/{companyId}", "kernel")))
		err := tbl.Add(route("POST", "/api/ok", "ext"), route("GET", "/api/companies/{id}", "ext"))
		require.ErrorContains(t, err, "route collision: GET /api/companies/{id} (ext) conflicts with GET /api/companies/{companyId} (kernel)")
		m, _ := tbl.Match("POST", "/api/ok")
		require.Nil(t, m, "a refused batch adds nothing")
	})

	t.Run("RemovesOwner", func(t *testing.T) {
		t.Parallel()
		tbl := NewRouteTable()
		require.NoError(t, tbl.Add(route("GET", "/api/x", "a"), route("GET", "/api/y", "b")))
		tbl.RemoveOwner("a")
		m, _ := tbl.Match("GET", "/api/x")
		require.Nil(t, m)
		require.Len(t, tbl.Routes(), 1)
	})

	t.Run("ValidatesPatterns", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct{ method, pattern, want string }{
			{"GET", "/v1/x", "must start with /api/"},
			{"TRACE", "/api/x", "unsupported method"},
			{"GET", "/api//x", "empty path segment"},
			{"GET", "/api/{x", "malformed parameter"},
		} {
			require.ErrorContains(t, NewRouteTable().Add(route(tc.method, tc.pattern, "o")), tc.want, tc.pattern)
		}
	})
}

func FuzzRouteMatch(f *testing.F) {
	tbl := NewRouteTable()
	for _, p := range []string{"/api/companies/{companyId}", "/api/companies/{companyId}/activity", "/api/agents/me", "/api/agents/{id}/keys/{keyId}", "/api/health"} {
		if err := tbl.Add(&Route{Method: "GET", Pattern: p}); err != nil {
			f.Fatal(err)
		}
	}
	f.Add("/api/companies/abc/activity")
	f.Add("/api/agents/me")
	f.Add("//api///")
	f.Fuzz(func(t *testing.T, path string) {
		m, _ := tbl.Match("GET", path)
		if m == nil {
			return
		}
		for name, v := range m.Params {
			if v == "" {
				t.Fatalf("empty parameter %s for %q", name, path)
			}
		}
	})
}

func TestRouteTableReplaceOwner(t *testing.T) {
	t.Parallel()
	route := func(method, pattern, owner string) *Route {
		return &Route{Method: method, Pattern: pattern, Owner: owner}
	}

	t.Run("SwapsOneOwnersRoutes", func(t *testing.T) {
		t.Parallel()
		tbl := NewRouteTable()
		oldA := route("GET", "/api/a", "ext")
		require.NoError(t, tbl.Add(oldA, route("GET", "/api/gone", "ext"), route("GET", "/api/other", "other")))
		newA := route("GET", "/api/a", "ext")
		require.NoError(t, tbl.ReplaceOwner("ext", newA, route("POST", "/api/b", "ext")))
		m, _ := tbl.Match("GET", "/api/a")
		require.Same(t, newA, m.Route)
		m, _ = tbl.Match("GET", "/api/gone")
		require.Nil(t, m)
		m, _ = tbl.Match("GET", "/api/other")
		require.NotNil(t, m)
		m, _ = tbl.Match("POST", "/api/b")
		require.NotNil(t, m)
	})

	t.Run("CollisionChangesNothing", func(t *testing.T) {
		t.Parallel()
		tbl := NewRouteTable()
		oldA := route("GET", "/api/a", "ext")
		require.NoError(t, tbl.Add(oldA, route("GET", "/api/other/{id}", "other")))
		err := tbl.ReplaceOwner("ext", route("GET", "/api/a", "ext"), route("GET", "/api/other/{x}", "ext"))
		require.ErrorContains(t, err, "route collision")
		m, _ := tbl.Match("GET", "/api/a")
		require.Same(t, oldA, m.Route)
	})

	t.Run("RefusesAnotherOwnersRoute", func(t *testing.T) {
		t.Parallel()
		tbl := NewRouteTable()
		require.ErrorContains(t, tbl.ReplaceOwner("ext", route("GET", "/api/a", "other")), "owned by other")
	})
}
