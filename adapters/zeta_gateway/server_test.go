package zetagateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// runServer is an in-test remote run server. The first path segment after /s/ picks the
// scenario of every run created under it (the base URL is srv.URL+"/s/<scenario>"):
//
//	ok         deltas, then run.completed with usage, cost, model and a session id
//	drop       one delta, then the stream drops; the reconnected stream finishes the run
//	poll       the event stream always answers 503; the status polls finish the run
//	slow       POST answers after a pause; the run never ends until it is stopped
//	status-<s> the stream ends the run with status <s> (completed, failed, cancelled…)
//	http-<n>   POST /v1/runs answers HTTP <n>
//	noid       POST /v1/runs answers without a run id
type runServer struct {
	*httptest.Server
	mu   sync.Mutex
	runs map[string]*remoteRun
	// byIdem maps Idempotency-Key to the run it created.
	byIdem map[string]*remoteRun
	n      int
	health int
}

// remoteRun is what the server knows and saw of one run.
type remoteRun struct {
	ID       string
	Scenario string
	Header   http.Header
	Body     map[string]any
	// Streams counts event stream connections; LastEventIDs are the Last-Event-ID headers.
	Streams      int
	LastEventIDs []string
	Polls        int
	Stops        int
	StopHeader   http.Header
	// done is closed when the run should end (drop: the second stream; slow: a stop).
	done     chan struct{}
	doneOnce sync.Once
}

func (r *remoteRun) finish() { r.doneOnce.Do(func() { close(r.done) }) }

func newRunServer(t *testing.T) *runServer {
	s := &runServer{runs: map[string]*remoteRun{}, byIdem: map[string]*remoteRun{}, health: http.StatusOK}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// base returns the base URL of a scenario.
func (s *runServer) base(scenario string) string { return s.URL + "/s/" + scenario }

// byRun returns the remote run created for a keel run id.
func (s *runServer) byRun(runID string) *remoteRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byIdem[runID]
}

func (s *runServer) snapshot(runID string) remoteRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.byIdem[runID]
	if r == nil {
		return remoteRun{}
	}
	return remoteRun{ID: r.ID, Scenario: r.Scenario, Header: r.Header, Body: r.Body, Streams: r.Streams,
		LastEventIDs: append([]string(nil), r.LastEventIDs...), Polls: r.Polls, Stops: r.Stops, StopHeader: r.StopHeader}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *runServer) serve(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/s/")
	if !ok {
		http.NotFound(w, r)
		return
	}
	scenario, path, _ := strings.Cut(rest, "/")
	path = "/" + path
	if path == "/health" {
		w.WriteHeader(s.health)
		return
	}
	if r.Header.Get("Authorization") != "Bearer remote-key" {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "bad key"})
		return
	}
	if path == "/v1/runs" && r.Method == http.MethodPost {
		s.create(w, r, scenario)
		return
	}
	id, sub, _ := strings.Cut(strings.TrimPrefix(path, "/v1/runs/"), "/")
	s.mu.Lock()
	run := s.runs[id]
	s.mu.Unlock()
	if run == nil {
		http.NotFound(w, r)
		return
	}
	switch {
	case sub == "events" && r.Method == http.MethodGet:
		s.events(w, r, run)
	case sub == "" && r.Method == http.MethodGet:
		s.status(w, run)
	case sub == "stop" && r.Method == http.MethodPost:
		s.mu.Lock()
		run.Stops++
		run.StopHeader = r.Header.Clone()
		s.mu.Unlock()
		run.finish()
		writeJSON(w, http.StatusOK, map[string]any{"run_id": run.ID, "status": "stopping"})
	default:
		http.NotFound(w, r)
	}
}

func (s *runServer) create(w http.ResponseWriter, r *http.Request, scenario string) {
	if code, ok := strings.CutPrefix(scenario, "http-"); ok {
		var n int
		fmt.Sscan(code, &n)
		if n == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "30")
		}
		writeJSON(w, n, map[string]any{"error": "refused with " + code})
		return
	}
	if scenario == "slow" {
		select {
		case <-time.After(1500 * time.Millisecond):
		case <-r.Context().Done():
			return
		}
	}
	b, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(b, &body)
	s.mu.Lock()
	if prev := s.byIdem[r.Header.Get("Idempotency-Key")]; prev != nil {
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{"run_id": prev.ID, "status": "running"})
		return
	}
	s.n++
	run := &remoteRun{ID: fmt.Sprintf("rr-%d", s.n), Scenario: scenario, Header: r.Header.Clone(), Body: body, done: make(chan struct{})}
	s.runs[run.ID] = run
	s.byIdem[r.Header.Get("Idempotency-Key")] = run
	s.mu.Unlock()
	if scenario == "noid" {
		writeJSON(w, http.StatusAccepted, map[string]any{"status": "queued"})
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"run_id": run.ID, "status": "queued"})
}

// sessionOf is the session the run continues: the body's session_id, else a new one.
func sessionOf(run *remoteRun) string {
	if s, _ := run.Body["session_id"].(string); s != "" && !strings.HasPrefix(s, "service:") {
		return s
	}
	return "sess-" + run.ID
}

func completed(run *remoteRun) map[string]any {
	return map[string]any{"event": "run.completed", "run_id": run.ID, "output": "All done.", "session_id": sessionOf(run),
		"model": "hermes-4-405b", "usage": map[string]any{"input_tokens": 1200, "output_tokens": 80, "cached_input_tokens": 300},
		"cost_usd": 0.0125}
}

func (s *runServer) events(w http.ResponseWriter, r *http.Request, run *remoteRun) {
	s.mu.Lock()
	run.Streams++
	n := run.Streams
	run.LastEventIDs = append(run.LastEventIDs, r.Header.Get("Last-Event-ID"))
	s.mu.Unlock()
	if run.Scenario == "poll" {
		http.Error(w, "no streams here", http.StatusServiceUnavailable)
		return
	}
	fl := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	send := func(id string, name string, data any) {
		b, _ := json.Marshal(data)
		if id != "" {
			fmt.Fprintf(w, "id: %s\n", id)
		}
		if name != "" {
			fmt.Fprintf(w, "event: %s\n", name)
		}
		fmt.Fprintf(w, "data: %s\n\n", b)
		fl.Flush()
	}
	fmt.Fprint(w, ": connected\n\n")
	switch sc := run.Scenario; {
	case sc == "ok":
		send("1", "", map[string]any{"event": "run.started", "run_id": run.ID})
		send("2", "message.delta", map[string]any{"delta": "Hello "})
		send("3", "", map[string]any{"type": "message.delta", "text_delta": "world."})
		send("4", "", completed(run))
	case sc == "drop":
		if n == 1 {
			send("1", "", map[string]any{"event": "message.delta", "delta": "part one, "})
			return // the stream drops mid-run
		}
		run.finish()
		send("2", "", map[string]any{"event": "message.delta", "delta": "part two."})
		send("3", "", completed(run))
	case sc == "slow":
		for {
			select {
			case <-r.Context().Done():
				return
			case <-run.done:
				send("", "", map[string]any{"event": "run.stopped", "run_id": run.ID})
				return
			case <-time.After(200 * time.Millisecond):
				fmt.Fprint(w, ": keepalive\n\n")
				fl.Flush()
			}
		}
	case strings.HasPrefix(sc, "status-"):
		st := strings.TrimPrefix(sc, "status-")
		send("1", "", map[string]any{"event": "run.status", "status": strings.ToUpper(st), "error": "remote said " + st,
			"usage": map[string]any{"inputTokens": 10, "outputTokens": 2}})
	}
}

func (s *runServer) status(w http.ResponseWriter, run *remoteRun) {
	s.mu.Lock()
	run.Polls++
	polls := run.Polls
	s.mu.Unlock()
	st := map[string]any{"run_id": run.ID, "status": "running"}
	switch run.Scenario {
	case "poll":
		if polls >= 3 {
			st = completed(run)
			st["status"] = "completed"
			delete(st, "event")
		}
	case "slow":
		select {
		case <-run.done:
			st["status"] = "stopped"
		default:
		}
	}
	writeJSON(w, http.StatusOK, st)
}
