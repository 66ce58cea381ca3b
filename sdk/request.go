package sdk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"
)

// NewError returns an *Error with an HTTP status and the client message.
func NewError(status int, message string) *Error { return &Error{Status: status, Message: message} }

// NotFound returns a 404 error.
func NotFound(message string) *Error { return NewError(http.StatusNotFound, message) }

// Conflict returns a 409 error.
func Conflict(message string) *Error { return NewError(http.StatusConflict, message) }

// Forbidden returns a 403 error.
func Forbidden(message string) *Error { return NewError(http.StatusForbidden, message) }

// Unprocessable returns a 422 error.
func Unprocessable(message string) *Error { return NewError(http.StatusUnprocessableEntity, message) }

// ValidationDetail names one field that failed validation and why.
type ValidationDetail struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// ValidationError is the 400 "Validation error" with one detail per field.
func ValidationError(details ...ValidationDetail) *Error {
	return &Error{Status: http.StatusBadRequest, Message: "Validation error", Details: details}
}

// Invalid is a ValidationError about one field.
func Invalid(path, message string) *Error {
	return ValidationError(ValidationDetail{Path: path, Message: message})
}

// DecodeJSON decodes a JSON request body into v, ignoring unknown fields as the reference
// product does: bad types and malformed JSON are a 400 Validation error naming the field. An
// empty body decodes as {}.
func DecodeJSON(r *http.Request, v any) error { return decodeJSON(r, v, false) }

// DecodeJSONStrict is DecodeJSON that also refuses unknown fields (400 naming the field), for
// configuration and for routes the spec marks "unknown fields rejected".
func DecodeJSONStrict(r *http.Request, v any) error { return decodeJSON(r, v, true) }

func decodeJSON(r *http.Request, v any, strict bool) error {
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(r.Body); err != nil {
		return Invalid("", "unreadable body")
	}
	body := bytes.TrimSpace(buf.Bytes())
	if len(body) == 0 {
		body = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		var typeErr *json.UnmarshalTypeError
		switch {
		case errors.As(err, &typeErr):
			return Invalid(typeErr.Field, "expected "+typeErr.Type.String())
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			return Invalid(strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`), "unknown field")
		default:
			return Invalid("", "malformed JSON: "+err.Error())
		}
	}
	return nil
}

// Page reads the limit and offset query parameters: limit defaults to def and must be 1 to
// max, offset must be non-negative; anything else is a 400 Validation error.
func Page(r *http.Request, def, max int) (limit, offset int, err error) {
	limit, offset = def, 0
	if s := r.URL.Query().Get("limit"); s != "" {
		n, convErr := strconv.Atoi(s)
		if convErr != nil || n < 1 || n > max {
			return 0, 0, Invalid("limit", fmt.Sprintf("must be an integer from 1 to %d", max))
		}
		limit = n
	}
	if s := r.URL.Query().Get("offset"); s != "" {
		n, convErr := strconv.Atoi(s)
		if convErr != nil || n < 0 {
			return 0, 0, Invalid("offset", "must be a non-negative integer")
		}
		offset = n
	}
	return limit, offset, nil
}

// IsUUID reports whether s is a canonical UUID.
func IsUUID(s string) bool {
	_, err := uuid.Parse(s)
	return err == nil && len(s) == 36
}

// RequireCompanyAccess refuses (403) an actor outside the company of a resource that a
// route found by its own id (CanAccessCompany's rules), and a write route's actor whose role
// in that company only reads (a viewer: code read_only_member).
func RequireCompanyAccess(ctx context.Context, companyID string) error {
	a := ActorFrom(ctx)
	if !CanAccessCompany(a, companyID) {
		return Forbidden("You do not have access to this company")
	}
	if isWritePattern(PatternFrom(ctx)) && slices.Contains(a.ReadOnlyCompanyIds, companyID) {
		return &Error{Status: http.StatusForbidden, Code: "read_only_member", Message: "Viewers cannot change anything in this company"}
	}
	return nil
}

// IsWriteRequest reports whether the request ctx belongs to is an HTTP write (POST, PUT,
// PATCH or DELETE); a provided-method call is not.
func IsWriteRequest(ctx context.Context) bool { return isWritePattern(PatternFrom(ctx)) }

// isWritePattern reports whether a matched route pattern ("POST /api/…") changes state.
func isWritePattern(pattern string) bool {
	method, _, ok := strings.Cut(pattern, " ")
	if !ok {
		return false
	}
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}
