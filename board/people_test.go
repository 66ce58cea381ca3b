package board_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/host"
	"github.com/keelhq/keel/sdktest"
)

// api sends a JSON request to the API with the browser's cookies (a board user's session),
// as a script on the board's own origin would, and decodes a JSON answer into out.
func (b *browser) api(method, path string, body, out any) int {
	b.t.Helper()
	var r io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		require.NoError(b.t, err)
		r = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, b.base+path, r)
	require.NoError(b.t, err)
	req.Header.Set("Content-Type", "application/json")
	res, err := b.c.Do(req)
	require.NoError(b.t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(b.t, err)
	if out != nil && res.StatusCode < 300 {
		require.NoError(b.t, json.Unmarshal(raw, out), "%s", raw)
	}
	return res.StatusCode
}

var inviteURL = regexp.MustCompile(`id="invite-url" type="text" readonly value="([^"]+)"`)

// TestBoardPeopleLocal covers the skills, folders, members and instance settings pages as
// the local board (an instance admin): every page, creating and assigning a skill, moving a
// skill between folders through the page's forms, folder writes the API refuses, an invite
// created and revoked, and an experimental flag toggled.
func TestBoardPeopleLocal(t *testing.T) {
	t.Parallel()
	h, co := startLocal(t)
	res := h.Do("POST", "/api/companies/"+co+"/agents", map[string]any{"name": "Scribe", "role": "engineer"})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	agentID := res.Map(t)["id"].(string)
	res = h.Do("POST", "/api/companies/"+co+"/skills", map[string]any{"name": "Release notes", "description": "Writes release notes",
		"markdown": "Summarise the merged changes."})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	skill := res.Map(t)
	skillID := skill["id"].(string)

	t.Run("Pages", func(t *testing.T) {
		t.Parallel()
		b := newBrowser(t, h.URL)
		for _, tc := range []struct {
			path string
			want []string
		}{
			{"/c/" + co + "/skills", []string{"<h1>Skills</h1>", "Release notes", skill["key"].(string), "Create a skill", "Import skills",
				`href="/c/` + co + `/members"`, `href="/instance/settings"`}},
			{"/c/" + co + "/skills/" + skillID, []string{"Release notes", "Summarise the merged changes.", "SKILL.md", "Assign to agent", "Scribe"}},
			{"/c/" + co + "/folders", []string{"<h1>Folders</h1>", "Unfiled", "Release notes", `name="folderId"`, "folders.", `draggable="true"`}},
			{"/c/" + co + "/folders?kind=routine", []string{"<h1>Folders</h1>", `data-kind="routine"`}},
			{"/c/" + co + "/members", []string{"<h1>Members</h1>", "Invite someone", "Join requests", `name="membershipRole"`}},
			{"/instance/settings", []string{"<h1>Instance settings</h1>", "enableCases", "feedbackDataSharingPreference", "Turn on"}},
		} {
			p := b.get(tc.path)
			require.Equal(t, http.StatusOK, p.Status, "%s: %s", tc.path, p.Body)
			requireSafePage(t, p)
			for _, w := range tc.want {
				require.Contains(t, p.Body, w, tc.path)
			}
		}
		p := b.get("/c/" + co + "/skills/00000000-0000-0000-0000-000000000000")
		require.Equal(t, http.StatusNotFound, p.Status, p.Body)
		require.Contains(t, p.Body, "Skill not found")
		p = b.get("/c/" + co + "/skills/" + skillID + "?path=nope.md")
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		require.Contains(t, p.Body, "The file nope.md could not be read")
	})

	t.Run("CreateAndAssignSkill", func(t *testing.T) {
		t.Parallel()
		b := newBrowser(t, h.URL)
		tok := b.get("/c/" + co + "/skills").csrf(t)
		p := b.post("/c/"+co+"/skills", url.Values{"_csrf": {tok}, "name": {"Triage"}, "markdown": {"Sort the inbox."}})
		require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
		loc := p.Header.Get("Location")
		require.True(t, strings.HasPrefix(loc, "/c/"+co+"/skills/"), loc)
		id := strings.TrimSuffix(strings.TrimPrefix(loc, "/c/"+co+"/skills/"), "?done=created")
		p = b.get(loc)
		require.Contains(t, p.Body, "Sort the inbox.")
		require.Contains(t, p.Body, "The skill was created.")

		// Edit its SKILL.md through the page.
		require.Contains(t, p.Body, `name="content"`)
		p = b.post("/c/"+co+"/skills/"+id+"/files", url.Values{"_csrf": {tok}, "path": {"SKILL.md"},
			"content": {"---\nname: Triage\ndescription: Sorts the inbox by urgency\n---\nSort the inbox, urgent first."}})
		require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
		p = b.get(p.Header.Get("Location"))
		require.Contains(t, p.Body, "The file was saved.")
		require.Contains(t, p.Body, "Sort the inbox, urgent first.")
		require.Contains(t, p.Body, "Sorts the inbox by urgency")
		p = b.post("/c/"+co+"/skills/"+id+"/files", url.Values{"_csrf": {tok}, "path": {"../escape.md"}, "content": {"x"}})
		require.GreaterOrEqual(t, p.Status, 400, p.Body)
		require.Less(t, p.Status, 500, p.Body)
		require.Contains(t, p.Body, "The change was refused")

		p = b.post("/c/"+co+"/skills/"+id+"/agents", url.Values{"_csrf": {tok}, "agentId": {agentID}, "action": {"add"}})
		require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
		var ag struct {
			DesiredSkills []string `json:"desiredSkills"`
		}
		h.Do("GET", "/api/agents/"+agentID, nil).JSON(t, &ag)
		var sk map[string]any
		h.Do("GET", "/api/companies/"+co+"/skills/"+id, nil).JSON(t, &sk)
		require.Contains(t, ag.DesiredSkills, sk["key"])
		p = b.get("/c/" + co + "/skills/" + id)
		require.Contains(t, p.Body, "Agents using it (1)")
		p = b.post("/c/"+co+"/skills/"+id+"/agents", url.Values{"_csrf": {tok}, "agentId": {agentID}, "action": {"remove"}})
		require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
		h.Do("GET", "/api/agents/"+agentID, nil).JSON(t, &ag)
		require.NotContains(t, ag.DesiredSkills, sk["key"])

		// Refusals are shown with the API's text.
		p = b.post("/c/"+co+"/skills", url.Values{"_csrf": {tok}, "name": {""}})
		require.Equal(t, http.StatusBadRequest, p.Status, p.Body)
		require.Contains(t, p.Body, "The change was refused")
		require.Contains(t, p.Body, "(name: must be 1 to 200 characters)")
		p = b.post("/c/"+co+"/skills/import", url.Values{"_csrf": {tok}, "source": {""}})
		require.GreaterOrEqual(t, p.Status, 400, p.Body)
		require.Less(t, p.Status, 500, p.Body)
		require.Contains(t, p.Body, `role="alert"`)
		p = b.post("/c/"+co+"/skills/"+id+"/agents", url.Values{"_csrf": {tok}, "agentId": {"00000000-0000-0000-0000-000000000000"}})
		require.Equal(t, http.StatusNotFound, p.Status, p.Body)

		p = b.post("/c/"+co+"/skills/"+id+"/delete", url.Values{"_csrf": {tok}})
		require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
		require.Equal(t, http.StatusNotFound, h.Do("GET", "/api/companies/"+co+"/skills/"+id, nil).Status)
	})

	t.Run("FolderMove", func(t *testing.T) {
		t.Parallel()
		b := newBrowser(t, h.URL)
		page := "/c/" + co + "/folders?kind=skill"
		tok := b.get(page).csrf(t)
		res := h.Do("POST", "/api/companies/"+co+"/skills", map[string]any{"name": "Movable"})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		item := res.Map(t)["id"].(string)

		// Create a folder through the plain form, and one inside it through htmx.
		p := b.post("/c/"+co+"/folders", url.Values{"_csrf": {tok}, "kind": {"skill"}, "name": {"Writing"}})
		require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
		require.Equal(t, page, p.Header.Get("Location"))
		var list struct {
			Folders []map[string]any `json:"folders"`
		}
		h.Do("GET", "/api/companies/"+co+"/folders?kind=skill", nil).JSON(t, &list)
		var writing string
		for _, f := range list.Folders {
			if f["name"] == "Writing" {
				writing = f["id"].(string)
			}
		}
		require.NotEmpty(t, writing)
		p = b.post("/c/"+co+"/folders", url.Values{"kind": {"skill"}, "name": {"Drafts"}, "parentId": {writing}}, "HX-Request", "true", "X-CSRF-Token", tok)
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		require.True(t, strings.HasPrefix(p.Body, `<div id="folder-tree"`), p.Body)
		require.Contains(t, p.Body, "Drafts")

		// Move the item with the "move to" form, as a drop (htmx) and as a plain form.
		p = b.post("/c/"+co+"/folders/items/move", url.Values{"kind": {"skill"}, "itemId": {item}, "folderId": {writing}},
			"HX-Request", "true", "X-CSRF-Token", tok)
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		require.Regexp(t, `id="folder-`+writing+`"[^>]*>(?s:.*)Movable`, p.Body)
		require.Equal(t, writing, h.Do("GET", "/api/companies/"+co+"/skills/"+item, nil).Map(t)["folderId"])
		p = b.post("/c/"+co+"/folders/items/move", url.Values{"_csrf": {tok}, "kind": {"skill"}, "itemId": {item}, "folderId": {""}})
		require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
		require.Nil(t, h.Do("GET", "/api/companies/"+co+"/skills/"+item, nil).Map(t)["folderId"])

		// A name the API refuses: its reason on the page.
		p = b.post("/c/"+co+"/folders", url.Values{"_csrf": {tok}, "kind": {"skill"}, "name": {strings.Repeat("x", 121)}})
		require.GreaterOrEqual(t, p.Status, 400, p.Body)
		require.Less(t, p.Status, 500, p.Body)
		require.Contains(t, p.Body, "The change was refused")
		require.Contains(t, p.Body, "The change was refused: Validation error (name: must be 1 to 120 characters)")

		// Rename; a folder with a child folder cannot be deleted, and the API says so.
		p = b.post("/c/"+co+"/folders/"+writing+"/rename", url.Values{"_csrf": {tok}, "kind": {"skill"}, "name": {"Prose"}})
		require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
		require.Contains(t, b.get(page).Body, "Prose")
		p = b.post("/c/"+co+"/folders/"+writing+"/delete", url.Values{"kind": {"skill"}}, "HX-Request", "true", "X-CSRF-Token", tok)
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		require.Contains(t, p.Body, `class="notice error" role="alert">The change was refused`)
		p = b.post("/c/"+co+"/folders/"+writing+"/delete", url.Values{"_csrf": {tok}, "kind": {"skill"}})
		require.Equal(t, http.StatusConflict, p.Status, p.Body)
		requireSafePage(t, p)
		// A routine item cannot enter a skill folder; a bad id is a clear 4xx.
		p = b.post("/c/"+co+"/folders/items/move", url.Values{"_csrf": {tok}, "kind": {"skill"}, "itemId": {"nope"}, "folderId": {writing}})
		require.GreaterOrEqual(t, p.Status, 400, p.Body)
		require.Less(t, p.Status, 500, p.Body)
	})

	t.Run("InviteCreatedAndRevoked", func(t *testing.T) {
		t.Parallel()
		b := newBrowser(t, h.URL)
		tok := b.get("/c/" + co + "/members").csrf(t)
		p := b.post("/c/"+co+"/invites", url.Values{"_csrf": {tok}, "membershipRole": {"viewer"}, "allowedJoinTypes": {"human"}, "expiresInHours": {"24"}})
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		requireSafePage(t, p)
		m := inviteURL.FindStringSubmatch(p.Body)
		require.NotNil(t, m, p.Body)
		require.Contains(t, m[1], "/api/invites/")
		token := m[1][strings.LastIndex(m[1], "/")+1:]
		require.Equal(t, http.StatusOK, h.Do("GET", "/api/invites/"+token, nil).Status, "the link opens the invite")
		// The link is shown once: the list does not carry it.
		p = b.get("/c/" + co + "/members")
		require.NotContains(t, p.Body, token)
		var invites []map[string]any
		h.Do("GET", "/api/companies/"+co+"/invites", nil).JSON(t, &invites)
		var id string
		for _, inv := range invites {
			if inv["status"] == "active" && inv["membershipRole"] == "viewer" {
				id = inv["id"].(string)
			}
		}
		require.NotEmpty(t, id)
		require.Contains(t, p.Body, `action="/c/`+co+`/invites/`+id+`/revoke"`)
		p = b.post("/c/"+co+"/invites/"+id+"/revoke", url.Values{"_csrf": {tok}})
		require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
		p = b.get(p.Header.Get("Location"))
		require.Contains(t, p.Body, "The invite was revoked.")
		require.NotContains(t, p.Body, `action="/c/`+co+`/invites/`+id+`/revoke"`)
		require.Equal(t, http.StatusNotFound, h.Do("GET", "/api/invites/"+token, nil).Status)
		// Revoking an unknown invite: the API's refusal on the page.
		p = b.post("/c/"+co+"/invites/00000000-0000-0000-0000-000000000000/revoke", url.Values{"_csrf": {tok}})
		require.Equal(t, http.StatusNotFound, p.Status, p.Body)
		require.Contains(t, p.Body, "The change was refused")
		// A bad expiry is a clear 400.
		p = b.post("/c/"+co+"/invites", url.Values{"_csrf": {tok}, "membershipRole": {"viewer"}, "expiresInHours": {"soon"}})
		require.Equal(t, http.StatusBadRequest, p.Status, p.Body)
	})

	t.Run("JoinRequestsDecided", func(t *testing.T) {
		t.Parallel()
		res := h.Do("POST", "/api/companies/"+co+"/invites", map[string]any{"allowedJoinTypes": "agent"})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		token := res.Map(t)["token"].(string)
		res = h.Do("POST", "/api/invites/"+token+"/accept", map[string]any{"requestType": "agent", "agentName": "Outsider"})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		reqID := res.Map(t)["id"].(string)
		res = h.Do("POST", "/api/companies/"+co+"/invites", map[string]any{"allowedJoinTypes": "agent"})
		token = res.Map(t)["token"].(string)
		res = h.Do("POST", "/api/invites/"+token+"/accept", map[string]any{"requestType": "agent", "agentName": "Gatecrasher"})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		rejectID := res.Map(t)["id"].(string)

		b := newBrowser(t, h.URL)
		p := b.get("/c/" + co + "/members")
		require.Contains(t, p.Body, "Outsider")
		require.Contains(t, p.Body, `sse-connect="/api/companies/`+co+`/events?entityType=join_request&amp;since=`)
		tok := p.csrf(t)
		// The section the page re-fetches on a join request event.
		f := b.get("/c/"+co+"/members/join-requests", "HX-Request", "true")
		require.Equal(t, http.StatusOK, f.Status, f.Body)
		require.True(t, strings.HasPrefix(f.Body, `<section id="join-requests"`), f.Body)
		require.Contains(t, f.Body, "Gatecrasher")
		p = b.post("/c/"+co+"/join-requests/"+reqID+"/approve", url.Values{"_csrf": {tok}})
		require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
		p = b.post("/c/"+co+"/join-requests/"+rejectID+"/reject", url.Values{"_csrf": {tok}})
		require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
		var reqs []map[string]any
		h.Do("GET", "/api/companies/"+co+"/join-requests", nil).JSON(t, &reqs)
		status := map[string]any{}
		for _, r := range reqs {
			status[r["id"].(string)] = r["status"]
		}
		require.Equal(t, "approved", status[reqID])
		require.Equal(t, "rejected", status[rejectID])
		p = b.post("/c/"+co+"/join-requests/"+rejectID+"/approve", url.Values{"_csrf": {tok}})
		require.Equal(t, http.StatusConflict, p.Status, p.Body)
		p = b.post("/c/"+co+"/join-requests/"+rejectID+"/ponder", url.Values{"_csrf": {tok}})
		require.Equal(t, http.StatusNotFound, p.Status, p.Body)
	})

	t.Run("FlagToggled", func(t *testing.T) {
		t.Parallel()
		b := newBrowser(t, h.URL)
		tok := b.get("/instance/settings").csrf(t)
		p := b.post("/instance/settings/experimental", url.Values{"_csrf": {tok}, "key": {"enableSmokeLab"}, "value": {"true"}})
		require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
		require.Equal(t, true, h.Do("GET", "/api/instance/settings/experimental", nil).Map(t)["enableSmokeLab"])
		p = b.get(p.Header.Get("Location"))
		require.Contains(t, p.Body, "The setting was saved.")
		require.Contains(t, p.Body, `aria-label="Turn off enableSmokeLab"`)
		p = b.post("/instance/settings/general", url.Values{"_csrf": {tok}, "key": {"feedbackDataSharingPreference"}, "value": {"allowed"}})
		require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
		require.Equal(t, "allowed", h.Do("GET", "/api/instance/settings/general", nil).Map(t)["feedbackDataSharingPreference"])
		// Unknown keys and sections are refused clearly.
		p = b.post("/instance/settings/experimental", url.Values{"_csrf": {tok}, "key": {"enableTimeTravel"}, "value": {"true"}})
		require.Equal(t, http.StatusBadRequest, p.Status, p.Body)
		require.Contains(t, p.Body, "The change was refused")
		p = b.post("/instance/settings/secret", url.Values{"_csrf": {tok}, "key": {"x"}, "value": {"true"}})
		require.Equal(t, http.StatusNotFound, p.Status, p.Body)
		// Without the CSRF token nothing changes.
		p = b.post("/instance/settings/experimental", url.Values{"key": {"enableSmokeLab"}, "value": {"false"}})
		require.Equal(t, http.StatusForbidden, p.Status, p.Body)
		require.Equal(t, true, h.Do("GET", "/api/instance/settings/experimental", nil).Map(t)["enableSmokeLab"])
	})

	t.Run("WritesNeedCSRF", func(t *testing.T) {
		t.Parallel()
		b := newBrowser(t, h.URL)
		b.get("/c/" + co + "/members")
		for _, path := range []string{"/c/" + co + "/invites", "/c/" + co + "/skills", "/c/" + co + "/folders",
			"/c/" + co + "/folders/items/move", "/c/" + co + "/skills/" + skillID + "/agents"} {
			p := b.post(path, url.Values{"name": {"x"}, "membershipRole": {"viewer"}, "kind": {"skill"}})
			require.Equal(t, http.StatusForbidden, p.Status, "%s: %s", path, p.Body)
		}
	})
}

// TestBoardPeopleViewer covers a member of lower role in authenticated mode: the owner
// invites through the page, the invitee joins, the owner changes their role to viewer
// through the page, and the viewer then gets no write forms and the API's refusal for
// writes sent anyway, on the members page and the instance settings.
func TestBoardPeopleViewer(t *testing.T) {
	t.Parallel()
	h := sdktest.Start(t, sdktest.Options{Builtins: true, Configure: func(c *host.Config) {
		c.DeploymentMode, c.DeploymentExposure = "authenticated", "private"
	}})
	waitExtensions(t, h)
	owner := signUp(t, h, "Olive", "olive@example.test")
	require.Equal(t, http.StatusSeeOther, owner.post("/claim-admin", url.Values{"_csrf": {owner.get("/companies").csrf(t)}}).Status)
	tok := owner.get("/companies").csrf(t)
	p := owner.post("/companies", url.Values{"_csrf": {tok}, "name": {"Olive's company"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	co := strings.TrimPrefix(p.Header.Get("Location"), "/c/")
	members := "/c/" + co + "/members"

	// Invite through the page, join as Vic through the API with Vic's session.
	tok = owner.get(members).csrf(t)
	p = owner.post("/c/"+co+"/invites", url.Values{"_csrf": {tok}, "membershipRole": {"operator"}, "allowedJoinTypes": {"human"}})
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	m := inviteURL.FindStringSubmatch(p.Body)
	require.NotNil(t, m, p.Body)
	token := m[1][strings.LastIndex(m[1], "/")+1:]
	vic := signUp(t, h, "Vic", "vic@example.test")
	require.Equal(t, http.StatusCreated, vic.api("POST", "/api/invites/"+token+"/accept", map[string]any{}, nil))

	// The owner changes Vic's role to viewer.
	var list []struct {
		ID             string `json:"id"`
		MembershipRole string `json:"membershipRole"`
		User           *struct {
			Name string `json:"name"`
		} `json:"user"`
	}
	require.Equal(t, http.StatusOK, owner.api("GET", "/api/companies/"+co+"/members", nil, &list))
	var vicMember, oliveMember string
	for _, mb := range list {
		if mb.User != nil && mb.User.Name == "Vic" {
			vicMember = mb.ID
		}
		if mb.User != nil && mb.User.Name == "Olive" {
			oliveMember = mb.ID
		}
	}
	require.NotEmpty(t, vicMember)
	p = owner.get(members)
	require.Contains(t, p.Body, "Vic")
	require.Contains(t, p.Body, `action="/c/`+co+`/members/`+vicMember+`/role"`)
	p = owner.post("/c/"+co+"/members/"+vicMember+"/role", url.Values{"_csrf": {p.csrf(t)}, "membershipRole": {"viewer"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	require.Contains(t, owner.get(p.Header.Get("Location")).Body, "The member&#39;s role was changed.")
	require.Equal(t, http.StatusOK, owner.api("GET", "/api/companies/"+co+"/members", nil, &list))
	for _, mb := range list {
		if mb.ID == vicMember {
			require.Equal(t, "viewer", mb.MembershipRole)
		}
	}

	// The viewer sees the members but no write forms, and is told why.
	p = vic.get(members)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	requireSafePage(t, p)
	require.Contains(t, p.Body, "Olive")
	require.NotContains(t, p.Body, "/role\"")
	require.NotContains(t, p.Body, "Create invite")
	require.Contains(t, p.Body, "The invites are not available to you: Missing permission users:invite for this company.")
	require.Contains(t, p.Body, "The join requests are not available to you")
	require.NotContains(t, p.Body, "entityType=join_request", "no live join requests for who may not see them")
	// Writes sent anyway get the API's refusal on the page.
	vtok := p.csrf(t)
	p = vic.post("/c/"+co+"/members/"+oliveMember+"/role", url.Values{"_csrf": {vtok}, "membershipRole": {"viewer"}})
	require.Equal(t, http.StatusForbidden, p.Status, p.Body)
	require.Contains(t, p.Body, "You may not do this: Missing permission users:manage_permissions for this company.")
	p = vic.post("/c/"+co+"/invites", url.Values{"_csrf": {vtok}, "membershipRole": {"owner"}})
	require.Equal(t, http.StatusForbidden, p.Status, p.Body)
	require.Contains(t, p.Body, "You may not do this")
	p = vic.post("/c/"+co+"/members/"+oliveMember+"/remove", url.Values{"_csrf": {vtok}})
	require.Equal(t, http.StatusForbidden, p.Status, p.Body)

	// Skills: no create or import forms; a create sent anyway is refused.
	p = vic.get("/c/" + co + "/skills")
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	require.NotContains(t, p.Body, "Create skill")
	require.Contains(t, p.Body, "needs the agents:create permission")
	var made map[string]any
	require.Equal(t, http.StatusCreated, owner.api("POST", "/api/companies/"+co+"/skills", map[string]any{"name": "Owned"}, &made))
	p = vic.get("/c/" + co + "/skills/" + made["id"].(string))
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	require.Contains(t, p.Body, "# Owned")
	require.NotContains(t, p.Body, `name="content"`)
	require.NotContains(t, p.Body, "Delete this skill")
	require.Contains(t, owner.get("/c/"+co+"/skills/"+made["id"].(string)).Body, `name="content"`)
	p = vic.post("/c/"+co+"/skills/"+made["id"].(string)+"/files", url.Values{"_csrf": {vtok}, "path": {"SKILL.md"}, "content": {"# Mine"}})
	require.Equal(t, http.StatusForbidden, p.Status, p.Body)
	require.Contains(t, p.Body, "You may not do this")
	p = vic.post("/c/"+co+"/skills", url.Values{"_csrf": {vtok}, "name": {"Sneaky"}})
	require.Equal(t, http.StatusForbidden, p.Status, p.Body)
	require.Contains(t, p.Body, "You may not do this")

	// Instance settings: readable, no toggles, and a toggle sent anyway is refused.
	p = vic.get("/instance/settings")
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	requireSafePage(t, p)
	require.Contains(t, p.Body, "Only instance admins can change instance settings")
	require.Contains(t, p.Body, "enableCases")
	require.NotContains(t, p.Body, "Turn on")
	p = vic.post("/instance/settings/experimental", url.Values{"_csrf": {vtok}, "key": {"enableCases"}, "value": {"true"}})
	require.Equal(t, http.StatusForbidden, p.Status, p.Body)
	require.Contains(t, p.Body, "You may not do this: Instance admin access required.")
	require.Contains(t, owner.get("/instance/settings").Body, `aria-label="Turn on enableCases"`, "the flag stayed off and the admin may toggle it")

	// Someone outside the company is refused the pages.
	eve := signUp(t, h, "Eve", "eve@example.test")
	for _, path := range []string{members, "/c/" + co + "/skills", "/c/" + co + "/folders"} {
		p = eve.get(path)
		require.Equal(t, http.StatusForbidden, p.Status, "%s: %s", path, p.Body)
		require.Contains(t, p.Body, "You do not have access")
	}
}
