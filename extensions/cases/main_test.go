package cases_test

import (
	"bytes"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	_ "github.com/keelhq/keel/extensions/agents"
	_ "github.com/keelhq/keel/extensions/cases"
	_ "github.com/keelhq/keel/extensions/work"
	"github.com/keelhq/keel/host"
	"github.com/keelhq/keel/sdktest"
)

// TestMain runs the tests; when the host re-executes this binary as an extension,
// sdktest.Main serves it instead.
func TestMain(m *testing.M) { sdktest.Main(m) }

// startHost starts a host with the cases, work and agents extensions, with enableCases
// still off, and waits until work and agents are ready. It returns the host's home.
func startHost(t testing.TB) (*sdktest.Host, string) {
	t.Helper()
	var home string
	h := sdktest.Start(t, sdktest.Options{Builtins: true, Configure: func(c *host.Config) {
		c.EnableCompanyDeletion = true
		home = c.Home
	}})
	for _, key := range []string{"work", "agents"} {
		waitStatus(t, h, key, "ready")
	}
	return h, home
}

// waitStatus waits until an extension reports a status.
func waitStatus(t testing.TB, h *sdktest.Host, key, status string) {
	t.Helper()
	sdktest.WaitFor(t, 60*time.Second, func() bool {
		res := h.Do("GET", "/api/plugins/"+key, nil)
		var m map[string]any
		return res.Status == http.StatusOK && json.Unmarshal(res.Body, &m) == nil && m["status"] == status
	}, key+" to be "+status)
}

// setFlag turns enableCases on or off.
func setFlag(t testing.TB, h *sdktest.Host, on bool) {
	t.Helper()
	res := h.Do("PATCH", "/api/instance/settings/experimental", map[string]any{"enableCases": on})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
}

// fixture is a company with an agent whose run is scoped to an issue.
type fixture struct {
	h      *sdktest.Host
	co     string
	agent  *sdktest.Agent
	origin string // the run's issue
	runID  string
	// inRun authenticates as the agent with its run's JWT.
	inRun []string
}

// newCompany creates a company without an agent run.
func newCompany(t *testing.T, h *sdktest.Host, name string) *fixture {
	t.Helper()
	return &fixture{h: h, co: h.CreateCompany(name)}
}

// newRunFixture creates a company, an agent and an issue assigned to it, and waits for the
// run the assignment starts and for it to end (the agent has no adapter).
func newRunFixture(t *testing.T, h *sdktest.Host, name string) *fixture {
	t.Helper()
	f := newCompany(t, h, name)
	f.agent = h.CreateAgent(f.co, name+" Worker", "engineer")
	f.origin = f.issue(t, map[string]any{"title": "origin work", "assigneeAgentId": f.agent.ID})["id"].(string)
	sdktest.WaitFor(t, 60*time.Second, func() bool {
		res := h.Do("GET", "/api/companies/"+f.co+"/heartbeat-runs?agentId="+f.agent.ID, nil)
		var runs []map[string]any
		if res.Status != http.StatusOK || json.Unmarshal(res.Body, &runs) != nil {
			return false
		}
		for _, r := range runs {
			if c, _ := r["contextSnapshot"].(map[string]any); c != nil && c["issueId"] == f.origin {
				f.runID = r["id"].(string)
				return true
			}
		}
		return false
	}, "the agent's run")
	f.inRun = []string{"Authorization", "Bearer " + h.AgentJWT(f.agent, f.runID)}
	return f
}

// issue creates an issue as the board (201 required).
func (f *fixture) issue(t *testing.T, body map[string]any) map[string]any {
	t.Helper()
	res := f.h.Do("POST", "/api/companies/"+f.co+"/issues", body)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	return res.Map(t)
}

// create upserts a case as the board (or with headers) and requires a status.
func (f *fixture) create(t *testing.T, want int, body map[string]any, headers ...string) map[string]any {
	t.Helper()
	res := f.h.Do("POST", "/api/companies/"+f.co+"/cases", body, headers...)
	require.Equal(t, want, res.Status, "%s", res.Body)
	return res.Map(t)
}

// ok requires a status and decodes an object.
func ok(t testing.TB, res *sdktest.Response, want int) map[string]any {
	t.Helper()
	require.Equal(t, want, res.Status, "%s", res.Body)
	return res.Map(t)
}

// list decodes an array answer (200 required).
func list(t testing.TB, res *sdktest.Response) []map[string]any {
	t.Helper()
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var out []map[string]any
	res.JSON(t, &out)
	return out
}

// wantErr checks an API error's status and text and returns the body.
func wantErr(t testing.TB, res *sdktest.Response, status int, message string) map[string]any {
	t.Helper()
	require.Equal(t, status, res.Status, "%s", res.Body)
	m := res.Map(t)
	if message != "" {
		require.Equal(t, message, m["error"], "%s", res.Body)
	}
	return m
}

// part is one multipart part.
type part struct {
	field, fileName string
	data            []byte
}

// multipartBody encodes parts as multipart/form-data.
func multipartBody(t testing.TB, parts ...part) ([]byte, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for _, p := range parts {
		h := textproto.MIMEHeader{}
		if p.fileName != "" {
			h.Set("Content-Disposition", `form-data; name="`+p.field+`"; filename="`+p.fileName+`"`)
			h.Set("Content-Type", "text/plain")
		} else {
			h.Set("Content-Disposition", `form-data; name="`+p.field+`"`)
		}
		w, err := mw.CreatePart(h)
		require.NoError(t, err)
		_, err = w.Write(p.data)
		require.NoError(t, err)
	}
	require.NoError(t, mw.Close())
	return buf.Bytes(), mw.FormDataContentType()
}

// kinds returns the kinds of a case's events, newest first.
func kinds(t testing.TB, h *sdktest.Host, caseID string) []string {
	t.Helper()
	var out []string
	for _, e := range list(t, h.Do("GET", "/api/cases/"+caseID+"/events?limit=500", nil)) {
		out = append(out, e["kind"].(string))
	}
	return out
}
