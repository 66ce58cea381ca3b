package work

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/keelhq/keel/sdk"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

// Issue-graph liveness auto-recovery (spec part 2 "Instance-admin routes"): find the issues
// whose execution is stuck and put them back where work can pick them up. The work graph
// owns the issues; the state of runs comes from the agents owner (agents.runStatuses) and
// the state of agents from the kernel (Principals).

func init() {
	addRoutes(
		route{Method: "POST", Path: "/api/instance/settings/experimental/issue-graph-liveness-auto-recovery/preview",
			Access: sdk.AccessInstanceAdmin, Body: LivenessRequest{}, Response: new(LivenessReport),
			Summary: "List the issues whose execution is stuck (in_progress with a dead or missing run, blocked with every blocker " +
				"resolved, assigned to a terminated agent) and the change recovery would make to each; changes nothing",
			Handle: (*Work).livenessPreviewRoute},
		route{Method: "POST", Path: "/api/instance/settings/experimental/issue-graph-liveness-auto-recovery/run",
			Access: sdk.AccessInstanceAdmin, Body: LivenessRequest{}, Response: new(LivenessReport),
			Summary: "Apply the changes the preview lists, each only while the issue is still as the scan saw it, with one " +
				"issue.liveness_recovered activity entry per changed issue",
			Handle: (*Work).livenessRunRoute},
	)
}

// Kinds of stuck issues.
const (
	// LivenessDeadRun is an in_progress issue whose run has ended.
	LivenessDeadRun = "dead_run"
	// LivenessMissingRun is an in_progress issue of an agent with no run, or a run nobody knows.
	LivenessMissingRun = "missing_run"
	// LivenessBlockersResolved is a blocked issue whose blockers are all done.
	LivenessBlockersResolved = "blockers_resolved"
	// LivenessTerminatedAssignee is an open issue assigned to a terminated agent.
	LivenessTerminatedAssignee = "terminated_assignee"
)

// Liveness scan limits.
const (
	defaultLivenessStaleAfter = 300
	maxLivenessStaleAfter     = 7 * 24 * 3600
	defaultLivenessLimit      = 500
	maxLivenessLimit          = 1000
)

// liveRunStatuses are the run statuses that still hold an issue's execution.
var liveRunStatuses = []string{"queued", "running", "scheduled_retry"}

// LivenessRequest is the body of the preview and run routes.
type LivenessRequest struct {
	// CompanyID limits the scan to one company (default: every company).
	CompanyID string `json:"companyId,omitempty"`
	// IssueIDs limits the scan to these issues (a run may apply exactly what a preview listed).
	IssueIDs []string `json:"issueIds,omitempty"`
	// StaleAfterSeconds skips issues changed more recently than this (default 300; 0 to 604800),
	// so work that is just starting is left alone.
	StaleAfterSeconds *int `json:"staleAfterSeconds,omitempty" jsonschema:"minimum=0,maximum=604800"`
	// Limit caps the findings (default 500, at most 1000).
	Limit *int `json:"limit,omitempty" jsonschema:"minimum=1,maximum=1000"`
}

// LivenessChange is what recovery does to one issue.
type LivenessChange struct {
	Status LivenessStatusChange `json:"status"`
	// AssigneeAgentID is set when the agent assignee is removed (to null).
	AssigneeAgentID *LivenessAssigneeChange `json:"assigneeAgentId,omitempty"`
	// ClearExecution clears the checkout and execution runs and the execution lock.
	ClearExecution bool `json:"clearExecution"`
	// WakeAssignee wakes the agent assignee for the issue once it is changed.
	WakeAssignee bool `json:"wakeAssignee"`
}

// LivenessStatusChange is a status move (from and to may be equal).
type LivenessStatusChange struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// LivenessAssigneeChange is the removal of an agent assignee.
type LivenessAssigneeChange struct {
	From string  `json:"from"`
	To   *string `json:"to"`
}

// LivenessFinding is one stuck issue and the change recovery makes to it.
type LivenessFinding struct {
	IssueID         string  `json:"issueId"`
	CompanyID       string  `json:"companyId"`
	Identifier      string  `json:"identifier"`
	Title           string  `json:"title"`
	Kind            string  `json:"kind" jsonschema:"enum=dead_run,enum=missing_run,enum=blockers_resolved,enum=terminated_assignee"`
	Reason          string  `json:"reason"`
	Status          string  `json:"status"`
	AssigneeAgentID *string `json:"assigneeAgentId"`
	CheckoutRunID   *string `json:"checkoutRunId"`
	ExecutionRunID  *string `json:"executionRunId"`
	// RunStatus is the status of the issue's run, when the agents owner knows it.
	RunStatus *string        `json:"runStatus,omitempty"`
	Change    LivenessChange `json:"change"`
	// Outcome is set by a run: applied, or skipped (the issue changed since the scan).
	Outcome string `json:"outcome,omitempty" jsonschema:"enum=applied,enum=skipped"`

	updatedAt time.Time
}

// LivenessReport is the answer of preview and run.
type LivenessReport struct {
	DryRun            bool    `json:"dryRun"`
	CompanyID         *string `json:"companyId"`
	StaleAfterSeconds int     `json:"staleAfterSeconds"`
	// Checked counts the issues examined.
	Checked  int                `json:"checked"`
	Findings []*LivenessFinding `json:"findings"`
	// Counts counts the findings by kind.
	Counts map[string]int `json:"counts"`
	// Truncated is true when more issues are stuck than limit allowed to list.
	Truncated bool `json:"truncated"`
	// Applied and Skipped count a run's outcomes (0 in a preview).
	Applied int `json:"applied"`
	Skipped int `json:"skipped"`
	// RunStatusesKnown is false when no agents owner answered, so in_progress issues with a
	// run id could not be judged (only those without any run are listed).
	RunStatusesKnown bool      `json:"runStatusesKnown"`
	ScannedAt        time.Time `json:"scannedAt"`
}

func (w *Work) livenessPreviewRoute(rw http.ResponseWriter, r *http.Request) {
	w.livenessServe(rw, r, true)
}
func (w *Work) livenessRunRoute(rw http.ResponseWriter, r *http.Request) {
	w.livenessServe(rw, r, false)
}

func (w *Work) livenessServe(rw http.ResponseWriter, r *http.Request, dryRun bool) {
	ctx := r.Context()
	var body LivenessRequest
	if err := decodeBody(r, &body); err != nil {
		w.writeErr(rw, err)
		return
	}
	p, err := body.params()
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	report, err := w.livenessScan(ctx, p)
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	report.DryRun = dryRun
	if !dryRun {
		if err := w.livenessApply(ctx, report); err != nil {
			w.writeErr(rw, err)
			return
		}
	}
	sdk.WriteJSON(rw, http.StatusOK, report)
}

// livenessParams is a validated LivenessRequest.
type livenessParams struct {
	companyID  string
	issueIDs   []string
	staleAfter int
	limit      int
}

func (b *LivenessRequest) params() (*livenessParams, error) {
	p := &livenessParams{staleAfter: defaultLivenessStaleAfter, limit: defaultLivenessLimit}
	var d []validationDetail
	if c := strings.TrimSpace(b.CompanyID); c != "" {
		if !isUUID(c) {
			d = append(d, validationDetail{Path: "companyId", Message: "must be a UUID"})
		}
		p.companyID = strings.ToLower(c)
	}
	if len(b.IssueIDs) > maxLivenessLimit {
		d = append(d, validationDetail{Path: "issueIds", Message: fmt.Sprintf("must hold at most %d ids", maxLivenessLimit)})
	}
	for i, id := range b.IssueIDs {
		if !isUUID(id) {
			d = append(d, validationDetail{Path: fmt.Sprintf("issueIds[%d]", i), Message: "must be a UUID"})
			continue
		}
		p.issueIDs = append(p.issueIDs, strings.ToLower(id))
	}
	if s := b.StaleAfterSeconds; s != nil {
		if *s < 0 || *s > maxLivenessStaleAfter {
			d = append(d, validationDetail{Path: "staleAfterSeconds", Message: fmt.Sprintf("must be between 0 and %d", maxLivenessStaleAfter)})
		}
		p.staleAfter = *s
	}
	if l := b.Limit; l != nil {
		if *l < 1 || *l > maxLivenessLimit {
			d = append(d, validationDetail{Path: "limit", Message: fmt.Sprintf("must be between 1 and %d", maxLivenessLimit)})
		}
		p.limit = *l
	}
	if len(d) > 0 {
		return nil, validationError(d...)
	}
	return p, nil
}

// livenessCandidatesSQL reads the open issues that may be stuck: in_progress and blocked
// ones (with their blocker counts and whether an approval holds them), and those assigned
// to one of the terminated agents ($5), changed no later than the stale cut-off ($2).
const livenessCandidatesSQL = `SELECT i.id::text, i.company_id::text, i.identifier, i.title, i.status, i.assignee_agent_id::text,
	i.assignee_user_id, i.checkout_run_id, i.execution_run_id, i.updated_at,
	(SELECT count(*) FROM issue_relations r WHERE r.related_issue_id = i.id AND r.type = 'blocks'),
	(SELECT count(*) FROM issue_relations r JOIN issues b ON b.id = r.issue_id
		WHERE r.related_issue_id = i.id AND r.type = 'blocks' AND b.status <> 'done'),
	EXISTS (SELECT 1 FROM issue_approvals ia JOIN approvals a ON a.id = ia.approval_id
		WHERE ia.issue_id = i.id AND a.status IN ('pending', 'revision_requested'))
FROM issues i
WHERE i.updated_at <= now() - make_interval(secs => $2)
	AND ($1 = '' OR i.company_id::text = $1)
	AND (cardinality($3::uuid[]) = 0 OR i.id = ANY($3::uuid[]))
	AND (i.status IN ('in_progress', 'blocked')
		OR (i.status IN ('backlog', 'todo', 'in_review') AND i.assignee_agent_id = ANY($4::uuid[])))
ORDER BY i.updated_at, i.id`

type livenessCandidate struct {
	f                   LivenessFinding
	assigneeUserID      *string
	blockers            int
	unresolvedBlockers  int
	pendingApproval     bool
	terminatedAssignee  bool
	runID               string
	runStatusKnown      bool
	runStatus, runFound string
}

// livenessScan finds the stuck issues and the change recovery would make to each.
func (w *Work) livenessScan(ctx context.Context, p *livenessParams) (*LivenessReport, error) {
	report := &LivenessReport{StaleAfterSeconds: p.staleAfter, Findings: []*LivenessFinding{}, Counts: map[string]int{},
		ScannedAt: time.Now().UTC()}
	if p.companyID != "" {
		report.CompanyID = &p.companyID
	}
	terminated, err := w.livenessTerminatedAgents(ctx, p.companyID)
	if err != nil {
		return nil, err
	}
	termIDs := make([]string, 0, len(terminated))
	for id := range terminated {
		termIDs = append(termIDs, id)
	}
	issueIDs := p.issueIDs
	if issueIDs == nil {
		issueIDs = []string{}
	}
	rows, err := w.pool.Query(ctx, livenessCandidatesSQL, p.companyID, p.staleAfter, issueIDs, termIDs)
	if err != nil {
		return nil, fmt.Errorf("error scanning issues for liveness: %w", err)
	}
	var cands []*livenessCandidate
	for rows.Next() {
		c := &livenessCandidate{}
		f := &c.f
		if err := rows.Scan(&f.IssueID, &f.CompanyID, &f.Identifier, &f.Title, &f.Status, &f.AssigneeAgentID, &c.assigneeUserID,
			&f.CheckoutRunID, &f.ExecutionRunID, &f.updatedAt, &c.blockers, &c.unresolvedBlockers, &c.pendingApproval); err != nil {
			rows.Close()
			return nil, fmt.Errorf("error scanning issues for liveness: %w", err)
		}
		c.terminatedAssignee = f.AssigneeAgentID != nil && terminated[*f.AssigneeAgentID]
		if f.ExecutionRunID != nil && *f.ExecutionRunID != "" {
			c.runID = *f.ExecutionRunID
		} else if f.CheckoutRunID != nil && *f.CheckoutRunID != "" {
			c.runID = *f.CheckoutRunID
		}
		cands = append(cands, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error scanning issues for liveness: %w", err)
	}
	report.Checked = len(cands)
	statuses, known, err := w.livenessRunStatuses(ctx, cands)
	if err != nil {
		return nil, err
	}
	report.RunStatusesKnown = known
	for _, c := range cands {
		f := livenessJudge(c, statuses, known)
		if f == nil {
			continue
		}
		if len(report.Findings) == p.limit {
			report.Truncated = true
			break
		}
		report.Findings = append(report.Findings, f)
		report.Counts[f.Kind]++
	}
	return report, nil
}

// livenessTerminatedAgents returns the terminated agents of the companies that have open
// issues assigned to agents (or of the one company asked for), from the kernel.
func (w *Work) livenessTerminatedAgents(ctx context.Context, companyID string) (map[string]bool, error) {
	companies := []string{companyID}
	if companyID == "" {
		companies = nil
		rows, err := w.pool.Query(ctx, `SELECT DISTINCT company_id::text FROM issues
			WHERE assignee_agent_id IS NOT NULL AND status NOT IN ('done', 'cancelled')`)
		if err != nil {
			return nil, fmt.Errorf("error listing companies with assigned issues: %w", err)
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return nil, fmt.Errorf("error listing companies with assigned issues: %w", err)
			}
			companies = append(companies, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("error listing companies with assigned issues: %w", err)
		}
	}
	out := map[string]bool{}
	for _, c := range companies {
		res, err := w.host.Principals.ListAgents(ctx, &hostv1.ListAgentsRequest{CompanyId: c, IncludeTerminated: true})
		if err != nil {
			return nil, fmt.Errorf("error listing agents of company %s: %w", c, err)
		}
		for _, a := range res.Agents {
			if a.Status == "terminated" {
				out[strings.ToLower(a.Id)] = true
			}
		}
	}
	return out, nil
}

// livenessRunStatus is one run as agents.runStatuses reports it.
type livenessRunStatus struct {
	Status string `json:"status"`
}

// livenessRunStatuses asks the agents owner for the runs the in_progress candidates name,
// up to 1000 per call; known is false when no agents owner is loaded.
func (w *Work) livenessRunStatuses(ctx context.Context, cands []*livenessCandidate) (map[string]livenessRunStatus, bool, error) {
	var ids []string
	for _, c := range cands {
		if c.f.Status == "in_progress" && c.runID != "" && isUUID(c.runID) && !slices.Contains(ids, c.runID) {
			ids = append(ids, c.runID)
		}
	}
	out := map[string]livenessRunStatus{}
	for start := 0; start < len(ids); start += 1000 {
		chunk := ids[start:min(start+1000, len(ids))]
		var res struct {
			Runs map[string]livenessRunStatus `json:"runs"`
		}
		err := w.host.Call(ctx, "agents.runStatuses", sdk.SystemActor(), "", map[string]any{"runIds": chunk}, &res)
		if sdk.IsMethodNotProvided(err) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("error reading run statuses from the agents owner: %w", err)
		}
		for id, s := range res.Runs {
			out[strings.ToLower(id)] = s
		}
	}
	return out, true, nil
}

// livenessJudge decides whether a candidate is stuck and what recovery does to it; nil when
// it is not stuck (or cannot be judged).
func livenessJudge(c *livenessCandidate, runs map[string]livenessRunStatus, runsKnown bool) *LivenessFinding {
	f := c.f
	f.Change.Status = LivenessStatusChange{From: f.Status, To: f.Status}
	switch {
	case c.terminatedAssignee:
		f.Kind = LivenessTerminatedAssignee
		f.Reason = "assigned to a terminated agent"
		f.Change.AssigneeAgentID = &LivenessAssigneeChange{From: *f.AssigneeAgentID}
		f.Change.ClearExecution = true
		if f.Status == "in_progress" {
			f.Change.Status.To = "todo"
		}
	case f.Status == "in_progress":
		if f.AssigneeAgentID == nil {
			return nil // a person works it; no run is expected
		}
		switch {
		case c.runID == "":
			f.Kind, f.Reason = LivenessMissingRun, "in_progress without a run"
		case !isUUID(c.runID):
			f.Kind, f.Reason = LivenessMissingRun, "in_progress with a run id no run has"
		case !runsKnown:
			return nil
		default:
			run, ok := runs[strings.ToLower(c.runID)]
			switch {
			case !ok:
				f.Kind, f.Reason = LivenessMissingRun, "in_progress with a run that does not exist"
			case slices.Contains(liveRunStatuses, run.Status):
				return nil
			default:
				status := run.Status
				f.RunStatus = &status
				f.Kind, f.Reason = LivenessDeadRun, "in_progress with a run that ended ("+status+")"
			}
		}
		f.Change.Status.To = "todo"
		f.Change.ClearExecution = true
		f.Change.WakeAssignee = true
	case f.Status == "blocked":
		if c.blockers == 0 || c.unresolvedBlockers > 0 || c.pendingApproval {
			return nil
		}
		f.Kind, f.Reason = LivenessBlockersResolved, "blocked while every blocker is done"
		f.Change.Status.To = "todo"
		f.Change.WakeAssignee = f.AssigneeAgentID != nil
	default:
		return nil
	}
	return &f
}

// livenessUpdateSQL applies a finding's change only while the issue is as the scan saw it
// (status, agent assignee and runs).
const livenessUpdateSQL = `UPDATE issues SET status = ?to,
	assignee_agent_id = CASE WHEN ?clearAssignee THEN NULL ELSE assignee_agent_id END,
	checkout_run_id = CASE WHEN ?clearExecution THEN NULL ELSE checkout_run_id END,
	execution_run_id = CASE WHEN ?clearExecution THEN NULL ELSE execution_run_id END,
	execution_agent_name_key = CASE WHEN ?clearExecution THEN NULL ELSE execution_agent_name_key END,
	execution_locked_at = CASE WHEN ?clearExecution THEN NULL ELSE execution_locked_at END,
	updated_at = now()
WHERE id = ?id AND status = ?from AND assignee_agent_id IS NOT DISTINCT FROM ?assignee::uuid
	AND checkout_run_id IS NOT DISTINCT FROM ?checkout::text AND execution_run_id IS NOT DISTINCT FROM ?execution::text
	AND updated_at = ?updatedAt`

// livenessApply applies each finding in its own transaction, with its activity entry and the
// assignee's wake in the outbox of that transaction; a finding whose issue changed since the
// scan is skipped.
func (w *Work) livenessApply(ctx context.Context, report *LivenessReport) error {
	for _, f := range report.Findings {
		var fx effects
		applied := false
		err := w.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			out, err := newIssueStore(tx).issueUpdateReturning(ctx, livenessUpdateSQL, issueSQLArgs{
				"id": f.IssueID, "to": f.Change.Status.To, "from": f.Status, "assignee": f.AssigneeAgentID,
				"checkout": f.CheckoutRunID, "execution": f.ExecutionRunID, "updatedAt": f.updatedAt,
				"clearAssignee": f.Change.AssigneeAgentID != nil, "clearExecution": f.Change.ClearExecution})
			if err != nil || out == nil {
				return err
			}
			applied = true
			if err := w.activityTx(ctx, tx, &fx, f.CompanyID, "issue.liveness_recovered", "issue", f.IssueID, map[string]any{
				"identifier": f.Identifier, "kind": f.Kind, "reason": f.Reason, "change": f.Change, "runStatus": f.RunStatus,
				"previousCheckoutRunId": f.CheckoutRunID, "previousExecutionRunId": f.ExecutionRunID}); err != nil {
				return err
			}
			if f.Change.WakeAssignee && out.AssigneeAgentID != nil {
				return w.wakeTx(ctx, tx, &fx, &WakeRequest{AgentID: *out.AssigneeAgentID, CompanyID: f.CompanyID, Source: "automation",
					Reason: "issue_liveness_recovered", Payload: map[string]any{"issueId": f.IssueID, "kind": f.Kind},
					IdempotencyKey: "liveness:" + f.IssueID + ":" + out.UpdatedAt.UTC().Format(time.RFC3339Nano)})
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("error recovering issue %s: %w", f.IssueID, err)
		}
		w.deliver(ctx, &fx)
		if applied {
			f.Outcome = "applied"
			report.Applied++
		} else {
			f.Outcome = "skipped"
			report.Skipped++
		}
	}
	return nil
}
