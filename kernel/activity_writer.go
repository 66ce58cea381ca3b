package kernel

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// activityGroupMax is the most entries one group statement writes.
const activityGroupMax = 256

// activityFlushers is how many groups may be in flight at once. One flusher alone would
// serialize on the WAL flush of each group (a few milliseconds on a slow disk), so that
// entries arriving during it wait for two flushes; a second group in flight lets
// PostgreSQL flush both at once, as it does for concurrent commits. Outbox entries, which
// wait for no flush, have one group in flight at most (outboxBusy).
const activityFlushers = 2

// activityGroupTimeout bounds one group statement; a caller stops waiting when its own
// context ends.
const activityGroupTimeout = time.Minute

// activityWriter commits the activity entries that go straight to the pool (nobody
// subscribes to them) in groups: concurrent appends hand their entry to the writer's
// flushers (activityFlushers goroutines), one of which writes everything waiting in one
// statement and one transaction, so concurrent requests share one statement and one
// commit instead of one each. There is no timer: an entry that finds a flusher idle is
// written at once, and the entries that arrive while the flushers are busy form the next
// group.
type activityWriter struct {
	k *Kernel

	mu      sync.Mutex
	queue   []*activityAppend
	stopped bool
	// outboxBusy is set while a flusher writes outbox entries, which commit without a WAL
	// flush: the other flusher leaves the entries arriving meanwhile to it, for one group
	// after it, since a second statement in flight would only split the group.
	outboxBusy bool

	// wake holds a token while the queue may be non-empty.
	wake     chan struct{}
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// activityAppend is one entry waiting for its group.
type activityAppend struct {
	p *ActivityInsertParams
	e *ActivityEntry
	// withdrawn is set (under the writer's mu) by a caller that stopped waiting before the
	// entry was taken into a group.
	withdrawn bool
	// result is set by the flusher before done is closed.
	result activityResult
	done   chan struct{}
}

// activityResult is what a group statement did with one entry.
type activityResult int

const (
	// activityWritten: the entry was inserted and its created_at set.
	activityWritten activityResult = iota + 1
	// activityUnresolved: the statement inserted no row for the entry (already recorded
	// under its id, or no such company with CompanyMustExist); the caller looks it up.
	activityUnresolved
	// activityFailed: the group statement failed; the caller writes the entry alone, so
	// that it gets its own error.
	activityFailed
)

// newActivityWriter starts n flushers for k; stopWriter ends them.
func newActivityWriter(k *Kernel, n int) *activityWriter {
	w := &activityWriter{k: k, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	var wg sync.WaitGroup
	for range n {
		wg.Go(w.run)
	}
	go func() {
		wg.Wait()
		close(w.done)
	}()
	return w
}

// write appends a prepared entry through the next group and sets its created_at, with the
// results of activityWrite: ErrCompanyNotFound for a missing company with
// p.CompanyMustExist, the recorded created_at for an id recorded already.
func (w *activityWriter) write(ctx context.Context, p *ActivityInsertParams, e *ActivityEntry) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("error appending activity %s: %w", p.Action, err)
	}
	a := &activityAppend{p: p, e: e, done: make(chan struct{})}
	if !w.enqueue(a) {
		// Stopping: write it alone (the pool closes next, so this fails unless it is quick).
		_, err := w.k.activityWrite(ctx, w.k.Pool, p, e)
		return err
	}
	select {
	case <-a.done:
	case <-ctx.Done():
		w.mu.Lock()
		a.withdrawn = true
		w.mu.Unlock()
		// Taken into a group already, the entry may still be written, as a statement
		// cancelled after its commit is.
		return fmt.Errorf("error appending activity %s: %w", p.Action, ctx.Err())
	}
	return w.finish(ctx, a)
}

// writeMany appends prepared entries (ps[i] with es[i]) through the next group, handed to
// the flushers together so that they share a statement, and returns each entry's result as
// write would. Entries beyond activityGroupMax, or arriving behind other waiting entries,
// may fall into the next group.
func (w *activityWriter) writeMany(ctx context.Context, ps []*ActivityInsertParams, es []*ActivityEntry) []error {
	errs := make([]error, len(ps))
	if err := ctx.Err(); err != nil {
		for i, p := range ps {
			errs[i] = fmt.Errorf("error appending activity %s: %w", p.Action, err)
		}
		return errs
	}
	as := make([]*activityAppend, len(ps))
	for i, p := range ps {
		as[i] = &activityAppend{p: p, e: es[i], done: make(chan struct{})}
	}
	if !w.enqueue(as...) {
		for i, p := range ps {
			_, errs[i] = w.k.activityWrite(ctx, w.k.Pool, p, es[i])
		}
		return errs
	}
	for i, a := range as {
		select {
		case <-a.done:
			errs[i] = w.finish(ctx, a)
			continue
		case <-ctx.Done():
		}
		// The caller stopped waiting: withdraw what is not taken yet (a taken entry may still
		// be written, as a statement cancelled after its commit is).
		w.mu.Lock()
		for j, b := range as[i:] {
			b.withdrawn = true
			errs[i+j] = fmt.Errorf("error appending activity %s: %w", b.p.Action, ctx.Err())
		}
		w.mu.Unlock()
		break
	}
	return errs
}

// finish completes an entry after its group: it resolves an entry the group did not write
// and writes alone one whose group failed.
func (w *activityWriter) finish(ctx context.Context, a *activityAppend) error {
	switch a.result {
	case activityWritten:
		return nil
	case activityUnresolved:
		return w.k.activityResolve(ctx, w.k.Pool, a.p, a.e)
	default:
		_, err := w.k.activityWrite(ctx, w.k.Pool, a.p, a.e)
		return err
	}
}

// enqueue adds entries for the flushers, next to each other; false once the writer is
// stopping.
func (w *activityWriter) enqueue(as ...*activityAppend) bool {
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return false
	}
	w.queue = append(w.queue, as...)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
	return true
}

// take removes up to activityGroupMax waiting entries from the queue, leaving out those
// whose caller stopped waiting; it wakes another flusher for what it leaves. It takes
// nothing while another flusher writes outbox entries (outboxBusy, which it sets when it
// takes some).
func (w *activityWriter) take() []*activityAppend {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.outboxBusy {
		return nil
	}
	var group []*activityAppend
	n := 0
	for n < len(w.queue) && len(group) < activityGroupMax {
		a := w.queue[n]
		n++
		if !a.withdrawn {
			group = append(group, a)
			w.outboxBusy = w.outboxBusy || a.p.ID != ""
		}
	}
	clear(w.queue[:n])
	w.queue = w.queue[n:]
	if len(w.queue) == 0 {
		w.queue = w.queue[:0:0] // let a burst's backing array go
	} else {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
	return group
}

// run is a flusher: it writes the waiting entries group by group until stopped, then
// writes what is left.
func (w *activityWriter) run() {
	for {
		stopping := false
		select {
		case <-w.wake:
		case <-w.stop:
			stopping = true
		}
		for {
			group := w.take()
			if len(group) == 0 {
				break
			}
			w.flush(group)
		}
		if stopping {
			return
		}
	}
}

// stopWriter ends the flushers after they wrote every entry handed to them; later appends
// are written alone. Idempotent.
func (w *activityWriter) stopWriter() {
	w.stopOnce.Do(func() {
		w.mu.Lock()
		w.stopped = true
		w.mu.Unlock()
		close(w.stop)
	})
	<-w.done
}

// flush writes one group and tells each caller what became of its entry. Entries carrying
// an outbox id are written by a statement of their own that does not wait for its WAL
// flush (see activityInsertGroup).
func (w *activityWriter) flush(group []*activityAppend) {
	var outbox, plain []*activityAppend
	for _, a := range group {
		if a.p.ID != "" {
			outbox = append(outbox, a)
		} else {
			plain = append(plain, a)
		}
	}
	for _, part := range [][]*activityAppend{outbox, plain} { // the quicker first
		if len(part) == 0 {
			continue
		}
		if err := w.k.activityInsertGroup(part, part[0].p.ID != ""); err != nil {
			w.k.log.Debug("error appending an activity group; writing its entries one by one", "entries", len(part), "error", err)
			for _, a := range part {
				a.result = activityFailed
			}
		}
		for _, a := range part {
			close(a.done)
		}
		if part[0].p.ID != "" {
			w.outboxWritten()
		}
	}
}

// outboxWritten clears outboxBusy once a flusher wrote its outbox entries, and wakes the
// other flusher for the entries that arrived meanwhile while this one writes the rest of
// its group.
func (w *activityWriter) outboxWritten() {
	w.mu.Lock()
	w.outboxBusy = false
	waiting := len(w.queue) > 0
	w.mu.Unlock()
	if waiting {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// activityGroupSQL inserts the unnested rows of a group, each with a CompanyMustExist flag,
// and returns the ids it inserted; asyncCommit adds the synchronous_commit switch.
func activityGroupSQL(asyncCommit bool) string {
	from := `unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
			$9::text[], $10::text[], $11::text[], $12::bool[])
			AS r(id, company_id, actor_type, actor_id, action, entity_type, entity_id, agent_id, run_id,
			responsible_user_id, details, must_exist)`
	if asyncCommit {
		from += `, (SELECT set_config('synchronous_commit', 'off', true)) AS async_commit`
	}
	return `INSERT INTO kernel.activity_log
		(id, company_id, actor_type, actor_id, action, entity_type, entity_id, agent_id, run_id, responsible_user_id, details)
		SELECT r.id::uuid, r.company_id::uuid, r.actor_type, r.actor_id, r.action, r.entity_type, r.entity_id,
			r.agent_id::uuid, r.run_id, r.responsible_user_id, r.details::jsonb
		FROM ` + from + `
		WHERE NOT r.must_exist OR EXISTS (SELECT 1 FROM kernel.companies c WHERE c.id = r.company_id::uuid)
		ON CONFLICT (id) DO NOTHING RETURNING id, created_at`
}

var (
	activityGroupSyncSQL  = activityGroupSQL(false)
	activityGroupAsyncSQL = activityGroupSQL(true)
)

// activityInsertGroup writes a group of entries in one statement and sets the result of
// each (activityWritten or activityUnresolved); an error leaves the results to the caller.
//
// With asyncCommit (every entry carries an outbox id) the statement commits without
// waiting for its WAL flush. That loses nothing that matters: the writer keeps the entry
// in its outbox, in the same PostgreSQL cluster, and delivers it again until it deletes
// the row after this append returned. WAL is one sequence that a crash cuts at some point,
// and the commit of that delete comes after this commit in it; so a crash either keeps the
// entry or keeps the outbox row, which is then delivered again (the id makes that a
// no-op when the entry survived after all).
func (k *Kernel) activityInsertGroup(group []*activityAppend, asyncCommit bool) error {
	n := len(group)
	ids, companies, actorTypes, actorIDs := make([]string, n), make([]*string, n), make([]string, n), make([]string, n)
	actions, entityTypes, entityIDs, agents := make([]string, n), make([]string, n), make([]string, n), make([]*string, n)
	runs, responsibles, details, mustExist := make([]*string, n), make([]*string, n), make([]string, n), make([]bool, n)
	// byID finds the entries of a returned id; ids are compared in their canonical form,
	// since PostgreSQL returns them so.
	byID := make(map[uuid.UUID][]*activityAppend, n)
	for i, a := range group {
		e := a.e
		ids[i], companies[i], actorTypes[i], actorIDs[i] = e.ID, e.CompanyID, e.ActorType, e.ActorID
		actions[i], entityTypes[i], entityIDs[i], agents[i] = e.Action, e.EntityType, e.EntityID, e.AgentID
		runs[i], responsibles[i], details[i], mustExist[i] = e.RunID, e.ResponsibleUserID, string(e.Details), a.p.CompanyMustExist
		a.result = activityUnresolved
		if id, err := uuid.Parse(e.ID); err == nil {
			byID[id] = append(byID[id], a)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), activityGroupTimeout)
	defer cancel()
	q := activityGroupSyncSQL
	if asyncCommit {
		q = activityGroupAsyncSQL
	}
	rows, err := k.Pool.Query(ctx, q, ids, companies, actorTypes, actorIDs, actions, entityTypes, entityIDs, agents,
		runs, responsibles, details, mustExist)
	if err != nil {
		return fmt.Errorf("error appending %d activity entries: %w", n, err)
	}
	defer rows.Close()
	var id uuid.UUID
	var createdAt time.Time
	var written []*activityAppend
	for rows.Next() {
		if err := rows.Scan(&id, &createdAt); err != nil {
			return fmt.Errorf("error reading appended activity entries: %w", err)
		}
		// An id given twice in one group is one row: every entry with it gets the row's
		// created_at, as a repeat resolved on its own would.
		for _, a := range byID[id] {
			a.e.CreatedAt = createdAt
			written = append(written, a)
		}
	}
	// Close waits for the commit, which may fail after the rows came back; results change
	// only once the statement committed, so a failed group leaves each entry to be written
	// alone.
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("error appending %d activity entries: %w", n, err)
	}
	for _, a := range written {
		a.result = activityWritten
	}
	return nil
}

// activityResolve completes an entry that an insert did not write: an entry recorded
// already under its id takes the recorded created_at; with p.CompanyMustExist and no entry,
// its company does not exist.
func (k *Kernel) activityResolve(ctx context.Context, db activityQuerier, p *ActivityInsertParams, e *ActivityEntry) error {
	err := db.QueryRow(ctx, `SELECT created_at FROM kernel.activity_log WHERE id = $1`, e.ID).Scan(&e.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) && p.CompanyMustExist {
		return ErrCompanyNotFound
	}
	if err != nil {
		return fmt.Errorf("error appending activity %s: %w", p.Action, err)
	}
	return nil
}
