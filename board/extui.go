package board

import (
	"errors"
	"html"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/gofiber/fiber/v2"
	"github.com/microcosm-cc/bluemonday"
	"golang.org/x/sync/errgroup"
)

// Extension UI: a manifest's UI slot may name one of the extension's own GET routes that
// answers an HTML fragment (sdk.UISlot.Route). The board fetches the fragment in-process
// with the visitor's credentials, sanitises it (slotPolicy, then rewriteSlotLinks) and
// places it: sidebar links, pages at /c/{companyId}/x/{pluginKey}/{slotId}, issue and agent
// detail tabs, dashboard widgets and settings pages. A slot that fails or is slow shows a
// small error box; a disabled plugin's slots are gone (the API hides them).

// Slot places the board renders.
const (
	slotSidebar         = "company.sidebar"
	slotPage            = "company.page"
	slotDashboardWidget = "company.dashboardWidget"
	slotCompanySettings = "company.settingsPage"
	slotInstanceSetting = "instance.settingsPage"
	slotIssueTab        = "issue.detailTab"
	slotAgentTab        = "agent.detailTab"
)

// slotTimeout bounds how long a page waits for one slot's fragment.
const slotTimeout = 5 * time.Second

// slotPlace maps a slot name (keel's or the reference's) to the place the board renders
// it; "" is a place the board does not render.
func slotPlace(name string) string {
	switch name {
	case slotSidebar, "sidebar":
		return slotSidebar
	case slotPage, "page":
		return slotPage
	case slotDashboardWidget, "dashboardWidget":
		return slotDashboardWidget
	case slotCompanySettings, "companySettingsPage":
		return slotCompanySettings
	case slotInstanceSetting, "settingsPage":
		return slotInstanceSetting
	case slotIssueTab, slotAgentTab:
		return name
	}
	return ""
}

// placedSlot is one slot of one plugin.
type placedSlot struct {
	Plugin *uiContribution
	Slot   uiSlot
	ID     string
}

// Title is the slot's display name, or its plugin's.
func (s placedSlot) Title() string {
	if s.Slot.DisplayName != "" {
		return s.Slot.DisplayName
	}
	return s.Plugin.DisplayName
}

// contributions reads the enabled plugins' UI slots; an actor who may not read them (an
// agent) gets none.
func (b *Board) contributions(v *visitor) []uiContribution {
	var out []uiContribution
	if err := b.api.callAs(v, "GET", "/api/plugins/ui-contributions", nil, nil, &out); err != nil {
		return nil
	}
	return out
}

// slotsAt returns the slots rendered at place, in plugin then manifest order.
func slotsAt(contribs []uiContribution, place string) []placedSlot {
	var out []placedSlot
	for i := range contribs {
		for j, s := range contribs[i].Slots {
			if slotPlace(s.Slot) == place {
				out = append(out, placedSlot{Plugin: &contribs[i], Slot: s, ID: slotID(s, j)})
			}
		}
	}
	return out
}

func slotID(s uiSlot, i int) string {
	if s.ID != "" {
		return s.ID
	}
	return strconv.Itoa(i)
}

// extensionNav is the sidebar's links of the plugins' company.sidebar and
// company.settingsPage slots. A sidebar slot links to the plugin's first page slot (or,
// without one, to its own route shown as a page).
func (b *Board) extensionNav(v *visitor, companyID string) []navItem {
	contribs := b.contributions(v)
	var out []navItem
	for _, s := range append(slotsAt(contribs, slotSidebar), slotsAt(contribs, slotCompanySettings)...) {
		target := s.ID
		if slotPlace(s.Slot.Slot) == slotSidebar {
			if pages := slotsAt([]uiContribution{*s.Plugin}, slotPage); len(pages) > 0 {
				target = pages[0].ID
			}
		}
		label := s.Title()
		if slotPlace(s.Slot.Slot) == slotCompanySettings {
			label += " settings"
		}
		out = append(out, navItem{Key: "x/" + s.Plugin.PluginKey + "/" + target, Path: "/x/" + url.PathEscape(s.Plugin.PluginKey) + "/" + url.PathEscape(target),
			Icon: "plugin", Label: label})
	}
	return out
}

// renderedSlot is a slot's sanitised fragment, or the error that took its place.
type renderedSlot struct {
	PluginKey string
	Title     string
	HTML      string
	Error     string
}

// Fragment is the sanitised HTML as a component.
func (r renderedSlot) Fragment() templ.Component { return templ.Raw(r.HTML) }

// slotVars are the values of a slot route's placeholders on one page.
type slotVars map[string]string

// fill replaces the placeholders of a slot route with their (escaped) values; ok is false
// when one has no value on this page.
func (vars slotVars) fill(route string) (string, bool) {
	ok := true
	out := regexp.MustCompile(`\{[A-Za-z]+\}`).ReplaceAllStringFunc(route, func(p string) string {
		v, found := vars[p[1:len(p)-1]]
		if !found || v == "" {
			ok = false
		}
		return url.PathEscape(v)
	})
	return out, ok
}

// renderSlot fetches and sanitises one slot's fragment from route (a filled path and
// query under the API), as the visitor, within slotTimeout.
func (b *Board) renderSlot(v *visitor, s placedSlot, companyID, method, route string, body any) renderedSlot {
	r := renderedSlot{PluginKey: s.Plugin.PluginKey, Title: s.Title()}
	if route == "" {
		if s.Slot.Entry != "" {
			r.Error = "This contribution is a script (" + s.Slot.Entry + ") for clients that run extension JavaScript; keel's board only shows HTML fragments from routes."
		} else {
			r.Error = "This contribution has no route."
		}
		return r
	}
	path, rawQuery, _ := strings.Cut(route, "?")
	query, _ := url.ParseQuery(rawQuery)
	type answer struct {
		raw rawAnswer
		err error
	}
	done := make(chan answer, 1)
	go func() {
		var a answer
		a.err = b.api.callAs(v, method, path, query, body, &a.raw)
		done <- a
	}()
	var a answer
	select {
	case a = <-done:
	case <-time.After(slotTimeout):
		r.Error = s.Title() + " did not answer in time."
		return r
	}
	if a.err != nil {
		var ae *apiError
		if errors.As(a.err, &ae) {
			r.Error = s.Title() + " could not be shown: " + ae.Message
		} else {
			r.Error = s.Title() + " could not be shown."
		}
		return r
	}
	if mt, _, _ := mime.ParseMediaType(a.raw.ContentType); mt != "text/html" {
		if method != http.MethodGet {
			r.HTML = `<p class="notice" role="status">Done.</p>`
			return r
		}
		r.Error = s.Title() + " did not answer with HTML (" + a.raw.ContentType + ")."
		return r
	}
	r.HTML = sanitizeSlot(string(a.raw.Body), s, companyID)
	return r
}

// slotPolicy is the sanitiser of extension fragments: bluemonday's policy for user content
// (no script, no style, no event handlers, safe URLs) plus forms and the htmx attributes
// hx-get, hx-post, hx-target and hx-swap, whose URLs rewriteSlotLinks then limits to the
// plugin's own routes.
var slotPolicy = func() *bluemonday.Policy {
	p := bluemonday.UGCPolicy()
	p.AllowElements("form", "label", "button", "select", "option", "textarea", "input", "fieldset", "legend", "nav", "section", "article", "header", "footer", "main", "time", "mark")
	p.AllowAttrs("method").Matching(regexp.MustCompile(`^(?i)(get|post)$`)).OnElements("form")
	p.AllowAttrs("type").Matching(regexp.MustCompile(`^(text|search|hidden|number|email|url|checkbox|radio|date|submit|button|reset)$`)).OnElements("input", "button")
	p.AllowAttrs("name", "value", "placeholder", "required", "disabled", "checked", "min", "max", "step", "maxlength", "autocomplete").OnElements("input", "select", "textarea", "button")
	p.AllowAttrs("selected", "value").OnElements("option")
	p.AllowAttrs("rows", "cols").OnElements("textarea")
	p.AllowAttrs("for").OnElements("label")
	p.AllowAttrs("datetime").OnElements("time")
	p.AllowAttrs("role").Matching(regexp.MustCompile(`^(status|alert|region|list|listitem|search|navigation|tablist|tab|tabpanel|note|log)$`)).Globally()
	p.AllowAttrs("aria-label", "aria-describedby", "aria-labelledby", "aria-current").Matching(regexp.MustCompile(`^[\w .:-]*$`)).Globally()
	p.AllowAttrs("aria-live").Matching(regexp.MustCompile(`^(polite|off)$`)).Globally()
	p.AllowAttrs("hx-get", "hx-post").Matching(regexp.MustCompile(`^/api/plugins/[^\s"'<>]+$`)).Globally()
	p.AllowAttrs("hx-target").Matching(regexp.MustCompile(`^(this|#[A-Za-z][\w-]*)$`)).Globally()
	p.AllowAttrs("hx-swap").Matching(regexp.MustCompile(`^(innerHTML|outerHTML|beforebegin|afterbegin|beforeend|afterend|none)$`)).Globally()
	return p
}()

// slotURLAttr finds the URL attributes of sanitised HTML (values are escaped, so a quote
// ends them).
var slotURLAttr = regexp.MustCompile(`\s(hx-get|hx-post|href|action)="([^"]*)"`)

// sanitizeSlot cleans a fragment of the plugin of s.
func sanitizeSlot(fragment string, s placedSlot, companyID string) string {
	return rewriteSlotLinks(slotPolicy.Sanitize(fragment), s, companyID)
}

// rewriteSlotLinks sends the fragment's htmx requests and links to the plugin's own routes
// through the board (which fetches and sanitises their answers in turn): hx-get and
// hx-post to /api/plugins/{key or id}/… become the slot's board path with ?at=…, as do
// links; htmx requests anywhere else are dropped.
func rewriteSlotLinks(clean string, s placedSlot, companyID string) string {
	board := "/c/" + url.PathEscape(companyID) + "/x/" + url.PathEscape(s.Plugin.PluginKey) + "/" + url.PathEscape(s.ID)
	return slotURLAttr.ReplaceAllStringFunc(clean, func(m string) string {
		sub := slotURLAttr.FindStringSubmatch(m)
		attr, target := sub[1], html.UnescapeString(sub[2])
		own := ownSlotPath(target, s.Plugin)
		switch {
		case own && companyID != "":
			return " " + attr + `="` + html.EscapeString(board+"?at="+url.QueryEscape(target)) + `"`
		case attr == "hx-get" || attr == "hx-post" || attr == "action":
			return ""
		}
		return m
	})
}

// ownSlotPath says whether target is a path under the plugin's own /api/plugins/{key or id}/
// prefix, with no dot segments.
func ownSlotPath(target string, p *uiContribution) bool {
	path, _, _ := strings.Cut(target, "?")
	if strings.Contains(path, "..") || strings.Contains(path, "//") || strings.ContainsAny(path, "\\%#") {
		return false
	}
	return strings.HasPrefix(path, "/api/plugins/"+p.PluginKey+"/") || (p.PluginID != "" && strings.HasPrefix(path, "/api/plugins/"+p.PluginID+"/"))
}

// slotByID finds a plugin's slot by its id.
func slotByID(contribs []uiContribution, pluginKey, id string) (placedSlot, bool) {
	for i := range contribs {
		if contribs[i].PluginKey != pluginKey {
			continue
		}
		for j, s := range contribs[i].Slots {
			if slotID(s, j) == id {
				return placedSlot{Plugin: &contribs[i], Slot: s, ID: id}, true
			}
		}
	}
	return placedSlot{}, false
}

// slotTarget is the route a slot request fetches: the slot's own route filled in, or the
// ?at= path (one of the plugin's own) with the request's other query parameters merged in.
func slotTarget(c *fiber.Ctx, s placedSlot, vars slotVars) (string, error) {
	at := c.Query("at")
	if at == "" {
		route, ok := vars.fill(s.Slot.Route)
		if !ok {
			return "", &apiError{Status: http.StatusBadRequest, Message: "This contribution cannot be shown on this page"}
		}
		return route, nil
	}
	if !ownSlotPath(at, s.Plugin) {
		return "", &apiError{Status: http.StatusBadRequest, Message: "at must be a path of the plugin's own routes"}
	}
	path, rawQuery, _ := strings.Cut(at, "?")
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return "", &apiError{Status: http.StatusBadRequest, Message: "at has a malformed query"}
	}
	if c.Method() == fiber.MethodGet {
		for k, vs := range c.Queries() {
			if k != "at" {
				q.Set(k, vs)
			}
		}
	}
	if len(q) > 0 {
		return path + "?" + q.Encode(), nil
	}
	return path, nil
}

// mountExtensionUI adds the pages and fragments of extension UI slots.
func (b *Board) mountExtensionUI(g fiber.Router) {
	g.Get("/c/:companyId/x/:pluginKey/:slotId", b.extensionPage)
	g.Post("/c/:companyId/x/:pluginKey/:slotId", b.extensionPost)
	g.Get("/c/:companyId/x-slots/:place", b.extensionSlotsFragment)
}

// extensionPage shows a plugin's page slot (or a sidebar or settings slot's route as a
// page); an htmx request gets the sanitised fragment alone.
func (b *Board) extensionPage(c *fiber.Ctx) error {
	companyID, key, id := c.Params("companyId"), c.Params("pluginKey"), c.Params("slotId")
	v := visitorOf(c)
	var l *layoutData
	if !isFragment(c) {
		var done bool
		var err error
		l, done, err = b.page(c, "Extension", "x/"+key+"/"+id, companyID)
		if done {
			return err
		}
	}
	s, ok := slotByID(b.contributions(v), key, id)
	if !ok {
		return b.fail(c, l, &apiError{Status: http.StatusNotFound, Message: "This plugin page does not exist, or its plugin is disabled"})
	}
	route, err := slotTarget(c, s, slotVars{"companyId": companyID, "userId": b.userID(c, l)})
	if err != nil {
		return b.fail(c, l, err)
	}
	r := b.renderSlot(v, s, companyID, http.MethodGet, route, nil)
	if isFragment(c) {
		return render(c, http.StatusOK, slotFragment(r))
	}
	l.Title = s.Title()
	return render(c, http.StatusOK, extensionPage(l, r))
}

// extensionPost forwards a fragment's hx-post to the plugin's route (the form's fields as
// a JSON object of strings) and answers its sanitised HTML.
func (b *Board) extensionPost(c *fiber.Ctx) error {
	companyID, key, id := c.Params("companyId"), c.Params("pluginKey"), c.Params("slotId")
	v := visitorOf(c)
	s, ok := slotByID(b.contributions(v), key, id)
	if !ok || c.Query("at") == "" {
		return b.fail(c, nil, &apiError{Status: http.StatusNotFound, Message: "This plugin page does not exist, or its plugin is disabled"})
	}
	route, err := slotTarget(c, s, nil)
	if err != nil {
		return b.fail(c, nil, err)
	}
	body := map[string]any{}
	form, _ := url.ParseQuery(string(c.Body()))
	for k, vs := range form {
		if k == csrfField {
			continue
		}
		if len(vs) == 1 {
			body[k] = vs[0]
		} else {
			body[k] = vs
		}
	}
	if _, set := body["companyId"]; !set {
		body["companyId"] = companyID
	}
	return render(c, http.StatusOK, slotFragment(b.renderSlot(v, s, companyID, http.MethodPost, route, body)))
}

// userID is the signed-in user's id (from the frame when there is one).
func (b *Board) userID(c *fiber.Ctx, l *layoutData) string {
	if l != nil && l.Actor != nil {
		return l.Actor.ID
	}
	var s session
	if b.api.call(c, "GET", "/api/auth/get-session", nil, nil, &s) == nil && s.User != nil {
		return s.User.ID
	}
	return ""
}

// extensionSlotsFragment answers every slot of a place (issue.detailTab,
// agent.detailTab, company.dashboardWidget) for one page, fetched in parallel; the page
// loads it after itself (extensionSlots), so a slow slot never holds the page.
func (b *Board) extensionSlotsFragment(c *fiber.Ctx) error {
	place := slotPlace(c.Params("place"))
	companyID := c.Params("companyId")
	vars := slotVars{"companyId": companyID}
	switch place {
	case slotIssueTab:
		vars["issueId"] = c.Query("issueId")
	case slotAgentTab:
		vars["agentId"] = c.Query("agentId")
	case slotDashboardWidget:
	default:
		return b.fail(c, nil, &apiError{Status: http.StatusNotFound, Message: "No such extension slot place"})
	}
	v := visitorOf(c)
	vars["userId"] = b.userID(c, nil)
	slots := slotsAt(b.contributions(v), place)
	out := make([]renderedSlot, len(slots))
	var g errgroup.Group
	for i, s := range slots {
		g.Go(func() error {
			route, ok := vars.fill(s.Slot.Route)
			if s.Slot.Route != "" && !ok {
				out[i] = renderedSlot{PluginKey: s.Plugin.PluginKey, Title: s.Title(), Error: s.Title() + " cannot be shown on this page."}
				return nil
			}
			if s.Slot.Route == "" {
				route = ""
			}
			out[i] = b.renderSlot(v, s, companyID, http.MethodGet, route, nil)
			return nil
		})
	}
	_ = g.Wait()
	return render(c, http.StatusOK, slotSections(out, place))
}

// instanceSettingsSlots renders a plugin's instance.settingsPage slots for its admin page.
func (b *Board) instanceSettingsSlots(c *fiber.Ctx, p *plugin) []renderedSlot {
	v := visitorOf(c)
	var out []renderedSlot
	for _, s := range slotsAt(b.contributions(v), slotInstanceSetting) {
		if s.Plugin.PluginID != p.ID {
			continue
		}
		route, ok := slotVars{}.fill(s.Slot.Route)
		if !ok {
			continue
		}
		out = append(out, b.renderSlot(v, s, "", http.MethodGet, route, nil))
	}
	return out
}

// slotsURL is the board path of a place's slots on one page (key=id names its entity).
func slotsURL(place, companyID, key, id string) string {
	u := "/c/" + url.PathEscape(companyID) + "/x-slots/" + place
	if key != "" {
		u += "?" + url.Values{key: {id}}.Encode()
	}
	return u
}
