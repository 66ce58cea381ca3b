package kernel_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/keelhq/keel/host/pgembed/pgtest"
	"github.com/keelhq/keel/kernel"
)

// BenchmarkActivityInsertParallel appends activity entries from many goroutines at once,
// as concurrent requests do (no event subscribers: the entries go straight to the pool),
// each entry alone ("Direct") and in groups with 1, 2 or 4 flushers; "Outbox" entries carry
// an id, as an extension's outbox delivers them. Besides the time per entry it reports the
// CPU per entry of this process (host-µs/op) and of the PostgreSQL cluster (pg-µs/op),
// which move less with the machine's load. Run it with -cpu to vary the writers.
func BenchmarkActivityInsertParallel(b *testing.B) {
	ctx := context.Background()
	k, err := kernel.New(ctx, pgtest.NewDatabase(b), ktLocal())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(k.Close)
	c, err := k.CompanyInsert(ctx, &kernel.CompanyInsertParams{Name: "Bench Co"})
	if err != nil {
		b.Fatal(err)
	}
	for _, entries := range []string{"Plain", "Outbox"} {
		// Writers per GOMAXPROCS: 16 on 2 cores is the 32 concurrent requests of the load
		// harness.
		for _, writers := range []int{4, 16} {
			for _, flushers := range []int{0, 1, 2} {
				name := fmt.Sprintf("%s/Writers%dx/Flushers%d", entries, writers, flushers)
				if flushers == 0 {
					name = fmt.Sprintf("%s/Writers%dx/Direct", entries, writers)
				}
				b.Run(name, func(b *testing.B) {
					k.SetActivityFlushers(flushers)
					b.SetParallelism(writers)
					benchmarkAppends(ctx, b, k, c.ID, entries == "Outbox")
				})
			}
		}
	}
	k.SetActivityFlushers(2)
}

// benchmarkAppends appends b.N entries from the benchmark's parallel goroutines and
// reports the CPU each took.
func benchmarkAppends(ctx context.Context, b *testing.B, k *kernel.Kernel, companyID string, outbox bool) {
	before := sampleCPU(ctx, b, k.Pool)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p := &kernel.ActivityInsertParams{CompanyID: companyID, ActorType: "user", ActorID: "bench", Action: "issue.created",
				EntityType: "issue", EntityID: "BEN-1", Details: map[string]any{"title": "bench"}, CompanyMustExist: true}
			if outbox {
				p.ID = uuid.NewString()
			}
			if _, err := k.ActivityInsert(ctx, p); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	after := sampleCPU(ctx, b, k.Pool)
	b.ReportMetric(float64((after.host-before.host).Microseconds())/float64(b.N), "host-µs/op")
	if before.pg != nil && after.pg != nil {
		b.ReportMetric(float64(after.pgSince(before).Microseconds())/float64(b.N), "pg-µs/op")
	}
}

// cpuSample is the CPU time used so far by this process, and by each process of the
// PostgreSQL cluster (nil when /proc cannot tell).
type cpuSample struct {
	host time.Duration
	pg   map[int]time.Duration
}

// pgSince is the CPU the cluster's processes used since an earlier sample (a process that
// ended meanwhile is left out).
func (s cpuSample) pgSince(earlier cpuSample) time.Duration {
	var d time.Duration
	for pid, t := range s.pg {
		d += t - earlier.pg[pid]
	}
	return d
}

func sampleCPU(ctx context.Context, b *testing.B, pool *pgxpool.Pool) cpuSample {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	s := cpuSample{host: time.Duration(ru.Utime.Nano() + ru.Stime.Nano())}
	var backend int
	if err := pool.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
		b.Fatal(err)
	}
	postmaster, _, ok := procStat(backend)
	if !ok {
		return s
	}
	// Every backend and auxiliary process is a child of the postmaster; 100 ticks a second.
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	s.pg = map[int]time.Duration{}
	for _, f := range stats {
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
		if ppid, t, ok := procStat(pid); ok && (ppid == postmaster || pid == postmaster) {
			s.pg[pid] = time.Duration(t) * 10 * time.Millisecond
		}
	}
	return s
}

// procStat reads a process's parent and its user plus system CPU ticks from /proc.
func procStat(pid int) (ppid int, ticks int64, ok bool) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, false
	}
	i := strings.LastIndexByte(string(raw), ')')
	f := strings.Fields(string(raw[i+1:])) // state, ppid, ..., utime (12th), stime (13th)
	if i < 0 || len(f) < 13 {
		return 0, 0, false
	}
	ppid, _ = strconv.Atoi(f[1])
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return ppid, u + s, true
}
