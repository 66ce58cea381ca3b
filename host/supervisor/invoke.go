package supervisor

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keelhq/keel/kernel"
	extensionv1 "github.com/keelhq/keel/sdk/proto/extension/v1"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

// resolveMethod finds the extension that provides a qualified method ("owner.method"),
// trying the longest owner key first since keys may contain dots.
func (s *Supervisor) resolveMethod(qualified string) (*managed, string) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var best *managed
	var method string
	for key, m := range s.exts {
		if strings.HasPrefix(qualified, key+".") && (best == nil || len(key) > len(best.key)) {
			name := qualified[len(key)+1:]
			if m.src.Manifest.ProvidesMethod(name) {
				best, method = m, name
			}
		}
	}
	return best, method
}

// Invoke routes a call to the extension that provides the method. The caller's uses were
// checked by the host service; the kernel (caller "kernel") may call any provided method.
// An unknown method, or an owner that is not loaded, is an error in the response, not a
// transport failure, so callers can tell "not installed" from "down".
func (s *Supervisor) Invoke(ctx context.Context, caller string, req *hostv1.InvokeRequest) (*hostv1.InvokeResponse, error) {
	m, method := s.resolveMethod(req.Method)
	if m == nil {
		return &hostv1.InvokeResponse{Error: &extensionv1.Error{Status: http.StatusNotImplemented, Code: "method_not_provided",
			Message: fmt.Sprintf("no loaded extension provides %s", req.Method), Source: "downstream"}}, nil
	}
	if err := s.callerMayCall(caller, m, method); err != nil {
		return &hostv1.InvokeResponse{Error: err}, nil
	}
	m.inflight.Add(1)
	defer m.release()
	client, apiErr := s.clientFor(ctx, m)
	if apiErr != nil {
		return &hostv1.InvokeResponse{Error: &extensionv1.Error{Status: int32(apiErr.Status), Code: apiErr.Code,
			Message: apiErr.Message, Source: "downstream"}}, nil
	}
	res, err := client.Call(ctx, &extensionv1.CallRequest{Method: method, InputJson: req.InputJson, Actor: req.Actor, Caller: caller, CompanyId: req.CompanyId})
	if err != nil {
		apiErr := kernel.AsAPIError(s.callError(m, err))
		if st, ok := status.FromError(err); ok && st.Code() == codes.Unimplemented {
			apiErr = &kernel.APIError{Status: http.StatusNotImplemented, Message: st.Message(), Code: "method_not_provided"}
		}
		return &hostv1.InvokeResponse{Error: &extensionv1.Error{Status: int32(apiErr.Status), Code: apiErr.Code, Message: apiErr.Message, Source: "downstream"}}, nil
	}
	return &hostv1.InvokeResponse{OutputJson: res.OutputJson, Error: res.Error}, nil
}

// callerMayCall checks the capabilities a provided method requires of its caller. Every path
// into a method (an extension's Calls, a wasm host function, a host service forwarding for
// an extension) comes through Invoke, so a method that hands out secrets cannot be reached
// by an extension that lacks the secrets capability, whatever its uses say. The kernel may
// call anything.
func (s *Supervisor) callerMayCall(caller string, owner *managed, method string) *extensionv1.Error {
	required := owner.src.Manifest.MethodRequires(method)
	if len(required) == 0 || caller == "kernel" {
		return nil
	}
	s.mu.RLock()
	c := s.exts[caller]
	s.mu.RUnlock()
	for _, capability := range required {
		if c == nil || !c.src.Manifest.HasCapability(capability) {
			return &extensionv1.Error{Status: http.StatusForbidden, Code: "capability_required", Source: "plugin",
				Message: fmt.Sprintf("%s.%s requires the %s capability, which %s does not declare", owner.key, method, capability, caller)}
		}
	}
	return nil
}
