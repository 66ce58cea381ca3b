package kernel_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/host/pgembed/pgtest"
	"github.com/keelhq/keel/kernel"
)

// ktEnv is a kernel on a fresh database, served over HTTP on a loopback port.
type ktEnv struct {
	K   *kernel.Kernel
	URL string
	DSN string
}

// ktStart starts a kernel with cfg on a fresh database and serves it until the test ends.
func ktStart(t *testing.T, cfg kernel.Config) *ktEnv {
	t.Helper()
	dsn := pgtest.NewDatabase(t)
	return ktServe(t, dsn, cfg)
}

// ktServe starts a kernel on an existing database (a second node, for example).
func ktServe(t *testing.T, dsn string, cfg kernel.Config) *ktEnv {
	t.Helper()
	k, err := kernel.New(context.Background(), dsn, cfg)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	app := k.NewApp(0)
	go app.Listener(ln) //nolint:errcheck
	t.Cleanup(func() {
		_ = app.ShutdownWithTimeout(5 * time.Second)
		k.Close()
	})
	return &ktEnv{K: k, URL: "http://" + ln.Addr().String(), DSN: dsn}
}

// ktLocal is local_trusted mode: every credential-less request is the local board.
func ktLocal() kernel.Config { return kernel.Config{DeploymentMode: kernel.ModeLocalTrusted} }

// ktAuthenticated is authenticated, private mode.
func ktAuthenticated() kernel.Config {
	return kernel.Config{DeploymentMode: kernel.ModeAuthenticated, DeploymentExposure: kernel.ExposurePrivate}
}

// ktOpt adjusts a request.
type ktOpt func(*http.Request)

// ktSession sends a board session cookie.
func ktSession(token string) ktOpt {
	return func(r *http.Request) { r.AddCookie(&http.Cookie{Name: kernel.SessionCookie, Value: token}) }
}

// ktBearer sends a bearer token.
func ktBearer(token string) ktOpt {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) }
}

// ktResp is a response read in full.
type ktResp struct {
	Status int
	Header http.Header
	Body   []byte
}

// Object decodes the body as a JSON object.
func (r *ktResp) Object(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(r.Body, &m), "body: %s", r.Body)
	return m
}

// List decodes the body as a JSON array of objects.
func (r *ktResp) List(t *testing.T) []map[string]any {
	t.Helper()
	var l []map[string]any
	require.NoError(t, json.Unmarshal(r.Body, &l), "body: %s", r.Body)
	return l
}

// RequireStatus checks the status and returns the response.
func (r *ktResp) RequireStatus(t *testing.T, status int) *ktResp {
	t.Helper()
	require.Equal(t, status, r.Status, "body: %s", r.Body)
	return r
}

// RequireError checks the status and the exact error text.
func (r *ktResp) RequireError(t *testing.T, status int, text string) map[string]any {
	t.Helper()
	r.RequireStatus(t, status)
	m := r.Object(t)
	require.Equal(t, text, m["error"], "body: %s", r.Body)
	return m
}

// RequireValidation checks for a 400 Validation error naming the detail path.
func (r *ktResp) RequireValidation(t *testing.T, path string) {
	t.Helper()
	m := r.RequireError(t, http.StatusBadRequest, "Validation error")
	details, ok := m["details"].([]any)
	require.True(t, ok, "details missing: %s", r.Body)
	var paths []string
	for _, d := range details {
		paths = append(paths, d.(map[string]any)["path"].(string))
	}
	require.Contains(t, paths, path, "body: %s", r.Body)
}

// Do sends one request; body is JSON-encoded unless nil, a string or []byte (sent raw).
func (e *ktEnv) Do(t *testing.T, method, path string, body any, opts ...ktOpt) *ktResp {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		require.NoError(t, err)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, e.URL+path, rd)
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
	return &ktResp{Status: resp.StatusCode, Header: resp.Header, Body: raw}
}

// User inserts a user with a live session and returns the user id and session token;
// instanceAdmin also gives the user the instance_admin role.
func (e *ktEnv) User(t *testing.T, name string, instanceAdmin bool) (userID, session string) {
	t.Helper()
	ctx := context.Background()
	userID = "user-" + uuid.NewString()
	_, err := e.K.Pool.Exec(ctx, `INSERT INTO kernel.users (id, email, name) VALUES ($1, $2, $3)`,
		userID, userID+"@example.test", name)
	require.NoError(t, err)
	session = "sess-" + uuid.NewString()
	_, err = e.K.Pool.Exec(ctx, `INSERT INTO kernel.sessions (id, user_id, token_hash, expires_at) VALUES ($1, $2, $3, $4)`,
		uuid.NewString(), userID, kernel.HashToken(session), time.Now().Add(time.Hour))
	require.NoError(t, err)
	if instanceAdmin {
		_, err = e.K.Pool.Exec(ctx, `INSERT INTO kernel.instance_user_roles (user_id, role) VALUES ($1, 'instance_admin')`, userID)
		require.NoError(t, err)
	}
	return userID, session
}

// Company creates a company through the API and returns its body.
func (e *ktEnv) Company(t *testing.T, body map[string]any, opts ...ktOpt) map[string]any {
	t.Helper()
	return e.Do(t, "POST", "/api/companies", body, opts...).RequireStatus(t, http.StatusCreated).Object(t)
}

// Agent inserts an agent with an API key into a company and returns its id and key.
func (e *ktEnv) Agent(t *testing.T, companyID, name string) (agentID, key string) {
	t.Helper()
	ctx := context.Background()
	agentID = uuid.NewString()
	_, err := e.K.Pool.Exec(ctx, `INSERT INTO kernel.agents (id, company_id, name, url_key, role, status) VALUES ($1, $2, $3, $4, 'general', 'idle')`,
		agentID, companyID, name, strings.ToLower(strings.ReplaceAll(name, " ", "-"))+"-"+agentID[:8])
	require.NoError(t, err)
	key = kernel.AgentKeyPrefix + strings.ReplaceAll(uuid.NewString(), "-", "")
	_, err = e.K.Pool.Exec(ctx, `INSERT INTO kernel.agent_api_keys (id, agent_id, company_id, name, key_hash, responsible_user_id)
		VALUES ($1, $2, $3, 'test', $4, 'local-board')`, uuid.NewString(), agentID, companyID, kernel.HashToken(key))
	require.NoError(t, err)
	return agentID, key
}

// Actions lists the activity actions recorded for a company, newest first.
func (e *ktEnv) Actions(t *testing.T, companyID string) []string {
	t.Helper()
	rows, err := e.K.Pool.Query(context.Background(),
		`SELECT action FROM kernel.activity_log WHERE company_id = $1 ORDER BY created_at DESC, id DESC`, companyID)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var a string
		require.NoError(t, rows.Scan(&a))
		out = append(out, a)
	}
	require.NoError(t, rows.Err())
	return out
}
