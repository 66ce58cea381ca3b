package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// MethodCaller invokes a method an extension provides ("agents.create"), on behalf of the
// kernel: the kernel owns people and memberships, and asks the owner of everything else.
// The host wires it to the supervisor.
type MethodCaller interface {
	// CallMethod sends input (JSON) to the method for the actor and company and returns the
	// output JSON. A refusal by the owner, or an owner that is not loaded (status 501, code
	// method_not_provided), is an *APIError carrying its status, text and code.
	CallMethod(ctx context.Context, method, companyID string, actor *Actor, input []byte) ([]byte, error)
}

// SetMethodCaller sets who answers the kernel's calls to extension methods.
func (k *Kernel) SetMethodCaller(c MethodCaller) { k.methods = c }

// errNoMethodCaller is returned by callMethod when no host is wired (a bare kernel).
var errNoMethodCaller = errors.New("no extension method caller is wired")

// callMethod calls an extension method with in encoded as JSON and decodes the answer into
// out (when not nil).
func (k *Kernel) callMethod(ctx context.Context, method, companyID string, actor *Actor, in, out any) error {
	if k.methods == nil {
		return errNoMethodCaller
	}
	raw, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("error encoding %s input: %w", method, err)
	}
	res, err := k.methods.CallMethod(ctx, method, companyID, actor, raw)
	if err != nil {
		return err
	}
	if out == nil || len(res) == 0 {
		return nil
	}
	if err := json.Unmarshal(res, out); err != nil {
		return fmt.Errorf("error decoding %s output: %w", method, err)
	}
	return nil
}

// isMethodNotProvided reports whether a callMethod error means no loaded extension
// provides the method.
func isMethodNotProvided(err error) bool {
	var apiErr *APIError
	return errors.As(err, &apiErr) && apiErr.Status == http.StatusNotImplemented && apiErr.Code == "method_not_provided"
}
