package kernel

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// APIError is an error meant for the API client: the text, status, code and details are
// written as the JSON body {"error", "code"?, "details"?}. The wrapped internal error, if
// any, is logged and never sent.
type APIError struct {
	Status  int
	Message string
	Code    string
	Details any
	// Internal is the cause kept for the log.
	Internal error
}

// Error returns the client message, with the internal cause when there is one.
func (e *APIError) Error() string {
	if e.Internal != nil {
		return fmt.Sprintf("%s: %v", e.Message, e.Internal)
	}
	return e.Message
}

// Unwrap returns the internal cause.
func (e *APIError) Unwrap() error { return e.Internal }

// MarshalJSON writes the client-facing body.
func (e *APIError) MarshalJSON() ([]byte, error) {
	body := struct {
		Error   string `json:"error"`
		Code    string `json:"code,omitempty"`
		Details any    `json:"details,omitempty"`
	}{e.Message, e.Code, e.Details}
	return json.Marshal(body)
}

// WithCode returns a copy of e with the given machine-readable code.
func (e *APIError) WithCode(code string) *APIError {
	c := *e
	c.Code = code
	return &c
}

// WithDetails returns a copy of e with the given details.
func (e *APIError) WithDetails(details any) *APIError {
	c := *e
	c.Details = details
	return &c
}

// NewAPIError returns an APIError with the given status and client message.
func NewAPIError(status int, message string) *APIError {
	return &APIError{Status: status, Message: message}
}

// BadRequest returns a 400 error.
func BadRequest(message string) *APIError { return NewAPIError(http.StatusBadRequest, message) }

// Unauthorized returns a 401 error.
func Unauthorized(message string) *APIError { return NewAPIError(http.StatusUnauthorized, message) }

// Forbidden returns a 403 error.
func Forbidden(message string) *APIError { return NewAPIError(http.StatusForbidden, message) }

// NotFound returns a 404 error.
func NotFound(message string) *APIError { return NewAPIError(http.StatusNotFound, message) }

// Conflict returns a 409 error.
func Conflict(message string) *APIError { return NewAPIError(http.StatusConflict, message) }

// Unprocessable returns a 422 error.
func Unprocessable(message string) *APIError {
	return NewAPIError(http.StatusUnprocessableEntity, message)
}

// ValidationError returns the 400 "Validation error" with one detail per failed field.
func ValidationError(details ...ValidationDetail) *APIError {
	return &APIError{Status: http.StatusBadRequest, Message: "Validation error", Details: details}
}

// ValidationDetail names one field that failed validation and why.
type ValidationDetail struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// Internal wraps an unexpected failure as a 500 whose cause is logged, not sent.
func Internal(err error) *APIError {
	return &APIError{Status: http.StatusInternalServerError, Message: "Internal server error", Internal: err}
}

// AsAPIError converts any error into an APIError, treating unknown errors as internal.
func AsAPIError(err error) *APIError {
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		return apiErr
	}
	return Internal(err)
}

// ReadOnlyMember is the refusal of a write by a member whose role may only read (viewer).
func ReadOnlyMember() *APIError {
	return Forbidden("Viewers cannot change anything in this company").WithCode("read_only_member")
}
