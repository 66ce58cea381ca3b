package sdk

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

// fakeActivity is a host's Activity service that records the calls it takes. Without many
// it is an older host, which answers Unimplemented for AppendMany. An entry for the company
// "missing" is refused with NotFound.
type fakeActivity struct {
	hostv1.UnimplementedActivityServer
	many bool
	// gate, when set, holds every AppendMany call until it is closed; entered receives one
	// value per call held.
	gate    chan struct{}
	entered chan struct{}

	mu      sync.Mutex
	appends int
	sizes   []int // entries of each AppendMany taken
}

func (f *fakeActivity) result(r *hostv1.AppendActivityRequest) (*hostv1.AppendActivityResponse, error) {
	if r.CompanyId == "missing" {
		return nil, status.Errorf(codes.NotFound, "company %s not found", r.CompanyId)
	}
	return &hostv1.AppendActivityResponse{Id: r.EntityId, CreatedAt: time.Now().UTC().Format(time.RFC3339Nano)}, nil
}

func (f *fakeActivity) Append(_ context.Context, r *hostv1.AppendActivityRequest) (*hostv1.AppendActivityResponse, error) {
	f.mu.Lock()
	f.appends++
	f.mu.Unlock()
	return f.result(r)
}

func (f *fakeActivity) AppendMany(ctx context.Context, req *hostv1.AppendManyActivityRequest) (*hostv1.AppendManyActivityResponse, error) {
	f.mu.Lock()
	f.sizes = append(f.sizes, len(req.Entries))
	f.mu.Unlock()
	if !f.many {
		return f.UnimplementedActivityServer.AppendMany(ctx, req)
	}
	if f.gate != nil {
		f.entered <- struct{}{}
		<-f.gate
	}
	out := &hostv1.AppendManyActivityResponse{}
	for _, r := range req.Entries {
		res, err := f.result(r)
		if err != nil {
			st := status.Convert(err)
			out.Results = append(out.Results, &hostv1.AppendActivityResult{Result: &hostv1.AppendActivityResult_Error{
				Error: &hostv1.AppendActivityError{Code: int32(st.Code()), Message: st.Message()}}})
			continue
		}
		out.Results = append(out.Results, &hostv1.AppendActivityResult{Result: &hostv1.AppendActivityResult_Entry{Entry: res}})
	}
	return out, nil
}

func (f *fakeActivity) counts() (appends int, sizes []int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.appends, append([]int(nil), f.sizes...)
}

// serveFake returns a Host whose Activity client reaches f over in-process gRPC.
func serveFake(t *testing.T, f *fakeActivity) *Host {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	hostv1.RegisterActivityServer(srv, f)
	go srv.Serve(lis) //nolint:errcheck
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///fake", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return NewHost(conn)
}

// queued is how many entries wait in h's batcher.
func queued(h *Host) int {
	b := h.activity
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, s := range b.queue {
		n += len(s)
	}
	return n
}

func waitFor(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", msg)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestActivityBatcher(t *testing.T) {
	t.Parallel()

	t.Run("GroupsEntriesArrivingWhileCallsAreInFlight", func(t *testing.T) {
		t.Parallel()
		f := &fakeActivity{many: true, gate: make(chan struct{}), entered: make(chan struct{}, activitySenders)}
		h := serveFake(t, f)
		var wg sync.WaitGroup
		errs := make([]error, 2+20)
		log := func(i int, company string) {
			wg.Go(func() {
				errs[i] = h.LogActivity(context.Background(), &ActivityEntry{CompanyID: company, Action: "a.logged", EntityID: fmt.Sprint(i)})
			})
		}
		// The first two entries are sent at once, each in a call of its own.
		log(0, "c")
		<-f.entered
		log(1, "c")
		<-f.entered
		// The next ones wait for a sender, and travel together.
		for i := 2; i < len(errs); i++ {
			company := "c"
			if i == 7 {
				company = "missing"
			}
			log(i, company)
		}
		waitFor(t, func() bool { return queued(h) == 20 }, "20 queued entries")
		close(f.gate)
		wg.Wait()
		for i, err := range errs {
			if i == 7 {
				require.Equal(t, codes.NotFound, status.Code(err), "%v", err)
				require.ErrorContains(t, err, "error appending activity a.logged: ")
				continue
			}
			require.NoError(t, err, "entry %d", i)
		}
		appends, sizes := f.counts()
		require.Zero(t, appends)
		require.Equal(t, []int{1, 1, 20}, sizes)
	})

	t.Run("EachSubmissionTravelsWholeAndInOrder", func(t *testing.T) {
		t.Parallel()
		f := &fakeActivity{many: true}
		h := serveFake(t, f)
		reqs := make([]*hostv1.AppendActivityRequest, 300)
		for i := range reqs {
			reqs[i] = &hostv1.AppendActivityRequest{CompanyId: "c", Action: "a.logged", EntityId: fmt.Sprint(i)}
		}
		reqs[5].CompanyId = "missing"
		res, errs := h.AppendActivity(context.Background(), reqs...)
		for i := range reqs {
			if i == 5 {
				require.Equal(t, codes.NotFound, status.Code(errs[i]))
				require.Nil(t, res[i])
				continue
			}
			require.NoError(t, errs[i])
			require.Equal(t, fmt.Sprint(i), res[i].Id)
		}
		_, sizes := f.counts()
		require.Equal(t, []int{activityBatchMax, 300 - activityBatchMax}, sizes)
	})

	t.Run("CallerWhoseContextEndsStopsWaiting", func(t *testing.T) {
		t.Parallel()
		f := &fakeActivity{many: true, gate: make(chan struct{}), entered: make(chan struct{}, activitySenders)}
		h := serveFake(t, f)
		var wg sync.WaitGroup
		for i := range activitySenders {
			wg.Go(func() {
				require.NoError(t, h.LogActivity(context.Background(), &ActivityEntry{CompanyID: "c", Action: "a.logged", EntityID: fmt.Sprint(i)}))
			})
			<-f.entered
		}
		ctx, cancel := context.WithCancel(context.Background())
		gone := make(chan error, 1)
		go func() {
			gone <- h.LogActivity(ctx, &ActivityEntry{CompanyID: "c", Action: "a.logged", EntityID: "gone"})
		}()
		waitFor(t, func() bool { return queued(h) == 1 }, "the entry to be queued")
		cancel()
		require.ErrorIs(t, <-gone, context.Canceled)
		wg.Go(func() {
			require.NoError(t, h.LogActivity(context.Background(), &ActivityEntry{CompanyID: "c", Action: "a.logged", EntityID: "kept"}))
		})
		waitFor(t, func() bool { return queued(h) == 2 }, "the next entry to be queued")
		close(f.gate)
		wg.Wait()
		_, sizes := f.counts()
		require.Equal(t, []int{1, 1, 1}, sizes) // the withdrawn entry was not sent
	})

	t.Run("FallsBackToAppendOnAnOlderHost", func(t *testing.T) {
		t.Parallel()
		f := &fakeActivity{}
		h := serveFake(t, f)
		var wg sync.WaitGroup
		errs := make([]error, 30)
		for i := range errs {
			wg.Go(func() {
				company := "c"
				if i == 3 {
					company = "missing"
				}
				errs[i] = h.LogActivity(context.Background(), &ActivityEntry{CompanyID: company, Action: "a.logged", EntityID: fmt.Sprint(i)})
			})
		}
		wg.Wait()
		for i, err := range errs {
			if i == 3 {
				require.Equal(t, codes.NotFound, status.Code(err))
				continue
			}
			require.NoError(t, err)
		}
		appends, sizes := f.counts()
		require.Equal(t, len(errs), appends)
		require.NotEmpty(t, sizes)
		require.LessOrEqual(t, len(sizes), activitySenders) // asked once per sender at most, then remembered
		require.True(t, h.activity.legacy.Load())

		res, errs2 := h.AppendActivity(context.Background(), &hostv1.AppendActivityRequest{CompanyId: "c", Action: "a.logged", EntityId: "later"})
		require.NoError(t, errs2[0])
		require.Equal(t, "later", res[0].Id)
		appends2, sizes2 := f.counts()
		require.Equal(t, appends+1, appends2)
		require.Equal(t, sizes, sizes2)
	})
}
