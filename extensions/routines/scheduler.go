package routines

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelhq/keel/sdk"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

// The schedule ticker. tick(ctx, now) is the whole scheduler: it claims every enabled
// schedule trigger of an active routine whose nextRunAt is due at now, advances nextRunAt
// past now, and records the runs the claimed ticks stand for. A manifest interval job calls
// it with the wall clock; routines.tick calls it with any instant, so tests run a day of
// schedules in milliseconds.
//
// Exactly once: the claim is a conditional UPDATE … WHERE id = $1 AND next_run_at = $old,
// so of two hosts ticking at once only one moves a trigger past a tick, and runs are unique
// on (trigger_id, scheduled_for), so a tick is never recorded twice.
//
// Catch-up after downtime (missed ticks are those in [nextRunAt, now]):
//   - skip_missed collapses them into one run, for the latest missed tick (what the
//     reference product does: a routine that was down fires once when it comes back, not
//     never, so an overdue tick found a few seconds late is not lost either);
//   - enqueue_missed_with_cap records one run per missed tick, the latest 25 of them.
//
// Then, per claimed trigger: a routine whose project is paused (pauseReason set) records a
// skipped run (failureReason "paused"); with require_external_activity the activity gate
// may record a skipped run (failureReason "no_external_activity"); otherwise the runs are
// dispatched. nextRunAt has moved in every case, so skipped ticks are never replayed.

const jobTick = "tick"

// tickEvery is how often the ticker job runs; schedules have minute resolution.
const tickEvery = "20s"

func init() {
	addJobs(sdk.Job{Key: jobTick, Every: tickEvery,
		Description: "Fire due schedule triggers (claim each tick once across hosts), apply catch-up, paused-project and " +
			"activity-gate rules, and complete runs left received."})
}

// Activity actions the gate ignores (spec part 1 "Activity gate rules" 1).
var gateIgnoredActions = []string{"issue.read_marked", "issue.read_unmarked", "issue.inbox_archived", "issue.inbox_unarchived"}

// Activity gate paging.
const (
	gatePageSize = 500
	gateMaxPages = 100
	tickBatch    = 200
	tickMaxBatch = 50
)

// TickRun is one run a tick recorded.
type TickRun struct {
	ID           string    `json:"id"`
	RoutineID    string    `json:"routineId"`
	TriggerID    string    `json:"triggerId"`
	Status       string    `json:"status"`
	ScheduledFor time.Time `json:"scheduledFor"`
}

// TickResult is what one tick did.
type TickResult struct {
	Now time.Time `json:"now"`
	// Claimed counts the triggers this tick moved past a due tick.
	Claimed int       `json:"claimed"`
	Runs    []TickRun `json:"runs"`
	// Recovered counts runs left received that this tick completed.
	Recovered int `json:"recovered"`
}

// tickJob runs the ticker with the wall clock unless the scheduler is off.
func (x *Routines) tickJob(ctx context.Context) error {
	if x.cfg.Scheduler == "off" {
		return nil
	}
	_, err := x.tick(ctx, time.Now())
	return err
}

// tick fires every schedule trigger due at now.
func (x *Routines) tick(ctx context.Context, now time.Time) (*TickResult, error) {
	res := &TickResult{Now: now.UTC(), Runs: []TickRun{}}
	if n, err := x.completeStaleRuns(ctx); err != nil {
		x.log.Warn("error completing stale routine runs", "error", err)
	} else {
		res.Recovered = n
	}
	for range tickMaxBatch {
		rows, err := x.pool.Query(ctx, `SELECT `+qualify(triggerCols, "t")+`, `+qualify(routineCols, "r")+`
			FROM routine_triggers t JOIN routines r ON r.id = t.routine_id
			WHERE t.kind = 'schedule' AND t.enabled AND t.next_run_at <= $1 AND r.status = 'active'
			ORDER BY t.next_run_at, t.id LIMIT $2`, now, tickBatch)
		if err != nil {
			return res, fmt.Errorf("error listing due schedule triggers: %w", err)
		}
		type due struct {
			t  *Trigger
			rt *Routine
		}
		var batch []due
		for rows.Next() {
			var t Trigger
			var rt Routine
			var vars []byte
			if err := rows.Scan(append(t.dest(), rt.dest(&vars)...)...); err != nil {
				rows.Close()
				return res, fmt.Errorf("error reading due schedule trigger: %w", err)
			}
			if err := rt.decodeVariables(vars); err != nil {
				rows.Close()
				return res, err
			}
			batch = append(batch, due{&t, &rt})
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return res, fmt.Errorf("error listing due schedule triggers: %w", err)
		}
		for _, d := range batch {
			if err := x.tickTrigger(ctx, d.t, d.rt, now, res); err != nil {
				x.log.Warn("error firing schedule trigger", "trigger", d.t.ID, "routine", d.rt.ID, "error", err)
			}
		}
		if len(batch) < tickBatch {
			break
		}
	}
	return res, nil
}

// tickTrigger claims one due trigger and records its runs.
func (x *Routines) tickTrigger(ctx context.Context, t *Trigger, rt *Routine, now time.Time, res *TickResult) error {
	old := *t.NextRunAt
	sched, err := parseSchedule(deref(t.CronExpression), deref(t.Timezone))
	if err != nil {
		// A schedule that no longer parses stops rather than being retried every tick.
		_, err := x.pool.Exec(ctx, `UPDATE routine_triggers SET next_run_at = NULL, last_result = $3, updated_at = clock_timestamp()
			WHERE id = $1 AND next_run_at = $2`, t.ID, old, "Invalid schedule: "+err.Error())
		return err
	}
	var next *time.Time
	if n := sched.next(now); !n.IsZero() {
		next = &n
	}
	tag, err := x.pool.Exec(ctx, `UPDATE routine_triggers SET next_run_at = $3, updated_at = clock_timestamp()
		WHERE id = $1 AND next_run_at = $2 AND enabled`, t.ID, old, next)
	if err != nil {
		return fmt.Errorf("error claiming schedule tick: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return nil // another host claimed it
	}
	res.Claimed++
	limit := 1
	if rt.CatchUpPolicy == catchUpEnqueueCap {
		limit = maxCatchUpRuns
	}
	ticks := sched.dueTicks(old, now, limit)
	if len(ticks) == 0 {
		ticks = []time.Time{old}
	}
	latest := ticks[len(ticks)-1]
	note := func(run *Run, tick time.Time) {
		if run != nil {
			res.Runs = append(res.Runs, TickRun{ID: run.ID, RoutineID: rt.ID, TriggerID: t.ID, Status: run.Status, ScheduledFor: tick.UTC()})
		}
	}
	if paused, err := x.projectPaused(ctx, rt); err != nil {
		x.log.Warn("error reading routine project; firing anyway", "routine", rt.ID, "error", err)
	} else if paused {
		run, err := x.recordSkip(ctx, rt, t, sourceSchedule, &latest, reasonProjectPaused, nil)
		note(run, latest)
		return ignoreTaken(err)
	}
	if rt.ActivityGatePolicy == gateRequire {
		fire, windowStart, err := x.evaluateGate(ctx, rt, now)
		if err != nil {
			x.log.Warn("activity gate failed; firing", "routine", rt.ID, "error", err)
		} else if !fire {
			var ws any
			if windowStart != nil {
				ws = windowStart.UTC().Format(time.RFC3339Nano)
			}
			run, err := x.recordSkip(ctx, rt, t, sourceSchedule, &latest, reasonNoActivity,
				map[string]any{"activityGate": map[string]any{"verdict": "quiet", "windowStart": ws}})
			note(run, latest)
			return ignoreTaken(err)
		}
	}
	for _, tick := range ticks {
		run, _, err := x.dispatch(ctx, &dispatchInput{routine: rt, trigger: t, source: sourceSchedule, scheduledFor: &tick,
			systemID: actorScheduler, now: tick})
		if err := ignoreTaken(err); err != nil {
			return err
		}
		note(run, tick)
	}
	return nil
}

func ignoreTaken(err error) error {
	if errors.Is(err, errTickTaken) {
		return nil
	}
	return err
}

// projectPaused reports whether the routine's project is paused (pauseReason set).
func (x *Routines) projectPaused(ctx context.Context, rt *Routine) (bool, error) {
	if rt.ProjectID == nil {
		return false, nil
	}
	p, err := x.project(ctx, rt.CompanyID, *rt.ProjectID)
	if err != nil {
		return false, err
	}
	return p != nil && p.PauseReason != nil, nil
}

// activityEntry is an activity log entry as Activity.Query returns it.
type activityEntry struct {
	ID         string          `json:"id"`
	ActorType  string          `json:"actorType"`
	ActorID    string          `json:"actorId"`
	Action     string          `json:"action"`
	EntityType string          `json:"entityType"`
	EntityID   string          `json:"entityId"`
	RunID      *string         `json:"runId"`
	Details    json.RawMessage `json:"details"`
	CreatedAt  time.Time       `json:"createdAt"`
}

// evaluateGate applies the activity gate at a tick (spec part 1 "Activity gate rules"):
// the tick fires when an entry recorded after the routine's last dispatched run (skipped
// and coalesced runs do not count) and no later than now counts as external activity. The
// first tick of a routine that never dispatched always fires. windowStart is the instant
// measured from (nil on a first tick).
func (x *Routines) evaluateGate(ctx context.Context, rt *Routine, now time.Time) (bool, *time.Time, error) {
	var start time.Time
	err := x.pool.QueryRow(ctx, `SELECT triggered_at FROM routine_runs WHERE routine_id = $1 AND status NOT IN ('skipped', 'coalesced')
		ORDER BY triggered_at DESC, id DESC LIMIT 1`, rt.ID).Scan(&start)
	if errors.Is(err, pgx.ErrNoRows) {
		return true, nil, nil
	}
	if err != nil {
		return false, nil, fmt.Errorf("error reading the last dispatched run: %w", err)
	}
	if rt.ActivityGateScope == scopeProject && rt.ProjectID == nil {
		return false, &start, nil
	}
	g := &gateScan{x: x, rt: rt, runIssues: map[string]string{}, issueProjects: map[string]string{}, local: map[string]string{}}
	after, afterID := start, ""
	for range gateMaxPages {
		req := &hostv1.QueryActivityRequest{CompanyId: rt.CompanyID, After: after.UTC().Format(time.RFC3339Nano), AfterId: afterID,
			Until: now.UTC().Format(time.RFC3339Nano), ExcludeActions: gateIgnoredActions, Limit: gatePageSize}
		resp, err := x.host.Activity.Query(ctx, req)
		if err != nil {
			return false, &start, fmt.Errorf("error reading activity: %w", err)
		}
		var entries []activityEntry
		if err := json.Unmarshal(resp.EntriesJson, &entries); err != nil {
			return false, &start, fmt.Errorf("error reading activity: %w", err)
		}
		for i := range entries {
			counts, err := g.counts(ctx, &entries[i])
			if err != nil {
				return false, &start, err
			}
			if counts {
				return true, &start, nil
			}
		}
		if len(entries) < gatePageSize {
			return false, &start, nil
		}
		last := entries[len(entries)-1]
		after, afterID = last.CreatedAt, last.ID
	}
	x.log.Warn("activity gate scan limit reached; firing", "routine", rt.ID)
	return true, &start, nil
}

// gateScan classifies activity entries for one gate evaluation, caching what it looks up.
type gateScan struct {
	x  *Routines
	rt *Routine
	// execIssues are the execution issues this routine created (loaded on first use).
	execIssues map[string]bool
	// runIssues maps agent run ids to their context issue.
	runIssues map[string]string
	// issueProjects maps issue ids to their project ("" for none).
	issueProjects map[string]string
	// local maps routine, trigger and run ids of this extension to their routine's project.
	local map[string]string
}

// counts reports whether an entry is external activity for the routine.
func (g *gateScan) counts(ctx context.Context, e *activityEntry) (bool, error) {
	var details map[string]any
	if len(e.Details) > 0 {
		_ = json.Unmarshal(e.Details, &details)
	}
	str := func(k string) string { s, _ := details[k].(string); return s }
	// Written by the routine scheduler about this routine.
	if e.ActorType == "system" && e.ActorID == actorScheduler &&
		(str("routineId") == g.rt.ID || (e.EntityType == "routine" && e.EntityID == g.rt.ID)) {
		return false, nil
	}
	// About one of this routine's execution issues, or from an agent run working on one.
	if e.EntityType == "issue" {
		exec, err := g.isExecIssue(ctx, e.EntityID)
		if err != nil || exec {
			return false, err
		}
	}
	runID := deref(e.RunID)
	if runID == "" && e.EntityType == "heartbeat_run" {
		runID = e.EntityID
	}
	if runID == "" {
		runID = str("runId")
	}
	runIssue := ""
	if runID != "" && isUUID(runID) {
		var err error
		if runIssue, err = g.runIssue(ctx, runID); err != nil {
			return false, err
		}
		if runIssue != "" {
			exec, err := g.isExecIssue(ctx, runIssue)
			if err != nil || exec {
				return false, err
			}
		}
	}
	if g.rt.ActivityGateScope != scopeProject {
		return true, nil
	}
	// Project scope: only activity tied to the routine's project.
	p := *g.rt.ProjectID
	switch {
	case e.EntityType == "project" && e.EntityID == p, str("projectId") == p:
		return true, nil
	}
	var err error
	var proj string
	switch e.EntityType {
	case "issue":
		proj, err = g.issueProject(ctx, e.EntityID)
	case "routine", "routine_trigger", "routine_run":
		proj, err = g.localProject(ctx, e.EntityType, e.EntityID)
	}
	if err != nil || proj == p {
		return proj == p && err == nil, err
	}
	if runIssue != "" {
		if proj, err = g.issueProject(ctx, runIssue); err != nil {
			return false, err
		}
		return proj == p, nil
	}
	return false, nil
}

func (g *gateScan) isExecIssue(ctx context.Context, issueID string) (bool, error) {
	if g.execIssues == nil {
		rows, err := g.x.pool.Query(ctx, `SELECT DISTINCT linked_issue_id::text FROM routine_runs
			WHERE routine_id = $1 AND linked_issue_id IS NOT NULL`, g.rt.ID)
		if err != nil {
			return false, fmt.Errorf("error reading execution issues: %w", err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return false, fmt.Errorf("error reading execution issues: %w", err)
		}
		g.execIssues = make(map[string]bool, len(ids))
		for _, id := range ids {
			g.execIssues[id] = true
		}
	}
	return g.execIssues[issueID], nil
}

func (g *gateScan) runIssue(ctx context.Context, runID string) (string, error) {
	if v, ok := g.runIssues[runID]; ok {
		return v, nil
	}
	v, err := g.x.runIssue(ctx, g.rt.CompanyID, runID)
	if err != nil {
		return "", err
	}
	g.runIssues[runID] = v
	return v, nil
}

func (g *gateScan) issueProject(ctx context.Context, issueID string) (string, error) {
	if v, ok := g.issueProjects[issueID]; ok {
		return v, nil
	}
	if !isUUID(issueID) {
		return "", nil
	}
	briefs, err := g.x.issueBriefs(ctx, g.rt.CompanyID, []string{issueID})
	if err != nil {
		return "", err
	}
	v := ""
	if b := briefs[issueID]; b != nil {
		v = deref(b.ProjectID)
	}
	g.issueProjects[issueID] = v
	return v, nil
}

// localProject returns the project of a routine, trigger or run of this extension.
func (g *gateScan) localProject(ctx context.Context, entityType, id string) (string, error) {
	key := entityType + ":" + id
	if v, ok := g.local[key]; ok {
		return v, nil
	}
	if !isUUID(id) {
		return "", nil
	}
	var sql string
	switch entityType {
	case "routine":
		sql = `SELECT project_id::text FROM routines WHERE id = $1`
	case "routine_trigger":
		sql = `SELECT r.project_id::text FROM routine_triggers t JOIN routines r ON r.id = t.routine_id WHERE t.id = $1`
	default:
		sql = `SELECT r.project_id::text FROM routine_runs u JOIN routines r ON r.id = u.routine_id WHERE u.id = $1`
	}
	var p *string
	if err := g.x.pool.QueryRow(ctx, sql, id).Scan(&p); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("error reading %s project: %w", entityType, err)
	}
	g.local[key] = deref(p)
	return deref(p), nil
}
