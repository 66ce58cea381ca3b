package supervisor

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/keelhq/keel/kernel"
	"github.com/keelhq/keel/sdk"
	extensionv1 "github.com/keelhq/keel/sdk/proto/extension/v1"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

// environmentsPrefix is the prefix of the reserved host methods with which the
// environments owner reaches the environment drivers extensions declare.
const environmentsPrefix = "keel.environments."

// environmentDrivers returns the drivers the loaded extensions declare, by driver key, with
// the extension that declares each (the first by key when two declare the same driver).
func (s *Supervisor) environmentDrivers() map[string]*managed {
	s.mu.RLock()
	list := make([]*managed, 0, len(s.exts))
	for _, m := range s.exts {
		if len(m.src.Manifest.EnvironmentDrivers) > 0 && !m.quiet.Load() {
			list = append(list, m)
		}
	}
	s.mu.RUnlock()
	sort.Slice(list, func(i, j int) bool { return list[i].key < list[j].key })
	out := map[string]*managed{}
	for _, m := range list {
		for _, d := range m.src.Manifest.EnvironmentDrivers {
			if out[d.Driver] == nil {
				out[d.Driver] = m
			}
		}
	}
	return out
}

// invokeEnvironments answers sdk.EnvironmentDriversMethod and sdk.EnvironmentDriverCallMethod
// for any caller whose uses name them (the calls service checked that): the first lists the
// declared drivers, the second sends one reserved contract method (sdk.Env*Method) to the
// extension that declares the driver, as the host.
func (s *Supervisor) invokeEnvironments(ctx context.Context, req *hostv1.InvokeRequest) *hostv1.InvokeResponse {
	fail := func(status int, code, msg string) *hostv1.InvokeResponse {
		return &hostv1.InvokeResponse{Error: &extensionv1.Error{Status: int32(status), Code: code, Message: msg, Source: "downstream"}}
	}
	drivers := s.environmentDrivers()
	switch req.Method {
	case sdk.EnvironmentDriversMethod:
		out := &sdk.EnvironmentDriverList{Drivers: []sdk.EnvironmentDriverInfo{}}
		for key, m := range drivers {
			for _, d := range m.src.Manifest.EnvironmentDrivers {
				if d.Driver == key {
					out.Drivers = append(out.Drivers, sdk.EnvironmentDriverInfo{EnvironmentDriverDecl: d, Extension: m.key})
				}
			}
		}
		sort.Slice(out.Drivers, func(i, j int) bool { return out.Drivers[i].Driver < out.Drivers[j].Driver })
		b, err := json.Marshal(out)
		if err != nil {
			return fail(http.StatusInternalServerError, "", err.Error())
		}
		return &hostv1.InvokeResponse{OutputJson: b}
	case sdk.EnvironmentDriverCallMethod:
		var in sdk.EnvironmentDriverCall
		if err := json.Unmarshal(req.InputJson, &in); err != nil || in.Driver == "" || !sdk.IsEnvironmentMethod(in.Method) {
			return fail(http.StatusBadRequest, "", "driver and a keel.environment.* method are required")
		}
		m := drivers[in.Driver]
		if m == nil {
			return fail(http.StatusNotImplemented, "method_not_provided", fmt.Sprintf("no loaded extension declares environment driver %s", in.Driver))
		}
		m = m.enter()
		defer m.release()
		client, apiErr := s.clientFor(ctx, m)
		if apiErr != nil {
			return fail(apiErr.Status, apiErr.Code, apiErr.Message)
		}
		defer s.k.ReadCache.Invalidate(req.CompanyId)
		start := time.Now()
		res, err := client.Call(ctx, &extensionv1.CallRequest{Method: in.Method, InputJson: in.Input, Actor: req.Actor, Caller: "host", CompanyId: req.CompanyId})
		s.cfg.Metrics.ObserveHop(m.key, "call", time.Since(start), err)
		if err != nil {
			apiErr := kernel.AsAPIError(s.callError(m, err))
			return fail(apiErr.Status, apiErr.Code, apiErr.Message)
		}
		return &hostv1.InvokeResponse{OutputJson: res.OutputJson, Error: res.Error}
	}
	return fail(http.StatusNotImplemented, "method_not_provided", fmt.Sprintf("no loaded extension provides %s", req.Method))
}
