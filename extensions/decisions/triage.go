package decisions

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/keelhq/keel/sdk"
)

// Triage, retention and archive of attention items (REFERENCE.md 5 "Decision queues"). The
// state belongs to the item in the company, whichever queues hold it: queue item lists hide
// archived and snoozed items and show the triage fields, the retention sweep keeps items
// marked keep, and archive proposals (from agents or people) wait until the board archives
// the item (accepted) or marks it keep (rejected).

// Triage texts and limits.
const (
	msgProposalIdemConflict = "Decision archive proposal idempotency key already used with a different payload"
	maxArchiveReason        = 2000
	maxProposalItems        = 50
	decideByToday           = "today"
	decideByThisWeek        = "this_week"
	decideByWhenever        = "whenever"
	itemEntityType          = "decision_item"
)

var dateRe = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)

// ItemState is the triage, retention and archive state of one attention item.
type ItemState struct {
	CompanyID  string `json:"companyId"`
	SourceKind string `json:"sourceKind"`
	SourceID   string `json:"sourceId"`
	// DecideBy is today, this_week, whenever, a YYYY-MM-DD date, or null.
	DecideBy *string `json:"decideBy"`
	// DecideByDate is the UTC day DecideBy resolved to when it was set (null for whenever).
	DecideByDate *string `json:"decideByDate"`
	// SnoozedUntil hides the item from queue lists until then.
	SnoozedUntil *time.Time `json:"snoozedUntil"`
	// Keep exempts the item from queue retention and rejects archive proposals.
	Keep              bool       `json:"keep"`
	ArchivedAt        *time.Time `json:"archivedAt"`
	ArchivedByType    *string    `json:"archivedByType"`
	ArchivedByAgentID *string    `json:"archivedByAgentId"`
	ArchivedByUserID  *string    `json:"archivedByUserId"`
	ArchiveReason     *string    `json:"archiveReason"`
	// PendingArchiveProposals counts proposals to archive the item that wait for the board.
	PendingArchiveProposals int        `json:"pendingArchiveProposals"`
	UpdatedAt               *time.Time `json:"updatedAt"`
}

// TriageBody is the body of PUT /api/companies/{companyId}/decision-triage/{sourceKind}/{sourceId};
// both fields are replaced (absent is null).
type TriageBody struct {
	// DecideBy is today, this_week, whenever, a YYYY-MM-DD date, or null.
	DecideBy *string `json:"decideBy"`
	// SnoozedUntil is a future ISO 8601 time, or null.
	SnoozedUntil *string `json:"snoozedUntil" jsonschema:"format=date-time"`
}

// RetentionBody is the body of PATCH /api/companies/{companyId}/decision-retention/{sourceKind}/{sourceId}.
type RetentionBody struct {
	// Keep exempts the item from queue retention (and rejects pending archive proposals).
	Keep *bool `json:"keep" jsonschema:"required"`
}

// ArchiveBody is the optional body of POST …/decision-retention/{sourceKind}/{sourceId}/archive.
type ArchiveBody struct {
	// Reason is up to 2000 characters.
	Reason *string `json:"reason,omitempty" jsonschema:"maxLength=2000"`
}

// ProposalItem is one item an archive proposal names.
type ProposalItem struct {
	SourceKind *string `json:"sourceKind" jsonschema:"required"`
	SourceID   *string `json:"sourceId" jsonschema:"required,maxLength=500"`
	Reason     *string `json:"reason,omitempty" jsonschema:"maxLength=2000"`
}

// ProposalsBody is the body of POST /api/companies/{companyId}/decision-archive-proposals.
type ProposalsBody struct {
	// Items are the 1-50 items proposed for archiving.
	Items []ProposalItem `json:"items" jsonschema:"required,minItems=1,maxItems=50"`
	// IdempotencyKey (1-500) makes a replay of the same items return the original proposals.
	IdempotencyKey *string `json:"idempotencyKey,omitempty" jsonschema:"minLength=1,maxLength=500"`
}

// Proposal is a proposal to archive an attention item.
type Proposal struct {
	ID                string     `json:"id"`
	CompanyID         string     `json:"companyId"`
	BatchID           string     `json:"batchId"`
	SourceKind        string     `json:"sourceKind"`
	SourceID          string     `json:"sourceId"`
	Reason            *string    `json:"reason"`
	Status            string     `json:"status"`
	ProposedByType    string     `json:"proposedByType"`
	ProposedByAgentID *string    `json:"proposedByAgentId"`
	ProposedByUserID  *string    `json:"proposedByUserId"`
	ProposedByRunID   *string    `json:"proposedByRunId"`
	CreatedAt         time.Time  `json:"createdAt"`
	ResolvedAt        *time.Time `json:"resolvedAt"`
}

func init() {
	co := "/api/companies/{companyId}/"
	item := "{sourceKind}/{sourceId}"
	addRoutes(
		route{Method: "GET", Path: co + "decision-triage/" + item, Response: new(ItemState), CompanyFromPath: true, Access: sdk.AccessEither,
			Permission: permQueueRead, Summary: "An attention item's triage, retention and archive state",
			Handle: (*Decisions).triageGetRoute},
		route{Method: "PUT", Path: co + "decision-triage/" + item, Response: new(ItemState), CompanyFromPath: true, Access: sdk.AccessEither,
			Permission: permQueueManage, Summary: "Set an attention item's decideBy and snoozedUntil", Body: TriageBody{},
			Handle: (*Decisions).triagePutRoute},
		route{Method: "PATCH", Path: co + "decision-retention/" + item, Response: new(ItemState), CompanyFromPath: true, Access: sdk.AccessEither,
			Permission: permQueueManage, Summary: "Keep an attention item past queue retention (rejects pending archive proposals)",
			Body: RetentionBody{}, Handle: (*Decisions).retentionRoute},
		route{Method: "POST", Path: co + "decision-retention/" + item + "/archive", Response: new(ItemState), CompanyFromPath: true, Access: sdk.AccessEither,
			Permission: permQueueManage, Summary: "Archive an attention item (hidden from queues; accepts pending archive proposals)",
			Body: ArchiveBody{}, Handle: (*Decisions).archiveRoute},
		route{Method: "POST", Path: co + "decision-retention/" + item + "/revive", Response: new(ItemState), CompanyFromPath: true, Access: sdk.AccessEither,
			Permission: permQueueManage, Summary: "Revive an archived attention item", Handle: (*Decisions).reviveRoute},
		route{Method: "POST", Path: co + "decision-archive-proposals", Status: http.StatusCreated, Response: new(map[string]any), CompanyFromPath: true, Access: sdk.AccessEither,
			Permission: permQueueRead, Summary: "Propose archiving 1-50 attention items (idempotent by idempotencyKey)",
			Body: ProposalsBody{}, Handle: (*Decisions).proposalsCreateRoute},
		route{Method: "GET", Path: co + "decision-archive-proposals", Response: new([]*Proposal), CompanyFromPath: true, Access: sdk.AccessEither,
			Permission: permQueueRead, Summary: "Archive proposals newest first (filter status, limit 1-100)",
			Handle: (*Decisions).proposalsListRoute},
	)
}

// itemRef reads and checks the {sourceKind}/{sourceId} of the path.
func itemRef(r *http.Request) (string, string, error) {
	kind, id := r.PathValue("sourceKind"), r.PathValue("sourceId")
	return kind, id, checkItem(&kind, &id)
}

const stateCols = `decide_by, to_char(decide_by_date, 'YYYY-MM-DD'), snoozed_until, keep, archived_at, archived_by_type,
	archived_by_agent_id, archived_by_user_id, archive_reason, updated_at`

// itemState loads an item's state; an item never triaged has the defaults.
func (x *Decisions) itemState(ctx context.Context, q querier, companyID, kind, id string) (*ItemState, error) {
	s := &ItemState{CompanyID: companyID, SourceKind: kind, SourceID: id}
	var updated time.Time
	err := q.QueryRow(ctx, `SELECT `+stateCols+` FROM decision_item_states WHERE company_id = $1 AND source_kind = $2
		AND source_id = $3`, companyID, kind, id).Scan(&s.DecideBy, &s.DecideByDate, &s.SnoozedUntil, &s.Keep, &s.ArchivedAt,
		&s.ArchivedByType, &s.ArchivedByAgentID, &s.ArchivedByUserID, &s.ArchiveReason, &updated)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return nil, fmt.Errorf("error loading the state of %s %s: %w", kind, id, err)
	default:
		s.UpdatedAt = &updated
	}
	if err := q.QueryRow(ctx, `SELECT count(*) FROM decision_archive_proposals WHERE company_id = $1 AND source_kind = $2
		AND source_id = $3 AND status = 'pending'`, companyID, kind, id).Scan(&s.PendingArchiveProposals); err != nil {
		return nil, fmt.Errorf("error counting archive proposals of %s %s: %w", kind, id, err)
	}
	return s, nil
}

// upsertState applies set (an SQL SET list over the named args) to an item's state row,
// creating it first when missing, and returns the state.
func (x *Decisions) upsertState(ctx context.Context, companyID, kind, id, set string, args ...any) (*ItemState, error) {
	var out *ItemState
	err := pgx.BeginFunc(ctx, x.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO decision_item_states (company_id, source_kind, source_id) VALUES ($1,$2,$3)
			ON CONFLICT DO NOTHING`, companyID, kind, id); err != nil {
			return fmt.Errorf("error creating the state of %s %s: %w", kind, id, err)
		}
		all := append([]any{companyID, kind, id}, args...)
		if _, err := tx.Exec(ctx, `UPDATE decision_item_states SET `+set+`, updated_at = clock_timestamp()
			WHERE company_id = $1 AND source_kind = $2 AND source_id = $3`, all...); err != nil {
			return fmt.Errorf("error updating the state of %s %s: %w", kind, id, err)
		}
		var err error
		out, err = x.itemState(ctx, tx, companyID, kind, id)
		return err
	})
	return out, err
}

// resolveProposals moves an item's pending archive proposals to status.
func (x *Decisions) resolveProposals(ctx context.Context, companyID, kind, id, status string) error {
	if _, err := x.pool.Exec(ctx, `UPDATE decision_archive_proposals SET status = $4, resolved_at = clock_timestamp()
		WHERE company_id = $1 AND source_kind = $2 AND source_id = $3 AND status = 'pending'`, companyID, kind, id, status); err != nil {
		return fmt.Errorf("error resolving archive proposals of %s %s: %w", kind, id, err)
	}
	return nil
}

func (x *Decisions) triageGetRoute(rw http.ResponseWriter, r *http.Request) {
	kind, id, err := itemRef(r)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	s, err := x.itemState(r.Context(), x.pool, sdk.CompanyIDFrom(r.Context()), kind, id)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, s)
}

// decideByDate resolves decideBy at now to a UTC day: today, the Sunday ending this ISO
// week, the date itself, or nil for whenever.
func decideByDate(v string, now time.Time) (*string, bool) {
	day := func(t time.Time) *string { return ptr(t.Format(time.DateOnly)) }
	switch v {
	case decideByToday:
		return day(now), true
	case decideByThisWeek:
		return day(now.AddDate(0, 0, (7-int(now.Weekday()))%7)), true
	case decideByWhenever:
		return nil, true
	}
	if !dateRe.MatchString(v) {
		return nil, false
	}
	t, err := time.Parse(time.DateOnly, v)
	if err != nil {
		return nil, false
	}
	return day(t), true
}

func (x *Decisions) triagePutRoute(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := sdk.CompanyIDFrom(ctx)
	kind, id, err := itemRef(r)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	var body TriageBody
	if err := sdk.DecodeJSON(r, &body); err != nil {
		x.writeErr(rw, err)
		return
	}
	now := nowUTC()
	var d []detail
	var date *string
	if body.DecideBy != nil {
		var ok bool
		if date, ok = decideByDate(*body.DecideBy, now); !ok {
			d = append(d, detail{Path: "decideBy", Message: "must be today, this_week, whenever, a YYYY-MM-DD date or null"})
		}
	}
	var snooze *time.Time
	if body.SnoozedUntil != nil {
		t, err := time.Parse(time.RFC3339Nano, *body.SnoozedUntil)
		switch {
		case err != nil:
			d = append(d, detail{Path: "snoozedUntil", Message: "must be an ISO 8601 date-time or null"})
		case !t.After(now):
			d = append(d, detail{Path: "snoozedUntil", Message: "must be in the future"})
		default:
			snooze = ptr(t.UTC())
		}
	}
	if err := validation(d); err != nil {
		x.writeErr(rw, err)
		return
	}
	s, err := x.upsertState(ctx, companyID, kind, id, `decide_by = $4, decide_by_date = $5::date, snoozed_until = $6`,
		body.DecideBy, date, snooze)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	x.activity(ctx, sdk.ActorFrom(ctx), "", companyID, "decision_item.triaged", itemEntityType, kind+":"+id, map[string]any{
		"sourceKind": kind, "sourceId": id, "decideBy": s.DecideBy, "snoozedUntil": s.SnoozedUntil})
	sdk.WriteJSON(rw, http.StatusOK, s)
}

func (x *Decisions) retentionRoute(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := sdk.CompanyIDFrom(ctx)
	kind, id, err := itemRef(r)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	var body RetentionBody
	if err := sdk.DecodeJSON(r, &body); err != nil {
		x.writeErr(rw, err)
		return
	}
	if body.Keep == nil {
		x.writeErr(rw, sdk.Invalid("keep", "is required"))
		return
	}
	if *body.Keep {
		if err := x.resolveProposals(ctx, companyID, kind, id, "rejected"); err != nil {
			x.writeErr(rw, err)
			return
		}
	}
	s, err := x.upsertState(ctx, companyID, kind, id, `keep = $4`, *body.Keep)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	x.activity(ctx, sdk.ActorFrom(ctx), "", companyID, "decision_item.retention_updated", itemEntityType, kind+":"+id,
		map[string]any{"sourceKind": kind, "sourceId": id, "keep": s.Keep})
	sdk.WriteJSON(rw, http.StatusOK, s)
}

func (x *Decisions) archiveRoute(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := sdk.CompanyIDFrom(ctx)
	kind, id, err := itemRef(r)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	var body ArchiveBody
	if r.ContentLength != 0 {
		if err := sdk.DecodeJSON(r, &body); err != nil {
			x.writeErr(rw, err)
			return
		}
	}
	if body.Reason != nil && utf8.RuneCountInString(*body.Reason) > maxArchiveReason {
		x.writeErr(rw, sdk.Invalid("reason", fmt.Sprintf("must be at most %d characters", maxArchiveReason)))
		return
	}
	a := sdk.ActorFrom(ctx)
	byType, agentID, userID := "user", (*string)(nil), (*string)(nil)
	if a.Type == "agent" {
		byType, agentID = "agent", &a.AgentId
	} else {
		userID = &a.UserId
	}
	if err := x.resolveProposals(ctx, companyID, kind, id, "accepted"); err != nil {
		x.writeErr(rw, err)
		return
	}
	// Archiving an archived item keeps its first archive.
	s, err := x.upsertState(ctx, companyID, kind, id, `archived_by_type = CASE WHEN archived_at IS NULL THEN $4 ELSE archived_by_type END,
		archived_by_agent_id = CASE WHEN archived_at IS NULL THEN $5::uuid ELSE archived_by_agent_id END,
		archived_by_user_id = CASE WHEN archived_at IS NULL THEN $6 ELSE archived_by_user_id END,
		archive_reason = CASE WHEN archived_at IS NULL THEN $7 ELSE archive_reason END,
		archived_at = COALESCE(archived_at, clock_timestamp())`, byType, agentID, userID, body.Reason)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	x.activity(ctx, a, "", companyID, "decision_item.archived", itemEntityType, kind+":"+id, map[string]any{
		"sourceKind": kind, "sourceId": id, "reason": body.Reason})
	sdk.WriteJSON(rw, http.StatusOK, s)
}

func (x *Decisions) reviveRoute(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := sdk.CompanyIDFrom(ctx)
	kind, id, err := itemRef(r)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	s, err := x.upsertState(ctx, companyID, kind, id, `archived_at = NULL, archived_by_type = NULL, archived_by_agent_id = NULL,
		archived_by_user_id = NULL, archive_reason = NULL`)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	x.activity(ctx, sdk.ActorFrom(ctx), "", companyID, "decision_item.revived", itemEntityType, kind+":"+id, map[string]any{
		"sourceKind": kind, "sourceId": id})
	sdk.WriteJSON(rw, http.StatusOK, s)
}

const proposalCols = `id, company_id, batch_id, source_kind, source_id, reason, status, proposed_by_type, proposed_by_agent_id,
	proposed_by_user_id, proposed_by_run_id, created_at, resolved_at`

func scanProposal(row pgx.CollectableRow) (*Proposal, error) {
	var p Proposal
	err := row.Scan(&p.ID, &p.CompanyID, &p.BatchID, &p.SourceKind, &p.SourceID, &p.Reason, &p.Status, &p.ProposedByType,
		&p.ProposedByAgentID, &p.ProposedByUserID, &p.ProposedByRunID, &p.CreatedAt, &p.ResolvedAt)
	return &p, err
}

// batchProposals lists a batch's proposals in the order they were given.
func batchProposals(ctx context.Context, q querier, batchID string) ([]*Proposal, error) {
	rows, err := q.Query(ctx, `SELECT `+proposalCols+` FROM decision_archive_proposals WHERE batch_id = $1 ORDER BY position`, batchID)
	if err != nil {
		return nil, fmt.Errorf("error listing archive proposals: %w", err)
	}
	return pgx.CollectRows(rows, scanProposal)
}

func (x *Decisions) proposalsCreateRoute(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := sdk.CompanyIDFrom(ctx)
	var body ProposalsBody
	if err := sdk.DecodeJSON(r, &body); err != nil {
		x.writeErr(rw, err)
		return
	}
	var d []detail
	if n := len(body.Items); n < 1 || n > maxProposalItems {
		d = append(d, detail{Path: "items", Message: fmt.Sprintf("must have 1 to %d entries", maxProposalItems)})
	}
	for i, it := range body.Items {
		d = append(d, itemDetails(fmt.Sprintf("items.%d.", i), it.SourceKind, it.SourceID)...)
		if it.Reason != nil && utf8.RuneCountInString(*it.Reason) > maxArchiveReason {
			d = append(d, detail{Path: fmt.Sprintf("items.%d.reason", i), Message: fmt.Sprintf("must be at most %d characters", maxArchiveReason)})
		}
	}
	if k := body.IdempotencyKey; k != nil && (*k == "" || utf8.RuneCountInString(*k) > maxIdemKey) {
		d = append(d, detail{Path: "idempotencyKey", Message: fmt.Sprintf("must be 1 to %d characters", maxIdemKey)})
	}
	if err := validation(d); err != nil {
		x.writeErr(rw, err)
		return
	}
	canon, err := canonical(body.Items)
	if err != nil {
		x.writeErr(rw, fmt.Errorf("error hashing archive proposals: %w", err))
		return
	}
	sum := sha256.Sum256(canon)
	hash := hex.EncodeToString(sum[:])
	a := sdk.ActorFrom(ctx)
	byType, agentID, userID, runID := "user", (*string)(nil), (*string)(nil), (*string)(nil)
	if a.Type == "agent" {
		byType, agentID, runID = "agent", &a.AgentId, nilIfEmpty(a.RunId)
	} else {
		userID = &a.UserId
	}
	batchID := uuid.NewString()
	var out []*Proposal
	err = pgx.BeginFunc(ctx, x.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO decision_archive_proposal_batches (id, company_id, idempotency_key, payload_hash)
			VALUES ($1,$2,$3,$4)`, batchID, companyID, body.IdempotencyKey, hash); err != nil {
			return err
		}
		for i, it := range body.Items {
			if _, err := tx.Exec(ctx, `INSERT INTO decision_archive_proposals (id, company_id, batch_id, position, source_kind,
				source_id, reason, proposed_by_type, proposed_by_agent_id, proposed_by_user_id, proposed_by_run_id)
				VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11)`, uuid.NewString(), companyID, batchID, i, *it.SourceKind, *it.SourceID,
				it.Reason, byType, agentID, userID, runID); err != nil {
				return fmt.Errorf("error inserting archive proposal: %w", err)
			}
		}
		var err error
		out, err = batchProposals(ctx, tx, batchID)
		return err
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		// The key was used: the same items replay the original proposals, others conflict.
		var prevID, prevHash string
		if err := x.pool.QueryRow(ctx, `SELECT id, payload_hash FROM decision_archive_proposal_batches WHERE company_id = $1
			AND idempotency_key = $2`, companyID, *body.IdempotencyKey).Scan(&prevID, &prevHash); err != nil {
			x.writeErr(rw, fmt.Errorf("error reading archive proposal batch: %w", err))
			return
		}
		if prevHash != hash {
			x.writeErr(rw, sdk.Conflict(msgProposalIdemConflict))
			return
		}
		if out, err = batchProposals(ctx, x.pool, prevID); err != nil {
			x.writeErr(rw, err)
			return
		}
		sdk.WriteJSON(rw, http.StatusCreated, map[string]any{"id": prevID, "proposals": out})
		return
	}
	if err != nil {
		x.writeErr(rw, fmt.Errorf("error proposing archives: %w", err))
		return
	}
	x.activity(ctx, a, "", companyID, "decision_archive.proposed", "decision_archive_proposal", batchID, map[string]any{
		"batchId": batchID, "itemCount": len(out)})
	sdk.WriteJSON(rw, http.StatusCreated, map[string]any{"id": batchID, "proposals": out})
}

func (x *Decisions) proposalsListRoute(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	var d []detail
	status := q.Get("status")
	if status != "" && !slices.Contains([]string{"pending", "accepted", "rejected"}, status) {
		d = append(d, detail{Path: "status", Message: "must be one of pending, accepted, rejected"})
	}
	limit := 50
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 100 {
			d = append(d, detail{Path: "limit", Message: "must be an integer from 1 to 100"})
		}
		limit = n
	}
	if err := validation(d); err != nil {
		x.writeErr(rw, err)
		return
	}
	rows, err := x.pool.Query(ctx, `SELECT `+proposalCols+` FROM decision_archive_proposals WHERE company_id = $1
		AND ($2 = '' OR status = $2) ORDER BY created_at DESC, position DESC LIMIT $3`, sdk.CompanyIDFrom(ctx), status, limit)
	if err != nil {
		x.writeErr(rw, fmt.Errorf("error listing archive proposals: %w", err))
		return
	}
	out, err := pgx.CollectRows(rows, scanProposal)
	if err != nil {
		x.writeErr(rw, fmt.Errorf("error reading archive proposals: %w", err))
		return
	}
	if out == nil {
		out = []*Proposal{}
	}
	sdk.WriteJSON(rw, http.StatusOK, out)
}

// pruneRetained removes queue items older than their queue's retentionDays at now, except
// items marked keep, and returns how many went.
func (x *Decisions) pruneRetained(ctx context.Context, now time.Time) (int64, error) {
	tag, err := x.pool.Exec(ctx, `DELETE FROM decision_queue_items i USING decision_queues q
		WHERE i.queue_id = q.id AND q.retention_days IS NOT NULL AND i.created_at < $1::timestamptz - make_interval(days => q.retention_days)
		AND NOT EXISTS (SELECT 1 FROM decision_item_states s WHERE s.company_id = q.company_id AND s.source_kind = i.source_kind
			AND s.source_id = i.source_id AND s.keep)`, now)
	if err != nil {
		return 0, fmt.Errorf("error pruning retained queue items: %w", err)
	}
	return tag.RowsAffected(), nil
}
