package kernel

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5"
)

// The company event stream (GET /api/companies/{companyId}/events) sends a company's activity
// log as server-sent events while it is written. Every entry passes through activityInsertTx
// on some node; the node that wrote it wakes its own streams at once (activityFeed.notify),
// and every stream also polls, which picks up entries written by other nodes.
//
// An entry's createdAt is its transaction's start, so entries can commit slightly out of
// createdAt order. A stream therefore rescans a short window behind the newest entry it sent
// (streamOverlap) and remembers the ids it sent inside that window, so an entry that commits
// late is still sent, and sent once.
const (
	// streamOverlap is how far behind the newest sent entry each scan starts.
	streamOverlap = 2 * time.Second
	// streamPoll is how often a stream scans without a wake (entries from other nodes).
	streamPoll = 2 * time.Second
	// streamMinGap spaces the scans of one stream under a burst of writes.
	streamMinGap = 150 * time.Millisecond
	// streamSinceMax is how far back a stream's since may reach.
	streamSinceMax = time.Hour
	// streamPage is the page size of each scan.
	streamPage = 500
	// streamPing is how often an idle stream sends a comment (which notices a gone client).
	streamPing = 15 * time.Second
	// maxActivityStreams bounds the open streams of one node.
	maxActivityStreams = 1000
)

// activityFeed wakes the open event streams of this node when a company's activity is written.
type activityFeed struct {
	mu      sync.Mutex
	subs    map[string]map[chan struct{}]struct{}
	streams int
	done    chan struct{}
	stop    sync.Once
}

func newActivityFeed() *activityFeed {
	return &activityFeed{subs: map[string]map[chan struct{}]struct{}{}, done: make(chan struct{})}
}

// subscribe registers a stream of companyID; ok is false when the node has as many streams as
// it serves.
func (f *activityFeed) subscribe(companyID string) (wake chan struct{}, cancel func(), ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.streams >= maxActivityStreams {
		return nil, nil, false
	}
	wake = make(chan struct{}, 1)
	set := f.subs[companyID]
	if set == nil {
		set = map[chan struct{}]struct{}{}
		f.subs[companyID] = set
	}
	set[wake] = struct{}{}
	f.streams++
	var once sync.Once
	return wake, func() {
		once.Do(func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			delete(set, wake)
			if len(set) == 0 {
				delete(f.subs, companyID)
			}
			f.streams--
		})
	}, true
}

// notify wakes every stream of companyID on this node; it never blocks.
func (f *activityFeed) notify(companyID string) {
	if f == nil || companyID == "" {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for wake := range f.subs[companyID] {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
}

// close ends every stream of this node (the server is stopping).
func (f *activityFeed) close() {
	if f != nil {
		f.stop.Do(func() { close(f.done) })
	}
}

// StopStreams ends the open company event streams, so that stopping the HTTP server does not
// wait on them.
func (k *Kernel) StopStreams() { k.feed.close() }

type activityStreamRequest struct {
	CompanyID   string
	LastEventID string
	// Since starts a stream without a resume cursor at a time instead of now.
	Since      time.Time
	EntityType string
	EntityID   string
	AgentID    string
	Action     string
}

// Bind reads the path, the filters and the resume cursor: the Last-Event-ID header an
// EventSource sends when it reconnects, or the lastEventId query parameter; without one,
// since (an RFC 3339 time) starts the stream at that time instead of now, so a page can
// ask for what was written between reading its data and opening its stream.
//
// The stream outlives the request, whose buffers the server reuses: every value is copied.
func (r *activityStreamRequest) Bind(c *fiber.Ctx, rc *RequestContext) error {
	r.CompanyID = strings.Clone(rc.Params["companyId"])
	r.LastEventID = strings.Clone(c.Get("Last-Event-ID"))
	if q := c.Query("lastEventId"); q != "" {
		r.LastEventID = strings.Clone(q)
	}
	r.EntityType, r.EntityID = strings.Clone(c.Query("entityType")), strings.Clone(c.Query("entityId"))
	r.AgentID, r.Action = strings.Clone(c.Query("agentId")), strings.Clone(c.Query("action"))
	var d detailList
	if r.LastEventID != "" && !isUUID(r.LastEventID) {
		d.add("Last-Event-ID", "must be the id of an activity entry")
	}
	if r.AgentID != "" && !isUUID(r.AgentID) {
		d.add("agentId", "must be a UUID")
	}
	if q := c.Query("since"); q != "" {
		t, err := time.Parse(time.RFC3339Nano, q)
		if err != nil {
			d.add("since", "must be an RFC 3339 time")
		}
		r.Since = t
	}
	return d.err()
}

// matches reports whether e passes the stream's filters.
func (r *activityStreamRequest) matches(e *ActivityEntry) bool {
	switch {
	case r.EntityType != "" && e.EntityType != r.EntityType,
		r.EntityID != "" && e.EntityID != r.EntityID,
		r.Action != "" && e.Action != r.Action,
		r.AgentID != "" && (e.AgentID == nil || *e.AgentID != r.AgentID):
		return false
	}
	return true
}

type activityStreamEndpoint struct{ k *Kernel }

func (e *activityStreamEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "GET /api/companies/{companyId}/events", Access: AccessEither, CompanyFrom: CompanyFromPath,
		Summary: "Stream a company's activity as server-sent events while it is written (each event's id is the entry id and " +
			"its data the entry); resumes after the Last-Event-ID header or lastEventId query, or starts at since (RFC 3339, at most an hour back); filters entityType, entityId, agentId, action",
		Errors: []int{http.StatusTooManyRequests}}
}

func (e *activityStreamEndpoint) Execute(ctx context.Context, req *activityStreamRequest) (*activityStream, error) {
	s := &activityStream{k: e.k, req: req, seen: map[string]time.Time{}}
	if req.LastEventID != "" {
		err := e.k.Pool.QueryRow(ctx, `SELECT created_at FROM kernel.activity_log WHERE company_id = $1 AND id = $2`,
			req.CompanyID, req.LastEventID).Scan(&s.cursor)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, ValidationError(ValidationDetail{Path: "Last-Event-ID", Message: "is not an activity entry of this company"})
		}
		if err != nil {
			return nil, Internal(fmt.Errorf("error resuming the event stream of company %s: %w", req.CompanyID, err))
		}
		s.resumeID = req.LastEventID
	} else if !req.Since.IsZero() {
		// At most streamSinceMax back: a page reconnecting long after it was rendered
		// does not replay the company's whole day.
		s.cursor = req.Since
		if floor := time.Now().Add(-streamSinceMax); s.cursor.Before(floor) {
			s.cursor = floor
		}
		s.notBefore = s.cursor
	} else if err := s.startAtNow(ctx); err != nil {
		return nil, Internal(err)
	}
	wake, cancel, ok := e.k.feed.subscribe(req.CompanyID)
	if !ok {
		return nil, NewAPIError(http.StatusTooManyRequests, "Too many open event streams on this server; try again later")
	}
	s.wake, s.cancel = wake, cancel
	return s, nil
}

// activityStream is one open event stream; its cursor is the newest createdAt it has sent.
type activityStream struct {
	k        *Kernel
	req      *activityStreamRequest
	wake     chan struct{}
	cancel   func()
	cursor   time.Time
	resumeID string
	// notBefore: entries written before it are never sent (a stream started with since).
	notBefore time.Time
	// seen holds the ids sent (or skipped at start) inside the overlap window, with their createdAt.
	seen map[string]time.Time
}

// startAtNow places the cursor at the company's newest entry and marks the entries of the
// overlap window as seen, so a new stream sends only what is written after it opened.
func (s *activityStream) startAtNow(ctx context.Context) error {
	err := s.k.Pool.QueryRow(ctx, `SELECT coalesce(max(created_at), now()) FROM kernel.activity_log WHERE company_id = $1`,
		s.req.CompanyID).Scan(&s.cursor)
	if err != nil {
		return fmt.Errorf("error opening the event stream of company %s: %w", s.req.CompanyID, err)
	}
	return s.scan(ctx, func(*ActivityEntry) error { return nil })
}

// scan reads the entries from the overlap window behind the cursor and hands each one not
// yet seen to send. On resume, the entries up to and including the resumed one were the
// client's already: they are marked seen, not sent.
func (s *activityStream) scan(ctx context.Context, send func(*ActivityEntry) error) error {
	p := &ActivityScanParams{CompanyID: s.req.CompanyID, After: s.cursor.Add(-streamOverlap),
		AfterID: "00000000-0000-0000-0000-000000000000", Limit: streamPage}
	resumeAt, resumeID := s.cursor, s.resumeID
	s.resumeID = ""
	delivered := func(e *ActivityEntry) bool {
		return e.CreatedAt.Before(s.notBefore) ||
			resumeID != "" && (e.CreatedAt.Before(resumeAt) || e.CreatedAt.Equal(resumeAt) && e.ID <= resumeID)
	}
	for {
		page, err := s.k.ActivityScan(ctx, p)
		if err != nil {
			return err
		}
		for _, e := range page {
			if _, dup := s.seen[e.ID]; dup {
				continue
			}
			s.seen[e.ID] = e.CreatedAt
			if e.CreatedAt.After(s.cursor) {
				s.cursor = e.CreatedAt
			}
			if !delivered(e) && s.req.matches(e) {
				if err := send(e); err != nil {
					return err
				}
			}
		}
		s.forget()
		if len(page) < streamPage {
			return nil
		}
		last := page[len(page)-1]
		p.After, p.AfterID = last.CreatedAt, last.ID
	}
}

// forget drops the seen ids that fell out of the overlap window.
func (s *activityStream) forget() {
	horizon := s.cursor.Add(-streamOverlap)
	for id, at := range s.seen {
		if at.Before(horizon) {
			delete(s.seen, id)
		}
	}
}

// WriteResponse streams the events until the client goes away or the server stops.
func (s *activityStream) WriteResponse(c *fiber.Ctx, status int) error {
	c.Set(fiber.HeaderContentType, "text/event-stream")
	c.Set(fiber.HeaderCacheControl, "no-cache")
	c.Set(fiber.HeaderConnection, "keep-alive")
	c.Set("X-Accel-Buffering", "no")
	c.Status(status)
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		defer s.cancel()
		go func() {
			select {
			case <-s.k.feed.done:
				cancel()
			case <-ctx.Done():
			}
		}()
		s.run(ctx, w)
	})
	return nil
}

func (s *activityStream) run(ctx context.Context, w *bufio.Writer) {
	if _, err := w.WriteString("retry: 2000\n:ok\n\n"); err != nil || w.Flush() != nil {
		return
	}
	send := func(e *ActivityEntry) error {
		data, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("error encoding activity entry %s: %w", e.ID, err)
		}
		if _, err := fmt.Fprintf(w, "id: %s\ndata: %s\n\n", e.ID, data); err != nil {
			return err
		}
		return nil
	}
	poll := time.NewTicker(streamPoll)
	defer poll.Stop()
	lastWrite := time.Now()
	for {
		if err := s.scan(ctx, send); err != nil {
			if ctx.Err() == nil && s.k.log != nil {
				s.k.log.Warn("company event stream ended", "company", s.req.CompanyID, "error", err)
			}
			return
		}
		if w.Buffered() > 0 {
			if w.Flush() != nil {
				return
			}
			lastWrite = time.Now()
		} else if time.Since(lastWrite) >= streamPing {
			if _, err := w.WriteString(":ping\n\n"); err != nil || w.Flush() != nil {
				return
			}
			lastWrite = time.Now()
		}
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-poll.C:
		}
		// Gather a burst of writes into one scan.
		select {
		case <-ctx.Done():
			return
		case <-time.After(streamMinGap):
		}
	}
}
