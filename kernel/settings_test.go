package kernel_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/kernel"
)

// experimentalDefaults are the keys of reference-samples/experimental_before.json in order,
// with cases, status cards and built-in agents off by default as the spec says.
var experimentalDefaults = []struct {
	key string
	val any
}{
	{"enableEnvironments", false}, {"enableNativeRunner", true}, {"enableManagedSandboxOnly", false},
	{"enableIsolatedWorkspaces", false}, {"enableIsolatedWorkspacesByDefault", false},
	{"enableStreamlinedLeftNavigation", true}, {"enableStreamlinedUi", true}, {"enableApps", true},
	{"enableChatConnectors", false}, {"enablePipelines", false}, {"enableCases", false}, {"enableAgentChat", false},
	{"enableConferenceRoomChat", false}, {"enableClassicTaskInterface", false}, {"enableIssuePlanDecompositions", false},
	{"enableExperimentalFileViewer", false}, {"enableExternalObjects", false}, {"enableSmokeLab", false},
	{"enableBuiltInAgents", false}, {"enableBetaSkills", false}, {"enableSummaries", false}, {"enableStatusCards", false},
	{"enableDecisions", false}, {"enableGoalsSidebarLink", false}, {"enableServerInfoDebugView", false},
	{"enableServiceDeveloperMode", false}, {"enableSimplifiedEnglishInteractions", false},
	{"enableFirstTaskPlanProposal", false}, {"autoRestartDevServerWhenIdle", false},
	{"enableWorkspaceBranchReconcileForward", true}, {"enableWorkspaceDirtyQuarantineRepair", true},
	{"enableOwnerInstanceAdmin", false}, {"enableSandboxDuplexBridge", false}, {"enableRunnerPreviewIngress", false},
	{"enableWorktreeRunExecution", false}, {"worktreeRunExecutionActivatedAt", nil},
	{"worktreeRunExecutionActivationInstanceId", nil},
}

// orderedKeys returns the top-level keys of a JSON object in document order.
func orderedKeys(t *testing.T, body []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	tok, err := dec.Token()
	require.NoError(t, err)
	require.Equal(t, json.Delim('{'), tok)
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		require.NoError(t, err)
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		require.NoError(t, dec.Decode(&skip))
	}
	return keys
}

func TestSettingsExperimental(t *testing.T) {
	t.Parallel()
	env := ktStart(t, ktLocal())
	ctx := context.Background()

	r := env.Do(t, "GET", "/api/instance/settings/experimental", nil).RequireStatus(t, http.StatusOK)
	var wantKeys []string
	want := map[string]any{}
	for _, d := range experimentalDefaults {
		wantKeys = append(wantKeys, d.key)
		want[d.key] = d.val
	}
	require.Equal(t, wantKeys, orderedKeys(t, r.Body))
	require.Equal(t, want, r.Object(t))
	for _, flag := range []string{"enableCases", "enableStatusCards", "enableBuiltInAgents"} {
		on, err := env.K.ExperimentalFlag(ctx, flag)
		require.NoError(t, err)
		require.False(t, on, flag)
	}

	patched := env.Do(t, "PATCH", "/api/instance/settings/experimental", map[string]any{"enableCases": true, "enableApps": false}).
		RequireStatus(t, http.StatusOK)
	require.Equal(t, wantKeys, orderedKeys(t, patched.Body))
	want["enableCases"], want["enableApps"] = true, false
	require.Equal(t, want, patched.Object(t))
	require.Equal(t, want, env.Do(t, "GET", "/api/instance/settings/experimental", nil).RequireStatus(t, http.StatusOK).Object(t))
	on, err := env.K.ExperimentalFlag(ctx, "enableCases")
	require.NoError(t, err)
	require.True(t, on, "a PATCH is visible at once on this node")

	// A second patch merges with the first.
	env.Do(t, "PATCH", "/api/instance/settings/experimental", map[string]any{
		"enableStatusCards": true, "worktreeRunExecutionActivatedAt": "2026-01-02T03:04:05Z",
	}).RequireStatus(t, http.StatusOK)
	got := env.Do(t, "GET", "/api/instance/settings/experimental", nil).Object(t)
	require.Equal(t, true, got["enableCases"])
	require.Equal(t, true, got["enableStatusCards"])
	require.Equal(t, "2026-01-02T03:04:05Z", got["worktreeRunExecutionActivatedAt"])
	cleared := env.Do(t, "PATCH", "/api/instance/settings/experimental", map[string]any{"worktreeRunExecutionActivatedAt": nil}).Object(t)
	require.Nil(t, cleared["worktreeRunExecutionActivatedAt"])

	raw, err := env.K.SettingsGet(ctx, kernel.SettingsExperimental)
	require.NoError(t, err)
	require.JSONEq(t, string(env.Do(t, "GET", "/api/instance/settings/experimental", nil).Body), string(raw))

	var n int
	require.NoError(t, env.K.Pool.QueryRow(ctx, `SELECT count(*) FROM kernel.activity_log
		WHERE company_id IS NULL AND action = 'instance.settings_updated' AND entity_id = 'experimental'`).Scan(&n))
	require.Equal(t, 3, n)

	t.Run("Invalid", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			body any
			path string
		}{
			{"UnknownKey", map[string]any{"enableTimeTravel": true}, "enableTimeTravel"},
			{"WrongType", map[string]any{"enableCases": "yes"}, "enableCases"},
			{"NullFlag", map[string]any{"enableCases": nil}, "enableCases"},
			{"NumberForString", map[string]any{"worktreeRunExecutionActivationInstanceId": 7}, "worktreeRunExecutionActivationInstanceId"},
			{"MixedGoodAndBad", map[string]any{"enableDecisions": true, "bogus": 1}, "bogus"},
			{"NotAnObject", "[true]", ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				env.Do(t, "PATCH", "/api/instance/settings/experimental", tc.body).RequireValidation(t, tc.path)
			})
		}
		// Nothing of the failed patches was stored.
		got := env.Do(t, "GET", "/api/instance/settings/experimental", nil).Object(t)
		require.Equal(t, false, got["enableDecisions"])
		require.Equal(t, true, got["enableCases"])
	})

	t.Run("NeverExposesOtherSections", func(t *testing.T) {
		env.Do(t, "GET", "/api/instance/settings/jwt", nil).RequireStatus(t, http.StatusNotFound)
		_, err := env.K.SettingsGet(ctx, "jwt")
		require.Error(t, err)
		_, err = env.K.ExperimentalFlag(ctx, "noSuchFlag")
		require.Error(t, err)
		_, err = env.K.ExperimentalFlag(ctx, "worktreeRunExecutionActivatedAt")
		require.Error(t, err)
	})
}

func TestSettingsGeneral(t *testing.T) {
	t.Parallel()
	env := ktStart(t, ktLocal())
	r := env.Do(t, "GET", "/api/instance/settings/general", nil).RequireStatus(t, http.StatusOK)
	require.JSONEq(t, `{"censorUsernameInLogs":false,"keyboardShortcuts":true,"feedbackDataSharingPreference":"prompt"}`, string(r.Body))

	r = env.Do(t, "PATCH", "/api/instance/settings/general", map[string]any{"censorUsernameInLogs": true, "feedbackDataSharingPreference": "allowed"}).
		RequireStatus(t, http.StatusOK)
	require.JSONEq(t, `{"censorUsernameInLogs":true,"keyboardShortcuts":true,"feedbackDataSharingPreference":"allowed"}`, string(r.Body))
	raw, err := env.K.SettingsGet(context.Background(), kernel.SettingsGeneral)
	require.NoError(t, err)
	require.JSONEq(t, string(r.Body), string(raw))

	env.Do(t, "PATCH", "/api/instance/settings/general", map[string]any{"feedbackDataSharingPreference": "always"}).
		RequireValidation(t, "feedbackDataSharingPreference")
	env.Do(t, "PATCH", "/api/instance/settings/general", map[string]any{"enableCases": true}).RequireValidation(t, "enableCases")
	env.Do(t, "PATCH", "/api/instance/settings/general", map[string]any{"keyboardShortcuts": 0}).RequireValidation(t, "keyboardShortcuts")
}

func TestSettingsAccess(t *testing.T) {
	t.Parallel()
	env := ktStart(t, ktAuthenticated())
	_, admin := env.User(t, "Admin", true)
	_, member := env.User(t, "Member", false)
	for _, section := range []string{"general", "experimental"} {
		path := "/api/instance/settings/" + section
		env.Do(t, "GET", path, nil).RequireStatus(t, http.StatusUnauthorized)
		env.Do(t, "GET", path, nil, ktSession(member)).RequireStatus(t, http.StatusOK)
		env.Do(t, "PATCH", path, map[string]any{}, ktSession(member)).RequireError(t, http.StatusForbidden, "Instance admin access required")
		env.Do(t, "PATCH", path, map[string]any{}, ktSession(admin)).RequireStatus(t, http.StatusOK)
	}
	company := env.Company(t, map[string]any{"name": "Agent Home"}, ktSession(admin))["id"].(string)
	_, key := env.Agent(t, company, "Reader")
	env.Do(t, "GET", "/api/instance/settings/experimental", nil, ktBearer(key)).RequireStatus(t, http.StatusForbidden)
}

func TestSettingsSecondNodeSeesChange(t *testing.T) {
	t.Parallel()
	node1 := ktStart(t, ktLocal())
	node2 := ktServe(t, node1.DSN, ktLocal())
	ctx := context.Background()
	on, err := node2.K.ExperimentalFlag(ctx, "enableBuiltInAgents")
	require.NoError(t, err)
	require.False(t, on)
	node1.Do(t, "PATCH", "/api/instance/settings/experimental", map[string]any{"enableBuiltInAgents": true}).RequireStatus(t, http.StatusOK)
	require.Eventually(t, func() bool {
		on, err := node2.K.ExperimentalFlag(ctx, "enableBuiltInAgents")
		return err == nil && on
	}, 5*time.Second, 50*time.Millisecond)
}
