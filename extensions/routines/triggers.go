package routines

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/keelhq/keel/sdk"
)

// TriggerCreateBody is the body of POST /api/routines/{routineId}/triggers.
type TriggerCreateBody struct {
	// Kind is schedule, webhook or api.
	Kind  string  `json:"kind" jsonschema:"enum=schedule,enum=webhook,enum=api"`
	Label *string `json:"label,omitempty" jsonschema:"maxLength=200"`
	// Enabled defaults to true.
	Enabled *bool `json:"enabled,omitempty"`
	// CronExpression is a five-field cron expression (schedule only).
	CronExpression *string `json:"cronExpression,omitempty"`
	// Timezone is an IANA timezone (schedule only; default UTC).
	Timezone *string `json:"timezone,omitempty"`
	// SigningMode is bearer (default), hmac_sha256, forge_hmac or none (webhook only).
	SigningMode *string `json:"signingMode,omitempty" jsonschema:"enum=bearer,enum=hmac_sha256,enum=forge_hmac,enum=none"`
	// ReplayWindowSec is 30 to 86400 (default 300), used by hmac_sha256 (webhook only).
	ReplayWindowSec *int `json:"replayWindowSec,omitempty" jsonschema:"minimum=30,maximum=86400"`
}

// TriggerPatchBody is the body of PATCH /api/routine-triggers/{triggerId}.
type TriggerPatchBody struct {
	Label           patchField[string] `json:"label,omitempty"`
	Enabled         patchField[bool]   `json:"enabled,omitempty"`
	CronExpression  patchField[string] `json:"cronExpression,omitempty"`
	Timezone        patchField[string] `json:"timezone,omitempty"`
	SigningMode     patchField[string] `json:"signingMode,omitempty"`
	ReplayWindowSec patchField[int]    `json:"replayWindowSec,omitempty"`
}

// SecretMaterial is shown once, when a webhook trigger is created or its secret rotated.
type SecretMaterial struct {
	WebhookURL    string `json:"webhookUrl"`
	WebhookSecret string `json:"webhookSecret"`
}

// TriggerWithSecret is the answer of trigger creation and secret rotation: the trigger,
// and for webhooks the public URL and secret (also under secretMaterial).
type TriggerWithSecret struct {
	Trigger        *Trigger        `json:"trigger"`
	SecretMaterial *SecretMaterial `json:"secretMaterial"`
	WebhookURL     *string         `json:"webhookUrl,omitempty"`
	WebhookSecret  *string         `json:"webhookSecret,omitempty"`
	// Revision is the routine revision the change recorded.
	Revision *Revision `json:"revision"`
}

// TriggerPatchResult is the answer of a trigger update: the trigger, and the routine
// revision the change recorded (null when nothing changed).
type TriggerPatchResult struct {
	*Trigger
	Revision *Revision `json:"revision"`
}

const maxLabel = 200

func init() {
	addRoutes(
		route{Method: "POST", Path: "/api/routines/{routineId}/triggers", Status: http.StatusCreated, Response: new(TriggerWithSecret),
			Summary: "Add a schedule, webhook or api trigger; webhook triggers answer their URL and secret once",
			Body:    TriggerCreateBody{}, Handle: (*Routines).triggerCreateRoute},
		route{Method: "PATCH", Path: "/api/routine-triggers/{triggerId}", Response: new(TriggerPatchResult),
			Summary: "Update a trigger (label, enabled, cronExpression and timezone, signingMode and replayWindowSec)",
			Body:    TriggerPatchBody{}, Handle: (*Routines).triggerPatchRoute},
		route{Method: "DELETE", Path: "/api/routine-triggers/{triggerId}", Status: http.StatusNoContent,
			Summary: "Delete a trigger permanently (its webhook secret is destroyed)", Handle: (*Routines).triggerDeleteRoute},
		route{Method: "POST", Path: "/api/routine-triggers/{triggerId}/rotate-secret", Response: new(TriggerWithSecret),
			Summary: "Rotate a webhook trigger's secret: the old one is refused at once, the URL stays",
			Handle:  (*Routines).triggerRotateRoute},
	)
}

// webhookURL is the public fire URL of a webhook trigger.
func (x *Routines) webhookURL(publicID string) string {
	return x.apiBase + "/api/routine-triggers/public/" + publicID + "/fire"
}

// newPublicID returns 12 random bytes as hex.
func newPublicID() (string, error) {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("error generating public id: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// scheduleCheck validates a schedule's expression and timezone and returns its next run
// after now; problems are 400 Validation errors.
func scheduleCheck(expr, tz string, now time.Time) (time.Time, []detail) {
	var d []detail
	if _, err := loadZone(tz); err != nil {
		d = append(d, detail{Path: "timezone", Message: err.Error()})
		return time.Time{}, d
	}
	s, err := parseSchedule(expr, tz)
	if err != nil {
		d = append(d, detail{Path: "cronExpression", Message: err.Error()})
		return time.Time{}, d
	}
	return s.next(now), nil
}

// requireVariablesForSchedule refuses enabling a schedule while the routine has required
// variables without a default (no tick could resolve them).
func requireVariablesForSchedule(rt *Routine) error {
	if missing := missingRequired(rt.Variables); len(missing) > 0 {
		return unprocessable("Schedule triggers cannot be enabled while required variables have no default: " + strings.Join(missing, ", "))
	}
	return nil
}

func (x *Routines) triggerCreateRoute(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	rt, err := x.loadRoutine(r)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	if err := requireManage(ctx, rt); err != nil {
		x.writeErr(rw, err)
		return
	}
	var body TriggerCreateBody
	if err := decodeBody(r, &body); err != nil {
		x.writeErr(rw, err)
		return
	}
	var d []detail
	bad := func(path, msg string) { d = append(d, detail{Path: path, Message: msg}) }
	if !slices.Contains(triggerKinds, body.Kind) {
		bad("kind", "must be one of schedule, webhook, api")
	}
	label := trimmedPtr(body.Label)
	if label != nil && utf8.RuneCountInString(*label) > maxLabel {
		bad("label", fmt.Sprintf("must be at most %d characters", maxLabel))
	}
	enabled := body.Enabled == nil || *body.Enabled
	if body.Kind != kindSchedule {
		if body.CronExpression != nil {
			bad("cronExpression", "only schedule triggers have a cron expression")
		}
		if body.Timezone != nil {
			bad("timezone", "only schedule triggers have a timezone")
		}
	}
	if body.Kind != kindWebhook {
		if body.SigningMode != nil {
			bad("signingMode", "only webhook triggers have a signing mode")
		}
		if body.ReplayWindowSec != nil {
			bad("replayWindowSec", "only webhook triggers have a replay window")
		}
	}
	now := time.Now()
	var cronExpr, tz *string
	var nextRun *time.Time
	var mode *string
	var window *int
	switch body.Kind {
	case kindSchedule:
		expr := strings.TrimSpace(deref(body.CronExpression))
		zone := "UTC"
		if body.Timezone != nil {
			zone = strings.TrimSpace(*body.Timezone)
		}
		next, sd := scheduleCheck(expr, zone, now)
		d = append(d, sd...)
		cronExpr, tz = &expr, &zone
		if enabled && len(sd) == 0 {
			nextRun = &next
		}
	case kindWebhook:
		m := signingBearer
		if body.SigningMode != nil {
			m = *body.SigningMode
		}
		if !slices.Contains(signingModes, m) {
			bad("signingMode", "must be one of "+strings.Join(signingModes, ", "))
		}
		w := replayWindowDefault
		if body.ReplayWindowSec != nil {
			w = *body.ReplayWindowSec
		}
		if w < replayWindowMin || w > replayWindowMax {
			bad("replayWindowSec", fmt.Sprintf("must be from %d to %d", replayWindowMin, replayWindowMax))
		}
		mode, window = &m, &w
	}
	if len(d) > 0 {
		x.writeErr(rw, validationError(d...))
		return
	}
	if rt.Status == statusArchived {
		x.writeErr(rw, conflict(msgRoutineArchived))
		return
	}
	if body.Kind == kindSchedule && enabled {
		if err := requireVariablesForSchedule(rt); err != nil {
			x.writeErr(rw, err)
			return
		}
	}
	actor := sdk.ActorFrom(ctx)
	id := uuid.NewString()
	var publicID *string
	var secret *managedSecret
	if body.Kind == kindWebhook {
		pid, err := newPublicID()
		if err != nil {
			x.writeErr(rw, err)
			return
		}
		publicID = &pid
		secret = &managedSecret{}
		if err := x.call(ctx, "secrets.createManaged", rt.CompanyID, map[string]any{
			"companyId": rt.CompanyID, "name": "Routine webhook " + pid,
			"description": "Signing secret of webhook trigger " + id + " of routine " + rt.ID,
		}, secret); err != nil {
			x.writeErr(rw, secretsErr("error creating webhook secret", err))
			return
		}
	}
	agentID, userID := actorIDs(actor)
	var secretID *string
	var secretVersion *int
	var rotatedAt *time.Time
	if secret != nil {
		secretID, secretVersion, rotatedAt = &secret.SecretID, &secret.Version, &now
	}
	var t *Trigger
	_, rev, err := x.withRevision(ctx, rt.ID, actor, triggerSummaryText("Created", body.Kind), func(tx pgx.Tx) error {
		var err error
		t, err = scanTrigger(tx.QueryRow(ctx, `INSERT INTO routine_triggers (id, company_id, routine_id, kind, label, enabled,
		cron_expression, timezone, next_run_at, public_id, secret_id, secret_version, signing_mode, replay_window_sec,
		last_rotated_at, created_by_agent_id, created_by_user_id, updated_by_agent_id, updated_by_user_id)
		VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17,$16,$17) RETURNING `+triggerCols,
			id, rt.CompanyID, rt.ID, body.Kind, label, enabled, cronExpr, tz, nextRun, publicID, secretID, secretVersion, mode,
			window, rotatedAt, agentID, userID))
		return err
	})
	if err != nil {
		if secret != nil {
			x.dropSecret(ctx, rt.CompanyID, secret.SecretID)
		}
		x.writeErr(rw, fmt.Errorf("error creating routine trigger: %w", err))
		return
	}
	x.activityBy(ctx, actor, "", rt.CompanyID, "routine_trigger.created", "routine_trigger", t.ID, withProject(rt.ProjectID,
		map[string]any{"routineId": rt.ID, "kind": t.Kind, "label": t.Label, "enabled": t.Enabled, "signingMode": t.SigningMode,
			"revisionId": rev.ID, "revisionNumber": rev.RevisionNumber}))
	out := &TriggerWithSecret{Trigger: t, Revision: rev}
	if secret != nil {
		u := x.webhookURL(*publicID)
		out.SecretMaterial = &SecretMaterial{WebhookURL: u, WebhookSecret: secret.Value}
		out.WebhookURL, out.WebhookSecret = &u, &secret.Value
	}
	sdk.WriteJSON(rw, http.StatusCreated, out)
}

// snapshotChanged reports whether a trigger update changes a setting revision snapshots
// record (label, enabled, schedule, signing mode, replay window).
func snapshotChanged(cur, next *Trigger) bool {
	return deref(cur.Label) != deref(next.Label) || (cur.Label == nil) != (next.Label == nil) || cur.Enabled != next.Enabled ||
		deref(cur.CronExpression) != deref(next.CronExpression) || deref(cur.Timezone) != deref(next.Timezone) ||
		deref(cur.SigningMode) != deref(next.SigningMode) || intVal(cur.ReplayWindowSec) != intVal(next.ReplayWindowSec)
}

func intVal(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

// secretsErr reports a failed secrets call: 503 when no secrets extension is loaded,
// otherwise an internal error naming what was being done.
func secretsErr(doing string, err error) error {
	if sdk.IsMethodNotProvided(err) {
		return &sdk.Error{Status: http.StatusServiceUnavailable, Message: "Webhook triggers need the secrets extension, which is not running"}
	}
	return fmt.Errorf("%s: %w", doing, err)
}

// dropSecret deletes a webhook trigger's managed secret; a failure is logged (the secret
// is then unreferenced and unusable, since no trigger names it).
func (x *Routines) dropSecret(ctx context.Context, companyID, secretID string) {
	if err := x.call(ctx, "secrets.deleteManaged", companyID, map[string]string{"companyId": companyID, "secretId": secretID}, nil); err != nil {
		x.log.Warn("error deleting webhook secret", "secret", secretID, "error", err)
	}
}

func trimmedPtr(p *string) *string {
	if p == nil {
		return nil
	}
	s := strings.TrimSpace(*p)
	return &s
}

// loadTrigger loads the trigger of the {triggerId} path with its routine, checks company
// access and that the actor may manage the routine.
func (x *Routines) loadTrigger(r *http.Request) (*Trigger, *Routine, error) {
	ctx := r.Context()
	t, err := triggerGet(ctx, x.pool, strings.ToLower(r.PathValue("triggerId")), false)
	if err != nil {
		return nil, nil, err
	}
	if t == nil {
		return nil, nil, notFound(msgTriggerNotFound)
	}
	if err := requireCompanyAccess(ctx, t.CompanyID); err != nil {
		return nil, nil, err
	}
	rt, err := routineGet(ctx, x.pool, t.RoutineID, false)
	if err != nil {
		return nil, nil, err
	}
	if rt == nil {
		return nil, nil, notFound(msgTriggerNotFound)
	}
	if err := requireManage(ctx, rt); err != nil {
		return nil, nil, err
	}
	return t, rt, nil
}

func (x *Routines) triggerPatchRoute(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	cur, rt, err := x.loadTrigger(r)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	var body TriggerPatchBody
	if err := decodeBody(r, &body); err != nil {
		x.writeErr(rw, err)
		return
	}
	var d []detail
	bad := func(path, msg string) { d = append(d, detail{Path: path, Message: msg}) }
	next := *cur
	var changes []string
	if body.Label.Set {
		next.Label = nil
		if !body.Label.Null {
			next.Label = trimmedPtr(&body.Label.Value)
			if utf8.RuneCountInString(*next.Label) > maxLabel {
				bad("label", fmt.Sprintf("must be at most %d characters", maxLabel))
			}
		}
		changes = append(changes, "label")
	}
	if body.Enabled.Set {
		if body.Enabled.Null {
			bad("enabled", "cannot be null")
		}
		next.Enabled = body.Enabled.Value
		changes = append(changes, "enabled")
	}
	kindOnly := func(set bool, kind, path, what string) bool {
		if set && cur.Kind != kind {
			bad(path, "only "+kind+" triggers have "+what)
			return false
		}
		return set
	}
	if kindOnly(body.CronExpression.Set, kindSchedule, "cronExpression", "a cron expression") {
		if body.CronExpression.Null {
			bad("cronExpression", "cannot be null")
		}
		next.CronExpression = ptr(strings.TrimSpace(body.CronExpression.Value))
		changes = append(changes, "cronExpression")
	}
	if kindOnly(body.Timezone.Set, kindSchedule, "timezone", "a timezone") {
		if body.Timezone.Null {
			bad("timezone", "cannot be null")
		}
		next.Timezone = ptr(strings.TrimSpace(body.Timezone.Value))
		changes = append(changes, "timezone")
	}
	if kindOnly(body.SigningMode.Set, kindWebhook, "signingMode", "a signing mode") {
		if body.SigningMode.Null || !slices.Contains(signingModes, body.SigningMode.Value) {
			bad("signingMode", "must be one of "+strings.Join(signingModes, ", "))
		}
		next.SigningMode = ptr(body.SigningMode.Value)
		changes = append(changes, "signingMode")
	}
	if kindOnly(body.ReplayWindowSec.Set, kindWebhook, "replayWindowSec", "a replay window") {
		w := body.ReplayWindowSec.Value
		if body.ReplayWindowSec.Null || w < replayWindowMin || w > replayWindowMax {
			bad("replayWindowSec", fmt.Sprintf("must be from %d to %d", replayWindowMin, replayWindowMax))
		}
		next.ReplayWindowSec = &w
		changes = append(changes, "replayWindowSec")
	}
	// The next run is recomputed when the schedule changes or the trigger is switched on,
	// and cleared while it is off.
	if len(d) == 0 && cur.Kind == kindSchedule {
		switch {
		case !next.Enabled:
			next.NextRunAt = nil
		case !cur.Enabled || body.CronExpression.Set || body.Timezone.Set || cur.NextRunAt == nil:
			n, sd := scheduleCheck(deref(next.CronExpression), deref(next.Timezone), time.Now())
			d = append(d, sd...)
			next.NextRunAt = &n
		}
	}
	if len(d) > 0 {
		x.writeErr(rw, validationError(d...))
		return
	}
	if cur.Kind == kindSchedule && next.Enabled && !cur.Enabled {
		if err := requireVariablesForSchedule(rt); err != nil {
			x.writeErr(rw, err)
			return
		}
	}
	if next.Enabled && !cur.Enabled && rt.Status == statusArchived {
		x.writeErr(rw, conflict(msgRoutineArchived))
		return
	}
	actor := sdk.ActorFrom(ctx)
	agentID, userID := actorIDs(actor)
	var t *Trigger
	update := func(q querier) error {
		var err error
		t, err = scanTrigger(q.QueryRow(ctx, `UPDATE routine_triggers SET label = $2, enabled = $3, cron_expression = $4,
		timezone = $5, next_run_at = $6, signing_mode = $7, replay_window_sec = $8, updated_by_agent_id = $9,
		updated_by_user_id = $10, updated_at = clock_timestamp() WHERE id = $1 RETURNING `+triggerCols,
			cur.ID, next.Label, next.Enabled, next.CronExpression, next.Timezone, next.NextRunAt, next.SigningMode, next.ReplayWindowSec,
			agentID, userID))
		if err == nil && t == nil {
			err = notFound(msgTriggerNotFound)
		}
		return err
	}
	// Only a change of a setting a revision records (not a recomputed next run) makes one.
	var rev *Revision
	if snapshotChanged(cur, &next) {
		_, rev, err = x.withRevision(ctx, rt.ID, actor, triggerSummaryText("Updated", cur.Kind), func(tx pgx.Tx) error { return update(tx) })
	} else {
		err = update(x.pool)
	}
	if err != nil {
		x.writeErr(rw, fmt.Errorf("error updating routine trigger: %w", err))
		return
	}
	details := map[string]any{"routineId": rt.ID, "kind": t.Kind, "changes": changes, "enabled": t.Enabled}
	if rev != nil {
		details["revisionId"], details["revisionNumber"] = rev.ID, rev.RevisionNumber
	}
	x.activityBy(ctx, actor, "", t.CompanyID, "routine_trigger.updated", "routine_trigger", t.ID, withProject(rt.ProjectID, details))
	sdk.WriteJSON(rw, http.StatusOK, &TriggerPatchResult{Trigger: t, Revision: rev})
}

func (x *Routines) triggerDeleteRoute(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	t, rt, err := x.loadTrigger(r)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	actor := sdk.ActorFrom(ctx)
	_, rev, err := x.withRevision(ctx, rt.ID, actor, triggerSummaryText("Deleted", t.Kind), func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM routine_triggers WHERE id = $1`, t.ID)
		if err != nil {
			return fmt.Errorf("error deleting routine trigger: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return notFound(msgTriggerNotFound)
		}
		return nil
	})
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	if t.SecretID != nil {
		x.dropSecret(ctx, t.CompanyID, *t.SecretID)
		x.secrets.forget(*t.SecretID)
	}
	x.activityBy(ctx, actor, "", t.CompanyID, "routine_trigger.deleted", "routine_trigger", t.ID,
		withProject(rt.ProjectID, map[string]any{"routineId": rt.ID, "kind": t.Kind, "label": t.Label,
			"revisionId": rev.ID, "revisionNumber": rev.RevisionNumber}))
	rw.WriteHeader(http.StatusNoContent)
}

func (x *Routines) triggerRotateRoute(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	t, rt, err := x.loadTrigger(r)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	if t.Kind != kindWebhook || t.SecretID == nil || t.PublicID == nil {
		x.writeErr(rw, unprocessable("Only webhook triggers have a secret to rotate"))
		return
	}
	var secret managedSecret
	if err := x.call(ctx, "secrets.rotateManaged", t.CompanyID, map[string]string{"companyId": t.CompanyID, "secretId": *t.SecretID},
		&secret); err != nil {
		x.writeErr(rw, secretsErr("error rotating webhook secret", err))
		return
	}
	// The trigger row names the signing version: once it moves, every host refuses the
	// old one (their caches are keyed by version).
	actor := sdk.ActorFrom(ctx)
	agentID, userID := actorIDs(actor)
	var updated *Trigger
	_, rev, err := x.withRevision(ctx, rt.ID, actor, "Rotated webhook trigger secret", func(tx pgx.Tx) error {
		var err error
		updated, err = scanTrigger(tx.QueryRow(ctx, `UPDATE routine_triggers SET secret_version = $2, last_rotated_at = clock_timestamp(),
		updated_by_agent_id = $3, updated_by_user_id = $4, updated_at = clock_timestamp() WHERE id = $1 RETURNING `+triggerCols,
			t.ID, secret.Version, agentID, userID))
		if err == nil && updated == nil {
			err = notFound(msgTriggerNotFound)
		}
		return err
	})
	if err != nil {
		x.writeErr(rw, fmt.Errorf("error recording rotated webhook secret: %w", err))
		return
	}
	x.activityBy(ctx, actor, "", t.CompanyID, "routine_trigger.secret_rotated", "routine_trigger", t.ID,
		withProject(rt.ProjectID, map[string]any{"routineId": rt.ID, "secretVersion": secret.Version,
			"revisionId": rev.ID, "revisionNumber": rev.RevisionNumber}))
	u := x.webhookURL(*updated.PublicID)
	sdk.WriteJSON(rw, http.StatusOK, &TriggerWithSecret{Trigger: updated,
		SecretMaterial: &SecretMaterial{WebhookURL: u, WebhookSecret: secret.Value}, WebhookURL: &u, WebhookSecret: &secret.Value,
		Revision: rev})
}
