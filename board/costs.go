package board

import (
	"errors"
	"fmt"
	"math"
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

// mountCosts adds the costs page: spend over a date range (summary, per day as a chart, by
// agent, model, provider and project), budgets (company and agents: view and set) and
// budget incidents (list, resolve).
func (b *Board) mountCosts(g fiber.Router) {
	g.Get("/c/:companyId/costs", b.costs)
	g.Post("/c/:companyId/costs/budget", b.setCompanyBudget)
	g.Post("/c/:companyId/costs/agent-budget", b.setAgentBudget)
	g.Post("/c/:companyId/costs/incidents/:incidentId/resolve", b.resolveIncident)
}

// costRangeDays bound the costs page's range (the API's by-day read allows 366 days).
const (
	costRangeDefault = 30
	costRangeMax     = 366
)

// costsData is the costs page.
type costsData struct {
	CompanyID  string
	CSRF       string
	From, To   string
	Summary    costSummary
	Chart      *chart
	ByAgent    []spendBreakdownRow
	ByModel    []spendBreakdownRow
	ByProvider []spendBreakdownRow
	ByProject  []spendBreakdownRow
	Budgets    budgetOverview
	Incidents  []budgetIncident
	Agents     []budgetAgent
	// Unavailable names parts the API refused to the actor.
	Unavailable []string
}

// costRange reads the page's from and to days (YYYY-MM-DD, UTC, both inclusive): the last
// 30 days by default, at most 366.
func costRange(c *fiber.Ctx, now time.Time) (from, to time.Time, err error) {
	to = now.UTC().Truncate(24 * time.Hour)
	if v := strings.TrimSpace(c.Query("to")); v != "" {
		if to, err = time.Parse(time.DateOnly, v); err != nil {
			return from, to, fmt.Errorf("the end date %q is not a date (YYYY-MM-DD)", v)
		}
	}
	from = to.AddDate(0, 0, -(costRangeDefault - 1))
	if v := strings.TrimSpace(c.Query("from")); v != "" {
		if from, err = time.Parse(time.DateOnly, v); err != nil {
			return from, to, fmt.Errorf("the start date %q is not a date (YYYY-MM-DD)", v)
		}
	}
	switch {
	case from.After(to):
		return from, to, errors.New("the start date is after the end date")
	case to.Sub(from) >= costRangeMax*24*time.Hour:
		return from, to, fmt.Errorf("the range is longer than %d days", costRangeMax)
	}
	return from, to, nil
}

// costs is the costs page.
func (b *Board) costs(c *fiber.Ctx) error {
	return b.costsPageWith(c, http.StatusOK, "", "")
}

// costsPageWith renders the costs page with a notice or an error above it.
func (b *Board) costsPageWith(c *fiber.Ctx, status int, notice, errMsg string) error {
	id := c.Params("companyId")
	l, done, err := b.page(c, "Costs", "costs", id)
	if done {
		return err
	}
	from, to, rerr := costRange(c, time.Now())
	if rerr != nil {
		l.Error = "The range was not understood: " + rerr.Error() + "."
		status = http.StatusBadRequest
		to = time.Now().UTC().Truncate(24 * time.Hour)
		from = to.AddDate(0, 0, -(costRangeDefault - 1))
	}
	d, err := b.loadCosts(c, id, from, to)
	if err != nil {
		return b.fail(c, l, err)
	}
	if errMsg != "" {
		l.Error = errMsg
	}
	l.Notice = notice
	return render(c, status, costsPage(l, d))
}

// loadCosts reads everything the costs page shows, in parallel. The spend summary must
// load (it carries the company's access refusal); other parts the API refuses are named.
func (b *Board) loadCosts(c *fiber.Ctx, companyID string, from, to time.Time) (*costsData, error) {
	d := &costsData{CompanyID: companyID, CSRF: csrfOf(c), From: from.Format(time.DateOnly), To: to.Format(time.DateOnly)}
	v := visitorOf(c)
	base := "/api/companies/" + url.PathEscape(companyID)
	// The spend reads take date-times; to is the last instant of the last day.
	rng := url.Values{"from": {from.Format(time.RFC3339)}, "to": {to.Add(24*time.Hour - time.Microsecond).Format(time.RFC3339Nano)}}
	var byDay []daySpend
	var byProviderModel []spendBreakdownRow
	var summaryErr error
	var mu sync.Mutex
	var g errgroup.Group
	part := func(name, path string, q url.Values, out any) {
		g.Go(func() error {
			if err := b.api.callAs(v, "GET", path, q, nil, out); err != nil {
				mu.Lock()
				d.Unavailable = append(d.Unavailable, partRefusal(name, err))
				mu.Unlock()
			}
			return nil
		})
	}
	g.Go(func() error {
		summaryErr = b.api.callAs(v, "GET", base+"/costs/summary", rng, nil, &d.Summary)
		return nil
	})
	part("spend per day", base+"/costs/by-day", url.Values{"from": {d.From}, "to": {d.To}}, &byDay)
	part("spend by agent", base+"/costs/by-agent", rng, &d.ByAgent)
	part("spend by provider", base+"/costs/by-provider", rng, &byProviderModel)
	part("spend by project", base+"/costs/by-project", rng, &d.ByProject)
	part("budgets", base+"/budgets/overview", nil, &d.Budgets)
	part("budget incidents", base+"/budget-incidents", url.Values{"limit": {"50"}}, &d.Incidents)
	part("agents", base+"/agents", nil, &d.Agents)
	_ = g.Wait()
	if summaryErr != nil {
		return nil, summaryErr
	}
	sort.Strings(d.Unavailable)
	d.ByProvider, d.ByModel = providerAndModelRows(byProviderModel)
	days := make([]string, 0, int(to.Sub(from)/(24*time.Hour))+1)
	for t := from; !t.After(to); t = t.AddDate(0, 0, 1) {
		days = append(days, t.Format(time.DateOnly))
	}
	d.Chart = spendPerDayChart("costs-chart", days, byDay)
	return d, nil
}

// partRefusal says why a part of a page is missing.
func partRefusal(name string, err error) string {
	var ae *apiError
	if errors.As(err, &ae) {
		return fmt.Sprintf("The %s are not available to you: %s.", name, ae.Message)
	}
	return fmt.Sprintf("The %s could not be read: %s.", name, err.Error())
}

// providerAndModelRows sums the by-provider rows (one per provider, biller, billing type
// and model) per provider and per model, largest spend first.
func providerAndModelRows(rows []spendBreakdownRow) (byProvider, byModel []spendBreakdownRow) {
	sum := func(key func(r spendBreakdownRow) spendBreakdownRow) []spendBreakdownRow {
		idx := map[spendBreakdownRow]int{}
		var out []spendBreakdownRow
		for _, r := range rows {
			k := key(r)
			i, ok := idx[k]
			if !ok {
				i = len(out)
				idx[k] = i
				out = append(out, k)
			}
			out[i].CostCents += r.CostCents
			out[i].InputTokens += r.InputTokens
			out[i].CachedInputTokens += r.CachedInputTokens
			out[i].OutputTokens += r.OutputTokens
		}
		sort.SliceStable(out, func(a, b int) bool { return out[a].CostCents > out[b].CostCents })
		return out
	}
	byProvider = sum(func(r spendBreakdownRow) spendBreakdownRow {
		return spendBreakdownRow{Provider: r.Provider, Biller: r.Biller}
	})
	byModel = sum(func(r spendBreakdownRow) spendBreakdownRow {
		return spendBreakdownRow{Provider: r.Provider, Model: r.Model}
	})
	return byProvider, byModel
}

// parseDollars reads an amount in dollars (e.g. 25 or 12.50) as cents.
func parseDollars(s string) (int64, error) {
	s = strings.TrimPrefix(strings.TrimSpace(s), "$")
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 || f > 1e13 {
		return 0, fmt.Errorf("the amount %q is not a number of dollars (for example 25 or 12.50)", s)
	}
	return int64(math.Round(f * 100)), nil
}

// costsWrite answers a costs form: back to the page (with its range) when the API took the
// change, else the page with the refusal above it.
func (b *Board) costsWrite(c *fiber.Ctx, writeErr error, done string) error {
	if writeErr == nil {
		back := "/c/" + c.Params("companyId") + "/costs"
		if q := c.Context().QueryArgs().String(); q != "" {
			back += "?" + q
		}
		return c.Redirect(back, http.StatusSeeOther)
	}
	var ae *apiError
	if !errors.As(writeErr, &ae) {
		return b.fail(c, nil, writeErr)
	}
	return b.costsPageWith(c, ae.Status, "", refusalWithDetails(ae))
}

// setCompanyBudget sets the company's monthly budget (PATCH /api/companies/{id}/budgets).
func (b *Board) setCompanyBudget(c *fiber.Ctx) error {
	cents, err := parseDollars(c.FormValue("amount"))
	if err != nil {
		return b.costsPageWith(c, http.StatusBadRequest, "", "The budget was not set: "+err.Error()+".")
	}
	return b.costsWrite(c, b.api.call(c, "PATCH", "/api/companies/"+url.PathEscape(c.Params("companyId"))+"/budgets", nil,
		map[string]any{"budgetMonthlyCents": cents}, nil), "")
}

// setAgentBudget sets an agent's monthly budget (PATCH /api/agents/{id}/budgets).
func (b *Board) setAgentBudget(c *fiber.Ctx) error {
	agentID := strings.TrimSpace(c.FormValue("agentId"))
	cents, err := parseDollars(c.FormValue("amount"))
	switch {
	case agentID == "":
		return b.costsPageWith(c, http.StatusBadRequest, "", "The budget was not set: choose an agent.")
	case err != nil:
		return b.costsPageWith(c, http.StatusBadRequest, "", "The budget was not set: "+err.Error()+".")
	}
	return b.costsWrite(c, b.api.call(c, "PATCH", "/api/agents/"+url.PathEscape(agentID)+"/budgets", nil,
		map[string]any{"budgetMonthlyCents": cents}, nil), "")
}

// resolveIncident resolves a budget incident: keep_paused, or raise_budget_and_resume with
// a new amount.
func (b *Board) resolveIncident(c *fiber.Ctx) error {
	body := map[string]any{"action": c.FormValue("action")}
	if v := strings.TrimSpace(c.FormValue("amount")); v != "" {
		cents, err := parseDollars(v)
		if err != nil {
			return b.costsPageWith(c, http.StatusBadRequest, "", "The incident was not resolved: "+err.Error()+".")
		}
		body["amount"] = cents
	}
	if v := strings.TrimSpace(c.FormValue("decisionNote")); v != "" {
		body["decisionNote"] = v
	}
	return b.costsWrite(c, b.api.call(c, "POST", "/api/companies/"+url.PathEscape(c.Params("companyId"))+"/budget-incidents/"+
		url.PathEscape(c.Params("incidentId"))+"/resolve", nil, body, nil), "")
}

// spendPerDayChart draws the billed spend of each of days (YYYY-MM-DD, oldest first) from
// the days of a costs/by-day read; a day the read does not list counts as no spend. Long
// ranges label about ten days.
func spendPerDayChart(id string, days []string, byDay []daySpend) *chart {
	cents := make(map[string]int64, len(byDay))
	for _, d := range byDay {
		cents[d.Date] = d.CostCents
	}
	values := make([]float64, len(days))
	for i, d := range days {
		values[i] = float64(cents[d])
	}
	ch := newChart(id, "Spend per day", days, []chartSeries{{Name: "spend", Class: "bar-spend", Values: values}}, formatCents)
	if step := (len(days) + 9) / 10; step > 2 {
		for i := range ch.Bars {
			ch.Bars[i].ShowDay = i%step == 0
		}
	}
	return ch
}

// Text helpers of the costs page.

func centsText(n int64) string { return formatCents(float64(n)) }

func dollarsValue(n int64) string { return strconv.FormatFloat(float64(n)/100, 'f', 2, 64) }

func tokensText(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func orDash(p *string, fallback string) string {
	if p != nil && *p != "" {
		return *p
	}
	if fallback != "" {
		return fallback
	}
	return "—"
}

func scopeLabel(scopeType string, name *string, id string) string {
	return scopeType + " " + orDash(name, shortID(id))
}
