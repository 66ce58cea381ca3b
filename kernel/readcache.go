package kernel

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ReadCacheChannel is the PostgreSQL channel on which keel nodes tell each other which
// companies' cached reads a write made stale.
const ReadCacheChannel = "keel_read_cache"

// readCacheMaxBytes bounds the bodies one node keeps; readCacheMaxEntry bounds one body.
const (
	readCacheMaxBytes = 16 << 20
	readCacheMaxEntry = 1 << 20
)

// readCacheTTL bounds how long an answer is served without a write to its company: answers
// that depend on the clock (this month's spend) or on a change no invalidation reported
// are at most this old.
const readCacheTTL = 30 * time.Second

// announceDelay is how long announce gathers invalidations before it sends them: under a
// stream of writes one notification carries several, and other nodes learn of a write at
// most this much later than they would at once.
const announceDelay = 5 * time.Millisecond

// notifyPayloadMax keeps one notification under PostgreSQL's 8,000-byte payload limit.
const notifyPayloadMax = 7000

// ReadCache keeps the answers of read routes an extension declares cacheable (sdk.Route
// Cache), per company, below the kernel's authentication and permission checks: a hit costs
// no hop, no query and no encoding. Every write a node sees invalidates the company it
// touched before its answer leaves (a write with no company, a job and a company-less call
// invalidate every company), and is announced to the other nodes on ReadCacheChannel; a node
// that is not listening on that channel serves no cached read, and empties the cache when it
// listens again. No answer is served longer than readCacheTTL after it was stored.
type ReadCache struct {
	node string
	log  hclog.Logger

	mu sync.Mutex
	// listening is true while this node LISTENs; nothing is served or stored otherwise.
	listening bool
	// clock orders invalidations: every invalidation takes the next tick.
	clock uint64
	// all is the tick of the last invalidation of every company.
	all uint64
	// gens is the tick of each company's last invalidation.
	gens      map[string]uint64
	companies map[string]map[string]*CachedRead
	bytes     int

	// pending are the companies (or "*", every company) to announce to the other nodes.
	pendMu  sync.Mutex
	pending map[string]bool
	wake    chan struct{}

	hits, misses atomic.Int64
}

// CachedRead is one stored answer.
type CachedRead struct {
	Status  int
	Headers [][2]string
	Body    []byte
	ETag    string
	// stored is when Put kept it.
	stored time.Time
}

// ReadToken is what a read learned before it asked the owner: its answer is stored only if
// no invalidation of its company happened since.
type ReadToken struct {
	ok  bool
	gen uint64
}

// NewReadCache returns an empty cache that serves nothing until Run listens.
func NewReadCache(log hclog.Logger) *ReadCache {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &ReadCache{node: hex.EncodeToString(b), log: log, gens: map[string]uint64{},
		companies: map[string]map[string]*CachedRead{}, pending: map[string]bool{}, wake: make(chan struct{}, 1)}
}

// Get returns the stored answer of key in company, and the token to store a fresh one with
// when there is none.
func (c *ReadCache) Get(company, key string) (*CachedRead, ReadToken) {
	if c == nil {
		return nil, ReadToken{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.listening {
		return nil, ReadToken{}
	}
	if e := c.companies[company][key]; e != nil && time.Since(e.stored) < readCacheTTL {
		c.hits.Add(1)
		return e, ReadToken{}
	}
	c.misses.Add(1)
	return nil, ReadToken{ok: true, gen: max(c.gens[company], c.all)}
}

// Put stores an answer read under tok; it is dropped when the company was invalidated
// meanwhile, or when it is too large.
func (c *ReadCache) Put(company, key string, tok ReadToken, e *CachedRead) {
	if c == nil || !tok.ok || len(e.Body) > readCacheMaxEntry {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.listening || max(c.gens[company], c.all) != tok.gen {
		return
	}
	m := c.companies[company]
	if m == nil {
		m = map[string]*CachedRead{}
		c.companies[strings.Clone(company)] = m // the caller's string may be a request buffer's
	}
	if old := m[key]; old != nil {
		c.bytes -= len(old.Body)
		m[key] = e
	} else {
		m[strings.Clone(key)] = e
	}
	e.stored = time.Now()
	c.bytes += len(e.Body)
	for id, entries := range c.companies { // over budget: drop whole companies, any order
		if c.bytes <= readCacheMaxBytes {
			break
		}
		c.dropLocked(id, entries)
	}
}

func (c *ReadCache) dropLocked(company string, entries map[string]*CachedRead) {
	for _, e := range entries {
		c.bytes -= len(e.Body)
	}
	delete(c.companies, company)
}

// Invalidate forgets the cached reads of company (every company when it is empty) on this
// node at once and announces it to the other nodes.
func (c *ReadCache) Invalidate(company string) {
	if c == nil {
		return
	}
	// The company may point into a request's buffer, which the server reuses for the next
	// request; it is kept as a map key here and read later by announce.
	company = strings.Clone(company)
	c.invalidateLocal(company)
	if company == "" {
		company = "*"
	}
	c.pendMu.Lock()
	c.pending[company] = true
	c.pendMu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *ReadCache) invalidateLocal(company string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clock++
	if company == "" || company == "*" {
		c.all = c.clock
		clear(c.gens)
		clear(c.companies)
		c.bytes = 0
		return
	}
	c.gens[company] = c.clock
	if entries := c.companies[company]; entries != nil {
		c.dropLocked(company, entries)
	}
}

func (c *ReadCache) setListening(on bool) {
	c.mu.Lock()
	c.listening = on
	c.mu.Unlock()
	c.invalidateLocal("*") // whatever was missed while not listening
}

// Stats returns the hits and misses counted so far.
func (c *ReadCache) Stats() (hits, misses int64) {
	if c == nil {
		return 0, 0
	}
	return c.hits.Load(), c.misses.Load()
}

// Run listens for other nodes' invalidations and announces this node's until ctx ends,
// reconnecting after a failure (the cache serves nothing meanwhile).
func (c *ReadCache) Run(ctx context.Context, pool *pgxpool.Pool) {
	go c.announce(ctx, pool)
	for ctx.Err() == nil {
		err := c.listen(ctx, pool)
		c.setListening(false)
		if ctx.Err() != nil {
			return
		}
		c.log.Warn("read cache listener failed; reconnecting", "error", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

func (c *ReadCache) listen(ctx context.Context, pool *pgxpool.Pool) error {
	conn, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("error connecting: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+ReadCacheChannel); err != nil {
		return fmt.Errorf("error listening on %s: %w", ReadCacheChannel, err)
	}
	c.setListening(true)
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return fmt.Errorf("error waiting for read cache invalidations: %w", err)
		}
		node, companies, _ := strings.Cut(n.Payload, "|")
		if node == c.node {
			continue
		}
		for _, id := range strings.Split(companies, ",") {
			if id != "" {
				c.invalidateLocal(id)
			}
		}
	}
}

// announce sends the pending invalidations, several companies a notification. The
// notification is its own transaction, committed without waiting for the WAL flush: it
// changes no data, and NOTIFY holds a lock for the whole commit.
func (c *ReadCache) announce(ctx context.Context, pool *pgxpool.Pool) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.wake:
		}
		// Gather what a burst of writes invalidates into one notification.
		select {
		case <-ctx.Done():
			return
		case <-time.After(announceDelay):
		}
		c.pendMu.Lock()
		ids := make([]string, 0, len(c.pending))
		for id := range c.pending {
			ids = append(ids, id)
		}
		clear(c.pending)
		c.pendMu.Unlock()
		if slices := chunkIDs(ids); len(slices) > 0 {
			for _, part := range slices {
				if _, err := pool.Exec(ctx, `SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, $2)`,
					ReadCacheChannel, c.node+"|"+part); err != nil && ctx.Err() == nil {
					c.log.Warn("read cache invalidation not announced", "error", err)
				}
			}
		}
	}
}

// chunkIDs joins ids with commas into payloads under notifyPayloadMax; "*" alone when it is
// among them.
func chunkIDs(ids []string) []string {
	for _, id := range ids {
		if id == "*" {
			return []string{"*"}
		}
	}
	var out []string
	var b strings.Builder
	for _, id := range ids {
		if b.Len()+len(id)+1 > notifyPayloadMax {
			out = append(out, b.String())
			b.Reset()
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(id)
	}
	if b.Len() > 0 {
		out = append(out, b.String())
	}
	return out
}

// ETagOf is the strong entity tag of a body.
func ETagOf(body []byte) string {
	h := fnv.New64a()
	_, _ = h.Write(body)
	return `"` + strconv.FormatUint(h.Sum64(), 36) + `"`
}

// ETagMatches reports whether an If-None-Match header names etag (or is "*").
func ETagMatches(ifNoneMatch, etag string) bool {
	if ifNoneMatch == "" {
		return false
	}
	for _, v := range strings.Split(ifNoneMatch, ",") {
		v = strings.TrimPrefix(strings.TrimSpace(v), "W/")
		if v == "*" || v == etag {
			return true
		}
	}
	return false
}
