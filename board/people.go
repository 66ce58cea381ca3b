package board

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"
	"golang.org/x/sync/errgroup"
)

// mountPeople adds the people pages (members, invites, join requests), the instance
// settings page, and the skills and folders pages (mountSkills).
func (b *Board) mountPeople(g fiber.Router) {
	g.Get("/c/:companyId/members", b.members)
	g.Get("/c/:companyId/members/join-requests", b.joinRequestsFragment)
	g.Post("/c/:companyId/members/:memberId/role", b.changeMemberRole)
	g.Post("/c/:companyId/members/:memberId/remove", b.removeMember)
	g.Post("/c/:companyId/invites", b.createInvite)
	g.Post("/c/:companyId/invites/:inviteId/revoke", b.revokeInvite)
	g.Post("/c/:companyId/join-requests/:requestId/:decision", b.decideJoinRequest)
	g.Get("/instance/settings", b.instanceSettings)
	g.Post("/instance/settings/:section", b.updateInstanceSetting)
	b.mountSkills(g)
}

// membershipRoles are the roles a member or an invite may carry, most powerful first.
var membershipRoles = []string{"owner", "admin", "operator", "member", "viewer"}

// permSet is what the visitor may do in a company, as the API reports it.
type permSet struct {
	all  bool
	keys map[string]bool
}

// Has says whether the visitor holds the permission key.
func (p permSet) Has(key string) bool { return p.all || p.keys[key] }

// callerPermissions reads the visitor's permission keys in a company from the API: every
// key for an instance admin (the local board is one), else the keys of the visitor's
// company profile (role defaults plus explicit grants). A visitor without a profile holds
// none; the API still judges every write.
func (b *Board) callerPermissions(v *visitor, companyID string) permSet {
	var me boardCaller
	if err := b.api.callAs(v, "GET", "/api/cli-auth/me", nil, nil, &me); err != nil {
		return permSet{}
	}
	if me.IsInstanceAdmin {
		return permSet{all: true}
	}
	var p userProfile
	path := "/api/companies/" + url.PathEscape(companyID) + "/users/" + url.PathEscape(me.UserID) + "/profile"
	if err := b.api.callAs(v, "GET", path, nil, nil, &p); err != nil {
		return permSet{}
	}
	s := permSet{keys: make(map[string]bool, len(p.Permissions))}
	for _, k := range p.Permissions {
		s.keys[k] = true
	}
	return s
}

// membersData is the members page.
type membersData struct {
	CompanyID    string
	CSRF         string
	Perms        permSet
	Members      []member
	Invites      []invite
	JoinRequests []joinRequest
	// InvitesNote and JoinsNote say why a section is not shown (the API's 403).
	InvitesNote string
	JoinsNote   string
	// Created is the invite just created: its link is shown this once.
	Created *inviteCreated
}

// loadMembers reads the members, invites, join requests and the visitor's permissions in
// parallel. The members must load; invites and join requests the API refuses (403) are
// replaced by a note saying so.
func (b *Board) loadMembers(c *fiber.Ctx, companyID string) (*membersData, error) {
	d := &membersData{CompanyID: companyID, CSRF: csrfOf(c)}
	v := visitorOf(c)
	base := "/api/companies/" + url.PathEscape(companyID)
	var membersErr, invitesErr, joinsErr error
	var g errgroup.Group
	g.Go(func() error { membersErr = b.api.callAs(v, "GET", base+"/members", nil, nil, &d.Members); return nil })
	g.Go(func() error { invitesErr = b.api.callAs(v, "GET", base+"/invites", nil, nil, &d.Invites); return nil })
	g.Go(func() error {
		joinsErr = b.api.callAs(v, "GET", base+"/join-requests", nil, nil, &d.JoinRequests)
		return nil
	})
	g.Go(func() error { d.Perms = b.callerPermissions(v, companyID); return nil })
	_ = g.Wait()
	if membersErr != nil {
		return nil, membersErr
	}
	note := func(err error, what string) (string, error) {
		var ae *apiError
		if err == nil {
			return "", nil
		}
		if errors.As(err, &ae) && ae.Status == http.StatusForbidden {
			return fmt.Sprintf("The %s are not available to you: %s.", what, ae.Message), nil
		}
		return "", err
	}
	var err error
	if d.InvitesNote, err = note(invitesErr, "invites"); err != nil {
		return nil, err
	}
	if d.JoinsNote, err = note(joinsErr, "join requests"); err != nil {
		return nil, err
	}
	sort.SliceStable(d.Members, func(i, j int) bool { return memberName(d.Members[i]) < memberName(d.Members[j]) })
	return d, nil
}

func (b *Board) members(c *fiber.Ctx) error {
	id := c.Params("companyId")
	l, done, err := b.page(c, "Members", "members", id)
	if done {
		return err
	}
	d, err := b.loadMembers(c, id)
	if err != nil {
		return b.fail(c, l, err)
	}
	l.Notice = peopleNotices[c.Query("done")]
	return render(c, http.StatusOK, membersPage(l, d))
}

// joinRequestsFragment answers the join requests section, re-fetched by the members page on
// join request events.
func (b *Board) joinRequestsFragment(c *fiber.Ctx) error {
	id := c.Params("companyId")
	d := &membersData{CompanyID: id, CSRF: csrfOf(c)}
	err := b.api.call(c, "GET", "/api/companies/"+url.PathEscape(id)+"/join-requests", nil, nil, &d.JoinRequests)
	var ae *apiError
	switch {
	case errors.As(err, &ae) && ae.Status == http.StatusForbidden:
		d.JoinsNote = fmt.Sprintf("The join requests are not available to you: %s.", ae.Message)
	case err != nil:
		return b.fail(c, nil, err)
	}
	return render(c, http.StatusOK, joinRequestsSection(d))
}

// peopleNotices are the confirmations a people or settings write redirects with.
var peopleNotices = map[string]string{
	"role":     "The member's role was changed.",
	"removed":  "The member was removed from the company.",
	"revoked":  "The invite was revoked.",
	"approve":  "The join request was approved.",
	"reject":   "The join request was rejected.",
	"settings": "The setting was saved.",
}

// afterMembersWrite answers a members form: a redirect back with a confirmation, or the
// page again with the API's refusal and its status.
func (b *Board) afterMembersWrite(c *fiber.Ctx, writeErr error, done string) error {
	id := c.Params("companyId")
	if writeErr == nil {
		return c.Redirect("/c/"+id+"/members?done="+done, http.StatusSeeOther)
	}
	l, fdone, err := b.page(c, "Members", "members", id)
	if fdone {
		return err
	}
	var ae *apiError
	if !errors.As(writeErr, &ae) {
		return b.fail(c, l, writeErr)
	}
	d, err := b.loadMembers(c, id)
	if err != nil {
		return b.fail(c, l, err)
	}
	l.Error = refusalWithDetails(ae)
	return render(c, ae.Status, membersPage(l, d))
}

func (b *Board) changeMemberRole(c *fiber.Ctx) error {
	path := "/api/companies/" + url.PathEscape(c.Params("companyId")) + "/members/" + url.PathEscape(c.Params("memberId"))
	body := map[string]any{"membershipRole": c.FormValue("membershipRole")}
	return b.afterMembersWrite(c, b.api.call(c, "PATCH", path, nil, body, nil), "role")
}

func (b *Board) removeMember(c *fiber.Ctx) error {
	path := "/api/companies/" + url.PathEscape(c.Params("companyId")) + "/members/" + url.PathEscape(c.Params("memberId")) + "/archive"
	return b.afterMembersWrite(c, b.api.call(c, "POST", path, nil, nil, nil), "removed")
}

func (b *Board) revokeInvite(c *fiber.Ctx) error {
	path := "/api/invites/" + url.PathEscape(c.Params("inviteId")) + "/revoke"
	return b.afterMembersWrite(c, b.api.call(c, "POST", path, nil, nil, nil), "revoked")
}

func (b *Board) decideJoinRequest(c *fiber.Ctx) error {
	decision := c.Params("decision")
	if decision != "approve" && decision != "reject" {
		return b.fail(c, nil, &apiError{Status: http.StatusNotFound, Message: "No such decision: approve or reject a join request"})
	}
	path := "/api/companies/" + url.PathEscape(c.Params("companyId")) + "/join-requests/" + url.PathEscape(c.Params("requestId")) + "/" + decision
	return b.afterMembersWrite(c, b.api.call(c, "POST", path, nil, map[string]any{}, nil), decision)
}

// createInvite creates an invite and shows the members page with its link, the only time
// the API gives it.
func (b *Board) createInvite(c *fiber.Ctx) error {
	id := c.Params("companyId")
	body := map[string]any{"membershipRole": c.FormValue("membershipRole"), "allowedJoinTypes": c.FormValue("allowedJoinTypes")}
	if e := strings.TrimSpace(c.FormValue("email")); e != "" {
		body["email"] = e
	}
	if h := strings.TrimSpace(c.FormValue("expiresInHours")); h != "" {
		n, err := strconv.Atoi(h)
		if err != nil {
			return b.afterMembersWrite(c, &apiError{Status: http.StatusBadRequest, Message: "expiresInHours must be a whole number of hours"}, "")
		}
		body["expiresInHours"] = n
	}
	var created inviteCreated
	if err := b.api.call(c, "POST", "/api/companies/"+url.PathEscape(id)+"/invites", nil, body, &created); err != nil {
		return b.afterMembersWrite(c, err, "")
	}
	l, done, err := b.page(c, "Members", "members", id)
	if done {
		return err
	}
	d, err := b.loadMembers(c, id)
	if err != nil {
		return b.fail(c, l, err)
	}
	d.Created = &created
	if created.InviteURL == "" {
		created.InviteURL = c.BaseURL() + "/api/invites/" + created.Token
	}
	return render(c, http.StatusOK, membersPage(l, d))
}

// memberName is how a member is shown: the user's name or email, the agent's name.
func memberName(m member) string {
	switch {
	case m.User != nil && m.User.Name != "":
		return m.User.Name
	case m.User != nil:
		return m.User.Email
	case m.Agent != nil:
		return m.Agent.Name
	}
	return m.PrincipalType + " " + shortID(m.PrincipalID)
}

// joinRequester is who asked to join: the user, or the agent's name and adapter.
func joinRequester(j joinRequest) string {
	switch {
	case j.RequestingUser != nil:
		return j.RequestingUser.Name + " <" + j.RequestingUser.Email + ">"
	case j.AgentName != nil && j.AdapterType != nil:
		return *j.AgentName + " (" + *j.AdapterType + ")"
	case j.AgentName != nil:
		return *j.AgentName
	}
	return j.RequestType
}

// settingRow is one instance setting as the settings page shows it.
type settingRow struct {
	Key string
	// Kind is bool, enum or text.
	Kind    string
	Bool    bool
	Text    string
	Options []string
}

// settingsData is the instance settings page.
type settingsData struct {
	CSRF         string
	IsAdmin      bool
	General      []settingRow
	Experimental []settingRow
}

// settingEnums are the general settings whose value is one of a list.
var settingEnums = map[string][]string{"feedbackDataSharingPreference": {"allowed", "not_allowed", "prompt"}}

// settingRows turns a settings section into rows sorted by key.
func settingRows(section map[string]any) []settingRow {
	rows := make([]settingRow, 0, len(section))
	for k, v := range section {
		r := settingRow{Key: k}
		switch x := v.(type) {
		case bool:
			r.Kind, r.Bool = "bool", x
		case string:
			r.Kind, r.Text = "text", x
			if opts, ok := settingEnums[k]; ok {
				r.Kind, r.Options = "enum", opts
			}
		case nil:
			r.Kind, r.Text = "text", "—"
		default:
			b, _ := json.Marshal(x)
			r.Kind, r.Text = "text", string(b)
		}
		rows = append(rows, r)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Key < rows[j].Key })
	return rows
}

func (b *Board) loadSettings(c *fiber.Ctx) (*settingsData, error) {
	d := &settingsData{CSRF: csrfOf(c)}
	v := visitorOf(c)
	var general, experimental map[string]any
	var me boardCaller
	var generalErr, experimentalErr error
	var g errgroup.Group
	g.Go(func() error {
		generalErr = b.api.callAs(v, "GET", "/api/instance/settings/general", nil, nil, &general)
		return nil
	})
	g.Go(func() error {
		experimentalErr = b.api.callAs(v, "GET", "/api/instance/settings/experimental", nil, nil, &experimental)
		return nil
	})
	g.Go(func() error { _ = b.api.callAs(v, "GET", "/api/cli-auth/me", nil, nil, &me); return nil })
	_ = g.Wait()
	if err := errors.Join(generalErr, experimentalErr); err != nil {
		return nil, err
	}
	d.IsAdmin = me.IsInstanceAdmin
	d.General, d.Experimental = settingRows(general), settingRows(experimental)
	return d, nil
}

func (b *Board) instanceSettings(c *fiber.Ctx) error {
	l, done, err := b.page(c, "Instance settings", "instance-settings", "")
	if done {
		return err
	}
	d, err := b.loadSettings(c)
	if err != nil {
		return b.fail(c, l, err)
	}
	l.Notice = peopleNotices[c.Query("done")]
	return render(c, http.StatusOK, settingsPage(l, d))
}

// updateInstanceSetting sets one key of a section: "true" and "false" are booleans, any
// other value a string (the API checks the key and the value's type).
func (b *Board) updateInstanceSetting(c *fiber.Ctx) error {
	section := c.Params("section")
	if section != "general" && section != "experimental" {
		return b.fail(c, nil, &apiError{Status: http.StatusNotFound, Message: "No such settings section: general or experimental"})
	}
	key := c.FormValue("key")
	var value any = c.FormValue("value")
	switch value {
	case "true":
		value = true
	case "false":
		value = false
	}
	var writeErr error
	if key == "" {
		writeErr = &apiError{Status: http.StatusBadRequest, Message: "Choose a setting to change"}
	} else {
		writeErr = b.api.call(c, "PATCH", "/api/instance/settings/"+section, nil, map[string]any{key: value}, nil)
	}
	if writeErr == nil {
		return c.Redirect("/instance/settings?done=settings", http.StatusSeeOther)
	}
	l, done, err := b.page(c, "Instance settings", "instance-settings", "")
	if done {
		return err
	}
	var ae *apiError
	if !errors.As(writeErr, &ae) {
		return b.fail(c, l, writeErr)
	}
	d, err := b.loadSettings(c)
	if err != nil {
		return b.fail(c, l, err)
	}
	l.Error = refusalWithDetails(ae)
	return render(c, ae.Status, settingsPage(l, d))
}
