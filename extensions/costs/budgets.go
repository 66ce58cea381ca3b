package costs

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/keelhq/keel/sdk"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

// Budget scopes, metrics, windows, thresholds and incident states (spec part 1 "Budget
// policy and incident"; REFERENCE.md 2.12).
const (
	scopeCompany = "company"
	scopeAgent   = "agent"
	scopeProject = "project"

	metricBilledCents = "billed_cents"

	windowMonth    = "calendar_month_utc"
	windowLifetime = "lifetime"

	thresholdSoft = "soft"
	thresholdHard = "hard"

	incidentOpen      = "open"
	incidentResolved  = "resolved"
	incidentDismissed = "dismissed"

	actionKeepPaused = "keep_paused"
	actionRaise      = "raise_budget_and_resume"
	// resolutionWindowEnded dismisses an incident whose window is over.
	resolutionWindowEnded = "window_ended"

	budgetPauseReason = "budget"
	defaultWarn       = 80
)

var (
	scopeTypes     = []string{scopeCompany, scopeAgent, scopeProject}
	windowKinds    = []string{windowMonth, windowLifetime}
	resolveActions = []string{actionKeepPaused, actionRaise}
)

// policy is a row of budget_policies.
type policy struct {
	ID              string
	CompanyID       string
	ScopeType       string
	ScopeID         string
	Metric          string
	WindowKind      string
	Amount          int64
	WarnPercent     int
	HardStopEnabled bool
	NotifyEnabled   bool
	IsActive        bool
	CreatedAt       time.Time
	UpdatedAt       time.Time
}

const policyColumns = `id::text, company_id::text, scope_type, scope_id::text, metric, window_kind, amount, warn_percent,
	hard_stop_enabled, notify_enabled, is_active, created_at, updated_at`

func scanPolicy(row pgx.Row) (*policy, error) {
	p := new(policy)
	err := row.Scan(&p.ID, &p.CompanyID, &p.ScopeType, &p.ScopeID, &p.Metric, &p.WindowKind, &p.Amount, &p.WarnPercent,
		&p.HardStopEnabled, &p.NotifyEnabled, &p.IsActive, &p.CreatedAt, &p.UpdatedAt)
	return p, err
}

func (c *Costs) queryPolicies(ctx context.Context, q string, args ...any) ([]*policy, error) {
	return queryPoliciesOn(ctx, c.pool, q, args...)
}

// queryPoliciesOn reads policies through db.
func queryPoliciesOn(ctx context.Context, db querier, q string, args ...any) ([]*policy, error) {
	rows, err := db.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("error reading budget policies: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*policy, error) { return scanPolicy(r) })
	if err != nil {
		return nil, fmt.Errorf("error reading budget policies: %w", err)
	}
	return out, nil
}

// window returns the policy's current window at now: the UTC month for monthly policies,
// nil ends for lifetime ones.
func (p *policy) window(now time.Time) (start, end *time.Time) {
	if p.WindowKind != windowMonth {
		return nil, nil
	}
	s, e := monthWindow(now)
	return &s, &e
}

// defaultWindow is the window kind a scope gets when the policy names none.
func defaultWindow(scopeType string) string {
	if scopeType == scopeProject {
		return windowLifetime
	}
	return windowMonth
}

// policyUpsert is the body of POST /api/companies/{companyId}/budgets/policies and the
// input of costs.upsertBudgetPolicy. On an existing policy absent fields keep their values.
type policyUpsert struct {
	ScopeType string `json:"scopeType" jsonschema:"required,enum=company,enum=agent,enum=project"`
	ScopeID   string `json:"scopeId" jsonschema:"required"`
	// Metric is billed_cents (the default and only metric).
	Metric *string `json:"metric,omitempty" jsonschema:"enum=billed_cents"`
	// WindowKind defaults to calendar_month_utc for company and agent scopes, lifetime for projects.
	WindowKind *string `json:"windowKind,omitempty" jsonschema:"enum=calendar_month_utc,enum=lifetime"`
	// Amount is the budget in cents; 0 disables enforcement.
	Amount *int64 `json:"amount" jsonschema:"required,minimum=0"`
	// WarnPercent is the soft threshold, 1–99 (default 80).
	WarnPercent     *int  `json:"warnPercent,omitempty" jsonschema:"minimum=1,maximum=99"`
	HardStopEnabled *bool `json:"hardStopEnabled,omitempty"`
	NotifyEnabled   *bool `json:"notifyEnabled,omitempty"`
	IsActive        *bool `json:"isActive,omitempty"`
}

// upsertPolicy validates and stores a policy of the company, syncs the monthly budget of a
// company or agent scope to the kernel and the agents owner, and logs budget.policy_upserted.
func (c *Costs) upsertPolicy(ctx context.Context, actor *sdk.Actor, companyID string, in *policyUpsert) (*policy, error) {
	var p problems
	scopeType := strings.TrimSpace(in.ScopeType)
	if !slices.Contains(scopeTypes, scopeType) {
		p.add("scopeType", "must be one of "+strings.Join(scopeTypes, ", "))
	}
	scopeID := strings.ToLower(strings.TrimSpace(in.ScopeID))
	if !isUUID(scopeID) {
		p.add("scopeId", "must be a UUID")
	}
	metric := strings.TrimSpace(strOr(in.Metric, metricBilledCents))
	if metric != metricBilledCents {
		p.add("metric", "must be billed_cents")
	}
	windowKind := strings.TrimSpace(strOr(in.WindowKind, defaultWindow(scopeType)))
	if !slices.Contains(windowKinds, windowKind) {
		p.add("windowKind", "must be one of "+strings.Join(windowKinds, ", "))
	}
	switch {
	case in.Amount == nil:
		p.add("amount", "is required")
	case *in.Amount < 0:
		p.add("amount", "must be a non-negative integer")
	}
	if in.WarnPercent != nil && (*in.WarnPercent < 1 || *in.WarnPercent > 99) {
		p.add("warnPercent", "must be an integer from 1 to 99")
	}
	if err := p.err(); err != nil {
		return nil, err
	}
	if err := c.checkScope(ctx, companyID, scopeType, scopeID); err != nil {
		return nil, err
	}
	pol, err := scanPolicy(c.pool.QueryRow(ctx, `INSERT INTO budget_policies AS p (id, company_id, scope_type, scope_id, metric,
			window_kind, amount, warn_percent, hard_stop_enabled, notify_enabled, is_active)
		VALUES ($1, $2, $3, $4, $5, $6, $7, coalesce($8, 80), coalesce($9, true), coalesce($10, true), coalesce($11, true))
		ON CONFLICT (company_id, scope_type, scope_id, metric, window_kind) DO UPDATE SET amount = excluded.amount,
			warn_percent = coalesce($8, p.warn_percent), hard_stop_enabled = coalesce($9, p.hard_stop_enabled),
			notify_enabled = coalesce($10, p.notify_enabled), is_active = coalesce($11, p.is_active), updated_at = now()
		RETURNING `+policyColumns, uuid.NewString(), companyID, scopeType, scopeID, metric, windowKind, *in.Amount, in.WarnPercent,
		in.HardStopEnabled, in.NotifyEnabled, in.IsActive))
	if err != nil {
		return nil, fmt.Errorf("error storing budget policy: %w", err)
	}
	if err := c.syncMonthlyBudget(ctx, pol); err != nil {
		return nil, err
	}
	c.activity(ctx, actor, companyID, "budget.policy_upserted", "budget_policy", pol.ID, map[string]any{
		"scopeType": pol.ScopeType, "scopeId": pol.ScopeID, "windowKind": pol.WindowKind, "amount": pol.Amount,
		"warnPercent": pol.WarnPercent, "hardStopEnabled": pol.HardStopEnabled, "notifyEnabled": pol.NotifyEnabled, "isActive": pol.IsActive,
	})
	return pol, nil
}

// checkScope refuses a policy scope outside the company: the company itself, one of its
// agents, or one of its projects (not checked when no work extension is loaded).
func (c *Costs) checkScope(ctx context.Context, companyID, scopeType, scopeID string) error {
	switch scopeType {
	case scopeCompany:
		if scopeID != companyID {
			return invalid("scopeId", "must be the id of this company")
		}
	case scopeAgent:
		ag, err := c.agent(ctx, scopeID)
		if err != nil {
			return err
		}
		if ag == nil || ag.CompanyId != companyID {
			return invalid("scopeId", "must be an agent of this company")
		}
	case scopeProject:
		refs, ok, err := c.refs(ctx, companyID, []string{scopeID}, nil)
		if err != nil {
			return err
		}
		if ok && refs.project(scopeID) == nil {
			return invalid("scopeId", "must be a project of this company")
		}
	}
	return nil
}

// syncMonthlyBudget copies the amount of a monthly company or agent policy into the
// budgetMonthlyCents the kernel and the agents owner show.
func (c *Costs) syncMonthlyBudget(ctx context.Context, pol *policy) error {
	if pol.WindowKind != windowMonth || pol.Metric != metricBilledCents {
		return nil
	}
	amount := pol.Amount
	switch pol.ScopeType {
	case scopeCompany:
		_, err := c.updateCompanyBudget(ctx, &hostv1.UpdateCompanyBudgetRequest{CompanyId: pol.CompanyID, BudgetMonthlyCents: &amount})
		return err
	case scopeAgent:
		err := c.host.Call(ctx, "agents.setBudget", sdk.SystemActor(), pol.CompanyID,
			map[string]any{"agentId": pol.ScopeID, "budgetMonthlyCents": amount}, nil)
		if err != nil && !sdk.IsMethodNotProvided(err) {
			return fmt.Errorf("error storing budget of agent %s: %w", pol.ScopeID, err)
		}
	}
	return nil
}

// ensureMonthlyPolicy sets the amount of the monthly billed-cents policy of a company or
// agent scope, creating it with the defaults when missing (PATCH …/budgets).
func (c *Costs) ensureMonthlyPolicy(ctx context.Context, companyID, scopeType, scopeID string, amount int64) (*policy, error) {
	pol, err := scanPolicy(c.pool.QueryRow(ctx, `INSERT INTO budget_policies AS p (id, company_id, scope_type, scope_id, metric, window_kind, amount)
		VALUES ($1, $2, $3, $4, 'billed_cents', 'calendar_month_utc', $5)
		ON CONFLICT (company_id, scope_type, scope_id, metric, window_kind) DO UPDATE SET amount = excluded.amount, updated_at = now()
		RETURNING `+policyColumns, uuid.NewString(), companyID, scopeType, scopeID, amount))
	if err != nil {
		return nil, fmt.Errorf("error storing budget policy: %w", err)
	}
	return pol, nil
}

// evaluatePolicies opens the incidents the current spend calls for: for every active
// policy with an amount of the company and of the given agents and projects, a soft
// incident at warnPercent when notifications are on and a hard one at 100 percent when hard
// stop is on. month holds the current month's sums; lifetime sums are read when needed.
func (c *Costs) evaluatePolicies(ctx context.Context, db querier, companyID string, agentIDs, projectIDs []string, now time.Time, month *scopeSums) error {
	pols, err := queryPoliciesOn(ctx, db, `SELECT `+policyColumns+` FROM budget_policies
		WHERE company_id = $1 AND is_active AND amount > 0 AND metric = 'billed_cents'
		  AND ((scope_type = 'company' AND scope_id = $1) OR (scope_type = 'agent' AND scope_id = ANY($2::uuid[]))
		    OR (scope_type = 'project' AND scope_id = ANY($3::uuid[])))
		ORDER BY created_at`, companyID, agentIDs, projectIDs)
	if err != nil {
		return err
	}
	var lifetime *scopeSums
	for _, pol := range pols {
		sums := month
		if pol.WindowKind == windowLifetime {
			if lifetime == nil {
				if lifetime, err = c.sumScopes(ctx, db, companyID, nil, nil); err != nil {
					return err
				}
			}
			sums = lifetime
		}
		observed := sums.sum(pol.ScopeType, pol.ScopeID)
		if pol.NotifyEnabled && observed*100 >= pol.Amount*int64(pol.WarnPercent) {
			if err := c.openIncident(ctx, db, pol, thresholdSoft, observed, now); err != nil {
				return err
			}
		}
		if pol.HardStopEnabled && observed >= pol.Amount {
			if err := c.openIncident(ctx, db, pol, thresholdHard, observed, now); err != nil {
				return err
			}
		}
	}
	return nil
}

// incident is a row of budget_incidents and its API shape.
type incident struct {
	ID               string     `json:"id"`
	CompanyID        string     `json:"companyId"`
	PolicyID         string     `json:"policyId"`
	ScopeType        string     `json:"scopeType"`
	ScopeID          string     `json:"scopeId"`
	ScopeName        *string    `json:"scopeName"`
	Metric           string     `json:"metric"`
	WindowKind       string     `json:"windowKind"`
	WindowStart      *time.Time `json:"windowStart"`
	WindowEnd        *time.Time `json:"windowEnd"`
	ThresholdType    string     `json:"thresholdType"`
	AmountLimit      int64      `json:"amountLimit"`
	AmountObserved   int64      `json:"amountObserved"`
	Status           string     `json:"status"`
	ApprovalID       *string    `json:"approvalId"`
	ScopePaused      bool       `json:"scopePaused"`
	Resolution       *string    `json:"resolution"`
	DecisionNote     *string    `json:"decisionNote"`
	ResolvedByUserID *string    `json:"resolvedByUserId"`
	ResolvedAt       *time.Time `json:"resolvedAt"`
	CreatedAt        time.Time  `json:"createdAt"`
	UpdatedAt        time.Time  `json:"updatedAt"`
}

const incidentColumns = `id::text, company_id::text, policy_id::text, scope_type, scope_id::text, metric, window_kind,
	window_start, window_end, threshold_type, amount_limit, amount_observed, status, approval_id::text, scope_paused,
	resolution, decision_note, resolved_by_user_id, resolved_at, created_at, updated_at`

func scanIncident(row pgx.Row) (*incident, error) {
	i := new(incident)
	err := row.Scan(&i.ID, &i.CompanyID, &i.PolicyID, &i.ScopeType, &i.ScopeID, &i.Metric, &i.WindowKind, &i.WindowStart,
		&i.WindowEnd, &i.ThresholdType, &i.AmountLimit, &i.AmountObserved, &i.Status, &i.ApprovalID, &i.ScopePaused,
		&i.Resolution, &i.DecisionNote, &i.ResolvedByUserID, &i.ResolvedAt, &i.CreatedAt, &i.UpdatedAt)
	return i, err
}

func (c *Costs) queryIncidents(ctx context.Context, q string, args ...any) ([]*incident, error) {
	rows, err := c.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("error reading budget incidents: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*incident, error) { return scanIncident(r) })
	if err != nil {
		return nil, fmt.Errorf("error reading budget incidents: %w", err)
	}
	return out, nil
}

// openIncident records that a policy crossed a threshold in its current window. The unique
// (policy, window, threshold, limit) key makes this happen once however many events cross
// it; only the call that inserts the incident acts on it. A hard incident requests a
// budget_override_required approval, pauses its scope and cancels the scope's runs.
func (c *Costs) openIncident(ctx context.Context, db querier, pol *policy, threshold string, observed int64, now time.Time) error {
	ws, we := pol.window(now)
	inc, err := scanIncident(db.QueryRow(ctx, `INSERT INTO budget_incidents (id, company_id, policy_id, scope_type, scope_id,
			metric, window_kind, window_start, window_end, threshold_type, amount_limit, amount_observed)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
		ON CONFLICT DO NOTHING RETURNING `+incidentColumns, uuid.NewString(), pol.CompanyID, pol.ID, pol.ScopeType, pol.ScopeID,
		pol.Metric, pol.WindowKind, ws, we, threshold, pol.Amount, observed))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("error opening budget incident: %w", err)
	}
	details := map[string]any{"incidentId": inc.ID, "policyId": pol.ID, "thresholdType": threshold, "scopeType": pol.ScopeType,
		"scopeId": pol.ScopeID, "windowKind": pol.WindowKind, "windowStart": ws, "amountLimit": pol.Amount, "amountObserved": observed}
	if threshold == thresholdHard {
		approvalID, paused, cancelled := c.hardStop(ctx, db, pol, inc)
		details["approvalId"], details["scopePaused"], details["cancelledRuns"] = approvalID, paused, cancelled
	}
	c.activity(ctx, nil, pol.CompanyID, "budget.incident_opened", "budget_incident", inc.ID, details)
	return nil
}

// hardStop carries out a hard incident: it requests a budget_override_required approval,
// pauses the scope with pauseReason "budget" and cancels the scope's in-flight runs. Each
// step tolerates an absent owner; failures are logged, since the incident stands and the
// budget gate blocks new work either way.
func (c *Costs) hardStop(ctx context.Context, db querier, pol *policy, inc *incident) (approvalID *string, paused bool, cancelled int) {
	var approval struct {
		ID string `json:"id"`
	}
	err := c.host.Call(ctx, "work.approvals.create", sdk.SystemActor(), pol.CompanyID, map[string]any{
		"type": "budget_override_required",
		"payload": map[string]any{"incidentId": inc.ID, "policyId": pol.ID, "scopeType": pol.ScopeType, "scopeId": pol.ScopeID,
			"metric": pol.Metric, "windowKind": pol.WindowKind, "windowStart": inc.WindowStart, "windowEnd": inc.WindowEnd,
			"amountLimit": inc.AmountLimit, "amountObserved": inc.AmountObserved},
	}, &approval)
	switch {
	case err == nil && approval.ID != "":
		approvalID = &approval.ID
	case err != nil && !sdk.IsMethodNotProvided(err):
		c.log.Warn("error requesting budget override approval", "incident", inc.ID, "error", err)
	}
	paused, cancelled = c.pauseScope(ctx, pol.CompanyID, pol.ScopeType, pol.ScopeID)
	if _, err := db.Exec(ctx, `UPDATE budget_incidents SET approval_id = $2, scope_paused = $3, updated_at = now() WHERE id = $1`,
		inc.ID, approvalID, paused); err != nil {
		c.log.Warn("error recording hard stop of incident", "incident", inc.ID, "error", err)
	}
	return approvalID, paused, cancelled
}

// pauseScope pauses a company, agent or project for budget enforcement and cancels its
// in-flight runs. paused reports that the scope now stands paused for budget.
func (c *Costs) pauseScope(ctx context.Context, companyID, scopeType, scopeID string) (paused bool, cancelled int) {
	cancelRuns := func(issueIDs []string) {
		in := map[string]any{"companyId": companyID}
		if issueIDs != nil {
			if len(issueIDs) == 0 {
				return
			}
			in["issueIds"] = issueIDs
		}
		var out struct {
			Cancelled int `json:"cancelled"`
		}
		if err := c.host.Call(ctx, "agents.cancelRuns", sdk.SystemActor(), companyID, in, &out); err != nil {
			if !sdk.IsMethodNotProvided(err) {
				c.log.Warn("error cancelling runs after a hard stop", "company", companyID, "error", err)
			}
			return
		}
		cancelled += out.Cancelled
	}
	switch scopeType {
	case scopeAgent:
		var ag struct {
			Status      string  `json:"status"`
			PauseReason *string `json:"pauseReason"`
		}
		if err := c.host.Call(ctx, "agents.pauseForBudget", sdk.SystemActor(), companyID, map[string]any{"agentId": scopeID}, &ag); err != nil {
			if !sdk.IsMethodNotProvided(err) {
				c.log.Warn("error pausing agent for budget", "agent", scopeID, "error", err)
			}
			return false, 0
		}
		return ag.Status == "paused" && strOr(ag.PauseReason, "") == budgetPauseReason, 0
	case scopeProject:
		var out struct {
			Project struct {
				PauseReason *string `json:"pauseReason"`
			} `json:"project"`
			IssueIDs []string `json:"issueIds"`
		}
		if err := c.host.Call(ctx, "work.projects.pauseForBudget", sdk.SystemActor(), companyID, map[string]any{"projectId": scopeID}, &out); err != nil {
			if !sdk.IsMethodNotProvided(err) {
				c.log.Warn("error pausing project for budget", "project", scopeID, "error", err)
			}
			return false, 0
		}
		cancelRuns(nonNil(out.IssueIDs))
		return strOr(out.Project.PauseReason, "") == budgetPauseReason, cancelled
	case scopeCompany:
		co, _, err := c.company(ctx, companyID)
		if err != nil {
			c.log.Warn("error reading company for a hard stop", "company", companyID, "error", err)
			return false, 0
		}
		switch {
		case co.Status == "active":
			st, reason := "paused", budgetPauseReason
			if _, err := c.updateCompanyBudget(ctx, &hostv1.UpdateCompanyBudgetRequest{CompanyId: companyID, Status: &st, PauseReason: &reason}); err != nil {
				c.log.Warn("error pausing company for budget", "company", companyID, "error", err)
				return false, 0
			}
			paused = true
			c.activity(ctx, nil, companyID, "company.paused", "company", companyID, map[string]any{"pauseReason": budgetPauseReason})
		case co.Status == "paused" && strOr(co.PauseReason, "") == budgetPauseReason:
			paused = true
		}
		cancelRuns(nil)
		return paused, cancelled
	}
	return false, 0
}

// resumeScope lifts a budget pause of a company, agent or project (other pauses stay) unless
// another open hard incident of the current window still covers the scope. It reports
// whether the scope was resumed.
func (c *Costs) resumeScope(ctx context.Context, actor *sdk.Actor, companyID, scopeType, scopeID string) (bool, error) {
	var blocking bool
	if err := c.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM budget_incidents WHERE company_id = $1 AND scope_type = $2
			AND scope_id = $3 AND threshold_type = 'hard' AND status = 'open' AND (window_end IS NULL OR window_end > now()))`,
		companyID, scopeType, scopeID).Scan(&blocking); err != nil {
		return false, fmt.Errorf("error checking open incidents: %w", err)
	}
	if blocking {
		return false, nil
	}
	switch scopeType {
	case scopeAgent:
		var ag struct {
			Status string `json:"status"`
		}
		err := c.host.Call(ctx, "agents.resumeFromBudget", actor, companyID, map[string]any{"agentId": scopeID}, &ag)
		if err != nil {
			if sdk.IsMethodNotProvided(err) {
				return false, nil
			}
			return false, fmt.Errorf("error resuming agent %s: %w", scopeID, err)
		}
		return ag.Status != "paused", nil
	case scopeProject:
		var out struct {
			Resumed bool `json:"resumed"`
		}
		err := c.host.Call(ctx, "work.projects.resumeFromBudget", actor, companyID, map[string]any{"projectId": scopeID}, &out)
		if err != nil {
			if sdk.IsMethodNotProvided(err) {
				return false, nil
			}
			return false, fmt.Errorf("error resuming project %s: %w", scopeID, err)
		}
		return out.Resumed, nil
	case scopeCompany:
		co, _, err := c.company(ctx, companyID)
		if err != nil {
			return false, err
		}
		if co.Status != "paused" || strOr(co.PauseReason, "") != budgetPauseReason {
			return false, nil
		}
		st, reason := "active", ""
		if _, err := c.updateCompanyBudget(ctx, &hostv1.UpdateCompanyBudgetRequest{CompanyId: companyID, Status: &st, PauseReason: &reason}); err != nil {
			return false, err
		}
		c.activity(ctx, actor, companyID, "company.resumed", "company", companyID, map[string]any{"previousPauseReason": budgetPauseReason})
		return true, nil
	}
	return false, nil
}

// observedNow is a policy's billed cents in its current window.
func (c *Costs) observedNow(ctx context.Context, db querier, pol *policy, now time.Time) (int64, error) {
	ws, we := pol.window(now)
	sums, err := c.sumScopes(ctx, db, pol.CompanyID, ws, we)
	if err != nil {
		return 0, err
	}
	return sums.sum(pol.ScopeType, pol.ScopeID), nil
}

// errIncidentNotFound is the answer for an incident outside the company.
var errIncidentNotFound = notFound("Budget incident not found")

// resolveBody is the body of POST …/budget-incidents/{incidentId}/resolve.
type resolveBody struct {
	Action string `json:"action" jsonschema:"required,enum=keep_paused,enum=raise_budget_and_resume"`
	// Amount is the new budget in cents, required when raising; it must exceed the spend
	// observed in the policy's current window.
	Amount       *int64  `json:"amount,omitempty" jsonschema:"minimum=0"`
	DecisionNote *string `json:"decisionNote,omitempty"`
}

// resolveIncident applies a board decision to an open incident. keep_paused closes it and
// leaves the scope paused; raise_budget_and_resume raises the policy amount above the
// observed spend, closes every open incident of the policy and resumes the scope.
func (c *Costs) resolveIncident(ctx context.Context, companyID, incidentID string, body *resolveBody) (*incident, error) {
	actor := sdk.ActorFrom(ctx)
	var p problems
	action := strings.TrimSpace(body.Action)
	if !slices.Contains(resolveActions, action) {
		p.add("action", "must be one of "+strings.Join(resolveActions, ", "))
	}
	if action == actionRaise {
		switch {
		case body.Amount == nil:
			p.add("amount", "is required when raising the budget")
		case *body.Amount < 0:
			p.add("amount", "must be a non-negative integer")
		}
	}
	note := optText(&p, "decisionNote", body.DecisionNote, 10000)
	if err := p.err(); err != nil {
		return nil, err
	}
	if !isUUID(incidentID) {
		return nil, errIncidentNotFound
	}
	lc, err := c.lockCompany(ctx, companyID)
	if err != nil {
		return nil, fmt.Errorf("error resolving budget incident: %w", err)
	}
	locked := true
	defer func() {
		if locked {
			lc.release(true)
		}
	}()
	inc, err := scanIncident(lc.QueryRow(ctx, `SELECT `+incidentColumns+` FROM budget_incidents WHERE id = $1 AND company_id = $2`,
		incidentID, companyID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errIncidentNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("error reading budget incident %s: %w", incidentID, err)
	}
	if inc.Status != incidentOpen {
		return nil, conflict("Budget incident is not open")
	}
	var userID *string
	if actor.UserId != "" {
		userID = &actor.UserId
	}
	details := map[string]any{"action": action, "scopeType": inc.ScopeType, "scopeId": inc.ScopeID, "policyId": inc.PolicyID,
		"thresholdType": inc.ThresholdType}
	if action == actionKeepPaused {
		if _, err := lc.Exec(ctx, `UPDATE budget_incidents SET status = 'resolved', resolution = $2, decision_note = $3,
			resolved_by_user_id = $4, resolved_at = now(), updated_at = now() WHERE id = $1`, inc.ID, action, note, userID); err != nil {
			return nil, fmt.Errorf("error resolving budget incident %s: %w", inc.ID, err)
		}
	} else {
		pol, err := scanPolicy(lc.QueryRow(ctx, `SELECT `+policyColumns+` FROM budget_policies WHERE id = $1`, inc.PolicyID))
		if err != nil {
			return nil, fmt.Errorf("error reading budget policy %s: %w", inc.PolicyID, err)
		}
		observed, err := c.observedNow(ctx, lc, pol, time.Now().UTC())
		if err != nil {
			return nil, err
		}
		if *body.Amount <= observed {
			return nil, invalid("amount", fmt.Sprintf("must be greater than the observed spend of %d cents", observed))
		}
		details["previousAmount"], details["amount"], details["amountObserved"] = pol.Amount, *body.Amount, observed
		if pol, err = scanPolicy(lc.QueryRow(ctx, `UPDATE budget_policies SET amount = $2, updated_at = now() WHERE id = $1
			RETURNING `+policyColumns, pol.ID, *body.Amount)); err != nil {
			return nil, fmt.Errorf("error raising budget policy %s: %w", inc.PolicyID, err)
		}
		if err := c.syncMonthlyBudget(ctx, pol); err != nil {
			return nil, err
		}
		// Every open incident of the policy was about the old amount.
		if _, err := lc.Exec(ctx, `UPDATE budget_incidents SET status = 'resolved', resolution = $3, decision_note = $4,
				resolved_by_user_id = $5, resolved_at = now(), updated_at = now()
			WHERE policy_id = $1 AND (id = $2 OR status = 'open')`, pol.ID, inc.ID, action, note, userID); err != nil {
			return nil, fmt.Errorf("error resolving budget incident %s: %w", inc.ID, err)
		}
		resumed, err := c.resumeScope(ctx, actor, companyID, inc.ScopeType, inc.ScopeID)
		if err != nil {
			return nil, err
		}
		details["resumed"] = resumed
	}
	lc.release(true)
	locked = false
	c.activity(ctx, actor, companyID, "budget.incident_resolved", "budget_incident", inc.ID, details)
	return scanIncident(c.pool.QueryRow(ctx, `SELECT `+incidentColumns+` FROM budget_incidents WHERE id = $1`, inc.ID))
}

// gateResult is the answer of costs.budgetGate.
type gateResult struct {
	Blocked    bool   `json:"blocked"`
	ScopeType  string `json:"scopeType"`
	ScopeID    string `json:"scopeId"`
	IncidentID string `json:"incidentId"`
	Reason     string `json:"reason"`
}

// budgetGate says whether budget enforcement blocks new work of an agent (and project): an
// open hard incident of the current window covering the company, the agent or the project
// blocks, and so does a scope left paused by a keep_paused decision while it stays paused
// for budget. An open incident of a window that has ended no longer blocks (the maintenance
// job dismisses it and lifts its pause).
func (c *Costs) budgetGate(ctx context.Context, companyID, agentID, projectID string) (*gateResult, error) {
	var agentArg, projectArg *string
	if isUUID(agentID) {
		agentArg = &agentID
	}
	if isUUID(projectID) {
		projectArg = &projectID
	}
	incs, err := c.queryIncidents(ctx, `SELECT `+incidentColumns+` FROM budget_incidents
		WHERE company_id = $1 AND threshold_type = 'hard'
		  AND ((scope_type = 'company' AND scope_id = $1) OR (scope_type = 'agent' AND scope_id = $2::uuid)
		    OR (scope_type = 'project' AND scope_id = $3::uuid))
		  AND ((status = 'open' AND (window_end IS NULL OR window_end > now()))
		    OR (status = 'resolved' AND resolution = 'keep_paused' AND scope_paused))
		ORDER BY (status = 'open') DESC, created_at DESC`, companyID, agentArg, projectArg)
	if err != nil {
		return nil, err
	}
	for _, inc := range incs {
		if inc.Status == incidentOpen {
			return &gateResult{Blocked: true, ScopeType: inc.ScopeType, ScopeID: inc.ScopeID, IncidentID: inc.ID,
				Reason: fmt.Sprintf("The %s budget is exhausted (%d of %d cents spent)", inc.ScopeType, inc.AmountObserved, inc.AmountLimit)}, nil
		}
		still, err := c.pausedForBudget(ctx, companyID, inc.ScopeType, inc.ScopeID)
		if err != nil {
			return nil, err
		}
		if !still {
			// Resumed by hand since: stop checking this decision.
			if _, err := c.pool.Exec(ctx, `UPDATE budget_incidents SET scope_paused = false, updated_at = now() WHERE id = $1`, inc.ID); err != nil {
				c.log.Warn("error clearing scope pause of incident", "incident", inc.ID, "error", err)
			}
			continue
		}
		return &gateResult{Blocked: true, ScopeType: inc.ScopeType, ScopeID: inc.ScopeID, IncidentID: inc.ID,
			Reason: fmt.Sprintf("The %s is paused by budget enforcement", inc.ScopeType)}, nil
	}
	return &gateResult{}, nil
}

// pausedForBudget asks the owner whether a scope is paused with pauseReason "budget".
func (c *Costs) pausedForBudget(ctx context.Context, companyID, scopeType, scopeID string) (bool, error) {
	switch scopeType {
	case scopeCompany:
		co, _, err := c.company(ctx, companyID)
		if err != nil {
			return false, err
		}
		return co.Status == "paused" && strOr(co.PauseReason, "") == budgetPauseReason, nil
	case scopeAgent:
		var ag struct {
			Status      string  `json:"status"`
			PauseReason *string `json:"pauseReason"`
		}
		err := c.host.Call(ctx, "agents.get", sdk.SystemActor(), companyID, map[string]any{"agentId": scopeID}, &ag)
		var se *sdk.Error
		switch {
		case err == nil:
			return ag.Status == "paused" && strOr(ag.PauseReason, "") == budgetPauseReason, nil
		case sdk.IsMethodNotProvided(err), errors.As(err, &se) && se.Status == http.StatusNotFound:
			return false, nil
		}
		return false, fmt.Errorf("error reading agent %s: %w", scopeID, err)
	case scopeProject:
		refs, ok, err := c.refs(ctx, companyID, []string{scopeID}, nil)
		if err != nil || !ok {
			return false, err
		}
		p := refs.project(scopeID)
		return p != nil && strOr(p.PauseReason, "") == budgetPauseReason, nil
	}
	return false, nil
}
