// Package outbox makes an extension's activity entries and follow-up calls (an agent wake
// after an assignment, say) as durable as the write they describe. The writer adds them to
// a table in its own schema, inside the transaction of its write when it has one; a drainer
// in the extension's process delivers them to the host at least once and deletes them, and
// retries with backoff while the host or the called extension is unavailable, also after a
// restart. Activity entries carry their outbox id, so a repeated delivery records nothing
// twice; calls must be idempotent themselves (a wake carries an idempotency key).
//
// migrate.Open creates the table (DefaultTable) in every extension's schema.
package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keelhq/keel/sdk"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

// DefaultTable is the outbox table's name in an extension's schema.
const DefaultTable = "outbox"

// TableSQL creates the outbox table (schema-qualified name).
func TableSQL(table string) string {
	return `CREATE TABLE IF NOT EXISTS ` + table + ` (
    id              uuid PRIMARY KEY,
    kind            text NOT NULL,
    payload         jsonb NOT NULL,
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    created_at      timestamptz NOT NULL DEFAULT now()
)`
}

// Kinds of outbox rows.
const (
	kindActivity = "activity"
	kindCall     = "call"
)

// Activity is an activity entry to append (the host's Activity.Append).
type Activity struct {
	CompanyID  string          `json:"companyId"`
	ActorType  string          `json:"actorType,omitempty"`
	ActorID    string          `json:"actorId,omitempty"`
	Action     string          `json:"action"`
	EntityType string          `json:"entityType"`
	EntityID   string          `json:"entityId"`
	AgentID    string          `json:"agentId,omitempty"`
	RunID      string          `json:"runId,omitempty"`
	Details    json.RawMessage `json:"details,omitempty"`
}

// Call is a provided method of another extension to invoke (Host.Call).
type Call struct {
	Method    string          `json:"method"`
	CompanyID string          `json:"companyId"`
	Actor     *sdk.Actor      `json:"actor,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
}

// Outbox adds rows to an extension's outbox table and drains them.
type Outbox struct {
	pool  *pgxpool.Pool
	table string
	host  *sdk.Host
	log   hclog.Logger
	kick  chan struct{}

	// pending holds the rows this process added in the last freshGrace (id → pendingRow),
	// so that Deliver sends them without reading them back.
	pending sync.Map

	// delivered holds the ids of rows delivered and not yet deleted; the drainer deletes
	// them in groups (see forget).
	deliveredMu sync.Mutex
	delivered   []string
	forgotten   chan struct{}

	stopOnce sync.Once
	stop     chan struct{}
	done     chan struct{}
}

// pendingRow is a row as this process added it.
type pendingRow struct {
	kind    string
	payload []byte
	added   time.Time
}

// sweepEvery is how often the drainer looks for rows nobody kicked (left by a crash, or
// waiting for a retry).
const sweepEvery = 2 * time.Second

// Start returns the outbox of table (schema-qualified) and starts its drainer, which runs
// until Stop.
func Start(pool *pgxpool.Pool, table string, host *sdk.Host, log hclog.Logger) *Outbox {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	o := &Outbox{pool: pool, table: table, host: host, log: log, kick: make(chan struct{}, 1), forgotten: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{})}
	go o.run()
	return o
}

// Stop ends the drainer; undelivered rows wait for the next start.
func (o *Outbox) Stop() {
	if o == nil {
		return
	}
	o.stopOnce.Do(func() { close(o.stop) })
	<-o.done
}

// Kick asks the drainer to deliver now; call it after the transaction that added rows
// committed.
func (o *Outbox) Kick() {
	if o == nil {
		return
	}
	select {
	case o.kick <- struct{}{}:
	default:
	}
}

// AddActivity adds an activity entry through db: a transaction (pgx.Tx or *sql.Tx; for a
// bun.Tx pass its Tx field, since bun rewrites placeholders) or a *pgx.Batch to make it
// part of a write, or a pool for a write that already committed.
func (o *Outbox) AddActivity(ctx context.Context, db any, a *Activity) (string, error) {
	return o.add(ctx, db, kindActivity, a)
}

// AddCall adds a method call through db (see AddActivity).
func (o *Outbox) AddCall(ctx context.Context, db any, c *Call) (string, error) {
	return o.add(ctx, db, kindCall, c)
}

func (o *Outbox) add(ctx context.Context, db any, kind string, v any) (string, error) {
	payload, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("error encoding outbox %s: %w", kind, err)
	}
	q := `INSERT INTO ` + o.table + ` (id, kind, payload) VALUES ($1, $2, $3)`
	// A time-ordered id: rows one process adds sort by id in the order it added them, so the
	// entries of one transaction (equal created_at) are delivered, and listed after a
	// delivery that writes them in one statement, in that order.
	id := newRowID()
	switch x := db.(type) {
	case interface {
		Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
	}:
		_, err = x.Exec(ctx, q, id, kind, string(payload))
	case interface {
		ExecContext(context.Context, string, ...any) (sql.Result, error)
	}:
		_, err = x.ExecContext(ctx, q, id, kind, string(payload))
	case *pgx.Batch:
		// Written when the batch is sent; a batch sent outside a transaction is one implicit
		// transaction, so the row commits with the batch's other statements or not at all.
		x.Queue(q, id, kind, string(payload))
	default:
		return "", fmt.Errorf("outbox: cannot execute through %T", db)
	}
	if err != nil {
		return "", fmt.Errorf("error adding outbox %s: %w", kind, err)
	}
	o.pending.Store(id, pendingRow{kind: kind, payload: payload, added: time.Now()})
	return id, nil
}

// newRowID returns a UUIDv7, monotonic within the process.
func newRowID() string {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return id.String()
}

// prunePending forgets rows added more than freshGrace ago: their transaction rolled back,
// or their writer never delivered them, and the drainer owns them now.
func (o *Outbox) prunePending() {
	o.pending.Range(func(k, v any) bool {
		if time.Since(v.(pendingRow).added) >= freshGrace {
			o.pending.Delete(k)
		}
		return true
	})
}

func (o *Outbox) run() {
	defer close(o.done)
	defer func() {
		// Rows delivered just before the stop need not be delivered again after the start.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = o.deleteDelivered(ctx)
	}()
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-o.stop:
			return
		case <-o.forgotten:
			// Rows delivered in the next moment join this delete.
			select {
			case <-o.stop:
			case <-time.After(deleteGather):
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			if err := o.deleteDelivered(ctx); err != nil {
				o.log.Warn("error deleting delivered outbox rows; they are delivered again", "error", err)
			}
			cancel()
			continue
		case <-o.kick:
		case <-t.C:
			o.prunePending()
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		for {
			n, err := o.drain(ctx)
			if err != nil {
				o.log.Warn("error draining the outbox", "error", err)
				break
			}
			if n < drainBatch {
				break
			}
		}
		cancel()
	}
}

// Deliver delivers rows this process just committed (empty ids are skipped), before the
// request that wrote them answers, so a reader sees the activity at once (as with a direct
// append). A failed row stays for the drainer to retry.
func (o *Outbox) Deliver(ctx context.Context, ids []string) {
	if o == nil {
		return
	}
	ids = slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return id == "" })
	if len(ids) == 0 {
		return
	}
	// Rows added here well within freshGrace, which the drainer leaves alone, are delivered
	// as they were added, without claiming them first (half the grace leaves room for the
	// transaction's own time: the drainer counts from its start); the others are claimed
	// and read back.
	var fresh []row
	var rest []string
	for _, id := range ids {
		v, ok := o.pending.LoadAndDelete(id)
		if p, _ := v.(pendingRow); ok && time.Since(p.added) < freshGrace/2 {
			fresh = append(fresh, row{id: id, kind: p.kind, payload: p.payload})
			continue
		}
		rest = append(rest, id)
	}
	var errs []error
	if len(fresh) > 0 {
		errs = append(errs, o.deliverBatch(ctx, fresh))
	}
	if len(rest) > 0 {
		_, err := o.deliverRows(ctx, `id = ANY($1::uuid[]) AND next_attempt_at <= now()`, rest)
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		o.log.Warn("error delivering outbox rows; the drainer retries them", "error", err)
		o.Kick()
	}
}

// row is one outbox row to deliver.
type row struct {
	id, kind string
	payload  []byte
	attempts int
	created  time.Time
}

// deleteGather is how long the drainer gathers delivered rows before it deletes them: a
// delivered row waits for its delete harmlessly (see forget), and one statement deletes the
// rows of many requests.
const deleteGather = 20 * time.Millisecond

// drainBatch is how many rows one drain pass claims.
const drainBatch = 100

// Leases: a claimed row is not claimed again for claimLease (its delivery's host calls end
// long before), and the drainer leaves a fresh row to the request that wrote it, which
// delivers it right after its commit, for freshGrace.
const (
	claimLease = 5 * time.Minute
	freshGrace = 5 * time.Second
)

// drain delivers up to drainBatch due rows and returns how many it claimed. A row that was
// never tried is left to its writer for freshGrace.
func (o *Outbox) drain(ctx context.Context) (int, error) {
	return o.deliverRows(ctx, `id IN (SELECT id FROM `+o.table+` WHERE next_attempt_at <= now()
		AND (attempts > 0 OR created_at < now() - make_interval(secs => `+fmt.Sprint(freshGrace.Seconds())+`))
		ORDER BY created_at, id LIMIT `+fmt.Sprint(drainBatch)+` FOR UPDATE SKIP LOCKED)`, nil)
}

// deliverRows claims the rows the condition selects by leasing them (one statement: two
// claimers never deliver one row at once, and no connection is held while the host is
// called, since a call may come back to this extension and need one), delivers each in
// order, then deletes the delivered (and the undeliverable) ones and reschedules the rest
// with backoff. It returns how many rows it claimed. A process that dies meanwhile leaves
// its claimed rows to be delivered again once the lease ends; deliveries are idempotent.
func (o *Outbox) deliverRows(ctx context.Context, cond string, ids []string) (int, error) {
	var args []any
	if ids != nil {
		args = append(args, ids)
	}
	args = append(args, claimLease.Seconds())
	rows, err := o.pool.Query(ctx, `UPDATE `+o.table+` SET next_attempt_at = now() + make_interval(secs => $`+fmt.Sprint(len(args))+`)
		WHERE `+cond+` RETURNING id::text, kind, payload, attempts, created_at`, args...)
	if err != nil {
		return 0, err
	}
	batch, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		err := r.Scan(&x.id, &x.kind, &x.payload, &x.attempts, &x.created)
		return x, err
	})
	if err != nil {
		return 0, err
	}
	slices.SortFunc(batch, func(a, b row) int {
		if c := a.created.Compare(b.created); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	return len(batch), o.deliverBatch(ctx, batch)
}

// deliverBatch delivers rows in order, then deletes the delivered (and the undeliverable)
// ones and reschedules the rest with backoff. Consecutive activity rows travel together
// (sdk.Host.AppendActivity, one host call), and a row after them is delivered once they are.
func (o *Outbox) deliverBatch(ctx context.Context, batch []row) error {
	results := make([]error, len(batch))
	for i := 0; i < len(batch); {
		if batch[i].kind != kindActivity {
			results[i] = o.deliver(ctx, batch[i].kind, batch[i].payload)
			i++
			continue
		}
		j := i
		for j < len(batch) && batch[j].kind == kindActivity {
			j++
		}
		o.deliverActivities(ctx, batch[i:j], results[i:j])
		i = j
	}
	var done []string
	var errs []error
	for i, r := range batch {
		err := results[i]
		switch {
		case err == nil || permanent(err):
			if err != nil {
				o.log.Warn("dropping an outbox row that cannot be delivered", "id", r.id, "kind", r.kind, "error", err)
			}
			done = append(done, r.id)
		default:
			backoff := time.Duration(math.Min(math.Pow(2, float64(r.attempts)), 300)) * time.Second
			o.log.Debug("outbox delivery failed; retrying later", "id", r.id, "kind", r.kind, "in", backoff, "error", err)
			// The request's context may be over; the reschedule still has to land.
			if _, err := o.pool.Exec(context.WithoutCancel(ctx), `UPDATE `+o.table+` SET attempts = attempts + 1,
				next_attempt_at = now() + make_interval(secs => $2) WHERE id = $1`, r.id, backoff.Seconds()); err != nil {
				errs = append(errs, err)
			}
		}
	}
	o.forget(done)
	return errors.Join(errs...)
}

// deliverActivities sends activity rows to the host together, in order, and sets each
// row's result in errs (errPermanent for a malformed row).
func (o *Outbox) deliverActivities(ctx context.Context, rows []row, errs []error) {
	reqs := make([]*hostv1.AppendActivityRequest, 0, len(rows))
	idx := make([]int, 0, len(rows))
	for i, r := range rows {
		req, err := activityRequest(r.id, r.payload)
		if err != nil {
			errs[i] = err
			continue
		}
		reqs, idx = append(reqs, req), append(idx, i)
	}
	if len(reqs) == 0 {
		return
	}
	_, sent := o.host.AppendActivity(ctx, reqs...)
	for j, i := range idx {
		errs[i] = sent[j]
	}
}

// activityRequest decodes an activity row into the host's request, which carries the row's
// id so that a repeated delivery records nothing twice.
func activityRequest(id string, payload []byte) (*hostv1.AppendActivityRequest, error) {
	var a Activity
	if err := json.Unmarshal(payload, &a); err != nil {
		return nil, errPermanent{err}
	}
	return &hostv1.AppendActivityRequest{Id: id, CompanyId: a.CompanyID, ActorType: a.ActorType, ActorId: a.ActorID,
		Action: a.Action, EntityType: a.EntityType, EntityId: a.EntityID, AgentId: a.AgentID, RunId: a.RunID,
		DetailsJson: a.Details}, nil
}

// forget hands delivered rows to the drainer, which deletes them in groups: one statement
// for all the rows delivered while it was busy instead of one per request, committed without
// waiting for the WAL flush. A row whose delete is lost (a crash first) is delivered again,
// which is harmless: activity entries carry their outbox id and calls are idempotent. The
// drainer leaves a row that was never tried to its writer for freshGrace, far longer than
// a delete waits here.
func (o *Outbox) forget(ids []string) {
	if len(ids) == 0 {
		return
	}
	o.deliveredMu.Lock()
	o.delivered = append(o.delivered, ids...)
	o.deliveredMu.Unlock()
	select {
	case o.forgotten <- struct{}{}:
	default:
	}
}

// deleteDelivered deletes the rows forget collected.
func (o *Outbox) deleteDelivered(ctx context.Context) error {
	o.deliveredMu.Lock()
	ids := o.delivered
	o.delivered = nil
	o.deliveredMu.Unlock()
	if len(ids) == 0 {
		return nil
	}
	_, err := o.pool.Exec(ctx, `DELETE FROM `+o.table+` USING (SELECT set_config('synchronous_commit', 'off', true)) AS async_commit
		WHERE id = ANY($1::uuid[])`, ids)
	if err != nil {
		return fmt.Errorf("error deleting %d delivered outbox rows: %w", len(ids), err)
	}
	return nil
}

// deliver sends one row other than an activity entry (see deliverActivities) to the host.
func (o *Outbox) deliver(ctx context.Context, kind string, payload []byte) error {
	switch kind {
	case kindCall:
		var c Call
		if err := json.Unmarshal(payload, &c); err != nil {
			return errPermanent{err}
		}
		return o.host.Call(ctx, c.Method, c.Actor, c.CompanyID, c.Input, nil)
	}
	return errPermanent{fmt.Errorf("unknown outbox kind %q", kind)}
}

// errPermanent marks a row that no retry can deliver.
type errPermanent struct{ error }

// permanent reports whether a delivery error will not change on a retry: a malformed row,
// a refused entry (the company is gone, the input is invalid), a method nobody provides, or
// a call the owner answered with a 4xx.
func permanent(err error) bool {
	var p errPermanent
	if errors.As(err, &p) {
		return true
	}
	if sdk.IsMethodNotProvided(err) {
		return true
	}
	var se *sdk.Error
	if errors.As(err, &se) {
		return se.Status >= 400 && se.Status < 500
	}
	switch status.Code(err) { // status.Code finds a wrapped gRPC status too
	case codes.InvalidArgument, codes.NotFound, codes.PermissionDenied, codes.FailedPrecondition:
		return true
	}
	return false
}

// LogActivity adds an activity entry described as for sdk.Host.LogActivity (the actor
// becomes the entry's actor) through db (see AddActivity).
func (o *Outbox) LogActivity(ctx context.Context, db any, e *sdk.ActivityEntry) (string, error) {
	a := &Activity{CompanyID: e.CompanyID, Action: e.Action, EntityType: e.EntityType, EntityID: e.EntityID}
	if x := e.Actor; x != nil {
		switch x.Type {
		case "agent":
			a.ActorType, a.ActorID, a.AgentID, a.RunID = "agent", x.AgentId, x.AgentId, x.RunId
		case "board":
			a.ActorType, a.ActorID = "user", x.UserId
		}
	}
	if e.Details != nil {
		b, err := json.Marshal(e.Details)
		if err != nil {
			return "", fmt.Errorf("error encoding activity details: %w", err)
		}
		a.Details = b
	}
	return o.AddActivity(ctx, db, a)
}
