package agents

import (
	"encoding/json"
	"sort"
	"strings"
	"sync"
)

// redacted replaces a secret value in run logs and results.
const redacted = "***REDACTED***"

// minRedactLen is the shortest secret value redacted: shorter ones ("1", "yes") would blank
// ordinary output and hide nothing worth hiding.
const minRedactLen = 4

// runSecrets remembers, per executing run, the secret values its env resolved, so the run's
// log lines and result never show them (an agent that prints its env leaks nothing).
type runSecrets struct {
	mu   sync.RWMutex
	vals map[string][]string
}

// set records a run's secret values, longest first (so a value containing another is
// replaced whole).
func (s *runSecrets) set(runID string, values []string) {
	var keep []string
	for _, v := range values {
		if len(v) >= minRedactLen {
			keep = append(keep, v)
		}
	}
	if len(keep) == 0 {
		return
	}
	sort.Slice(keep, func(i, j int) bool { return len(keep[i]) > len(keep[j]) })
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.vals == nil {
		s.vals = map[string][]string{}
	}
	s.vals[runID] = keep
}

// forget drops a finished run's values.
func (s *runSecrets) forget(runID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.vals, runID)
}

// redact replaces the run's secret values in text.
func (s *runSecrets) redact(runID, text string) string {
	s.mu.RLock()
	vals := s.vals[runID]
	s.mu.RUnlock()
	for _, v := range vals {
		if strings.Contains(text, v) {
			text = strings.ReplaceAll(text, v, redacted)
		}
	}
	return text
}

// redactJSON redacts a JSON document's strings; it stays valid JSON because a secret's
// value is replaced inside its JSON encoding.
func (s *runSecrets) redactJSON(runID string, doc json.RawMessage) json.RawMessage {
	s.mu.RLock()
	vals := s.vals[runID]
	s.mu.RUnlock()
	out := string(doc)
	for _, v := range vals {
		enc, _ := json.Marshal(v)
		inner := string(enc[1 : len(enc)-1])
		if inner != "" && strings.Contains(out, inner) {
			out = strings.ReplaceAll(out, inner, redacted)
		}
	}
	return json.RawMessage(out)
}

// secretEnvValues returns the resolved values of the env entries given as secret references.
func secretEnvValues(given map[string]any, resolved map[string]string) []string {
	var out []string
	for k, v := range given {
		m, ok := v.(map[string]any)
		if !ok {
			continue
		}
		if t, _ := m["type"].(string); t == "secret_ref" || t == "user_secret_ref" {
			if val := resolved[k]; val != "" {
				out = append(out, val)
			}
		}
	}
	return out
}
