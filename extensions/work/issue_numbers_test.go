package work

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
	"github.com/keelhq/keel/sdktest"
)

// fakeCounter is a company's issue counter as the host keeps it. A call blocks while gate
// holds a channel, so a test can queue requests behind a call in flight.
type fakeCounter struct {
	mu      sync.Mutex
	counter int64
	counts  []int
	gate    chan struct{}
	legacy  bool  // a host that predates ranges: reserves one, first_number 0
	err     error // returned by every call when set
}

func (f *fakeCounter) call(ctx context.Context, companyID string, count int) (*hostv1.NextIssueNumberResponse, error) {
	f.mu.Lock()
	gate := f.gate
	f.mu.Unlock()
	if gate != nil {
		<-gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.counts = append(f.counts, count)
	if f.err != nil {
		return nil, f.err
	}
	if f.legacy {
		f.counter++
		return &hostv1.NextIssueNumberResponse{IssuePrefix: "CMP", Number: f.counter, Identifier: fmt.Sprintf("CMP-%d", f.counter)}, nil
	}
	first := f.counter + 1
	f.counter += int64(count)
	return &hostv1.NextIssueNumberResponse{IssuePrefix: "CMP", FirstNumber: first, Number: f.counter,
		Identifier: fmt.Sprintf("CMP-%d", f.counter)}, nil
}

func (f *fakeCounter) calls() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int(nil), f.counts...)
}

// waiting is how many requests of company wait behind the call in flight.
func (n *issueNumberer) waitingFor(company string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if q := n.queues[company]; q != nil {
		return len(q.waiting)
	}
	return 0
}

// numbered is what one request got.
type numbered struct {
	number     int64
	identifier string
	err        error
}

// issueNumbersQueue starts a leader whose call blocks, then queues extra requests one at a
// time (each enqueued before the next starts, so arrival order is their index), releases the
// leader and returns every request's result (the leader's first).
func issueNumbersQueue(t *testing.T, n *issueNumberer, f *fakeCounter, extra int, ctxs func(i int) context.Context) []numbered {
	t.Helper()
	gate := make(chan struct{})
	f.mu.Lock()
	f.gate = gate
	f.mu.Unlock()
	out := make([]numbered, extra+1)
	var wg sync.WaitGroup
	start := func(i int, ctx context.Context) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			num, id, err := n.next(ctx, "c1", f.call)
			out[i] = numbered{num, id, err}
		}()
	}
	start(0, context.Background())
	// The leader has taken the queue (empty again) and is blocked in its call.
	sdktest.WaitFor(t, 10*time.Second, func() bool { return len(f.calls()) == 0 && n.waitingFor("c1") == 0 && n.busy("c1") },
		"the leader's call")
	for i := 1; i <= extra; i++ {
		ctx := context.Background()
		if ctxs != nil {
			ctx = ctxs(i)
		}
		start(i, ctx)
		sdktest.WaitFor(t, 10*time.Second, func() bool { return n.waitingFor("c1") == i }, fmt.Sprintf("request %d to queue", i))
	}
	f.mu.Lock()
	f.gate = nil
	f.mu.Unlock()
	close(gate)
	wg.Wait()
	return out
}

// busy says whether a call of company is in flight.
func (n *issueNumberer) busy(company string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	q := n.queues[company]
	return q != nil && q.busy
}

// TestIssueNumbererCoalesces queues requests behind a call in flight: they form one next call
// for all of them, and each gets its own number in arrival order.
func TestIssueNumbererCoalesces(t *testing.T) {
	t.Parallel()
	var n issueNumberer
	f := &fakeCounter{}
	out := issueNumbersQueue(t, &n, f, 20, nil)
	require.Equal(t, []int{1, 20}, f.calls())
	for i, r := range out {
		require.NoError(t, r.err)
		require.Equal(t, int64(i+1), r.number, "request %d", i)
		require.Equal(t, fmt.Sprintf("CMP-%d", i+1), r.identifier)
	}
	// The queue is gone once idle; a lone request pays one call of one number.
	require.False(t, n.busy("c1"))
	num, id, err := n.next(context.Background(), "c1", f.call)
	require.NoError(t, err)
	require.Equal(t, int64(22), num)
	require.Equal(t, "CMP-22", id)
	require.Equal(t, []int{1, 20, 1}, f.calls())
}

// TestIssueNumbererBounded splits a long queue into calls of at most issueNumbersMax.
func TestIssueNumbererBounded(t *testing.T) {
	t.Parallel()
	var n issueNumberer
	f := &fakeCounter{}
	out := issueNumbersQueue(t, &n, f, 300, nil)
	require.Equal(t, []int{1, issueNumbersMax, 300 - issueNumbersMax}, f.calls())
	requireNumbered(t, out)
}

// TestIssueNumbererLegacyHost serves every request from a host that ignores count (one
// number per call, first_number 0): the unserved requests are queued again, in order.
func TestIssueNumbererLegacyHost(t *testing.T) {
	t.Parallel()
	var n issueNumberer
	f := &fakeCounter{legacy: true}
	out := issueNumbersQueue(t, &n, f, 5, nil)
	require.Equal(t, []int{1, 5, 4, 3, 2, 1}, f.calls())
	requireNumbered(t, out)
}

// TestIssueNumbererErrorsAndCancel hands a failed call's error to every request of its batch
// and reserves no number for a request that gave up before its call.
func TestIssueNumbererErrorsAndCancel(t *testing.T) {
	t.Parallel()
	var n issueNumberer
	f := &fakeCounter{err: status.Error(codes.NotFound, "company c1 not found")}
	out := issueNumbersQueue(t, &n, f, 3, nil)
	require.Equal(t, []int{1, 3}, f.calls())
	for _, r := range out {
		require.Equal(t, codes.NotFound, status.Code(r.err))
	}

	var n2 issueNumberer
	f2 := &fakeCounter{}
	out = issueNumbersQueue(t, &n2, f2, 4, func(i int) context.Context {
		if i != 2 {
			return context.Background()
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx
	})
	require.Equal(t, []int{1, 3}, f2.calls())
	require.True(t, errors.Is(out[2].err, context.Canceled))
	var got []int64
	for i, r := range out {
		if i != 2 {
			require.NoError(t, r.err)
			got = append(got, r.number)
		}
	}
	require.Equal(t, []int64{1, 2, 3, 4}, got)
}

// requireNumbered requires every request served without error, numbered 1, 2, … in order.
func requireNumbered(t *testing.T, out []numbered) {
	t.Helper()
	for i, r := range out {
		require.NoError(t, r.err)
		require.Equal(t, int64(i+1), r.number, "request %d", i)
	}
}
