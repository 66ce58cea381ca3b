package thetagateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"
)

// maxPayloadBytes bounds one gateway frame (25 MiB, as the reference client).
const maxPayloadBytes = 25 << 20

// frame is one JSON text frame of the gateway protocol: a request, a response or an event.
type frame struct {
	Type    string          `json:"type"`
	ID      string          `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  any             `json:"params,omitempty"`
	OK      *bool           `json:"ok,omitempty"`
	Payload json.RawMessage `json:"payload,omitempty"`
	Error   *gatewayError   `json:"error,omitempty"`
	Event   string          `json:"event,omitempty"`
}

// gatewayError is a failed response's error; it is also the error a request returns.
type gatewayError struct {
	Code    string          `json:"code,omitempty"`
	Message string          `json:"message,omitempty"`
	Details json.RawMessage `json:"details,omitempty"`
}

func (e *gatewayError) Error() string {
	if e.Code != "" {
		return e.Code + ": " + e.Message
	}
	return e.Message
}

// timeoutError is a request the gateway did not answer in time.
type timeoutError struct {
	method string
	after  time.Duration
}

func (e *timeoutError) Error() string {
	return fmt.Sprintf("gateway request %s timeout after %s", e.method, e.after)
}

// wsClient is one WebSocket connection to the gateway: requests matched to responses by
// id, events handed to onEvent from the read loop.
type wsClient struct {
	conn    *websocket.Conn
	onEvent func(*frame)

	mu      sync.Mutex
	pending map[string]chan *frame
	readErr error
	closed  chan struct{}
}

// dialGateway opens the connection (bounded by timeout) and starts its read loop, which
// lasts until ctx ends or the connection closes.
func dialGateway(ctx context.Context, url string, headers http.Header, timeout time.Duration, onEvent func(*frame)) (*wsClient, error) {
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, res, err := websocket.Dial(dctx, url, &websocket.DialOptions{HTTPHeader: headers})
	if err != nil {
		if res != nil && res.StatusCode != http.StatusSwitchingProtocols {
			return nil, fmt.Errorf("gateway refused the WebSocket handshake with HTTP %d", res.StatusCode)
		}
		if dctx.Err() != nil && ctx.Err() == nil {
			return nil, &timeoutError{method: "connect", after: timeout}
		}
		return nil, err
	}
	conn.SetReadLimit(maxPayloadBytes)
	c := &wsClient{conn: conn, onEvent: onEvent, pending: map[string]chan *frame{}, closed: make(chan struct{})}
	go c.readLoop(ctx)
	return c, nil
}

func (c *wsClient) readLoop(ctx context.Context) {
	var err error
	defer func() {
		c.mu.Lock()
		c.readErr = err
		c.mu.Unlock()
		close(c.closed)
	}()
	for {
		var b []byte
		_, b, err = c.conn.Read(ctx)
		if err != nil {
			return
		}
		var f frame
		if json.Unmarshal(b, &f) != nil {
			continue
		}
		switch f.Type {
		case "res":
			c.mu.Lock()
			ch := c.pending[f.ID]
			delete(c.pending, f.ID)
			c.mu.Unlock()
			if ch != nil {
				ch <- &f
			}
		case "event":
			if c.onEvent != nil {
				c.onEvent(&f)
			}
		}
	}
}

// connErr is why the connection ended.
func (c *wsClient) connErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.readErr == nil {
		return errors.New("gateway connection closed")
	}
	return fmt.Errorf("gateway connection closed: %w", c.readErr)
}

// request sends a request and waits up to timeout for its response; a failed response is a
// *gatewayError, no answer in time a *timeoutError.
func (c *wsClient) request(ctx context.Context, method string, params any, timeout time.Duration) (json.RawMessage, error) {
	id := uuid.NewString()
	ch := make(chan *frame, 1)
	c.mu.Lock()
	c.pending[id] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}()
	b, err := json.Marshal(&frame{Type: "req", ID: id, Method: method, Params: params})
	if err != nil {
		return nil, fmt.Errorf("error encoding gateway request %s: %w", method, err)
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := c.conn.Write(wctx, websocket.MessageText, b); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("error sending gateway request %s: %w", method, err)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case f := <-ch:
		if f.OK == nil || !*f.OK {
			if f.Error == nil {
				return nil, &gatewayError{Message: "gateway request " + method + " failed"}
			}
			return nil, f.Error
		}
		return f.Payload, nil
	case <-t.C:
		return nil, &timeoutError{method: method, after: timeout}
	case <-c.closed:
		return nil, c.connErr()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// close ends the connection with a normal closure.
func (c *wsClient) close(reason string) {
	_ = c.conn.Close(websocket.StatusNormalClosure, reason)
}

// transient reports whether a failure before dispatch is worth retrying: refused or reset
// connections, a connection that hung up, and timeouts.
func transient(err error) bool {
	var te *timeoutError
	if errors.As(err, &te) {
		return te.method != "agent.wait"
	}
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	s := strings.ToLower(err.Error())
	return strings.Contains(s, "connection refused") || strings.Contains(s, "connection reset") ||
		strings.Contains(s, "eof") || strings.Contains(s, "hang up")
}
