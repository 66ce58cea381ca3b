package supervisor

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keelhq/keel/kernel"
	"github.com/keelhq/keel/sdk"
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
	if strings.HasPrefix(req.Method, adapterRegistryPrefix) {
		return s.invokeAdapterRegistry(ctx, req), nil
	}
	if strings.HasPrefix(req.Method, environmentsPrefix) {
		return s.invokeEnvironments(ctx, req), nil
	}
	if strings.HasPrefix(req.Method, managedCallPrefix) {
		return s.invokeManaged(ctx, caller, req), nil
	}
	m, method := s.resolveMethod(req.Method)
	if m == nil {
		return &hostv1.InvokeResponse{Error: &extensionv1.Error{Status: http.StatusNotImplemented, Code: "method_not_provided",
			Message: fmt.Sprintf("no loaded extension provides %s", req.Method), Source: "downstream"}}, nil
	}
	if err := s.callerMayCall(caller, m, method); err != nil {
		return &hostv1.InvokeResponse{Error: err}, nil
	}
	m = m.enter()
	defer m.release()
	client, apiErr := s.clientFor(ctx, m)
	if apiErr != nil {
		return &hostv1.InvokeResponse{Error: &extensionv1.Error{Status: int32(apiErr.Status), Code: apiErr.Code,
			Message: apiErr.Message, Source: "downstream"}}, nil
	}
	// The method may write: the company's cached reads (every company's when the call
	// names none) are forgotten before the caller learns the outcome, unless its manifest
	// declares it read-only.
	if !m.src.Manifest.MethodReadOnly(method) {
		defer s.k.ReadCache.Invalidate(req.CompanyId)
	}
	start := time.Now()
	res, err := client.Call(ctx, &extensionv1.CallRequest{Method: method, InputJson: req.InputJson, Actor: req.Actor, Caller: caller, CompanyId: req.CompanyId})
	s.cfg.Metrics.ObserveHop(m.key, "call", time.Since(start), err)
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

// RunStatus answers the kernel's run checks through agents.runStatus. With no loaded
// extension providing it there are no runs to check against, and the answer is nil.
func (s *Supervisor) RunStatus(ctx context.Context, runID string) (*kernel.RunState, error) {
	if m, _ := s.resolveMethod("agents.runStatus"); m == nil {
		return nil, nil
	}
	in, err := json.Marshal(map[string]string{"runId": runID})
	if err != nil {
		return nil, fmt.Errorf("error encoding run status input: %w", err)
	}
	res, err := s.Invoke(ctx, "kernel", &hostv1.InvokeRequest{Method: "agents.runStatus", InputJson: in, Actor: sdk.SystemActor()})
	if err != nil {
		return nil, fmt.Errorf("error reading run %s: %w", runID, err)
	}
	if res.Error != nil {
		if res.Error.Status >= 400 && res.Error.Status < 500 {
			return &kernel.RunState{}, nil // a malformed id is no run
		}
		return nil, fmt.Errorf("error reading run %s: %s", runID, res.Error.Message)
	}
	var out struct {
		Found   bool   `json:"found"`
		Status  string `json:"status"`
		AgentID string `json:"agentId"`
	}
	if err := json.Unmarshal(res.OutputJson, &out); err != nil {
		return nil, fmt.Errorf("error decoding run %s: %w", runID, err)
	}
	return &kernel.RunState{Found: out.Found, Status: out.Status, AgentID: out.AgentID}, nil
}

var _ kernel.RunDirectory = (*Supervisor)(nil)
