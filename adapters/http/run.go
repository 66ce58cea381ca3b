package httpadapter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/adapter"
)

// excerptBytes bounds the response body kept in the result.
const excerptBytes = 64 << 10

// deliverTimeout bounds the agents.runEvents call.
const deliverTimeout = 10 * time.Second

var (
	errCancelled = errors.New("run cancelled")
	errTimedOut  = errors.New("run timed out")
)

// Execute sends the run's request (adapter.Runner). Config problems, transport errors and
// non-2xx answers are a failed result, not an error, so the engine records them on the run.
func (a *Adapter) Execute(ctx context.Context, req *adapter.ExecuteRequest) (*adapter.ExecuteResult, error) {
	c, err := ParseConfig(req.Config)
	if err != nil {
		return &adapter.ExecuteResult{Status: adapter.StatusFailed, ErrorMessage: err.Error(), ErrorCode: "invalid_config"}, nil
	}
	body := make(map[string]any, len(c.PayloadTemplate)+3)
	for k, v := range c.PayloadTemplate {
		body[k] = v
	}
	runCtx := req.Context
	if runCtx == nil {
		runCtx = map[string]any{}
	}
	body["agentId"], body["runId"], body["context"] = req.AgentID, req.RunID, runCtx
	payload, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("error encoding the request body: %w", err)
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
	if d := c.timeout(); d > 0 {
		t := time.AfterFunc(d, func() { cancel(errTimedOut) })
		defer t.Stop()
	}

	summary := "HTTP " + c.Method + " " + c.URL
	var events []adapter.RunEvent
	logf := func(format string, args ...any) {
		events = append(events, adapter.RunEvent{Seq: int64(len(events) + 1), Kind: "log", Stream: "system",
			Text: fmt.Sprintf(format, args...) + "\n", At: time.Now().UTC()})
	}
	defer func() { a.deliver(req, events) }()
	logf("%s", summary)

	hreq, err := http.NewRequestWithContext(rctx, c.Method, c.URL, bytes.NewReader(payload))
	if err != nil {
		return &adapter.ExecuteResult{Status: adapter.StatusFailed, ErrorMessage: fmt.Sprintf("HTTP invoke failed: %v", err), ErrorCode: "invalid_config"}, nil
	}
	hreq.Header.Set("Content-Type", "application/json")
	for k, v := range c.Headers {
		hreq.Header.Set(k, v)
	}
	res, err := a.client.Do(hreq)
	var status int
	var excerpt []byte
	if err == nil {
		status = res.StatusCode
		excerpt, err = io.ReadAll(io.LimitReader(res.Body, excerptBytes))
		res.Body.Close()
	}
	if err != nil {
		switch cause := context.Cause(rctx); {
		case errors.Is(cause, errTimedOut):
			logf("timed out after %s", c.timeout())
			return &adapter.ExecuteResult{Status: adapter.StatusTimedOut, TimedOut: true, ErrorCode: "timeout",
				ErrorMessage: fmt.Sprintf("Timed out after %dms", c.timeout().Milliseconds()), Summary: summary}, nil
		case cause != nil:
			logf("cancelled")
			return &adapter.ExecuteResult{Status: adapter.StatusCancelled, ErrorCode: "cancelled", ErrorMessage: "Run cancelled", Summary: summary}, nil
		}
		logf("request failed: %v", err)
		return &adapter.ExecuteResult{Status: adapter.StatusFailed, ErrorCode: "request_failed",
			ErrorMessage: fmt.Sprintf("HTTP invoke failed: %v", err), Summary: summary}, nil
	}
	logf("answered %d", status)
	result := map[string]any{"status": status}
	if json.Valid(excerpt) && len(excerpt) > 0 {
		result["body"] = json.RawMessage(excerpt)
	} else {
		result["body"] = string(excerpt)
	}
	out := &adapter.ExecuteResult{Summary: summary}
	out.ResultJSON, _ = json.Marshal(result)
	if status < 200 || status > 299 {
		out.Status, out.ErrorMessage, out.ErrorCode = adapter.StatusFailed, fmt.Sprintf("HTTP invoke failed with status %d", status), "http_status"
		return out, nil
	}
	zero := 0
	out.Status, out.ExitCode = adapter.StatusSucceeded, &zero
	// A JSON answer may report the run's usage, cost and session (adapter.Report fields).
	if body, ok := result["body"].(json.RawMessage); ok && len(body) > 0 && body[0] == '{' {
		if r, err := adapter.ParseReport(body); err == nil {
			r.Apply(out)
		} else {
			logf("ignoring the run report in the answer: %v", err)
		}
	}
	return out, nil
}

// deliver streams the run's log lines with agents.runEvents. Failures are logged and never
// fail the run; a host without agents.runEvents is no listener.
func (a *Adapter) deliver(req *adapter.ExecuteRequest, events []adapter.RunEvent) {
	if a.host == nil || len(events) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), deliverTimeout)
	defer cancel()
	err := a.host.Call(ctx, adapter.RunEventsMethod, sdk.SystemActor(), req.CompanyID,
		&adapter.RunEventsRequest{RunID: req.RunID, Events: events}, nil)
	if err != nil && !sdk.IsMethodNotProvided(err) {
		a.log.Warn("error delivering run events", "run", req.RunID, "error", err)
	}
}
