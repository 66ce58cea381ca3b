package kernel_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/kernel"
)

// authNewChallenge creates a CLI auth challenge and returns its id and token.
func authNewChallenge(t *testing.T, base, clientName string) (id, token string) {
	t.Helper()
	r := authCall(t, base, "POST", "/api/cli-auth/challenges", map[string]any{"clientName": clientName})
	require.Equal(t, http.StatusCreated, r.Status, "body: %s", r.Body)
	m := r.JSON(t)
	return m["id"].(string), m["token"].(string)
}

func TestCLIAuthLocal(t *testing.T) {
	t.Parallel()
	k, base := authStartKernel(t, kernel.Config{DeploymentMode: kernel.ModeLocalTrusted, APIURL: "http://127.0.0.1:3100/"})
	ctx := context.Background()
	companyID := authCompany(t, k, "Acme")
	authMembership(t, k, companyID, kernel.LocalBoardUserID, "owner")

	t.Run("Flow", func(t *testing.T) {
		t.Parallel()
		r := authCall(t, base, "POST", "/api/cli-auth/challenges", map[string]any{"clientName": "laptop"})
		require.Equal(t, http.StatusCreated, r.Status, "body: %s", r.Body)
		created := r.JSON(t)
		id, token := created["id"].(string), created["token"].(string)
		require.Regexp(t, `^pcp_cli_auth_[0-9a-f]{48}$`, token)
		require.Equal(t, "pending", created["status"])
		require.Equal(t, "http://127.0.0.1:3100/cli-auth/"+id, created["approveUrl"])
		require.NotContains(t, created["approveUrl"], token)
		expires, err := time.Parse(time.RFC3339Nano, created["expiresAt"].(string))
		require.NoError(t, err)
		require.WithinDuration(t, time.Now().Add(10*time.Minute), expires, time.Minute)

		var stored string
		require.NoError(t, k.Pool.QueryRow(ctx, `SELECT row_to_json(c)::text FROM kernel.cli_auth_challenges c WHERE id = $1`, id).Scan(&stored))
		require.NotContains(t, stored, token)

		// Without the token: status only. With a wrong token: 401.
		r = authCall(t, base, "GET", "/api/cli-auth/challenges/"+id, nil)
		require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
		require.Equal(t, "pending", r.JSON(t)["status"])
		require.Equal(t, "laptop", r.JSON(t)["clientName"])
		authCall(t, base, "GET", "/api/cli-auth/challenges/"+id+"?token=pcp_cli_auth_"+authRandHex(24), nil).
			requireError(t, http.StatusUnauthorized, "Invalid CLI auth challenge token", "")
		r = authCall(t, base, "GET", "/api/cli-auth/challenges/"+id+"?token="+token, nil)
		require.Equal(t, "pending", r.JSON(t)["status"])
		require.NotContains(t, r.JSON(t), "boardApiKey")

		r = authCall(t, base, "POST", "/api/cli-auth/challenges/"+id+"/approve", nil)
		require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
		approved := r.JSON(t)
		require.Equal(t, "approved", approved["status"])
		require.Equal(t, kernel.LocalBoardUserID, approved["approvedByUserId"])
		keyID := approved["boardApiKeyId"].(string)
		require.NotContains(t, approved, "boardApiKey")

		// Reading without the token never shows the key.
		r = authCall(t, base, "GET", "/api/cli-auth/challenges/"+id, nil)
		require.NotContains(t, r.JSON(t), "boardApiKey")

		// The token holder gets the key once (here through the Bearer form).
		r = authCall(t, base, "GET", "/api/cli-auth/challenges/"+id, nil, authBearer(token))
		require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
		key := r.JSON(t)["boardApiKey"].(map[string]any)
		boardKey := key["token"].(string)
		require.Regexp(t, `^pcp_board_[0-9a-f]{48}$`, boardKey)
		require.Equal(t, keyID, key["id"])
		require.Equal(t, "cli: laptop", key["name"])
		r = authCall(t, base, "GET", "/api/cli-auth/challenges/"+id+"?token="+token, nil)
		require.Equal(t, "approved", r.JSON(t)["status"])
		require.NotContains(t, r.JSON(t), "boardApiKey", "shown only once")

		require.NoError(t, k.Pool.QueryRow(ctx, `SELECT row_to_json(c)::text FROM kernel.cli_auth_challenges c WHERE id = $1`, id).Scan(&stored))
		require.NotContains(t, stored, boardKey)
		require.Contains(t, stored, `"pending_key_sealed":null`)
		require.NoError(t, k.Pool.QueryRow(ctx, `SELECT row_to_json(b)::text FROM kernel.board_api_keys b WHERE id = $1`, keyID).Scan(&stored))
		require.NotContains(t, stored, boardKey)
		require.Contains(t, stored, kernel.HashToken(boardKey))

		r = authCall(t, base, "GET", "/api/cli-auth/me", nil, authBearer(boardKey))
		require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
		me := r.JSON(t)
		require.Equal(t, "board_key", me["source"])
		require.Equal(t, keyID, me["keyId"])
		require.Equal(t, kernel.LocalBoardUserID, me["userId"])
		require.Equal(t, []any{companyID}, me["companyIds"])
		authRequireSameKeys(t, "../../shared/reference-samples/cli_auth_me.json", me)

		// Approved challenges cannot be approved again or cancelled.
		authCall(t, base, "POST", "/api/cli-auth/challenges/"+id+"/approve", nil).requireError(t, http.StatusConflict, "already approved", "")
		authCall(t, base, "POST", "/api/cli-auth/challenges/"+id+"/cancel", map[string]any{"token": token}).requireError(t, http.StatusConflict, "already approved", "")

		r = authCall(t, base, "POST", "/api/cli-auth/revoke-current", nil, authBearer(boardKey))
		require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
		require.Equal(t, map[string]any{"revoked": true, "keyId": keyID}, r.JSON(t))
		authCall(t, base, "GET", "/api/cli-auth/me", nil, authBearer(boardKey)).requireError(t, http.StatusUnauthorized, "Invalid board API key", "")

		var actions []string
		rows, err := k.Pool.Query(ctx, `SELECT action FROM kernel.activity_log WHERE entity_id IN ($1, $2) ORDER BY created_at`, id, keyID)
		require.NoError(t, err)
		for rows.Next() {
			var a string
			require.NoError(t, rows.Scan(&a))
			actions = append(actions, a)
		}
		require.NoError(t, rows.Err())
		require.Equal(t, []string{"cli_auth_challenge.created", "cli_auth_challenge.approved", "cli_auth_challenge.key_delivered", "board_api_key.revoked"}, actions)
	})

	t.Run("Cancel", func(t *testing.T) {
		t.Parallel()
		id, token := authNewChallenge(t, base, "")
		r := authCall(t, base, "POST", "/api/cli-auth/challenges/"+id+"/cancel", nil, authBearer(token))
		require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
		require.Equal(t, "cancelled", r.JSON(t)["status"])
		authCall(t, base, "POST", "/api/cli-auth/challenges/"+id+"/approve", nil).requireError(t, http.StatusConflict, "cancelled", "")
		r = authCall(t, base, "POST", "/api/cli-auth/challenges/"+id+"/cancel", map[string]any{"token": token})
		require.Equal(t, http.StatusOK, r.Status, "cancelling twice is fine")
	})

	t.Run("Expired", func(t *testing.T) {
		t.Parallel()
		id, token := authNewChallenge(t, base, "slow")
		_, err := k.Pool.Exec(ctx, `UPDATE kernel.cli_auth_challenges SET expires_at = now() - interval '1 second' WHERE id = $1`, id)
		require.NoError(t, err)
		r := authCall(t, base, "GET", "/api/cli-auth/challenges/"+id+"?token="+token, nil)
		require.Equal(t, "expired", r.JSON(t)["status"])
		authCall(t, base, "POST", "/api/cli-auth/challenges/"+id+"/approve", nil).requireError(t, http.StatusConflict, "expired", "")
	})

	t.Run("NotFound", func(t *testing.T) {
		t.Parallel()
		for _, id := range []string{"0190a0a0-0000-7000-8000-000000000000", "nope"} {
			authCall(t, base, "GET", "/api/cli-auth/challenges/"+id, nil).requireError(t, http.StatusNotFound, "CLI auth challenge not found", "")
			authCall(t, base, "POST", "/api/cli-auth/challenges/"+id+"/approve", nil).requireError(t, http.StatusNotFound, "CLI auth challenge not found", "")
		}
	})

	t.Run("RevokeCurrentNeedsBoardKey", func(t *testing.T) {
		t.Parallel()
		authCall(t, base, "POST", "/api/cli-auth/revoke-current", nil).requireError(t, http.StatusBadRequest, "Current credential is not a board API key", "")
	})

	t.Run("CreateValidation", func(t *testing.T) {
		t.Parallel()
		authCall(t, base, "POST", "/api/cli-auth/challenges", map[string]any{"clientName": strings.Repeat("x", 201)}).
			requireError(t, http.StatusBadRequest, "Validation error", "")
		authCall(t, base, "POST", "/api/cli-auth/challenges", map[string]any{"requestedAccess": "root"}).
			requireError(t, http.StatusBadRequest, "Validation error", "")
		authCall(t, base, "POST", "/api/cli-auth/challenges", map[string]any{"requestedCompanyId": "acme"}).
			requireError(t, http.StatusBadRequest, "Validation error", "")
		// Unknown fields are ignored, as the reference product does.
		require.Equal(t, http.StatusCreated, authCall(t, base, "POST", "/api/cli-auth/challenges", map[string]any{"unknown": 1}).Status)
	})
}

func TestCLIAuthAuthenticated(t *testing.T) {
	t.Parallel()
	k, base := authStartKernel(t, kernel.Config{DeploymentMode: kernel.ModeAuthenticated, DeploymentExposure: kernel.ExposurePrivate, APIURL: "http://keel.internal"})
	session, userID := authSignUp(t, base, "cli@example.com")

	t.Run("ApproveNeedsBoard", func(t *testing.T) {
		t.Parallel()
		id, token := authNewChallenge(t, base, "ci")
		authCall(t, base, "POST", "/api/cli-auth/challenges/"+id+"/approve", nil).requireError(t, http.StatusUnauthorized, "Unauthorized", "")
		// The challenge token is not a credential for board routes.
		authCall(t, base, "POST", "/api/cli-auth/challenges/"+id+"/approve", nil, authBearer(token)).requireError(t, http.StatusUnauthorized, "", "agent_key_unknown")
		companyID := authCompany(t, k, "Acme")
		agentKey := authInsertAgentKey(t, k, authAgent(t, k, companyID, "Sneaky"))
		authCall(t, base, "POST", "/api/cli-auth/challenges/"+id+"/approve", nil, authBearer(agentKey)).requireError(t, http.StatusForbidden, "Board access required", "")
	})

	t.Run("CancelNeedsTokenOrBoard", func(t *testing.T) {
		t.Parallel()
		id, _ := authNewChallenge(t, base, "ci")
		authCall(t, base, "POST", "/api/cli-auth/challenges/"+id+"/cancel", nil).requireError(t, http.StatusUnauthorized, "token", "")
		authCall(t, base, "POST", "/api/cli-auth/challenges/"+id+"/cancel", map[string]any{"token": "pcp_cli_auth_" + authRandHex(24)}).
			requireError(t, http.StatusUnauthorized, "Invalid CLI auth challenge token", "")
		r := authCall(t, base, "POST", "/api/cli-auth/challenges/"+id+"/cancel", nil, authCookie(session))
		require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
		require.Equal(t, "cancelled", r.JSON(t)["status"])
	})

	t.Run("SessionApproves", func(t *testing.T) {
		t.Parallel()
		id, token := authNewChallenge(t, base, "desktop")
		r := authCall(t, base, "POST", "/api/cli-auth/challenges/"+id+"/approve", nil, authCookie(session))
		require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
		require.Equal(t, "http://keel.internal/cli-auth/"+id, r.JSON(t)["approveUrl"])
		key := authCall(t, base, "GET", "/api/cli-auth/challenges/"+id+"?token="+token, nil).JSON(t)["boardApiKey"].(map[string]any)
		me := authCall(t, base, "GET", "/api/cli-auth/me", nil, authBearer(key["token"].(string))).JSON(t)
		require.Equal(t, userID, me["userId"])
		require.Equal(t, "board_key", me["source"])
		require.Equal(t, key["id"], me["keyId"])

		// revoke-current from a session is refused; with the key it works.
		authCall(t, base, "POST", "/api/cli-auth/revoke-current", nil, authCookie(session)).requireError(t, http.StatusBadRequest, "Current credential is not a board API key", "")
		require.Equal(t, http.StatusOK, authCall(t, base, "POST", "/api/cli-auth/revoke-current", nil, authBearer(key["token"].(string))).Status)
	})

	// The reference product's CLI sends command, clientName and requestedAccess and reads
	// boardApiToken, approvalPath, approvalUrl, pollPath and suggestedPollIntervalMs.
	t.Run("ReferenceBody", func(t *testing.T) {
		t.Parallel()
		r := authCall(t, base, "POST", "/api/cli-auth/challenges", map[string]any{"command": "service auth login --api-base http://keel.internal",
			"clientName": "reference-cli", "requestedAccess": "board", "extra": true})
		require.Equal(t, http.StatusCreated, r.Status, "body: %s", r.Body)
		c := r.JSON(t)
		id, token, boardToken := c["id"].(string), c["token"].(string), c["boardApiToken"].(string)
		require.Regexp(t, `^pcp_board_[0-9a-f]{48}$`, boardToken)
		require.Equal(t, "/cli-auth/"+id+"?token="+token, c["approvalPath"])
		require.Equal(t, "http://keel.internal/cli-auth/"+id+"?token="+token, c["approvalUrl"])
		require.Equal(t, "/cli-auth/challenges/"+id, c["pollPath"])
		require.EqualValues(t, 1000, c["suggestedPollIntervalMs"])
		require.Equal(t, "board", c["requestedAccess"])

		// The approver sees the command; the board token works only after approval.
		got := authCall(t, base, "GET", "/api/cli-auth/challenges/"+id, nil).JSON(t)
		require.Equal(t, "service auth login --api-base http://keel.internal", got["command"])
		require.Equal(t, "reference-cli", got["clientName"])
		authCall(t, base, "GET", "/api/cli-auth/me", nil, authBearer(boardToken)).requireError(t, http.StatusUnauthorized, "", "")
		r = authCall(t, base, "POST", "/api/cli-auth/challenges/"+id+"/approve", map[string]any{"token": token}, authCookie(session))
		require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
		me := authCall(t, base, "GET", "/api/cli-auth/me", nil, authBearer(boardToken))
		require.Equal(t, http.StatusOK, me.Status, "body: %s", me.Body)
		require.Equal(t, userID, me.JSON(t)["userId"])
	})

	t.Run("RequestedAccessIsEnforced", func(t *testing.T) {
		t.Parallel()
		r := authCall(t, base, "POST", "/api/cli-auth/challenges", map[string]any{"command": "service admin", "requestedAccess": "instance_admin_required"})
		require.Equal(t, http.StatusCreated, r.Status, "body: %s", r.Body)
		authCall(t, base, "POST", "/api/cli-auth/challenges/"+r.JSON(t)["id"].(string)+"/approve", nil, authCookie(session)).
			requireError(t, http.StatusForbidden, "This CLI auth challenge requires an instance admin", "")
		companyID := authCompany(t, k, "Not Mine")
		r = authCall(t, base, "POST", "/api/cli-auth/challenges", map[string]any{"command": "service company", "requestedCompanyId": companyID})
		require.Equal(t, http.StatusCreated, r.Status, "body: %s", r.Body)
		authCall(t, base, "POST", "/api/cli-auth/challenges/"+r.JSON(t)["id"].(string)+"/approve", nil, authCookie(session)).
			requireError(t, http.StatusForbidden, "You do not have access to the requested company", "")
	})

	t.Run("MeNeedsBoard", func(t *testing.T) {
		t.Parallel()
		authCall(t, base, "GET", "/api/cli-auth/me", nil).requireError(t, http.StatusUnauthorized, "Unauthorized", "")
	})
}
