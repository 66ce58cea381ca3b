package supervisor

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"

	"github.com/keelhq/keel/host/metrics"
	"github.com/keelhq/keel/kernel"
	"github.com/keelhq/keel/sdk"
	extensionv1 "github.com/keelhq/keel/sdk/proto/extension/v1"
)

// ExtensionStates implements metrics.ExtensionStates.
func (s *Supervisor) ExtensionStates() []metrics.ExtensionState {
	s.mu.RLock()
	list := make([]*managed, 0, len(s.exts))
	for _, m := range s.exts {
		list = append(list, m)
	}
	s.mu.RUnlock()
	out := make([]metrics.ExtensionState, 0, len(list))
	for _, m := range list {
		m.mu.Lock()
		out = append(out, metrics.ExtensionState{Key: m.key, Status: m.status, Restarts: m.restarts, Running: m.client != nil})
		m.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// NotReady is the supervisor's readiness check: it names every enabled extension that is
// not up. A lazy extension (an adapter) is up while it is ready to start on first use; an
// extension whose flag is off counts as disabled.
func (s *Supervisor) NotReady(ctx context.Context) []string {
	var out []string
	s.mu.RLock()
	list := make([]*managed, 0, len(s.exts))
	for _, m := range s.exts {
		list = append(list, m)
	}
	s.mu.RUnlock()
	for _, m := range list {
		m.mu.Lock()
		status, enabled, running := m.status, m.rec.Enabled, m.client != nil
		m.mu.Unlock()
		switch {
		case !enabled || status == kernel.ExtensionDisabled || running:
		case m.lazy() && status == kernel.ExtensionReady:
		default:
			out = append(out, fmt.Sprintf("extension %s is not up (status %s)", m.key, status))
		}
	}
	return out
}

// ExtensionMetrics implements metrics.ExtensionMetricsSource: it asks every running
// extension for its own metrics (the SDK answers the reserved method sdk.MetricsMethod)
// in parallel. Extensions that are not running are not started for it; one that does not
// answer (an older SDK, a wasm module) is left out.
func (s *Supervisor) ExtensionMetrics(ctx context.Context) map[string][]byte {
	s.mu.RLock()
	type target struct {
		key    string
		client extensionv1.ExtensionClient
	}
	var targets []target
	for _, m := range s.exts {
		if c, _ := m.current(); c != nil && m.wasmModule() == nil {
			targets = append(targets, target{m.key, c})
		}
	}
	s.mu.RUnlock()
	out := make(map[string][]byte, len(targets))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, t := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := t.client.Call(ctx, &extensionv1.CallRequest{Method: sdk.MetricsMethod, Caller: "host"})
			if err != nil || res.Error != nil {
				return
			}
			var data []byte
			if err := json.Unmarshal(res.OutputJson, &data); err != nil {
				s.log.Debug("extension metrics undecodable", "extension", t.key, "error", err)
				return
			}
			mu.Lock()
			out[t.key] = data
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

func (m *managed) wasmModule() WasmModule {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.wasm
}

var (
	_ metrics.ExtensionStates        = (*Supervisor)(nil)
	_ metrics.ExtensionMetricsSource = (*Supervisor)(nil)
)

// InFlight counts the requests, calls, jobs and events being served by extensions now.
func (s *Supervisor) InFlight() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := 0
	for _, m := range s.exts {
		n += int(m.inflight.Load())
	}
	return n
}
