package dashboard

import (
	"context"
	"sync"
)

// coalescer shares computations among concurrent callers with the same key without ever
// answering a caller with data computed before it arrived: a caller that finds a round in
// flight does not join it (that round may have read the database before the caller's own
// last write) but waits for the next one, which starts when the current one ends and is
// shared by everyone who arrived meanwhile. Under a steady crowd the rounds run back to
// back, one at a time per key, whatever the crowd's size. The zero value is ready.
type coalescer[K comparable, V any] struct {
	mu    sync.Mutex
	state map[K]*rounds[V]
}

// rounds are a key's round in flight and the one queued behind it.
type rounds[V any] struct {
	running, next *round[V]
}

// round is one computation and its outcome, published when done is closed.
type round[V any] struct {
	done chan struct{}
	// start is the context the round computes with (the first waiter's, detached).
	start context.Context
	val   V
	err   error
}

// do returns the outcome of a round of fn for key that started after this call did, or
// ctx's error when ctx ends first. fn runs with the context of the round's first caller,
// detached from its cancellation; fn must bound its own duration.
func (c *coalescer[K, V]) do(ctx context.Context, key K, fn func(ctx context.Context) (V, error)) (V, error) {
	c.mu.Lock()
	if c.state == nil {
		c.state = map[K]*rounds[V]{}
	}
	st := c.state[key]
	var r *round[V]
	switch {
	case st == nil:
		r = &round[V]{done: make(chan struct{}), start: context.WithoutCancel(ctx)}
		c.state[key] = &rounds[V]{running: r}
		go c.run(key, r, fn)
	case st.next == nil:
		r = &round[V]{done: make(chan struct{}), start: context.WithoutCancel(ctx)}
		st.next = r
	default:
		r = st.next
	}
	c.mu.Unlock()
	select {
	case <-r.done:
		return r.val, r.err
	case <-ctx.Done():
		var zero V
		return zero, ctx.Err()
	}
}

// run computes round r, publishes it and starts the queued round, if any.
func (c *coalescer[K, V]) run(key K, r *round[V], fn func(ctx context.Context) (V, error)) {
	for r != nil {
		r.val, r.err = fn(r.start)
		close(r.done)
		c.mu.Lock()
		st := c.state[key]
		r, st.running, st.next = st.next, st.next, nil
		if r == nil {
			delete(c.state, key)
		}
		c.mu.Unlock()
	}
}
