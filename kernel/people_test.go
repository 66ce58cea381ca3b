package kernel_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/kernel"
)

// peopleCompany starts an authenticated kernel with an owner and a company.
func peopleCompany(t *testing.T) (env *ktEnv, ownerID, owner, company string) {
	t.Helper()
	env = ktStart(t, ktAuthenticated())
	ownerID, owner = env.User(t, "Owner", false)
	company = env.Company(t, map[string]any{"name": "People Co"}, ktSession(owner))["id"].(string)
	return env, ownerID, owner, company
}

// createInvite creates an invite as the session and returns its body.
func createInvite(t *testing.T, env *ktEnv, company, session string, body map[string]any) map[string]any {
	t.Helper()
	return env.Do(t, "POST", "/api/companies/"+company+"/invites", body, ktSession(session)).RequireStatus(t, http.StatusCreated).Object(t)
}

func TestInvites(t *testing.T) {
	t.Parallel()
	env, ownerID, owner, company := peopleCompany(t)
	ctx := context.Background()

	t.Run("CreateAndReadByToken", func(t *testing.T) {
		t.Parallel()
		inv := createInvite(t, env, company, owner, map[string]any{"allowedJoinTypes": "human", "agentMessage": "hello"})
		token := inv["token"].(string)
		require.True(t, strings.HasPrefix(token, kernel.InviteTokenPrefix), token)
		require.Equal(t, "active", inv["status"])
		require.Equal(t, "operator", inv["membershipRole"])
		require.Equal(t, ownerID, inv["invitedByUserId"])
		require.Equal(t, env.URL+"/api/invites/"+token, inv["inviteUrl"])
		var stored string
		require.NoError(t, env.K.Pool.QueryRow(ctx, `SELECT token_hash FROM kernel.invites WHERE id = $1`, inv["id"]).Scan(&stored))
		require.Equal(t, kernel.HashToken(token), stored, "only the hash is stored")

		got := env.Do(t, "GET", "/api/invites/"+token, nil).RequireStatus(t, http.StatusOK).Object(t)
		require.Equal(t, "People Co", got["companyName"])
		require.Equal(t, "human", got["allowedJoinTypes"])
		require.Equal(t, "Owner", got["invitedByName"])
		require.Equal(t, "/api/invites/"+token+"/accept", got["acceptPath"])
		require.NotContains(t, string(env.Do(t, "GET", "/api/invites/"+token, nil).Body), "token_hash")
	})

	t.Run("Validation", func(t *testing.T) {
		t.Parallel()
		for _, c := range []struct {
			body map[string]any
			path string
		}{
			{map[string]any{"allowedJoinTypes": "robots"}, "allowedJoinTypes"},
			{map[string]any{"membershipRole": "emperor"}, "membershipRole"},
			{map[string]any{"expiresInHours": 0}, "expiresInHours"},
			{map[string]any{"expiresInHours": 24 * 31}, "expiresInHours"},
			{map[string]any{"expiresAt": "2001-01-01T00:00:00Z"}, "expiresAt"},
			{map[string]any{"defaultsPayload": []int{1}}, "defaultsPayload"},
			{map[string]any{"email": "not-an-email"}, "email"},
		} {
			env.Do(t, "POST", "/api/companies/"+company+"/invites", c.body, ktSession(owner)).RequireValidation(t, c.path)
		}
	})

	t.Run("Permission", func(t *testing.T) {
		t.Parallel()
		opID, operator := env.User(t, "Op", false)
		viewerID, viewer := env.User(t, "Viewer", false)
		require.NoError(t, env.K.MembershipEnsure(ctx, company, "user", opID, "operator"))
		require.NoError(t, env.K.MembershipEnsure(ctx, company, "user", viewerID, "viewer"))
		_, stranger := env.User(t, "Stranger", false)
		env.Do(t, "POST", "/api/companies/"+company+"/invites", map[string]any{}, ktSession(operator)).
			RequireError(t, http.StatusForbidden, "Missing permission users:invite for this company")
		env.Do(t, "GET", "/api/companies/"+company+"/invites", nil, ktSession(viewer)).
			RequireError(t, http.StatusForbidden, "Missing permission users:invite for this company")
		env.Do(t, "POST", "/api/companies/"+company+"/invites", map[string]any{}, ktSession(stranger)).
			RequireError(t, http.StatusForbidden, "You do not have access to this company")
		env.Do(t, "POST", "/api/companies/"+company+"/invites", map[string]any{}).RequireStatus(t, http.StatusUnauthorized)
		// An operator granted users:invite may invite, but not as owner.
		_, err := env.K.Pool.Exec(ctx, `INSERT INTO kernel.principal_permission_grants (id, company_id, principal_type, principal_id, permission_key)
			VALUES (gen_random_uuid(), $1, 'user', $2, 'users:invite')`, company, opID)
		require.NoError(t, err)
		createInvite(t, env, company, operator, map[string]any{})
		env.Do(t, "POST", "/api/companies/"+company+"/invites", map[string]any{"membershipRole": "owner"}, ktSession(operator)).
			RequireError(t, http.StatusForbidden, "Only company owners can invite owners")
	})

	t.Run("AcceptedBySecondUser", func(t *testing.T) {
		t.Parallel()
		inv := createInvite(t, env, company, owner, map[string]any{"allowedJoinTypes": "human", "membershipRole": "admin"})
		token := inv["token"].(string)
		env.Do(t, "POST", "/api/invites/"+token+"/accept", map[string]any{}).RequireError(t, http.StatusUnauthorized, "Sign in to accept this invite")
		env.Do(t, "POST", "/api/invites/"+token+"/accept", map[string]any{"requestType": "agent", "agentName": "Bot"}).
			RequireError(t, http.StatusUnprocessableEntity, "This invite does not allow agent joins")
		bobID, bob := env.User(t, "Bob", false)
		env.Do(t, "GET", "/api/companies/"+company, nil, ktSession(bob)).RequireStatus(t, http.StatusForbidden)
		res := env.Do(t, "POST", "/api/invites/"+token+"/accept", map[string]any{}, ktSession(bob)).RequireStatus(t, http.StatusCreated).Object(t)
		require.Equal(t, "human", res["requestType"])
		require.Equal(t, "approved", res["status"])
		require.Equal(t, bobID, res["requestingUserId"])
		require.Nil(t, res["claimSecret"])
		m := res["membership"].(map[string]any)
		require.Equal(t, "admin", m["membershipRole"])
		require.Equal(t, "active", m["status"])
		env.Do(t, "GET", "/api/companies/"+company, nil, ktSession(bob)).RequireStatus(t, http.StatusOK)

		// Single use: the token now answers like an unknown one, for everyone.
		_, carol := env.User(t, "Carol", false)
		env.Do(t, "POST", "/api/invites/"+token+"/accept", map[string]any{}, ktSession(carol)).RequireError(t, http.StatusNotFound, "Invite not found")
		env.Do(t, "GET", "/api/invites/"+token, nil).RequireError(t, http.StatusNotFound, "Invite not found")
		got := env.Do(t, "GET", "/api/companies/"+company+"/invites?status=accepted", nil, ktSession(owner)).RequireStatus(t, http.StatusOK).List(t)
		found := false
		for _, i := range got {
			if i["id"] == inv["id"] {
				found = true
				require.Equal(t, bobID, i["acceptedByUserId"])
			}
		}
		require.True(t, found)
		env.Do(t, "POST", "/api/invites/"+inv["id"].(string)+"/revoke", nil, ktSession(owner)).
			RequireError(t, http.StatusConflict, "Invite has already been accepted")

		// A member accepting again hears so and leaves the invite usable.
		again := createInvite(t, env, company, owner, map[string]any{})
		env.Do(t, "POST", "/api/invites/"+again["token"].(string)+"/accept", map[string]any{}, ktSession(bob)).
			RequireError(t, http.StatusConflict, "You are already a member of this company")
		env.Do(t, "GET", "/api/invites/"+again["token"].(string), nil).RequireStatus(t, http.StatusOK)
	})

	t.Run("EmailBound", func(t *testing.T) {
		t.Parallel()
		daveID, dave := env.User(t, "Dave", false)
		_, eve := env.User(t, "Eve", false)
		inv := createInvite(t, env, company, owner, map[string]any{"email": strings.ToUpper(daveID) + "@EXAMPLE.TEST"})
		token := inv["token"].(string)
		env.Do(t, "POST", "/api/invites/"+token+"/accept", map[string]any{}, ktSession(eve)).
			RequireError(t, http.StatusForbidden, "This invite is for another email address")
		env.Do(t, "POST", "/api/invites/"+token+"/accept", map[string]any{}, ktSession(dave)).RequireStatus(t, http.StatusCreated)
	})

	t.Run("RevokedAndExpiredAnswerLikeUnknown", func(t *testing.T) {
		t.Parallel()
		unknown := env.Do(t, "GET", "/api/invites/"+kernel.InviteTokenPrefix+strings.Repeat("0", 48), nil)
		unknown.RequireError(t, http.StatusNotFound, "Invite not found")

		revoked := createInvite(t, env, company, owner, map[string]any{})
		r := env.Do(t, "POST", "/api/invites/"+revoked["id"].(string)+"/revoke", nil, ktSession(owner)).RequireStatus(t, http.StatusOK).Object(t)
		require.Equal(t, "revoked", r["status"])
		env.Do(t, "POST", "/api/invites/"+revoked["id"].(string)+"/revoke", nil, ktSession(owner)).RequireStatus(t, http.StatusOK)

		expired := createInvite(t, env, company, owner, map[string]any{"expiresInHours": 1})
		_, err := env.K.Pool.Exec(ctx, `UPDATE kernel.invites SET expires_at = now() - interval '1 second' WHERE id = $1`, expired["id"])
		require.NoError(t, err)

		_, frank := env.User(t, "Frank", false)
		for _, token := range []string{revoked["token"].(string), expired["token"].(string)} {
			for _, p := range []string{"", "/logo", "/onboarding", "/onboarding.txt", "/skills/index", "/skills/keel-agent", "/test-resolution?url=http://example.com"} {
				res := env.Do(t, "GET", "/api/invites/"+token+p, nil)
				require.Equal(t, http.StatusNotFound, res.Status, "%s: %s", p, res.Body)
				require.Equal(t, string(unknown.Body), string(res.Body), "same answer as an unknown token")
			}
			res := env.Do(t, "POST", "/api/invites/"+token+"/accept", map[string]any{}, ktSession(frank))
			require.Equal(t, string(unknown.Body), string(res.Body))
		}
		for status, id := range map[string]any{"revoked": revoked["id"], "expired": expired["id"]} {
			list := env.Do(t, "GET", "/api/companies/"+company+"/invites?status="+status, nil, ktSession(owner)).RequireStatus(t, http.StatusOK).List(t)
			ids := []any{}
			for _, i := range list {
				ids = append(ids, i["id"])
				require.Equal(t, status, i["status"])
			}
			require.Contains(t, ids, id)
		}
		env.Do(t, "GET", "/api/companies/"+company+"/invites?status=bogus", nil, ktSession(owner)).RequireValidation(t, "status")
		env.Do(t, "POST", "/api/invites/not-a-uuid/revoke", nil, ktSession(owner)).RequireError(t, http.StatusNotFound, "Invite not found")
		_, stranger := env.User(t, "Mallory", false)
		env.Do(t, "POST", "/api/invites/"+expired["id"].(string)+"/revoke", nil, ktSession(stranger)).RequireStatus(t, http.StatusForbidden)
	})

	t.Run("InvitePrompt", func(t *testing.T) {
		t.Parallel()
		res := env.Do(t, "POST", "/api/companies/"+company+"/openclaw/invite-prompt", map[string]any{"allowedJoinTypes": "human", "agentMessage": "Be kind"},
			ktSession(owner)).RequireStatus(t, http.StatusCreated).Object(t)
		require.Equal(t, "agent", res["allowedJoinTypes"], "the prompt is for an agent")
		prompt := res["prompt"].(string)
		require.Contains(t, prompt, res["onboardingTextUrl"].(string))
		require.Contains(t, prompt, "People Co")
		require.Contains(t, prompt, "Be kind")
		env.Do(t, "GET", "/api/invites/"+res["token"].(string), nil).RequireStatus(t, http.StatusOK)
		viewerID, viewer := env.User(t, "Prompt Viewer", false)
		require.NoError(t, env.K.MembershipEnsure(ctx, company, "user", viewerID, "viewer"))
		env.Do(t, "POST", "/api/companies/"+company+"/openclaw/invite-prompt", nil, ktSession(viewer)).RequireStatus(t, http.StatusForbidden)
	})

	t.Run("OnboardingDocuments", func(t *testing.T) {
		t.Parallel()
		inv := createInvite(t, env, company, owner, map[string]any{"allowedJoinTypes": "agent", "agentMessage": "Welcome, bots"})
		token := inv["token"].(string)
		txt := env.Do(t, "GET", "/api/invites/"+token+"/onboarding.txt", nil).RequireStatus(t, http.StatusOK)
		require.Contains(t, txt.Header.Get("Content-Type"), "text/plain")
		body := string(txt.Body)
		require.Contains(t, body, "Join People Co")
		require.Contains(t, body, "Welcome, bots")
		require.Contains(t, body, env.URL+"/api/invites/"+token+"/accept")
		require.Contains(t, body, "claim-api-key")
		doc := env.Do(t, "GET", "/api/invites/"+token+"/onboarding", nil).RequireStatus(t, http.StatusOK).Object(t)
		require.Equal(t, env.URL+"/api/invites/"+token+"/accept", doc["acceptUrl"])
		require.Equal(t, body, doc["instructions"])
		idx := env.Do(t, "GET", "/api/invites/"+token+"/skills/index", nil).RequireStatus(t, http.StatusOK).Object(t)
		skills := idx["skills"].([]any)
		require.NotEmpty(t, skills)
		first := skills[0].(map[string]any)
		skill := env.Do(t, "GET", first["path"].(string), nil).RequireStatus(t, http.StatusOK)
		require.Contains(t, skill.Header.Get("Content-Type"), "text/markdown")
		require.Contains(t, string(skill.Body), "# ")
		env.Do(t, "GET", "/api/invites/"+token+"/skills/nope", nil).RequireError(t, http.StatusNotFound, "Skill not found")
		logo := env.Do(t, "GET", "/api/invites/"+token+"/logo", nil).RequireStatus(t, http.StatusOK)
		require.Equal(t, "image/svg+xml", logo.Header.Get("Content-Type"))
		require.Contains(t, string(logo.Body), ">PC<")
	})
}

func TestJoinRequests(t *testing.T) {
	t.Parallel()
	env, ownerID, owner, company := peopleCompany(t)
	ctx := context.Background()
	base := "/api/companies/" + company + "/join-requests"

	agentJoin := func(t *testing.T, name string) map[string]any {
		t.Helper()
		inv := createInvite(t, env, company, owner, map[string]any{"allowedJoinTypes": "agent"})
		return env.Do(t, "POST", "/api/invites/"+inv["token"].(string)+"/accept", map[string]any{"agentName": name,
			"capabilities": "writes code", "agentDefaultsPayload": map[string]any{"role": "ceo", "adapterConfig": map[string]any{"url": "https://x.example"}}}).
			RequireStatus(t, http.StatusCreated).Object(t)
	}

	t.Run("ApproveAndClaimOnce", func(t *testing.T) {
		t.Parallel()
		jr := agentJoin(t, "Outside Bot")
		id, secret := jr["id"].(string), jr["claimSecret"].(string)
		require.True(t, strings.HasPrefix(secret, kernel.ClaimSecretPrefix))
		require.Equal(t, "pending_approval", jr["status"])
		require.Equal(t, "agent", jr["requestType"])
		require.Equal(t, "http", jr["adapterType"])
		require.Equal(t, env.URL+"/api/join-requests/"+id+"/claim-api-key", jr["claimApiKeyUrl"])
		var stored string
		require.NoError(t, env.K.Pool.QueryRow(ctx, `SELECT claim_secret_hash FROM kernel.join_requests WHERE id = $1`, id).Scan(&stored))
		require.Equal(t, kernel.HashToken(secret), stored)

		claim := "/api/join-requests/" + id + "/claim-api-key"
		m := env.Do(t, "POST", claim, map[string]any{"claimSecret": secret}).RequireError(t, http.StatusConflict, "Join request is pending approval")
		require.Equal(t, "join_request_pending", m["code"])
		env.Do(t, "POST", claim, map[string]any{"claimSecret": secret + "0"}).RequireError(t, http.StatusForbidden, "Invalid claim secret")
		env.Do(t, "POST", claim, map[string]any{}).RequireValidation(t, "claimSecret")

		pending := env.Do(t, "GET", base+"?status=pending&requestType=agent", nil, ktSession(owner)).RequireStatus(t, http.StatusOK).List(t)
		ids := []any{}
		for _, p := range pending {
			ids = append(ids, p["id"])
			require.Equal(t, "pending_approval", p["status"])
		}
		require.Contains(t, ids, id)
		require.NotContains(t, string(env.Do(t, "GET", base, nil, ktSession(owner)).Body), "claimSecret")

		opID, operator := env.User(t, "Operator", false)
		require.NoError(t, env.K.MembershipEnsure(ctx, company, "user", opID, "operator"))
		env.Do(t, "POST", base+"/"+id+"/approve", nil, ktSession(operator)).
			RequireError(t, http.StatusForbidden, "Missing permission joins:approve for this company")
		env.Do(t, "GET", base, nil, ktSession(operator)).
			RequireError(t, http.StatusForbidden, "Missing permission joins:approve for this company")

		approved := env.Do(t, "POST", base+"/"+id+"/approve", map[string]any{"note": "welcome"}, ktSession(owner)).RequireStatus(t, http.StatusOK).Object(t)
		require.Equal(t, "approved", approved["status"])
		require.Equal(t, ownerID, approved["decidedByUserId"])
		agentID := approved["createdAgentId"].(string)
		ag, err := env.K.AgentGetByID(ctx, agentID)
		require.NoError(t, err)
		require.Equal(t, "Outside Bot", ag.Name)
		require.NotEqual(t, "ceo", ag.Role, "a joining agent does not choose its own role")
		env.Do(t, "POST", base+"/"+id+"/approve", nil, ktSession(owner)).RequireError(t, http.StatusConflict, "Join request is not pending approval")
		env.Do(t, "POST", base+"/"+id+"/reject", nil, ktSession(owner)).RequireError(t, http.StatusConflict, "Join request is not pending approval")

		key := env.Do(t, "POST", claim, map[string]any{"claimSecret": secret}).RequireStatus(t, http.StatusCreated).Object(t)
		token := key["token"].(string)
		require.True(t, strings.HasPrefix(token, kernel.AgentKeyPrefix))
		require.Equal(t, agentID, key["agentId"])
		// The key works, as the agent, in its company.
		env.Do(t, "GET", "/api/companies/"+company+"/user-directory", nil, ktBearer(token)).RequireStatus(t, http.StatusOK)
		var responsible string
		require.NoError(t, env.K.Pool.QueryRow(ctx, `SELECT responsible_user_id FROM kernel.agent_api_keys WHERE id = $1`, key["keyId"]).Scan(&responsible))
		require.Equal(t, ownerID, responsible, "the approver answers for the key")
		// Exactly once.
		m = env.Do(t, "POST", claim, map[string]any{"claimSecret": secret}).RequireError(t, http.StatusConflict, "API key has already been claimed")
		require.Equal(t, "api_key_already_claimed", m["code"])
		members := env.Do(t, "GET", "/api/companies/"+company+"/members?principalType=agent", nil, ktSession(owner)).RequireStatus(t, http.StatusOK).List(t)
		memberByPrincipal(t, members, agentID)
		require.Contains(t, env.Actions(t, company), "join_request.api_key_claimed")
	})

	t.Run("ConcurrentClaimsOneWins", func(t *testing.T) {
		t.Parallel()
		jr := agentJoin(t, "Racer")
		id := jr["id"].(string)
		env.Do(t, "POST", base+"/"+id+"/approve", nil, ktSession(owner)).RequireStatus(t, http.StatusOK)
		const n = 6
		statuses := make(chan int, n)
		for range n {
			go func() {
				statuses <- env.Do(t, "POST", "/api/join-requests/"+id+"/claim-api-key", map[string]any{"claimSecret": jr["claimSecret"]}).Status
			}()
		}
		won := 0
		for range n {
			if s := <-statuses; s == http.StatusCreated {
				won++
			} else {
				require.Equal(t, http.StatusConflict, s)
			}
		}
		require.Equal(t, 1, won)
	})

	t.Run("Reject", func(t *testing.T) {
		t.Parallel()
		jr := agentJoin(t, "Unwanted")
		id := jr["id"].(string)
		rej := env.Do(t, "POST", base+"/"+id+"/reject", map[string]any{"note": "no"}, ktSession(owner)).RequireStatus(t, http.StatusOK).Object(t)
		require.Equal(t, "rejected", rej["status"])
		require.Nil(t, rej["createdAgentId"])
		env.Do(t, "POST", "/api/join-requests/"+id+"/claim-api-key", map[string]any{"claimSecret": jr["claimSecret"]}).
			RequireError(t, http.StatusConflict, "Join request was rejected")
		list := env.Do(t, "GET", base+"?status=rejected", nil, ktSession(owner)).RequireStatus(t, http.StatusOK).List(t)
		require.NotEmpty(t, list)
		for _, j := range list {
			require.Equal(t, "rejected", j["status"])
		}
	})

	t.Run("Validation", func(t *testing.T) {
		t.Parallel()
		env.Do(t, "GET", base+"?status=waiting", nil, ktSession(owner)).RequireValidation(t, "status")
		env.Do(t, "GET", base+"?requestType=robot", nil, ktSession(owner)).RequireValidation(t, "requestType")
		env.Do(t, "POST", base+"/"+company+"/approve", nil, ktSession(owner)).RequireError(t, http.StatusNotFound, "Join request not found")
		env.Do(t, "POST", "/api/join-requests/nope/claim-api-key", map[string]any{"claimSecret": "x"}).RequireError(t, http.StatusNotFound, "Join request not found")
		inv := createInvite(t, env, company, owner, map[string]any{"allowedJoinTypes": "agent"})
		accept := "/api/invites/" + inv["token"].(string) + "/accept"
		env.Do(t, "POST", accept, map[string]any{}).RequireValidation(t, "agentName")
		env.Do(t, "POST", accept, map[string]any{"agentName": "X", "adapterType": "Bad Type"}).RequireValidation(t, "adapterType")
		env.Do(t, "POST", accept, map[string]any{"agentName": "X", "agentDefaultsPayload": "str"}).RequireValidation(t, "agentDefaultsPayload")
		env.Do(t, "POST", accept, map[string]any{"requestType": "robot"}).RequireValidation(t, "requestType")
		_, bob := env.User(t, "Bob", false)
		env.Do(t, "POST", accept, map[string]any{"requestType": "human"}, ktSession(bob)).
			RequireError(t, http.StatusUnprocessableEntity, "This invite does not allow human joins")
	})
}

func TestTestResolution(t *testing.T) {
	t.Parallel()
	env, _, owner, company := peopleCompany(t)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(target.Close)
	token := createInvite(t, env, company, owner, map[string]any{})["token"].(string)
	check := "/api/invites/" + token + "/test-resolution?url="

	res := env.Do(t, "GET", check+target.URL+"/hook", nil).RequireStatus(t, http.StatusOK).Object(t)
	require.Equal(t, true, res["reachable"], "a private deployment may call loopback")
	require.Equal(t, float64(http.StatusNoContent), res["status"])
	require.Equal(t, []any{"127.0.0.1"}, res["addresses"])

	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	res = env.Do(t, "GET", check+closedURL, nil).RequireStatus(t, http.StatusOK).Object(t)
	require.Equal(t, false, res["reachable"])
	require.Contains(t, res["error"], "could not reach URL")

	for _, u := range []string{"http://169.254.169.254/latest/meta-data", "http://[fe80::1]/", "http://0.0.0.0:80/", "http://224.0.0.1/"} {
		m := env.Do(t, "GET", check+u, nil).RequireStatus(t, http.StatusUnprocessableEntity).Object(t)
		require.Equal(t, "url_not_allowed", m["code"], u)
	}
	env.Do(t, "GET", check, nil).RequireValidation(t, "url")
	env.Do(t, "GET", check+"ftp://example.com/", nil).RequireValidation(t, "url")
	env.Do(t, "GET", check+"http://user:pw@example.com/", nil).RequireValidation(t, "url")

	// A public deployment never calls loopback or private addresses.
	pub := ktStart(t, kernel.Config{DeploymentMode: kernel.ModeAuthenticated, DeploymentExposure: kernel.ExposurePublic,
		PublicBaseURL: "https://keel.example.com"})
	_, pubOwner := pub.User(t, "Owner", false)
	pubCompany := pub.Company(t, map[string]any{"name": "Public Co"}, ktSession(pubOwner))["id"].(string)
	pubInvite := createInvite(t, pub, pubCompany, pubOwner, map[string]any{})
	require.Equal(t, "https://keel.example.com/api/invites/"+pubInvite["token"].(string), pubInvite["inviteUrl"])
	pubCheck := "/api/invites/" + pubInvite["token"].(string) + "/test-resolution?url="
	for _, u := range []string{target.URL, "http://10.1.2.3/", "http://192.168.0.1/", "http://[::1]/", "http://100.64.0.1/"} {
		m := pub.Do(t, "GET", pubCheck+u, nil).RequireStatus(t, http.StatusUnprocessableEntity).Object(t)
		require.Equal(t, "url_not_allowed", m["code"], u)
	}
}

func TestAdminUsers(t *testing.T) {
	t.Parallel()
	env := ktStart(t, ktAuthenticated())
	adminID, admin := env.User(t, "Ada Admin", true)
	bobID, bob := env.User(t, "Bob Builder", false)
	company := env.Company(t, map[string]any{"name": "Admin Co"}, ktSession(admin))["id"].(string)
	other := env.Company(t, map[string]any{"name": "Other Co"}, ktSession(admin))["id"].(string)

	env.Do(t, "GET", "/api/admin/users", nil, ktSession(bob)).RequireError(t, http.StatusForbidden, "Instance admin access required")
	env.Do(t, "GET", "/api/admin/users", nil).RequireStatus(t, http.StatusUnauthorized)
	all := env.Do(t, "GET", "/api/admin/users", nil, ktSession(admin)).RequireStatus(t, http.StatusOK).List(t)
	require.Len(t, all, 2)
	found := env.Do(t, "GET", "/api/admin/users?query=builder", nil, ktSession(admin)).RequireStatus(t, http.StatusOK).List(t)
	require.Len(t, found, 1)
	require.Equal(t, bobID, found[0]["id"])
	require.Equal(t, false, found[0]["isInstanceAdmin"])
	require.Len(t, env.Do(t, "GET", "/api/admin/users?q=%25", nil, ktSession(admin)).RequireStatus(t, http.StatusOK).List(t), 0, "LIKE wildcards are literal")
	env.Do(t, "GET", "/api/admin/users?limit=0", nil, ktSession(admin)).RequireStatus(t, http.StatusOK)
	env.Do(t, "GET", "/api/admin/users?limit=501", nil, ktSession(admin)).RequireValidation(t, "limit")

	// The last instance admin cannot be demoted; with a second one, either can go, not both.
	m := env.Do(t, "POST", "/api/admin/users/"+adminID+"/demote-instance-admin", nil, ktSession(admin)).
		RequireError(t, http.StatusConflict, "Cannot demote the last instance admin")
	require.Equal(t, "last_instance_admin", m["code"])
	p := env.Do(t, "POST", "/api/admin/users/"+bobID+"/promote-instance-admin", nil, ktSession(admin)).RequireStatus(t, http.StatusOK).Object(t)
	require.Equal(t, true, p["isInstanceAdmin"])
	env.Do(t, "GET", "/api/admin/users", nil, ktSession(bob)).RequireStatus(t, http.StatusOK)
	d := env.Do(t, "POST", "/api/admin/users/"+adminID+"/demote-instance-admin", nil, ktSession(bob)).RequireStatus(t, http.StatusOK).Object(t)
	require.Equal(t, false, d["isInstanceAdmin"])
	env.Do(t, "POST", "/api/admin/users/"+bobID+"/demote-instance-admin", nil, ktSession(bob)).
		RequireError(t, http.StatusConflict, "Cannot demote the last instance admin")
	env.Do(t, "POST", "/api/admin/users/nobody/promote-instance-admin", nil, ktSession(bob)).RequireError(t, http.StatusNotFound, "User not found")

	// Company access: read and replace.
	access := env.Do(t, "GET", "/api/admin/users/"+adminID+"/company-access", nil, ktSession(bob)).RequireStatus(t, http.StatusOK).Object(t)
	require.ElementsMatch(t, []any{company, other}, access["companyIds"])
	carolID, carol := env.User(t, "Carol", false)
	put := env.Do(t, "PUT", "/api/admin/users/"+carolID+"/company-access", map[string]any{"companyIds": []string{company, other}}, ktSession(bob)).
		RequireStatus(t, http.StatusOK).Object(t)
	require.ElementsMatch(t, []any{company, other}, put["companyIds"])
	env.Do(t, "GET", "/api/companies/"+other, nil, ktSession(carol)).RequireStatus(t, http.StatusOK)
	put = env.Do(t, "PUT", "/api/admin/users/"+carolID+"/company-access",
		map[string]any{"companies": []map[string]any{{"companyId": company, "membershipRole": "viewer"}}}, ktSession(bob)).
		RequireStatus(t, http.StatusOK).Object(t)
	require.Equal(t, []any{company}, put["companyIds"])
	require.Equal(t, "viewer", put["companies"].([]any)[0].(map[string]any)["membershipRole"])
	env.Do(t, "GET", "/api/companies/"+other, nil, ktSession(carol)).RequireStatus(t, http.StatusForbidden)
	// Removing the sole owner of a company is refused, as are unknown companies.
	env.Do(t, "PUT", "/api/admin/users/"+adminID+"/company-access", map[string]any{"companyIds": []string{company}}, ktSession(bob)).
		RequireError(t, http.StatusConflict, "Company must keep at least one active owner")
	env.Do(t, "PUT", "/api/admin/users/"+carolID+"/company-access", map[string]any{"companyIds": []string{"00000000-0000-0000-0000-000000000001"}}, ktSession(bob)).
		RequireError(t, http.StatusUnprocessableEntity, "One or more companies do not exist")
	env.Do(t, "PUT", "/api/admin/users/"+carolID+"/company-access", map[string]any{}, ktSession(bob)).RequireValidation(t, "companyIds")
	env.Do(t, "PUT", "/api/admin/users/"+carolID+"/company-access", map[string]any{"companyIds": []string{"x"}}, ktSession(bob)).
		RequireValidation(t, "companies[0].companyId")
}

func TestUserDirectoryAndProfiles(t *testing.T) {
	t.Parallel()
	env, ownerID, owner, company := peopleCompany(t)
	ctx := context.Background()
	adaID, _ := env.User(t, "Ada Lovelace", false)
	require.NoError(t, env.K.MembershipEnsure(ctx, company, "user", adaID, "viewer"))
	_, stranger := env.User(t, "Stranger", false)
	_, agentKey := env.Agent(t, company, "Helper")

	dir := env.Do(t, "GET", "/api/companies/"+company+"/user-directory", nil, ktSession(owner)).RequireStatus(t, http.StatusOK).List(t)
	require.Len(t, dir, 2)
	require.Equal(t, ownerID, dir[0]["id"], "owners first")
	require.Equal(t, "ada-lovelace", dir[1]["slug"])
	env.Do(t, "GET", "/api/companies/"+company+"/user-directory", nil, ktBearer(agentKey)).RequireStatus(t, http.StatusOK)
	env.Do(t, "GET", "/api/companies/"+company+"/user-directory", nil, ktSession(stranger)).RequireStatus(t, http.StatusForbidden)

	p := env.Do(t, "GET", "/api/companies/"+company+"/users/ada-lovelace/profile", nil, ktSession(owner)).RequireStatus(t, http.StatusOK).Object(t)
	require.Equal(t, adaID, p["id"])
	require.Equal(t, "viewer", p["membershipRole"])
	require.Equal(t, []any{"company_scope:read", "issue:read"}, p["permissions"])
	byID := env.Do(t, "GET", "/api/companies/"+company+"/users/"+ownerID+"/profile", nil, ktSession(owner)).RequireStatus(t, http.StatusOK).Object(t)
	require.Equal(t, "owner", byID["membershipRole"])
	require.Greater(t, byID["activityCount"].(float64), float64(0), "creating the company is the owner's activity")
	env.Do(t, "GET", "/api/companies/"+company+"/users/nobody/profile", nil, ktSession(owner)).RequireError(t, http.StatusNotFound, "User not found")
}

func TestBoardClaim(t *testing.T) {
	t.Parallel()
	// An instance that ran local_trusted, with a company of the local board...
	local := ktStart(t, ktLocal())
	company := local.Company(t, map[string]any{"name": "Local Co"})["id"].(string)
	// ...restarts authenticated: it opens a board claim at start.
	env := ktServe(t, local.DSN, ktAuthenticated())
	ctx := context.Background()
	var open int
	require.NoError(t, env.K.Pool.QueryRow(ctx, `SELECT count(*) FROM kernel.board_claims WHERE claimed_at IS NULL`).Scan(&open))
	require.Equal(t, 1, open)
	c, err := env.K.BoardClaimCreate(ctx)
	require.NoError(t, err)
	require.NoError(t, env.K.Pool.QueryRow(ctx, `SELECT count(*) FROM kernel.board_claims WHERE claimed_at IS NULL`).Scan(&open))
	require.Equal(t, 1, open, "a new claim replaces the unused one")
	path := "/api/board-claim/" + c.Token

	st := env.Do(t, "GET", path+"?code="+c.Code, nil).RequireStatus(t, http.StatusOK).Object(t)
	require.Equal(t, "available", st["status"])
	require.Equal(t, true, st["requiresSignIn"])
	require.Equal(t, true, st["codeValid"])
	env.Do(t, "GET", "/api/board-claim/"+kernel.BoardClaimPrefix+"00", nil).RequireError(t, http.StatusNotFound, "Board claim not found")

	env.Do(t, "POST", path+"/claim", map[string]any{"code": c.Code}).
		RequireError(t, http.StatusUnauthorized, "Sign in from a browser session before claiming this board")
	userID, session := env.User(t, "New Admin", false)
	env.Do(t, "POST", path+"/claim", map[string]any{"code": "wrong"}, ktSession(session)).RequireError(t, http.StatusForbidden, "Invalid board claim code")
	res := env.Do(t, "POST", path+"/claim", map[string]any{"code": c.Code}, ktSession(session)).RequireStatus(t, http.StatusOK).Object(t)
	require.Equal(t, true, res["claimed"])
	require.Equal(t, userID, res["userId"])
	require.Equal(t, []any{company}, res["companyIds"])
	env.Do(t, "GET", "/api/admin/users", nil, ktSession(session)).RequireStatus(t, http.StatusOK)
	env.Do(t, "GET", "/api/companies/"+company, nil, ktSession(session)).RequireStatus(t, http.StatusOK)
	var localAdmin bool
	require.NoError(t, env.K.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM kernel.instance_user_roles WHERE user_id = 'local-board')`).Scan(&localAdmin))
	require.False(t, localAdmin, "the local board is demoted")

	// Used twice: refused, for the same user and for anyone else.
	_, other := env.User(t, "Latecomer", false)
	for _, s := range []string{session, other} {
		m := env.Do(t, "POST", path+"/claim", map[string]any{"code": c.Code}, ktSession(s)).
			RequireError(t, http.StatusConflict, "This board claim has already been used")
		require.Equal(t, "board_claim_used", m["code"])
	}
	require.Equal(t, "claimed", env.Do(t, "GET", path, nil).RequireStatus(t, http.StatusOK).Object(t)["status"])
	// Once someone can administer the instance, a restart opens no new claim.
	again := ktServe(t, local.DSN, ktAuthenticated())
	require.NoError(t, again.K.Pool.QueryRow(ctx, `SELECT count(*) FROM kernel.board_claims WHERE claimed_at IS NULL`).Scan(&open))
	require.Equal(t, 0, open)
}
