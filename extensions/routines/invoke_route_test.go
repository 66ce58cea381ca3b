package routines_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
	"github.com/keelhq/keel/sdktest"
)

// TestInvokeRoute serves routine routes to the built-in agent service as a provided method,
// with the routes' own checks, and refuses every other caller.
func TestInvokeRoute(t *testing.T) {
	t.Parallel()
	h := startHost(t, sdktest.Options{})
	f := newFixture(t, h, "Invoke Co")
	call := func(caller string, in map[string]any) *hostv1.InvokeResponse {
		b, err := json.Marshal(in)
		require.NoError(t, err)
		res, err := h.Supervisor.Invoke(context.Background(), caller, &hostv1.InvokeRequest{Method: "routines.invokeRoute",
			InputJson: b, CompanyId: f.co})
		require.NoError(t, err)
		return res
	}
	var ans struct {
		Status int            `json:"status"`
		Body   map[string]any `json:"body"`
	}
	res := call("builtinagents", map[string]any{"method": "POST", "path": "/api/companies/" + f.co + "/routines",
		"body": map[string]any{"title": "Weekly", "assigneeAgentId": f.agent.ID, "status": "paused"}})
	require.Nil(t, res.Error)
	require.NoError(t, json.Unmarshal(res.OutputJson, &ans))
	require.Equal(t, http.StatusCreated, ans.Status, "%v", ans.Body)
	require.Equal(t, "paused", f.get(t, ans.Body["id"].(string))["status"])

	// The route's own validation answers as the route would.
	res = call("builtinagents", map[string]any{"method": "POST", "path": "/api/companies/" + f.co + "/routines", "body": map[string]any{}})
	require.Nil(t, res.Error)
	require.NoError(t, json.Unmarshal(res.OutputJson, &ans))
	require.Equal(t, http.StatusBadRequest, ans.Status)

	res = call("cases", map[string]any{"method": "GET", "path": "/api/companies/" + f.co + "/routines"})
	require.NotNil(t, res.Error)
	require.EqualValues(t, http.StatusForbidden, res.Error.Status)
}
