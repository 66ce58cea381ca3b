package kernel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/kernel"
)

func TestPrincipalURLKey(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, want string }{
		{"Builder", "builder"},
		{"  Senior Builder  ", "senior-builder"},
		{"QA / Release-Manager!", "qa-release-manager"},
		{"--CEO--", "ceo"},
		{"Agent 007", "agent-007"},
		{"Zoë", "zo"},
		{"***", "agent"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, kernel.AgentURLKey(tt.name), tt.name)
	}
}

// authRequireAPIError checks that err is an APIError with the status and text.
func authRequireAPIError(t *testing.T, err error, status int, text string) {
	t.Helper()
	var apiErr *kernel.APIError
	require.True(t, errors.As(err, &apiErr), "want APIError, got %v", err)
	require.Equal(t, status, apiErr.Status, "error: %v", err)
	require.Contains(t, apiErr.Message, text)
}

func TestPrincipalAgents(t *testing.T) {
	t.Parallel()
	k, base := authStartKernel(t, authLocalConfig())
	ctx := context.Background()

	t.Run("DuplicateNamesGetSuffixes", func(t *testing.T) {
		t.Parallel()
		companyID := authCompany(t, k, "Dupes")
		var names, keys []string
		for range 3 {
			a := authAgent(t, k, companyID, "Builder")
			names, keys = append(names, a.Name), append(keys, a.URLKey)
			require.Equal(t, kernel.AgentStatusIdle, a.Status)
			require.Equal(t, "general", a.Role)
		}
		require.Equal(t, []string{"Builder", "Builder 2", "Builder 3"}, names)
		require.Equal(t, []string{"builder", "builder-2", "builder-3"}, keys)

		// Names that derive the same key collide too; the lowest free suffix is taken.
		b := authAgent(t, k, companyID, "builder!")
		require.Equal(t, "builder! 4", b.Name)
		require.Equal(t, "builder-4", b.URLKey)

		// Another company is independent.
		other := authAgent(t, k, authCompany(t, k, "Elsewhere"), "Builder")
		require.Equal(t, "builder", other.URLKey)
	})

	t.Run("TerminationFreesTheKey", func(t *testing.T) {
		t.Parallel()
		companyID := authCompany(t, k, "Reuse")
		first := authAgent(t, k, companyID, "Builder")
		_, err := k.AgentSetStatus(ctx, first.ID, kernel.AgentStatusTerminated)
		require.NoError(t, err)
		second := authAgent(t, k, companyID, "Builder")
		require.Equal(t, "builder", second.URLKey)
		require.Equal(t, "Builder", second.Name)

		got, err := k.AgentGetByURLKey(ctx, companyID, "BUILDER")
		require.NoError(t, err)
		require.Equal(t, second.ID, got.ID)
		got, err = k.AgentGetByID(ctx, first.ID)
		require.NoError(t, err)
		require.Equal(t, kernel.AgentStatusTerminated, got.Status, "terminated agents stay readable by id")

		live, err := k.AgentList(ctx, companyID, false)
		require.NoError(t, err)
		require.Len(t, live, 1)
		all, err := k.AgentList(ctx, companyID, true)
		require.NoError(t, err)
		require.Len(t, all, 2)
		require.Equal(t, first.ID, all[0].ID)
	})

	t.Run("ConcurrentCreatesAreDistinct", func(t *testing.T) {
		t.Parallel()
		companyID := authCompany(t, k, "Race")
		const n = 12
		keys := make([]string, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				a, err := k.AgentCreate(ctx, &kernel.AgentCreateParams{CompanyID: companyID, Name: "Worker"})
				errs[i] = err
				if a != nil {
					keys[i] = a.URLKey
				}
			})
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
		want := []string{"worker"}
		for i := 2; i <= n; i++ {
			want = append(want, fmt.Sprintf("worker-%d", i))
		}
		sort.Strings(want)
		sort.Strings(keys)
		require.Equal(t, want, keys)
	})

	t.Run("CreateValidation", func(t *testing.T) {
		t.Parallel()
		companyID := authCompany(t, k, "Valid")
		tests := []struct {
			name   string
			params kernel.AgentCreateParams
			status int
			text   string
		}{
			{"EmptyName", kernel.AgentCreateParams{CompanyID: companyID, Name: "  "}, http.StatusBadRequest, "Validation error"},
			{"BadStatus", kernel.AgentCreateParams{CompanyID: companyID, Name: "X", Status: "asleep"}, http.StatusBadRequest, "Validation error"},
			{"Terminated", kernel.AgentCreateParams{CompanyID: companyID, Name: "X", Status: kernel.AgentStatusTerminated}, http.StatusBadRequest, "Validation error"},
			{"NotAUUID", kernel.AgentCreateParams{CompanyID: "acme", Name: "X"}, http.StatusBadRequest, "Validation error"},
			{"MissingCompany", kernel.AgentCreateParams{CompanyID: "0190a0a0-0000-7000-8000-000000000000", Name: "X"}, http.StatusNotFound, "Company not found"},
		}
		for _, tt := range tests {
			_, err := k.AgentCreate(ctx, &tt.params)
			authRequireAPIError(t, err, tt.status, tt.text)
		}
		a, err := k.AgentCreate(ctx, &kernel.AgentCreateParams{CompanyID: companyID, Name: "Chief", Role: "ceo", Status: kernel.AgentStatusPendingApproval})
		require.NoError(t, err)
		require.Equal(t, "ceo", a.Role)
		require.Equal(t, kernel.AgentStatusPendingApproval, a.Status)
	})

	t.Run("Lookups", func(t *testing.T) {
		t.Parallel()
		companyID := authCompany(t, k, "Lookups")
		for _, id := range []string{"", "not-a-uuid", "0190a0a0-0000-7000-8000-000000000000"} {
			a, err := k.AgentGetByID(ctx, id)
			require.NoError(t, err)
			require.Nil(t, a, id)
		}
		a, err := k.AgentGetByURLKey(ctx, companyID, "nobody")
		require.NoError(t, err)
		require.Nil(t, a)
		list, err := k.AgentList(ctx, companyID, true)
		require.NoError(t, err)
		require.NotNil(t, list)
		require.Empty(t, list)

		created := authAgent(t, k, companyID, "Reader")
		raw, err := json.Marshal(created)
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, json.Unmarshal(raw, &m))
		require.ElementsMatch(t, []string{"id", "companyId", "name", "urlKey", "role", "status", "createdAt", "updatedAt"}, authKeysOf(m))
	})

	t.Run("SetStatus", func(t *testing.T) {
		t.Parallel()
		companyID := authCompany(t, k, "Status")
		a := authAgent(t, k, companyID, "Mover")
		key := authCreateAgentKey(t, base, a.ID)
		key2 := authCreateAgentKey(t, base, a.ID)

		_, err := k.AgentSetStatus(ctx, a.ID, "asleep")
		authRequireAPIError(t, err, http.StatusBadRequest, "Validation error")
		_, err = k.AgentSetStatus(ctx, "0190a0a0-0000-7000-8000-000000000000", kernel.AgentStatusPaused)
		authRequireAPIError(t, err, http.StatusNotFound, "Agent not found")

		for _, s := range []string{kernel.AgentStatusActive, kernel.AgentStatusRunning, kernel.AgentStatusError, kernel.AgentStatusPaused, kernel.AgentStatusIdle} {
			got, err := k.AgentSetStatus(ctx, a.ID, s)
			require.NoError(t, err)
			require.Equal(t, s, got.Status)
		}
		got, err := k.AgentSetStatus(ctx, a.ID, kernel.AgentStatusTerminated)
		require.NoError(t, err)
		require.Equal(t, kernel.AgentStatusTerminated, got.Status)

		var live int
		require.NoError(t, k.Pool.QueryRow(ctx, `SELECT count(*) FROM kernel.agent_api_keys WHERE agent_id = $1 AND revoked_at IS NULL`, a.ID).Scan(&live))
		require.Zero(t, live, "terminating revokes every key")
		for _, tok := range []string{key, key2} {
			authCall(t, base, "GET", "/api/auth-test/whoami", nil, authBearer(tok)).requireError(t, http.StatusUnauthorized, "", "agent_terminated")
		}

		// Terminated is final.
		_, err = k.AgentSetStatus(ctx, a.ID, kernel.AgentStatusIdle)
		authRequireAPIError(t, err, http.StatusConflict, "Terminated agents cannot change status")
		got, err = k.AgentSetStatus(ctx, a.ID, kernel.AgentStatusTerminated)
		require.NoError(t, err)
		require.Equal(t, kernel.AgentStatusTerminated, got.Status)
	})

	t.Run("Rename", func(t *testing.T) {
		t.Parallel()
		companyID := authCompany(t, k, "Names")
		a := authAgent(t, k, companyID, "Alpha")
		authAgent(t, k, companyID, "Beta")
		gone := authAgent(t, k, companyID, "Gamma")
		_, err := k.AgentSetStatus(ctx, gone.ID, kernel.AgentStatusTerminated)
		require.NoError(t, err)

		_, err = k.AgentRename(ctx, a.ID, "BETA")
		authRequireAPIError(t, err, http.StatusConflict, "Agent name already in use")

		renamed, err := k.AgentRename(ctx, a.ID, "Gamma Ray")
		require.NoError(t, err)
		require.Equal(t, "gamma-ray", renamed.URLKey)
		renamed, err = k.AgentRename(ctx, a.ID, "Gamma")
		require.NoError(t, err, "a terminated agent's key is free")
		require.Equal(t, "Gamma", renamed.Name)
		require.Equal(t, "gamma", renamed.URLKey)
		renamed, err = k.AgentRename(ctx, a.ID, "gamma")
		require.NoError(t, err, "renaming onto its own key is fine")
		require.Equal(t, "gamma", renamed.Name)

		_, err = k.AgentRename(ctx, a.ID, " ")
		authRequireAPIError(t, err, http.StatusBadRequest, "Validation error")
		_, err = k.AgentRename(ctx, "0190a0a0-0000-7000-8000-000000000000", "X")
		authRequireAPIError(t, err, http.StatusNotFound, "Agent not found")
	})
}

func TestAgentSetStatusFrom(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k, _ := authStartKernel(t, authLocalConfig())
	companyID := authCompany(t, k, "Conditional")
	working := []string{kernel.AgentStatusIdle, kernel.AgentStatusActive, kernel.AgentStatusError, kernel.AgentStatusRunning}
	tests := []struct {
		name, from, want string
	}{
		{"an idle agent turns running", kernel.AgentStatusIdle, kernel.AgentStatusRunning},
		{"a paused agent stays paused", kernel.AgentStatusPaused, kernel.AgentStatusPaused},
		{"a terminated agent stays terminated, without an error", kernel.AgentStatusTerminated, kernel.AgentStatusTerminated},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ag := authAgent(t, k, companyID, "Worker "+tc.from)
			if tc.from != kernel.AgentStatusIdle {
				_, err := k.AgentSetStatus(ctx, ag.ID, tc.from)
				require.NoError(t, err)
			}
			got, err := k.AgentSetStatusFrom(ctx, ag.ID, kernel.AgentStatusRunning, working)
			require.NoError(t, err)
			require.Equal(t, tc.want, got.Status)
		})
	}
}
