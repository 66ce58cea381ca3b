package dashboard

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCoalescer(t *testing.T) {
	t.Parallel()

	// gated counts its rounds and reads a version at the start of each, like a snapshot
	// reading the database; round 1 waits for release.
	type gated struct {
		c       coalescer[string, int64]
		rounds  atomic.Int64
		version atomic.Int64
		started chan struct{}
		release chan struct{}
	}
	newGated := func() *gated {
		return &gated{started: make(chan struct{}), release: make(chan struct{})}
	}
	fn := func(g *gated) func(context.Context) (int64, error) {
		return func(context.Context) (int64, error) {
			v := g.version.Load()
			if g.rounds.Add(1) == 1 {
				close(g.started)
				<-g.release
			}
			return v, nil
		}
	}

	t.Run("SequentialCallsEachComputeFreshly", func(t *testing.T) {
		t.Parallel()
		var c coalescer[string, int]
		n := 0
		for i := 1; i <= 3; i++ {
			v, err := c.do(context.Background(), "k", func(context.Context) (int, error) { n++; return n, nil })
			require.NoError(t, err)
			require.Equal(t, i, v)
		}
		require.Eventually(t, func() bool { return keys(&c) == 0 }, 5*time.Second, time.Millisecond,
			"no state is kept between rounds")
	})

	t.Run("NeverAnswersWithARoundOlderThanTheCall", func(t *testing.T) {
		t.Parallel()
		g := newGated()
		first := make(chan int64)
		go func() {
			v, _ := g.c.do(context.Background(), "k", fn(g))
			first <- v
		}()
		<-g.started // round 1 has read version 0
		g.version.Store(1)
		later := make(chan int64)
		go func() {
			v, _ := g.c.do(context.Background(), "k", fn(g))
			later <- v
		}()
		time.Sleep(20 * time.Millisecond)
		close(g.release)
		require.EqualValues(t, 0, <-first)
		require.EqualValues(t, 1, <-later, "a call made after the write sees it")
		require.EqualValues(t, 2, g.rounds.Load())
	})

	t.Run("CallsArrivingDuringARoundShareTheNext", func(t *testing.T) {
		t.Parallel()
		g := newGated()
		go func() { _, _ = g.c.do(context.Background(), "k", fn(g)) }()
		<-g.started
		g.version.Store(7)
		const callers = 20
		results := make(chan int64, callers)
		var launched sync.WaitGroup
		for range callers {
			launched.Add(1)
			go func() {
				launched.Done()
				v, err := g.c.do(context.Background(), "k", fn(g))
				assert.NoError(t, err)
				results <- v
			}()
		}
		launched.Wait()
		time.Sleep(50 * time.Millisecond)
		close(g.release)
		for range callers {
			require.EqualValues(t, 7, <-results)
		}
		require.LessOrEqual(t, g.rounds.Load(), int64(3), "twenty callers, about two rounds")
		// Another key is never held up by this one.
		v, err := g.c.do(context.Background(), "other", func(context.Context) (int64, error) { return 42, nil })
		require.NoError(t, err)
		require.EqualValues(t, 42, v)
	})

	t.Run("ACallerStopsWaitingWhenItsContextEnds", func(t *testing.T) {
		t.Parallel()
		g := newGated()
		go func() { _, _ = g.c.do(context.Background(), "k", fn(g)) }()
		<-g.started
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := g.c.do(ctx, "k", fn(g))
		require.ErrorIs(t, err, context.Canceled)
		close(g.release)
		// The queued round still runs and the key is released afterwards.
		require.Eventually(t, func() bool { return keys(&g.c) == 0 }, 5*time.Second, 5*time.Millisecond)
		require.EqualValues(t, 2, g.rounds.Load())
	})
}

// keys counts the keys with a round in flight.
func keys[K comparable, V any](c *coalescer[K, V]) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.state)
}
