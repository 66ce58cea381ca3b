package zetagateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/keelhq/keel/adapters/internal/gateway"
	"github.com/keelhq/keel/adapters/internal/procrun"
	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/adapter"
)

// Bounds of the remote calls.
const (
	// createTimeout bounds POST /v1/runs.
	createTimeout = 60 * time.Second
	// pollTimeout bounds one status poll.
	pollTimeout = 15 * time.Second
	// stopTimeout bounds POST …/stop.
	stopTimeout = 10 * time.Second
	// finalWait and finalPollEvery are how long and how often a stopped run is polled for
	// its final status.
	finalWait      = 10 * time.Second
	finalPollEvery = 500 * time.Millisecond
	// summaryChars bounds the summary taken from the run's output.
	summaryChars = 2000
	// maxFrameBytes bounds one server-sent event; a larger one is dropped.
	maxFrameBytes = 4 << 20
	// maxBodyBytes bounds a JSON answer.
	maxBodyBytes = 4 << 20
	// provider is the provider the run's usage is reported under.
	provider = "hermes_gateway"
)

var (
	errCancelled = errors.New("run cancelled")
)

// terminalStatuses are the remote run statuses that end a run.
var terminalStatuses = map[string]bool{"completed": true, "failed": true, "error": true, "cancelled": true,
	"canceled": true, "stopped": true, "interrupted": true}

// Execute runs one heartbeat run on the remote server (adapter.Runner). Config problems,
// refused requests and failed remote runs are a failed result, not an error.
func (a *Adapter) Execute(ctx context.Context, req *adapter.ExecuteRequest) (*adapter.ExecuteResult, error) {
	c, err := ParseConfig(req.Config)
	if err != nil {
		var ce *configError
		code := "invalid_config"
		if errors.As(err, &ce) {
			code = ce.Code
		}
		return failed(code, err.Error()), nil
	}
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	a.mu.Lock()
	if _, dup := a.runs[req.RunID]; dup {
		a.mu.Unlock()
		return nil, &sdk.Error{Status: http.StatusConflict, Code: "run_executing", Message: fmt.Sprintf("run %s is already executing", req.RunID)}
	}
	a.runs[req.RunID] = cancel
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(a.runs, req.RunID)
		a.mu.Unlock()
	}()

	ev := procrun.NewEmitter(a.host, a.log, req.RunID, req.CompanyID)
	defer ev.Close()
	key, err := c.APIKey.Resolve(rctx, a.host, req.CompanyID, Key)
	if err != nil || key == "" {
		msg := "zeta_gateway apiKey resolved to an empty value"
		if err != nil {
			msg = "zeta_gateway could not resolve apiKey: " + err.Error()
		}
		ev.LogText("system", "[service] "+msg+"\n")
		return failed("hermes_gateway_api_key_missing", msg), nil
	}
	issueID, _ := req.Context["issueId"].(string)
	if issueID == "" {
		issueID = req.Env["SERVICE_TASK_ID"]
	}
	r := &run{a: a, c: c, req: req, ev: ev, key: key, red: gateway.NewRedactor(key),
		sessionKey: sessionKey(c.SessionKeyStrategy, req.CompanyID, req.AgentID, req.RunID, issueID)}
	return r.execute(rctx), nil
}

// run is one execute call.
type run struct {
	a          *Adapter
	c          *Config
	req        *adapter.ExecuteRequest
	ev         *procrun.Emitter
	key        string
	red        *gateway.Redactor
	sessionKey string
	// remoteID is the remote server's run id.
	remoteID string

	mu          sync.Mutex
	lastEvent   string
	deltas      strings.Builder
	lastEventID string
	// openLine is true while the streamed output does not end with a newline.
	openLine bool
}

// endOutputLine ends the streamed output's line before a log line follows it.
func (r *run) endOutputLine() {
	r.mu.Lock()
	open := r.openLine
	r.openLine = false
	r.mu.Unlock()
	if open {
		r.ev.LogText("stdout", "\n")
	}
}

// logf writes a system line to the run log, credentials redacted.
func (r *run) logf(format string, args ...any) {
	r.endOutputLine()
	r.ev.LogText("system", r.red.Redact(fmt.Sprintf(format, args...))+"\n")
}

// setHeaders sets the generated headers over the config's extra ones: the key, Accept
// (JSON for the create call, the event stream otherwise), the idempotency key and the
// session key.
func (r *run) setHeaders(h http.Header, create bool) {
	for k, v := range r.c.Headers {
		h.Set(k, v)
	}
	h.Set("Authorization", "Bearer "+r.key)
	if create {
		h.Set("Accept", "application/json")
		h.Set("Content-Type", "application/json")
	} else {
		h.Set("Accept", "text/event-stream")
	}
	h.Set("Idempotency-Key", r.req.RunID)
	if r.sessionKey != "" {
		h.Set("X-Hermes-Session-Key", r.sessionKey)
	}
}

func (r *run) runURL(suffix string) string {
	return r.c.BaseURL + "/v1/runs/" + url.PathEscape(r.remoteID) + suffix
}

// savedSession returns the session id the task's last run left under the same strategy,
// for the issue and agent strategies (a run strategy never resumes).
func (r *run) savedSession() string {
	rt := r.req.Runtime
	if rt == nil || len(rt.SessionParams) == 0 || (r.c.SessionKeyStrategy != "issue" && r.c.SessionKeyStrategy != "agent") {
		return ""
	}
	var p struct {
		SessionID string `json:"hermesSessionId"`
		Strategy  string `json:"strategy"`
	}
	if json.Unmarshal(rt.SessionParams, &p) != nil || p.Strategy != r.c.SessionKeyStrategy {
		return ""
	}
	return p.SessionID
}

func (r *run) execute(ctx context.Context) *adapter.ExecuteResult {
	c := r.c
	if c.DashboardMapped {
		r.logf("[service] the dashboard URL was mapped to the API base %s", c.BaseURL)
	}
	if c.PlainHTTP && !c.Loopback {
		r.logf("[service] warning: plain HTTP to a non-loopback host (dangerouslyAllowInsecureRemoteHttp)")
	}
	if len(c.IgnoredHeaders) > 0 {
		r.logf("[service] ignored config headers keel generates: %s", strings.Join(c.IgnoredHeaders, ", "))
	}
	body := make(map[string]any, len(c.PayloadTemplate)+3)
	for k, v := range c.PayloadTemplate {
		body[k] = v
	}
	input := gateway.WakeText(r.req.AgentName, r.req.Env, c.ServiceAPIURL, "", r.req.Context)
	if s, _ := c.PayloadTemplate["input"].(string); s != "" {
		input = s + "\n\n" + input
	}
	instructions := c.Instructions
	if instructions == "" {
		instructions, _ = c.PayloadTemplate["instructions"].(string)
	}
	if instructions == "" {
		instructions = "Follow the keel wake instructions exactly. Do not expose secrets in logs, comments, or final output."
	}
	body["input"], body["instructions"] = input, instructions
	if s := r.savedSession(); s != "" {
		body["session_id"] = s
		r.logf("[service] resuming session %s", s)
	} else if r.sessionKey != "" {
		body["session_id"] = r.sessionKey
	}
	payload, err := json.Marshal(body)
	if err != nil {
		return failed("hermes_gateway_protocol_error", fmt.Sprintf("error encoding the run request: %v", err))
	}
	r.logf("[service] POST %s/v1/runs (session strategy %s)", c.BaseURL, c.SessionKeyStrategy)
	cctx, cancel := context.WithTimeout(ctx, createTimeout)
	status, answer, hdr, err := r.do(cctx, http.MethodPost, c.BaseURL+"/v1/runs", payload, true)
	cancel()
	if err != nil {
		if res := r.interrupted(ctx); res != nil {
			return res
		}
		msg := fmt.Sprintf("zeta_gateway could not reach %s: %v", c.BaseURL, err)
		r.logf("[service] %s", msg)
		return failed("hermes_gateway_connect_failed", r.red.Redact(msg))
	}
	if status < 200 || status > 299 {
		code, msg := classifyHTTP(status, hdr, answer)
		r.logf("[service] %s", msg)
		return failed(code, r.red.Redact(msg))
	}
	created := decodeObject(answer)
	for _, k := range []string{"run_id", "runId", "id"} {
		if s := str(created[k]); s != "" {
			r.remoteID = s
			break
		}
	}
	if r.remoteID == "" {
		msg := "zeta_gateway: the run server's answer to POST /v1/runs has no run_id"
		r.logf("[service] %s: %s", msg, excerpt(answer))
		return failed("hermes_gateway_protocol_error", msg)
	}
	r.logf("[service] remote run %s started", r.remoteID)
	return r.follow(ctx)
}

// follow waits for the remote run's end: the event stream and the status polls race to a
// terminal status, bounded by the timeout and cancellation.
func (r *run) follow(ctx context.Context) *adapter.ExecuteResult {
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	final := make(chan map[string]any, 2)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); r.stream(fctx, final) }()
	go func() { defer wg.Done(); r.poll(fctx, final) }()
	defer wg.Wait()
	var timeout <-chan time.Time
	if r.c.Timeout > 0 {
		t := time.NewTimer(r.c.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case obj := <-final:
		stop()
		return r.result(obj)
	case <-timeout:
		stop()
		return r.timedOut()
	case <-ctx.Done():
		stop()
		return r.interrupted(ctx)
	}
}

// interrupted is the result of a cancelled run (the remote run is stopped), or nil when ctx
// is not done.
func (r *run) interrupted(ctx context.Context) *adapter.ExecuteResult {
	if ctx.Err() == nil {
		return nil
	}
	if r.remoteID != "" {
		r.stopRemote()
	}
	r.logf("[service] run cancelled")
	return &adapter.ExecuteResult{Status: adapter.StatusCancelled, ErrorCode: "cancelled", ErrorMessage: "Run cancelled",
		Summary: r.summary("")}
}

// stopRemote asks the server to stop the remote run.
func (r *run) stopRemote() {
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	r.logf("[service] POST %s", r.runURL("/stop"))
	status, answer, _, err := r.do(ctx, http.MethodPost, r.runURL("/stop"), nil, false)
	switch {
	case err != nil:
		r.logf("[service] stopping remote run %s failed: %v", r.remoteID, err)
	case status < 200 || status > 299:
		r.logf("[service] stopping remote run %s answered HTTP %d: %s", r.remoteID, status, excerpt(answer))
	}
}

// timedOut stops the remote run, polls it for a final status for a while, and reports
// the timeout.
func (r *run) timedOut() *adapter.ExecuteResult {
	r.logf("[service] timed out after %s; stopping remote run %s", r.c.Timeout, r.remoteID)
	r.stopRemote()
	finalStatus := ""
	deadline := time.Now().Add(finalWait)
	for time.Now().Before(deadline) {
		if obj, ok := r.pollOnce(context.Background()); ok {
			if s := statusOf(obj, ""); s != "" {
				finalStatus = s
				if terminalStatuses[s] {
					break
				}
			}
		}
		time.Sleep(finalPollEvery)
	}
	r.mu.Lock()
	last := r.lastEvent
	r.mu.Unlock()
	resJSON, _ := json.Marshal(map[string]any{"run_id": r.remoteID, "status": "timed_out", "last_event": nilIfEmpty(last),
		"final_status": nilIfEmpty(finalStatus)})
	params, _ := json.Marshal(map[string]any{"hermesRunId": r.remoteID, "strategy": r.c.SessionKeyStrategy})
	one := 1
	return &adapter.ExecuteResult{Status: adapter.StatusTimedOut, TimedOut: true, ExitCode: &one, ErrorCode: "hermes_gateway_timeout",
		ErrorMessage: fmt.Sprintf("Timed out after %ds", int(r.c.Timeout.Seconds())), ResultJSON: resJSON, SessionParams: params,
		Summary: r.summary("")}
}

// stream follows the run's event stream until a terminal event or ctx ends, reconnecting
// after eventReconnectMs when the stream fails or ends early.
func (r *run) stream(ctx context.Context, final chan<- map[string]any) {
	for attempt := 1; ; attempt++ {
		obj, err := r.streamOnce(ctx)
		if obj != nil {
			final <- obj
			return
		}
		if ctx.Err() != nil {
			return
		}
		r.logf("[service] event stream of run %s %v; reconnecting in %s", r.remoteID, err, r.c.Reconnect)
		select {
		case <-ctx.Done():
			return
		case <-time.After(r.c.Reconnect):
		}
	}
}

// streamOnce reads one connection of the event stream. It returns the terminal event's
// data, or the reason the connection ended without one.
func (r *run) streamOnce(ctx context.Context) (map[string]any, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.runURL("/events"), nil)
	if err != nil {
		return nil, err
	}
	r.setHeaders(req.Header, false)
	r.mu.Lock()
	if r.lastEventID != "" {
		req.Header.Set("Last-Event-ID", r.lastEventID)
	}
	r.mu.Unlock()
	res, err := r.a.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("failed: %v", err)
	}
	defer res.Body.Close()
	if res.StatusCode < 200 || res.StatusCode > 299 {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
		return nil, fmt.Errorf("answered HTTP %d: %s", res.StatusCode, excerpt(b))
	}
	rd := bufio.NewReader(res.Body)
	var name, id string
	var data []string
	size := 0
	for {
		line, err := rd.ReadString('\n')
		if err != nil && line == "" {
			if errors.Is(err, io.EOF) {
				return nil, errors.New("ended before the run did")
			}
			return nil, fmt.Errorf("broke: %v", err)
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			if len(data) > 0 && size <= maxFrameBytes {
				if id != "" {
					r.mu.Lock()
					r.lastEventID = id
					r.mu.Unlock()
				}
				if obj := r.onEvent(name, strings.Join(data, "\n")); obj != nil {
					return obj, nil
				}
			}
			name, id, data, size = "", "", nil, 0
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			name = value
		case "data":
			size += len(value)
			if size <= maxFrameBytes {
				data = append(data, value)
			}
		case "id":
			id = value
		}
	}
}

// onEvent handles one event: a message.delta is appended to the output, others are logged,
// and a terminal status returns the event's data.
// Deltas go to the stdout stream; every other event is a system line.
func (r *run) onEvent(sseName, data string) map[string]any {
	obj := decodeObject([]byte(data))
	if obj == nil {
		obj = map[string]any{"text": data}
	}
	name := str(obj["event"])
	if name == "" {
		name = str(obj["type"])
	}
	if name == "" {
		name = sseName
	}
	r.mu.Lock()
	r.lastEvent = name
	r.mu.Unlock()
	if name != "message.delta" {
		b, _ := json.Marshal(obj)
		r.logf("[hermes-gateway:event] run=%s event=%s data=%s", r.remoteID, name, b)
	} else {
		delta := str(obj["delta"])
		if delta == "" {
			delta = str(obj["text_delta"])
		}
		if delta != "" {
			r.mu.Lock()
			r.deltas.WriteString(delta)
			r.openLine = !strings.HasSuffix(delta, "\n")
			r.mu.Unlock()
			r.ev.LogText("stdout", r.red.Redact(delta))
		}
	}
	if s := statusOf(obj, name); terminalStatuses[s] {
		obj["status"] = s
		return obj
	}
	return nil
}

// poll asks for the run's status every pollIntervalMs until it is terminal or ctx ends.
func (r *run) poll(ctx context.Context, final chan<- map[string]any) {
	t := time.NewTicker(r.c.PollEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if obj, ok := r.pollOnce(ctx); ok && terminalStatuses[statusOf(obj, "")] {
			obj["status"] = statusOf(obj, "")
			final <- obj
			return
		}
	}
}

// pollOnce reads GET /v1/runs/{id}; ok is false when it could not.
func (r *run) pollOnce(ctx context.Context) (map[string]any, bool) {
	ctx, cancel := context.WithTimeout(ctx, pollTimeout)
	defer cancel()
	status, answer, _, err := r.do(ctx, http.MethodGet, r.runURL(""), nil, false)
	if err != nil || status < 200 || status > 299 {
		return nil, false
	}
	obj := decodeObject(answer)
	return obj, obj != nil
}

// do sends one request with the generated headers and reads the answer.
func (r *run) do(ctx context.Context, method, u string, body []byte, create bool) (int, []byte, http.Header, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, nil, nil, err
	}
	r.setHeaders(req.Header, create)
	res, err := r.a.client.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, maxBodyBytes))
	if err != nil {
		return 0, nil, nil, err
	}
	return res.StatusCode, b, res.Header, nil
}

// result maps a terminal status object to the run's result (REFERENCE-adapters.md 8).
func (r *run) result(obj map[string]any) *adapter.ExecuteResult {
	status := statusOf(obj, "")
	output := pick(obj, "output", "result", "text", "summary", "message")
	r.mu.Lock()
	last := r.lastEvent
	r.mu.Unlock()
	res := &adapter.ExecuteResult{Provider: provider, Summary: r.summary(output)}
	u := usageObject(obj)
	if u != nil {
		res.Usage = &adapter.Usage{
			InputTokens:       num(u, "input_tokens", "inputTokens", "input"),
			OutputTokens:      num(u, "output_tokens", "outputTokens", "output"),
			CachedInputTokens: num(u, "cached_input_tokens", "cachedInputTokens"),
		}
	}
	var cost *float64
	for _, src := range []map[string]any{obj, u, nested(obj)} {
		if cost != nil || src == nil {
			continue
		}
		for _, k := range []string{"cost_usd", "costUsd"} {
			if f, ok := src[k].(float64); ok && f >= 0 {
				cost = &f
				break
			}
		}
	}
	res.CostUSD = cost
	res.Model = str(obj["model"])
	if res.Model == "" && u != nil {
		res.Model = str(u["model"])
	}
	if res.Model == "" {
		res.Model = str(nested(obj)["model"])
	}
	serverSession := str(obj["session_id"])
	if serverSession == "" {
		serverSession = str(obj["sessionId"])
	}
	if serverSession == "" {
		serverSession = str(nested(obj)["session_id"])
	}
	res.SessionID = serverSession
	if res.SessionID == "" {
		res.SessionID = r.sessionKey
	}
	params := map[string]any{"hermesRunId": r.remoteID, "strategy": r.c.SessionKeyStrategy}
	if res.SessionID != "" {
		params["hermesSessionId"] = res.SessionID
	}
	res.SessionParams, _ = json.Marshal(params)
	var usage any
	if u != nil {
		usage = u
	}
	res.ResultJSON, _ = json.Marshal(map[string]any{"run_id": r.remoteID, "status": status, "session_id": nilIfEmpty(res.SessionID),
		"last_event": nilIfEmpty(last), "output": nilIfEmpty(r.red.Redact(output)), "usage": usage, "cost_usd": cost})
	zero, one := 0, 1
	errMsg := func() string {
		if m := pick(obj, "error", "message", "detail", "output"); m != "" {
			return r.red.Redact(m)
		}
		return "Hermes run " + status
	}
	switch status {
	case "completed":
		res.Status, res.ExitCode = adapter.StatusSucceeded, &zero
	case "failed", "error":
		res.Status, res.ExitCode, res.ErrorCode, res.ErrorMessage = adapter.StatusFailed, &one, "hermes_gateway_run_failed", errMsg()
	case "cancelled", "canceled", "stopped", "interrupted":
		res.Status, res.ExitCode, res.Signal, res.ErrorCode, res.ErrorMessage = adapter.StatusFailed, &one, "SIGTERM", "hermes_gateway_cancelled", errMsg()
	default:
		res.Status, res.ExitCode, res.ErrorCode, res.ErrorMessage = adapter.StatusFailed, &one, "hermes_gateway_protocol_error", errMsg()
	}
	r.logf("[service] remote run %s ended: %s", r.remoteID, status)
	return res
}

// summary is the run's output (at most summaryChars), else the streamed deltas.
func (r *run) summary(output string) string {
	if output == "" {
		r.mu.Lock()
		output = r.deltas.String()
		r.mu.Unlock()
	}
	output = r.red.Redact(strings.TrimSpace(output))
	if rs := []rune(output); len(rs) > summaryChars {
		output = string(rs[:summaryChars])
	}
	return output
}

// classifyHTTP maps a refused request to its error code and message.
func classifyHTTP(status int, h http.Header, body []byte) (string, string) {
	msg := fmt.Sprintf("zeta_gateway: the run server answered HTTP %d", status)
	if e := excerpt(body); e != "" {
		msg += ": " + e
	}
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return "hermes_gateway_auth_failed", msg + ". Check adapterConfig.apiKey matches the Hermes API_SERVER_KEY of the run server."
	case status == http.StatusNotFound:
		return "hermes_gateway_runs_unsupported", msg + ". The server does not offer the /v1/runs API."
	case status == http.StatusTooManyRequests:
		if ra := h.Get("Retry-After"); ra != "" {
			msg += " (retry after " + ra + ")"
		}
		return "hermes_gateway_rate_limited", msg
	case status >= 500:
		return "hermes_gateway_upstream_error", msg
	}
	return "hermes_gateway_protocol_error", msg
}

func failed(code, msg string) *adapter.ExecuteResult {
	one := 1
	return &adapter.ExecuteResult{Status: adapter.StatusFailed, ExitCode: &one, ErrorCode: code, ErrorMessage: msg}
}

// statusOf is an event's or status answer's status, lowercased: data.status, else the
// suffix of a run.* event name.
func statusOf(obj map[string]any, name string) string {
	s := strings.ToLower(strings.TrimSpace(str(obj["status"])))
	if s == "" {
		s = strings.ToLower(strings.TrimSpace(str(nested(obj)["status"])))
	}
	if s == "" && strings.HasPrefix(name, "run.") {
		s = strings.TrimPrefix(name, "run.")
	}
	return s
}

// nested is the object's data or payload object, if any.
func nested(obj map[string]any) map[string]any {
	for _, k := range []string{"data", "payload"} {
		if m, ok := obj[k].(map[string]any); ok {
			return m
		}
	}
	return nil
}

// pick returns the first text among keys, at the top level or nested (an error object's
// message counts).
func pick(obj map[string]any, keys ...string) string {
	for _, src := range []map[string]any{obj, nested(obj)} {
		for _, k := range keys {
			switch v := src[k].(type) {
			case string:
				if v != "" {
					return v
				}
			case map[string]any:
				if m := str(v["message"]); m != "" {
					return m
				}
			}
		}
	}
	return ""
}

// usageObject is the usage object, or the object itself when it carries token counts.
func usageObject(obj map[string]any) map[string]any {
	for _, src := range []map[string]any{obj, nested(obj)} {
		if u, ok := src["usage"].(map[string]any); ok {
			return u
		}
	}
	for _, src := range []map[string]any{obj, nested(obj)} {
		for _, k := range []string{"input_tokens", "inputTokens", "output_tokens", "outputTokens"} {
			if _, ok := src[k].(float64); ok {
				return src
			}
		}
	}
	return nil
}

func num(m map[string]any, keys ...string) int64 {
	for _, k := range keys {
		if f, ok := m[k].(float64); ok && f >= 0 {
			return int64(f)
		}
	}
	return 0
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func decodeObject(b []byte) map[string]any {
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	return m
}

func excerpt(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
