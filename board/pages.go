package board

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"golang.org/x/sync/errgroup"
)

// page loads the frame of a signed-in page; done is true when the answer has been written
// (a redirect to sign in, or an error page).
func (b *Board) page(c *fiber.Ctx, title, nav, companyID string) (l *layoutData, done bool, err error) {
	l, ok, err := b.frame(c, title, nav, companyID)
	if err != nil {
		return l, true, b.fail(c, l, err)
	}
	if !ok {
		return nil, true, nil
	}
	return l, false, nil
}

func (b *Board) companies(c *fiber.Ctx) error {
	l, done, err := b.page(c, "Companies", "companies", "")
	if done {
		return err
	}
	return render(c, http.StatusOK, companiesPage(l, l.Companies, b.mode == "authenticated" && b.bootstrapPending(c)))
}

func (b *Board) createCompany(c *fiber.Ctx) error {
	body := map[string]any{"name": strings.TrimSpace(c.FormValue("name"))}
	if d := strings.TrimSpace(c.FormValue("description")); d != "" {
		body["description"] = d
	}
	var co company
	if err := b.api.call(c, "POST", "/api/companies", nil, body, &co); err != nil {
		l, done, ferr := b.page(c, "Companies", "companies", "")
		if done {
			return ferr
		}
		var ae *apiError
		if errors.As(err, &ae) && ae.Status < 500 {
			l.Error = "The company was not created: " + ae.Message
			return render(c, ae.Status, companiesPage(l, l.Companies, false))
		}
		return b.fail(c, l, err)
	}
	return c.Redirect("/c/"+co.ID, http.StatusSeeOther)
}

// dashboard shows the snapshot and 14 days of run activity and spend; the two reads (the
// snapshot and the per-day spend of GET …/costs/by-day) run in parallel.
func (b *Board) dashboard(c *fiber.Ctx) error {
	id := c.Params("companyId")
	l, done, err := b.page(c, "Dashboard", "dashboard", id)
	if done {
		return err
	}
	v := visitorOf(c)
	days := lastDays(time.Now(), 14)
	var s snapshot
	var byDay []daySpend
	var spendErr error
	var g errgroup.Group
	g.Go(func() error {
		return b.api.callAs(v, "GET", "/api/companies/"+url.PathEscape(id)+"/dashboard", nil, nil, &s)
	})
	g.Go(func() error {
		spendErr = b.api.callAs(v, "GET", "/api/companies/"+url.PathEscape(id)+"/costs/by-day",
			url.Values{"from": {days[0]}, "to": {days[len(days)-1]}}, nil, &byDay)
		return nil
	})
	if err := g.Wait(); err != nil {
		return b.fail(c, l, err)
	}
	ok, failed, other := make([]float64, len(days)), make([]float64, len(days)), make([]float64, len(days))
	for _, day := range s.RunActivity {
		for i, d := range days {
			if d == day.Date {
				ok[i], failed[i], other[i] = float64(day.Succeeded+day.Recovered), float64(day.Failed), float64(day.Other)
			}
		}
	}
	runs := newChart("runs-chart", "Heartbeat runs per day", days, []chartSeries{
		{Name: "succeeded", Class: "bar-ok", Values: ok}, {Name: "failed", Class: "bar-bad", Values: failed}, {Name: "other", Class: "bar-other", Values: other},
	}, formatCount)
	var spendChart *chart
	if spendErr == nil {
		spendChart = spendPerDayChart("spend-chart", days, byDay)
	}
	return render(c, http.StatusOK, dashboardPage(l, &s, runs, spendChart))
}

// issueFilters are the issue list's query parameters, as the board's URL carries them.
type issueFilters struct {
	Q, Status, AssigneeAgentID, AssigneeUserID, ProjectID, GoalID, LabelID, ParentID string
	OriginKind, OriginKindPrefix, OriginID, RoutineExecutions, SortField, SortDir    string
	Limit, Offset                                                                    int
}

func issueFiltersFrom(c *fiber.Ctx) issueFilters {
	f := issueFilters{
		Q: c.Query("q"), Status: c.Query("status"), AssigneeAgentID: c.Query("assigneeAgentId"), AssigneeUserID: c.Query("assigneeUserId"),
		ProjectID: c.Query("projectId"), GoalID: c.Query("goalId"), LabelID: c.Query("labelId"), ParentID: c.Query("parentId"),
		OriginKind: c.Query("originKind"), OriginKindPrefix: c.Query("originKindPrefix"), OriginID: c.Query("originId"),
		RoutineExecutions: c.Query("routineExecutions"), SortField: c.Query("sortField", "updatedAt"), SortDir: c.Query("sortDir", "desc"),
		Limit: c.QueryInt("limit", 50), Offset: c.QueryInt("offset", 0),
	}
	if f.Limit < 1 || f.Limit > 200 {
		f.Limit = 50
	}
	if f.Offset < 0 {
		f.Offset = 0
	}
	return f
}

// values is the board URL's query (offset as given).
func (f issueFilters) values(offset int) url.Values {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("q", f.Q)
	set("status", f.Status)
	set("assigneeAgentId", f.AssigneeAgentID)
	set("assigneeUserId", f.AssigneeUserID)
	set("projectId", f.ProjectID)
	set("goalId", f.GoalID)
	set("labelId", f.LabelID)
	set("parentId", f.ParentID)
	set("originKind", f.OriginKind)
	set("originKindPrefix", f.OriginKindPrefix)
	set("originId", f.OriginID)
	set("routineExecutions", f.RoutineExecutions)
	set("sortField", f.SortField)
	set("sortDir", f.SortDir)
	q.Set("limit", strconv.Itoa(f.Limit))
	if offset > 0 {
		q.Set("offset", strconv.Itoa(offset))
	}
	return q
}

// apiQuery is the API's query for the filters (the API validates them).
func (f issueFilters) apiQuery() url.Values {
	q := f.values(f.Offset)
	q.Del("routineExecutions")
	switch f.RoutineExecutions {
	case "include":
		q.Set("includeRoutineExecutions", "true")
	case "exclude":
		q.Set("excludeRoutineExecutions", "true")
	}
	return q
}

// issues is the issue list page, or its list fragment for htmx.
func (b *Board) issues(c *fiber.Ctx) error { return b.issuesWith(c, nil) }

// issuesWith is the issue list page; form is the new-issue form the API refused, shown
// open with its values and the refusal.
func (b *Board) issuesWith(c *fiber.Ctx, form *newIssueForm) error {
	id := c.Params("companyId")
	f := issueFiltersFrom(c)
	base := "/c/" + id + "/issues"
	d := &issueListData{CompanyID: id, Filters: f, SelfURL: base + "?" + f.values(f.Offset).Encode(), CSRF: csrfOf(c), NewIssue: form}
	if form == nil {
		d.NewIssue = &newIssueForm{Values: url.Values{}}
	}
	v := visitorOf(c)
	companyPath := "/api/companies/" + url.PathEscape(id)
	fragment := isFragment(c)
	var l *layoutData
	var g errgroup.Group
	var listErr error
	g.Go(func() error {
		listErr = b.api.callAs(v, "GET", companyPath+"/issues", f.apiQuery(), nil, &d.Issues)
		return nil
	})
	g.Go(func() error {
		var n map[string]int
		if err := b.api.callAs(v, "GET", companyPath+"/issues/count", f.apiQuery(), nil, &n); err == nil {
			d.Total = n["count"]
		}
		return nil
	})
	g.Go(func() error {
		_ = b.api.callAs(v, "GET", companyPath+"/agents", nil, nil, &d.Agents)
		return nil
	})
	if !fragment {
		b.loadIssueFilterOptions(&g, v, companyPath, d)
	}
	var frameErr error
	var frameDone bool
	if !fragment {
		l, frameDone, frameErr = b.page(c, "Issues", "issues", id)
	}
	_ = g.Wait()
	if frameDone {
		return frameErr
	}
	d.AgentName = agentNames(d.Agents)
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
		d.Error = "The issues could not be listed: " + ae.Message
		if ae.Status == http.StatusForbidden {
			d.Error = "You do not have access to this company's issues: " + ae.Message + "."
		}
	}
	if f.Offset > 0 {
		d.PrevURL = base + "?" + f.values(max(0, f.Offset-f.Limit)).Encode()
	}
	if f.Offset+len(d.Issues) < d.Total {
		d.NextURL = base + "?" + f.values(f.Offset+f.Limit).Encode()
	}
	if fragment {
		return render(c, status, issueList(d))
	}
	if form != nil && form.Status != 0 {
		status = form.Status
	}
	return render(c, status, issuesPage(l, d))
}

// loadIssue reads everything the issue detail shows, in parallel. Parts the API refuses
// with 403 are named in Unavailable; the issue itself must load.
func (b *Board) loadIssue(c *fiber.Ctx) (*issueData, error) {
	companyID, issueID := c.Params("companyId"), c.Params("issueId")
	d := &issueData{CompanyID: companyID, CSRF: csrfOf(c), Issue: &issueDetail{}}
	v := visitorOf(c)
	issuePath := "/api/issues/" + url.PathEscape(issueID)
	var issueErr error
	var activity []activityEntry
	parts := map[string]error{}
	var partsMu sync.Mutex
	var g errgroup.Group
	g.Go(func() error { issueErr = b.api.callAs(v, "GET", issuePath, nil, nil, d.Issue); return nil })
	part := func(name, path string, q url.Values, out any) {
		g.Go(func() error {
			err := b.api.callAs(v, "GET", path, q, nil, out)
			if err != nil {
				partsMu.Lock()
				parts[name] = err
				partsMu.Unlock()
			}
			return nil
		})
	}
	part("comments", issuePath+"/comments", url.Values{"limit": {"500"}}, &d.Comments)
	part("documents", issuePath+"/documents", nil, &d.Documents)
	companyPath := "/api/companies/" + url.PathEscape(companyID)
	part("agents", companyPath+"/agents", nil, &d.Agents)
	part("work products", issuePath+"/work-products", nil, &d.WorkProducts)
	part("attachments", issuePath+"/attachments", nil, &d.Attachments)
	part("sub-issues", companyPath+"/issues", url.Values{"parentId": {issueID}, "limit": {"100"}, "sortField": {"createdAt"}, "sortDir": {"asc"}}, &d.Children)
	part("projects", companyPath+"/projects", nil, &d.Projects)
	part("goals", companyPath+"/goals", nil, &d.Goals)
	part("labels", companyPath+"/labels", nil, &d.Labels)
	part("runs", "/api/companies/"+url.PathEscape(companyID)+"/activity",
		url.Values{"entityType": {"issue"}, "entityId": {issueID}, "limit": {"500"}}, &activity)
	_ = g.Wait()
	if issueErr != nil {
		return nil, issueErr
	}
	if d.Issue.CompanyID != companyID {
		return nil, &apiError{Status: http.StatusNotFound, Message: "Issue not found"}
	}
	names := make([]string, 0, len(parts))
	for name, err := range parts {
		var ae *apiError
		if errors.As(err, &ae) && ae.Status == http.StatusForbidden {
			names = append(names, fmt.Sprintf("The %s of this issue are not available to you: %s.", name, ae.Message))
			continue
		}
		return nil, err
	}
	sort.Strings(names)
	d.Unavailable = names
	d.AgentName = agentNames(d.Agents)
	d.Runs = b.issueRuns(v, &d.Issue.issue, activity)
	return d, nil
}

// issueRuns are the heartbeat runs that worked on the issue: those its activity names and
// its checkout and execution runs, newest first, at most 20.
func (b *Board) issueRuns(v *visitor, is *issue, activity []activityEntry) []run {
	seen := map[string]bool{}
	var ids []string
	add := func(id *string) {
		if id != nil && *id != "" && !seen[*id] {
			seen[*id] = true
			ids = append(ids, *id)
		}
	}
	add(is.ExecutionRunID)
	add(is.CheckoutRunID)
	for _, e := range activity {
		add(e.RunID)
	}
	if len(ids) > 20 {
		ids = ids[:20]
	}
	runs := make([]run, len(ids))
	ok := make([]bool, len(ids))
	var g errgroup.Group
	for i, id := range ids {
		g.Go(func() error {
			ok[i] = b.api.callAs(v, "GET", "/api/heartbeat-runs/"+url.PathEscape(id), nil, nil, &runs[i]) == nil
			return nil
		})
	}
	_ = g.Wait()
	out := runs[:0]
	for i := range runs {
		if ok[i] {
			out = append(out, runs[i])
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.After(out[j].CreatedAt) })
	return out
}

func (b *Board) issue(c *fiber.Ctx) error {
	l, done, err := b.page(c, "Issue", "issues", c.Params("companyId"))
	if done {
		return err
	}
	d, err := b.loadIssue(c)
	if err != nil {
		return b.fail(c, l, err)
	}
	l.Title = d.Issue.Identifier + " " + d.Issue.Title
	return render(c, http.StatusOK, issuePage(l, d))
}

// issueLiveFragment answers the live part of the issue (re-fetched on the issue's events).
func (b *Board) issueLiveFragment(c *fiber.Ctx) error {
	d, err := b.loadIssue(c)
	if err != nil {
		return b.fail(c, nil, err)
	}
	return render(c, http.StatusOK, issueLive(d))
}

// updateIssue changes the status and assignee through PATCH /api/issues/{id}.
func (b *Board) updateIssue(c *fiber.Ctx) error {
	patch := map[string]any{}
	if s := c.FormValue("status"); s != "" {
		patch["status"] = s
	}
	if a := c.FormValue("assigneeAgentId"); a != "" {
		patch["assigneeAgentId"] = a
	} else {
		patch["assigneeAgentId"] = nil
	}
	return b.afterWrite(c, b.api.call(c, "PATCH", "/api/issues/"+url.PathEscape(c.Params("issueId")), nil, patch, nil), false)
}

// addComment posts a comment through POST /api/issues/{id}/comments.
func (b *Board) addComment(c *fiber.Ctx) error {
	body := map[string]any{"body": c.FormValue("body")}
	return b.afterWrite(c, b.api.call(c, "POST", "/api/issues/"+url.PathEscape(c.Params("issueId"))+"/comments", nil, body, nil), true)
}

// afterWrite answers an issue form: htmx gets the fresh live part (and an emptied comment
// form), a plain form a redirect back to the issue; a refusal is shown above the issue.
func (b *Board) afterWrite(c *fiber.Ctx, writeErr error, resetComment bool) error {
	back := "/c/" + c.Params("companyId") + "/issues/" + c.Params("issueId")
	var ae *apiError
	if writeErr != nil && !errors.As(writeErr, &ae) {
		return b.fail(c, nil, writeErr)
	}
	if !isFragment(c) {
		if writeErr != nil {
			l, done, err := b.page(c, "Issue", "issues", c.Params("companyId"))
			if done {
				return err
			}
			d, err := b.loadIssue(c)
			if err != nil {
				return b.fail(c, l, err)
			}
			d.Error = refusalText(ae)
			return render(c, ae.Status, issuePage(l, d))
		}
		return c.Redirect(back, http.StatusSeeOther)
	}
	d, err := b.loadIssue(c)
	if err != nil {
		return b.fail(c, nil, err)
	}
	if writeErr != nil {
		d.Error = refusalText(ae)
		// htmx swaps only 2xx answers by default: the refusal is shown with a 200.
		return render(c, http.StatusOK, issueLive(d))
	}
	if resetComment {
		return render(c, http.StatusOK, templJoin(issueLive(d), commentForm(d, "true")))
	}
	return render(c, http.StatusOK, issueLive(d))
}

func refusalText(ae *apiError) string {
	if ae.Status == http.StatusForbidden {
		return "You may not do this: " + ae.Message + "."
	}
	return "The change was refused: " + ae.Message
}
