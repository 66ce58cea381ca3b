package board

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"

	"github.com/gofiber/fiber/v2"
	"golang.org/x/sync/errgroup"
)

// The cases pages: the list with the API's filters and a create form, and a case's detail
// with its documents (write a revision), their annotation threads (add one, reply, resolve),
// linked issues, attachments and timeline. Cases are experimental: while the instance flag
// enableCases is off the API answers 403 "Cases are disabled", which the pages show as a
// notice.

// casesOff is the API's answer while the flag is off.
const casesOff = "Cases are disabled"

// caseStatuses are the case statuses (spec part 2 "Case status").
var caseStatuses = []string{"draft", "in_progress", "in_review", "approved", "done", "cancelled"}

// caseDocKey is the pattern of a case document key (spec part 2 "Case document").
var caseDocKey = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,120}$`)

// mountCases adds the case pages.
func (b *Board) mountCases(g fiber.Router) {
	g.Get("/c/:companyId/cases", b.cases)
	g.Post("/c/:companyId/cases", b.createCase)
	g.Get("/c/:companyId/cases/:caseId", b.caseDetailPage)
	g.Post("/c/:companyId/cases/:caseId", b.updateCase)
	g.Post("/c/:companyId/cases/:caseId/documents", b.writeCaseDocument)
	g.Post("/c/:companyId/cases/:caseId/documents/:key/annotations", b.annotateCaseDocument)
	g.Post("/c/:companyId/cases/:caseId/documents/:key/annotations/:threadId/comments", b.replyAnnotation)
	g.Post("/c/:companyId/cases/:caseId/documents/:key/annotations/:threadId/status", b.setAnnotationStatus)
}

// caseFilters are the case list's query parameters (those of the API, one value each).
type caseFilters struct {
	Q, Status, Type, ProjectID, LabelID, Parent string
	IncludeNoProject, IncludeAncestors          bool
	Limit                                       int
}

func caseFiltersFrom(c *fiber.Ctx) caseFilters {
	f := caseFilters{Q: c.Query("q"), Status: c.Query("status"), Type: c.Query("type"), ProjectID: c.Query("projectId"),
		LabelID: c.Query("labelId"), Parent: c.Query("parent"), Limit: c.QueryInt("limit", 100),
		IncludeNoProject: c.Query("includeNoProject") == "true", IncludeAncestors: c.Query("includeAncestors") == "true"}
	if f.Limit < 1 || f.Limit > 200 {
		f.Limit = 100
	}
	return f
}

// apiQuery is the API's query for the filters (the API validates them).
func (f caseFilters) apiQuery() url.Values {
	q := url.Values{"limit": {fmt.Sprint(f.Limit)}}
	for k, v := range map[string]string{"q": f.Q, "status": f.Status, "type": f.Type, "projectId": f.ProjectID, "labelId": f.LabelID, "parent": f.Parent} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if f.IncludeNoProject {
		q.Set("includeNoProject", "true")
	}
	if f.IncludeAncestors {
		q.Set("includeAncestors", "true")
	}
	return q
}

// casesData is the case list page.
type casesData struct {
	CompanyID string
	CSRF      string
	Filters   caseFilters
	Cases     []caseRow
	Projects  []named
	Labels    []label
	Off       bool
	Error     string
	// Form keeps the create form's values after a refusal.
	Form map[string]string
}

// flagOff reports whether err is the API's answer of an experimental area whose flag is off.
func flagOff(err error, status int, msg string) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.Status == status && ae.Message == msg
}

func (b *Board) cases(c *fiber.Ctx) error { return b.renderCases(c, nil, nil) }

// renderCases shows the list; refusal is a create the API refused (with the form's values).
func (b *Board) renderCases(c *fiber.Ctx, refusal *apiError, form map[string]string) error {
	id := c.Params("companyId")
	f := caseFiltersFrom(c)
	d := &casesData{CompanyID: id, CSRF: csrfOf(c), Filters: f, Form: form}
	v := visitorOf(c)
	co := "/api/companies/" + url.PathEscape(id)
	var listErr error
	var g errgroup.Group
	g.Go(func() error { listErr = b.api.callAs(v, "GET", co+"/cases", f.apiQuery(), nil, &d.Cases); return nil })
	g.Go(func() error { _ = b.api.callAs(v, "GET", co+"/projects", nil, nil, &d.Projects); return nil })
	g.Go(func() error { _ = b.api.callAs(v, "GET", co+"/labels", nil, nil, &d.Labels); return nil })
	l, done, err := b.page(c, "Cases", "cases", id)
	_ = g.Wait()
	if done {
		return err
	}
	status := http.StatusOK
	switch {
	case flagOff(listErr, http.StatusForbidden, casesOff):
		d.Off = true
	case listErr != nil:
		var ae *apiError
		if !errors.As(listErr, &ae) || ae.Status >= 500 || ae.Status == http.StatusUnauthorized {
			return b.fail(c, l, listErr)
		}
		status, d.Error = ae.Status, "The cases could not be listed: "+ae.Message
		if ae.Status == http.StatusForbidden {
			d.Error = "You do not have access to this company's cases: " + ae.Message + "."
		}
	}
	if refusal != nil {
		status, d.Error = refusal.Status, "The case was not created: "+refusal.Message
	}
	return render(c, status, casesPage(l, d))
}

// createCase creates a case and goes to it.
func (b *Board) createCase(c *fiber.Ctx) error {
	form := map[string]string{}
	for _, k := range []string{"caseType", "title", "key", "summary", "status"} {
		form[k] = strings.TrimSpace(c.FormValue(k))
	}
	body := map[string]any{"caseType": form["caseType"], "title": form["title"]}
	for _, k := range []string{"key", "summary", "status"} {
		if form[k] != "" {
			body[k] = form[k]
		}
	}
	var created caseRow
	err := b.api.call(c, "POST", "/api/companies/"+url.PathEscape(c.Params("companyId"))+"/cases", nil, body, &created)
	var ae *apiError
	if err != nil && !errors.As(err, &ae) {
		return b.fail(c, nil, err)
	}
	if err != nil {
		if ae.Status == http.StatusUnauthorized {
			return b.toSignIn(c)
		}
		return b.renderCases(c, ae, form)
	}
	return c.Redirect("/c/"+c.Params("companyId")+"/cases/"+created.ID, http.StatusSeeOther)
}

// caseData is a case's detail page.
type caseData struct {
	CompanyID string
	CSRF      string
	Case      *caseDetail
	Threads   map[string][]annotationThread
	Events    []caseEvent
	Off       bool
	Error     string
}

func (b *Board) caseDetailPage(c *fiber.Ctx) error { return b.renderCase(c, nil) }

// renderCase shows a case; refusal is a write the API refused.
func (b *Board) renderCase(c *fiber.Ctx, refusal *apiError) error {
	companyID, caseID := c.Params("companyId"), c.Params("caseId")
	l, done, err := b.page(c, "Case", "cases", companyID)
	if done {
		return err
	}
	d := &caseData{CompanyID: companyID, CSRF: csrfOf(c), Case: &caseDetail{}, Threads: map[string][]annotationThread{}}
	v := visitorOf(c)
	casePath := "/api/cases/" + url.PathEscape(caseID)
	var getErr error
	var g errgroup.Group
	g.Go(func() error { getErr = b.api.callAs(v, "GET", casePath, nil, nil, d.Case); return nil })
	g.Go(func() error {
		_ = b.api.callAs(v, "GET", casePath+"/events", url.Values{"limit": {"200"}}, nil, &d.Events)
		return nil
	})
	_ = g.Wait()
	if flagOff(getErr, http.StatusForbidden, casesOff) {
		d.Off = true
		return render(c, http.StatusOK, casePage(l, d))
	}
	if getErr == nil && d.Case.CompanyID != companyID {
		getErr = &apiError{Status: http.StatusNotFound, Message: "Case not found"}
	}
	if getErr != nil {
		return b.fail(c, l, getErr)
	}
	// Each document's annotation threads, with their comments.
	var mu sync.Mutex
	for _, doc := range d.Case.Documents {
		g.Go(func() error {
			var threads []annotationThread
			if b.api.callAs(v, "GET", casePath+"/documents/"+url.PathEscape(doc.Key)+"/annotations",
				url.Values{"status": {"all"}, "includeComments": {"true"}}, nil, &threads) == nil {
				mu.Lock()
				d.Threads[doc.Key] = threads
				mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait()
	l.Title = d.Case.Identifier + " " + d.Case.Title
	status := http.StatusOK
	if refusal != nil {
		status, d.Error = refusal.Status, refusalText(refusal)
	}
	return render(c, status, casePage(l, d))
}

// caseAfterWrite answers a case form: back to the case (at anchor), or the case with the
// refusal and the API's status.
func (b *Board) caseAfterWrite(c *fiber.Ctx, writeErr error, anchor string) error {
	var ae *apiError
	if writeErr != nil && !errors.As(writeErr, &ae) {
		return b.fail(c, nil, writeErr)
	}
	if writeErr == nil {
		return c.Redirect("/c/"+c.Params("companyId")+"/cases/"+c.Params("caseId")+anchor, http.StatusSeeOther)
	}
	if ae.Status == http.StatusUnauthorized {
		return b.toSignIn(c)
	}
	return b.renderCase(c, ae)
}

// updateCase changes a case's status, title and summary.
func (b *Board) updateCase(c *fiber.Ctx) error {
	patch := map[string]any{}
	if s := c.FormValue("status"); s != "" {
		patch["status"] = s
	}
	if t := strings.TrimSpace(c.FormValue("title")); t != "" {
		patch["title"] = t
	}
	if c.Request().PostArgs().Has("summary") {
		if s := strings.TrimSpace(c.FormValue("summary")); s != "" {
			patch["summary"] = s
		} else {
			patch["summary"] = nil
		}
	}
	if len(patch) == 0 {
		return b.caseAfterWrite(c, nil, "")
	}
	return b.caseAfterWrite(c, b.api.call(c, "PATCH", "/api/cases/"+url.PathEscape(c.Params("caseId")), nil, patch, nil), "")
}

// writeCaseDocument writes a document revision: a new document (no base revision) or the
// next revision of one (its latest revision as the base, which the API checks).
func (b *Board) writeCaseDocument(c *fiber.Ctx) error {
	key := strings.TrimSpace(c.FormValue("key"))
	if !caseDocKey.MatchString(key) {
		return b.caseAfterWrite(c, &apiError{Status: http.StatusBadRequest,
			Message: "A document key is 1 to 120 letters, digits, or _ . : -"}, "")
	}
	body := map[string]any{"body": c.FormValue("body")}
	if t := strings.TrimSpace(c.FormValue("title")); t != "" {
		body["title"] = t
	}
	if s := strings.TrimSpace(c.FormValue("changeSummary")); s != "" {
		body["changeSummary"] = s
	}
	if r := c.FormValue("baseRevisionId"); r != "" {
		body["baseRevisionId"] = r
	}
	err := b.api.call(c, "PUT", "/api/cases/"+url.PathEscape(c.Params("caseId"))+"/documents/"+url.PathEscape(key), nil, body, nil)
	return b.caseAfterWrite(c, err, "#doc-"+key)
}

// annotateCaseDocument opens an annotation thread on a passage of a document's latest
// revision (the quoted text) with its first comment.
func (b *Board) annotateCaseDocument(c *fiber.Ctx) error {
	key := c.Params("key")
	body := map[string]any{"quote": c.FormValue("quote"), "body": c.FormValue("body")}
	if r := c.FormValue("baseRevisionId"); r != "" {
		body["baseRevisionId"] = r
	}
	err := b.api.call(c, "POST", caseDocPath(c)+"/annotations", nil, body, nil)
	return b.caseAfterWrite(c, err, "#doc-"+key)
}

// replyAnnotation adds a comment to an annotation thread.
func (b *Board) replyAnnotation(c *fiber.Ctx) error {
	err := b.api.call(c, "POST", caseDocPath(c)+"/annotations/"+url.PathEscape(c.Params("threadId"))+"/comments", nil,
		map[string]any{"body": c.FormValue("body")}, nil)
	return b.caseAfterWrite(c, err, "#doc-"+c.Params("key"))
}

// setAnnotationStatus resolves or reopens an annotation thread.
func (b *Board) setAnnotationStatus(c *fiber.Ctx) error {
	err := b.api.call(c, "PATCH", caseDocPath(c)+"/annotations/"+url.PathEscape(c.Params("threadId")), nil,
		map[string]any{"status": c.FormValue("status")}, nil)
	return b.caseAfterWrite(c, err, "#doc-"+c.Params("key"))
}

func caseDocPath(c *fiber.Ctx) string {
	return "/api/cases/" + url.PathEscape(c.Params("caseId")) + "/documents/" + url.PathEscape(c.Params("key"))
}

// caseDocTitle is a document's title, or its key.
func caseDocTitle(key string, d *caseDocument) string {
	if d != nil && d.Title != nil && *d.Title != "" {
		return *d.Title
	}
	return key
}

// caseEventActor names who caused a timeline event.
func caseEventActor(e caseEvent) string {
	switch {
	case e.ActorAgentName != nil:
		return *e.ActorAgentName
	case e.ActorUserID != nil:
		return "user " + *e.ActorUserID
	}
	return e.ActorType
}

// annotationAuthor names who wrote an annotation comment.
func annotationAuthor(cm annotationComment) string {
	switch {
	case cm.ActorAgentName != nil:
		return *cm.ActorAgentName
	case cm.CreatedByAgentID != nil:
		return "agent " + shortID(*cm.CreatedByAgentID)
	case cm.CreatedByUserID != nil:
		return "user " + *cm.CreatedByUserID
	}
	return "—"
}

// caseFieldsText is a case's fields as indented JSON, or empty when there are none.
func caseFieldsText(raw json.RawMessage) string {
	p := prettyJSON(raw)
	if p == "{}" {
		return ""
	}
	return p
}

func strOr(p *string, def string) string {
	if p != nil {
		return *p
	}
	return def
}

// caseListSelf is the list URL of the filters (for the no-JS filter form's reset link).
func caseListSelf(d *casesData) string { return "/c/" + d.CompanyID + "/cases" }
