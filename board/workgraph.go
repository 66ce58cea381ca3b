package board

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"
	"golang.org/x/sync/errgroup"

	"github.com/keelhq/keel/kernel"
)

// mountWorkGraph adds the work graph's pages beyond the issue list and detail: the new-issue
// form, the board by status, the issue detail's writes (details, blockers, checkout release,
// documents and attachments) and the company activity feed. It is mounted before the issue
// detail route, whose :issueId would otherwise match "board".
func (b *Board) mountWorkGraph(g fiber.Router) {
	g.Post("/c/:companyId/issues", b.createIssue)
	g.Get("/c/:companyId/issues/board", b.issueBoard)
	g.Post("/c/:companyId/issues/:issueId/move", b.moveIssue)
	g.Post("/c/:companyId/issues/:issueId/details", b.editIssue)
	g.Post("/c/:companyId/issues/:issueId/blockers", b.editBlockers)
	g.Post("/c/:companyId/issues/:issueId/release", b.releaseIssue)
	g.Post("/c/:companyId/issues/:issueId/attachments", b.uploadAttachment)
	g.Post("/c/:companyId/issues/:issueId/attachments/:attachmentId/delete", b.deleteAttachment)
	g.Post("/c/:companyId/issues/:issueId/documents", b.createDocument)
	g.Get("/c/:companyId/issues/:issueId/documents/:key", b.documentPage)
	g.Post("/c/:companyId/issues/:issueId/documents/:key", b.saveDocument)
	g.Get("/c/:companyId/activity", b.activity)
}

// formList is every value of a repeated form field (a multi-select), blanks dropped.
func formList(c *fiber.Ctx, name string) []string {
	var out []string
	add := func(v []byte) {
		if s := strings.TrimSpace(string(v)); s != "" {
			out = append(out, s)
		}
	}
	for _, v := range c.Request().PostArgs().PeekMulti(name) {
		add(v)
	}
	if mf, err := c.MultipartForm(); err == nil {
		for _, v := range mf.Value[name] {
			add([]byte(v))
		}
	}
	return out
}

// issuePath is the board path of an issue of the request's company.
func issuePath(c *fiber.Ctx) string {
	return "/c/" + c.Params("companyId") + "/issues/" + c.Params("issueId")
}

// apiIssuePath is the API path of the request's issue.
func apiIssuePath(c *fiber.Ctx) string {
	return "/api/issues/" + url.PathEscape(c.Params("issueId"))
}

// newIssueFields are the new-issue form's fields, kept when the API refuses the issue.
var newIssueFields = []string{"title", "description", "status", "priority", "assigneeAgentId", "assigneeUserId", "projectId", "goalId", "parentId"}

// createIssue creates an issue through POST /api/companies/{id}/issues from the issue list's
// new-issue form and goes to it; a refusal re-shows the list with the form as it was sent.
func (b *Board) createIssue(c *fiber.Ctx) error {
	id := c.Params("companyId")
	body := map[string]any{}
	form := url.Values{}
	for _, k := range newIssueFields {
		v := strings.TrimSpace(c.FormValue(k))
		if k == "description" {
			v = c.FormValue(k)
		}
		form.Set(k, v)
		if strings.TrimSpace(v) != "" {
			body[k] = v
		}
	}
	body["title"] = strings.TrimSpace(c.FormValue("title"))
	if labels := formList(c, "labelIds"); len(labels) > 0 {
		body["labelIds"] = labels
		form["labelIds"] = labels
	}
	var created issue
	err := b.api.call(c, "POST", "/api/companies/"+url.PathEscape(id)+"/issues", nil, body, &created)
	if err == nil {
		return c.Redirect("/c/"+id+"/issues/"+created.ID, http.StatusSeeOther)
	}
	var ae *apiError
	if !errors.As(err, &ae) {
		return b.fail(c, nil, err)
	}
	return b.issuesWith(c, &newIssueForm{Values: form, Error: "The issue was not created: " + refusalMessage(ae), Status: ae.Status})
}

// newIssueForm is the new-issue form as sent, with the API's refusal.
type newIssueForm struct {
	Values url.Values
	Error  string
	Status int
}

// refusalMessage is the API's message, with a word on a 403.
func refusalMessage(ae *apiError) string {
	if ae.Status == http.StatusForbidden {
		return "you may not do this (" + ae.Message + ")"
	}
	return ae.Message
}

// boardColumnCap is how many cards a column of the board shows; the rest are a "more" link
// to the list filtered by the column's status.
const boardColumnCap = 25

// boardColumn is one status of the board by status.
type boardColumn struct {
	Status  string
	Issues  []issue
	Total   int
	MoreURL string
}

// issueBoardData is the board by status with the filters of the list.
type issueBoardData struct {
	issueListData
	Columns []boardColumn
	CSRF    string
	// Back is the board's URL with its filters, where the no-JS move form returns.
	Back string
}

// issueBoard is the board by status (a column per status, at most boardColumnCap cards in
// each), or its columns fragment for htmx: the filter form and the event stream refresh it.
func (b *Board) issueBoard(c *fiber.Ctx) error {
	id := c.Params("companyId")
	return b.issueBoardWith(c, id, "", http.StatusOK)
}

func (b *Board) issueBoardWith(c *fiber.Ctx, id, refusal string, status int) error {
	f := issueFiltersFrom(c)
	f.Status, f.Offset, f.Limit = "", 0, boardColumnCap
	base := "/c/" + id + "/issues/board"
	q := f.values(0)
	q.Del("limit")
	d := &issueBoardData{issueListData: issueListData{CompanyID: id, Filters: f}, CSRF: csrfOf(c)}
	d.SelfURL = base
	if enc := q.Encode(); enc != "" {
		d.SelfURL += "?" + enc
	}
	d.Back = d.SelfURL
	v := visitorOf(c)
	companyPath := "/api/companies/" + url.PathEscape(id)
	fragment := isFragment(c)
	d.Columns = make([]boardColumn, len(issueStatuses))
	errs := make([]error, len(issueStatuses))
	var g errgroup.Group
	for i, s := range issueStatuses {
		col := &d.Columns[i]
		col.Status = s
		cf := f
		cf.Status = s
		aq := cf.apiQuery()
		g.Go(func() error {
			errs[i] = b.api.callAs(v, "GET", companyPath+"/issues", aq, nil, &col.Issues)
			return nil
		})
		g.Go(func() error {
			var n map[string]int
			if err := b.api.callAs(v, "GET", companyPath+"/issues/count", aq, nil, &n); err == nil {
				col.Total = n["count"]
			}
			return nil
		})
		lf := cf
		lf.Limit = 50
		col.MoreURL = "/c/" + id + "/issues?" + lf.values(0).Encode()
	}
	g.Go(func() error {
		_ = b.api.callAs(v, "GET", companyPath+"/agents", nil, nil, &d.Agents)
		return nil
	})
	if !fragment {
		b.loadIssueFilterOptions(&g, v, companyPath, &d.issueListData)
	}
	var l *layoutData
	var frameErr error
	var frameDone bool
	if !fragment {
		l, frameDone, frameErr = b.page(c, "Issue board", "issues", id)
	}
	_ = g.Wait()
	if frameDone {
		return frameErr
	}
	if err := errors.Join(errs...); err != nil {
		var ae *apiError
		if !errors.As(err, &ae) {
			return b.fail(c, l, err)
		}
		if ae.Status == http.StatusUnauthorized {
			return b.toSignIn(c)
		}
		status = ae.Status
		d.Error = "The issues could not be listed: " + ae.Message
		if ae.Status == http.StatusForbidden {
			d.Error = "You do not have access to this company's issues: " + ae.Message + "."
		}
	}
	d.AgentName = agentNames(d.Agents)
	if fragment {
		return render(c, status, issueBoardColumns(d))
	}
	l.Error = refusal
	return render(c, status, issueBoardPage(l, d))
}

// loadIssueFilterOptions reads the projects, goals and labels the filter and issue forms
// offer, in g.
func (b *Board) loadIssueFilterOptions(g *errgroup.Group, v *visitor, companyPath string, d *issueListData) {
	g.Go(func() error {
		_ = b.api.callAs(v, "GET", companyPath+"/projects", nil, nil, &d.Projects)
		return nil
	})
	g.Go(func() error {
		_ = b.api.callAs(v, "GET", companyPath+"/goals", nil, nil, &d.Goals)
		return nil
	})
	g.Go(func() error {
		_ = b.api.callAs(v, "GET", companyPath+"/labels", nil, nil, &d.Labels)
		return nil
	})
}

// moveIssue moves an issue to another status through PATCH /api/issues/{id}. The board's
// script (drag and drop) sends it as an htmx-style request and gets the card back, or the
// API's refusal with its status; the no-JS form is redirected back to the board, or shown
// the board with the refusal.
func (b *Board) moveIssue(c *fiber.Ctx) error {
	id := c.Params("companyId")
	var moved issue
	err := b.api.call(c, "PATCH", apiIssuePath(c), nil, map[string]any{"status": c.FormValue("status")}, &moved)
	var ae *apiError
	if err != nil && !errors.As(err, &ae) {
		return b.fail(c, nil, err)
	}
	if isFragment(c) {
		if err != nil {
			return render(c, ae.Status, templ.Raw(`<div class="notice error" role="alert">`+templ.EscapeString(refusalText(ae))+`</div>`))
		}
		var agents []agent
		_ = b.api.call(c, "GET", "/api/companies/"+url.PathEscape(id)+"/agents", nil, nil, &agents)
		return render(c, http.StatusOK, issueCard(id, csrfOf(c), "", moved, agentNames(agents)))
	}
	back := c.FormValue("back")
	if !strings.HasPrefix(back, "/c/"+id+"/issues/board") {
		back = "/c/" + id + "/issues/board"
	}
	if err != nil {
		return b.issueBoardWith(c, id, refusalText(ae), ae.Status)
	}
	return c.Redirect(back, http.StatusSeeOther)
}

// editIssue changes the title, description, priority, project, goal and labels through
// PATCH /api/issues/{id}.
func (b *Board) editIssue(c *fiber.Ctx) error {
	patch := map[string]any{"title": strings.TrimSpace(c.FormValue("title")), "priority": c.FormValue("priority")}
	nullable := func(k string) {
		if v := strings.TrimSpace(c.FormValue(k)); v != "" {
			patch[k] = v
		} else {
			patch[k] = nil
		}
	}
	patch["description"] = nil
	if desc := strings.ReplaceAll(c.FormValue("description"), "\r\n", "\n"); strings.TrimSpace(desc) != "" {
		patch["description"] = desc
	}
	nullable("projectId")
	nullable("goalId")
	labels := formList(c, "labelIds")
	if labels == nil {
		labels = []string{}
	}
	patch["labelIds"] = labels
	return b.afterWrite(c, b.api.call(c, "PATCH", apiIssuePath(c), nil, patch, nil), false)
}

// editBlockers adds a blocker (field add: an issue id or identifier) or removes one (field
// remove: the blocker's id) by sending the issue's new blocker list through PATCH
// /api/issues/{id}.
func (b *Board) editBlockers(c *fiber.Ctx) error {
	var cur issue
	if err := b.api.call(c, "GET", apiIssuePath(c), nil, nil, &cur); err != nil {
		return b.afterWrite(c, err, false)
	}
	ids := make([]string, 0, len(cur.BlockedBy)+1)
	remove := c.FormValue("remove")
	for _, bl := range cur.BlockedBy {
		if bl.ID != remove {
			ids = append(ids, bl.ID)
		}
	}
	if add := strings.TrimSpace(c.FormValue("add")); add != "" {
		ids = append(ids, add)
	} else if remove == "" {
		return b.afterWrite(c, &apiError{Status: http.StatusBadRequest, Message: "Name the issue that blocks this one (its identifier, like ABC-12)."}, false)
	}
	return b.afterWrite(c, b.api.call(c, "PATCH", apiIssuePath(c), nil, map[string]any{"blockedByIssueIds": ids}, nil), false)
}

// releaseIssue releases the issue's checkout through POST /api/issues/{id}/release.
func (b *Board) releaseIssue(c *fiber.Ctx) error {
	return b.afterWrite(c, b.api.call(c, "POST", apiIssuePath(c)+"/release", nil, map[string]any{}, nil), false)
}

// uploadAttachment sends the form's file to POST
// /api/companies/{id}/issues/{issueId}/attachments as multipart/form-data and goes back to
// the issue; the API's refusal (too large, no file) is shown on the issue.
func (b *Board) uploadAttachment(c *fiber.Ctx) error {
	fh, err := c.FormFile("file")
	if err != nil {
		return b.afterWrite(c, &apiError{Status: http.StatusBadRequest, Message: "Choose a file to upload."}, false)
	}
	f, err := fh.Open()
	if err != nil {
		return b.fail(c, nil, fmt.Errorf("error reading the uploaded file: %w", err))
	}
	defer f.Close()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	part, err := mw.CreatePart(fh.Header)
	if err != nil {
		return b.fail(c, nil, fmt.Errorf("error encoding the upload: %w", err))
	}
	if _, err := io.Copy(part, f); err != nil {
		return b.fail(c, nil, fmt.Errorf("error encoding the upload: %w", err))
	}
	if err := mw.Close(); err != nil {
		return b.fail(c, nil, fmt.Errorf("error encoding the upload: %w", err))
	}
	path := "/api/companies/" + url.PathEscape(c.Params("companyId")) + "/issues/" + url.PathEscape(c.Params("issueId")) + "/attachments"
	return b.afterWrite(c, b.api.sendRaw(visitorOf(c), "POST", path, mw.FormDataContentType(), buf.Bytes()), false)
}

// deleteAttachment deletes an attachment through DELETE /api/attachments/{id}.
func (b *Board) deleteAttachment(c *fiber.Ctx) error {
	return b.afterWrite(c, b.api.call(c, "DELETE", "/api/attachments/"+url.PathEscape(c.Params("attachmentId")), nil, nil, nil), false)
}

// sendRaw sends one request with a raw body (a multipart upload) as the visitor; a non-2xx
// answer is an *apiError. The JSON calls go through call; this is the one the upload needs.
func (a *apiClient) sendRaw(v *visitor, method, path, contentType string, body []byte) error {
	var fctx fasthttp.RequestCtx
	fctx.Init(&fasthttp.Request{}, apiLoopback, nil)
	req := &fctx.Request
	req.Header.SetMethod(method)
	req.SetRequestURI(path)
	req.Header.SetHost(v.host)
	if v.session != "" {
		req.Header.SetCookie(kernel.SessionCookie, v.session)
	}
	req.Header.SetContentType(contentType)
	req.SetBody(body)
	a.handler()(&fctx)
	if status := fctx.Response.StatusCode(); status < 200 || status > 299 {
		var e struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(fctx.Response.Body(), &e)
		if e.Error == "" {
			e.Error = fasthttp.StatusMessage(status)
		}
		return &apiError{Status: status, Message: e.Error}
	}
	return nil
}

// documentKeyOK says whether a document key is one the API may accept (it checks the rest).
func documentKeyOK(key string) bool {
	return key != "" && len(key) <= 64 && !strings.ContainsAny(key, "/?#")
}

// createDocument creates a document of the issue through PUT /api/issues/{id}/documents/{key}
// (no base revision) and goes to it.
func (b *Board) createDocument(c *fiber.Ctx) error {
	key := strings.TrimSpace(c.FormValue("key"))
	if !documentKeyOK(key) {
		return b.afterWrite(c, &apiError{Status: http.StatusBadRequest, Message: "A document needs a key: lowercase letters, digits, - or _ (like plan)."}, false)
	}
	body := map[string]any{"format": "markdown", "body": strings.ReplaceAll(c.FormValue("body"), "\r\n", "\n")}
	if t := strings.TrimSpace(c.FormValue("title")); t != "" {
		body["title"] = t
	}
	err := b.api.call(c, "PUT", apiIssuePath(c)+"/documents/"+url.PathEscape(key), nil, body, nil)
	if err != nil {
		return b.afterWrite(c, err, false)
	}
	return c.Redirect(issuePath(c)+"/documents/"+url.PathEscape(key), http.StatusSeeOther)
}

// documentData is a document's page: the document, its revisions and the one shown.
type documentData struct {
	CompanyID string
	Issue     *issue
	Doc       *issueDocument
	Revisions []documentRevision
	// Shown is the revision shown when it is not the latest (?revision=ID).
	Shown *documentRevision
	CSRF  string
	// Draft is the body of a refused save, kept in the editor.
	Draft *string
}

// documentPage shows a document: its latest body (or an older revision with ?revision=),
// its revisions and the form that writes a new revision.
func (b *Board) documentPage(c *fiber.Ctx) error {
	return b.documentPageWith(c, "", nil, http.StatusOK)
}

func (b *Board) documentPageWith(c *fiber.Ctx, refusal string, draft *string, status int) error {
	l, done, err := b.page(c, "Document", "issues", c.Params("companyId"))
	if done {
		return err
	}
	d := &documentData{CompanyID: c.Params("companyId"), Issue: &issue{}, Doc: &issueDocument{}, CSRF: csrfOf(c), Draft: draft}
	v := visitorOf(c)
	docPath := apiIssuePath(c) + "/documents/" + url.PathEscape(c.Params("key"))
	var revs documentRevisions
	errs := make([]error, 3)
	var g errgroup.Group
	g.Go(func() error { errs[0] = b.api.callAs(v, "GET", apiIssuePath(c), nil, nil, d.Issue); return nil })
	g.Go(func() error { errs[1] = b.api.callAs(v, "GET", docPath, nil, nil, d.Doc); return nil })
	g.Go(func() error { errs[2] = b.api.callAs(v, "GET", docPath+"/revisions", nil, nil, &revs); return nil })
	_ = g.Wait()
	if err := errors.Join(errs...); err != nil {
		var ae *apiError
		for _, e := range errs {
			if errors.As(e, &ae) {
				return b.fail(c, l, e)
			}
		}
		return b.fail(c, l, err)
	}
	if d.Issue.CompanyID != d.CompanyID {
		return b.fail(c, l, &apiError{Status: http.StatusNotFound, Message: "Issue not found"})
	}
	d.Revisions = revs.Revisions
	if rid := c.Query("revision"); rid != "" && (d.Doc.LatestRevisionID == nil || rid != *d.Doc.LatestRevisionID) {
		for i := range d.Revisions {
			if d.Revisions[i].ID == rid {
				d.Shown = &d.Revisions[i]
			}
		}
		if d.Shown == nil {
			return b.fail(c, l, &apiError{Status: http.StatusNotFound, Message: "Revision not found"})
		}
	}
	l.Title = documentName(d.Doc) + " · " + d.Issue.Identifier
	l.Error = refusal
	return render(c, status, documentPage(l, d))
}

// saveDocument writes a new revision through PUT /api/issues/{id}/documents/{key} with the
// revision the editor started from as the base (a newer revision is a 409 conflict, shown
// with the draft kept).
func (b *Board) saveDocument(c *fiber.Ctx) error {
	body := strings.ReplaceAll(c.FormValue("body"), "\r\n", "\n")
	in := map[string]any{"format": "markdown", "body": body}
	if t := strings.TrimSpace(c.FormValue("title")); t != "" {
		in["title"] = t
	}
	if s := strings.TrimSpace(c.FormValue("changeSummary")); s != "" {
		in["changeSummary"] = s
	}
	if base := c.FormValue("baseRevisionId"); base != "" {
		in["baseRevisionId"] = base
	}
	key := c.Params("key")
	err := b.api.call(c, "PUT", apiIssuePath(c)+"/documents/"+url.PathEscape(key), nil, in, nil)
	if err == nil {
		return c.Redirect(issuePath(c)+"/documents/"+url.PathEscape(key), http.StatusSeeOther)
	}
	var ae *apiError
	if !errors.As(err, &ae) {
		return b.fail(c, nil, err)
	}
	return b.documentPageWith(c, "The revision was not saved: "+refusalMessage(ae), &body, ae.Status)
}

func documentName(d *issueDocument) string {
	if d.Title != nil && *d.Title != "" {
		return *d.Title
	}
	return d.Key
}

// activityFilters are the activity feed's query parameters.
type activityFilters struct {
	EntityType, AgentID, Action string
	Limit, Offset               int
}

func (f activityFilters) values(offset int) url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"entityType": f.EntityType, "agentId": f.AgentID, "action": f.Action} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if f.Limit != 50 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	if offset > 0 {
		q.Set("offset", strconv.Itoa(offset))
	}
	return q
}

// activityData is the activity feed page.
type activityData struct {
	CompanyID string
	Filters   activityFilters
	Entries   []activityItem
	Agents    []agent
	AgentName map[string]string
	SelfURL   string
	PrevURL   string
	NextURL   string
	Error     string
}

// activityEntityTypes are the entity types the feed's filter offers (any other may be typed
// in the URL).
var activityEntityTypes = []string{"issue", "agent", "heartbeat_run", "approval", "project", "goal", "routine", "company", "cost_event", "budget_incident", "secret", "case", "skill"}

// activity is the company's activity feed, or its list fragment for htmx; on the first page
// it re-fetches itself when an entry is written (new entries appear at the top).
func (b *Board) activity(c *fiber.Ctx) error {
	id := c.Params("companyId")
	f := activityFilters{EntityType: strings.TrimSpace(c.Query("entityType")), AgentID: strings.TrimSpace(c.Query("agentId")),
		Action: strings.TrimSpace(c.Query("action")), Limit: c.QueryInt("limit", 50), Offset: c.QueryInt("offset", 0)}
	if f.Limit < 1 || f.Limit > 200 {
		f.Limit = 50
	}
	f.Offset = max(f.Offset, 0)
	base := "/c/" + id + "/activity"
	d := &activityData{CompanyID: id, Filters: f, SelfURL: base}
	if enc := f.values(f.Offset).Encode(); enc != "" {
		d.SelfURL += "?" + enc
	}
	v := visitorOf(c)
	companyPath := "/api/companies/" + url.PathEscape(id)
	q := url.Values{"limit": {strconv.Itoa(f.Limit + 1)}, "offset": {strconv.Itoa(f.Offset)}}
	for k, val := range map[string]string{"entityType": f.EntityType, "agentId": f.AgentID, "action": f.Action} {
		if val != "" {
			q.Set(k, val)
		}
	}
	fragment := isFragment(c)
	var listErr error
	var g errgroup.Group
	g.Go(func() error {
		listErr = b.api.callAs(v, "GET", companyPath+"/activity", q, nil, &d.Entries)
		return nil
	})
	g.Go(func() error {
		_ = b.api.callAs(v, "GET", companyPath+"/agents", nil, nil, &d.Agents)
		return nil
	})
	var l *layoutData
	var frameErr error
	var frameDone bool
	if !fragment {
		l, frameDone, frameErr = b.page(c, "Activity", "activity", id)
	}
	_ = g.Wait()
	if frameDone {
		return frameErr
	}
	status := http.StatusOK
	if listErr != nil {
		var ae *apiError
		if !errors.As(listErr, &ae) {
			return b.fail(c, l, listErr)
		}
		if ae.Status == http.StatusUnauthorized {
			return b.toSignIn(c)
		}
		status = ae.Status
		d.Error = "The activity could not be listed: " + ae.Message
		if ae.Status == http.StatusForbidden {
			d.Error = "You do not have access to this company's activity: " + ae.Message + "."
		}
	}
	if len(d.Entries) > f.Limit {
		d.Entries = d.Entries[:f.Limit]
		d.NextURL = base + "?" + f.values(f.Offset+f.Limit).Encode()
	}
	if f.Offset > 0 {
		d.PrevURL = base
		if enc := f.values(max(0, f.Offset-f.Limit)).Encode(); enc != "" {
			d.PrevURL += "?" + enc
		}
	}
	d.AgentName = agentNames(d.Agents)
	if fragment {
		return render(c, status, activityFeed(d))
	}
	return render(c, status, activityPage(l, d))
}

// activityActor names who wrote an activity entry.
func activityActor(e activityItem, names map[string]string) string {
	if e.ActorType == "agent" {
		if n := names[e.ActorID]; n != "" {
			return n
		}
		return "agent " + shortID(e.ActorID)
	}
	if e.ActorType == "user" {
		return "user " + e.ActorID
	}
	return e.ActorType
}

// activityEntityURL is the board page of an entry's entity, where there is one.
func activityEntityURL(companyID string, e activityItem) string {
	switch e.EntityType {
	case "issue":
		return "/c/" + companyID + "/issues/" + e.EntityID
	case "heartbeat_run":
		return "/c/" + companyID + "/runs/" + e.EntityID
	}
	return ""
}

// hasValue says whether vs holds v.
func hasValue(vs []string, v string) bool {
	for _, x := range vs {
		if x == v {
			return true
		}
	}
	return false
}

// boardQuery is the board's query for the list's filters (status and paging dropped: the
// board has a column per status).
func boardQuery(f issueFilters) string {
	q := f.values(0)
	q.Del("status")
	q.Del("limit")
	return q.Encode()
}

// safeURL says whether a work product's URL may be a link (http or https only).
func safeURL(u string) bool {
	p, err := url.Parse(u)
	return err == nil && (p.Scheme == "http" || p.Scheme == "https") && p.Host != ""
}

// formatBytes is a file size for people.
func formatBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// deref is the string, or "" for nil.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// namedLabel is the name of the entry of list with id, "—" for none.
func namedLabel(list []named, id *string) string {
	if id == nil {
		return "—"
	}
	for _, n := range list {
		if n.ID == *id {
			return n.Label()
		}
	}
	return shortID(*id)
}

// parentName is the identifier of the issue's parent (its nearest ancestor).
func parentName(is *issueDetail) string {
	if len(is.Ancestors) > 0 {
		return is.Ancestors[0].Identifier + " " + is.Ancestors[0].Title
	}
	return shortID(*is.ParentID)
}

// checkoutSince is when the issue's current holder took it: the execution lock, else when
// work started.
func checkoutSince(is *issueDetail) *time.Time {
	if is.ExecutionLockedAt != nil {
		return is.ExecutionLockedAt
	}
	return is.StartedAt
}

// documentDraft is what the document editor starts with: a refused draft, else the latest body.
func documentDraft(d *documentData) string {
	if d.Draft != nil {
		return *d.Draft
	}
	return d.Doc.Body
}

// revisionCurrent is the aria-current of a revision link: the one shown.
func revisionCurrent(d *documentData, r documentRevision) string {
	if (d.Shown != nil && d.Shown.ID == r.ID) || (d.Shown == nil && d.Doc.LatestRevisionID != nil && *d.Doc.LatestRevisionID == r.ID) {
		return "page"
	}
	return "false"
}

// revisionAuthor names who wrote a revision.
func revisionAuthor(r documentRevision) string {
	switch {
	case r.ActorAgentName != nil:
		return *r.ActorAgentName
	case r.CreatedByAgentID != nil:
		return "agent " + shortID(*r.CreatedByAgentID)
	case r.CreatedByUserID != nil:
		return "user " + *r.CreatedByUserID
	}
	return "system"
}

// activityEntityLabel names an entry's entity: its identifier, title or name from the
// entry's details when it carries one, else its type and short id.
func activityEntityLabel(e activityItem) string {
	var d struct {
		Identifier string `json:"identifier"`
		Title      string `json:"title"`
		Name       string `json:"name"`
	}
	_ = json.Unmarshal(e.Details, &d)
	switch {
	case d.Identifier != "":
		return e.EntityType + " " + d.Identifier
	case d.Title != "":
		return e.EntityType + " " + d.Title
	case d.Name != "":
		return e.EntityType + " " + d.Name
	}
	return e.EntityType + " " + shortID(e.EntityID)
}
