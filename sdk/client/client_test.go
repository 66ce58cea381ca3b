package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEndpointPath(t *testing.T) {
	t.Parallel()
	e := Endpoint{Method: "GET", Path: "/api/issues/{id}/comments/{commentId}"}
	require.Equal(t, "/api/issues/ACME-1/comments/a%2Fb", e.path("ACME-1", "a/b"))
	require.Equal(t, "/api/companies", Endpoint{Path: "/api/companies"}.path())
}

// TestClient checks the client's HTTP behaviour against a stub: the bearer token, JSON
// bodies, lists with each item's own JSON, and API errors with their status and code.
func TestClient(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "Bearer pcp_board_x", r.Header.Get("Authorization"))
		switch r.Method + " " + r.URL.Path {
		case "GET /api/companies":
			w.Write([]byte(`[{"id":"c1","name":"Acme","extra":1},{"id":"c2","name":"Beta"}]`))
		case "POST /api/companies/c1/issues":
			var body map[string]any
			require.NoError(t, json.NewDecoder(r.Body).Decode(&body))
			require.Equal(t, map[string]any{"title": "T", "priority": "high"}, body)
			w.WriteHeader(http.StatusCreated)
			w.Write([]byte(`{"id":"i1","identifier":"ACM-1","title":"T","status":"backlog","priority":"high"}`))
		case "GET /api/heartbeat-runs/r1/log":
			require.Equal(t, "5", r.URL.Query().Get("offset"))
			w.Header().Set("X-Log-Offset", "8")
			w.Header().Set("X-Run-Live", "true")
			w.Write([]byte("abc"))
		default:
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"error":"Issue not found","code":"not_found"}`))
		}
	}))
	defer srv.Close()
	c := New(srv.URL+"/", "pcp_board_x")
	ctx := context.Background()

	list, err := c.Companies(ctx)
	require.NoError(t, err)
	require.Len(t, list.Items, 2)
	require.Equal(t, "Acme", list.Items[0].Name)
	require.JSONEq(t, `{"id":"c1","name":"Acme","extra":1}`, string(list.Items[0].JSON()))

	is, err := c.CreateIssue(ctx, "c1", IssueCreate{Title: "T", Priority: "high"})
	require.NoError(t, err)
	require.Equal(t, "ACM-1", is.Identifier)

	ch, err := c.RunLog(ctx, "r1", 5, true)
	require.NoError(t, err)
	require.Equal(t, &LogChunk{Data: []byte("abc"), Next: 8, Live: true}, ch)

	_, err = c.Issue(ctx, "nope")
	require.EqualError(t, err, "Issue not found (404 not_found)")
	require.True(t, IsStatus(err, http.StatusNotFound))
}
