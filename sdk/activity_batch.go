package sdk

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

// activityBatchMax is the most entries one AppendMany call carries (the host's bound).
const activityBatchMax = 256

// activitySenders is how many AppendMany calls of one process may be in flight at once: the
// kernel writes a group while the next one travels, as with its own two flushers.
const activitySenders = 2

// activityCallTimeout bounds one AppendMany call, which serves several callers; a caller
// stops waiting when its own context ends.
const activityCallTimeout = time.Minute

// activityBatcher carries the activity entries that the goroutines of one process append at
// the same time to the host in one AppendMany call each, so that the host hands them to the
// kernel's group writer together, instead of one Append round trip per entry. There is no
// timer: an entry that finds a sender free is sent at once, and the entries that arrive
// while activitySenders calls are in flight form the next call. A host without AppendMany
// (it answers Unimplemented) gets one Append per entry from then on.
type activityBatcher struct {
	h *Host

	mu      sync.Mutex
	queue   [][]*activityAppend // submissions, each sent whole in one call
	senders int                 // senders running (activitySenders at most)

	// legacy is set once the host answered Unimplemented for AppendMany.
	legacy atomic.Bool
}

// activityAppend is one entry waiting for its call.
type activityAppend struct {
	req *hostv1.AppendActivityRequest
	// withdrawn is set (under the batcher's mu) by a caller that stopped waiting before the
	// entry was taken into a call.
	withdrawn bool
	// res or err is set by the sender before done is closed.
	res  *hostv1.AppendActivityResponse
	err  error
	done chan struct{}
}

// AppendActivity appends entries to the activity log, in order, and returns each entry's
// result: res[i] is set exactly when errs[i] is nil, and errs[i] is a gRPC status error as
// Activity.Append returns it (NotFound for an unknown company, InvalidArgument for a bad
// entry, or the call's own failure, such as Unavailable). The entries travel in one
// AppendMany call together with the entries that other goroutines of this process append at
// the same time. A caller whose context ends gets its context's error; an entry already on
// its way may still be appended.
func (h *Host) AppendActivity(ctx context.Context, reqs ...*hostv1.AppendActivityRequest) (res []*hostv1.AppendActivityResponse, errs []error) {
	res, errs = make([]*hostv1.AppendActivityResponse, len(reqs)), make([]error, len(reqs))
	b := h.activity
	if b == nil || b.legacy.Load() {
		appendEach(ctx, h.Activity, reqs, res, errs)
		return res, errs
	}
	for start := 0; start < len(reqs); start += activityBatchMax {
		end := min(start+activityBatchMax, len(reqs))
		b.append(ctx, reqs[start:end], res[start:end], errs[start:end])
	}
	return res, errs
}

// appendEach appends entries one Append call at a time, in order.
func appendEach(ctx context.Context, c hostv1.ActivityClient, reqs []*hostv1.AppendActivityRequest, res []*hostv1.AppendActivityResponse, errs []error) {
	for i, r := range reqs {
		res[i], errs[i] = c.Append(ctx, r)
	}
}

// append queues up to activityBatchMax entries as one submission, which a call carries
// whole, and waits for their results.
func (b *activityBatcher) append(ctx context.Context, reqs []*hostv1.AppendActivityRequest, res []*hostv1.AppendActivityResponse, errs []error) {
	if err := ctx.Err(); err != nil {
		for i := range reqs {
			errs[i] = err
		}
		return
	}
	as := make([]*activityAppend, len(reqs))
	for i, r := range reqs {
		as[i] = &activityAppend{req: r, done: make(chan struct{})}
	}
	b.mu.Lock()
	b.queue = append(b.queue, as)
	start := b.senders < activitySenders
	if start {
		b.senders++
	}
	b.mu.Unlock()
	if start {
		go b.send()
	}
	for i, a := range as {
		select {
		case <-a.done:
			res[i], errs[i] = a.res, a.err
			continue
		case <-ctx.Done():
		}
		// The caller stopped waiting: withdraw what is not taken yet.
		b.mu.Lock()
		for _, x := range as[i:] {
			x.withdrawn = true
		}
		b.mu.Unlock()
		for j := i; j < len(as); j++ {
			errs[j] = ctx.Err()
		}
		return
	}
}

// take removes whole submissions from the queue, up to activityBatchMax entries (at least
// one submission), leaving out withdrawn entries. When nothing is waiting it returns false
// and counts the sender out, which then ends: an entry queued later starts a sender.
func (b *activityBatcher) take() ([]*activityAppend, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.queue) == 0 {
		b.senders--
		return nil, false
	}
	var batch []*activityAppend
	n := 0
	for n < len(b.queue) && (n == 0 || len(batch)+len(b.queue[n]) <= activityBatchMax) {
		for _, a := range b.queue[n] {
			if !a.withdrawn {
				batch = append(batch, a)
			}
		}
		n++
	}
	clear(b.queue[:n])
	b.queue = b.queue[n:]
	if len(b.queue) == 0 {
		b.queue = b.queue[:0:0] // let a burst's backing array go
	}
	return batch, true
}

// send makes calls until the queue is empty.
func (b *activityBatcher) send() {
	for {
		batch, ok := b.take()
		if !ok {
			return
		}
		if len(batch) > 0 {
			b.call(batch)
		}
	}
}

// call sends one batch and hands each entry its result.
func (b *activityBatcher) call(batch []*activityAppend) {
	defer func() {
		for _, a := range batch {
			close(a.done)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), activityCallTimeout)
	defer cancel()
	if b.legacy.Load() {
		b.each(ctx, batch)
		return
	}
	req := &hostv1.AppendManyActivityRequest{Entries: make([]*hostv1.AppendActivityRequest, len(batch))}
	for i, a := range batch {
		req.Entries[i] = a.req
	}
	out, err := b.h.Activity.AppendMany(ctx, req)
	if status.Code(err) == codes.Unimplemented {
		b.legacy.Store(true)
		b.each(ctx, batch)
		return
	}
	if err == nil && len(out.Results) != len(batch) {
		err = status.Errorf(codes.Internal, "error appending activity: the host answered %d results for %d entries", len(out.Results), len(batch))
	}
	if err != nil {
		for _, a := range batch {
			a.err = err
		}
		return
	}
	for i, a := range batch {
		switch r := out.Results[i].GetResult().(type) {
		case *hostv1.AppendActivityResult_Entry:
			a.res = r.Entry
		case *hostv1.AppendActivityResult_Error:
			a.err = status.Error(codes.Code(r.Error.GetCode()), r.Error.GetMessage())
		default:
			a.err = status.Error(codes.Internal, fmt.Sprintf("error appending activity %s: the host answered no result", a.req.GetAction()))
		}
	}
}

// each appends a batch one Append call at a time, for a host without AppendMany.
func (b *activityBatcher) each(ctx context.Context, batch []*activityAppend) {
	for _, a := range batch {
		a.res, a.err = b.h.Activity.Append(ctx, a.req)
	}
}
