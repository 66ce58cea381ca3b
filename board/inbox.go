package board

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"golang.org/x/sync/errgroup"
)

// The inbox: pending approvals, open decisions and pending join requests of a company in
// one list, each decided in place (a decision's inputs and options, an approval's note),
// dismissed or snoozed for the visitor (inbox-dismissals), and the detail pages of a
// decision and an approval with their history.

// mountInbox adds the inbox, decision and approval pages.
func (b *Board) mountInbox(g fiber.Router) {
	g.Get("/c/:companyId/inbox", b.inbox)
	g.Get("/c/:companyId/inbox/badge", b.inboxBadge)
	g.Post("/c/:companyId/inbox/dismiss", b.inboxDismiss)
	g.Post("/c/:companyId/inbox/restore", b.inboxRestore)
	g.Post("/c/:companyId/inbox/joins/:requestId", b.decideJoin)
	g.Get("/c/:companyId/decisions/:decisionId", b.decisionDetail)
	g.Post("/c/:companyId/decisions/:decisionId/decide", b.decideDecision)
	g.Post("/c/:companyId/decisions/:decisionId/dismiss", b.dismissDecision)
	g.Get("/c/:companyId/approvals/:approvalId", b.approvalDetail)
	g.Post("/c/:companyId/approvals/:approvalId/decide", b.decideApproval)
	g.Post("/c/:companyId/approvals/:approvalId/comments", b.commentApproval)
}

// inboxItem is one entry of the inbox: exactly one of Approval, Decision and Join is set.
type inboxItem struct {
	Kind      string
	Key       string
	CreatedAt time.Time
	Approval  *approval
	Decision  *decision
	Join      *joinRequest
	// Hidden is the visitor's dismissal or snooze of the item (shown with ?hidden=1).
	Hidden *inboxDismissal
}

// inboxData is the inbox list.
type inboxData struct {
	CompanyID  string
	CSRF       string
	Items      []inboxItem
	HiddenN    int
	ShowHidden bool
	AgentName  map[string]string
	// Unavailable names parts the API refused to the visitor.
	Unavailable []string
	// DecisionsCapped is true when the open decisions filled the API's page (100).
	DecisionsCapped bool
	Notice          string
	Error           string
}

// inboxDecisionLimit is the API's largest page of decisions.
const inboxDecisionLimit = 100

// Inbox item keys (the inbox-dismissals API's prefixes; a decision is an attention item).
func approvalKey(id string) string { return "approval:" + id }
func decisionKey(id string) string { return "attention:decision:" + id }
func joinKey(id string) string     { return "join:" + id }

// loadInbox reads the inbox's parts in parallel. A part the API refuses (403) is named in
// Unavailable; any other failure is returned.
func (b *Board) loadInbox(c *fiber.Ctx, showHidden bool) (*inboxData, error) {
	id := c.Params("companyId")
	d := &inboxData{CompanyID: id, CSRF: csrfOf(c), ShowHidden: showHidden}
	v := visitorOf(c)
	co := "/api/companies/" + url.PathEscape(id)
	var approvals []approval
	var decisions []decision
	var joins []joinRequest
	var dismissals []inboxDismissal
	var agents []agent
	errs := map[string]error{}
	var mu sync.Mutex
	var g errgroup.Group
	part := func(name, path string, q url.Values, out any) {
		g.Go(func() error {
			if err := b.api.callAs(v, "GET", path, q, nil, out); err != nil {
				mu.Lock()
				errs[name] = err
				mu.Unlock()
			}
			return nil
		})
	}
	part("approvals", co+"/approvals", url.Values{"status": {"pending,revision_requested"}, "limit": {"500"}}, &approvals)
	part("decisions", co+"/decisions", url.Values{"status": {"open"}, "limit": {fmt.Sprint(inboxDecisionLimit)}}, &decisions)
	part("join requests", co+"/join-requests", url.Values{"status": {"pending_approval"}}, &joins)
	part("dismissals", co+"/inbox-dismissals", nil, &dismissals)
	part("agents", co+"/agents", nil, &agents)
	_ = g.Wait()
	for name, err := range errs {
		var ae *apiError
		if !errors.As(err, &ae) || ae.Status >= 500 || ae.Status == http.StatusUnauthorized {
			return nil, err
		}
		// Join requests are for those who may approve them; the others do not miss them. A
		// part whose owner is not loaded (404) is left out the same way.
		if name == "approvals" || name == "decisions" {
			d.Unavailable = append(d.Unavailable, fmt.Sprintf("The %s of this company are not available to you: %s.", name, ae.Message))
		}
	}
	sort.Strings(d.Unavailable)
	d.AgentName = agentNames(agents)
	hidden := make(map[string]*inboxDismissal, len(dismissals))
	for i := range dismissals {
		hidden[dismissals[i].ItemKey] = &dismissals[i]
	}
	add := func(it inboxItem) {
		it.Hidden = hidden[it.Key]
		if it.Hidden != nil {
			d.HiddenN++
			if !showHidden {
				return
			}
		}
		d.Items = append(d.Items, it)
	}
	for i := range approvals {
		a := &approvals[i]
		add(inboxItem{Kind: "approval", Key: approvalKey(a.ID), CreatedAt: a.CreatedAt, Approval: a})
	}
	for i := range decisions {
		x := &decisions[i]
		add(inboxItem{Kind: "decision", Key: decisionKey(x.ID), CreatedAt: x.CreatedAt, Decision: x})
	}
	for i := range joins {
		j := &joins[i]
		add(inboxItem{Kind: "join", Key: joinKey(j.ID), CreatedAt: j.CreatedAt, Join: j})
	}
	d.DecisionsCapped = len(decisions) >= inboxDecisionLimit
	sort.SliceStable(d.Items, func(i, j int) bool { return d.Items[i].CreatedAt.After(d.Items[j].CreatedAt) })
	return d, nil
}

// inbox is the inbox page, or its list fragment for htmx (live refresh).
func (b *Board) inbox(c *fiber.Ctx) error {
	showHidden := c.Query("hidden") == "1"
	if isFragment(c) {
		d, err := b.loadInbox(c, showHidden)
		if err != nil {
			return b.fail(c, nil, err)
		}
		return render(c, http.StatusOK, inboxList(d))
	}
	l, done, err := b.page(c, "Inbox", "inbox", c.Params("companyId"))
	if done {
		return err
	}
	d, err := b.loadInbox(c, showHidden)
	if err != nil {
		return b.fail(c, l, err)
	}
	return render(c, http.StatusOK, inboxPage(l, d))
}

// inboxBadge answers the sidebar's inbox count (GET …/sidebar-badges), loaded lazily so no
// page waits for it; an answer the API refuses is an empty badge.
func (b *Board) inboxBadge(c *fiber.Ctx) error {
	var s sidebarBadges
	if err := b.api.call(c, "GET", "/api/companies/"+url.PathEscape(c.Params("companyId"))+"/sidebar-badges", nil, nil, &s); err != nil || s.Inbox == 0 {
		return render(c, http.StatusOK, inboxBadgeCount(""))
	}
	return render(c, http.StatusOK, inboxBadgeCount(fmt.Sprint(s.Inbox)))
}

// snoozeDurations are the snooze choices of the inbox.
var snoozeDurations = []struct{ Value, Label string }{
	{"1h", "1 hour"}, {"4h", "4 hours"}, {"24h", "1 day"}, {"168h", "1 week"},
}

// validItemKey accepts the keys the inbox shows.
func validItemKey(k string) bool {
	for _, p := range []string{"approval:", "attention:decision:", "join:"} {
		if rest, ok := strings.CutPrefix(k, p); ok && rest != "" && len(k) <= 500 {
			return true
		}
	}
	return false
}

// inboxDismiss dismisses or snoozes an item for the visitor.
func (b *Board) inboxDismiss(c *fiber.Ctx) error {
	key := c.FormValue("itemKey")
	if !validItemKey(key) {
		return b.inboxAfterWrite(c, &apiError{Status: http.StatusBadRequest, Message: "Unsupported inbox item key"}, "")
	}
	body := map[string]any{"itemKey": key}
	notice := "Dismissed."
	if c.FormValue("kind") == "snooze" {
		dur, err := time.ParseDuration(c.FormValue("snooze"))
		if err != nil || dur <= 0 || dur > 31*24*time.Hour {
			return b.inboxAfterWrite(c, &apiError{Status: http.StatusBadRequest, Message: "Choose how long to snooze"}, "")
		}
		until := time.Now().Add(dur).UTC()
		body["kind"], body["snoozedUntil"] = "snooze", until.Format(time.RFC3339)
		notice = "Snoozed until " + until.Format("Jan 2 15:04") + " UTC."
	}
	err := b.api.call(c, "POST", "/api/companies/"+url.PathEscape(c.Params("companyId"))+"/inbox-dismissals", nil, body, nil)
	return b.inboxAfterWrite(c, err, notice)
}

// inboxRestore restores an item the visitor dismissed or snoozed.
func (b *Board) inboxRestore(c *fiber.Ctx) error {
	key := c.FormValue("itemKey")
	if !validItemKey(key) {
		return b.inboxAfterWrite(c, &apiError{Status: http.StatusBadRequest, Message: "Unsupported inbox item key"}, "")
	}
	err := b.api.call(c, "DELETE", "/api/companies/"+url.PathEscape(c.Params("companyId"))+"/inbox-dismissals/"+url.PathEscape(key), nil, nil, nil)
	return b.inboxAfterWrite(c, err, "Restored.")
}

// decideJoin approves or rejects a join request.
func (b *Board) decideJoin(c *fiber.Ctx) error {
	action := c.FormValue("action")
	if action != "approve" && action != "reject" {
		return b.inboxAfterWrite(c, &apiError{Status: http.StatusBadRequest, Message: "Choose approve or reject"}, "")
	}
	body := map[string]any{}
	if n := strings.TrimSpace(c.FormValue("note")); n != "" {
		body["note"] = n
	}
	path := "/api/companies/" + url.PathEscape(c.Params("companyId")) + "/join-requests/" + url.PathEscape(c.Params("requestId")) + "/" + action
	err := b.api.call(c, "POST", path, nil, body, nil)
	return b.inboxAfterWrite(c, err, "Join request "+pastTense(action)+".")
}

// decideDecision chooses an option of a decision with the values of its inputs
// (form fields input.<id>).
func (b *Board) decideDecision(c *fiber.Ctx) error {
	values := map[string]string{}
	c.Request().PostArgs().VisitAll(func(k, v []byte) {
		if id, ok := strings.CutPrefix(string(k), "input."); ok {
			values[id] = string(v)
		}
	})
	body := map[string]any{"optionId": c.FormValue("optionId"), "inputValues": values}
	err := b.api.call(c, "POST", "/api/decisions/"+url.PathEscape(c.Params("decisionId"))+"/decide", nil, body, nil)
	return b.decisionAfterWrite(c, err, "Decision recorded.")
}

// dismissDecision dismisses an open decision (recorded as rejected).
func (b *Board) dismissDecision(c *fiber.Ctx) error {
	body := map[string]any{}
	if r := strings.TrimSpace(c.FormValue("reason")); r != "" {
		body["reason"] = r
	}
	err := b.api.call(c, "POST", "/api/decisions/"+url.PathEscape(c.Params("decisionId"))+"/dismiss", nil, body, nil)
	return b.decisionAfterWrite(c, err, "Decision dismissed.")
}

// approvalActions are the board's decisions on an approval (the API's routes).
var approvalActions = map[string]string{"approve": "approved", "reject": "rejected", "request-revision": "sent back for revision"}

// decideApproval approves, rejects or sends back an approval with an optional note.
func (b *Board) decideApproval(c *fiber.Ctx) error {
	action := c.FormValue("action")
	done, ok := approvalActions[action]
	if !ok {
		return b.approvalAfterWrite(c, &apiError{Status: http.StatusBadRequest, Message: "Choose approve, reject or request revision"}, "")
	}
	body := map[string]any{}
	if n := strings.TrimSpace(c.FormValue("decisionNote")); n != "" {
		body["decisionNote"] = n
	}
	err := b.api.call(c, "POST", "/api/approvals/"+url.PathEscape(c.Params("approvalId"))+"/"+action, nil, body, nil)
	return b.approvalAfterWrite(c, err, "Approval "+done+".")
}

// commentApproval comments on an approval (from its detail page).
func (b *Board) commentApproval(c *fiber.Ctx) error {
	err := b.api.call(c, "POST", "/api/approvals/"+url.PathEscape(c.Params("approvalId"))+"/comments", nil,
		map[string]any{"body": c.FormValue("body")}, nil)
	return b.detailAfterWrite(c, err, "/c/"+c.Params("companyId")+"/approvals/"+c.Params("approvalId"), b.renderApproval)
}

func pastTense(action string) string {
	if action == "approve" {
		return "approved"
	}
	return "rejected"
}

// fromDetail says whether a form was posted from a detail page (which it then returns to).
func fromDetail(c *fiber.Ctx) bool { return c.FormValue("from") == "detail" }

func (b *Board) decisionAfterWrite(c *fiber.Ctx, err error, notice string) error {
	if !fromDetail(c) {
		return b.inboxAfterWrite(c, err, notice)
	}
	return b.detailAfterWrite(c, err, "/c/"+c.Params("companyId")+"/decisions/"+c.Params("decisionId"), b.renderDecision)
}

func (b *Board) approvalAfterWrite(c *fiber.Ctx, err error, notice string) error {
	if !fromDetail(c) {
		return b.inboxAfterWrite(c, err, notice)
	}
	return b.detailAfterWrite(c, err, "/c/"+c.Params("companyId")+"/approvals/"+c.Params("approvalId"), b.renderApproval)
}

// inboxAfterWrite answers a write posted from the inbox: htmx gets the fresh list with the
// outcome (a refusal with 200, which htmx swaps), a plain form a redirect back to the
// inbox, or the inbox with the refusal and the API's status.
func (b *Board) inboxAfterWrite(c *fiber.Ctx, writeErr error, notice string) error {
	var ae *apiError
	if writeErr != nil && !errors.As(writeErr, &ae) {
		return b.fail(c, nil, writeErr)
	}
	if ae != nil && ae.Status == http.StatusUnauthorized {
		return b.toSignIn(c)
	}
	showHidden := c.FormValue("hidden") == "1"
	if writeErr == nil && !isFragment(c) {
		back := "/c/" + c.Params("companyId") + "/inbox"
		if showHidden {
			back += "?hidden=1"
		}
		return c.Redirect(back, http.StatusSeeOther)
	}
	var l *layoutData
	if !isFragment(c) {
		var done bool
		var err error
		if l, done, err = b.page(c, "Inbox", "inbox", c.Params("companyId")); done {
			return err
		}
	}
	d, err := b.loadInbox(c, showHidden)
	if err != nil {
		return b.fail(c, l, err)
	}
	d.Notice = notice
	if ae != nil {
		d.Notice, d.Error = "", refusalText(ae)
	}
	if isFragment(c) {
		return render(c, http.StatusOK, inboxList(d))
	}
	return render(c, ae.Status, inboxPage(l, d))
}

// detailAfterWrite answers a plain form posted from a detail page: back to the page, or
// the page with the refusal and the API's status.
func (b *Board) detailAfterWrite(c *fiber.Ctx, writeErr error, back string, page func(c *fiber.Ctx, refusal *apiError) error) error {
	var ae *apiError
	if writeErr != nil && !errors.As(writeErr, &ae) {
		return b.fail(c, nil, writeErr)
	}
	if writeErr == nil {
		return c.Redirect(back, http.StatusSeeOther)
	}
	if ae.Status == http.StatusUnauthorized {
		return b.toSignIn(c)
	}
	return page(c, ae)
}

// decisionData is a decision's detail page.
type decisionData struct {
	CompanyID string
	CSRF      string
	Decision  *decision
	History   []historyEntry
	AgentName map[string]string
	Error     string
}

// approvalData is an approval's detail page.
type approvalData struct {
	CompanyID string
	CSRF      string
	Approval  *approval
	Comments  []approvalComment
	History   []historyEntry
	AgentName map[string]string
	Error     string
}

func (b *Board) decisionDetail(c *fiber.Ctx) error { return b.renderDecision(c, nil) }

// renderDecision shows a decision with its options, inputs, outcome and history; refusal,
// when set, is a write the API refused (shown above, with its status).
func (b *Board) renderDecision(c *fiber.Ctx, refusal *apiError) error {
	companyID := c.Params("companyId")
	l, done, err := b.page(c, "Decision", "inbox", companyID)
	if done {
		return err
	}
	d := &decisionData{CompanyID: companyID, CSRF: csrfOf(c), Decision: &decision{}}
	id := c.Params("decisionId")
	var agents []agent
	var getErr error
	v := visitorOf(c)
	var g errgroup.Group
	g.Go(func() error {
		getErr = b.api.callAs(v, "GET", "/api/decisions/"+url.PathEscape(id), nil, nil, d.Decision)
		return nil
	})
	b.loadHistory(&g, v, companyID, "decision", id, &d.History, &agents)
	_ = g.Wait()
	if getErr == nil && d.Decision.CompanyID != companyID {
		getErr = &apiError{Status: http.StatusNotFound, Message: "Decision not found"}
	}
	if getErr != nil {
		return b.fail(c, l, getErr)
	}
	d.AgentName = agentNames(agents)
	l.Title = d.Decision.Title
	status := http.StatusOK
	if refusal != nil {
		status, d.Error = refusal.Status, refusalText(refusal)
	}
	return render(c, status, decisionPage(l, d))
}

func (b *Board) approvalDetail(c *fiber.Ctx) error { return b.renderApproval(c, nil) }

// renderApproval shows an approval with its payload, linked issues, comments and history.
func (b *Board) renderApproval(c *fiber.Ctx, refusal *apiError) error {
	companyID := c.Params("companyId")
	l, done, err := b.page(c, "Approval", "inbox", companyID)
	if done {
		return err
	}
	d := &approvalData{CompanyID: companyID, CSRF: csrfOf(c), Approval: &approval{}}
	id := c.Params("approvalId")
	var agents []agent
	var getErr error
	v := visitorOf(c)
	var g errgroup.Group
	g.Go(func() error {
		getErr = b.api.callAs(v, "GET", "/api/approvals/"+url.PathEscape(id), nil, nil, d.Approval)
		return nil
	})
	g.Go(func() error {
		_ = b.api.callAs(v, "GET", "/api/approvals/"+url.PathEscape(id)+"/comments", nil, nil, &d.Comments)
		return nil
	})
	b.loadHistory(&g, v, companyID, "approval", id, &d.History, &agents)
	_ = g.Wait()
	if getErr == nil && d.Approval.CompanyID != companyID {
		getErr = &apiError{Status: http.StatusNotFound, Message: "Approval not found"}
	}
	if getErr != nil {
		return b.fail(c, l, getErr)
	}
	d.AgentName = agentNames(agents)
	l.Title = "Approval " + approvalTypeLabel(d.Approval.Type)
	status := http.StatusOK
	if refusal != nil {
		status, d.Error = refusal.Status, refusalText(refusal)
	}
	return render(c, status, approvalPage(l, d))
}

// loadHistory reads an entity's activity (its history, newest first) and the company's
// agents (their names) into the group; what the API refuses is left empty.
func (b *Board) loadHistory(g *errgroup.Group, v *visitor, companyID, entityType, entityID string, history *[]historyEntry, agents *[]agent) {
	co := "/api/companies/" + url.PathEscape(companyID)
	g.Go(func() error {
		_ = b.api.callAs(v, "GET", co+"/activity", url.Values{"entityType": {entityType}, "entityId": {entityID}, "limit": {"200"}}, nil, history)
		return nil
	})
	g.Go(func() error {
		_ = b.api.callAs(v, "GET", co+"/agents", nil, nil, agents)
		return nil
	})
}

// approvalTypeLabel is an approval type in words.
func approvalTypeLabel(t string) string {
	switch t {
	case "hire_agent":
		return "to hire an agent"
	case "approve_ceo_strategy":
		return "of the CEO's strategy"
	case "budget_override_required":
		return "of a budget override"
	case "request_board_approval":
		return "requested of the board"
	}
	return t
}

// approvalActionable says whether the board may still decide the approval.
func approvalActionable(a *approval) bool {
	return a.Status == "pending" || a.Status == "revision_requested"
}

// requesterName names who asked for an approval.
func requesterName(a *approval, names map[string]string) string {
	switch {
	case a.RequestedByAgentID != nil:
		if n := names[*a.RequestedByAgentID]; n != "" {
			return n
		}
		return "agent " + shortID(*a.RequestedByAgentID)
	case a.RequestedByUserID != nil:
		return "user " + *a.RequestedByUserID
	}
	return "the board"
}

// agentLabel names an agent by id.
func agentLabel(id string, names map[string]string) string {
	if n := names[id]; n != "" {
		return n
	}
	return "agent " + shortID(id)
}

// historyActor names who wrote a history entry.
func historyActor(e historyEntry, names map[string]string) string {
	switch {
	case e.AgentID != nil:
		return agentLabel(*e.AgentID, names)
	case e.ActorType == "agent":
		return agentLabel(e.ActorID, names)
	case e.ActorType == "user":
		return "user " + e.ActorID
	}
	return e.ActorType
}

// formatUTC is a timestamp as the board shows it.
func formatUTC(t time.Time) string { return t.UTC().Format("Jan 2 15:04") }

// isoUTC is a timestamp for a <time datetime>.
func isoUTC(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }

// optionLabel is the label of a decision's option id.
func optionLabel(d *decision, id string) string {
	if id == "dismissed" {
		return "Dismissed"
	}
	for _, o := range d.Options {
		if o.ID == id {
			return o.Label
		}
	}
	return id
}

// optionClass is the button class of an option's style.
func optionClass(style string) string {
	switch style {
	case "primary":
		return ""
	case "destructive":
		return "danger"
	}
	return "secondary"
}

// prettyJSON indents a JSON value for a <pre>.
func prettyJSON(raw []byte) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return string(raw)
	}
	return buf.String()
}

// itemID is the id of an inbox item's record.
func itemID(it inboxItem) string {
	switch {
	case it.Approval != nil:
		return it.Approval.ID
	case it.Decision != nil:
		return it.Decision.ID
	case it.Join != nil:
		return it.Join.ID
	}
	return ""
}

// joinTitle names who asks to join.
func joinTitle(j *joinRequest) string {
	switch {
	case j.AgentName != nil && *j.AgentName != "":
		return "Agent " + *j.AgentName + " asks to join"
	case j.RequestingUser != nil:
		return j.RequestingUser.Name + " (" + j.RequestingUser.Email + ") asks to join"
	}
	return "A " + j.RequestType + " asks to join"
}

// approvalCommentAuthor names who wrote an approval comment.
func approvalCommentAuthor(c approvalComment, names map[string]string) string {
	switch {
	case c.AuthorAgentID != nil:
		return agentLabel(*c.AuthorAgentID, names)
	case c.AuthorUserID != nil:
		return "user " + *c.AuthorUserID
	}
	return "the board"
}
