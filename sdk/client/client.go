// Package client is a typed Go client of keel's HTTP API for the routes operators and
// scripts use most: companies, agents, issues, heartbeat runs, routines, costs, extensions
// and adapters, and the CLI auth challenge flow. The keel command's client commands are
// built on it; a test checks every route it calls against the host's /api/openapi.json.
//
// Values it returns keep the server's JSON (JSON()), so callers that need a field the
// typed view leaves out still have it.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Client calls one keel instance.
type Client struct {
	// BaseURL is the instance's URL, e.g. http://127.0.0.1:3100.
	BaseURL string
	// Token, when set, is sent as the bearer token (a pcp_board_ key, an agent key or JWT).
	Token string
	// HTTP is the HTTP client (http.DefaultClient when nil).
	HTTP *http.Client
	// UserAgent is sent with every request when set.
	UserAgent string
}

// New returns a client of the instance at baseURL, authenticating with token (may be empty
// on a local_trusted instance).
func New(baseURL, token string) *Client {
	return &Client{BaseURL: strings.TrimRight(baseURL, "/"), Token: token}
}

// Error is an API error answer: its HTTP status and the body's error and code.
type Error struct {
	Status  int
	Message string
	Code    string
	Body    []byte
}

func (e *Error) Error() string {
	msg := e.Message
	if msg == "" {
		msg = strings.TrimSpace(string(e.Body))
	}
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	if e.Code != "" {
		return fmt.Sprintf("%s (%d %s)", msg, e.Status, e.Code)
	}
	return fmt.Sprintf("%s (%d)", msg, e.Status)
}

// IsStatus reports whether err is an API error with the given HTTP status.
func IsStatus(err error, status int) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == status
}

// Endpoint is one API route the client calls, as the OpenAPI document names it.
type Endpoint struct {
	Method string
	// Path is the route template, e.g. /api/agents/{agentId}/pause.
	Path string
	// Request, when set, is a value of the JSON body type the client sends; Response one of
	// the type it decodes. Their JSON fields are checked against the OpenAPI schemas.
	Request, Response any
}

var endpoints []Endpoint

func endpoint(method, path string, request, response any) Endpoint {
	e := Endpoint{Method: method, Path: path, Request: request, Response: response}
	endpoints = append(endpoints, e)
	return e
}

// Endpoints lists every route the client calls.
func Endpoints() []Endpoint { return append([]Endpoint(nil), endpoints...) }

// path fills the route template's {parameters} in order with escaped args.
func (e Endpoint) path(args ...string) string {
	var b strings.Builder
	rest := e.Path
	for _, a := range args {
		i := strings.IndexByte(rest, '{')
		j := strings.IndexByte(rest, '}')
		if i < 0 || j < i {
			break
		}
		b.WriteString(rest[:i])
		b.WriteString(url.PathEscape(a))
		rest = rest[j+1:]
	}
	b.WriteString(rest)
	return b.String()
}

// Raw is embedded in every returned value: the server's JSON for the value.
type Raw struct{ raw json.RawMessage }

// JSON returns the value as the server sent it.
func (r *Raw) JSON() json.RawMessage { return r.raw }

func (r *Raw) setRaw(b json.RawMessage) { r.raw = append(json.RawMessage(nil), b...) }

type rawSetter interface{ setRaw(json.RawMessage) }

// Response is a finished request's status, headers and body.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Do sends a request to path (with query) and a JSON body (nil for none) and returns the
// answer; a status of 400 or more is an *Error.
func (c *Client) Do(ctx context.Context, method, path string, query url.Values, body any) (*Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("error encoding the request to %s %s: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	u := c.BaseURL + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, fmt.Errorf("error building %s %s: %w", method, path, err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	if c.UserAgent != "" {
		req.Header.Set("User-Agent", c.UserAgent)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	res, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("error calling %s %s: %w", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, fmt.Errorf("error reading the answer of %s %s: %w", method, path, err)
	}
	if res.StatusCode >= 400 {
		e := &Error{Status: res.StatusCode, Body: b}
		var eb struct {
			Error string `json:"error"`
			Code  string `json:"code"`
		}
		if json.Unmarshal(b, &eb) == nil {
			e.Message, e.Code = eb.Error, eb.Code
		}
		return nil, e
	}
	return &Response{Status: res.StatusCode, Header: res.Header, Body: b}, nil
}

// call sends a request to an endpoint and decodes the answer into out (a pointer to a
// value embedding Raw, or to a slice of such values), keeping the server's JSON.
func (c *Client) call(ctx context.Context, e Endpoint, args []string, query url.Values, body, out any) error {
	res, err := c.Do(ctx, e.Method, e.path(args...), query, body)
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	return decode(res.Body, out, e)
}

func decode(b []byte, out any, e Endpoint) error {
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("error decoding the answer of %s %s: %w", e.Method, e.Path, err)
	}
	if r, ok := out.(rawSetter); ok {
		r.setRaw(b)
	}
	return nil
}

// List is a list answer: its items, and the server's JSON.
type List[T any] struct {
	Items []T
	raw   json.RawMessage
}

// JSON returns the list as the server sent it.
func (l *List[T]) JSON() json.RawMessage { return l.raw }

func listCall[T any, PT interface {
	*T
	rawSetter
}](ctx context.Context, c *Client, e Endpoint, args []string, query url.Values) (*List[T], error) {
	res, err := c.Do(ctx, e.Method, e.path(args...), query, nil)
	if err != nil {
		return nil, err
	}
	var items []json.RawMessage
	if err := json.Unmarshal(res.Body, &items); err != nil {
		// Some lists are wrapped: {"items": [...]} or {"data": [...]}.
		var wrapped struct {
			Items []json.RawMessage `json:"items"`
			Data  []json.RawMessage `json:"data"`
		}
		if werr := json.Unmarshal(res.Body, &wrapped); werr != nil {
			return nil, fmt.Errorf("error decoding the answer of %s %s: %w", e.Method, e.Path, err)
		}
		items = append(wrapped.Items, wrapped.Data...)
	}
	out := &List[T]{Items: make([]T, len(items)), raw: res.Body}
	for i, it := range items {
		if err := json.Unmarshal(it, &out.Items[i]); err != nil {
			return nil, fmt.Errorf("error decoding the answer of %s %s: %w", e.Method, e.Path, err)
		}
		PT(&out.Items[i]).setRaw(it)
	}
	return out, nil
}
