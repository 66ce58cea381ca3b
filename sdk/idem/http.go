package idem

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/uptrace/bun"

	"github.com/keelhq/keel/sdk"
)

// Pending is a keyed request being served; Record reads it from the context.
type Pending struct {
	store       *Store
	principal   string
	key         string
	fingerprint string

	mu       sync.Mutex
	recorded bool
	inUse    bool
}

type ctxKey struct{}

// Begin returns ctx carrying a keyed request, for transports other than Wrap (the kernel
// serves its own routes with Fiber): Record then remembers the key in the handler's
// transaction, and the Pending reports what happened.
func Begin(ctx context.Context, store *Store, principal, key, fingerprint string) (context.Context, *Pending) {
	p := &Pending{store: store, principal: principal, key: key, fingerprint: fingerprint}
	return context.WithValue(ctx, ctxKey{}, p), p
}

// Recorded reports whether Record remembered the key in a transaction of the handler.
func (p *Pending) Recorded() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.recorded
}

// InUse reports whether Record found the key taken by a request that committed first.
func (p *Pending) InUse() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.inUse
}

// Options configure Wrap.
type Options struct {
	// Table is the key table (DefaultTable when empty).
	Table string
	// Logger logs failures to remember an answer (the answer is still sent).
	Logger hclog.Logger
	// Skip lists manifest routes ("POST /api/…", as sdk.PatternFrom gives them) served
	// without the key: routes whose answers carry a secret shown once (so the secret is never
	// stored) and public routes that give the header their own meaning (in local_trusted
	// mode their caller is the local board, not anonymous).
	Skip []string
}

// Wrap serves next with Idempotency-Key honoured on every POST of an authenticated
// caller: a remembered answer is replayed (with Idempotent-Replayed: true), a key reused
// with another request is a 409, a malformed key a 400; otherwise next runs and a 2xx
// answer is remembered. db is the extension's pool on its own schema.
func Wrap(db DB, next http.Handler, opts ...Options) http.Handler {
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	w := &wrapper{store: &Store{DB: db, Table: o.Table}, next: next, log: o.Logger, skip: map[string]bool{}}
	for _, p := range o.Skip {
		w.skip[p] = true
	}
	return w
}

type wrapper struct {
	store     *Store
	next      http.Handler
	log       hclog.Logger
	skip      map[string]bool
	lastSweep atomic.Int64
}

// sweepEvery bounds how often a process deletes expired keys (opportunistically, on a
// keyed request).
const sweepEvery = 10 * time.Minute

func (w *wrapper) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	keys, keyed := r.Header[http.CanonicalHeaderKey(Header)]
	if r.Method != http.MethodPost || !keyed || w.skip[sdk.PatternFrom(r.Context())] {
		w.next.ServeHTTP(rw, r)
		return
	}
	actor := sdk.ActorFrom(r.Context())
	principal := Principal(actor.Type, actor.UserId, actor.AgentId)
	if principal == "" {
		w.next.ServeHTTP(rw, r) // public routes keep their own meaning of the header
		return
	}
	key := ""
	if len(keys) > 0 {
		key = keys[0]
	}
	if msg := CheckKey(key); msg != "" || len(keys) > 1 {
		if msg == "" {
			msg = "must be given once"
		}
		sdk.WriteErr(rw, sdk.Invalid(Header, msg))
		return
	}
	ctx := r.Context()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		sdk.WriteErr(rw, sdk.Invalid("", "unreadable body"))
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	w.sweep(ctx)
	hctx, req := Begin(ctx, w.store, principal, key, Fingerprint(r.Method, r.URL.Path, r.URL.RawQuery, body))
	prev, err := w.store.Lookup(ctx, principal, key)
	if err != nil {
		w.log.Error("idempotency lookup failed", "error", err)
		sdk.WriteErr(rw, err)
		return
	}
	if prev != nil {
		w.replay(rw, r, req, prev)
		return
	}

	rec := httptest.NewRecorder()
	w.next.ServeHTTP(rec, r.WithContext(hctx))
	recorded, inUse := req.Recorded(), req.InUse()
	if inUse {
		// Another request with the key committed first (it held the key's row until then).
		if prev, err := w.store.Lookup(ctx, principal, key); err == nil && prev != nil {
			w.replay(rw, r, req, prev)
			return
		}
	}
	if recorded && crashAfterCommit(r) {
		os.Exit(3)
	}
	if rec.Code >= 200 && rec.Code < 300 {
		a := &Answer{Fingerprint: req.fingerprint, Status: rec.Code, ContentType: rec.Header().Get("Content-Type"), Body: rec.Body.Bytes()}
		if a.Body == nil {
			a.Body = []byte{}
		}
		done := false
		if recorded {
			done, err = w.store.Complete(ctx, principal, key, a)
		}
		if !done && err == nil {
			_, err = w.store.Save(ctx, principal, key, a)
		}
		if err != nil {
			w.log.Warn("error remembering an idempotent answer", "key", key, "error", err)
		}
	}
	copyResponse(rw, rec.Result().Header, rec.Code, rec.Body.Bytes())
}

// replay answers a request whose key is remembered: the original answer when the request
// is the same, a 409 otherwise.
func (w *wrapper) replay(rw http.ResponseWriter, r *http.Request, req *Pending, prev *Answer) {
	if prev.Fingerprint != req.fingerprint {
		sdk.WriteErr(rw, &sdk.Error{Status: http.StatusConflict, Code: ReusedCode, Message: ReusedMessage})
		return
	}
	if prev.Body == nil && prev.Location != "" {
		// The write committed but its answer was lost: read the created resource back.
		get, err := http.NewRequestWithContext(r.Context(), http.MethodGet, prev.Location, nil)
		if err != nil {
			sdk.WriteErr(rw, fmt.Errorf("error replaying %s: %w", prev.Location, err))
			return
		}
		for k, v := range r.Header {
			if k != "Content-Type" && k != "Content-Length" {
				get.Header[k] = v
			}
		}
		rec := httptest.NewRecorder()
		w.next.ServeHTTP(rec, get)
		st := rec.Code
		if st >= 200 && st < 300 {
			st = prev.Status
			a := &Answer{Fingerprint: prev.Fingerprint, Status: st, ContentType: rec.Header().Get("Content-Type"), Body: rec.Body.Bytes()}
			if _, err := w.store.Complete(r.Context(), req.principal, req.key, a); err != nil {
				w.log.Warn("error remembering a replayed answer", "key", req.key, "error", err)
			}
		}
		h := rec.Result().Header
		h.Set(ReplayedHeader, "true")
		copyResponse(rw, h, st, rec.Body.Bytes())
		return
	}
	h := http.Header{}
	if prev.ContentType != "" {
		h.Set("Content-Type", prev.ContentType)
	}
	h.Set(ReplayedHeader, "true")
	copyResponse(rw, h, prev.Status, prev.Body)
}

func copyResponse(rw http.ResponseWriter, h http.Header, status int, body []byte) {
	for k, v := range h {
		if k == "Content-Length" {
			continue
		}
		rw.Header()[k] = v
	}
	rw.Header().Set("Content-Length", strconv.Itoa(len(body)))
	rw.WriteHeader(status)
	_, _ = rw.Write(body)
}

func (w *wrapper) sweep(ctx context.Context) {
	now := time.Now().UnixNano()
	last := w.lastSweep.Load()
	if now-last < int64(sweepEvery) || !w.lastSweep.CompareAndSwap(last, now) {
		return
	}
	if _, err := w.store.Sweep(ctx); err != nil {
		w.log.Warn("error deleting expired idempotency keys", "error", err)
	}
}

// Record remembers, inside the handler's write transaction, that the request's create is
// committed with this status and that location (a path the extension serves with GET)
// reads the created resource. Wrap fills in the answer's body once the handler has
// answered; if the process dies first, a retry reads the resource back from location. tx
// is a pgx.Tx, a *sql.Tx or a bun.Tx. Outside a keyed request Record does nothing. It
// returns ErrKeyInUse when a request with the same key committed first; the handler
// should then abort its transaction (Wrap answers with the other request's answer).
func Record(ctx context.Context, tx any, status int, location string) error {
	return record(ctx, tx, status, location, "", nil)
}

// RecordAnswer is Record for a handler that knows its whole answer inside the transaction.
func RecordAnswer(ctx context.Context, tx any, status int, contentType string, body []byte) error {
	if body == nil {
		body = []byte{}
	}
	return record(ctx, tx, status, "", contentType, body)
}

// RecordJSON is RecordAnswer with v encoded as sdk.WriteJSON encodes it.
func RecordJSON(ctx context.Context, tx any, status int, v any) error {
	if !Keyed(ctx) {
		return nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("error encoding idempotent answer: %w", err)
	}
	return RecordAnswer(ctx, tx, status, "application/json; charset=utf-8", buf.Bytes())
}

// Keyed reports whether ctx is a request with an Idempotency-Key whose answer is not yet
// recorded: a handler may then run a write that needs no transaction in one, with Record.
func Keyed(ctx context.Context) bool {
	req, _ := ctx.Value(ctxKey{}).(*Pending)
	return req != nil && !req.Recorded()
}

func record(ctx context.Context, tx any, status int, location, contentType string, body []byte) error {
	req, _ := ctx.Value(ctxKey{}).(*Pending)
	if req == nil || req.Recorded() {
		return nil // not a keyed request, or a write of the request already recorded it
	}
	q := upsertSQL(req.store.table())
	args := []any{req.principal, req.key, req.fingerprint, status, nullable(location), nullable(contentType), body, TTL.Seconds()}
	var n int64
	switch t := tx.(type) {
	case bun.Tx:
		res, err := t.Tx.ExecContext(ctx, q, args...)
		if err != nil {
			return fmt.Errorf("error recording idempotency key: %w", err)
		}
		n, _ = res.RowsAffected()
	case *sql.Tx:
		res, err := t.ExecContext(ctx, q, args...)
		if err != nil {
			return fmt.Errorf("error recording idempotency key: %w", err)
		}
		n, _ = res.RowsAffected()
	case interface {
		Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
	}:
		tag, err := t.Exec(ctx, q, args...)
		if err != nil {
			return fmt.Errorf("error recording idempotency key: %w", err)
		}
		n = tag.RowsAffected()
	default:
		return fmt.Errorf("error recording idempotency key: unsupported transaction %T", tx)
	}
	req.mu.Lock()
	defer req.mu.Unlock()
	if n == 0 {
		req.inUse = true
		return ErrKeyInUse
	}
	req.recorded = true
	return nil
}

// CrashHeader, on a request to a test binary that called EnableCrashHeader, makes the
// extension process exit right after a handler's Record-ed transaction committed and
// before the answer is remembered or sent: the crash the key exists for.
const CrashHeader = "X-Keel-Test-Crash-After-Commit"

var crashHeaderEnabled atomic.Bool

// EnableCrashHeader makes this process honour CrashHeader. Only tests call it (from an
// init function of the test binary, which the host re-executes as the extension).
func EnableCrashHeader() { crashHeaderEnabled.Store(true) }

func crashAfterCommit(r *http.Request) bool {
	return CrashRequested(r.Header.Get(CrashHeader))
}

// CrashRequested reports whether a request's CrashHeader value asks this (test) process
// to exit after its commit.
func CrashRequested(headerValue string) bool {
	return crashHeaderEnabled.Load() && headerValue != ""
}
