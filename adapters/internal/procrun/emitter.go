// Package procrun is the machinery local adapters share to run an agent command: the run
// event emitter, the process-group guard, the unprivileged agent user and the run loop.
package procrun

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/adapter"
)

// Batching bounds of the run event stream.
const (
	flushEvery = 100 * time.Millisecond
	flushBytes = 64 << 10
	// deliverTimeout bounds one agents.runEvents call.
	deliverTimeout = 10 * time.Second
)

// Emitter batches a run's events and delivers them in order with agents.runEvents from one
// goroutine. Delivery failures are logged and never fail the run; when no extension provides
// agents.runEvents the emitter stops delivering silently.
type Emitter struct {
	host      *sdk.Host
	log       hclog.Logger
	runID     string
	companyID string

	mu         sync.Mutex
	seq        int64
	pending    []adapter.RunEvent
	pendingLen int
	noListener bool

	kick chan struct{}
	stop chan struct{}
	done chan struct{}
}

func NewEmitter(host *sdk.Host, log hclog.Logger, runID, companyID string) *Emitter {
	e := &Emitter{host: host, log: log, runID: runID, companyID: companyID,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go e.loop()
	return e
}

// Add queues one event, stamping its sequence number and time.
func (e *Emitter) Add(ev adapter.RunEvent) {
	e.mu.Lock()
	e.seq++
	ev.Seq = e.seq
	ev.At = time.Now().UTC()
	e.pending = append(e.pending, ev)
	e.pendingLen += len(ev.Text) + len(ev.Payload)
	full := e.pendingLen >= flushBytes
	e.mu.Unlock()
	if full {
		e.Wake()
	}
}

// coalesceBytes bounds a log event made of consecutive chunks of one stream.
const coalesceBytes = 16 << 10

// LogText queues one log chunk of a stream (stdout, stderr or system), appending it to the
// last pending event when that is a log of the same stream with room left.
func (e *Emitter) LogText(stream, text string) {
	e.mu.Lock()
	if n := len(e.pending); n > 0 {
		last := &e.pending[n-1]
		if last.Kind == "log" && last.Stream == stream && len(last.Text)+len(text) <= coalesceBytes {
			last.Text += text
			e.pendingLen += len(text)
			full := e.pendingLen >= flushBytes
			e.mu.Unlock()
			if full {
				e.Wake()
			}
			return
		}
	}
	e.mu.Unlock()
	e.Add(adapter.RunEvent{Kind: "log", Stream: stream, Text: text})
}

// Wake asks the loop to flush now.
func (e *Emitter) Wake() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// Close delivers what is pending and stops the loop.
func (e *Emitter) Close() {
	close(e.stop)
	<-e.done
}

func (e *Emitter) loop() {
	defer close(e.done)
	t := time.NewTicker(flushEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			e.flush()
		case <-e.kick:
			e.flush()
		case <-e.stop:
			e.flush()
			return
		}
	}
}

func (e *Emitter) flush() {
	e.mu.Lock()
	batch := e.pending
	e.pending, e.pendingLen = nil, 0
	skip := e.noListener || e.host == nil
	e.mu.Unlock()
	if len(batch) == 0 || skip {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), deliverTimeout)
	defer cancel()
	err := e.host.Call(ctx, adapter.RunEventsMethod, sdk.SystemActor(), e.companyID,
		&adapter.RunEventsRequest{RunID: e.runID, Events: batch}, nil)
	switch {
	case err == nil:
	case sdk.IsMethodNotProvided(err):
		e.mu.Lock()
		e.noListener = true
		e.mu.Unlock()
	default:
		e.log.Warn("error delivering run events", "run", e.runID, "events", len(batch), "error", err)
	}
}
