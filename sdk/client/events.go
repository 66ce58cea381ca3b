package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

var epEvents = endpoint("GET", "/api/companies/{companyId}/events", nil, nil)

// ActivityEntry is one entry of a company's activity log.
type ActivityEntry struct {
	Raw
	ID         string          `json:"id"`
	CompanyID  *string         `json:"companyId"`
	ActorType  string          `json:"actorType"`
	ActorID    string          `json:"actorId"`
	Action     string          `json:"action"`
	EntityType string          `json:"entityType"`
	EntityID   string          `json:"entityId"`
	AgentID    *string         `json:"agentId"`
	RunID      *string         `json:"runId"`
	Details    json.RawMessage `json:"details"`
	CreatedAt  time.Time       `json:"createdAt"`
}

// EventFilter narrows a company event stream; empty fields match everything.
type EventFilter struct {
	EntityType, EntityID, AgentID, Action string
	// After resumes the stream after this entry id instead of at the time of the call.
	After string
}

// Events calls fn with each activity entry of a company as it is written, in order, until
// ctx ends or fn returns an error. A dropped connection is reopened after the last entry
// received, so no entry is missed or repeated; an error answer (4xx, 5xx) ends the stream.
func (c *Client) Events(ctx context.Context, companyID string, f EventFilter, fn func(*ActivityEntry) error) error {
	last := f.After
	backoff := time.Second
	for {
		err := c.eventStream(ctx, companyID, f, last, func(e *ActivityEntry) error {
			last = e.ID
			backoff = time.Second
			return fn(e)
		})
		var apiErr *Error
		var stop *handlerError
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.As(err, &apiErr):
			return apiErr
		case errors.As(err, &stop):
			return stop.err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// handlerError carries an error returned by the caller's function, which ends Events.
type handlerError struct{ err error }

func (e *handlerError) Error() string { return e.err.Error() }

// eventStream reads one connection of the stream until it ends.
func (c *Client) eventStream(ctx context.Context, companyID string, f EventFilter, after string, fn func(*ActivityEntry) error) error {
	q := url.Values{}
	for k, v := range map[string]string{"entityType": f.EntityType, "entityId": f.EntityID, "agentId": f.AgentID, "action": f.Action} {
		if v != "" {
			q.Set(k, v)
		}
	}
	u := c.BaseURL + epEvents.path(companyID)
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
	if err != nil {
		return fmt.Errorf("error building the event stream request: %w", err)
	}
	req.Header.Set("Accept", "text/event-stream")
	if after != "" {
		req.Header.Set("Last-Event-ID", after)
	}
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
		return fmt.Errorf("error opening the event stream: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode >= 400 {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
		e := &Error{Status: res.StatusCode, Body: b}
		var eb struct {
			Error string `json:"error"`
			Code  string `json:"code"`
		}
		if json.Unmarshal(b, &eb) == nil {
			e.Message, e.Code = eb.Error, eb.Code
		}
		return e
	}
	return readEvents(res.Body, fn)
}

// readEvents parses server-sent events whose data is an activity entry.
func readEvents(r io.Reader, fn func(*ActivityEntry) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var data strings.Builder
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "data:"):
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		case line == "" && data.Len() > 0:
			e := &ActivityEntry{}
			b := []byte(data.String())
			data.Reset()
			if err := json.Unmarshal(b, e); err != nil {
				return fmt.Errorf("error decoding an event: %w", err)
			}
			e.setRaw(b)
			if err := fn(e); err != nil {
				return &handlerError{err}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("error reading the event stream: %w", err)
	}
	return io.ErrUnexpectedEOF
}
