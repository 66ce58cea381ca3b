package board

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"golang.org/x/sync/errgroup"
)

// The agents area: the roster with its org chart and a hire form, an agent's detail (status
// and lifecycle buttons, adapter config, runs, API keys, permissions, budget), the company's
// runs and a run's page with its log streaming while the run executes.

// agentRunsPage is how many runs an agent's page and the runs list show at a time.
const agentRunsPage = 25

func (b *Board) mountAgents(g fiber.Router) {
	g.Get("/c/:companyId/agents", b.agentsList)
	g.Post("/c/:companyId/agents", b.hireAgent)
	g.Get("/c/:companyId/agents/:agentId", b.agentDetail)
	g.Post("/c/:companyId/agents/:agentId/keys", b.createAgentKey)
	g.Post("/c/:companyId/agents/:agentId/keys/:keyId/revoke", b.revokeAgentKey)
	g.Post("/c/:companyId/agents/:agentId/:action", b.agentAction)
	g.Get("/c/:companyId/runs", b.runsList)
	g.Get("/c/:companyId/runs/:runId", b.runPage)
	g.Get("/c/:companyId/runs/:runId/log", b.runLogFragment)
	g.Post("/c/:companyId/runs/:runId/cancel", b.cancelRun)
}

// mayWrite says whether the visitor may change the company's data, from GET
// /api/cli-auth/me: the local board and instance admins may, members but viewers may. The
// board shows write controls only then; the API decides either way.
func mayWrite(me *boardMe, companyID string) bool {
	if me == nil {
		return false
	}
	if me.IsInstanceAdmin || me.Source == "local_implicit" {
		return true
	}
	for _, m := range me.Memberships {
		if m.CompanyID == companyID && m.Status == "active" {
			return m.MembershipRole != "viewer"
		}
	}
	return false
}

// orgNode is an agent in the org chart with the agents reporting to it.
type orgNode struct {
	Agent    *agentFull
	Children []*orgNode
}

// orgChart builds the reporting tree from reportsTo: an agent whose manager is not in the
// roster (none, or terminated) is a root. Siblings are ordered by name.
func orgChart(agents []agentFull) []*orgNode {
	nodes := make(map[string]*orgNode, len(agents))
	for i := range agents {
		nodes[agents[i].ID] = &orgNode{Agent: &agents[i]}
	}
	var roots []*orgNode
	for i := range agents {
		n := nodes[agents[i].ID]
		if p := agents[i].ReportsTo; p != nil && nodes[*p] != nil && *p != agents[i].ID {
			nodes[*p].Children = append(nodes[*p].Children, n)
			continue
		}
		roots = append(roots, n)
	}
	// A cycle (the API refuses them) would leave its members unreachable: show them as roots.
	seen := map[string]bool{}
	var walk func([]*orgNode)
	walk = func(ns []*orgNode) {
		for _, n := range ns {
			if !seen[n.Agent.ID] {
				seen[n.Agent.ID] = true
				walk(n.Children)
			}
		}
	}
	walk(roots)
	for i := range agents {
		if !seen[agents[i].ID] {
			n := nodes[agents[i].ID]
			n.Children = nil
			roots = append(roots, n)
		}
	}
	var order func([]*orgNode)
	order = func(ns []*orgNode) {
		sort.SliceStable(ns, func(i, j int) bool { return strings.ToLower(ns[i].Agent.Name) < strings.ToLower(ns[j].Agent.Name) })
		for _, n := range ns {
			order(n.Children)
		}
	}
	order(roots)
	return roots
}

// agentsData is the agents list page.
type agentsData struct {
	CompanyID string
	CSRF      string
	Agents    []agentFull
	Roots     []*orgNode
	Adapters  []agentAdapter
	CanWrite  bool
	Error     string
	// Hire holds the hire form's values after a refusal.
	Hire map[string]string
}

func companyAPI(companyID string) string { return "/api/companies/" + url.PathEscape(companyID) }

// loadAgents reads the roster, the adapter types and what the visitor may do, in parallel.
func (b *Board) loadAgents(c *fiber.Ctx) (*agentsData, error) {
	id := c.Params("companyId")
	d := &agentsData{CompanyID: id, CSRF: csrfOf(c), Hire: map[string]string{"role": "general", "adapterType": "process"}}
	v := visitorOf(c)
	var me boardMe
	var listErr error
	var g errgroup.Group
	g.Go(func() error {
		listErr = b.api.callAs(v, "GET", companyAPI(id)+"/agents", nil, nil, &d.Agents)
		return nil
	})
	g.Go(func() error { _ = b.api.callAs(v, "GET", "/api/adapters", nil, nil, &d.Adapters); return nil })
	g.Go(func() error { _ = b.api.callAs(v, "GET", "/api/cli-auth/me", nil, nil, &me); return nil })
	_ = g.Wait()
	if listErr != nil {
		return nil, listErr
	}
	d.Adapters = slices.DeleteFunc(d.Adapters, func(a agentAdapter) bool { return !a.Loaded || a.Disabled })
	d.CanWrite = mayWrite(&me, id)
	d.Roots = orgChart(d.Agents)
	return d, nil
}

func (b *Board) agentsList(c *fiber.Ctx) error {
	l, done, err := b.page(c, "Agents", "agents", c.Params("companyId"))
	if done {
		return err
	}
	d, err := b.loadAgents(c)
	if err != nil {
		return b.fail(c, l, err)
	}
	return render(c, http.StatusOK, agentsPage(l, d))
}

// hireAgent hires through POST /api/companies/{id}/agent-hires and opens the new agent
// (pending approval when the company requires it); a refusal is shown above the form.
func (b *Board) hireAgent(c *fiber.Ctx) error {
	id := c.Params("companyId")
	form := map[string]string{}
	body := map[string]any{}
	for _, k := range []string{"name", "role", "title", "reportsTo", "adapterType"} {
		form[k] = strings.TrimSpace(c.FormValue(k))
		if form[k] != "" {
			body[k] = form[k]
		}
	}
	var out struct {
		Agent *agentFull `json:"agent"`
	}
	err := b.api.call(c, "POST", companyAPI(id)+"/agent-hires", nil, body, &out)
	if err == nil && out.Agent != nil {
		return c.Redirect("/c/"+id+"/agents/"+out.Agent.ID, http.StatusSeeOther)
	}
	if err == nil {
		err = errors.New("the hire answer has no agent")
	}
	l, done, ferr := b.page(c, "Agents", "agents", id)
	if done {
		return ferr
	}
	var ae *apiError
	if !errors.As(err, &ae) {
		return b.fail(c, l, err)
	}
	if ae.Status == http.StatusUnauthorized {
		return b.toSignIn(c)
	}
	d, lerr := b.loadAgents(c)
	if lerr != nil {
		return b.fail(c, l, lerr)
	}
	d.Hire = form
	d.Error = "The agent was not hired: " + apiText(ae)
	if ae.Status == http.StatusForbidden {
		d.Error = "You may not hire agents here: " + ae.Message + "."
	}
	return render(c, ae.Status, agentsPage(l, d))
}

// agentData is an agent's detail page.
type agentData struct {
	CompanyID string
	CSRF      string
	Agent     *agentFull
	AgentName map[string]string
	Agents    []agentFull
	Runs      []runFull
	RunsOff   int
	PrevRuns  string
	NextRuns  string
	Keys      []agentKey
	NewKey    *agentKeyCreated
	Config    *configForm
	CanWrite  bool
	Notice    string
	Error     string
	// Unavailable names parts the API refused to the visitor.
	Unavailable []string
}

// agentNotices are the fixed notices a write's redirect names (?ok=…).
var agentNotices = map[string]string{
	"paused": "The agent is paused.", "resumed": "The agent is resumed.", "config": "The adapter configuration is saved.",
	"permissions": "The permissions are saved.", "budget": "The monthly budget is saved.", "revoked": "The key is revoked.",
}

// loadAgent reads everything an agent's page shows, in parallel; parts the API refuses
// with 403 are named in Unavailable, the agent itself must load.
func (b *Board) loadAgent(c *fiber.Ctx) (*agentData, error) {
	companyID, agentID := c.Params("companyId"), c.Params("agentId")
	off := max(0, c.QueryInt("runsOffset", 0))
	d := &agentData{CompanyID: companyID, CSRF: csrfOf(c), Agent: &agentFull{}, RunsOff: off, Notice: agentNotices[c.Query("ok")]}
	v := visitorOf(c)
	agentPath := "/api/agents/" + url.PathEscape(agentID)
	var agentErr error
	var me boardMe
	parts := map[string]error{}
	var mu sync.Mutex
	var g errgroup.Group
	g.Go(func() error { agentErr = b.api.callAs(v, "GET", agentPath, nil, nil, d.Agent); return nil })
	g.Go(func() error { _ = b.api.callAs(v, "GET", "/api/cli-auth/me", nil, nil, &me); return nil })
	part := func(name, path string, q url.Values, out any) {
		g.Go(func() error {
			if err := b.api.callAs(v, "GET", path, q, nil, out); err != nil {
				mu.Lock()
				parts[name] = err
				mu.Unlock()
			}
			return nil
		})
	}
	part("runs", companyAPI(companyID)+"/heartbeat-runs", url.Values{"agentId": {agentID}, "limit": {strconv.Itoa(agentRunsPage + 1)},
		"offset": {strconv.Itoa(off)}}, &d.Runs)
	part("API keys", agentPath+"/keys", nil, &d.Keys)
	part("agents", companyAPI(companyID)+"/agents", nil, &d.Agents)
	_ = g.Wait()
	if agentErr != nil {
		return nil, agentErr
	}
	if d.Agent.CompanyID != companyID {
		return nil, &apiError{Status: http.StatusNotFound, Message: "Agent not found"}
	}
	var names []string
	for name, err := range parts {
		var ae *apiError
		if errors.As(err, &ae) && (ae.Status == http.StatusForbidden || ae.Status == http.StatusBadRequest) {
			names = append(names, fmt.Sprintf("The %s of this agent are not available to you: %s.", name, ae.Message))
			continue
		}
		return nil, err
	}
	sort.Strings(names)
	d.Unavailable = names
	d.CanWrite = mayWrite(&me, companyID)
	d.AgentName = agentFullNames(d.Agents)
	d.AgentName[d.Agent.ID] = d.Agent.Name
	base := "/c/" + companyID + "/agents/" + agentID
	if len(d.Runs) > agentRunsPage {
		d.Runs = d.Runs[:agentRunsPage]
		d.NextRuns = base + "?runsOffset=" + strconv.Itoa(off+agentRunsPage) + "#runs-h"
	}
	if off > 0 {
		d.PrevRuns = base + "?runsOffset=" + strconv.Itoa(max(0, off-agentRunsPage)) + "#runs-h"
	}
	d.Config = b.loadConfigForm(v, d.Agent)
	return d, nil
}

func agentFullNames(agents []agentFull) map[string]string {
	m := make(map[string]string, len(agents))
	for _, a := range agents {
		m[a.ID] = a.Name
	}
	return m
}

func (b *Board) agentDetail(c *fiber.Ctx) error {
	l, done, err := b.page(c, "Agent", "agents", c.Params("companyId"))
	if done {
		return err
	}
	d, err := b.loadAgent(c)
	if err != nil {
		return b.fail(c, l, err)
	}
	l.Title = d.Agent.Name
	return render(c, http.StatusOK, agentPage(l, d))
}

// agentRefused shows the agent's page with a write's refusal above it, with the API's status.
func (b *Board) agentRefused(c *fiber.Ctx, writeErr error, before func(*agentData)) error {
	var ae *apiError
	l, done, err := b.page(c, "Agent", "agents", c.Params("companyId"))
	if done {
		return err
	}
	if !errors.As(writeErr, &ae) {
		return b.fail(c, l, writeErr)
	}
	if ae.Status == http.StatusUnauthorized {
		return b.toSignIn(c)
	}
	d, err := b.loadAgent(c)
	if err != nil {
		return b.fail(c, l, err)
	}
	d.Error = refusalText(&apiError{Status: ae.Status, Message: apiText(ae)})
	if before != nil {
		before(d)
	}
	l.Title = d.Agent.Name
	return render(c, ae.Status, agentPage(l, d))
}

// agentAction runs one of the agent page's forms: pause, resume, wake, config,
// permissions, budget. Success goes back to the page (or, for a wake that queued a run, to
// the run); a refusal is shown on the page.
func (b *Board) agentAction(c *fiber.Ctx) error {
	companyID, agentID := c.Params("companyId"), c.Params("agentId")
	agentPath := "/api/agents/" + url.PathEscape(agentID)
	back := "/c/" + companyID + "/agents/" + agentID
	var err error
	switch c.Params("action") {
	case "pause", "resume":
		err = b.api.call(c, "POST", agentPath+"/"+c.Params("action"), nil, nil, nil)
	case "wake":
		var out struct {
			ID      string `json:"id"`
			Status  string `json:"status"`
			Reason  string `json:"reason"`
			Message string `json:"message"`
		}
		if err = b.api.call(c, "POST", agentPath+"/heartbeat/invoke", nil, map[string]any{}, &out); err == nil {
			if out.Status == "skipped" || out.ID == "" {
				return b.agentRefused(c, &apiError{Status: http.StatusConflict, Message: "the wake was skipped: " + orText(out.Message, out.Reason)}, nil)
			}
			return c.Redirect("/c/"+companyID+"/runs/"+out.ID, http.StatusSeeOther)
		}
	case "permissions":
		// Only what the visitor changed is sent (a grant the page shows unchecked, such as a
		// CEO's explicit tasks:assign, is left alone).
		body := map[string]any{}
		for _, k := range []string{"canCreateAgents", "canAssignTasks"} {
			if now := c.FormValue(k) == "on"; now != (c.FormValue(k+"Was") == "on") {
				body[k] = now
			}
		}
		if len(body) > 0 {
			err = b.api.call(c, "PATCH", agentPath+"/permissions", nil, body, nil)
		}
	case "budget":
		cents, perr := dollarsToCents(c.FormValue("budgetMonthlyUsd"))
		if perr != nil {
			return b.agentRefused(c, &apiError{Status: http.StatusBadRequest, Message: "budgetMonthlyUsd " + perr.Error()}, nil)
		}
		err = b.api.call(c, "PATCH", agentPath+"/budgets", nil, map[string]any{"budgetMonthlyCents": cents}, nil)
	case "config":
		return b.saveAgentConfig(c)
	default:
		return b.fail(c, nil, &apiError{Status: http.StatusNotFound, Message: "Not found"})
	}
	if err != nil {
		return b.agentRefused(c, err, nil)
	}
	ok := map[string]string{"pause": "paused", "resume": "resumed"}[c.Params("action")]
	if ok == "" {
		ok = c.Params("action")
	}
	return c.Redirect(back+"?ok="+ok, http.StatusSeeOther)
}

func orText(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return "no reason given"
}

// dollarsToCents reads a non-negative amount of dollars with at most two decimals.
func dollarsToCents(s string) (int64, error) {
	s = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(s), "$"))
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) || f > 1e13 {
		return 0, errors.New("must be a non-negative amount of dollars")
	}
	cents := math.Round(f * 100)
	if math.Abs(cents-f*100) > 1e-6 {
		return 0, errors.New("must have at most two decimals")
	}
	return int64(cents), nil
}

// createAgentKey mints a key and shows its token once, on the page it answers.
func (b *Board) createAgentKey(c *fiber.Ctx) error {
	var key agentKeyCreated
	body := map[string]any{"name": strings.TrimSpace(c.FormValue("name"))}
	if err := b.api.call(c, "POST", "/api/agents/"+url.PathEscape(c.Params("agentId"))+"/keys", nil, body, &key); err != nil {
		return b.agentRefused(c, err, nil)
	}
	l, done, err := b.page(c, "Agent", "agents", c.Params("companyId"))
	if done {
		return err
	}
	d, err := b.loadAgent(c)
	if err != nil {
		return b.fail(c, l, err)
	}
	d.NewKey = &key
	l.Title = d.Agent.Name
	return render(c, http.StatusCreated, agentPage(l, d))
}

func (b *Board) revokeAgentKey(c *fiber.Ctx) error {
	path := "/api/agents/" + url.PathEscape(c.Params("agentId")) + "/keys/" + url.PathEscape(c.Params("keyId"))
	if err := b.api.call(c, "DELETE", path, nil, nil, nil); err != nil {
		return b.agentRefused(c, err, nil)
	}
	return c.Redirect("/c/"+c.Params("companyId")+"/agents/"+c.Params("agentId")+"?ok=revoked", http.StatusSeeOther)
}

// configForm is the agent's adapter config form: generated from the adapter type's config
// schema (GET /api/adapters/{type}/config-schema) when it has one with properties,
// otherwise the config as a JSON object.
type configForm struct {
	// Schema is the adapter config schema; nil when the type has none (the JSON form).
	Schema *formSchema
	// Form is the generated form (with per-field errors after a refused post).
	Form *schemaForm
	// JSON is the adapter config as indented JSON (the fallback form's text).
	JSON string
	// Current is the agent's config as it is.
	Current map[string]any
	// Redacted is true when the API withheld the config from the visitor.
	Redacted bool
}

// configPrefix prefixes the generated config form's field names and ids.
const configPrefix = "cfg"

// loadConfigForm prepares the adapter config form of an agent.
func (b *Board) loadConfigForm(v *visitor, a *agentFull) *configForm {
	f := &configForm{Redacted: a.ConfigRedacted}
	if len(a.AdapterConfig) > 0 {
		_ = json.Unmarshal(a.AdapterConfig, &f.Current)
	}
	if f.Current == nil {
		f.Current = map[string]any{}
	}
	if out, err := json.MarshalIndent(f.Current, "", "  "); err == nil {
		f.JSON = string(out)
	}
	var sch struct {
		AdapterConfigSchema json.RawMessage `json:"adapterConfigSchema"`
	}
	if b.api.callAs(v, "GET", "/api/adapters/"+url.PathEscape(a.AdapterType)+"/config-schema", nil, nil, &sch) != nil {
		return f
	}
	if s, err := parseFormSchema(sch.AdapterConfigSchema); err == nil && len(s.Properties) > 0 {
		f.Schema = s
		f.Form = newSchemaForm(s, configPrefix, f.Current, nil, nil)
	}
	return f
}

// postedForm is the request's urlencoded form.
func postedForm(c *fiber.Ctx) url.Values {
	form := url.Values{}
	c.Request().PostArgs().VisitAll(func(k, v []byte) { form.Add(string(k), string(v)) })
	return form
}

// saveAgentConfig replaces the agent's adapter config through PATCH /api/agents/{id}: from
// the generated form (keys the schema does not name are kept as they are; a field left
// empty is removed) or from the JSON text. A field the form refuses is shown beside it,
// the API's refusal above the form.
func (b *Board) saveAgentConfig(c *fiber.Ctx) error {
	var cfg map[string]any
	keep := func(*agentData) {}
	if c.FormValue("_mode") == "schema" {
		var ag agentFull
		if err := b.api.call(c, "GET", "/api/agents/"+url.PathEscape(c.Params("agentId")), nil, nil, &ag); err != nil {
			return b.agentRefused(c, err, nil)
		}
		cf := b.loadConfigForm(visitorOf(c), &ag)
		if cf.Schema == nil {
			return b.agentRefused(c, &apiError{Status: http.StatusConflict, Message: "the adapter's config schema changed; reload the page"}, nil)
		}
		posted := postedForm(c)
		parsed, errs := parseSchemaForm(cf.Schema, configPrefix, posted, cf.Current)
		keep = func(d *agentData) {
			if d.Config.Schema != nil {
				d.Config.Form = newSchemaForm(d.Config.Schema, configPrefix, d.Config.Current, posted, errs)
			}
		}
		if len(errs) > 0 {
			return b.agentRefused(c, &apiError{Status: http.StatusBadRequest, Message: "some configuration fields need attention"}, keep)
		}
		cfg = make(map[string]any, len(cf.Current))
		for k, v := range cf.Current {
			if _, named := cf.Schema.Properties[k]; !named {
				cfg[k] = v
			}
		}
		for k, v := range parsed {
			cfg[k] = v
		}
	} else {
		raw := c.FormValue("adapterConfig")
		keep = func(d *agentData) { d.Config.JSON = raw }
		if err := json.Unmarshal([]byte(raw), &cfg); err != nil || cfg == nil {
			return b.agentRefused(c, &apiError{Status: http.StatusBadRequest, Message: "adapterConfig must be a JSON object"}, keep)
		}
	}
	body := map[string]any{"adapterConfig": cfg, "replaceAdapterConfig": true}
	if err := b.api.call(c, "PATCH", "/api/agents/"+url.PathEscape(c.Params("agentId")), nil, body, nil); err != nil {
		var ae *apiError
		if errors.As(err, &ae) && c.FormValue("_mode") == "schema" {
			// The adapter's own validation, beside the fields it names.
			posted := postedForm(c)
			keep = func(d *agentData) {
				if d.Config.Schema == nil {
					return
				}
				names := map[string]bool{}
				var walk func([]*formField)
				walk = func(fs []*formField) {
					for _, f := range fs {
						names[f.Name] = true
						walk(f.Children)
					}
				}
				walk(d.Config.Form.Fields)
				errs := map[string]string{}
				for _, fe := range ae.Details {
					p, ok := strings.CutPrefix(fe.Path, "adapterConfig.")
					// A message about a part of a field (env.KEY) goes beside the field.
					for name := configPrefix + "." + p; ok && name != configPrefix; name = name[:max(strings.LastIndex(name, "."), 0)] {
						if names[name] {
							errs[name] = strings.TrimSpace(errs[name] + " " + fe.Message)
							break
						}
					}
				}
				d.Config.Form = newSchemaForm(d.Config.Schema, configPrefix, d.Config.Current, posted, errs)
			}
		}
		return b.agentRefused(c, err, keep)
	}
	return c.Redirect("/c/"+c.Params("companyId")+"/agents/"+c.Params("agentId")+"?ok=config", http.StatusSeeOther)
}

// runStatuses are the heartbeat run statuses the runs filter offers.
var runStatuses = []string{"queued", "scheduled_retry", "running", "succeeded", "failed", "cancelled", "timed_out"}

// runActive says whether a run may still change (its log may grow).
func runActive(status string) bool {
	return status == "queued" || status == "running" || status == "scheduled_retry"
}

// runsData is the company's runs list.
type runsData struct {
	CompanyID string
	AgentID   string
	Status    string
	Live      []runFull
	Runs      []runFull
	Agents    []agentFull
	AgentName map[string]string
	PrevURL   string
	NextURL   string
	Offset    int
	Error     string
	// SelfURL is this list's URL, which the list re-fetches when a run event arrives.
	SelfURL string
}

// runsList is the company's runs, or (for htmx) the list part alone.
func (b *Board) runsList(c *fiber.Ctx) error {
	id := c.Params("companyId")
	var l *layoutData
	fragment := isFragment(c)
	if !fragment {
		var done bool
		var err error
		if l, done, err = b.page(c, "Runs", "runs", id); done {
			return err
		}
	}
	d := &runsData{CompanyID: id, AgentID: c.Query("agentId"), Status: c.Query("status"), Offset: max(0, c.QueryInt("offset", 0))}
	v := visitorOf(c)
	q := url.Values{"limit": {strconv.Itoa(agentRunsPage + 1)}, "offset": {strconv.Itoa(d.Offset)}}
	if d.AgentID != "" {
		q.Set("agentId", d.AgentID)
	}
	if d.Status != "" {
		q.Set("status", d.Status)
	}
	var listErr error
	var g errgroup.Group
	g.Go(func() error {
		listErr = b.api.callAs(v, "GET", companyAPI(id)+"/heartbeat-runs", q, nil, &d.Runs)
		return nil
	})
	g.Go(func() error { _ = b.api.callAs(v, "GET", companyAPI(id)+"/agents", nil, nil, &d.Agents); return nil })
	if d.Status == "" && d.Offset == 0 {
		g.Go(func() error { _ = b.api.callAs(v, "GET", companyAPI(id)+"/live-runs", nil, nil, &d.Live); return nil })
	}
	_ = g.Wait()
	status := http.StatusOK
	if listErr != nil {
		var ae *apiError
		if !errors.As(listErr, &ae) {
			return b.fail(c, l, listErr)
		}
		if ae.Status == http.StatusUnauthorized {
			return b.toSignIn(c)
		}
		status, d.Error = ae.Status, "The runs could not be listed: "+apiText(ae)
		if ae.Status == http.StatusForbidden {
			d.Error = "You do not have access to this company's runs: " + ae.Message + "."
		}
	}
	// Live runs are on top; the list below leaves them out.
	live := map[string]bool{}
	d.Live = slices.DeleteFunc(d.Live, func(r runFull) bool { return d.AgentID != "" && r.AgentID != d.AgentID })
	for _, r := range d.Live {
		live[r.ID] = true
	}
	base := url.Values{}
	if d.AgentID != "" {
		base.Set("agentId", d.AgentID)
	}
	if d.Status != "" {
		base.Set("status", d.Status)
	}
	pageURL := func(off int) string {
		q := url.Values{}
		for k, v := range base {
			q[k] = v
		}
		if off > 0 {
			q.Set("offset", strconv.Itoa(off))
		}
		if len(q) == 0 {
			return "/c/" + id + "/runs"
		}
		return "/c/" + id + "/runs?" + q.Encode()
	}
	if len(d.Runs) > agentRunsPage {
		d.Runs = d.Runs[:agentRunsPage]
		d.NextURL = pageURL(d.Offset + agentRunsPage)
	}
	if d.Offset > 0 {
		d.PrevURL = pageURL(max(0, d.Offset-agentRunsPage))
	}
	d.Runs = slices.DeleteFunc(d.Runs, func(r runFull) bool { return live[r.ID] })
	d.AgentName = agentFullNames(d.Agents)
	d.SelfURL = pageURL(d.Offset)
	if fragment {
		return render(c, status, runsBody(d))
	}
	return render(c, status, runsPage(l, d))
}

// logTail is how much of a long log the run page shows (its end).
const logTail = 256 << 10

// runData is a run's page.
type runData struct {
	CompanyID string
	CSRF      string
	Run       *runFull
	AgentName string
	IssueID   string
	Usage     runUsage
	Events    []runEvent
	Log       string
	// LogStart is the offset the shown log starts at (0 unless the log is long).
	LogStart int
	// Offset is where the log read next continues.
	Offset   int
	CanWrite bool
	Error    string
}

// loadRun reads the run, its agent, its events and its log from the start.
func (b *Board) loadRun(c *fiber.Ctx) (*runData, error) {
	companyID, runID := c.Params("companyId"), c.Params("runId")
	d := &runData{CompanyID: companyID, CSRF: csrfOf(c), Run: &runFull{}}
	v := visitorOf(c)
	runPath := "/api/heartbeat-runs/" + url.PathEscape(runID)
	if err := b.api.callAs(v, "GET", runPath, nil, nil, d.Run); err != nil {
		return nil, err
	}
	if d.Run.CompanyID != companyID {
		return nil, &apiError{Status: http.StatusNotFound, Message: "Heartbeat run not found"}
	}
	var log rawAnswer
	var ag agentFull
	var me boardMe
	var g errgroup.Group
	g.Go(func() error {
		_ = b.api.callAs(v, "GET", runPath+"/events", url.Values{"limit": {"500"}}, nil, &d.Events)
		return nil
	})
	// A long log is shown from its last logTail bytes.
	start := max(0, d.Run.LogBytes-logTail)
	d.LogStart = int(start)
	g.Go(func() error {
		return b.api.callAs(v, "GET", runPath+"/log", url.Values{"offset": {strconv.FormatInt(start, 10)}}, nil, &log)
	})
	g.Go(func() error {
		_ = b.api.callAs(v, "GET", "/api/agents/"+url.PathEscape(d.Run.AgentID), nil, nil, &ag)
		return nil
	})
	g.Go(func() error { _ = b.api.callAs(v, "GET", "/api/cli-auth/me", nil, nil, &me); return nil })
	if err := g.Wait(); err != nil {
		return nil, err
	}
	d.Log, d.Offset = string(log.Body), d.LogStart+len(log.Body)
	d.AgentName = orText(ag.Name, shortID(d.Run.AgentID))
	d.CanWrite = mayWrite(&me, companyID)
	if s, ok := d.Run.ContextSnapshot["issueId"].(string); ok {
		d.IssueID = s
	}
	_ = json.Unmarshal(d.Run.UsageJSON, &d.Usage)
	return d, nil
}

func (b *Board) runPage(c *fiber.Ctx) error {
	l, done, err := b.page(c, "Run", "runs", c.Params("companyId"))
	if done {
		return err
	}
	d, err := b.loadRun(c)
	if err != nil {
		return b.fail(c, l, err)
	}
	l.Title = "Run " + shortID(d.Run.ID)
	return render(c, http.StatusOK, runPage(l, d))
}

// runLogFragment answers the run page's poll: the log's bytes after ?offset= (appended to
// the log out of band), the next poller while the run is active, and the run's summary
// again when its status differs from ?status= (so a finished run shows without a reload).
// The run is read before the log, so the bytes of a run read as finished are all there.
func (b *Board) runLogFragment(c *fiber.Ctx) error {
	companyID, runID := c.Params("companyId"), c.Params("runId")
	offset := c.QueryInt("offset", 0)
	if offset < 0 {
		offset = 0
	}
	v := visitorOf(c)
	runPath := "/api/heartbeat-runs/" + url.PathEscape(runID)
	r := &runFull{}
	if err := b.api.callAs(v, "GET", runPath, nil, nil, r); err != nil {
		return b.fail(c, nil, err)
	}
	if r.CompanyID != companyID {
		return b.fail(c, nil, &apiError{Status: http.StatusNotFound, Message: "Heartbeat run not found"})
	}
	var log rawAnswer
	if err := b.api.callAs(v, "GET", runPath+"/log", url.Values{"offset": {strconv.Itoa(offset)}}, nil, &log); err != nil {
		return b.fail(c, nil, err)
	}
	d := &runData{CompanyID: companyID, CSRF: csrfOf(c), Run: r, Log: string(log.Body), Offset: offset + len(log.Body)}
	if r.Status == c.Query("status") {
		return render(c, http.StatusOK, runLogUpdate(d, nil))
	}
	full, err := b.loadRun(c)
	if err != nil {
		return b.fail(c, nil, err)
	}
	// The summary is the fresh one; the log continues from this poll's bytes.
	full.Log, full.Offset = d.Log, d.Offset
	return render(c, http.StatusOK, runLogUpdate(full, full))
}

func (b *Board) cancelRun(c *fiber.Ctx) error {
	back := "/c/" + c.Params("companyId") + "/runs/" + c.Params("runId")
	err := b.api.call(c, "POST", "/api/heartbeat-runs/"+url.PathEscape(c.Params("runId"))+"/cancel", nil, nil, nil)
	if err == nil {
		return c.Redirect(back, http.StatusSeeOther)
	}
	l, done, ferr := b.page(c, "Run", "runs", c.Params("companyId"))
	if done {
		return ferr
	}
	var ae *apiError
	if !errors.As(err, &ae) {
		return b.fail(c, l, err)
	}
	if ae.Status == http.StatusUnauthorized {
		return b.toSignIn(c)
	}
	d, lerr := b.loadRun(c)
	if lerr != nil {
		return b.fail(c, l, lerr)
	}
	d.Error = refusalText(ae)
	return render(c, ae.Status, runPage(l, d))
}

func optText(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func yesNo(v bool) string {
	if v {
		return "yes"
	}
	return "no"
}

// cents shows an amount of cents as dollars.
func cents(n int64) string {
	sign := ""
	if n < 0 {
		sign, n = "-", -n
	}
	return fmt.Sprintf("%s$%d.%02d", sign, n/100, n%100)
}

func budgetText(n int64) string {
	if n <= 0 {
		return "no monthly budget"
	}
	return cents(n) + " a month"
}

// centsInput is an amount of cents as the budget field's dollars.
func centsInput(n int64) string { return fmt.Sprintf("%d.%02d", n/100, n%100) }

func timeText(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "—"
	}
	return t.UTC().Format("Jan 2 15:04:05")
}

// runDuration is how long a run ran (so far, while it runs).
func runDuration(r *runFull) string {
	if r.StartedAt == nil {
		return "—"
	}
	end := time.Now()
	if r.FinishedAt != nil {
		end = *r.FinishedAt
	}
	return end.Sub(*r.StartedAt).Round(100 * time.Millisecond).String()
}

func runTokensText(u runUsage) string {
	if u.InputTokens == nil && u.OutputTokens == nil {
		return "—"
	}
	n := func(p *float64) int64 {
		if p == nil {
			return 0
		}
		return int64(*p)
	}
	s := fmt.Sprintf("%d in, %d out", n(u.InputTokens), n(u.OutputTokens))
	if c := n(u.CachedInputTokens); c > 0 {
		s += fmt.Sprintf(" (%d cached)", c)
	}
	return s
}

func runCostText(u runUsage) string {
	switch {
	case u.CacheAdjustedCostUsd != nil:
		return fmt.Sprintf("$%.4f", *u.CacheAdjustedCostUsd)
	case u.CostUsd != nil:
		return fmt.Sprintf("$%.4f", *u.CostUsd)
	case u.CostStatus != "":
		return u.CostStatus
	}
	return "—"
}

// clip shortens s to at most n runes.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

func onOff(v bool) string {
	if v {
		return "on"
	}
	return ""
}

// assignGranted says whether the agent holds an explicit tasks:assign grant (as far as its
// access block tells: a CEO's shows its role instead).
func assignGranted(a *agentFull) bool {
	return a.Access != nil && a.Access.CanAssignTasks && a.Access.TaskAssignSource == "explicit_grant"
}
