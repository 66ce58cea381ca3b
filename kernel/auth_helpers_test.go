package kernel_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/host/pgembed/pgtest"
	"github.com/keelhq/keel/kernel"
)

// authStartKernel starts a kernel on a fresh database and serves it on a loopback port. It
// also mounts two test-only routes that echo the resolved actor:
// GET /api/auth-test/whoami (any actor) and GET /api/auth-test/companies/{companyId}/whoami
// (any actor, company-scoped from the path).
func authStartKernel(t *testing.T, cfg kernel.Config) (*kernel.Kernel, string) {
	t.Helper()
	dsn := pgtest.NewDatabase(t)
	k, err := kernel.New(context.Background(), dsn, cfg)
	require.NoError(t, err)
	whoami := func(c *fiber.Ctx, rc *kernel.RequestContext) error {
		a := rc.Actor
		return kernel.WriteJSON(c, http.StatusOK, map[string]any{
			"type": a.Type, "source": a.Source, "userId": a.UserID, "agentId": a.AgentID,
			"companyId": a.CompanyID, "runId": a.RunID, "keyId": a.KeyID, "routeCompanyId": rc.CompanyID,
		})
	}
	require.NoError(t, k.Routes.Add(
		&kernel.Route{Method: "GET", Pattern: "/api/auth-test/whoami", Owner: "auth-test", Access: kernel.AccessEither, Handler: whoami},
		&kernel.Route{Method: "GET", Pattern: "/api/auth-test/companies/{companyId}/whoami", Owner: "auth-test",
			Access: kernel.AccessEither, CompanyFrom: kernel.CompanyFromPath, Handler: whoami},
	))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	app := k.NewApp(0)
	go app.Listener(ln) //nolint:errcheck
	t.Cleanup(func() {
		_ = app.ShutdownWithTimeout(5 * time.Second)
		k.Close()
	})
	return k, "http://" + ln.Addr().String()
}

// authLocalConfig is local_trusted, private.
func authLocalConfig() kernel.Config { return kernel.Config{DeploymentMode: kernel.ModeLocalTrusted} }

// authAuthenticatedConfig is authenticated, private.
func authAuthenticatedConfig() kernel.Config {
	return kernel.Config{DeploymentMode: kernel.ModeAuthenticated, DeploymentExposure: kernel.ExposurePrivate}
}

type authOpt func(*http.Request)

func authBearer(token string) authOpt {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) }
}

func authCookie(token string) authOpt {
	return func(r *http.Request) { r.AddCookie(&http.Cookie{Name: kernel.SessionCookie, Value: token}) }
}

func authHeader(name, value string) authOpt {
	return func(r *http.Request) { r.Header.Set(name, value) }
}

type authResp struct {
	Status  int
	Body    []byte
	Header  http.Header
	Cookies []*http.Cookie
}

// JSON decodes the body as an object.
func (r *authResp) JSON(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(r.Body, &m), "body: %s", r.Body)
	return m
}

// Decode decodes the body into v.
func (r *authResp) Decode(t *testing.T, v any) {
	t.Helper()
	require.NoError(t, json.Unmarshal(r.Body, v), "body: %s", r.Body)
}

// requireError checks the status and that the error text contains want (and the code, if set).
func (r *authResp) requireError(t *testing.T, status int, want, code string) {
	t.Helper()
	require.Equal(t, status, r.Status, "body: %s", r.Body)
	m := r.JSON(t)
	require.Contains(t, m["error"], want)
	if code != "" {
		require.Equal(t, code, m["code"], "body: %s", r.Body)
	}
}

// authCall sends one request; body is JSON-encoded unless nil (or a string, sent raw).
func authCall(t *testing.T, base, method, path string, body any, opts ...authOpt) *authResp {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		require.NoError(t, err)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, base+path, rd)
	require.NoError(t, err)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for _, o := range opts {
		o(req)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return &authResp{Status: resp.StatusCode, Body: raw, Header: resp.Header, Cookies: resp.Cookies()}
}

// authCompany inserts a company directly and returns its id.
func authCompany(t *testing.T, k *kernel.Kernel, name string) string {
	t.Helper()
	id := uuid.NewString()
	_, err := k.Pool.Exec(context.Background(), `INSERT INTO kernel.companies (id, name, issue_prefix) VALUES ($1, $2, $3)`,
		id, name, "T"+strings.ToUpper(authRandHex(4)))
	require.NoError(t, err)
	return id
}

// authMembership makes a user a member of a company with a role.
func authMembership(t *testing.T, k *kernel.Kernel, companyID, userID, role string) {
	t.Helper()
	_, err := k.Pool.Exec(context.Background(), `INSERT INTO kernel.company_memberships (id, company_id, principal_type, principal_id, status, membership_role)
		VALUES ($1, $2, 'user', $3, 'active', $4)`, uuid.NewString(), companyID, userID, role)
	require.NoError(t, err)
}

// authAgent creates an agent through the kernel store.
func authAgent(t *testing.T, k *kernel.Kernel, companyID, name string) *kernel.AgentIdentity {
	t.Helper()
	a, err := k.AgentCreate(context.Background(), &kernel.AgentCreateParams{CompanyID: companyID, Name: name})
	require.NoError(t, err)
	return a
}

// authInsertAgentKey stores an agent API key directly (bypassing the route's status rules)
// and returns its token.
func authInsertAgentKey(t *testing.T, k *kernel.Kernel, agent *kernel.AgentIdentity) string {
	t.Helper()
	token := kernel.AgentKeyPrefix + authRandHex(24)
	_, err := k.Pool.Exec(context.Background(), `INSERT INTO kernel.agent_api_keys (id, agent_id, company_id, name, key_hash, responsible_user_id)
		VALUES ($1, $2, $3, 'test', $4, 'local-board')`, uuid.NewString(), agent.ID, agent.CompanyID, kernel.HashToken(token))
	require.NoError(t, err)
	return token
}

// authCreateAgentKey mints an agent API key through the route with the given credentials.
func authCreateAgentKey(t *testing.T, base, agentID string, opts ...authOpt) string {
	t.Helper()
	r := authCall(t, base, "POST", "/api/agents/"+agentID+"/keys", map[string]any{"name": "test"}, opts...)
	require.Equal(t, http.StatusCreated, r.Status, "body: %s", r.Body)
	return r.JSON(t)["token"].(string)
}

// authSignUp signs a user up (authenticated mode) and returns the session token and user id.
func authSignUp(t *testing.T, base, email string) (session, userID string) {
	t.Helper()
	r := authCall(t, base, "POST", "/api/auth/sign-up/email", map[string]any{"email": email, "password": "correct horse", "name": "User " + email})
	require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
	return authSessionCookie(t, r), r.JSON(t)["user"].(map[string]any)["id"].(string)
}

// authSessionCookie returns the session token a response set.
func authSessionCookie(t *testing.T, r *authResp) string {
	t.Helper()
	for _, c := range r.Cookies {
		if c.Name == kernel.SessionCookie && c.Value != "" {
			return c.Value
		}
	}
	t.Fatalf("no %s cookie in response (headers %v)", kernel.SessionCookie, r.Header)
	return ""
}

func authRandHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
