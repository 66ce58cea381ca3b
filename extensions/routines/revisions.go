package routines

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/keelhq/keel/sdk"
)

// Revision is a row of ext_routines.routine_revisions and its API shape: the routine's
// configurable fields and its triggers' public settings after one change.
type Revision struct {
	ID                     string          `json:"id"`
	CompanyID              string          `json:"companyId"`
	RoutineID              string          `json:"routineId"`
	RevisionNumber         int             `json:"revisionNumber"`
	Title                  string          `json:"title"`
	Description            *string         `json:"description"`
	Snapshot               json.RawMessage `json:"snapshot"`
	ChangeSummary          *string         `json:"changeSummary"`
	RestoredFromRevisionID *string         `json:"restoredFromRevisionId"`
	CreatedByAgentID       *string         `json:"createdByAgentId"`
	CreatedByUserID        *string         `json:"createdByUserId"`
	CreatedByRunID         *string         `json:"createdByRunId"`
	ResponsibleUserID      *string         `json:"responsibleUserId"`
	CreatedAt              time.Time       `json:"createdAt"`
}

const revisionCols = `id, company_id, routine_id, revision_number, title, description, snapshot, change_summary,
	restored_from_revision_id, created_by_agent_id, created_by_user_id, created_by_run_id, responsible_user_id, created_at`

func scanRevision(row pgx.Row) (*Revision, error) {
	var v Revision
	var snap []byte
	err := row.Scan(&v.ID, &v.CompanyID, &v.RoutineID, &v.RevisionNumber, &v.Title, &v.Description, &snap, &v.ChangeSummary,
		&v.RestoredFromRevisionID, &v.CreatedByAgentID, &v.CreatedByUserID, &v.CreatedByRunID, &v.ResponsibleUserID, &v.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("error reading routine revision: %w", err)
	}
	v.Snapshot = snap
	return &v, nil
}

// revisionSnapshot is the snapshot of a revision (version 1). It holds no secret: webhook
// triggers appear by public id and signing mode only.
type revisionSnapshot struct {
	Version  int               `json:"version"`
	Routine  snapshotRoutine   `json:"routine"`
	Triggers []snapshotTrigger `json:"triggers"`
}

// snapshotRoutine is the routine's configurable fields in a snapshot.
type snapshotRoutine struct {
	ID                 string          `json:"id"`
	CompanyID          string          `json:"companyId"`
	ProjectID          *string         `json:"projectId"`
	FolderID           *string         `json:"folderId"`
	GoalID             *string         `json:"goalId"`
	ParentIssueID      *string         `json:"parentIssueId"`
	Title              string          `json:"title"`
	Description        *string         `json:"description"`
	AssigneeAgentID    *string         `json:"assigneeAgentId"`
	Priority           string          `json:"priority"`
	Status             string          `json:"status"`
	ConcurrencyPolicy  string          `json:"concurrencyPolicy"`
	CatchUpPolicy      string          `json:"catchUpPolicy"`
	ActivityGatePolicy string          `json:"activityGatePolicy"`
	ActivityGateScope  string          `json:"activityGateScope"`
	Variables          []Variable      `json:"variables"`
	Env                json.RawMessage `json:"env"`
	ResponsibleUserID  *string         `json:"responsibleUserId"`
}

// snapshotTrigger is a trigger's public settings in a snapshot.
type snapshotTrigger struct {
	ID              string  `json:"id"`
	Kind            string  `json:"kind"`
	Label           *string `json:"label"`
	Enabled         bool    `json:"enabled"`
	PublicID        *string `json:"publicId"`
	Timezone        *string `json:"timezone"`
	SigningMode     *string `json:"signingMode"`
	CronExpression  *string `json:"cronExpression"`
	ReplayWindowSec *int    `json:"replayWindowSec"`
}

// snapshotOf builds the snapshot of a routine and its triggers.
func snapshotOf(rt *Routine, triggers []*Trigger) revisionSnapshot {
	env := rt.Env
	if len(env) == 0 {
		env = json.RawMessage("null")
	}
	s := revisionSnapshot{Version: 1, Routine: snapshotRoutine{ID: rt.ID, CompanyID: rt.CompanyID, ProjectID: rt.ProjectID,
		FolderID: rt.FolderID, GoalID: rt.GoalID, ParentIssueID: rt.ParentIssueID, Title: rt.Title, Description: rt.Description,
		AssigneeAgentID: rt.AssigneeAgentID, Priority: rt.Priority, Status: rt.Status, ConcurrencyPolicy: rt.ConcurrencyPolicy,
		CatchUpPolicy: rt.CatchUpPolicy, ActivityGatePolicy: rt.ActivityGatePolicy, ActivityGateScope: rt.ActivityGateScope,
		Variables: rt.Variables, Env: env, ResponsibleUserID: rt.ResponsibleUserID}, Triggers: []snapshotTrigger{}}
	for _, t := range triggers {
		s.Triggers = append(s.Triggers, snapshotTrigger{ID: t.ID, Kind: t.Kind, Label: t.Label, Enabled: t.Enabled,
			PublicID: t.PublicID, Timezone: t.Timezone, SigningMode: t.SigningMode, CronExpression: t.CronExpression,
			ReplayWindowSec: t.ReplayWindowSec})
	}
	return s
}

// Change summaries of revisions.
const (
	summaryCreated = "Created routine"
	summaryUpdated = "Updated routine"
)

// triggerSummaryText is the change summary of a trigger change ("Created webhook trigger").
func triggerSummaryText(verb, kind string) string {
	return verb + " " + kind + " trigger"
}

// writeRevision records the routine's current state (read in tx, after the change) as its
// next revision and points the routine at it. It locks the routine row, so revisions of one
// routine are numbered one after the other. It returns the routine and the revision.
func writeRevision(ctx context.Context, tx pgx.Tx, routineID string, actor *sdk.Actor, summary string,
	restoredFrom *string) (*Routine, *Revision, error) {
	rt, err := routineGet(ctx, tx, routineID, true)
	if err != nil {
		return nil, nil, err
	}
	if rt == nil {
		return nil, nil, notFound(msgRoutineNotFound)
	}
	trigs, err := triggersOf(ctx, tx, []string{rt.ID})
	if err != nil {
		return nil, nil, err
	}
	snap, err := json.Marshal(snapshotOf(rt, trigs[rt.ID]))
	if err != nil {
		return nil, nil, fmt.Errorf("error encoding routine snapshot: %w", err)
	}
	agentID, userID := actorIDs(actor)
	var runID *string
	if actor != nil && actor.Type == "agent" {
		runID = strOrNil(actor.RunId)
	}
	rev, err := scanRevision(tx.QueryRow(ctx, `INSERT INTO routine_revisions (id, company_id, routine_id, revision_number, title,
		description, snapshot, change_summary, restored_from_revision_id, created_by_agent_id, created_by_user_id, created_by_run_id,
		responsible_user_id) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13) RETURNING `+revisionCols,
		uuid.NewString(), rt.CompanyID, rt.ID, rt.LatestRevisionNumber+1, rt.Title, rt.Description, snap, summary, restoredFrom,
		agentID, userID, runID, rt.ResponsibleUserID))
	if err != nil {
		return nil, nil, fmt.Errorf("error recording routine revision: %w", err)
	}
	rt, err = scanRoutine(tx.QueryRow(ctx, `UPDATE routines SET latest_revision_id = $2, latest_revision_number = $3
		WHERE id = $1 RETURNING `+routineCols, rt.ID, rev.ID, rev.RevisionNumber))
	if err != nil {
		return nil, nil, fmt.Errorf("error recording routine revision: %w", err)
	}
	return rt, rev, nil
}

// withRevision runs change in a transaction and records the routine's state after it as a
// new revision in the same transaction.
func (x *Routines) withRevision(ctx context.Context, routineID string, actor *sdk.Actor, summary string,
	change func(tx pgx.Tx) error) (*Routine, *Revision, error) {
	tx, err := x.pool.Begin(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("error starting transaction: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	// Lock the routine first, so a change and its revision are ordered with other changes.
	if _, err := tx.Exec(ctx, `SELECT 1 FROM routines WHERE id = $1 FOR UPDATE`, routineID); err != nil {
		return nil, nil, fmt.Errorf("error locking routine: %w", err)
	}
	if err := change(tx); err != nil {
		return nil, nil, err
	}
	rt, rev, err := writeRevision(ctx, tx, routineID, actor, summary, nil)
	if err != nil {
		return nil, nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, nil, fmt.Errorf("error committing routine change: %w", err)
	}
	return rt, rev, nil
}

// revisionsLimit bounds the revisions list.
const (
	revisionsDefaultLimit = 50
	revisionsMaxLimit     = 200
)

const msgRevisionNotFound = "Routine revision not found"

func init() {
	addRoutes(
		route{Method: "GET", Path: "/api/routines/{routineId}/revisions", Response: new([]*Revision),
			Summary: "List a routine's revisions, newest first (limit default 50, at most 200; offset)",
			Handle:  (*Routines).revisionsListRoute},
		route{Method: "POST", Path: "/api/routines/{routineId}/revisions/{revisionId}/restore", Response: new(RestoreResult),
			Summary: "Restore the routine fields of a revision as a new revision (triggers are not restored: their secrets cannot be)",
			Handle:  (*Routines).revisionRestoreRoute},
	)
}

func (x *Routines) revisionsListRoute(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	rt, err := x.loadRoutine(r)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	limit, offset, err := sdk.Page(r, revisionsDefaultLimit, revisionsMaxLimit)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	rows, err := x.pool.Query(ctx, `SELECT `+revisionCols+` FROM routine_revisions WHERE routine_id = $1
		ORDER BY revision_number DESC LIMIT $2 OFFSET $3`, rt.ID, limit, offset)
	if err != nil {
		x.writeErr(rw, fmt.Errorf("error listing routine revisions: %w", err))
		return
	}
	defer rows.Close()
	out := []*Revision{}
	for rows.Next() {
		v, err := scanRevision(rows)
		if err != nil {
			x.writeErr(rw, err)
			return
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		x.writeErr(rw, fmt.Errorf("error listing routine revisions: %w", err))
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, out)
}

// RestoreResult is the answer of a revision restore: the routine and its new revision.
type RestoreResult struct {
	Routine  *Routine  `json:"routine"`
	Revision *Revision `json:"revision"`
}

// restoreNote is appended to a restore's change summary: triggers stay as they are.
const restoreNote = " (routine fields only; triggers are not restored because webhook secrets cannot be)"

func (x *Routines) revisionRestoreRoute(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	cur, err := x.loadRoutine(r)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	if err := requireManage(ctx, cur); err != nil {
		x.writeErr(rw, err)
		return
	}
	revID := strings.ToLower(r.PathValue("revisionId"))
	var src *Revision
	if isUUID(revID) {
		if src, err = scanRevision(x.pool.QueryRow(ctx, `SELECT `+revisionCols+` FROM routine_revisions
			WHERE id = $1 AND routine_id = $2`, revID, cur.ID)); err != nil {
			x.writeErr(rw, err)
			return
		}
	}
	if src == nil {
		x.writeErr(rw, notFound(msgRevisionNotFound))
		return
	}
	var snap revisionSnapshot
	if err := json.Unmarshal(src.Snapshot, &snap); err != nil || snap.Version != 1 {
		x.writeErr(rw, unprocessable(fmt.Sprintf("Revision %d has a snapshot this version cannot restore", src.RevisionNumber)))
		return
	}
	s := snap.Routine
	// A folder deleted since the revision (which unfiled the routine) is not restored.
	if s.FolderID != nil && deref(s.FolderID) != deref(cur.FolderID) {
		if err := x.checkFolder(ctx, cur.CompanyID, *s.FolderID); err != nil {
			if !isNotFound(err) && !isUnprocessable(err) {
				x.writeErr(rw, err)
				return
			}
			s.FolderID = nil
		}
	}
	set := func(v *string) patchField[string] {
		if v == nil {
			return patchField[string]{Set: true, Null: true}
		}
		return patchField[string]{Set: true, Value: *v}
	}
	body := &RoutinePatchBody{Title: set(&s.Title), Description: set(s.Description), AssigneeAgentID: set(s.AssigneeAgentID),
		ProjectID: set(s.ProjectID), FolderID: set(s.FolderID), GoalID: set(s.GoalID), ParentIssueID: set(s.ParentIssueID),
		Priority: set(&s.Priority), Status: set(&s.Status), ConcurrencyPolicy: set(&s.ConcurrencyPolicy),
		CatchUpPolicy: set(&s.CatchUpPolicy), ActivityGatePolicy: set(&s.ActivityGatePolicy),
		ActivityGateScope: set(&s.ActivityGateScope), Variables: patchField[[]Variable]{Set: true, Value: s.Variables}}
	if env := strings.TrimSpace(string(s.Env)); env == "" || env == "null" {
		body.Env = patchField[map[string]json.RawMessage]{Set: true, Null: true}
	} else {
		body.Env.Set = true
		if err := json.Unmarshal(s.Env, &body.Env.Value); err != nil {
			x.writeErr(rw, unprocessable(fmt.Sprintf("Revision %d has an env this version cannot restore", src.RevisionNumber)))
			return
		}
	}
	summary := fmt.Sprintf("Restored revision %d", src.RevisionNumber) + restoreNote
	rt, rev, err := x.applyPatch(ctx, cur, body, &patchOpts{summary: summary, restoredFrom: src, force: true})
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, &RestoreResult{Routine: rt, Revision: rev})
}

// envNameRE is the shape of an env variable name (as agent env maps).
var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

const envShape = `must be a string, {"type":"plain","value":string} or {"type":"secret_ref","secretId":uuid,"version"?:"latest"|positive integer}`

// checkEnv validates a routine env map like an agent env map: names are variable names
// (SERVICE_* is assigned at run time), values are strings, plain bindings or secret_ref
// bindings. Problems are validation details under env.<NAME>.
func checkEnv(env map[string]json.RawMessage) []detail {
	var d []detail
	names := make([]string, 0, len(env))
	for name := range env {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		path := "env." + name
		if !envNameRE.MatchString(name) {
			d = append(d, detail{Path: path, Message: "is not a valid variable name"})
			continue
		}
		if strings.HasPrefix(name, "SERVICE_") {
			d = append(d, detail{Path: path, Message: "SERVICE_* variables are assigned at run time and cannot be set"})
			continue
		}
		if msg := checkEnvValue(env[name]); msg != "" {
			d = append(d, detail{Path: path, Message: msg})
		}
	}
	return d
}

// checkEnvValue returns what is wrong with one env value ("" when nothing is).
func checkEnvValue(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return ""
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil || obj == nil {
		return envShape
	}
	var typ string
	if json.Unmarshal(obj["type"], &typ) != nil {
		return envShape
	}
	allowed := map[string]bool{"type": true}
	switch typ {
	case "plain":
		allowed["value"] = true
		var v string
		if json.Unmarshal(obj["value"], &v) != nil {
			return "a plain binding needs a string value"
		}
	case "secret_ref":
		allowed["secretId"], allowed["version"] = true, true
		var id string
		if json.Unmarshal(obj["secretId"], &id) != nil || !isUUID(id) {
			return "a secret_ref binding needs a secretId that is a UUID"
		}
		if v, ok := obj["version"]; ok && !validSecretVersion(v) {
			return `version must be "latest" or a positive integer`
		}
	default:
		return envShape
	}
	for k := range obj {
		if !allowed[k] {
			return fmt.Sprintf("a %s binding has no field %q", typ, k)
		}
	}
	return ""
}

// validSecretVersion accepts null, "latest" and positive integers.
func validSecretVersion(raw json.RawMessage) bool {
	if strings.TrimSpace(string(raw)) == "null" {
		return true
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s == "latest"
	}
	var n int
	return json.Unmarshal(raw, &n) == nil && n > 0
}

// envJSON encodes a validated env map for storage (nil, stored as NULL, for none).
func envJSON(env map[string]json.RawMessage) ([]byte, error) {
	if env == nil {
		return nil, nil
	}
	b, err := json.Marshal(env)
	if err != nil {
		return nil, fmt.Errorf("error encoding routine env: %w", err)
	}
	return b, nil
}

// dispatchFingerprint identifies what a run dispatches: the hex SHA-256 of the JSON array
// [routineId, triggerId, title, description, assigneeAgentId, projectId] (null for an
// absent trigger, description or project), with the run's resolved title, description,
// assignee and project. Two runs with the same fingerprint would create the same execution
// issue. Runs recorded before anything was resolved (skipped by the activity gate or a
// paused project) have none.
func dispatchFingerprint(routineID string, triggerID *string, doc *dispatchDoc) *string {
	if doc == nil || doc.Title == "" {
		return nil
	}
	b, err := json.Marshal([]any{routineID, triggerID, doc.Title, doc.Description, doc.AssigneeAgentID, doc.ProjectID})
	if err != nil {
		return nil
	}
	sum := sha256.Sum256(b)
	return ptr(hex.EncodeToString(sum[:]))
}
