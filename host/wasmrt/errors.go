package wasmrt

import (
	"errors"
	"fmt"
	"net/http"
)

// Sentinels wrapped by *CallError; test with errors.Is.
var (
	// ErrMemoryLimit means a call needed more linear memory than Limits.MemoryMB allows.
	ErrMemoryLimit = errors.New("wasm memory limit exceeded")
	// ErrTimeLimit means a call ran longer than Limits.TimeoutMS.
	ErrTimeLimit = errors.New("wasm time limit exceeded")
	// ErrTrap means the module trapped, exited, or broke the ABI.
	ErrTrap = errors.New("wasm trap")
)

// CallError is the error of a call whose instance ran out of memory, ran out of time or
// trapped. The instance was closed and discarded; the module keeps serving. It implements
// the supervisor's LimitError (HTTPStatus, Code) so a route answers with a clear error.
type CallError struct {
	// Key is the extension key.
	Key string
	// Op is the operation that failed, such as Handle.
	Op string
	// Kind is ErrMemoryLimit, ErrTimeLimit or ErrTrap.
	Kind error
	// Limit is the limit that was broken, in MB for memory and ms for time.
	Limit int
	// Detail says what happened, for traps.
	Detail string
	// Cause is the error wazero returned, if any.
	Cause error
}

// Error says which limit the extension broke, or how it failed.
func (e *CallError) Error() string {
	switch e.Kind {
	case ErrMemoryLimit:
		return fmt.Sprintf("wasm extension %s exceeded its memory limit of %dMB", e.Key, e.Limit)
	case ErrTimeLimit:
		return fmt.Sprintf("wasm extension %s exceeded its time limit of %dms", e.Key, e.Limit)
	default:
		return fmt.Sprintf("wasm extension %s failed in %s: %s", e.Key, e.Op, e.Detail)
	}
}

// Unwrap returns the sentinel and the cause.
func (e *CallError) Unwrap() []error {
	if e.Cause == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Cause}
}

// HTTPStatus is the status a route answers with: 504 for the time limit, 502 otherwise.
func (e *CallError) HTTPStatus() int {
	if e.Kind == ErrTimeLimit {
		return http.StatusGatewayTimeout
	}
	return http.StatusBadGateway
}

// Code is the API error code a route answers with.
func (e *CallError) Code() string {
	switch e.Kind {
	case ErrMemoryLimit:
		return "extension_memory_limit"
	case ErrTimeLimit:
		return "extension_time_limit"
	default:
		return "extension_trap"
	}
}
