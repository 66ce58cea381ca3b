package work

import (
	"context"
	"fmt"
	"sync"
	"time"

	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

// issueNumbersMax is the most numbers one host call reserves (the host's bound).
const issueNumbersMax = 256

// issueNumberCallTimeout bounds one host call that reserves numbers for a batch of creates.
// The call runs without the requests' own cancellation (one client going away must not fail
// the others' creates), so this keeps a stuck call from holding its company's queue forever.
const issueNumberCallTimeout = 30 * time.Second

// issueNumberFunc reserves count consecutive issue numbers of a company through the host.
type issueNumberFunc func(ctx context.Context, companyID string, count int) (*hostv1.NextIssueNumberResponse, error)

// issueNumberer hands out issue numbers, coalescing concurrent creates of one company into
// one host call: the first request goes out at once; the requests that arrive while it is in
// flight wait and form the next call, which reserves a range of as many numbers, and each
// takes its own number in arrival order. There are no timers: a lone create pays one call,
// as before, and concurrent creates take the counter's row lock once per batch instead of
// once each. Numbers stay unique and increasing per company; a number whose create fails
// afterwards is a gap, as it always was. The zero value is ready to use.
type issueNumberer struct {
	mu     sync.Mutex
	queues map[string]*issueNumberQueue
}

// issueNumberQueue holds a company's waiting requests; busy says a call is in flight.
type issueNumberQueue struct {
	busy    bool
	waiting []*issueNumberWaiter
}

// issueNumberWaiter is one create waiting for its number.
type issueNumberWaiter struct {
	ctx  context.Context
	done chan issueNumberResult
}

// issueNumberResult is one create's number (or the batch call's error).
type issueNumberResult struct {
	number     int64
	identifier string
	err        error
}

// next returns a new number of companyID and its identifier ("<prefix>-<number>"), reserved
// through call, possibly together with concurrent requests of the same company.
func (n *issueNumberer) next(ctx context.Context, companyID string, call issueNumberFunc) (int64, string, error) {
	w := &issueNumberWaiter{ctx: ctx, done: make(chan issueNumberResult, 1)}
	n.mu.Lock()
	if n.queues == nil {
		n.queues = map[string]*issueNumberQueue{}
	}
	q := n.queues[companyID]
	if q == nil {
		q = &issueNumberQueue{}
		n.queues[companyID] = q
	}
	q.waiting = append(q.waiting, w)
	lead := !q.busy
	q.busy = true
	n.mu.Unlock()
	if lead {
		n.run(companyID, q, call)
	}
	select {
	case r := <-w.done:
		return r.number, r.identifier, r.err
	case <-ctx.Done():
		// The number reserved for this request, if any, is skipped: a gap, like a failed create.
		return 0, "", ctx.Err()
	}
}

// run makes one host call for the requests waiting in q (at most issueNumbersMax, oldest
// first) and hands each its number. Requests that arrived meanwhile are served by the next
// run, started on its own goroutine so that this caller returns with its number at once.
func (n *issueNumberer) run(companyID string, q *issueNumberQueue, call issueNumberFunc) {
	n.mu.Lock()
	batch := make([]*issueNumberWaiter, 0, min(len(q.waiting), issueNumbersMax))
	rest := q.waiting
	for len(rest) > 0 && len(batch) < issueNumbersMax {
		w := rest[0]
		rest = rest[1:]
		if w.ctx.Err() == nil { // a request that gave up needs no number
			batch = append(batch, w)
		}
	}
	q.waiting = rest
	n.mu.Unlock()

	var res *hostv1.NextIssueNumberResponse
	var err error
	if len(batch) > 0 {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(batch[0].ctx), issueNumberCallTimeout)
		res, err = call(ctx, companyID, len(batch))
		cancel()
	}
	served := batch
	if err == nil && len(batch) > 0 {
		// A host that predates ranges reserves one number and leaves first_number 0: the
		// requests it did not serve go back to the front of the queue for the next call.
		first := res.FirstNumber
		if first <= 0 || first > res.Number {
			first = res.Number
		}
		if got := int(res.Number - first + 1); got < len(batch) {
			served = batch[:got]
		}
		for i, w := range served {
			num := first + int64(i)
			w.done <- issueNumberResult{number: num, identifier: fmt.Sprintf("%s-%d", res.IssuePrefix, num)}
		}
	} else {
		for _, w := range batch {
			w.done <- issueNumberResult{err: err}
		}
	}

	n.mu.Lock()
	q.waiting = append(batch[len(served):], q.waiting...)
	more := len(q.waiting) > 0
	if !more {
		q.busy = false
		delete(n.queues, companyID)
	}
	n.mu.Unlock()
	if more {
		go n.run(companyID, q, call)
	}
}

// issueNumbersReserve reserves count consecutive issue numbers of a company through the host.
func (w *Work) issueNumbersReserve(ctx context.Context, companyID string, count int) (*hostv1.NextIssueNumberResponse, error) {
	return w.host.Companies.NextIssueNumber(ctx, &hostv1.NextIssueNumberRequest{CompanyId: companyID, Count: int32(count)})
}
