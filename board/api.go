package board

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/keelhq/keel/kernel"
)

// apiClient calls keel's own API in-process, as the visitor: each call is a request through
// the host's Fiber handler (the same route table, actor resolution and permission checks as
// a request off the wire) carrying only the visitor's session cookie. No socket, no second
// HTTP parse of the response on the wire; what the visitor may not do, the board may not
// do for them.
type apiClient struct {
	// handler returns the app's handler; it is taken once, on the first call, after the
	// host has mounted every route (fiber's Handler rebuilds the route tree each time).
	handler func() fasthttp.RequestHandler
}

// apiLoopback is the remote address of in-process API calls.
var apiLoopback = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}

// apiError is a non-2xx answer of the API: its status and the message of its error body,
// with the body's validation details when it has them.
type apiError struct {
	Status  int
	Message string
	Details []apiErrorDetail
}

// apiErrorDetail is one entry of a validation error's details.
type apiErrorDetail struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

func (e *apiError) Error() string { return fmt.Sprintf("API answered %d: %s", e.Status, e.Message) }

// rawAnswer receives a 2xx answer's content type and body undecoded (extension UI fragments).
type rawAnswer struct {
	ContentType string
	Body        []byte
}

// visitor is the credentials and host of the request being served, read once so calls can
// run in parallel.
type visitor struct {
	session   string
	host      string
	requestID string
}

func visitorOf(c *fiber.Ctx) *visitor {
	return &visitor{session: strings.Clone(c.Cookies(kernel.SessionCookie)), host: string(c.Request().Host()),
		requestID: strings.Clone(c.Get("X-Request-Id"))}
}

// call sends one request as the visitor of c and decodes a 2xx JSON answer into out (which
// may be nil; a *rawAnswer receives the body undecoded). A non-2xx answer is an *apiError.
func (a *apiClient) call(c *fiber.Ctx, method, path string, query url.Values, body, out any) error {
	_, err := a.do(visitorOf(c), method, path, query, body, out)
	return err
}

// callAs is call for a visitor read before (safe to use from several goroutines).
func (a *apiClient) callAs(v *visitor, method, path string, query url.Values, body, out any) error {
	_, err := a.do(v, method, path, query, body, out)
	return err
}

// callSettingCookies is call that also copies the answer's Set-Cookie headers (sign-in,
// sign-out) to the visitor's response.
func (a *apiClient) callSettingCookies(c *fiber.Ctx, method, path string, body, out any) error {
	cookies, err := a.do(visitorOf(c), method, path, nil, body, out)
	for _, v := range cookies {
		c.Response().Header.Add(fiber.HeaderSetCookie, v)
	}
	return err
}

func (a *apiClient) do(v *visitor, method, path string, query url.Values, body, out any) ([]string, error) {
	var fctx fasthttp.RequestCtx
	fctx.Init(&fasthttp.Request{}, apiLoopback, nil)
	req := &fctx.Request
	req.Header.SetMethod(method)
	uri := path
	if len(query) > 0 {
		uri += "?" + query.Encode()
	}
	req.SetRequestURI(uri)
	req.Header.SetHost(v.host)
	if v.session != "" {
		req.Header.SetCookie(kernel.SessionCookie, v.session)
	}
	if v.requestID != "" {
		req.Header.Set("X-Request-Id", v.requestID)
	}
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("error encoding the body of %s %s: %w", method, path, err)
		}
		req.Header.SetContentType(fiber.MIMEApplicationJSON)
		req.SetBody(b)
	}
	a.handler()(&fctx)
	status := fctx.Response.StatusCode()
	resp := fctx.Response.Body()
	if status < 200 || status > 299 {
		var e struct {
			Error   string           `json:"error"`
			Details []apiErrorDetail `json:"details"`
		}
		_ = json.Unmarshal(resp, &e)
		if e.Error == "" {
			e.Error = fasthttp.StatusMessage(status)
		}
		return nil, &apiError{Status: status, Message: e.Error, Details: e.Details}
	}
	var cookies []string
	for _, c := range fctx.Response.Header.PeekAll(fiber.HeaderSetCookie) {
		cookies = append(cookies, string(c))
	}
	if raw, ok := out.(*rawAnswer); ok {
		raw.ContentType, raw.Body = string(fctx.Response.Header.ContentType()), bytes.Clone(resp)
		return cookies, nil
	}
	if out == nil || len(bytes.TrimSpace(resp)) == 0 {
		return cookies, nil
	}
	if err := json.Unmarshal(resp, out); err != nil {
		return cookies, fmt.Errorf("error decoding the answer of %s %s: %w", method, path, err)
	}
	return cookies, nil
}

// refusalWithDetails is refusalText followed by the fields a validation error names
// ("Validation error (name: must be 1 to 120 characters)"), so a refused form says what to
// fix.
func refusalWithDetails(ae *apiError) string {
	s := refusalText(ae)
	if d := detailText(ae, ": "); d != "" {
		s += " (" + d + ")"
	}
	return s
}

// apiText is the API's message with the fields a validation error names ("Validation
// error: reportsTo must be a UUID").
func apiText(ae *apiError) string {
	if d := detailText(ae, " "); d != "" {
		return ae.Message + ": " + d
	}
	return ae.Message
}

// detailText joins a validation error's details as path, sep and message each.
func detailText(ae *apiError, sep string) string {
	parts := make([]string, 0, len(ae.Details))
	for _, d := range ae.Details {
		switch {
		case d.Message == "":
		case d.Path != "":
			parts = append(parts, d.Path+sep+d.Message)
		default:
			parts = append(parts, d.Message)
		}
	}
	return strings.Join(parts, "; ")
}
