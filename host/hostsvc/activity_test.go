package hostsvc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/keelhq/keel/host/hostsvc"
	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/outbox"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
	"github.com/keelhq/keel/sdktest"
)

// activityEnv is a real host (kernel on real PostgreSQL) whose host services for one
// extension are served over real gRPC on loopback, as the supervisor serves them over the
// broker, with the SDK's client on the other end.
type activityEnv struct {
	h    *sdktest.Host
	host *sdk.Host
	conn *grpc.ClientConn
	pool *pgxpool.Pool
	key  string
	// calls counts the Activity calls the server took.
	calls atomic.Int64
}

// startActivityEnv serves the services of an extension with the given capabilities.
func startActivityEnv(t testing.TB, capabilities ...string) *activityEnv {
	t.Helper()
	h := sdktest.Start(t, sdktest.Options{})
	return serveActivity(t, h, capabilities...)
}

func serveActivity(t testing.TB, h *sdktest.Host, capabilities ...string) *activityEnv {
	t.Helper()
	key := "test.activity_" + uuid.NewString()[:8]
	svc := hostsvc.New(&sdk.Manifest{Key: key, Capabilities: capabilities}, hostsvc.Deps{Kernel: h.Kernel})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	env := &activityEnv{h: h, key: key}
	count := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		env.calls.Add(1)
		return handler(ctx, req)
	}
	srv := grpc.NewServer(append(sdk.GRPCServerOptions(), grpc.UnaryInterceptor(count))...)
	hostv1.RegisterActivityServer(srv, svc.Activity)
	go srv.Serve(lis) //nolint:errcheck
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(),
		append(sdk.GRPCDialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	pool, err := pgxpool.New(context.Background(), h.DatabaseURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	env.host, env.conn, env.pool = sdk.NewHost(conn), conn, pool
	return env
}

// storedEntry is an activity row as the kernel stored it.
type storedEntry struct {
	ID, ActorType, ActorID, EntityID string
	Details                          map[string]any
}

// entries returns the stored entries of a company with an action, by entity id.
func (e *activityEnv) entries(t testing.TB, companyID, action string) map[string][]storedEntry {
	t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT id::text, actor_type, actor_id, entity_id, details
		FROM kernel.activity_log WHERE company_id = $1 AND action = $2`, companyID, action)
	require.NoError(t, err)
	defer rows.Close()
	out := map[string][]storedEntry{}
	for rows.Next() {
		var s storedEntry
		var details []byte
		require.NoError(t, rows.Scan(&s.ID, &s.ActorType, &s.ActorID, &s.EntityID, &details))
		require.NoError(t, json.Unmarshal(details, &s.Details))
		out[s.EntityID] = append(out[s.EntityID], s)
	}
	require.NoError(t, rows.Err())
	return out
}

func TestActivityAppendMany(t *testing.T) {
	t.Parallel()
	env := startActivityEnv(t, sdk.CapActivity)
	company := env.h.CreateCompany("Append Many Co")
	missing := uuid.NewString()

	t.Run("ConcurrentLogActivityLandsOnce", func(t *testing.T) {
		t.Parallel()
		const n = 300
		agent := uuid.NewString()
		var wg sync.WaitGroup
		errs := make([]error, n)
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				e := &sdk.ActivityEntry{CompanyID: company, Action: "burst.logged", EntityType: "burst", EntityID: fmt.Sprint(i),
					Details: map[string]any{"i": i}}
				if i%3 == 0 {
					e.Actor = &sdk.Actor{Type: "agent", AgentId: agent, RunId: "run-1"}
				}
				<-start
				errs[i] = env.host.LogActivity(context.Background(), e)
			})
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			require.NoError(t, err, "entry %d", i)
		}
		got := env.entries(t, company, "burst.logged")
		require.Len(t, got, n)
		for i := range n {
			es := got[fmt.Sprint(i)]
			require.Len(t, es, 1, "entry %d", i)
			require.Equal(t, float64(i), es[0].Details["i"])
			if i%3 == 0 {
				require.Equal(t, "agent", es[0].ActorType)
				require.Equal(t, agent, es[0].ActorID)
			} else {
				require.Equal(t, "plugin", es[0].ActorType)
				require.Equal(t, env.key, es[0].ActorID)
			}
		}
	})

	t.Run("RefusedEntryFailsAlone", func(t *testing.T) {
		t.Parallel()
		repeated := uuid.NewString()
		reqs := []*hostv1.AppendActivityRequest{
			{CompanyId: company, Action: "mixed.logged", EntityId: "first"},
			{CompanyId: missing, Action: "mixed.logged", EntityId: "unknown-company"},
			{CompanyId: company, Action: "", EntityId: "no-action"},
			{CompanyId: company, Action: "mixed.logged", EntityId: "bad-details", DetailsJson: []byte("{")},
			{CompanyId: company, Action: "mixed.logged", EntityId: "bad-id", Id: "nope"},
			{CompanyId: "not-a-uuid", Action: "mixed.logged", EntityId: "bad-company"},
			{CompanyId: company, Action: "mixed.logged", EntityId: "with-id", Id: repeated},
			{CompanyId: company, Action: "mixed.logged", EntityId: "with-id", Id: repeated}, // one entry
			{CompanyId: missing, Action: "mixed.logged", EntityId: "unknown-company-with-id", Id: uuid.NewString()},
			{CompanyId: company, Action: "mixed.logged", EntityId: "last", DetailsJson: []byte(`{"k":"v"}`)},
		}
		want := []codes.Code{codes.OK, codes.NotFound, codes.InvalidArgument, codes.InvalidArgument, codes.InvalidArgument,
			codes.NotFound, codes.OK, codes.OK, codes.NotFound, codes.OK}
		res, err := env.host.Activity.AppendMany(context.Background(), &hostv1.AppendManyActivityRequest{Entries: reqs})
		require.NoError(t, err)
		require.Len(t, res.Results, len(reqs))
		for i, r := range res.Results {
			if want[i] == codes.OK {
				require.NotNil(t, r.GetEntry(), "entry %d: %v", i, r.GetError())
				require.NotEmpty(t, r.GetEntry().Id)
				_, err := time.Parse(time.RFC3339Nano, r.GetEntry().CreatedAt)
				require.NoError(t, err)
				continue
			}
			require.NotNil(t, r.GetError(), "entry %d", i)
			require.Equal(t, want[i], codes.Code(r.GetError().Code), "entry %d: %s", i, r.GetError().Message)
		}
		require.Equal(t, "company "+missing+" not found", res.Results[1].GetError().Message)
		require.Equal(t, "action is required", res.Results[2].GetError().Message)
		require.Equal(t, repeated, res.Results[6].GetEntry().Id)
		require.Equal(t, res.Results[6].GetEntry(), res.Results[7].GetEntry())

		got := env.entries(t, company, "mixed.logged")
		require.Len(t, got, 3)
		require.Len(t, got["with-id"], 1)
		require.Equal(t, "v", got["last"][0].Details["k"])

		// Through the SDK, each entry gets its own error.
		sent, errs := env.host.AppendActivity(context.Background(), reqs[:3]...)
		require.NoError(t, errs[0])
		require.NotEmpty(t, sent[0].Id)
		require.Equal(t, codes.NotFound, status.Code(errs[1]))
		require.Nil(t, sent[1])
		require.Equal(t, codes.InvalidArgument, status.Code(errs[2]))
	})

	t.Run("TooManyEntries", func(t *testing.T) {
		t.Parallel()
		reqs := make([]*hostv1.AppendActivityRequest, 257)
		for i := range reqs {
			reqs[i] = &hostv1.AppendActivityRequest{CompanyId: company, Action: "toomany.logged"}
		}
		_, err := env.host.Activity.AppendMany(context.Background(), &hostv1.AppendManyActivityRequest{Entries: reqs})
		require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
		require.Empty(t, env.entries(t, company, "toomany.logged"))

		// The SDK splits a long list into calls the host takes.
		_, errs := env.host.AppendActivity(context.Background(), reqs...)
		for _, err := range errs {
			require.NoError(t, err)
		}
		require.Len(t, env.entries(t, company, "toomany.logged")[""], len(reqs))
	})

	t.Run("NeedsTheCapability", func(t *testing.T) {
		t.Parallel()
		other := serveActivity(t, env.h, sdk.CapAuthz)
		_, err := other.host.Activity.AppendMany(context.Background(), &hostv1.AppendManyActivityRequest{
			Entries: []*hostv1.AppendActivityRequest{{CompanyId: company, Action: "nocap.logged"}}})
		require.Equal(t, codes.PermissionDenied, status.Code(err))
		err = other.host.LogActivity(context.Background(), &sdk.ActivityEntry{CompanyID: company, Action: "nocap.logged"})
		require.Equal(t, codes.PermissionDenied, status.Code(err))
	})

	t.Run("OutboxDeliversAndDeletes", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		schema := "outbox_" + uuid.NewString()[:8]
		table := schema + "." + outbox.DefaultTable
		_, err := env.pool.Exec(ctx, `CREATE SCHEMA `+schema)
		require.NoError(t, err)
		_, err = env.pool.Exec(ctx, outbox.TableSQL(table))
		require.NoError(t, err)
		ob := outbox.Start(env.pool, table, env.host, nil)
		t.Cleanup(ob.Stop)

		// Requests that each commit a few rows and deliver them, at once.
		const requests, perRequest = 40, 3
		var wg sync.WaitGroup
		for r := range requests {
			wg.Go(func() {
				tx, err := env.pool.Begin(ctx)
				assert.NoError(t, err)
				defer tx.Rollback(ctx) //nolint:errcheck
				var ids []string
				for i := range perRequest {
					id, err := ob.LogActivity(ctx, tx, &sdk.ActivityEntry{CompanyID: company, Action: "outbox.logged",
						EntityType: "row", EntityID: fmt.Sprintf("%d-%d", r, i), Details: map[string]any{"r": r, "i": i}})
					assert.NoError(t, err)
					ids = append(ids, id)
				}
				if r == 0 { // refused for good: dropped, not retried
					id, err := ob.AddActivity(ctx, tx, &outbox.Activity{CompanyID: missing, Action: "outbox.logged", EntityID: "gone"})
					assert.NoError(t, err)
					ids = append(ids, id)
				}
				assert.NoError(t, tx.Commit(ctx))
				ob.Deliver(ctx, ids)
			})
		}
		wg.Wait()
		got := env.entries(t, company, "outbox.logged")
		require.Len(t, got, requests*perRequest)
		for r := range requests {
			for i := range perRequest {
				es := got[fmt.Sprintf("%d-%d", r, i)]
				require.Len(t, es, 1)
				require.Equal(t, float64(r), es[0].Details["r"])
			}
		}
		// The entries of one request are listed in the order it added them.
		rows, err := env.pool.Query(ctx, `SELECT entity_id FROM kernel.activity_log WHERE company_id = $1
			AND action = 'outbox.logged' AND entity_id LIKE '7-%' ORDER BY created_at, id`, company)
		require.NoError(t, err)
		var order []string
		for rows.Next() {
			var s string
			require.NoError(t, rows.Scan(&s))
			order = append(order, s)
		}
		require.NoError(t, rows.Err())
		require.Equal(t, []string{"7-0", "7-1", "7-2"}, order)

		sdktest.WaitFor(t, 30*time.Second, func() bool {
			var n int
			require.NoError(t, env.pool.QueryRow(ctx, `SELECT count(*) FROM `+table).Scan(&n))
			return n == 0
		}, "the delivered outbox rows to be deleted")
	})
}

// BenchmarkLogActivity appends entries from many goroutines at once through a real host:
// Grouped is the SDK's batcher (AppendMany), PerEntry one Append per entry (a Host not made
// by NewHost).
func BenchmarkLogActivity(b *testing.B) {
	env := startActivityEnv(b, sdk.CapActivity)
	company := env.h.CreateCompany("Bench Co")
	for _, bc := range []struct {
		name string
		host *sdk.Host
	}{
		{"Grouped", env.host},
		{"PerEntry", &sdk.Host{Activity: hostv1.NewActivityClient(env.conn)}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetParallelism(16)
			calls := env.calls.Load()
			cpu := cpuTime(b)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := bc.host.LogActivity(context.Background(), &sdk.ActivityEntry{CompanyID: company,
						Action: "bench.logged", EntityType: "bench", EntityID: "x", Details: map[string]any{"n": 1}}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(env.calls.Load()-calls)/float64(b.N), "calls/op")
			b.ReportMetric(float64((cpuTime(b)-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// cpuTime is the CPU time (user and system) this process used so far: the host and the
// client side of the calls, both in this process.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
