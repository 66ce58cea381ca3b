package supervisor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelhq/keel/host/hostsvc"
	"github.com/keelhq/keel/kernel"
	"github.com/keelhq/keel/sdk"
	extensionv1 "github.com/keelhq/keel/sdk/proto/extension/v1"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

// logRingSize is how many recent log lines are kept per extension.
const logRingSize = 1000

// maxLogLine is the longest log line kept whole (bytes); longer ones are cut.
const maxLogLine = 4096

// features holds what the plugin feature routes need per extension on this node: recent
// log lines and the UI stream subscribers. The zero value is ready to use.
type features struct {
	mu      sync.Mutex
	logs    map[string]*logRing
	streams map[streamKey]map[*streamSub]struct{}
	// listening is closed once this node LISTENs for stream messages from every node.
	listening chan struct{}
}

// streamNotifyChannel is the PostgreSQL notification channel that carries stream messages
// between nodes: an extension on one node emits, UI clients on every node receive.
const streamNotifyChannel = "keel_plugin_stream"

// streamMaxMessage bounds one stream message (PostgreSQL notifications carry under 8000 bytes).
const streamMaxMessage = 7000

// streamNote is one stream message as it crosses nodes.
type streamNote struct {
	Ext     string          `json:"e"`
	Channel string          `json:"c"`
	Company string          `json:"o"`
	Message json.RawMessage `json:"m"`
}

type streamKey struct{ ext, channel, company string }

type streamSub struct{ ch chan json.RawMessage }

// logRing keeps an extension's most recent log lines.
type logRing struct {
	mu    sync.Mutex
	lines []kernel.PluginLogLine
	next  int
	full  bool
	// partial is the line being written (stderr arrives in pieces).
	partial []byte
}

func (r *logRing) add(l kernel.PluginLogLine) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lines == nil {
		r.lines = make([]kernel.PluginLogLine, logRingSize)
	}
	r.lines[r.next] = l
	r.next = (r.next + 1) % logRingSize
	if r.next == 0 {
		r.full = true
	}
}

func (r *logRing) snapshot() []kernel.PluginLogLine {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.full {
		return append([]kernel.PluginLogLine(nil), r.lines[:r.next]...)
	}
	out := make([]kernel.PluginLogLine, 0, logRingSize)
	out = append(out, r.lines[r.next:]...)
	return append(out, r.lines[:r.next]...)
}

// Write takes an extension's stderr: whole lines are parsed (hclog JSON, or plain text with
// an optional [LEVEL] prefix) and kept.
func (r *logRing) Write(p []byte) (int, error) {
	r.mu.Lock()
	r.partial = append(r.partial, p...)
	var lines [][]byte
	for {
		i := bytes.IndexByte(r.partial, '\n')
		if i < 0 {
			break
		}
		lines = append(lines, append([]byte(nil), r.partial[:i]...))
		r.partial = r.partial[i+1:]
	}
	if len(r.partial) > 64<<10 {
		lines = append(lines, r.partial)
		r.partial = nil
	}
	r.mu.Unlock()
	for _, l := range lines {
		if len(bytes.TrimSpace(l)) > 0 {
			r.add(parseLogLine(l))
		}
	}
	return len(p), nil
}

// parseLogLine reads one stderr line: an hclog JSON line keeps its level, message, time and
// fields; any other line is kept as it is, at the level its [LEVEL] prefix names (info
// without one, error for a panic).
func parseLogLine(b []byte) kernel.PluginLogLine {
	if len(b) > maxLogLine {
		// A huge line is kept as text, cut, so the ring's memory stays bounded.
		s := strings.ToValidUTF8(string(b[:maxLogLine]), "")
		return kernel.PluginLogLine{Time: time.Now().UTC(), Level: "info", Message: s, Fields: map[string]any{"truncated": len(b)}}
	}
	var m map[string]any
	if json.Unmarshal(b, &m) == nil && m["@message"] != nil {
		l := kernel.PluginLogLine{Time: time.Now().UTC(), Level: "info", Fields: map[string]any{}}
		for k, v := range m {
			switch k {
			case "@message":
				l.Message = fmt.Sprint(v)
			case "@level":
				l.Level = strings.ToLower(fmt.Sprint(v))
			case "@timestamp":
				if t, err := time.Parse("2006-01-02T15:04:05.000000Z07:00", fmt.Sprint(v)); err == nil {
					l.Time = t.UTC()
				}
			case "@module", "@caller":
			default:
				l.Fields[k] = v
			}
		}
		if len(l.Fields) == 0 {
			l.Fields = nil
		}
		return l
	}
	s := string(b)
	l := kernel.PluginLogLine{Time: time.Now().UTC(), Level: "info", Message: s}
	for _, lv := range []string{"TRACE", "DEBUG", "INFO", "WARN", "ERROR"} {
		if strings.HasPrefix(s, "["+lv+"]") {
			l.Level = strings.ToLower(lv)
			l.Message = strings.TrimSpace(strings.TrimPrefix(s, "["+lv+"]"))
		}
	}
	if strings.HasPrefix(s, "panic: ") || strings.HasPrefix(s, "fatal error: ") {
		l.Level = "error"
	}
	return l
}

// stderrFor returns the writer that keeps an extension's log lines (given to go-plugin as
// the process's stderr copy).
func (s *Supervisor) stderrFor(key string) io.Writer { return s.feat.ring(key) }

func (f *features) ring(key string) *logRing {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.logs == nil {
		f.logs = map[string]*logRing{}
	}
	r := f.logs[key]
	if r == nil {
		r = &logRing{}
		f.logs[key] = r
	}
	return r
}

// PluginLogs implements kernel.PluginRuntime.
func (s *Supervisor) PluginLogs(key string, limit int) []kernel.PluginLogLine {
	lines := s.feat.ring(key).snapshot()
	if limit > 0 && len(lines) > limit {
		lines = lines[len(lines)-limit:]
	}
	return lines
}

// wasmMounts returns the local folders a wasm extension sees on this node.
func (s *Supervisor) wasmMounts(ctx context.Context, m *managed) ([]WasmMount, error) {
	rows, err := s.k.LocalFolderMounts(ctx, m.key, m.src.Manifest)
	if err != nil {
		return nil, err
	}
	out := make([]WasmMount, 0, len(rows))
	for _, r := range rows {
		out = append(out, WasmMount{HostPath: r.RealPath, GuestPath: r.GuestPath, ReadOnly: r.ReadOnly})
	}
	return out, nil
}

// refreshMounts gives a running wasm module the local folders its companies set now.
func (s *Supervisor) refreshMounts(ctx context.Context, m *managed) {
	mod, ok := m.wasmModule().(WasmMounter)
	if !ok || len(m.src.Manifest.LocalFolders) == 0 {
		return
	}
	mounts, err := s.wasmMounts(ctx, m)
	if err != nil {
		s.log.Warn("error reading local folders of a wasm extension", "extension", m.key, "error", err)
		return
	}
	mod.SetMounts(mounts)
}

// RefreshWasmMounts gives every running wasm extension the local folders its companies set
// now (a folder set on another node reaches this one through the registry's notices).
func (s *Supervisor) RefreshWasmMounts(ctx context.Context) {
	s.mu.RLock()
	list := make([]*managed, 0, len(s.exts))
	for _, m := range s.exts {
		if len(m.src.Manifest.LocalFolders) > 0 && m.src.Manifest.Runtime.Kind == sdk.RuntimeWasm {
			list = append(list, m)
		}
	}
	s.mu.RUnlock()
	for _, m := range list {
		s.refreshMounts(ctx, m)
	}
}

// PluginCall implements kernel.PluginRuntime: one reserved Call, as the host, into a loaded
// extension (started first if it is lazy).
func (s *Supervisor) PluginCall(ctx context.Context, key, method string, actor *kernel.Actor, companyID string, input any) (json.RawMessage, error) {
	m := s.get(key)
	if m == nil {
		return nil, (&kernel.APIError{Status: http.StatusServiceUnavailable, Message: fmt.Sprintf("Plugin %s is not loaded on this node", key)}).WithCode("plugin_not_loaded")
	}
	in, err := json.Marshal(input)
	if err != nil {
		return nil, kernel.Internal(fmt.Errorf("error encoding %s input for %s: %w", method, key, err))
	}
	m.inflight.Add(1)
	defer m.release()
	client, apiErr := s.clientFor(ctx, m)
	if apiErr != nil {
		return nil, apiErr
	}
	if method == sdk.LocalFolderMethod {
		// A wasm module sees a company's new folder from its next instance on.
		s.refreshMounts(ctx, m)
	}
	callCtx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	start := time.Now()
	res, err := client.Call(callCtx, &extensionv1.CallRequest{Method: method, InputJson: in, Actor: ProtoActor(actor), Caller: "host", CompanyId: companyID})
	s.cfg.Metrics.ObserveHop(key, "call", time.Since(start), err)
	if err != nil {
		return nil, s.callError(m, err)
	}
	if pe := res.Error; pe != nil {
		st := int(pe.Status)
		if st < 400 || st > 599 || st == http.StatusInternalServerError {
			// The plugin failed: that is a bad gateway, not the caller's fault nor keel's.
			return nil, (&kernel.APIError{Status: http.StatusBadGateway, Message: fmt.Sprintf("Plugin %s failed: %s", key, pe.Message)}).WithCode("plugin_error")
		}
		e := &kernel.APIError{Status: st, Message: pe.Message, Code: pe.Code}
		if len(pe.DetailsJson) > 0 {
			e.Details = json.RawMessage(pe.DetailsJson)
		}
		return nil, e
	}
	return res.OutputJson, nil
}

// PluginTriggerJob implements kernel.PluginRuntime: it queues a run of a declared job.
func (s *Supervisor) PluginTriggerJob(ctx context.Context, key, jobKey string) (int64, error) {
	if s.deps.Enqueuer == nil {
		return 0, (&kernel.APIError{Status: http.StatusServiceUnavailable, Message: "The job queue is not running"}).WithCode("queue_unavailable")
	}
	res, err := s.deps.Enqueuer.Enqueue(ctx, key, &hostv1.EnqueueRequest{JobKey: jobKey})
	if err != nil {
		return 0, fmt.Errorf("error triggering job %s of %s: %w", jobKey, key, err)
	}
	id, err := strconv.ParseInt(res.JobId, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("error triggering job %s of %s: queue job id %q: %w", jobKey, key, res.JobId, err)
	}
	return id, nil
}

// PluginSubscribe implements kernel.PluginRuntime: messages an extension emits on a
// channel for a company on this node. A subscriber that falls behind loses messages rather
// than slowing the extension.
func (s *Supervisor) PluginSubscribe(key, channel, companyID string) (<-chan json.RawMessage, func()) {
	s.listenStreams()
	sub := &streamSub{ch: make(chan json.RawMessage, 64)}
	k := streamKey{key, channel, companyID}
	f := &s.feat
	f.mu.Lock()
	if f.streams == nil {
		f.streams = map[streamKey]map[*streamSub]struct{}{}
	}
	if f.streams[k] == nil {
		f.streams[k] = map[*streamSub]struct{}{}
	}
	f.streams[k][sub] = struct{}{}
	f.mu.Unlock()
	var once sync.Once
	return sub.ch, func() {
		once.Do(func() {
			f.mu.Lock()
			delete(f.streams[k], sub)
			if len(f.streams[k]) == 0 {
				delete(f.streams, k)
			}
			f.mu.Unlock()
		})
	}
}

func (f *features) emit(k streamKey, msg json.RawMessage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for sub := range f.streams[k] {
		select {
		case sub.ch <- msg:
		default:
		}
	}
}

// StreamTap wraps the event publisher: events of type sdk.StreamEventPrefix+channel go to
// the channel's stream subscribers instead of the job queue.
func (s *Supervisor) StreamTap(next hostsvc.Publisher) hostsvc.Publisher {
	return &streamTap{s: s, next: next}
}

type streamTap struct {
	s    *Supervisor
	next hostsvc.Publisher
}

func (t *streamTap) Publish(ctx context.Context, extension string, req *hostv1.PublishRequest) (string, error) {
	channel, ok := strings.CutPrefix(req.Type, sdk.StreamEventPrefix)
	if !ok {
		return t.next.Publish(ctx, extension, req)
	}
	msg := json.RawMessage(req.PayloadJson)
	if len(msg) == 0 {
		msg = json.RawMessage("null")
	}
	if !json.Valid(msg) {
		return "", fmt.Errorf("stream message for %s is not valid JSON", channel)
	}
	note, err := json.Marshal(&streamNote{Ext: extension, Channel: channel, Company: req.CompanyId, Message: msg})
	if err != nil {
		return "", fmt.Errorf("error encoding stream message for %s: %w", channel, err)
	}
	if len(note) > streamMaxMessage {
		return "", fmt.Errorf("stream message for %s is %d bytes, over the %d-byte limit", channel, len(note), streamMaxMessage)
	}
	// Every node listening (this one included) fans it out to its own subscribers.
	if _, err := t.s.k.Pool.Exec(ctx, `SELECT pg_notify($1, $2)`, streamNotifyChannel, string(note)); err != nil {
		return "", fmt.Errorf("error sending stream message for %s: %w", channel, err)
	}
	return "", nil
}

// listenStreams makes sure this node listens for stream messages, on a connection of its
// own, started by the first subscriber; it waits (briefly) until the LISTEN is in place so
// that a subscriber misses nothing emitted after it subscribed.
func (s *Supervisor) listenStreams() {
	f := &s.feat
	f.mu.Lock()
	ready := f.listening
	if ready == nil {
		ready = make(chan struct{})
		f.listening = ready
		s.wg.Add(1)
		go s.streamListener(ready)
	}
	f.mu.Unlock()
	select {
	case <-ready:
	case <-time.After(5 * time.Second):
		s.log.Warn("stream listener is not ready; messages may be missed")
	}
}

// streamListener holds a LISTEN connection until the supervisor stops, reconnecting after
// a failure, and hands every message to this node's subscribers.
func (s *Supervisor) streamListener(ready chan struct{}) {
	defer s.wg.Done()
	var once sync.Once
	for s.ctx.Err() == nil {
		err := s.listenOnce(func() { once.Do(func() { close(ready) }) })
		if s.ctx.Err() != nil {
			return
		}
		s.log.Warn("stream listener failed; reconnecting", "error", err)
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

func (s *Supervisor) listenOnce(listening func()) error {
	conn, err := pgx.ConnectConfig(s.ctx, s.k.Pool.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("error connecting: %w", err)
	}
	defer conn.Close(context.WithoutCancel(s.ctx))
	if _, err := conn.Exec(s.ctx, "LISTEN "+streamNotifyChannel); err != nil {
		return fmt.Errorf("error listening: %w", err)
	}
	listening()
	for {
		n, err := conn.WaitForNotification(s.ctx)
		if err != nil {
			return fmt.Errorf("error waiting for stream messages: %w", err)
		}
		var note streamNote
		if err := json.Unmarshal([]byte(n.Payload), &note); err != nil {
			s.log.Warn("undecodable stream message", "error", err)
			continue
		}
		s.feat.emit(streamKey{note.Ext, note.Channel, note.Company}, note.Message)
	}
}

var _ kernel.PluginRuntime = (*Supervisor)(nil)
