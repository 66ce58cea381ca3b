package decisions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/keelhq/keel/sdk"
)

// DecideBody is the body of POST /api/decisions/{id}/decide. Unknown fields are rejected.
type DecideBody struct {
	// OptionID is the chosen option (1-120 characters).
	OptionID *string `json:"optionId" jsonschema:"required,minLength=1,maxLength=120"`
	// InputValues maps input ids to strings (each up to 20000 characters).
	InputValues map[string]string `json:"inputValues,omitempty"`
	// IdempotencyKey (1-500) makes a replay resume the existing outcome.
	IdempotencyKey *string `json:"idempotencyKey,omitempty" jsonschema:"minLength=1,maxLength=500"`
}

// DismissBody is the body of POST /api/decisions/{id}/dismiss. Unknown fields are rejected.
type DismissBody struct {
	// Reason is up to 20000 characters.
	Reason *string `json:"reason,omitempty" jsonschema:"maxLength=20000"`
}

const jobSweep = "sweep"

func init() {
	addRoutes(
		route{Method: "POST", Path: "/api/decisions/{id}/decide", Response: new(Decision), Access: sdk.AccessBoard,
			Summary: "Choose an option: its effects run in order, each with its own execution row; unknown fields rejected",
			Body:    DecideBody{}, Handle: (*Decisions).decideRoute},
		route{Method: "POST", Path: "/api/decisions/{id}/dismiss", Response: new(Decision), Access: sdk.AccessBoard,
			Summary: "Dismiss an open decision (recorded as rejected); unknown fields rejected",
			Body:    DismissBody{}, Handle: (*Decisions).dismissRoute},
		route{Method: "POST", Path: "/api/decisions/{id}/cancel", Response: new(Decision), Access: sdk.AccessEither,
			Summary: "Cancel an open decision (the board, or the origin agent)", Handle: (*Decisions).cancelRoute},
	)
	addJobs(sdk.Job{Key: jobSweep, Every: "1m",
		Description: "Expire open decisions past expiresAt, resume decided decisions whose effects were interrupted, and " +
			"prune queue items past their queue's retentionDays (except items marked keep)"})
	addMethods(map[string]method{
		"sweep": {
			Description: "Run the sweep job at an instant (kernel and system callers only). Input {now: RFC 3339, default the wall " +
				"clock}. Output {expired: decision ids, resumed: decision ids, prunedItems}.",
			Call: (*Decisions).methodSweep,
		},
	})
}

// loadDecision loads the decision of the {id} path. A decision the actor's company cannot
// reach is "Decision not found".
func (x *Decisions) loadDecision(r *http.Request) (*Decision, error) {
	id := strings.ToLower(r.PathValue("id"))
	if !isUUID(id) {
		return nil, notFound(msgNotFound)
	}
	d, err := decisionGet(r.Context(), x.pool, id, false)
	if err != nil {
		return nil, err
	}
	if d == nil || !sdk.CanAccessCompany(sdk.ActorFrom(r.Context()), d.CompanyID) {
		return nil, notFound(msgNotFound)
	}
	if err := sdk.RequireCompanyAccess(r.Context(), d.CompanyID); err != nil {
		return nil, err
	}
	return d, nil
}

// verify re-checks the stored specification against its signature (rule 5).
func (x *Decisions) verify(d *Decision) error {
	if !x.signer.verify(d.ID, d.rawOptions, d.rawSnapshots, d.SignedSpec) {
		return forbidden(msgSignature)
	}
	return nil
}

// expireTx moves an open decision to expired in tx and queues its continuation wake; moved
// is false when the decision was no longer open.
func (x *Decisions) expireTx(ctx context.Context, tx pgx.Tx, d *Decision, reason string) (wake string, moved bool, err error) {
	tag, err := tx.Exec(ctx, `UPDATE decisions SET status = 'expired', resolved_at = clock_timestamp(), updated_at = clock_timestamp(),
		metadata = metadata || jsonb_build_object('expiredReason', $2::text) WHERE id = $1 AND status = 'open'`, d.ID, reason)
	if err != nil {
		return "", false, fmt.Errorf("error expiring decision %s: %w", d.ID, err)
	}
	if tag.RowsAffected() == 0 {
		return "", false, nil
	}
	wake, err = x.wakeTx(ctx, tx, d, statusExpired)
	return wake, true, err
}

// expireNow expires an open decision whose time has passed (or whose strict target is gone).
func (x *Decisions) expireNow(ctx context.Context, d *Decision, reason string) error {
	var wake string
	var moved bool
	err := pgx.BeginFunc(ctx, x.pool, func(tx pgx.Tx) (err error) {
		wake, moved, err = x.expireTx(ctx, tx, d, reason)
		return err
	})
	if err != nil || !moved {
		return err
	}
	x.activity(ctx, nil, systemActorExpirer, d.CompanyID, "decision.expired", activityEntityType, d.ID,
		map[string]any{"decisionId": d.ID, "reason": reason})
	x.deliver(ctx, wake)
	return nil
}

func (x *Decisions) decideRoute(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	d, err := x.loadDecision(r)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	var body DecideBody
	if err := sdk.DecodeJSONStrict(r, &body); err != nil {
		x.writeErr(rw, err)
		return
	}
	var det []detail
	switch {
	case body.OptionID == nil || *body.OptionID == "":
		det = append(det, detail{Path: "optionId", Message: "is required"})
	case utf8.RuneCountInString(*body.OptionID) > maxOptionID:
		det = append(det, detail{Path: "optionId", Message: fmt.Sprintf("must be at most %d characters", maxOptionID)})
	}
	for k, v := range body.InputValues {
		if utf8.RuneCountInString(v) > maxInputLength {
			det = append(det, detail{Path: "inputValues." + k, Message: fmt.Sprintf("must be at most %d characters", maxInputLength)})
		}
	}
	if body.IdempotencyKey != nil && (*body.IdempotencyKey == "" || utf8.RuneCountInString(*body.IdempotencyKey) > maxIdemKey) {
		det = append(det, detail{Path: "idempotencyKey", Message: fmt.Sprintf("must be 1 to %d characters", maxIdemKey)})
	}
	if err := validation(det); err != nil {
		x.writeErr(rw, err)
		return
	}
	out, err := x.decide(ctx, d, &body)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, out)
}

// isReplay reports whether a decide request repeats the decided outcome of d (rule 6): the
// same idempotency key, or the same option with the same input values.
func isReplay(d *Decision, b *DecideBody) bool {
	if b.IdempotencyKey != nil && d.decideKey != nil {
		return *b.IdempotencyKey == *d.decideKey
	}
	if d.dismissed || d.ChosenOptionID == nil || *d.ChosenOptionID != *b.OptionID {
		return false
	}
	values := b.InputValues
	if values == nil {
		values = map[string]string{}
	}
	stored := d.InputValues
	if stored == nil {
		stored = map[string]string{}
	}
	return maps.Equal(values, stored)
}

// decide moves an open decision to decided and runs the chosen option's effects.
func (x *Decisions) decide(ctx context.Context, d *Decision, b *DecideBody) (*Decision, error) {
	actor := sdk.ActorFrom(ctx)
	for attempt := 0; ; attempt++ {
		switch d.Status {
		case statusDecided:
			if !isReplay(d, b) {
				return nil, alreadyResolved()
			}
			if deref(d.DecidedByUserID) != actor.UserId {
				return nil, forbidden(msgReplayOtherUser)
			}
			// The outcome as it stands: the request that decided (or, after a crash, the
			// sweep) runs the effects; a replay never runs them a second time.
			return d, withExecutions(ctx, x.pool, d)
		case statusExpired:
			return nil, expired()
		case statusCancelled:
			return nil, alreadyResolved()
		}
		if !d.ExpiresAt.After(nowUTC()) {
			if err := x.expireNow(ctx, d, "expires_at"); err != nil {
				return nil, err
			}
			return nil, expired()
		}
		if err := x.verify(d); err != nil {
			return nil, err
		}
		var opt *Option
		for i := range d.Options {
			if d.Options[i].ID == *b.OptionID {
				opt = &d.Options[i]
			}
		}
		if opt == nil {
			return nil, unprocessable(msgUnknownOption)
		}
		values := map[string]string{}
		for _, in := range d.Inputs {
			v, ok := b.InputValues[in.ID]
			if ok {
				values[in.ID] = v
			}
			if in.Required && strings.TrimSpace(v) == "" {
				return nil, unprocessable(fmt.Sprintf("Input %s is required", in.ID))
			}
			if in.MaxLength != nil && utf8.RuneCountInString(v) > *in.MaxLength {
				return nil, unprocessable(fmt.Sprintf("Input %s is too long", in.ID))
			}
		}
		for k := range b.InputValues {
			if _, ok := values[k]; !ok {
				return nil, sdk.Invalid("inputValues."+k, "is not an input of this decision")
			}
		}
		vj, err := json.Marshal(values)
		if err != nil {
			return nil, fmt.Errorf("error encoding input values: %w", err)
		}
		var won *Decision
		err = pgx.BeginFunc(ctx, x.pool, func(tx pgx.Tx) error {
			won, err = scanDecision(tx.QueryRow(ctx, `UPDATE decisions SET status = 'decided', execution_status = 'running',
				chosen_option_id = $2, input_values = $3, decided_by_user_id = $4, decided_at = clock_timestamp(),
				decide_idempotency_key = $5, resolved_at = clock_timestamp(), updated_at = clock_timestamp()
				WHERE id = $1 AND status = 'open' RETURNING `+decisionCols, d.ID, opt.ID, vj, actor.UserId, b.IdempotencyKey))
			return err
		})
		if errors.Is(err, pgx.ErrNoRows) && attempt == 0 {
			// Another request resolved it first: answer as a request arriving after it.
			if d, err = decisionGet(ctx, x.pool, d.ID, false); err != nil {
				return nil, err
			}
			if d == nil {
				return nil, notFound(msgNotFound)
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("error deciding decision %s: %w", d.ID, err)
		}
		x.activity(ctx, actor, "", won.CompanyID, "decision.decided", activityEntityType, won.ID, map[string]any{
			"decisionId": won.ID, "optionId": opt.ID, "issueId": won.OriginIssueID})
		return x.execute(ctx, won, actor)
	}
}

// execute runs the chosen option's effects of a decided decision that are not yet done,
// each with its own execution row claimed before the effect runs; a row claimed by an
// interrupted earlier attempt is marked failed rather than run twice (create_issue, being
// idempotent through its key, is run again). It then settles executionStatus, queues the
// continuation wake once, and returns the decision with its executions.
func (x *Decisions) execute(ctx context.Context, d *Decision, actor *sdk.Actor) (*Decision, error) {
	if d.ExecutionStatus != nil && *d.ExecutionStatus != execRunning {
		return d, withExecutions(ctx, x.pool, d)
	}
	var effects []Effect
	for _, o := range d.Options {
		if o.ID == deref(d.ChosenOptionID) {
			effects = o.Effects
		}
	}
	done, err := executionsList(ctx, x.pool, []string{d.ID})
	if err != nil {
		return nil, err
	}
	rows := map[int]Execution{}
	for _, e := range done[d.ID] {
		rows[e.EffectIndex] = e
	}
	var ids []string
	for _, e := range effects {
		ids = append(ids, e.TargetIssueID)
	}
	current, err := x.currentTargets(ctx, d.CompanyID, ids)
	if err != nil {
		return nil, err
	}
	for i, e := range effects {
		prev, seen := rows[i]
		switch {
		case seen && prev.Status != rowClaimed:
			continue
		case seen && e.Type != effectCreateIssue:
			// Claimed by an interrupted attempt: it may have run, so it never runs again.
			x.finishRow(ctx, d, i, e, actor, rowFailed, nil, "interrupted before completion; not run again")
			continue
		case !seen:
			tag, err := x.pool.Exec(ctx, `INSERT INTO decision_effect_executions (decision_id, effect_index, effect_type,
				target_issue_id, status) VALUES ($1,$2,$3,$4,'claimed') ON CONFLICT (decision_id, effect_index) DO NOTHING`,
				d.ID, i, e.Type, e.TargetIssueID)
			if err != nil {
				return nil, fmt.Errorf("error claiming effect %d of %s: %w", i, d.ID, err)
			}
			if tag.RowsAffected() == 0 {
				continue // another attempt holds it
			}
		}
		// A claimed create_issue runs again: its idempotency key returns the issue it made.
		if e.Staleness != "lenient" && targetMoved(d.TargetSnapshots[e.TargetIssueID], current[e.TargetIssueID],
			e.Type == effectCancelTree) {
			x.finishRow(ctx, d, i, e, actor, rowSkipped, nil, reasonTargetChanged)
			continue
		}
		result, err := x.runEffect(ctx, d, i, e, actor)
		if err != nil {
			x.finishRow(ctx, d, i, e, actor, rowFailed, nil, errorText(err))
			continue
		}
		x.finishRow(ctx, d, i, e, actor, rowExecuted, result, "")
	}
	if err := withExecutions(ctx, x.pool, d); err != nil {
		return nil, err
	}
	executed := 0
	for _, e := range *d.Executions {
		if e.Status == rowExecuted {
			executed++
		}
	}
	status := execPartial
	switch {
	case executed == len(effects):
		status = execSucceeded
	case executed == 0:
		status = execFailed
	}
	var wake string
	err = pgx.BeginFunc(ctx, x.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE decisions SET execution_status = $2, updated_at = clock_timestamp()
			WHERE id = $1 AND execution_status = 'running'`, d.ID, status)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		wake, err = x.wakeTx(ctx, tx, d, statusDecided)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("error settling decision %s: %w", d.ID, err)
	}
	x.deliver(ctx, wake)
	d.ExecutionStatus = &status
	return d, nil
}

// finishRow records an effect's outcome on its execution row with its activity entry.
func (x *Decisions) finishRow(ctx context.Context, d *Decision, i int, e Effect, actor *sdk.Actor, status string, result any, errText string) {
	action := map[string]string{rowExecuted: "decision.effect_executed", rowFailed: "decision.effect_failed",
		rowSkipped: "decision.effect_skipped"}[status]
	details := map[string]any{"decisionId": d.ID, "effectIndex": i, "effectType": e.Type, "targetIssueId": e.TargetIssueID}
	if errText != "" {
		details["reason"] = errText
	}
	logID := x.activity(ctx, actor, systemActorExecution, d.CompanyID, action, activityEntityType, d.ID, details)
	var rj []byte
	if result != nil {
		rj, _ = json.Marshal(result)
	}
	if _, err := x.pool.Exec(ctx, `WITH row AS (UPDATE decision_effect_executions SET status = $3, result = $4, error = $5,
		activity_log_id = $6, executed_at = clock_timestamp() WHERE decision_id = $1 AND effect_index = $2)
		UPDATE decisions SET updated_at = clock_timestamp() WHERE id = $1`,
		d.ID, i, status, rj, nilIfEmpty(errText), nilIfEmpty(logID)); err != nil {
		x.log.Error("error recording effect outcome", "decision", d.ID, "effect", i, "error", err)
	}
}

// runEffect runs one effect through the work owner's provided methods as actor.
func (x *Decisions) runEffect(ctx context.Context, d *Decision, i int, e Effect, actor *sdk.Actor) (any, error) {
	text := func(s *string) string { return substitute(deref(s), d.InputValues) }
	var out map[string]any
	switch e.Type {
	case effectComment:
		err := x.call(ctx, actor, "work.comments.add", d.CompanyID, map[string]any{"issueId": e.TargetIssueID, "body": text(e.BodyMarkdown)}, &out)
		return map[string]any{"commentId": out["id"]}, err
	case effectCreateIssue:
		var draft map[string]any
		if err := json.Unmarshal(e.Draft, &draft); err != nil {
			return nil, fmt.Errorf("error reading draft: %w", err)
		}
		if _, ok := draft["parentId"]; !ok {
			draft["parentId"] = e.TargetIssueID
		}
		draft["idempotencyKey"] = fmt.Sprintf("decision:%s:%d", d.ID, i)
		err := x.call(ctx, actor, "work.issues.create", d.CompanyID, draft, &out)
		return map[string]any{"issueId": out["id"], "identifier": out["identifier"]}, err
	case effectStatus:
		in := map[string]any{"id": e.TargetIssueID, "status": *e.Status}
		if e.Comment != nil {
			in["comment"] = text(e.Comment)
		}
		err := x.call(ctx, actor, "work.issues.update", d.CompanyID, in, nil)
		return map[string]any{"status": *e.Status}, err
	case effectAssign:
		in := map[string]any{"id": e.TargetIssueID, "assigneeAgentId": e.AssigneeAgentID, "assigneeUserId": e.AssigneeUserID}
		if e.Comment != nil {
			in["comment"] = text(e.Comment)
		}
		err := x.call(ctx, actor, "work.issues.update", d.CompanyID, in, nil)
		return map[string]any{"assigneeAgentId": e.AssigneeAgentID, "assigneeUserId": e.AssigneeUserID}, err
	case effectCancelTree:
		if err := x.call(ctx, actor, "work.comments.add", d.CompanyID, map[string]any{"issueId": e.TargetIssueID,
			"body": text(e.ReasonComment)}, nil); err != nil {
			return nil, err
		}
		err := x.call(ctx, actor, "work.issues.cancelTree", d.CompanyID, map[string]any{"issueId": e.TargetIssueID}, &out)
		return map[string]any{"issueIds": out["issueIds"]}, err
	case effectResolve:
		var iss struct {
			BlockedBy []struct {
				ID string `json:"id"`
			} `json:"blockedBy"`
		}
		if err := x.call(ctx, actor, "work.issues.get", d.CompanyID, map[string]any{"id": e.TargetIssueID}, &iss); err != nil {
			return nil, err
		}
		remove := map[string]bool{}
		for _, id := range e.RemoveBlockedByIssueIDs {
			remove[strings.ToLower(id)] = true
		}
		keep := []string{}
		var removed []string
		for _, b := range iss.BlockedBy {
			if remove[b.ID] {
				removed = append(removed, b.ID)
			} else {
				keep = append(keep, b.ID)
			}
		}
		err := x.call(ctx, actor, "work.issues.update", d.CompanyID, map[string]any{"id": e.TargetIssueID, "blockedByIssueIds": keep}, nil)
		return map[string]any{"removedBlockedByIssueIds": removed}, err
	}
	return nil, fmt.Errorf("unknown effect type %s", e.Type)
}

// currentTargets reads the targets' current state; a target that no longer exists is
// absent from the map.
func (x *Decisions) currentTargets(ctx context.Context, companyID string, ids []string) (map[string]target, error) {
	uniq := map[string]bool{}
	var list []string
	for _, id := range ids {
		if !uniq[id] {
			uniq[id] = true
			list = append(list, id)
		}
	}
	out, err := x.readTargets(ctx, sdk.SystemActor(), companyID, list)
	var se *sdk.Error
	if err == nil || !errors.As(err, &se) || se.Status != http.StatusUnprocessableEntity {
		return out, err
	}
	// Some target is gone: read them one by one.
	out = map[string]target{}
	for _, id := range list {
		one, err := x.readTargets(ctx, sdk.SystemActor(), companyID, []string{id})
		if errors.As(err, &se) && se.Status == http.StatusUnprocessableEntity {
			continue
		}
		if err != nil {
			return nil, err
		}
		maps.Copy(out, one)
	}
	return out, nil
}

// targetMoved reports whether a target's status or assignee (agent or user) changed since
// its snapshot, or it disappeared; for the target of a tree effect (tree), whether its
// descendant count changed too (a tree that grew would cancel issues nobody saw). A snapshot
// without a count (taken before counts were recorded) compares status and assignees only.
func targetMoved(s Snapshot, cur target, tree bool) bool {
	return cur.ID == "" || cur.Status != s.Status || deref(cur.AssigneeAgentID) != deref(s.AssigneeAgentID) ||
		deref(cur.AssigneeUserID) != deref(s.AssigneeUserID) ||
		(tree && s.DescendantCount != nil && *s.DescendantCount != cur.DescendantCount)
}

// treeTargets lists the targets of d's cancel_issue_tree effects.
func treeTargets(d *Decision) map[string]bool {
	out := map[string]bool{}
	for _, o := range d.Options {
		for _, e := range o.Effects {
			if e.Type == effectCancelTree {
				out[e.TargetIssueID] = true
			}
		}
	}
	return out
}

func (x *Decisions) dismissRoute(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	d, err := x.loadDecision(r)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	var body DismissBody
	if err := sdk.DecodeJSONStrict(r, &body); err != nil {
		x.writeErr(rw, err)
		return
	}
	if body.Reason != nil && utf8.RuneCountInString(*body.Reason) > maxReasonLength {
		x.writeErr(rw, sdk.Invalid("reason", fmt.Sprintf("must be at most %d characters", maxReasonLength)))
		return
	}
	switch {
	case d.Status == statusExpired:
		x.writeErr(rw, expired())
		return
	case d.Status != statusOpen:
		x.writeErr(rw, alreadyResolved())
		return
	case !d.ExpiresAt.After(nowUTC()):
		if err := x.expireNow(ctx, d, "expires_at"); err != nil {
			x.writeErr(rw, err)
			return
		}
		x.writeErr(rw, expired())
		return
	}
	if err := x.verify(d); err != nil {
		x.writeErr(rw, err)
		return
	}
	chosen := chosenDismissed
	for _, o := range d.Options {
		if len(o.Effects) == 0 {
			chosen = o.ID
			break
		}
	}
	actor := sdk.ActorFrom(ctx)
	meta := map[string]any{"dismissed": true}
	if body.Reason != nil {
		meta["dismissReason"] = *body.Reason
	}
	var out *Decision
	var wake string
	err = pgx.BeginFunc(ctx, x.pool, func(tx pgx.Tx) error {
		out, err = scanDecision(tx.QueryRow(ctx, `UPDATE decisions SET status = 'decided', execution_status = 'succeeded',
			chosen_option_id = $2, dismissed = true, decided_by_user_id = $3, decided_at = clock_timestamp(),
			resolved_at = clock_timestamp(), updated_at = clock_timestamp(), metadata = metadata || $4
			WHERE id = $1 AND status = 'open' RETURNING `+decisionCols, d.ID, chosen, actor.UserId, mustJSON(meta)))
		if err != nil {
			return err
		}
		wake, err = x.wakeTx(ctx, tx, out, statusDecided)
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		x.writeErr(rw, alreadyResolved())
		return
	}
	if err != nil {
		x.writeErr(rw, fmt.Errorf("error dismissing decision %s: %w", d.ID, err))
		return
	}
	x.activity(ctx, actor, "", out.CompanyID, "decision.dismissed", activityEntityType, out.ID, map[string]any{
		"decisionId": out.ID, "chosenOptionId": chosen, "reason": body.Reason})
	x.deliver(ctx, wake)
	sdk.WriteJSON(rw, http.StatusOK, out)
}

func (x *Decisions) cancelRoute(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	d, err := x.loadDecision(r)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	actor := sdk.ActorFrom(ctx)
	if actor.Type == "agent" && actor.AgentId != d.OriginAgentID {
		x.writeErr(rw, forbidden(msgCancelOwnOnly))
		return
	}
	switch d.Status {
	case statusCancelled:
		sdk.WriteJSON(rw, http.StatusOK, d)
		return
	case statusDecided, statusExpired:
		x.writeErr(rw, alreadyResolved())
		return
	}
	var out *Decision
	var wake string
	err = pgx.BeginFunc(ctx, x.pool, func(tx pgx.Tx) error {
		out, err = scanDecision(tx.QueryRow(ctx, `UPDATE decisions SET status = 'cancelled', resolved_at = clock_timestamp(),
			updated_at = clock_timestamp() WHERE id = $1 AND status = 'open' RETURNING `+decisionCols, d.ID))
		if err != nil {
			return err
		}
		wake, err = x.wakeTx(ctx, tx, out, statusCancelled)
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		if d, err = decisionGet(ctx, x.pool, d.ID, false); err == nil && d != nil && d.Status == statusCancelled {
			sdk.WriteJSON(rw, http.StatusOK, d)
			return
		}
		x.writeErr(rw, alreadyResolved())
		return
	}
	if err != nil {
		x.writeErr(rw, fmt.Errorf("error cancelling decision %s: %w", d.ID, err))
		return
	}
	x.activity(ctx, actor, "", out.CompanyID, "decision.cancelled", activityEntityType, out.ID, map[string]any{"decisionId": out.ID})
	x.deliver(ctx, wake)
	sdk.WriteJSON(rw, http.StatusOK, out)
}

// sweepResult is the output of a sweep.
type sweepResult struct {
	Expired []string `json:"expired"`
	Resumed []string `json:"resumed"`
	// PrunedItems counts queue items removed by their queue's retentionDays.
	PrunedItems int64 `json:"prunedItems"`
}

// sweep expires open decisions past expiresAt at now and resumes decided decisions whose
// effects an interrupted request left running.
func (x *Decisions) sweep(ctx context.Context, now time.Time) (*sweepResult, error) {
	out := &sweepResult{Expired: []string{}, Resumed: []string{}}
	rows, err := x.pool.Query(ctx, `SELECT `+decisionCols+` FROM decisions WHERE status = 'open' AND expires_at <= $1 LIMIT 500`, now)
	if err != nil {
		return nil, fmt.Errorf("error listing expired decisions: %w", err)
	}
	due, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*Decision, error) { return scanDecision(r) })
	if err != nil {
		return nil, fmt.Errorf("error reading expired decisions: %w", err)
	}
	for _, d := range due {
		if err := x.expireNow(ctx, d, "expires_at"); err != nil {
			return nil, err
		}
		out.Expired = append(out.Expired, d.ID)
	}
	gone, err := x.expireVanished(ctx)
	if err != nil {
		return nil, err
	}
	out.Expired = append(out.Expired, gone...)
	if out.PrunedItems, err = x.pruneRetained(ctx, now); err != nil {
		return nil, err
	}
	rows, err = x.pool.Query(ctx, `SELECT `+decisionCols+` FROM decisions WHERE status = 'decided' AND execution_status = 'running'
		AND updated_at < $1 LIMIT 100`, now.Add(-time.Minute))
	if err != nil {
		return nil, fmt.Errorf("error listing running decisions: %w", err)
	}
	running, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*Decision, error) { return scanDecision(r) })
	if err != nil {
		return nil, fmt.Errorf("error reading running decisions: %w", err)
	}
	for _, d := range running {
		// Take the decision with a conditional touch, so one sweeper resumes it while the
		// request deciding it (which touches it after every effect) is not overtaken.
		tag, err := x.pool.Exec(ctx, `UPDATE decisions SET updated_at = clock_timestamp() WHERE id = $1
			AND execution_status = 'running' AND updated_at = $2`, d.ID, d.UpdatedAt)
		if err != nil {
			return nil, fmt.Errorf("error taking decision %s: %w", d.ID, err)
		}
		if tag.RowsAffected() == 0 {
			continue
		}
		if err := x.verify(d); err != nil {
			x.log.Warn("not resuming a decision whose signature fails", "decision", d.ID)
			continue
		}
		if _, err := x.execute(ctx, d, sdk.SystemActor()); err != nil {
			return nil, err
		}
		out.Resumed = append(out.Resumed, d.ID)
	}
	return out, nil
}

// expireVanished expires open decisions one of whose strict effects targets an issue that
// no longer exists, reading each company's targets once.
func (x *Decisions) expireVanished(ctx context.Context) ([]string, error) {
	rows, err := x.pool.Query(ctx, `SELECT `+decisionCols+` FROM decisions WHERE status = 'open' ORDER BY company_id LIMIT 2000`)
	if err != nil {
		return nil, fmt.Errorf("error listing open decisions: %w", err)
	}
	open, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*Decision, error) { return scanDecision(r) })
	if err != nil {
		return nil, fmt.Errorf("error reading open decisions: %w", err)
	}
	byCompany := map[string][]*Decision{}
	for _, d := range open {
		byCompany[d.CompanyID] = append(byCompany[d.CompanyID], d)
	}
	var out []string
	for companyID, ds := range byCompany {
		var ids []string
		for _, d := range ds {
			for id := range d.TargetSnapshots {
				ids = append(ids, id)
			}
		}
		current, err := x.currentTargets(ctx, companyID, ids)
		if err != nil {
			// The work owner may be restarting: the next sweep looks again.
			x.log.Warn("error reading decision targets", "company", companyID, "error", err)
			continue
		}
		for _, d := range ds {
			if !strictTargetGone(d, current) {
				continue
			}
			if err := x.expireNow(ctx, d, "target_missing"); err != nil {
				return nil, err
			}
			out = append(out, d.ID)
		}
	}
	return out, nil
}

// strictTargetGone reports whether a strict effect of d targets an issue missing from current.
func strictTargetGone(d *Decision, current map[string]target) bool {
	for _, o := range d.Options {
		for _, e := range o.Effects {
			if e.Staleness != "lenient" && current[e.TargetIssueID].ID == "" {
				return true
			}
		}
	}
	return false
}

func (x *Decisions) methodSweep(ctx context.Context, call *sdk.MethodCall) (any, error) {
	if call.Caller != "kernel" && (call.Actor == nil || call.Actor.Type != "system") {
		return nil, forbidden("Only the kernel or the system may sweep decisions")
	}
	var in struct {
		Now string `json:"now"`
	}
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	now := nowUTC()
	if s := strings.TrimSpace(in.Now); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return nil, sdk.Invalid("now", "must be an RFC 3339 time")
		}
		now = t
	}
	return x.sweep(ctx, now)
}

// errorText is the client-facing text of an effect's failure.
func errorText(err error) string {
	var e *sdk.Error
	if errors.As(err, &e) {
		return e.Message
	}
	return err.Error()
}

// nilIfEmpty returns nil for "".
func nilIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
