package board_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/host"
	"github.com/keelhq/keel/kernel"
	"github.com/keelhq/keel/sdktest"
)

// signedUp signs a user up through the board and returns their browser and user id.
func signedUp(t *testing.T, h *sdktest.Host, name, email string) (*browser, string) {
	t.Helper()
	b := newBrowser(t, h.URL)
	tok := b.get("/signin").csrf(t)
	p := b.post("/signup", url.Values{"_csrf": {tok}, "name": {name}, "email": {email}, "password": {"correct horse battery"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	var id string
	require.NoError(t, h.Kernel.Pool.QueryRow(context.Background(), `SELECT id FROM kernel.users WHERE email = $1`, email).Scan(&id))
	return b, id
}

// sessionHeader is the Cookie header of a browser's session, for API calls as that user.
func (b *browser) sessionHeader(t *testing.T) []string {
	t.Helper()
	u, err := url.Parse(b.base)
	require.NoError(t, err)
	for _, c := range b.c.Jar.Cookies(u) {
		if c.Name == kernel.SessionCookie {
			return []string{"Cookie", c.Name + "=" + c.Value}
		}
	}
	t.Fatal("no session cookie")
	return nil
}

// TestBoardBinboxRoles covers the inbox, status card and case pages in authenticated mode:
// the experimental flags off (a notice, not an error page), a viewer whose writes the API
// refuses (the page says so and nothing changes), and a user of another company.
func TestBoardBinboxRoles(t *testing.T) {
	t.Parallel()
	h := sdktest.Start(t, sdktest.Options{Builtins: true, Configure: func(c *host.Config) {
		c.DeploymentMode, c.DeploymentExposure = "authenticated", "private"
	}})
	waitExtensions(t, h)
	admin, _ := signedUp(t, h, "Ada", "ada@example.test")
	p := admin.post("/claim-admin", url.Values{"_csrf": {admin.get("/companies").csrf(t)}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	p = admin.post("/companies", url.Values{"_csrf": {admin.get("/companies").csrf(t)}, "name": {"Roles Co"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	companyPath := p.Header.Get("Location")
	co := companyPath[len("/c/"):]
	as := admin.sessionHeader(t)
	res := h.Do("POST", "/api/companies/"+co+"/approvals", map[string]any{"type": "request_board_approval",
		"payload": map[string]any{"summary": "Buy a bigger server"}}, as...)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	approvalID := res.Map(t)["id"].(string)

	viewer, viewerID := signedUp(t, h, "Vic", "vic@example.test")
	_, err := h.Kernel.Pool.Exec(context.Background(), `INSERT INTO kernel.company_memberships
		(id, company_id, principal_type, principal_id, status, membership_role) VALUES ($1, $2, 'user', $3, 'active', 'viewer')`,
		uuid.NewString(), co, viewerID)
	require.NoError(t, err)
	outsider, _ := signedUp(t, h, "Bob", "bob@example.test")

	// Flags off: both pages say so, for the admin and the viewer alike.
	for _, b := range []*browser{admin, viewer} {
		p = b.get(companyPath + "/status-cards")
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		requireSafePage(t, p)
		require.Contains(t, p.Body, `id="cards-off"`)
		require.Contains(t, p.Body, "enableStatusCards")
		p = b.get(companyPath + "/cases")
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		requireSafePage(t, p)
		require.Contains(t, p.Body, `id="cases-off"`)
		p = b.get(companyPath + "/cases/" + uuid.NewString())
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		require.Contains(t, p.Body, `id="cases-off"`)
	}

	// The viewer reads the inbox but may not decide: the API's refusal is on the page.
	p = viewer.get(companyPath + "/inbox")
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	require.Contains(t, p.Body, "Buy a bigger server")
	vtok := p.csrf(t)
	p = viewer.post("/c/"+co+"/approvals/"+approvalID+"/decide", url.Values{"_csrf": {vtok}, "action": {"approve"}})
	require.Equal(t, http.StatusForbidden, p.Status, p.Body)
	requireSafePage(t, p)
	require.Contains(t, p.Body, "You may not do this")
	p = viewer.post("/c/"+co+"/approvals/"+approvalID+"/decide", url.Values{"action": {"approve"}}, "HX-Request", "true", "X-CSRF-Token", vtok)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	require.Contains(t, p.Body, "You may not do this")
	require.Equal(t, "pending", h.Do("GET", "/api/approvals/"+approvalID, nil, as...).Map(t)["status"])
	// Dismissing is the viewer's own business.
	p = viewer.post("/c/"+co+"/inbox/dismiss", url.Values{"_csrf": {vtok}, "itemKey": {"approval:" + approvalID}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	require.NotContains(t, viewer.get(companyPath+"/inbox").Body, "Buy a bigger server")
	require.Contains(t, admin.get(companyPath+"/inbox").Body, "Buy a bigger server")

	// Someone of another company is told they have no access.
	for _, path := range []string{"/inbox", "/status-cards", "/cases", "/approvals/" + approvalID} {
		p = outsider.get(companyPath + path)
		require.Equal(t, http.StatusForbidden, p.Status, "%s: %s", path, p.Body)
		require.Contains(t, p.Body, "You do not have access")
	}

	// With the flags on, the viewer's writes are refused on the pages.
	res = h.Do("PATCH", "/api/instance/settings/experimental", map[string]any{"enableStatusCards": true, "enableCases": true}, as...)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	waitPlugin(t, h, "statuscards", "ready", as...)
	waitPlugin(t, h, "cases", "ready", as...)
	p = viewer.post(companyPath+"/status-cards", url.Values{"_csrf": {vtok}, "interestPrompt": {"Anything new?"}})
	require.Equal(t, http.StatusForbidden, p.Status, p.Body)
	require.Contains(t, p.Body, "You may not do this")
	p = viewer.post(companyPath+"/cases", url.Values{"_csrf": {vtok}, "caseType": {"incident"}, "title": {"Nope"}})
	require.Equal(t, http.StatusForbidden, p.Status, p.Body)
	require.Contains(t, p.Body, "The case was not created")
	var cases []map[string]any
	h.Do("GET", "/api/companies/"+co+"/cases", nil, as...).JSON(t, &cases)
	require.Empty(t, cases)
}
