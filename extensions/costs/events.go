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
)

// Billing types and cost statuses of a cost event (spec part 1 "Cost event").
var (
	billingTypes = []string{"metered_api", "subscription_included", "subscription_overage", "credits", "fixed", "unknown"}
	costStatuses = []string{"reported", "unpriced"}
)

const (
	costStatusUnpriced = "unpriced"
	textMax            = 200
)

func init() {
	addRoutes(route{Method: "POST", Path: "/api/companies/{companyId}/cost-events", Status: http.StatusCreated, Response: new(CostEvent), CompanyFromPath: true,
		Summary: "Report a cost event (agents report only their own); recalculates spend and evaluates budget policies",
		Body:    costEventBody{}, Handle: handleCostEventCreate})
	addMethods(map[string]method{
		"recordRunCost": {
			Description: "Record the usage of a heartbeat run as a cost event: input {companyId, agentId, heartbeatRunId, issueId?, " +
				"provider, biller?, model, billingType?, costStatus?, costCents, inputTokens?, cachedInputTokens?, outputTokens?, " +
				"occurredAt}. Stored like POST cost-events by the system; idempotent per heartbeatRunId (a repeat returns the " +
				"first event). Output: the event.",
			Call: callRecordRunCost,
		},
	})
}

// CostEvent is a row of cost_events and its API shape. An unpriced event (costStatus
// "unpriced") keeps its token counts and carries costCents 0: its money figure is unknown,
// which costStatus says, and it adds nothing to billed spend.
type CostEvent struct {
	ID                string    `json:"id"`
	CompanyID         string    `json:"companyId"`
	AgentID           string    `json:"agentId"`
	IssueID           *string   `json:"issueId"`
	ProjectID         *string   `json:"projectId"`
	GoalID            *string   `json:"goalId"`
	HeartbeatRunID    *string   `json:"heartbeatRunId"`
	BillingCode       *string   `json:"billingCode"`
	Provider          string    `json:"provider"`
	Biller            string    `json:"biller"`
	BillingType       string    `json:"billingType"`
	CostStatus        string    `json:"costStatus"`
	Model             string    `json:"model"`
	InputTokens       int64     `json:"inputTokens"`
	CachedInputTokens int64     `json:"cachedInputTokens"`
	OutputTokens      int64     `json:"outputTokens"`
	CostCents         int64     `json:"costCents"`
	OccurredAt        time.Time `json:"occurredAt"`
	CreatedAt         time.Time `json:"createdAt"`
	// windowedPolicy is set on an event just stored when an active budget policy with a
	// window other than the calendar month (lifetime) covered its company, agent or project
	// as it was stored; see settleNeeded. Not part of the API shape.
	windowedPolicy bool
}

const costEventColumns = `id::text, company_id::text, agent_id::text, issue_id::text, project_id::text, goal_id::text,
	heartbeat_run_id::text, billing_code, provider, biller, billing_type, cost_status, model, input_tokens,
	cached_input_tokens, output_tokens, cost_cents, occurred_at, created_at`

func scanCostEvent(row pgx.Row) (*CostEvent, error) {
	e := new(CostEvent)
	err := row.Scan(costEventDest(e)...)
	return e, err
}

func costEventDest(e *CostEvent) []any {
	return []any{&e.ID, &e.CompanyID, &e.AgentID, &e.IssueID, &e.ProjectID, &e.GoalID, &e.HeartbeatRunID, &e.BillingCode,
		&e.Provider, &e.Biller, &e.BillingType, &e.CostStatus, &e.Model, &e.InputTokens, &e.CachedInputTokens,
		&e.OutputTokens, &e.CostCents, &e.OccurredAt, &e.CreatedAt}
}

// storedEventColumns are the columns the insert statements return for each event of their
// CTE ev: costEventColumns, then whether an active policy with a window other than the
// calendar month covers the event's company, agent or project (see settleNeeded). Asking in
// the insert costs no round trip; budget_policies is small and indexed by company.
const storedEventColumns = costEventColumns + `, EXISTS (SELECT 1 FROM budget_policies p
		WHERE p.company_id = ev.company_id AND p.window_kind <> 'calendar_month_utc' AND p.is_active AND p.amount > 0
		  AND (p.scope_type = 'company' OR (p.scope_type = 'agent' AND p.scope_id = ev.agent_id)
		    OR (p.scope_type = 'project' AND p.scope_id = ev.project_id)))`

// scanStoredEvent reads a row of storedEventColumns.
func scanStoredEvent(row pgx.Row) (*CostEvent, error) {
	e := new(CostEvent)
	err := row.Scan(append(costEventDest(e), &e.windowedPolicy)...)
	return e, err
}

// costEventBody is the body of POST /api/companies/{companyId}/cost-events.
type costEventBody struct {
	AgentID        string  `json:"agentId" jsonschema:"required"`
	Provider       string  `json:"provider" jsonschema:"required"`
	Model          string  `json:"model" jsonschema:"required"`
	CostCents      *int64  `json:"costCents,omitempty" jsonschema:"minimum=0"`
	OccurredAt     string  `json:"occurredAt" jsonschema:"required"`
	IssueID        *string `json:"issueId,omitempty"`
	ProjectID      *string `json:"projectId,omitempty"`
	GoalID         *string `json:"goalId,omitempty"`
	HeartbeatRunID *string `json:"heartbeatRunId,omitempty"`
	// BillingCode is a free accounting label.
	BillingCode *string `json:"billingCode,omitempty"`
	// Biller defaults to the provider.
	Biller      *string `json:"biller,omitempty"`
	BillingType *string `json:"billingType,omitempty" jsonschema:"enum=metered_api,enum=subscription_included,enum=subscription_overage,enum=credits,enum=fixed,enum=unknown"`
	// CostStatus "unpriced" keeps the tokens and marks the money unknown (costCents 0).
	CostStatus        *string `json:"costStatus,omitempty" jsonschema:"enum=reported,enum=unpriced"`
	InputTokens       *int64  `json:"inputTokens,omitempty" jsonschema:"minimum=0"`
	CachedInputTokens *int64  `json:"cachedInputTokens,omitempty" jsonschema:"minimum=0"`
	OutputTokens      *int64  `json:"outputTokens,omitempty" jsonschema:"minimum=0"`
}

// costInput is a validated cost event about to be stored.
type costInput struct {
	CostEvent
	// Source is "api" or "run".
	Source string
}

// validate checks the body's own fields and applies the defaults (biller = provider,
// billingType unknown, costStatus reported).
func (b *costEventBody) validate(companyID string) (*costInput, problems) {
	var p problems
	in := &costInput{Source: "api"}
	e := &in.CostEvent
	e.ID, e.CompanyID = uuid.NewString(), companyID
	e.AgentID = strings.ToLower(strings.TrimSpace(b.AgentID))
	switch {
	case e.AgentID == "":
		p.add("agentId", "is required")
	case !isUUID(e.AgentID):
		p.add("agentId", "must be a UUID")
	}
	e.Provider = cleanText(&p, "provider", b.Provider, textMax)
	if e.Provider == "" {
		p.add("provider", "is required")
	}
	e.Model = cleanText(&p, "model", b.Model, textMax)
	if e.Model == "" {
		p.add("model", "is required")
	}
	e.Biller = e.Provider
	if v := optText(&p, "biller", b.Biller, textMax); v != nil {
		e.Biller = *v
	}
	e.BillingType = strings.TrimSpace(strOr(b.BillingType, "unknown"))
	if !slices.Contains(billingTypes, e.BillingType) {
		p.add("billingType", "must be one of "+strings.Join(billingTypes, ", "))
	}
	e.CostStatus = strings.TrimSpace(strOr(b.CostStatus, "reported"))
	if !slices.Contains(costStatuses, e.CostStatus) {
		p.add("costStatus", "must be one of "+strings.Join(costStatuses, ", "))
	}
	switch {
	case b.CostCents == nil && e.CostStatus != costStatusUnpriced:
		p.add("costCents", "is required")
	case b.CostCents != nil && *b.CostCents < 0:
		p.add("costCents", "must be a non-negative integer")
	case b.CostCents != nil && *b.CostCents != 0 && e.CostStatus == costStatusUnpriced:
		p.add("costCents", "must be 0 or absent for an unpriced event (its cost is unknown)")
	case b.CostCents != nil:
		e.CostCents = *b.CostCents
	}
	for _, f := range []struct {
		path string
		v    *int64
		dst  *int64
	}{{"inputTokens", b.InputTokens, &e.InputTokens}, {"cachedInputTokens", b.CachedInputTokens, &e.CachedInputTokens},
		{"outputTokens", b.OutputTokens, &e.OutputTokens}} {
		if f.v == nil {
			continue
		}
		if *f.v < 0 {
			p.add(f.path, "must be a non-negative integer")
			continue
		}
		*f.dst = *f.v
	}
	if strings.TrimSpace(b.OccurredAt) == "" {
		p.add("occurredAt", "is required")
	} else if t, ok := parseInstant(b.OccurredAt); !ok {
		p.add("occurredAt", "must be an ISO 8601 date-time")
	} else {
		e.OccurredAt = t
	}
	e.IssueID = optUUID(&p, "issueId", b.IssueID)
	e.ProjectID = optUUID(&p, "projectId", b.ProjectID)
	e.GoalID = optUUID(&p, "goalId", b.GoalID)
	e.HeartbeatRunID = optUUID(&p, "heartbeatRunId", b.HeartbeatRunID)
	e.BillingCode = optText(&p, "billingCode", b.BillingCode, textMax)
	return in, p
}

func handleCostEventCreate(c *Costs, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := r.PathValue("companyId")
	var body costEventBody
	if err := decodeBody(r, &body); err != nil {
		c.writeErr(rw, err)
		return
	}
	in, p := body.validate(companyID)
	if err := p.err(); err != nil {
		c.writeErr(rw, err)
		return
	}
	actor := sdk.ActorFrom(ctx)
	if actor.Type == "agent" && actor.AgentId != in.AgentID {
		c.writeErr(rw, forbidden("Agents can only report their own costs"))
		return
	}
	ev, err := c.recordCost(ctx, actor, in, true)
	if err != nil {
		c.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusCreated, ev)
}

func callRecordRunCost(c *Costs, ctx context.Context, call *sdk.MethodCall) (any, error) {
	var body struct {
		costEventBody
		CompanyID string `json:"companyId"`
	}
	if err := call.Bind(&body); err != nil {
		return nil, err
	}
	companyID, err := callCompany(call, body.CompanyID)
	if err != nil {
		return nil, err
	}
	if body.HeartbeatRunID == nil || !isUUID(*body.HeartbeatRunID) {
		return nil, invalid("heartbeatRunId", "must be a UUID")
	}
	in, p := body.validate(companyID)
	if err := p.err(); err != nil {
		return nil, err
	}
	in.Source = "run"
	return c.recordCost(ctx, callActor(call), in, false)
}

// recordCost checks a cost event's references, stores it with its rollups, settles the
// company's spend (spentMonthlyCents of the company and agent, budget policies) and logs
// cost.reported. strict refuses attribution to issues, projects, goals or runs the company
// does not have; otherwise (run usage) an unknown issue is kept without deriving from it.
// A run's usage already recorded returns the first event unchanged.
func (c *Costs) recordCost(ctx context.Context, actor *sdk.Actor, in *costInput, strict bool) (*CostEvent, error) {
	e := &in.CostEvent
	agentCompany, err := c.companyOf(ctx, e.AgentID)
	if err != nil {
		return nil, err
	}
	if agentCompany != e.CompanyID {
		return nil, invalid("agentId", "must be an agent of this company")
	}
	if err := c.checkAttribution(ctx, e, strict); err != nil {
		return nil, err
	}
	stored, inserted, err := c.insertCost(ctx, in)
	if err != nil {
		return nil, err
	}
	if !inserted {
		return stored, nil
	}
	// The activity entry and the settling of the spend are independent: do them side by side.
	logged := make(chan struct{})
	go func() {
		defer close(logged)
		c.activity(ctx, actor, stored.CompanyID, "cost.reported", "cost_event", stored.ID, map[string]any{
			"agentId": stored.AgentID, "costCents": stored.CostCents, "costStatus": stored.CostStatus, "provider": stored.Provider,
			"biller": stored.Biller, "model": stored.Model, "billingType": stored.BillingType, "heartbeatRunId": stored.HeartbeatRunID,
			"issueId": stored.IssueID, "projectId": stored.ProjectID, "inputTokens": stored.InputTokens, "outputTokens": stored.OutputTokens,
		})
	}()
	if settleNeeded(stored, time.Now()) {
		if err := c.spend.do(ctx, stored.CompanyID, stored.AgentID, strOr(stored.ProjectID, "")); err != nil {
			// The event is stored; the next event or the maintenance job settles the spend again.
			c.log.Warn("error settling spend after a cost event", "company", stored.CompanyID, "event", stored.ID, "error", err)
		}
	}
	<-logged
	return stored, nil
}

// settleNeeded reports whether a cost event just stored can change what settling its
// company's spend computes, so that the request must wait for a settle.
//
// An event without billed cents (unpriced, subscription-included) changes no spend and
// crosses no threshold. An event outside the current UTC month (the seeding of history, a
// late report) changes no monthly figure: spentMonthlyCents of the company and the agents,
// and the observed amount of every calendar_month_utc policy, are sums over the current
// month's rollups. It can only matter to a policy whose window holds it, which today is a
// lifetime policy of its company, agent or project, and the insert statement says whether
// one was active (storedEventColumns). With none, the settle would write the same figures
// and open no incident, so it is skipped; the event is stored and counted in every read.
//
// The policies are read in the insert's snapshot instead of at settle time, a few
// milliseconds later. A lifetime policy committed in between (on this node or another) is
// not evaluated for this event; storing a policy does not evaluate it either, so the same
// holds for any policy created after an event. Such a policy is evaluated at the next
// settle of its scope (every settle evaluates the company's policy; an agent's or
// project's at their next event) and, at the latest, by the maintenance job, which opens
// the incidents that lifetime policies are due (catchUpLifetimePolicies).
func settleNeeded(e *CostEvent, now time.Time) bool {
	if e.CostCents <= 0 {
		return false
	}
	ms, me := monthWindow(now)
	return e.windowedPolicy || (!e.OccurredAt.Before(ms) && e.OccurredAt.Before(me))
}

// attribution is what a cost or finance event is attributed to.
type attribution struct {
	CompanyID string
	AgentID   string
	IssueID   *string
	ProjectID *string
	GoalID    *string
	RunID     *string
}

// checkAttribution validates a cost event's references and fills its project and goal
// from its issue.
func (c *Costs) checkAttribution(ctx context.Context, e *CostEvent, strict bool) error {
	at := &attribution{CompanyID: e.CompanyID, AgentID: e.AgentID, IssueID: e.IssueID, ProjectID: e.ProjectID, GoalID: e.GoalID,
		RunID: e.HeartbeatRunID}
	if err := c.checkRefs(ctx, at, strict); err != nil {
		return err
	}
	e.ProjectID, e.GoalID = at.ProjectID, at.GoalID
	return nil
}

// checkRefs validates the issue, project, goal and run an event names with their owners
// (skipped when an owner is not loaded) and fills the project and goal from the issue when
// the event names none. strict refuses references the company does not have; otherwise
// (run usage) unknown projects and goals are dropped and an unknown issue is kept as is.
func (c *Costs) checkRefs(ctx context.Context, at *attribution, strict bool) error {
	var p problems
	if at.IssueID != nil || at.ProjectID != nil || at.GoalID != nil {
		// One call to the work owner looks up the issue, with its project and goal, and the
		// project and goal the event names.
		var issues, projects, goals []string
		if at.IssueID != nil {
			issues = []string{*at.IssueID}
		}
		if at.ProjectID != nil {
			projects = []string{*at.ProjectID}
		}
		if at.GoalID != nil {
			goals = []string{*at.GoalID}
		}
		refs, ok, err := c.refsWithIssues(ctx, at.CompanyID, issues, projects, goals)
		if err != nil {
			return err
		}
		if ok {
			if at.IssueID != nil {
				if iss := refs.issue(*at.IssueID); iss == nil {
					p.add("issueId", "must be an issue of this company")
				} else {
					if at.ProjectID == nil {
						at.ProjectID = iss.ProjectID
					}
					if at.GoalID == nil {
						at.GoalID = iss.GoalID
					}
				}
			}
			if at.ProjectID != nil && refs.project(*at.ProjectID) == nil {
				p.add("projectId", "must be a project of this company")
				if !strict {
					at.ProjectID = nil
				}
			}
			if at.GoalID != nil && !refs.hasGoal(*at.GoalID) {
				p.add("goalId", "must be a goal of this company")
				if !strict {
					at.GoalID = nil
				}
			}
		}
	}
	if at.RunID != nil && strict {
		var run struct {
			Found   bool   `json:"found"`
			AgentID string `json:"agentId"`
		}
		err := c.host.Call(ctx, "agents.runStatus", sdk.SystemActor(), at.CompanyID, map[string]any{"runId": *at.RunID}, &run)
		switch {
		case err == nil:
			if !run.Found {
				p.add("heartbeatRunId", "must be a heartbeat run of this company")
			} else if at.AgentID != "" && run.AgentID != at.AgentID {
				p.add("heartbeatRunId", "must be a heartbeat run of this agent")
			}
		case sdk.IsMethodNotProvided(err):
		default:
			return fmt.Errorf("error reading heartbeat run %s: %w", *at.RunID, err)
		}
	}
	if !strict {
		return nil
	}
	return p.err()
}

// rollupAddSQL adds the rollup rows an INSERT INTO cost_rollups AS r proposes to the rows
// already there (every measure is a sum).
const rollupAddSQL = `ON CONFLICT ON CONSTRAINT cost_rollups_key DO UPDATE SET
		cost_cents = r.cost_cents + excluded.cost_cents, input_tokens = r.input_tokens + excluded.input_tokens,
		cached_input_tokens = r.cached_input_tokens + excluded.cached_input_tokens,
		output_tokens = r.output_tokens + excluded.output_tokens, event_count = r.event_count + excluded.event_count,
		run_count = r.run_count + excluded.run_count`

// insertCostSQL stores one cost event and adds it to its hourly, daily and monthly rollups
// in one statement. A run's usage recorded twice inserts nothing (the statement returns no row).
const insertCostSQL = `WITH ev AS (
	INSERT INTO cost_events (id, company_id, agent_id, issue_id, project_id, goal_id, heartbeat_run_id, billing_code, provider,
		biller, billing_type, cost_status, model, input_tokens, cached_input_tokens, output_tokens, cost_cents, occurred_at,
		source, counts_run)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19,
		$7::uuid IS NOT NULL AND NOT EXISTS (SELECT 1 FROM cost_events WHERE heartbeat_run_id = $7::uuid))
	ON CONFLICT (heartbeat_run_id) WHERE source = 'run' DO NOTHING
	RETURNING *
), roll AS (
	INSERT INTO cost_rollups AS r (company_id, grain, bucket, agent_id, project_id, provider, biller, billing_type, model,
		cost_cents, input_tokens, cached_input_tokens, output_tokens, event_count, run_count)
	SELECT ev.company_id, g.grain, date_trunc(g.unit, ev.occurred_at, 'UTC'),
		ev.agent_id, ev.project_id, ev.provider, ev.biller, ev.billing_type, ev.model, ev.cost_cents, ev.input_tokens,
		ev.cached_input_tokens, ev.output_tokens, 1, ev.counts_run::int
	FROM ev CROSS JOIN (VALUES ('h', 'hour'), ('d', 'day'), ('m', 'month')) AS g (grain, unit)
	` + rollupAddSQL + `
)
SELECT ` + storedEventColumns + ` FROM ev`

// insertCost stores a cost event. inserted is false when the run's usage was already
// recorded; the stored event is then the earlier one.
func (c *Costs) insertCost(ctx context.Context, in *costInput) (*CostEvent, bool, error) {
	e := &in.CostEvent
	if e.HeartbeatRunID == nil {
		// One statement, no transaction: the event and its rollups commit together, in a
		// group with the events reported at the same time.
		stored, err := c.writer.write(ctx, in)
		if err != nil {
			return nil, false, err
		}
		return stored, true, nil
	}
	tx, err := c.pool.Begin(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("error storing cost event: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	// Serialize the events of one run, so that exactly one of them counts the run.
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 7))`, "costs-run:"+*e.HeartbeatRunID); err != nil {
		return nil, false, fmt.Errorf("error storing cost event: %w", err)
	}
	stored, err := scanStoredEvent(tx.QueryRow(ctx, insertCostSQL, insertCostArgs(in)...))
	inserted := true
	if errors.Is(err, pgx.ErrNoRows) {
		inserted = false
		stored, err = scanCostEvent(tx.QueryRow(ctx, `SELECT `+costEventColumns+` FROM cost_events
			WHERE heartbeat_run_id = $1 AND source = 'run'`, e.HeartbeatRunID))
	}
	if err != nil {
		return nil, false, fmt.Errorf("error storing cost event: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, false, fmt.Errorf("error storing cost event: %w", err)
	}
	return stored, inserted, nil
}

// insertCostArgs returns the arguments of insertCostSQL for in.
func insertCostArgs(in *costInput) []any {
	e := &in.CostEvent
	return []any{e.ID, e.CompanyID, e.AgentID, e.IssueID, e.ProjectID, e.GoalID, e.HeartbeatRunID, e.BillingCode, e.Provider, e.Biller,
		e.BillingType, e.CostStatus, e.Model, e.InputTokens, e.CachedInputTokens, e.OutputTokens, e.CostCents, e.OccurredAt, in.Source}
}
