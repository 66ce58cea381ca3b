package board_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/host"
	"github.com/keelhq/keel/sdktest"
)

// TestBoardOps covers the routine and cost pages on one local_trusted host.
func TestBoardOps(t *testing.T) {
	t.Parallel()
	h, _ := startLocal(t)
	t.Run("Routines", func(t *testing.T) {
		t.Parallel()
		testRoutines(t, h, h.CreateCompany("Routines Co"))
	})
	t.Run("Costs", func(t *testing.T) {
		t.Parallel()
		testCosts(t, h, h.CreateCompany("Costs Co"))
	})
}

// TestBoardOpsRoles checks the routine and cost pages for lesser actors in authenticated
// mode: a viewer reads them but every write is refused with the API's reason on the page,
// and a user who is no member gets the clear 403 page.
func TestBoardOpsRoles(t *testing.T) {
	t.Parallel()
	h := sdktest.Start(t, sdktest.Options{Builtins: true, Configure: func(c *host.Config) {
		c.DeploymentMode, c.DeploymentExposure = "authenticated", "private"
	}})
	waitExtensions(t, h)
	admin := signUp(t, h, "Owner", "owner@example.test")
	p := admin.post("/claim-admin", url.Values{"_csrf": {admin.get("/companies").csrf(t)}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	p = admin.post("/companies", url.Values{"_csrf": {admin.get("/companies").csrf(t)}, "name": {"Roles Co"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	companyPath := p.Header.Get("Location")
	co := strings.TrimPrefix(companyPath, "/c/")
	// A routine made by the owner, for the viewer to see.
	tok := admin.get(companyPath + "/routines").csrf(t)
	p = admin.post(companyPath+"/routines", url.Values{"_csrf": {tok}, "title": {"Owner's routine"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	routinePath := p.Header.Get("Location")

	viewer := signUp(t, h, "Vera", "vera@example.test")
	var viewerID string
	require.NoError(t, h.Kernel.Pool.QueryRow(context.Background(), `SELECT id FROM kernel.users WHERE email = $1`, "vera@example.test").Scan(&viewerID))
	_, err := h.Kernel.Pool.Exec(context.Background(), `INSERT INTO kernel.company_memberships
		(id, company_id, principal_type, principal_id, status, membership_role) VALUES ($1, $2, 'user', $3, 'active', 'viewer')`,
		uuid.NewString(), co, viewerID)
	require.NoError(t, err)

	t.Run("ViewerReadsButMayNotWrite", func(t *testing.T) {
		p := viewer.get(companyPath + "/routines")
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		require.Contains(t, p.Body, "Owner&#39;s routine")
		vtok := p.csrf(t)
		p = viewer.post(companyPath+"/routines", url.Values{"_csrf": {vtok}, "title": {"Viewer's routine"}})
		require.Equal(t, http.StatusForbidden, p.Status, p.Body)
		requireSafePage(t, p)
		require.Contains(t, p.Body, "The routine was not created: You may not do this")
		p = viewer.get(routinePath)
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		p = viewer.post(routinePath+"/run", url.Values{"_csrf": {vtok}})
		require.Equal(t, http.StatusForbidden, p.Status, p.Body)
		require.Contains(t, p.Body, "You may not do this")
		require.Contains(t, p.Body, "No runs yet.")
		p = viewer.get(companyPath + "/costs")
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		requireSafePage(t, p)
		p = viewer.post(companyPath+"/costs/budget", url.Values{"_csrf": {vtok}, "amount": {"99"}})
		require.Equal(t, http.StatusForbidden, p.Status, p.Body)
		require.Contains(t, p.Body, "You may not do this")
		require.Contains(t, p.Body, `value="0.00"`, "the budget is unchanged")
	})

	t.Run("NonMemberIsRefused", func(t *testing.T) {
		stranger := signUp(t, h, "Sam", "sam@example.test")
		for _, path := range []string{companyPath + "/routines", routinePath, companyPath + "/costs"} {
			p := stranger.get(path)
			require.Equal(t, http.StatusForbidden, p.Status, "%s: %s", path, p.Body)
			requireSafePage(t, p)
			require.Contains(t, p.Body, "You do not have access")
		}
	})
}

// signUp creates an account through the board's sign-up form and returns its browser.
func signUp(t *testing.T, h *sdktest.Host, name, email string) *browser {
	t.Helper()
	b := newBrowser(t, h.URL)
	p := b.post("/signup", url.Values{"_csrf": {b.get("/signin").csrf(t)}, "name": {name}, "email": {email}, "password": {"correct horse battery"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	return b
}
