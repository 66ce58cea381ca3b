package client

import (
	"context"
	"net/url"
	"time"
)

// Company is a company.
type Company struct {
	Raw
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description"`
	Status      string `json:"status"`
	IssuePrefix string `json:"issuePrefix"`
}

// Agent is an agent of a company.
type Agent struct {
	Raw
	ID          string `json:"id"`
	CompanyID   string `json:"companyId"`
	Name        string `json:"name"`
	Role        string `json:"role"`
	Title       string `json:"title"`
	Status      string `json:"status"`
	AdapterType string `json:"adapterType"`
}

// AgentCreate is the body of an agent creation; AdapterConfig is the adapter's settings.
type AgentCreate struct {
	Name          string         `json:"name"`
	Role          string         `json:"role,omitempty"`
	Title         string         `json:"title,omitempty"`
	AdapterType   string         `json:"adapterType,omitempty"`
	AdapterConfig map[string]any `json:"adapterConfig,omitempty"`
}

// Wake is the body of an agent wakeup.
type Wake struct {
	Source        string `json:"source,omitempty"`
	TriggerDetail string `json:"triggerDetail,omitempty"`
	Reason        string `json:"reason,omitempty"`
}

// WakeResult is a wakeup's answer: the queued run, or status skipped.
type WakeResult struct {
	Raw
	ID     string `json:"id"`
	Status string `json:"status"`
}

// Issue is an issue.
type Issue struct {
	Raw
	ID              string     `json:"id"`
	CompanyID       string     `json:"companyId"`
	Identifier      string     `json:"identifier"`
	Title           string     `json:"title"`
	Description     *string    `json:"description"`
	Status          string     `json:"status"`
	Priority        string     `json:"priority"`
	AssigneeAgentID *string    `json:"assigneeAgentId"`
	AssigneeUserID  *string    `json:"assigneeUserId"`
	CreatedAt       time.Time  `json:"createdAt"`
	UpdatedAt       time.Time  `json:"updatedAt"`
	CompletedAt     *time.Time `json:"completedAt"`
}

// IssueCreate is the body of an issue creation.
type IssueCreate struct {
	Title           string `json:"title"`
	Description     string `json:"description,omitempty"`
	Status          string `json:"status,omitempty"`
	Priority        string `json:"priority,omitempty"`
	AssigneeAgentID string `json:"assigneeAgentId,omitempty"`
	AssigneeUserID  string `json:"assigneeUserId,omitempty"`
}

// IssueAssign is the body of an assignment: one of the two, or both empty to unassign.
type IssueAssign struct {
	AssigneeAgentID *string `json:"assigneeAgentId"`
	AssigneeUserID  *string `json:"assigneeUserId"`
}

// Comment is a comment on an issue.
type Comment struct {
	Raw
	ID            string    `json:"id"`
	IssueID       string    `json:"issueId"`
	Body          string    `json:"body"`
	AuthorAgentID *string   `json:"authorAgentId"`
	AuthorUserID  *string   `json:"authorUserId"`
	CreatedAt     time.Time `json:"createdAt"`
}

// CommentCreate is the body of a new comment.
type CommentCreate struct {
	Body string `json:"body"`
}

// Run is a heartbeat run.
type Run struct {
	Raw
	ID               string     `json:"id"`
	CompanyID        string     `json:"companyId"`
	AgentID          string     `json:"agentId"`
	InvocationSource string     `json:"invocationSource"`
	Status           string     `json:"status"`
	Error            *string    `json:"error"`
	StartedAt        *time.Time `json:"startedAt"`
	FinishedAt       *time.Time `json:"finishedAt"`
	CreatedAt        time.Time  `json:"createdAt"`
}

// Routine is a routine.
type Routine struct {
	Raw
	ID              string  `json:"id"`
	CompanyID       string  `json:"companyId"`
	Title           string  `json:"title"`
	Status          string  `json:"status"`
	AssigneeAgentID *string `json:"assigneeAgentId"`
}

// RoutineRunRequest is the body of a routine run.
type RoutineRunRequest struct {
	Source string `json:"source,omitempty"`
}

// RoutineRun is one run of a routine.
type RoutineRun struct {
	Raw
	ID        string `json:"id"`
	RoutineID string `json:"routineId"`
	Status    string `json:"status"`
	Source    string `json:"source"`
}

// CostSummary is a company's billed spend over a window against its monthly budget.
type CostSummary struct {
	Raw
	CompanyID          string  `json:"companyId"`
	SpendCents         int64   `json:"spendCents"`
	BudgetCents        int64   `json:"budgetCents"`
	UtilizationPercent float64 `json:"utilizationPercent"`
}

// Plugin is an installed extension's registry record.
type Plugin struct {
	Raw
	ID        string  `json:"id"`
	PluginKey string  `json:"pluginKey"`
	Version   string  `json:"version"`
	Kind      string  `json:"kind"`
	Runtime   string  `json:"runtime"`
	Source    string  `json:"source"`
	Status    string  `json:"status"`
	Enabled   bool    `json:"enabled"`
	LastError *string `json:"lastError"`
}

// PackageInstall is the body of a plugin or adapter install (spec part 2).
type PackageInstall struct {
	PackageName string `json:"packageName"`
	Version     string `json:"version,omitempty"`
	IsLocalPath bool   `json:"isLocalPath,omitempty"`
}

// Adapter is an adapter type of the registry.
type Adapter struct {
	Raw
	Type     string `json:"type"`
	Label    string `json:"label"`
	Source   string `json:"source"`
	Disabled bool   `json:"disabled"`
}

// AdapterInstalled is the answer of an adapter install or reinstall: the type and the
// package key and version now serving it.
type AdapterInstalled struct {
	Raw
	Type    string `json:"type"`
	Key     string `json:"key"`
	Version string `json:"version"`
}

var (
	epCompanies     = endpoint("GET", "/api/companies", nil, Company{})
	epCompanyCreate = endpoint("POST", "/api/companies", struct {
		Name string `json:"name"`
	}{}, Company{})
	epAgents      = endpoint("GET", "/api/companies/{companyId}/agents", nil, Agent{})
	epAgent       = endpoint("GET", "/api/agents/{agentId}", nil, Agent{})
	epAgentCreate = endpoint("POST", "/api/companies/{companyId}/agents", AgentCreate{}, Agent{})
	epAgentWake   = endpoint("POST", "/api/agents/{agentId}/wakeup", Wake{}, WakeResult{})
	epAgentPause  = endpoint("POST", "/api/agents/{agentId}/pause", nil, Agent{})
	epAgentResume = endpoint("POST", "/api/agents/{agentId}/resume", nil, Agent{})

	epIssues        = endpoint("GET", "/api/companies/{companyId}/issues", nil, Issue{})
	epIssue         = endpoint("GET", "/api/issues/{id}", nil, Issue{})
	epIssueCreate   = endpoint("POST", "/api/companies/{companyId}/issues", IssueCreate{}, Issue{})
	epIssueUpdate   = endpoint("PATCH", "/api/issues/{id}", IssueAssign{}, Issue{})
	epComments      = endpoint("GET", "/api/issues/{id}/comments", nil, Comment{})
	epCommentCreate = endpoint("POST", "/api/issues/{id}/comments", CommentCreate{}, Comment{})

	epRuns   = endpoint("GET", "/api/companies/{companyId}/heartbeat-runs", nil, Run{})
	epRun    = endpoint("GET", "/api/heartbeat-runs/{runId}", nil, Run{})
	epRunLog = endpoint("GET", "/api/heartbeat-runs/{runId}/log", nil, nil)

	epRoutines   = endpoint("GET", "/api/companies/{companyId}/routines", nil, Routine{})
	epRoutineRun = endpoint("POST", "/api/routines/{routineId}/run", RoutineRunRequest{}, RoutineRun{})

	epCostSummary = endpoint("GET", "/api/companies/{companyId}/costs/summary", nil, CostSummary{})

	epPlugins       = endpoint("GET", "/api/plugins", nil, Plugin{})
	epPlugin        = endpoint("GET", "/api/plugins/{pluginId}", nil, Plugin{})
	epPluginInstall = endpoint("POST", "/api/plugins/install", PackageInstall{}, Plugin{})
	epPluginEnable  = endpoint("POST", "/api/plugins/{pluginId}/enable", nil, Plugin{})
	epPluginDisable = endpoint("POST", "/api/plugins/{pluginId}/disable", nil, Plugin{})
	epPluginUpgrade = endpoint("POST", "/api/plugins/{pluginId}/upgrade", nil, Plugin{})
	epPluginRemove  = endpoint("DELETE", "/api/plugins/{pluginId}", nil, nil)

	epAdapters       = endpoint("GET", "/api/adapters", nil, Adapter{})
	epAdapterInstall = endpoint("POST", "/api/adapters/install", PackageInstall{}, AdapterInstalled{})
	epAdapterUpdate  = endpoint("PATCH", "/api/adapters/{type}", map[string]any{}, Adapter{})
	epAdapterReload  = endpoint("POST", "/api/adapters/{type}/reinstall", nil, AdapterInstalled{})
	epAdapterRemove  = endpoint("DELETE", "/api/adapters/{type}", nil, nil)
)

// Companies lists the companies the caller sees.
func (c *Client) Companies(ctx context.Context) (*List[Company], error) {
	return listCall[Company](ctx, c, epCompanies, nil, nil)
}

// CreateCompany creates a company.
func (c *Client) CreateCompany(ctx context.Context, name string) (*Company, error) {
	var out Company
	return &out, c.call(ctx, epCompanyCreate, nil, nil, map[string]string{"name": name}, &out)
}

// Agents lists a company's agents.
func (c *Client) Agents(ctx context.Context, companyID string) (*List[Agent], error) {
	return listCall[Agent](ctx, c, epAgents, []string{companyID}, nil)
}

// Agent reads an agent by id.
func (c *Client) Agent(ctx context.Context, agentID string) (*Agent, error) {
	var out Agent
	return &out, c.call(ctx, epAgent, []string{agentID}, nil, nil, &out)
}

// CreateAgent creates an agent in a company.
func (c *Client) CreateAgent(ctx context.Context, companyID string, p AgentCreate) (*Agent, error) {
	var out Agent
	return &out, c.call(ctx, epAgentCreate, []string{companyID}, nil, p, &out)
}

// WakeAgent wakes an agent: the queued run, or status skipped.
func (c *Client) WakeAgent(ctx context.Context, agentID string, w Wake) (*WakeResult, error) {
	var out WakeResult
	return &out, c.call(ctx, epAgentWake, []string{agentID}, nil, w, &out)
}

// PauseAgent pauses an agent.
func (c *Client) PauseAgent(ctx context.Context, agentID string) (*Agent, error) {
	var out Agent
	return &out, c.call(ctx, epAgentPause, []string{agentID}, nil, nil, &out)
}

// ResumeAgent resumes a paused agent.
func (c *Client) ResumeAgent(ctx context.Context, agentID string) (*Agent, error) {
	var out Agent
	return &out, c.call(ctx, epAgentResume, []string{agentID}, nil, nil, &out)
}

// IssueFilter narrows an issue list (empty fields do not filter).
type IssueFilter struct {
	Status          string
	AssigneeAgentID string
	Q               string
	Limit           int
}

// Issues lists a company's issues.
func (c *Client) Issues(ctx context.Context, companyID string, f IssueFilter) (*List[Issue], error) {
	q := url.Values{}
	set(q, "status", f.Status)
	set(q, "assigneeAgentId", f.AssigneeAgentID)
	set(q, "q", f.Q)
	if f.Limit > 0 {
		q.Set("limit", itoa(f.Limit))
	}
	return listCall[Issue](ctx, c, epIssues, []string{companyID}, q)
}

// Issue reads an issue by id or identifier.
func (c *Client) Issue(ctx context.Context, id string) (*Issue, error) {
	var out Issue
	return &out, c.call(ctx, epIssue, []string{id}, nil, nil, &out)
}

// CreateIssue creates an issue in a company.
func (c *Client) CreateIssue(ctx context.Context, companyID string, p IssueCreate) (*Issue, error) {
	var out Issue
	return &out, c.call(ctx, epIssueCreate, []string{companyID}, nil, p, &out)
}

// AssignIssue assigns an issue to an agent or a user (both nil unassigns).
func (c *Client) AssignIssue(ctx context.Context, id string, a IssueAssign) (*Issue, error) {
	var out Issue
	return &out, c.call(ctx, epIssueUpdate, []string{id}, nil, a, &out)
}

// Comments lists an issue's comments, oldest first.
func (c *Client) Comments(ctx context.Context, issueID string) (*List[Comment], error) {
	return listCall[Comment](ctx, c, epComments, []string{issueID}, nil)
}

// AddComment adds a comment to an issue.
func (c *Client) AddComment(ctx context.Context, issueID, body string) (*Comment, error) {
	var out Comment
	return &out, c.call(ctx, epCommentCreate, []string{issueID}, nil, CommentCreate{Body: body}, &out)
}

// RunFilter narrows a run list.
type RunFilter struct {
	AgentID string
	Status  string
	Limit   int
}

// Runs lists a company's heartbeat runs, newest first.
func (c *Client) Runs(ctx context.Context, companyID string, f RunFilter) (*List[Run], error) {
	q := url.Values{}
	set(q, "agentId", f.AgentID)
	set(q, "status", f.Status)
	if f.Limit > 0 {
		q.Set("limit", itoa(f.Limit))
	}
	return listCall[Run](ctx, c, epRuns, []string{companyID}, q)
}

// Run reads a heartbeat run.
func (c *Client) Run(ctx context.Context, runID string) (*Run, error) {
	var out Run
	return &out, c.call(ctx, epRun, []string{runID}, nil, nil, &out)
}

// LogChunk is a piece of a run's log from an offset: the bytes, the next offset and
// whether the run is still live (poll again from Next).
type LogChunk struct {
	Data []byte
	Next int64
	Live bool
}

// RunLog reads a run's log from offset. With follow, a live run's request waits (up to the
// server's long-poll limit) for new bytes.
func (c *Client) RunLog(ctx context.Context, runID string, offset int64, follow bool) (*LogChunk, error) {
	q := url.Values{"offset": {itoa64(offset)}}
	if follow {
		q.Set("follow", "1")
	}
	res, err := c.Do(ctx, epRunLog.Method, epRunLog.path(runID), q, nil)
	if err != nil {
		return nil, err
	}
	ch := &LogChunk{Data: res.Body, Next: offset + int64(len(res.Body)), Live: res.Header.Get("X-Run-Live") == "true"}
	if n, ok := atoi64(res.Header.Get("X-Log-Offset")); ok {
		ch.Next = n
	}
	return ch, nil
}

// FollowLog writes a run's log from offset to w as it grows, until the run ends or ctx does.
func (c *Client) FollowLog(ctx context.Context, runID string, offset int64, w interface{ Write([]byte) (int, error) }) error {
	for {
		ch, err := c.RunLog(ctx, runID, offset, true)
		if err != nil {
			return err
		}
		if len(ch.Data) > 0 {
			if _, err := w.Write(ch.Data); err != nil {
				return err
			}
		}
		offset = ch.Next
		if !ch.Live {
			return nil
		}
		if len(ch.Data) == 0 {
			// The server long-polls; a quick empty answer still must not spin.
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
}

// Routines lists a company's routines.
func (c *Client) Routines(ctx context.Context, companyID string) (*List[Routine], error) {
	return listCall[Routine](ctx, c, epRoutines, []string{companyID}, nil)
}

// RunRoutine fires a routine now (a manual run).
func (c *Client) RunRoutine(ctx context.Context, routineID string) (*RoutineRun, error) {
	var out RoutineRun
	return &out, c.call(ctx, epRoutineRun, []string{routineID}, nil, RoutineRunRequest{Source: "manual"}, &out)
}

// CostSummary reads a company's billed spend over from..to (zero times: all time).
func (c *Client) CostSummary(ctx context.Context, companyID string, from, to time.Time) (*CostSummary, error) {
	q := url.Values{}
	if !from.IsZero() {
		q.Set("from", from.UTC().Format(time.RFC3339))
	}
	if !to.IsZero() {
		q.Set("to", to.UTC().Format(time.RFC3339))
	}
	var out CostSummary
	return &out, c.call(ctx, epCostSummary, []string{companyID}, q, nil, &out)
}

// Plugins lists the installed extensions.
func (c *Client) Plugins(ctx context.Context) (*List[Plugin], error) {
	return listCall[Plugin](ctx, c, epPlugins, nil, nil)
}

// Plugin reads one installed extension by key or id.
func (c *Client) Plugin(ctx context.Context, keyOrID string) (*Plugin, error) {
	var out Plugin
	return &out, c.call(ctx, epPlugin, []string{keyOrID}, nil, nil, &out)
}

// InstallPlugin installs a plugin from a package name or a local path.
func (c *Client) InstallPlugin(ctx context.Context, p PackageInstall) (*Plugin, error) {
	var out Plugin
	return &out, c.call(ctx, epPluginInstall, nil, nil, p, &out)
}

// EnablePlugin, DisablePlugin and UpgradePlugin run a plugin's lifecycle step.
func (c *Client) EnablePlugin(ctx context.Context, keyOrID string) (*Plugin, error) {
	return c.pluginStep(ctx, epPluginEnable, keyOrID)
}

// DisablePlugin disables a plugin.
func (c *Client) DisablePlugin(ctx context.Context, keyOrID string) (*Plugin, error) {
	return c.pluginStep(ctx, epPluginDisable, keyOrID)
}

// UpgradePlugin upgrades a plugin to its package's newest version.
func (c *Client) UpgradePlugin(ctx context.Context, keyOrID string) (*Plugin, error) {
	return c.pluginStep(ctx, epPluginUpgrade, keyOrID)
}

func (c *Client) pluginStep(ctx context.Context, e Endpoint, keyOrID string) (*Plugin, error) {
	var out Plugin
	return &out, c.call(ctx, e, []string{keyOrID}, nil, nil, &out)
}

// RemovePlugin uninstalls a plugin.
func (c *Client) RemovePlugin(ctx context.Context, keyOrID string) error {
	return c.call(ctx, epPluginRemove, []string{keyOrID}, nil, nil, nil)
}

// Adapters lists the adapter registry: built-in and external adapters.
func (c *Client) Adapters(ctx context.Context) (*List[Adapter], error) {
	return listCall[Adapter](ctx, c, epAdapters, nil, nil)
}

// InstallAdapter installs an external adapter from a package name or a local path.
func (c *Client) InstallAdapter(ctx context.Context, p PackageInstall) (*AdapterInstalled, error) {
	var out AdapterInstalled
	return &out, c.call(ctx, epAdapterInstall, nil, nil, p, &out)
}

// SetAdapterDisabled disables or enables an adapter type (its instance config).
func (c *Client) SetAdapterDisabled(ctx context.Context, adapterType string, disabled bool) (*Adapter, error) {
	var out Adapter
	return &out, c.call(ctx, epAdapterUpdate, []string{adapterType}, nil, map[string]any{"disabled": disabled}, &out)
}

// ReinstallAdapter re-runs an external adapter's install flow (its newest version).
func (c *Client) ReinstallAdapter(ctx context.Context, adapterType string) (*AdapterInstalled, error) {
	var out AdapterInstalled
	return &out, c.call(ctx, epAdapterReload, []string{adapterType}, nil, nil, &out)
}

// RemoveAdapter removes an external adapter (an override falls back to the built-in).
func (c *Client) RemoveAdapter(ctx context.Context, adapterType string) error {
	return c.call(ctx, epAdapterRemove, []string{adapterType}, nil, nil, nil)
}
