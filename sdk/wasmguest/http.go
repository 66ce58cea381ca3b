package wasmguest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
)

type ctxKey int

const (
	actorKey ctxKey = iota
	companyKey
	paramsKey
	patternKey
	requestIDKey
)

// ActorFrom returns the actor the kernel resolved for the request or call (never nil).
func ActorFrom(ctx context.Context) *Actor {
	if a, ok := ctx.Value(actorKey).(*Actor); ok && a != nil {
		return a
	}
	return &Actor{Type: "none"}
}

// CompanyIDFrom returns the company the kernel resolved and authorized for the route.
func CompanyIDFrom(ctx context.Context) string {
	s, _ := ctx.Value(companyKey).(string)
	return s
}

// ParamFrom returns a path parameter of the matched manifest route.
func ParamFrom(ctx context.Context, name string) string {
	m, _ := ctx.Value(paramsKey).(map[string]string)
	return m[name]
}

// PatternFrom returns the manifest route that matched, such as
// "GET /api/companies/{companyId}/wasm-counter".
func PatternFrom(ctx context.Context) string {
	s, _ := ctx.Value(patternKey).(string)
	return s
}

// RequestIDFrom returns the kernel's id of the request, for logs.
func RequestIDFrom(ctx context.Context) string {
	s, _ := ctx.Value(requestIDKey).(string)
	return s
}

// WithRequestInfo returns ctx carrying what the kernel resolved for a request; the adapter
// uses it, and tests of handlers can too.
func WithRequestInfo(ctx context.Context, actor *Actor, companyID, pattern string, params map[string]string) context.Context {
	ctx = context.WithValue(ctx, actorKey, actor)
	ctx = context.WithValue(ctx, companyKey, companyID)
	ctx = context.WithValue(ctx, patternKey, pattern)
	return context.WithValue(ctx, paramsKey, params)
}

// serveHTTP runs one wire request through an ordinary http.Handler and encodes the wire
// response.
func serveHTTP(ctx context.Context, h http.Handler, req *httpRequest) []byte {
	ctx = WithRequestInfo(ctx, req.Actor, req.CompanyID, req.Pattern, req.Params)
	if req.RequestID != "" {
		ctx = context.WithValue(ctx, requestIDKey, req.RequestID)
	}
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	// Built directly rather than with http.NewRequest: parsing the URL back costs more than
	// the rest of the request inside wasm.
	u := &url.URL{Path: req.Path, RawQuery: req.RawQuery}
	r := &http.Request{
		Method: method, URL: u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: make(http.Header, len(req.Headers)), Body: http.NoBody, ContentLength: int64(len(req.Body)),
		RequestURI: u.RequestURI(), RemoteAddr: "wasm",
	}
	if len(req.Body) > 0 {
		r.Body = io.NopCloser(bytes.NewReader(req.Body))
	}
	for k, v := range req.Headers {
		r.Header[http.CanonicalHeaderKey(k)] = v
	}
	r.Host = r.Header.Get("Host")
	r = r.WithContext(ctx)
	for k, v := range req.Params {
		r.SetPathValue(k, v)
	}
	w := newRecorder()
	h.ServeHTTP(w, r)
	return w.encode()
}

// recorder is the http.ResponseWriter handed to handlers: it keeps the status, headers and
// body for the wire response.
type recorder struct {
	header      http.Header
	status      int
	wroteHeader bool
	body        bytes.Buffer
}

func newRecorder() *recorder { return &recorder{header: http.Header{}} }

// Header returns the response headers.
func (w *recorder) Header() http.Header { return w.header }

// WriteHeader records the status; later calls are ignored, as net/http does.
func (w *recorder) WriteHeader(status int) {
	if w.wroteHeader || status < 200 {
		return
	}
	w.status, w.wroteHeader = status, true
}

// Write appends to the body, sniffing the content type on the first write as net/http does.
func (w *recorder) Write(b []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.body.Len() == 0 && len(b) > 0 && w.header.Get("Content-Type") == "" {
		w.header.Set("Content-Type", http.DetectContentType(b))
	}
	return w.body.Write(b)
}

// Flush does nothing: the response is sent when the handler returns.
func (w *recorder) Flush() {}

func (w *recorder) encode() []byte {
	status := w.status
	if !w.wroteHeader {
		status = http.StatusOK
	}
	e := encoder{b: make([]byte, 1, 64+w.body.Len())} // byte 0 is the envelope status
	encodeHTTPResponse(&e, status, w.header, w.body.Bytes())
	return e.b
}

// WriteJSON writes v as a JSON response with the status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// WriteError writes the API error body {"error": message}.
func WriteError(w http.ResponseWriter, status int, message string) {
	WriteJSON(w, status, map[string]string{"error": message})
}

// WriteErr writes err as an API error: an *Error keeps its status, code and details;
// anything else is a 500 whose text is not leaked.
func WriteErr(w http.ResponseWriter, err error) {
	e, ok := err.(*Error)
	if !ok {
		WriteError(w, http.StatusInternalServerError, "Internal server error")
		return
	}
	body := map[string]any{"error": e.Message}
	if e.Code != "" {
		body["code"] = e.Code
	}
	if e.Details != nil {
		body["details"] = e.Details
	}
	status := e.Status
	if status == 0 {
		status = http.StatusInternalServerError
	}
	WriteJSON(w, status, body)
}
