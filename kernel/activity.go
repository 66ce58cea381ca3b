package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ActivityEntry is one row of the activity log, as the API shows it.
type ActivityEntry struct {
	ID                string          `json:"id"`
	CompanyID         *string         `json:"companyId"`
	ActorType         string          `json:"actorType"`
	ActorID           string          `json:"actorId"`
	Action            string          `json:"action"`
	EntityType        string          `json:"entityType"`
	EntityID          string          `json:"entityId"`
	AgentID           *string         `json:"agentId"`
	RunID             *string         `json:"runId"`
	ResponsibleUserID *string         `json:"responsibleUserId"`
	Details           json.RawMessage `json:"details"`
	CreatedAt         time.Time       `json:"createdAt"`
}

// ActivityInsertParams describes one activity entry. An empty CompanyID records an
// instance-level entry (extension lifecycle, for example).
type ActivityInsertParams struct {
	CompanyID         string
	ActorType         string
	ActorID           string
	Action            string
	EntityType        string
	EntityID          string
	AgentID           string
	RunID             string
	ResponsibleUserID string
	Details           any
	// ID, when set, makes the insert idempotent: an entry already recorded under it is
	// neither written nor delivered again (outboxes deliver at least once). An entry with
	// an ID that nobody subscribes to commits without waiting for its WAL flush: its writer
	// keeps delivering it until it records the delivery, later, in the same database.
	ID string
	// Source names the writer for event delivery ("kernel" or an extension key); entries
	// from SourceAPI are recorded but not delivered.
	Source string
	// CompanyMustExist refuses an entry for a company that does not exist (ErrCompanyNotFound)
	// in the insert itself, so a writer needs no read of the company first.
	CompanyMustExist bool
}

// ErrCompanyNotFound is ActivityInsert's error for an entry with CompanyMustExist whose
// company does not exist.
var ErrCompanyNotFound = errors.New("company not found")

// EventSubscriptions is an optional part of an EventPublisherTx: whether an event of this
// type from this source has any subscriber now. An entry nobody takes is written in one
// statement, without a transaction around it.
type EventSubscriptions interface {
	HasSubscribers(ctx context.Context, source, eventType string) bool
}

// EventPublisherTx is an EventPublisher that can enqueue deliveries in the same transaction
// as the activity entry, so an entry is never committed without its deliveries.
type EventPublisherTx interface {
	PublishEventTx(ctx context.Context, tx pgx.Tx, ev *Event) error
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// ActorFields returns the activity actor type and id of an API actor.
func ActorFields(a *Actor) (actorType, actorID, agentID string) {
	switch {
	case a.IsAgent():
		return "agent", a.AgentID, a.AgentID
	case a.IsBoard():
		return "user", a.UserID, ""
	}
	return "system", "", ""
}

// newActivityEntry validates an entry's parameters and encodes its details.
func newActivityEntry(p *ActivityInsertParams) (*ActivityEntry, error) {
	if p.Action == "" {
		return nil, fmt.Errorf("error appending activity: action is required")
	}
	details := []byte("{}")
	if p.Details != nil {
		switch d := p.Details.(type) {
		case json.RawMessage:
			if len(d) > 0 {
				details = d
			}
		case []byte:
			if len(d) > 0 {
				details = d
			}
		default:
			b, err := json.Marshal(d)
			if err != nil {
				return nil, fmt.Errorf("error encoding activity details: %w", err)
			}
			details = b
		}
	}
	if p.ActorType == "" {
		p.ActorType = "system"
	}
	id := p.ID
	if id == "" {
		id = newID()
	}
	e := &ActivityEntry{
		ID: id, CompanyID: nullable(p.CompanyID), ActorType: p.ActorType, ActorID: p.ActorID, Action: p.Action,
		EntityType: p.EntityType, EntityID: p.EntityID, AgentID: nullable(p.AgentID), RunID: nullable(p.RunID),
		ResponsibleUserID: nullable(p.ResponsibleUserID), Details: details,
	}
	return e, nil
}

// ActivityInsert appends an entry to the activity log and publishes it as the event named by
// its action (plus "activity.logged") to subscribed extensions, in one transaction. An entry
// that no extension takes is committed together with the other such entries appended at the
// same time, in one statement (activity_writer.go).
func (k *Kernel) ActivityInsert(ctx context.Context, p *ActivityInsertParams) (*ActivityEntry, error) {
	e, err := newActivityEntry(p)
	if err != nil {
		return nil, err
	}
	if !k.activityDelivered(ctx, p) {
		if k.activityW != nil {
			err = k.activityW.write(ctx, p, e)
		} else {
			_, err = k.activityWrite(ctx, k.Pool, p, e)
		}
		if err != nil {
			return nil, err
		}
		k.feed.notify(p.CompanyID)
		return e, nil
	}
	if err := k.activityInsertDelivered(ctx, p, e); err != nil {
		return nil, err
	}
	k.feed.notify(p.CompanyID)
	return e, nil
}

// activityInsertDelivered writes a prepared entry and its deliveries in a transaction of
// their own.
func (k *Kernel) activityInsertDelivered(ctx context.Context, p *ActivityInsertParams, e *ActivityEntry) error {
	tx, err := k.Pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("error appending activity %s: %w", p.Action, err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if err := k.activityInsertTx(ctx, tx, p, e); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("error appending activity %s: %w", p.Action, err)
	}
	return nil
}

// ActivityInsertMany appends entries as ActivityInsert appends each one, and returns what
// ActivityInsert would have returned for each, in order: entries[i] is nil exactly when
// errs[i] is set, and one refused entry (an unknown company, a missing action) does not fail
// the others. The entries that nobody subscribes to reach the group writer together, so they
// are committed in one statement (up to activityGroupMax of them); the delivered ones are
// written with their deliveries in one transaction, meanwhile. Entries written together
// share their createdAt, and the log orders them by id.
func (k *Kernel) ActivityInsertMany(ctx context.Context, ps []*ActivityInsertParams) (entries []*ActivityEntry, errs []error) {
	entries, errs = make([]*ActivityEntry, len(ps)), make([]error, len(ps))
	prepared := make([]*ActivityEntry, len(ps))
	var plain, delivered []int
	for i, p := range ps {
		e, err := newActivityEntry(p)
		if err != nil {
			errs[i] = err
			continue
		}
		prepared[i] = e
		if k.activityDelivered(ctx, p) {
			delivered = append(delivered, i)
		} else {
			plain = append(plain, i)
		}
	}
	var wait func()
	if len(plain) > 0 {
		pp, pe := make([]*ActivityInsertParams, len(plain)), make([]*ActivityEntry, len(plain))
		for j, i := range plain {
			pp[j], pe[j] = ps[i], prepared[i]
		}
		if k.activityW != nil {
			done := make(chan []error, 1)
			go func() { done <- k.activityW.writeMany(ctx, pp, pe) }()
			wait = func() {
				for j, err := range <-done {
					errs[plain[j]] = err
				}
			}
		} else {
			for j, i := range plain {
				_, errs[i] = k.activityWrite(ctx, k.Pool, pp[j], pe[j])
			}
		}
	}
	if len(delivered) > 0 {
		k.activityInsertDeliveredMany(ctx, ps, prepared, delivered, errs)
	}
	if wait != nil {
		wait()
	}
	notified := map[string]bool{}
	for i, e := range prepared {
		if e == nil || errs[i] != nil {
			continue
		}
		entries[i] = e
		if !notified[ps[i].CompanyID] {
			notified[ps[i].CompanyID] = true
			k.feed.notify(ps[i].CompanyID)
		}
	}
	return entries, errs
}

// activityInsertDeliveredMany writes the entries at indexes idx with their deliveries in
// one transaction, setting errs for the entries it refuses (an unknown company); when the
// transaction fails, it writes each entry in a transaction of its own, so that each gets
// its own error.
func (k *Kernel) activityInsertDeliveredMany(ctx context.Context, ps []*ActivityInsertParams, es []*ActivityEntry, idx []int, errs []error) {
	alone := func() {
		for _, i := range idx {
			errs[i] = k.activityInsertDelivered(ctx, ps[i], es[i])
		}
	}
	if len(idx) == 1 {
		alone()
		return
	}
	tx, err := k.Pool.Begin(ctx)
	if err != nil {
		alone()
		return
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	for _, i := range idx {
		err := k.activityInsertTx(ctx, tx, ps[i], es[i])
		if errors.Is(err, ErrCompanyNotFound) {
			errs[i] = err // refused by a read, which leaves the transaction usable
			continue
		}
		if err != nil {
			k.log.Debug("error appending delivered activity entries together; writing them one by one", "entries", len(idx), "error", err)
			_ = tx.Rollback(ctx)
			alone()
			return
		}
	}
	if err := tx.Commit(ctx); err != nil {
		k.log.Debug("error committing delivered activity entries together; writing them one by one", "entries", len(idx), "error", err)
		alone()
	}
}

// activityDelivered reports whether an entry is published to subscribers (false when the
// publisher knows that nobody takes it).
func (k *Kernel) activityDelivered(ctx context.Context, p *ActivityInsertParams) bool {
	pub, ok := k.events.(EventPublisherTx)
	if !ok || pub == nil || p.Source == SourceAPI {
		return false
	}
	if subs, ok := pub.(EventSubscriptions); ok {
		return subs.HasSubscribers(ctx, activitySource(p), p.Action)
	}
	return true
}

// activitySource is the event source of an entry: its writer, else the kernel.
func activitySource(p *ActivityInsertParams) string {
	if p.Source == "" {
		return OwnerKernel
	}
	return p.Source
}

// activityQuerier is what activityWrite runs its statements on: the pool or a transaction.
type activityQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// activityWrite inserts a prepared entry (with p.CompanyMustExist, only when its company
// exists) and sets its created_at; an entry already recorded under its id is left as it is
// (inserted is false).
func (k *Kernel) activityWrite(ctx context.Context, db activityQuerier, p *ActivityInsertParams, e *ActivityEntry) (inserted bool, err error) {
	q := `INSERT INTO kernel.activity_log
		(id, company_id, actor_type, actor_id, action, entity_type, entity_id, agent_id, run_id, responsible_user_id, details)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT (id) DO NOTHING RETURNING created_at`
	if p.CompanyMustExist {
		q = `INSERT INTO kernel.activity_log
		(id, company_id, actor_type, actor_id, action, entity_type, entity_id, agent_id, run_id, responsible_user_id, details)
		SELECT $1::uuid, $2::uuid, $3::text, $4::text, $5::text, $6::text, $7::text, $8::uuid, $9::text, $10::text, $11::jsonb
		WHERE EXISTS (SELECT 1 FROM kernel.companies WHERE id = $2::uuid)
		ON CONFLICT (id) DO NOTHING RETURNING created_at`
	}
	err = db.QueryRow(ctx, q, e.ID, e.CompanyID, e.ActorType, e.ActorID, e.Action, e.EntityType, e.EntityID, e.AgentID,
		e.RunID, e.ResponsibleUserID, e.Details).Scan(&e.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		// Recorded (and delivered) already under this id: a repeated outbox delivery; or,
		// with CompanyMustExist, no such company.
		return false, k.activityResolve(ctx, db, p, e)
	}
	if err != nil {
		return false, fmt.Errorf("error appending activity %s: %w", p.Action, err)
	}
	return true, nil
}

// activityInsertTx writes a prepared entry and enqueues its deliveries inside tx, so a
// write and the entry describing it commit together.
func (k *Kernel) activityInsertTx(ctx context.Context, tx pgx.Tx, p *ActivityInsertParams, e *ActivityEntry) error {
	inserted, err := k.activityWrite(ctx, tx, p, e)
	if err != nil || !inserted {
		return err // a repeated entry was delivered when it was first recorded
	}
	if pub, ok := k.events.(EventPublisherTx); ok && pub != nil && p.Source != SourceAPI {
		payload, _ := json.Marshal(e)
		ev := &Event{ID: e.ID, Type: e.Action, CompanyID: p.CompanyID, Payload: payload, OccurredAt: e.CreatedAt, Source: activitySource(p)}
		if err := pub.PublishEventTx(ctx, tx, ev); err != nil {
			return fmt.Errorf("error publishing activity %s: %w", p.Action, err)
		}
	}
	return nil
}
