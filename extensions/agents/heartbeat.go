package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keelhq/keel/sdk"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

// Wake sources and trigger details (the wakeAgentSchema of REFERENCE 2.6).
var (
	wakeSources        = []string{"timer", "assignment", "on_demand", "automation"}
	wakeTriggerDetails = []string{"manual", "ping", "callback", "system"}
)

// wakeBody is the body of POST /api/agents/{agentId}/wakeup and /heartbeat/invoke.
type wakeBody struct {
	Source            string         `json:"source,omitempty"`
	TriggerDetail     string         `json:"triggerDetail,omitempty"`
	Reason            string         `json:"reason,omitempty"`
	Payload           map[string]any `json:"payload,omitempty"`
	IdempotencyKey    string         `json:"idempotencyKey,omitempty"`
	ForceFreshSession bool           `json:"forceFreshSession,omitempty"`
}

// wakeInput is one wake request, from a route, a provided method or the engine itself.
type wakeInput struct {
	AgentID           string
	CompanyID         string
	Source            string
	TriggerDetail     string
	Reason            string
	Payload           map[string]any
	IdempotencyKey    string
	ForceFreshSession bool
	Actor             *sdk.Actor
	// UserRequested makes an inactive company a 409 instead of a silent skip.
	UserRequested bool
	// RetryOf and RetryCount describe a retry of a process-lost or interrupted run; the
	// retry waits in scheduled_retry until RetryAt, for RetryReason.
	RetryOf     string
	RetryCount  int
	RetryAt     time.Time
	RetryReason string
}

// skippedWake is the answer to a suppressed wake.
type skippedWake struct {
	Status             string  `json:"status"`
	Reason             string  `json:"reason"`
	Message            string  `json:"message"`
	IssueID            *string `json:"issueId"`
	ExecutionRunID     *string `json:"executionRunId"`
	ExecutionAgentID   *string `json:"executionAgentId"`
	ExecutionAgentName *string `json:"executionAgentName"`
	// code is the recorded suppression reason (agent.paused, company.inactive, …).
	code string
}

// wakeOutcome is a queued (or coalesced, or idempotent) run, or a skip.
type wakeOutcome struct {
	Run     *heartbeatRun
	Skipped *skippedWake
}

func (o *wakeOutcome) body() any {
	if o.Skipped != nil {
		return o.Skipped
	}
	return o.Run
}

func init() {
	addRoutes(
		route{Method: "POST", Path: "/api/agents/{agentId}/wakeup", Body: wakeBody{}, Status: http.StatusAccepted,
			Summary: "Wake an agent: 202 with the queued heartbeat run, or 202 {status:\"skipped\"} when the wake is suppressed.",
			Handle:  func(a *Agents, rw http.ResponseWriter, r *http.Request) { a.wakeRoute(rw, r) }},
		route{Method: "POST", Path: "/api/agents/{agentId}/heartbeat/invoke", Body: wakeBody{}, Status: http.StatusAccepted,
			Summary: "Invoke an agent's heartbeat now (empty body allowed); same rules and answers as wakeup.",
			Handle:  func(a *Agents, rw http.ResponseWriter, r *http.Request) { a.wakeRoute(rw, r) }},
	)
}

func (a *Agents) wakeRoute(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	agent, err := a.agentIdentity(ctx, r.PathValue("agentId"))
	if err != nil {
		a.writeErr(rw, err)
		return
	}
	if err := requireCompanyAccess(ctx, agent.CompanyId); err != nil {
		a.writeErr(rw, err)
		return
	}
	actor := sdk.ActorFrom(ctx)
	if actor != nil && actor.Type == "agent" && actor.AgentId != agent.Id {
		a.writeErr(rw, forbidden("Agent can only invoke itself"))
		return
	}
	var body wakeBody
	if err := decodeBody(r, &body); err != nil {
		a.writeErr(rw, err)
		return
	}
	if err := a.requireValidOrgChain(ctx, agent); err != nil {
		a.writeErr(rw, err)
		return
	}
	out, err := a.engine.wakeup(ctx, &wakeInput{
		AgentID: agent.Id, CompanyID: agent.CompanyId, Source: body.Source, TriggerDetail: body.TriggerDetail,
		Reason: body.Reason, Payload: body.Payload, IdempotencyKey: body.IdempotencyKey,
		ForceFreshSession: body.ForceFreshSession, Actor: actor, UserRequested: actor != nil && actor.Type == "board",
	})
	if err != nil {
		a.writeErr(rw, err)
		return
	}
	details := map[string]any{"agentId": agent.Id, "source": orDefault(body.Source, "on_demand"), "reason": body.Reason}
	entityType, entityID := "heartbeat_run", ""
	if out.Run != nil {
		entityID = out.Run.ID
		details["runId"] = out.Run.ID
	} else {
		entityType, entityID = "agent", agent.Id
		details["skipped"] = true
		details["skipReason"] = out.Skipped.code
	}
	if err := a.activity(ctx, agent.CompanyId, "heartbeat.invoked", entityType, entityID, details); err != nil {
		a.log.Warn("error logging heartbeat.invoked", "error", err)
	}
	sdk.WriteJSON(rw, http.StatusAccepted, out.body())
}

// requireValidOrgChain refuses (409) to wake an agent whose chain of command runs through
// a terminated or pending-approval manager (REFERENCE 2.6: an invalid org chain gives 409).
func (a *Agents) requireValidOrgChain(ctx context.Context, agent *hostv1.AgentIdentity) error {
	r, err := a.loadRoster(ctx, agent.CompanyId)
	if err != nil {
		return err
	}
	ag := r.byID[agent.Id]
	if ag == nil {
		return nil
	}
	if bad := r.invalidAncestor(ag); bad != nil {
		e := conflict(fmt.Sprintf("Agent's chain of command is invalid: manager %s is %s", bad.ID.Name, bad.ID.Status))
		e.Code = "invalid_org_chain"
		return e
	}
	return nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// agentIdentity reads the kernel identity of an agent (404 "Agent not found").
func (a *Agents) agentIdentity(ctx context.Context, id string) (*hostv1.AgentIdentity, error) {
	if !isUUID(id) {
		return nil, notFound("Agent not found")
	}
	ag, err := a.host.Principals.GetAgent(ctx, &hostv1.GetAgentRequest{AgentId: id})
	if status.Code(err) == codes.NotFound {
		return nil, notFound("Agent not found")
	}
	if err != nil {
		return nil, fmt.Errorf("error reading agent %s: %w", id, err)
	}
	return ag, nil
}

// companyStatus reads a company's status from the kernel.
func (a *Agents) companyStatus(ctx context.Context, companyID string) (string, error) {
	res, err := a.host.Companies.Get(ctx, &hostv1.GetCompanyRequest{CompanyId: companyID})
	if status.Code(err) == codes.NotFound {
		return "", notFound("Company not found")
	}
	if err != nil {
		return "", fmt.Errorf("error reading company %s: %w", companyID, err)
	}
	var c struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(res.CompanyJson, &c); err != nil {
		return "", fmt.Errorf("error decoding company %s: %w", companyID, err)
	}
	return c.Status, nil
}

// wakeup applies the wake rules (REFERENCE 3 step 3): the idempotency key returns the run
// of an earlier wake with the same key; a suppressed wake is recorded as a skipped wakeup
// request with its reason; a queued run of the agent for the same issue absorbs the wake
// (coalescedCount++); otherwise a wakeup request and a queued run are inserted and the
// start-runs job is enqueued.
func (e *engine) wakeup(ctx context.Context, in *wakeInput) (*wakeOutcome, error) {
	a := e.a
	if in.Source == "" {
		in.Source = "on_demand"
	}
	if !slices.Contains(wakeSources, in.Source) {
		return nil, invalid("source", "must be one of timer, assignment, on_demand, automation")
	}
	if in.TriggerDetail != "" && !slices.Contains(wakeTriggerDetails, in.TriggerDetail) {
		return nil, invalid("triggerDetail", "must be one of manual, ping, callback, system")
	}
	if in.Payload == nil {
		in.Payload = map[string]any{}
	}
	if run, err := e.runByIdempotencyKey(ctx, a.pool, in); err != nil || run != nil {
		return &wakeOutcome{Run: run}, err
	}
	agent, err := a.agentIdentity(ctx, in.AgentID)
	if err != nil {
		return nil, err
	}
	if in.CompanyID != "" && in.CompanyID != agent.CompanyId {
		return nil, notFound("Agent not found")
	}
	in.CompanyID = agent.CompanyId
	issueID, _ := in.Payload["issueId"].(string)
	if skip, err := e.suppression(ctx, in, agent, issueID); err != nil {
		return nil, err
	} else if skip != nil {
		if err := e.recordSkip(ctx, in, skip); err != nil {
			return nil, err
		}
		if skip.code == "company.inactive" && in.UserRequested {
			return nil, conflict("Company is not active")
		}
		return &wakeOutcome{Skipped: skip}, nil
	}
	run, err := e.queueRun(ctx, in, issueID)
	if err != nil {
		return nil, err
	}
	e.enqueueStart(ctx, in.AgentID)
	return &wakeOutcome{Run: run}, nil
}

// suppression returns why a wake must be skipped, or nil.
func (e *engine) suppression(ctx context.Context, in *wakeInput, agent *hostv1.AgentIdentity, issueID string) (*skippedWake, error) {
	a := e.a
	skip := func(code, msg string) *skippedWake {
		s := &skippedWake{Status: "skipped", Reason: "wakeup_skipped", Message: msg, code: code}
		if issueID != "" {
			s.IssueID = &issueID
		}
		return s
	}
	switch agent.Status {
	case "paused":
		return skip("agent.paused", "Agent is paused"), nil
	case "terminated":
		return skip("agent.terminated", "Agent is terminated"), nil
	case "pending_approval":
		return skip("agent.pending_approval", "Agent is pending approval"), nil
	}
	cs, err := a.companyStatus(ctx, agent.CompanyId)
	if err != nil {
		return nil, err
	}
	if cs != "" && cs != "active" {
		return skip("company.inactive", "Company is not active"), nil
	}
	if author, _ := in.Payload["commentAuthorAgentId"].(string); author != "" && author == agent.Id {
		return skip("comment.self_authored", "Agent authored the comment"), nil
	}
	// wakeOnDemand=false refuses every wake but the timer's (assignment, comment, routine,
	// manual), as the reference does: it is how a board stops an agent from taking work
	// without pausing it.
	if in.Source != "timer" {
		if rc, _ := a.runtimeConfig(ctx, agent.Id); rc != nil && rc.Heartbeat.WakeOnDemand != nil && !*rc.Heartbeat.WakeOnDemand {
			return skip("heartbeat.wakeOnDemand.disabled", "Agent does not accept wakes outside its heartbeat timer"), nil
		}
	}
	var iss *issueLocks
	if issueID != "" {
		iss = e.issueLocks(ctx, agent.CompanyId, issueID)
	}
	projectID, _ := in.Payload["projectId"].(string)
	if iss != nil && iss.ProjectID != nil {
		projectID = *iss.ProjectID
	}
	if gate := e.budgetGate(ctx, agent.CompanyId, agent.Id, projectID); gate.Blocked {
		return skip("budget.blocked", fmt.Sprintf("Budget hard stop: the %s budget is exhausted", gate.ScopeType)), nil
	}
	if iss != nil {
		holder, err := e.issueHolder(ctx, iss, agent.Id)
		if err != nil {
			return nil, err
		}
		if holder != nil {
			s := skip("issue.execution_locked", "Issue is already being executed by another run")
			s.ExecutionRunID, s.ExecutionAgentID = &holder.ID, &holder.AgentID
			if ag, err := a.agentIdentity(ctx, holder.AgentID); err == nil {
				s.ExecutionAgentName = &ag.Name
			}
			return s, nil
		}
	}
	return nil, nil
}

// issueLocks is what a wake needs to know about its issue.
type issueLocks struct {
	Found          bool    `json:"found"`
	ExecutionRunID *string `json:"executionRunId"`
	CheckoutRunID  *string `json:"checkoutRunId"`
	ProjectID      *string `json:"projectId"`
}

// issueLocks reads the wake's issue from the work extension (work.issues.locks, one indexed
// row); an unknown issue or a missing work extension gives nil, which holds nothing.
func (e *engine) issueLocks(ctx context.Context, companyID, issueID string) *issueLocks {
	var iss issueLocks
	if err := e.a.host.Call(ctx, "work.issues.locks", sdk.SystemActor(), companyID, map[string]string{"id": issueID}, &iss); err != nil {
		e.a.log.Debug("issue lock unknown", "issue", issueID, "error", err)
		return nil
	}
	if !iss.Found {
		return nil
	}
	return &iss
}

// issueHolder returns the live run of another agent that holds the issue's execution or
// checkout lock, or nil.
func (e *engine) issueHolder(ctx context.Context, iss *issueLocks, agentID string) (*heartbeatRun, error) {
	for _, id := range []*string{iss.ExecutionRunID, iss.CheckoutRunID} {
		if id == nil || *id == "" {
			continue
		}
		run, err := e.a.runGet(ctx, e.a.pool, *id)
		if err != nil {
			return nil, err
		}
		if run != nil && run.AgentID != agentID && (run.Status == runQueued || run.Status == runRunning) {
			return run, nil
		}
	}
	return nil, nil
}

// budgetVerdict is the costs extension's answer to costs.budgetGate.
type budgetVerdict struct {
	Blocked    bool   `json:"blocked"`
	ScopeType  string `json:"scopeType"`
	ScopeID    string `json:"scopeId"`
	IncidentID string `json:"incidentId"`
	Reason     string `json:"reason"`
}

// budgetGate asks the costs extension whether a hard budget stop covers the company, the
// agent or the project. Without a costs extension nothing is blocked; an error is logged
// and does not block, since a hard stop also pauses its scope, which the other rules see.
func (e *engine) budgetGate(ctx context.Context, companyID, agentID, projectID string) budgetVerdict {
	var v budgetVerdict
	in := map[string]string{"companyId": companyID, "agentId": agentID}
	if projectID != "" {
		in["projectId"] = projectID
	}
	err := e.a.host.Call(ctx, "costs.budgetGate", sdk.SystemActor(), companyID, in, &v)
	switch {
	case err == nil:
		return v
	case sdk.IsMethodNotProvided(err):
	default:
		e.a.log.Warn("error asking the budget gate; waking", "agent", agentID, "error", err)
	}
	return budgetVerdict{}
}

func actorColumns(actor *sdk.Actor) (typ, id *string) {
	if actor == nil {
		return nil, nil
	}
	t := actor.Type
	switch actor.Type {
	case "agent":
		return &t, &actor.AgentId
	case "board":
		u := "user"
		return &u, &actor.UserId
	}
	return &t, nil
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// recordSkip writes a skipped wakeup request with the suppression reason.
func (e *engine) recordSkip(ctx context.Context, in *wakeInput, skip *skippedWake) error {
	payload, _ := json.Marshal(in.Payload)
	at, aid := actorColumns(in.Actor)
	_, err := e.a.pool.Exec(ctx, `INSERT INTO agent_wakeup_requests (id, company_id, agent_id, source, trigger_detail, reason, payload,
		status, requested_by_actor_type, requested_by_actor_id, idempotency_key, finished_at, error)
		VALUES ($1, $2, $3, $4, $5, $6, $7, 'skipped', $8, $9, $10, now(), $11)`,
		uuid.NewString(), in.CompanyID, in.AgentID, in.Source, nullable(in.TriggerDetail), nullable(in.Reason), payload,
		at, aid, nullable(in.IdempotencyKey), skip.code)
	if err != nil {
		return fmt.Errorf("error recording skipped wake of agent %s: %w", in.AgentID, err)
	}
	return nil
}

// runByIdempotencyKey returns the run of an earlier wake of the agent with the same key.
func (e *engine) runByIdempotencyKey(ctx context.Context, q querier, in *wakeInput) (*heartbeatRun, error) {
	if in.IdempotencyKey == "" {
		return nil, nil
	}
	var runID string
	err := q.QueryRow(ctx, `SELECT run_id FROM agent_wakeup_requests
		WHERE agent_id = $1 AND idempotency_key = $2 AND run_id IS NOT NULL ORDER BY requested_at LIMIT 1`,
		in.AgentID, in.IdempotencyKey).Scan(&runID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("error looking up idempotency key: %w", err)
	}
	return e.a.runGet(ctx, q, runID)
}

// wakeContext is the run's context snapshot built from the wake.
func wakeContext(in *wakeInput, issueID string) map[string]any {
	c := map[string]any{"wakeSource": in.Source}
	if in.TriggerDetail != "" {
		c["wakeTriggerDetail"] = in.TriggerDetail
	}
	if in.Reason != "" {
		c["wakeReason"] = in.Reason
	}
	if issueID != "" {
		c["issueId"], c["taskId"], c["taskKey"] = issueID, issueID, issueID
	}
	for _, k := range []string{"commentId", "approvalId", "approvalStatus", "linkedIssueIds"} {
		if v, ok := in.Payload[k]; ok {
			c[k] = v
		}
	}
	if len(in.Payload) > 0 {
		c["payload"] = in.Payload
	}
	if in.ForceFreshSession {
		c["forceFreshSession"] = true
	}
	return c
}

// queueRun coalesces the wake into a queued run of the agent for the same issue, or
// inserts a wakeup request and a queued run, under a per-agent lock.
func (e *engine) queueRun(ctx context.Context, in *wakeInput, issueID string) (*heartbeatRun, error) {
	a := e.a
	tx, err := a.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("error queueing run: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('agents.wake:' || $1))`, in.AgentID); err != nil {
		return nil, fmt.Errorf("error locking agent wakes: %w", err)
	}
	if run, err := e.runByIdempotencyKey(ctx, tx, in); err != nil || run != nil {
		return run, err
	}
	payload, _ := json.Marshal(in.Payload)
	at, aid := actorColumns(in.Actor)
	wakeID := uuid.NewString()
	if in.RetryOf == "" {
		existing, err := scanRun(tx.QueryRow(ctx, `SELECT `+runColumns+` FROM heartbeat_runs
			WHERE agent_id = $1 AND status = 'queued' AND coalesce(context_snapshot->>'issueId', '') = $2
			ORDER BY created_at LIMIT 1 FOR UPDATE`, in.AgentID, issueID))
		switch {
		case err == nil:
			if existing.WakeupRequestID != nil {
				if _, err := tx.Exec(ctx, `UPDATE agent_wakeup_requests SET coalesced_count = coalesced_count + 1 WHERE id = $1`,
					*existing.WakeupRequestID); err != nil {
					return nil, fmt.Errorf("error coalescing wake: %w", err)
				}
			}
			if _, err := tx.Exec(ctx, `INSERT INTO agent_wakeup_requests (id, company_id, agent_id, source, trigger_detail, reason,
				payload, status, requested_by_actor_type, requested_by_actor_id, idempotency_key, run_id, finished_at)
				VALUES ($1, $2, $3, $4, $5, $6, $7, 'coalesced', $8, $9, $10, $11, now())`,
				wakeID, in.CompanyID, in.AgentID, in.Source, nullable(in.TriggerDetail), nullable(in.Reason), payload,
				at, aid, nullable(in.IdempotencyKey), existing.ID); err != nil {
				return nil, fmt.Errorf("error recording coalesced wake: %w", err)
			}
			if err := tx.Commit(ctx); err != nil {
				return nil, fmt.Errorf("error coalescing wake: %w", err)
			}
			return existing, nil
		case !errors.Is(err, pgx.ErrNoRows):
			return nil, fmt.Errorf("error looking for a queued run: %w", err)
		}
	}
	runID := uuid.NewString()
	if _, err := tx.Exec(ctx, `INSERT INTO agent_wakeup_requests (id, company_id, agent_id, source, trigger_detail, reason, payload,
		status, requested_by_actor_type, requested_by_actor_id, idempotency_key, run_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7, 'queued', $8, $9, $10, $11)`,
		wakeID, in.CompanyID, in.AgentID, in.Source, nullable(in.TriggerDetail), nullable(in.Reason), payload,
		at, aid, nullable(in.IdempotencyKey), runID); err != nil {
		return nil, fmt.Errorf("error recording wake: %w", err)
	}
	snapshot, _ := json.Marshal(wakeContext(in, issueID))
	initial, retryAt, retryAttempt := runQueued, (*time.Time)(nil), 0
	if in.RetryOf != "" && !in.RetryAt.IsZero() {
		initial, retryAt, retryAttempt = runScheduledRetry, &in.RetryAt, in.RetryCount
	}
	run, err := scanRun(tx.QueryRow(ctx, `INSERT INTO heartbeat_runs (id, company_id, agent_id, invocation_source, trigger_detail,
		status, wakeup_request_id, context_snapshot, retry_of_run_id, process_loss_retry_count,
		scheduled_retry_at, scheduled_retry_attempt, scheduled_retry_reason)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) RETURNING `+runColumns,
		runID, in.CompanyID, in.AgentID, in.Source, nullable(in.TriggerDetail), initial, wakeID, snapshot, nullable(in.RetryOf),
		in.RetryCount, retryAt, retryAttempt, nullable(in.RetryReason)))
	if err != nil {
		return nil, fmt.Errorf("error inserting run: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("error queueing run: %w", err)
	}
	return run, nil
}
