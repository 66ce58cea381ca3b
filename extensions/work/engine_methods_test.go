package work_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	extensionv1 "github.com/keelhq/keel/sdk/proto/extension/v1"
)

func TestIssueLocksMethod(t *testing.T) {
	t.Parallel()
	h := issStart(t)
	co := h.CreateCompany("Locks Co")
	other := h.CreateCompany("Locks Other")
	system := &extensionv1.Actor{Type: "system"}
	res := h.Do("POST", "/api/companies/"+co+"/projects", map[string]any{"name": "Ops"})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	projectID := res.Map(t)["id"].(string)
	res = h.Do("POST", "/api/companies/"+co+"/issues", map[string]any{"title": "Locked", "projectId": projectID})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	iss := res.Map(t)

	locks := func(company, id string) map[string]any {
		out, e := issCall(t, h, "issues.locks", company, system, map[string]any{"id": id})
		require.Nil(t, e)
		var m map[string]any
		require.NoError(t, json.Unmarshal(out, &m))
		return m
	}
	for _, ref := range []string{iss["id"].(string), iss["identifier"].(string), strings.ToLower(iss["identifier"].(string))} {
		got := locks(co, ref)
		require.Equal(t, true, got["found"], ref)
		require.Equal(t, iss["id"], got["id"])
		require.Equal(t, projectID, got["projectId"])
		require.Nil(t, got["executionRunId"])
		require.Nil(t, got["checkoutRunId"])
	}
	require.Equal(t, false, locks(other, iss["id"].(string))["found"], "another company's issue is not found")
	require.Equal(t, false, locks(co, "NOPE-1")["found"])
	_, e := issCall(t, h, "issues.locks", co, system, map[string]any{"id": ""})
	require.NotNil(t, e)
	require.EqualValues(t, http.StatusBadRequest, e.Status)
}
