package costs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keelhq/keel/sdk"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

// The request helpers are the SDK's; these names keep the area files short.
var (
	notFound             = sdk.NotFound
	conflict             = sdk.Conflict
	forbidden            = sdk.Forbidden
	validationError      = sdk.ValidationError
	invalid              = sdk.Invalid
	decodeBody           = sdk.DecodeJSON
	isUUID               = sdk.IsUUID
	requireCompanyAccess = sdk.RequireCompanyAccess
)

type validationDetail = sdk.ValidationDetail

// problems collects validation details; err is nil when there are none.
type problems []validationDetail

func (p *problems) add(path, msg string) { *p = append(*p, validationDetail{Path: path, Message: msg}) }

func (p problems) err() error {
	if len(p) == 0 {
		return nil
	}
	return validationError(p...)
}

// writeErr writes err; anything that is not an *sdk.Error is logged and answered with 500.
func (c *Costs) writeErr(rw http.ResponseWriter, err error) {
	var e *sdk.Error
	if errors.As(err, &e) {
		sdk.WriteErr(rw, e)
		return
	}
	c.log.Error("request failed", "error", err)
	sdk.WriteErr(rw, err)
}

// activity appends an activity entry attributed to actor (the extension when nil); a failure
// is logged, not returned, because the change it records has already happened.
func (c *Costs) activity(ctx context.Context, actor *sdk.Actor, companyID, action, entityType, entityID string, details any) {
	if actor != nil && (actor.Type == "" || actor.Type == "none" || actor.Type == "system") {
		actor = nil
	}
	err := c.host.LogActivity(ctx, &sdk.ActivityEntry{
		CompanyID: companyID, Actor: actor, Action: action, EntityType: entityType, EntityID: entityID, Details: details,
	})
	if err != nil {
		c.log.Warn("error appending activity", "action", action, "error", err)
	}
}

// callActor is the actor a provided method acts for: the call's, or the system actor.
func callActor(call *sdk.MethodCall) *sdk.Actor {
	if a := call.Actor; a != nil && a.Type != "" && a.Type != "none" {
		return a
	}
	return sdk.SystemActor()
}

// callCompany returns the call's company, or the input's when the call carries none.
func callCompany(call *sdk.MethodCall, input string) (string, error) {
	id := call.CompanyID
	if id == "" {
		id = input
	}
	if !isUUID(id) {
		return "", invalid("companyId", "is required")
	}
	if input != "" && !strings.EqualFold(input, id) {
		return "", forbidden("You do not have access to this company")
	}
	return id, nil
}

// cleanText trims s and checks it is valid UTF-8 without NUL bytes and at most max runes.
func cleanText(p *problems, path, s string, max int) string {
	s = strings.TrimSpace(s)
	switch {
	case !utf8.ValidString(s) || strings.ContainsRune(s, 0):
		p.add(path, "must be valid UTF-8 text without NUL characters")
	case utf8.RuneCountInString(s) > max:
		p.add(path, fmt.Sprintf("must be at most %d characters", max))
	}
	return s
}

// optText cleans an optional text field; blank becomes nil.
func optText(p *problems, path string, s *string, max int) *string {
	if s == nil {
		return nil
	}
	v := cleanText(p, path, *s, max)
	if v == "" {
		return nil
	}
	return &v
}

// optUUID checks an optional id field; blank becomes nil.
func optUUID(p *problems, path string, s *string) *string {
	if s == nil || strings.TrimSpace(*s) == "" {
		return nil
	}
	v := strings.ToLower(strings.TrimSpace(*s))
	if !isUUID(v) {
		p.add(path, "must be a UUID")
		return nil
	}
	return &v
}

// parseInstant reads an ISO 8601 date-time (RFC 3339, fractional seconds optional) or a
// date (midnight UTC).
func parseInstant(s string) (time.Time, bool) {
	s = strings.TrimSpace(s)
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

// timeRange is a read's [from, to] filter; nil ends are open.
type timeRange struct {
	From, To *time.Time
}

// parseRange reads the from and to query parameters (ISO date-times, both optional; to is
// inclusive). A malformed value or from after to is a 400 Validation error.
func parseRange(q url.Values) (timeRange, error) {
	var r timeRange
	var p problems
	for _, f := range []struct {
		key string
		dst **time.Time
	}{{"from", &r.From}, {"to", &r.To}} {
		v := q.Get(f.key)
		if v == "" {
			continue
		}
		t, ok := parseInstant(v)
		if !ok {
			p.add(f.key, "must be an ISO 8601 date-time")
			continue
		}
		*f.dst = &t
	}
	if r.From != nil && r.To != nil && r.From.After(*r.To) {
		p.add("from", "must not be after to")
	}
	return r, p.err()
}

// percent is part/whole as a percentage rounded to two decimals; 0 when whole is 0.
func percent(part, whole int64) float64 {
	if whole <= 0 {
		return 0
	}
	return math.Round(float64(part)/float64(whole)*10000) / 100
}

// monthWindow returns the calendar UTC month containing t: [start, end).
func monthWindow(t time.Time) (time.Time, time.Time) {
	t = t.UTC()
	start := time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	return start, start.AddDate(0, 1, 0)
}

// companyRecord is the part of the kernel's company record this extension reads.
type companyRecord struct {
	ID                 string  `json:"id"`
	Name               string  `json:"name"`
	Status             string  `json:"status"`
	PauseReason        *string `json:"pauseReason"`
	BudgetMonthlyCents int64   `json:"budgetMonthlyCents"`
	SpentMonthlyCents  int64   `json:"spentMonthlyCents"`
}

// company reads a company from the kernel (404 "Company not found").
func (c *Costs) company(ctx context.Context, companyID string) (*companyRecord, json.RawMessage, error) {
	res, err := c.host.Companies.Get(ctx, &hostv1.GetCompanyRequest{CompanyId: companyID})
	if status.Code(err) == codes.NotFound {
		return nil, nil, notFound("Company not found")
	}
	if err != nil {
		return nil, nil, fmt.Errorf("error reading company %s: %w", companyID, err)
	}
	var rec companyRecord
	if err := json.Unmarshal(res.CompanyJson, &rec); err != nil {
		return nil, nil, fmt.Errorf("error decoding company %s: %w", companyID, err)
	}
	return &rec, res.CompanyJson, nil
}

// updateCompanyBudget changes the kernel's budget fields of a company (nil fields stay).
func (c *Costs) updateCompanyBudget(ctx context.Context, req *hostv1.UpdateCompanyBudgetRequest) (json.RawMessage, error) {
	res, err := c.host.Companies.UpdateBudget(ctx, req)
	if status.Code(err) == codes.NotFound {
		return nil, notFound("Company not found")
	}
	if err != nil {
		return nil, fmt.Errorf("error updating budget of company %s: %w", req.CompanyId, err)
	}
	return res.CompanyJson, nil
}

// agent reads a kernel agent identity; nil when there is none.
func (c *Costs) agent(ctx context.Context, agentID string) (*hostv1.AgentIdentity, error) {
	if !isUUID(agentID) {
		return nil, nil
	}
	a, err := c.host.Principals.GetAgent(ctx, &hostv1.GetAgentRequest{AgentId: agentID})
	if status.Code(err) == codes.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("error reading agent %s: %w", agentID, err)
	}
	return a, nil
}

// agentCompanies caches the company of agents seen by cost events: an agent never moves
// to another company, and every cost event names one, so the check that the agent belongs
// to the company costs a kernel round trip only the first time.
type agentCompanies struct {
	mu sync.RWMutex
	m  map[string]string
}

const agentCacheMax = 100_000

// companyOf returns the company of an agent ("" when it does not exist).
func (c *Costs) companyOf(ctx context.Context, agentID string) (string, error) {
	c.agentCache.mu.RLock()
	company, ok := c.agentCache.m[agentID]
	c.agentCache.mu.RUnlock()
	if ok {
		return company, nil
	}
	ag, err := c.agent(ctx, agentID)
	if err != nil || ag == nil {
		return "", err
	}
	c.agentCache.mu.Lock()
	if c.agentCache.m == nil || len(c.agentCache.m) >= agentCacheMax {
		c.agentCache.m = map[string]string{}
	}
	c.agentCache.m[agentID] = ag.CompanyId
	c.agentCache.mu.Unlock()
	return ag.CompanyId, nil
}

// agentsOf reads a company's agent identities (terminated included) by id.
func (c *Costs) agentsOf(ctx context.Context, companyID string) (map[string]*hostv1.AgentIdentity, error) {
	res, err := c.host.Principals.ListAgents(ctx, &hostv1.ListAgentsRequest{CompanyId: companyID, IncludeTerminated: true})
	if err != nil {
		return nil, fmt.Errorf("error listing agents of company %s: %w", companyID, err)
	}
	out := make(map[string]*hostv1.AgentIdentity, len(res.Agents))
	for _, a := range res.Agents {
		out[a.Id] = a
	}
	return out, nil
}

// workRefs is the answer of work.budgetRefs.
type workRefs struct {
	Issues              []issueRef   `json:"issues"`
	Projects            []projectRef `json:"projects"`
	Goals               []goalRef    `json:"goals"`
	PausedByBudgetCount int          `json:"pausedByBudgetCount"`
}

// issueRef is an issue work.budgetRefs returns: its project and goal.
type issueRef struct {
	ID        string  `json:"id"`
	ProjectID *string `json:"projectId"`
	GoalID    *string `json:"goalId"`
}

// issue returns the named issue, nil when absent.
func (w *workRefs) issue(id string) *issueRef {
	for i := range w.Issues {
		if w.Issues[i].ID == id {
			return &w.Issues[i]
		}
	}
	return nil
}

// projectRef and goalRef are the projects and goals work.budgetRefs returns.
type projectRef struct {
	ID          string  `json:"id"`
	Name        string  `json:"name"`
	PauseReason *string `json:"pauseReason"`
}

type goalRef struct {
	ID    string `json:"id"`
	Title string `json:"title"`
}

// project returns the named project, nil when absent.
func (w *workRefs) project(id string) *projectRef {
	for i := range w.Projects {
		if w.Projects[i].ID == id {
			return &w.Projects[i]
		}
	}
	return nil
}

// hasGoal reports whether the named goal was found.
func (w *workRefs) hasGoal(id string) bool {
	for _, g := range w.Goals {
		if g.ID == id {
			return true
		}
	}
	return false
}

// refs asks the work extension about projects and goals of a company; ok is false when no
// work extension is loaded.
func (c *Costs) refs(ctx context.Context, companyID string, projectIDs, goalIDs []string) (*workRefs, bool, error) {
	return c.refsWithIssues(ctx, companyID, nil, projectIDs, goalIDs)
}

// refsWithIssues is refs that also looks up issues, with their projects and goals.
func (c *Costs) refsWithIssues(ctx context.Context, companyID string, issueIDs, projectIDs, goalIDs []string) (*workRefs, bool, error) {
	var out workRefs
	in := map[string]any{"projectIds": nonNil(projectIDs), "goalIds": nonNil(goalIDs)}
	if len(issueIDs) > 0 {
		in["issueIds"] = issueIDs
	}
	err := c.host.Call(ctx, "work.budgetRefs", sdk.SystemActor(), companyID, in, &out)
	if sdk.IsMethodNotProvided(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("error reading projects of company %s: %w", companyID, err)
	}
	return &out, true, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func strOr(p *string, def string) string {
	if p == nil {
		return def
	}
	return *p
}
