package kernel_test

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/keelhq/keel/host/pgembed/pgtest"
	"github.com/keelhq/keel/kernel"
)

// BenchmarkActivityInsertParallel appends activity entries from many goroutines at once,
// as concurrent requests do (no event subscribers: the entries go straight to the pool).
// Run it with -cpu to vary the writers, for example -cpu 1,8,32.
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
	for _, bc := range []struct {
		name string
		// outbox sets an id on each entry, as an extension's outbox does.
		outbox bool
	}{{"Plain", false}, {"Outbox", true}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetParallelism(4) // 4 × GOMAXPROCS writers: requests wait on PostgreSQL, not on a CPU
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					p := &kernel.ActivityInsertParams{CompanyID: c.ID, ActorType: "user", ActorID: "bench", Action: "issue.created",
						EntityType: "issue", EntityID: "BEN-1", Details: map[string]any{"title": "bench"}, CompanyMustExist: true}
					if bc.outbox {
						p.ID = uuid.NewString()
					}
					if _, err := k.ActivityInsert(ctx, p); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
