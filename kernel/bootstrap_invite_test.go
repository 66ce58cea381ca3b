package kernel_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/kernel"
)

// lockedBuffer is a log sink safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestBootstrapCEOInvite checks the bootstrap_ceo invite: an authenticated, public instance
// with no admin opens one at start and logs its link; the token reads as a company-less
// human invite; accepting needs a signed-in person and a human join, makes them instance
// admin once, and a newer invite replaces an unused older one.
func TestBootstrapCEOInvite(t *testing.T) {
	t.Parallel()
	var logs lockedBuffer
	cfg := kernel.Config{DeploymentMode: kernel.ModeAuthenticated, DeploymentExposure: kernel.ExposurePublic,
		PublicBaseURL: "https://keel.example", Logger: hclog.New(&hclog.LoggerOptions{Output: &logs})}
	env := ktStart(t, cfg)
	ctx := context.Background()

	// Start opened one and logged its URL.
	require.Contains(t, logs.String(), "https://keel.example/api/invites/"+kernel.InviteTokenPrefix)
	var open int
	require.NoError(t, env.K.Pool.QueryRow(ctx, `SELECT count(*) FROM kernel.invites WHERE invite_type = 'bootstrap_ceo' AND revoked_at IS NULL`).Scan(&open))
	require.Equal(t, 1, open)
	// A second start with the invite still open opens no other.
	ktServe(t, env.DSN, cfg)
	require.NoError(t, env.K.Pool.QueryRow(ctx, `SELECT count(*) FROM kernel.invites WHERE invite_type = 'bootstrap_ceo'`).Scan(&open))
	require.Equal(t, 1, open)

	// The CLI's call: a new link replaces the unused one.
	b, err := env.K.BootstrapInviteCreate(ctx, "")
	require.NoError(t, err)
	require.Equal(t, "https://keel.example/api/invites/"+b.Token, b.InviteURL)
	require.True(t, strings.HasPrefix(b.Token, kernel.InviteTokenPrefix))
	newer, err := env.K.BootstrapInviteCreate(ctx, "")
	require.NoError(t, err)
	env.Do(t, "GET", "/api/invites/"+b.Token, nil).RequireError(t, http.StatusNotFound, "Invite not found")
	b = newer

	got := env.Do(t, "GET", "/api/invites/"+b.Token, nil).RequireStatus(t, http.StatusOK).Object(t)
	require.Equal(t, "bootstrap_ceo", got["inviteType"])
	require.Equal(t, "human", got["allowedJoinTypes"])
	require.NotContains(t, got, "companyId")
	require.Equal(t, "/api/invites/"+b.Token+"/accept", got["acceptPath"])
	// The company routes of a token do not open for it, nor does revoke by id.
	env.Do(t, "GET", "/api/invites/"+b.Token+"/onboarding", nil).RequireError(t, http.StatusNotFound, "Invite not found")
	_, admin := env.User(t, "Some Admin", true)
	env.Do(t, "POST", "/api/invites/"+b.ID+"/revoke", nil, ktSession(admin)).RequireError(t, http.StatusNotFound, "Invite not found")

	accept := "/api/invites/" + b.Token + "/accept"
	env.Do(t, "POST", accept, map[string]any{}).RequireError(t, http.StatusUnauthorized, "Authenticated user required for bootstrap acceptance")
	ceoID, ceo := env.User(t, "First CEO", false)
	env.Do(t, "POST", accept, map[string]any{"requestType": "agent", "agentName": "Bot"}, ktSession(ceo)).
		RequireError(t, http.StatusBadRequest, "Bootstrap invite requires human request type")
	res := env.Do(t, "POST", accept, map[string]any{"requestType": "human"}, ktSession(ceo)).RequireStatus(t, http.StatusAccepted).Object(t)
	require.Equal(t, map[string]any{"inviteId": b.ID, "inviteType": "bootstrap_ceo", "bootstrapAccepted": true, "userId": ceoID}, res)
	var isAdmin bool
	require.NoError(t, env.K.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM kernel.instance_user_roles WHERE user_id = $1 AND role = 'instance_admin')`,
		ceoID).Scan(&isAdmin))
	require.True(t, isAdmin)
	// The new admin administers the instance; the invite is used up for everyone.
	env.Do(t, "GET", "/api/admin/users", nil, ktSession(ceo)).RequireStatus(t, http.StatusOK)
	_, other := env.User(t, "Latecomer", false)
	env.Do(t, "POST", accept, map[string]any{}, ktSession(other)).RequireError(t, http.StatusNotFound, "Invite not found")
	env.Do(t, "GET", "/api/invites/"+b.Token, nil).RequireError(t, http.StatusNotFound, "Invite not found")
	// With an admin, a restart opens no new invite.
	ktServe(t, env.DSN, cfg)
	require.NoError(t, env.K.Pool.QueryRow(ctx, `SELECT count(*) FROM kernel.invites WHERE invite_type = 'bootstrap_ceo'
		AND accepted_at IS NULL AND revoked_at IS NULL`).Scan(&open))
	require.Equal(t, 0, open)
}
