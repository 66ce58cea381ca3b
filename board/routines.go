package board

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/gofiber/fiber/v2"
	"golang.org/x/sync/errgroup"
)

// mountRoutines adds the routines pages: the list with a create form, and a routine with
// its edit form, triggers (schedule, webhook, api; enable, disable, delete, secret
// rotation), run now and its runs, which follow the company's routine run events live.
func (b *Board) mountRoutines(g fiber.Router) {
	g.Get("/c/:companyId/routines", b.routines)
	g.Post("/c/:companyId/routines", b.createRoutine)
	g.Get("/c/:companyId/routines/:routineId", b.routinePage)
	g.Post("/c/:companyId/routines/:routineId", b.updateRoutine)
	g.Get("/c/:companyId/routines/:routineId/runs", b.routineRunsFragment)
	g.Post("/c/:companyId/routines/:routineId/run", b.runRoutine)
	g.Post("/c/:companyId/routines/:routineId/triggers", b.addTrigger)
	g.Post("/c/:companyId/routines/:routineId/triggers/:triggerId", b.updateTrigger)
	g.Post("/c/:companyId/routines/:routineId/triggers/:triggerId/rotate", b.rotateTrigger)
	g.Post("/c/:companyId/routines/:routineId/triggers/:triggerId/delete", b.deleteTrigger)
}

// Choices of the routine forms (the API validates them).
var (
	routinePriorities   = []string{"critical", "high", "medium", "low"}
	routineStatuses     = []string{"active", "paused", "archived"}
	concurrencyPolicies = []string{"coalesce_if_active", "always_enqueue", "skip_if_active"}
	catchUpPolicies     = []string{"skip_missed", "enqueue_missed_with_cap"}
	triggerKinds        = []string{"schedule", "webhook", "api"}
	signingModes        = []string{"bearer", "hmac_sha256", "forge_hmac", "none"}
)

// routinesData is the routine list page.
type routinesData struct {
	CompanyID string
	CSRF      string
	Routines  []routine
	Agents    []agent
	Projects  []named
	AgentName map[string]string
	Error     string
}

// routineData is a routine's page.
type routineData struct {
	CompanyID string
	CSRF      string
	Routine   *routine
	Agents    []agent
	Projects  []named
	AgentName map[string]string
	// Secret is a webhook's URL and secret right after creation or rotation, shown once.
	Secret *triggerSecret
}

// companyChoices reads the company's agents and projects for the routine forms; a part
// the API refuses stays empty (the form then offers fewer choices).
func (b *Board) companyChoices(v *visitor, g *errgroup.Group, companyID string, agents *[]agent, projects *[]named) {
	base := "/api/companies/" + url.PathEscape(companyID)
	g.Go(func() error { _ = b.api.callAs(v, "GET", base+"/agents", nil, nil, agents); return nil })
	g.Go(func() error { _ = b.api.callAs(v, "GET", base+"/projects", nil, nil, projects); return nil })
}

func (b *Board) loadRoutines(c *fiber.Ctx) (*routinesData, error) {
	id := c.Params("companyId")
	d := &routinesData{CompanyID: id, CSRF: csrfOf(c)}
	v := visitorOf(c)
	var listErr error
	var g errgroup.Group
	g.Go(func() error {
		listErr = b.api.callAs(v, "GET", "/api/companies/"+url.PathEscape(id)+"/routines", nil, nil, &d.Routines)
		return nil
	})
	b.companyChoices(v, &g, id, &d.Agents, &d.Projects)
	_ = g.Wait()
	d.AgentName = agentNames(d.Agents)
	return d, listErr
}

// routines is the routine list with the create form.
func (b *Board) routines(c *fiber.Ctx) error {
	l, done, err := b.page(c, "Routines", "routines", c.Params("companyId"))
	if done {
		return err
	}
	d, err := b.loadRoutines(c)
	if err != nil {
		return b.fail(c, l, err)
	}
	return render(c, http.StatusOK, routinesPage(l, d))
}

// routineBody turns the routine form into an API body; patch sends cleared fields as null.
func routineBody(c *fiber.Ctx, patch bool) map[string]any {
	body := map[string]any{"title": strings.TrimSpace(c.FormValue("title"))}
	opt := func(key string) {
		v := strings.TrimSpace(c.FormValue(key))
		switch {
		case v != "":
			body[key] = v
		case patch:
			body[key] = nil
		}
	}
	opt("description")
	opt("assigneeAgentId")
	opt("projectId")
	for _, k := range []string{"priority", "status", "concurrencyPolicy", "catchUpPolicy"} {
		if v := strings.TrimSpace(c.FormValue(k)); v != "" {
			body[k] = v
		}
	}
	return body
}

func (b *Board) createRoutine(c *fiber.Ctx) error {
	id := c.Params("companyId")
	var rt routine
	err := b.api.call(c, "POST", "/api/companies/"+url.PathEscape(id)+"/routines", nil, routineBody(c, false), &rt)
	if err == nil {
		return c.Redirect("/c/"+id+"/routines/"+rt.ID, http.StatusSeeOther)
	}
	var ae *apiError
	if !errors.As(err, &ae) {
		return b.fail(c, nil, err)
	}
	l, done, ferr := b.page(c, "Routines", "routines", id)
	if done {
		return ferr
	}
	d, lerr := b.loadRoutines(c)
	if lerr != nil {
		return b.fail(c, l, lerr)
	}
	l.Error = "The routine was not created: " + refusalWithDetails(ae)
	return render(c, ae.Status, routinesPage(l, d))
}

// loadRoutine reads a routine (with its triggers and recent runs) and the form choices.
func (b *Board) loadRoutine(c *fiber.Ctx) (*routineData, error) {
	companyID, routineID := c.Params("companyId"), c.Params("routineId")
	d := &routineData{CompanyID: companyID, CSRF: csrfOf(c), Routine: &routine{}}
	v := visitorOf(c)
	var rtErr error
	var g errgroup.Group
	g.Go(func() error {
		rtErr = b.api.callAs(v, "GET", "/api/routines/"+url.PathEscape(routineID), nil, nil, d.Routine)
		return nil
	})
	b.companyChoices(v, &g, companyID, &d.Agents, &d.Projects)
	_ = g.Wait()
	if rtErr != nil {
		return nil, rtErr
	}
	if d.Routine.CompanyID != companyID {
		return nil, &apiError{Status: http.StatusNotFound, Message: "Routine not found"}
	}
	d.AgentName = agentNames(d.Agents)
	return d, nil
}

func (b *Board) routinePage(c *fiber.Ctx) error {
	l, done, err := b.page(c, "Routine", "routines", c.Params("companyId"))
	if done {
		return err
	}
	d, err := b.loadRoutine(c)
	if err != nil {
		return b.fail(c, l, err)
	}
	l.Title = d.Routine.Title
	return render(c, http.StatusOK, routinePage(l, d))
}

// routineRunsFragment answers the runs table, re-fetched on the company's run events.
func (b *Board) routineRunsFragment(c *fiber.Ctx) error {
	companyID, routineID := c.Params("companyId"), c.Params("routineId")
	var runs []routineRun
	if err := b.api.call(c, "GET", "/api/routines/"+url.PathEscape(routineID)+"/runs", url.Values{"limit": {"25"}}, nil, &runs); err != nil {
		return b.fail(c, nil, err)
	}
	return render(c, http.StatusOK, routineRuns(companyID, routineID, runs))
}

// routineWrite answers a routine form: a redirect back to the routine when the API took the
// change, else the routine's page with the API's refusal above it.
func (b *Board) routineWrite(c *fiber.Ctx, writeErr error, secret *triggerSecret) error {
	companyID, routineID := c.Params("companyId"), c.Params("routineId")
	var ae *apiError
	if writeErr != nil && !errors.As(writeErr, &ae) {
		return b.fail(c, nil, writeErr)
	}
	if writeErr == nil && secret == nil {
		return c.Redirect("/c/"+companyID+"/routines/"+routineID, http.StatusSeeOther)
	}
	l, done, err := b.page(c, "Routine", "routines", companyID)
	if done {
		return err
	}
	d, err := b.loadRoutine(c)
	if err != nil {
		return b.fail(c, l, err)
	}
	l.Title = d.Routine.Title
	status := http.StatusOK
	if writeErr != nil {
		status = ae.Status
		l.Error = refusalWithDetails(ae)
	}
	d.Secret = secret
	return render(c, status, routinePage(l, d))
}

func (b *Board) updateRoutine(c *fiber.Ctx) error {
	return b.routineWrite(c, b.api.call(c, "PATCH", "/api/routines/"+url.PathEscape(c.Params("routineId")), nil, routineBody(c, true), nil), nil)
}

func (b *Board) runRoutine(c *fiber.Ctx) error {
	return b.routineWrite(c, b.api.call(c, "POST", "/api/routines/"+url.PathEscape(c.Params("routineId"))+"/run", nil,
		map[string]any{"source": "manual"}, nil), nil)
}

// addTrigger adds a schedule, webhook or api trigger; a webhook's URL and secret are shown
// once on the answer (a page, not a redirect, so the secret is in no URL or history entry).
func (b *Board) addTrigger(c *fiber.Ctx) error {
	kind := strings.TrimSpace(c.FormValue("kind"))
	body := map[string]any{"kind": kind}
	if v := strings.TrimSpace(c.FormValue("label")); v != "" {
		body["label"] = v
	}
	switch kind {
	case "schedule":
		body["cronExpression"] = strings.TrimSpace(c.FormValue("cronExpression"))
		if v := strings.TrimSpace(c.FormValue("timezone")); v != "" {
			body["timezone"] = v
		}
	case "webhook":
		if v := strings.TrimSpace(c.FormValue("signingMode")); v != "" {
			body["signingMode"] = v
		}
	}
	var out triggerSecret
	err := b.api.call(c, "POST", "/api/routines/"+url.PathEscape(c.Params("routineId"))+"/triggers", nil, body, &out)
	if err == nil && out.SecretMaterial != nil {
		return b.routineWrite(c, nil, &out)
	}
	return b.routineWrite(c, err, nil)
}

// updateTrigger enables or disables a trigger, or changes a schedule's cron and timezone.
func (b *Board) updateTrigger(c *fiber.Ctx) error {
	body := map[string]any{}
	switch c.FormValue("enabled") {
	case "true":
		body["enabled"] = true
	case "false":
		body["enabled"] = false
	}
	if v := strings.TrimSpace(c.FormValue("cronExpression")); v != "" {
		body["cronExpression"] = v
	}
	if v := strings.TrimSpace(c.FormValue("timezone")); v != "" {
		body["timezone"] = v
	}
	return b.routineWrite(c, b.api.call(c, "PATCH", "/api/routine-triggers/"+url.PathEscape(c.Params("triggerId")), nil, body, nil), nil)
}

func (b *Board) rotateTrigger(c *fiber.Ctx) error {
	var out triggerSecret
	err := b.api.call(c, "POST", "/api/routine-triggers/"+url.PathEscape(c.Params("triggerId"))+"/rotate-secret", nil, nil, &out)
	if err != nil {
		return b.routineWrite(c, err, nil)
	}
	return b.routineWrite(c, nil, &out)
}

func (b *Board) deleteTrigger(c *fiber.Ctx) error {
	return b.routineWrite(c, b.api.call(c, "DELETE", "/api/routine-triggers/"+url.PathEscape(c.Params("triggerId")), nil, nil, nil), nil)
}

// routineAssignee names a routine's assignee.
func routineAssignee(r *routine, names map[string]string) string {
	if r.AssigneeAgentID == nil {
		return "—"
	}
	if n := names[*r.AssigneeAgentID]; n != "" {
		return n
	}
	return "agent " + shortID(*r.AssigneeAgentID)
}

// triggerLine describes a trigger in a few words.
func triggerLine(t routineTrigger) string {
	s := t.Kind
	if t.Label != nil && *t.Label != "" {
		s += " “" + *t.Label + "”"
	}
	if t.CronExpression != nil {
		s += " " + *t.CronExpression
		if t.Timezone != nil {
			s += " (" + *t.Timezone + ")"
		}
	}
	if !t.Enabled {
		s += ", disabled"
	}
	return s
}

func strVal(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func isSel(p *string, v string) bool { return p != nil && *p == v }
