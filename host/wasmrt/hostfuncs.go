package wasmrt

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/go-hclog"
	"github.com/tetratelabs/wazero/api"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/keelhq/keel/host/hostsvc"
	"github.com/keelhq/keel/sdk"
)

// hostHandler serves one host service: in is the encoded request.
type hostHandler func(ctx context.Context, in []byte) (proto.Message, error)

// hostService describes one service id of host_call.
type hostService struct {
	name       string
	capability string
	// bind returns the handler over s, or nil when s does not provide the service.
	bind func(s *hostsvc.Services) hostHandler
}

// hostServices are indexed by service id. The ids never change.
var hostServices = [...]hostService{
	1: {"activity.append", sdk.CapActivity, func(s *hostsvc.Services) hostHandler {
		if s.Activity == nil {
			return nil
		}
		return unary(s.Activity.Append)
	}},
	2: {"authz.check", sdk.CapAuthz, func(s *hostsvc.Services) hostHandler {
		if s.Authz == nil {
			return nil
		}
		return unary(s.Authz.Check)
	}},
	3: {"principals.get_agent", sdk.CapPrincipals, func(s *hostsvc.Services) hostHandler {
		if s.Principals == nil {
			return nil
		}
		return unary(s.Principals.GetAgent)
	}},
	4: {"companies.get", sdk.CapCompanies, func(s *hostsvc.Services) hostHandler {
		if s.Companies == nil {
			return nil
		}
		return unary(s.Companies.Get)
	}},
	5: {"calls.invoke", sdk.CapCalls, func(s *hostsvc.Services) hostHandler {
		if s.Calls == nil {
			return nil
		}
		return unary(s.Calls.Invoke)
	}},
	6: {"events.publish", sdk.CapEvents, func(s *hostsvc.Services) hostHandler {
		if s.Events == nil {
			return nil
		}
		return unary(s.Events.Publish)
	}},
	7: {"settings.get", sdk.CapSettings, func(s *hostsvc.Services) hostHandler {
		if s.Settings == nil {
			return nil
		}
		return unary(s.Settings.Get)
	}},
	8: {"storage.get", sdk.CapStorage, func(s *hostsvc.Services) hostHandler {
		if s.Storage == nil {
			return nil
		}
		return unary(s.Storage.Get)
	}},
	9: {"storage.set", sdk.CapStorage, func(s *hostsvc.Services) hostHandler {
		if s.Storage == nil {
			return nil
		}
		return unary(s.Storage.Set)
	}},
	10: {"storage.delete", sdk.CapStorage, func(s *hostsvc.Services) hostHandler {
		if s.Storage == nil {
			return nil
		}
		return unary(s.Storage.Delete)
	}},
	11: {"jobs.enqueue", sdk.CapJobs, func(s *hostsvc.Services) hostHandler {
		if s.Jobs == nil {
			return nil
		}
		return unary(s.Jobs.Enqueue)
	}},
	12: {"secrets.resolve", sdk.CapSecrets, func(s *hostsvc.Services) hostHandler {
		if s.Secrets == nil {
			return nil
		}
		return unary(s.Secrets.Resolve)
	}},
}

// unary adapts a generated server method to a hostHandler.
func unary[Req any, PReq interface {
	*Req
	proto.Message
}, Resp proto.Message](fn func(context.Context, PReq) (Resp, error)) hostHandler {
	return func(ctx context.Context, in []byte) (proto.Message, error) {
		req := PReq(new(Req))
		if err := proto.Unmarshal(in, req); err != nil {
			return nil, errMalformedRequest{err}
		}
		return fn(ctx, req)
	}
}

type errMalformedRequest struct{ err error }

func (e errMalformedRequest) Error() string { return e.err.Error() }

// hostCalls serves host_call for one extension: the services opened for it, gated by the
// capabilities its manifest declares.
type hostCalls struct {
	key      string
	log      hclog.Logger
	declared [len(hostServices)]bool
	handlers [len(hostServices)]hostHandler
}

func newHostCalls(key string, services *hostsvc.Services, capabilities []string, log hclog.Logger) *hostCalls {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	h := &hostCalls{key: key, log: log}
	caps := map[string]bool{}
	for _, c := range capabilities {
		caps[c] = true
	}
	for id, svc := range hostServices {
		if svc.bind == nil {
			continue
		}
		h.declared[id] = caps[svc.capability]
		if services != nil {
			h.handlers[id] = svc.bind(services)
		}
	}
	// A plugin with managed resources reaches them through calls.invoke (the reserved
	// keel.managed.* calls); the calls service refuses it every other method unless it
	// declares calls too.
	if caps[sdk.CapManaged] {
		h.declared[5] = true
	}
	return h
}

// serve answers one host call with an envelope. It never panics: a panic in a host service
// becomes an Internal error envelope.
func (h *hostCalls) serve(ctx context.Context, id uint32, in []byte) (env []byte) {
	if id == 0 || id >= uint32(len(hostServices)) {
		return codeEnvelope(codes.Unimplemented, fmt.Sprintf("unknown host service %d", id))
	}
	svc := hostServices[id]
	if !h.declared[id] {
		return codeEnvelope(codes.PermissionDenied, fmt.Sprintf("capability %s not declared", svc.capability))
	}
	handler := h.handlers[id]
	if handler == nil {
		return codeEnvelope(codes.PermissionDenied, fmt.Sprintf("capability %s not declared (the host opened no %s service for %s)", svc.capability, svc.capability, h.key))
	}
	defer func() {
		if r := recover(); r != nil {
			h.log.Error("host service panicked", "service", svc.name, "panic", r)
			env = codeEnvelope(codes.Internal, fmt.Sprintf("internal error in %s", svc.name))
		}
	}()
	resp, err := handler(ctx, in)
	if err != nil {
		if m, ok := err.(errMalformedRequest); ok {
			return codeEnvelope(codes.InvalidArgument, fmt.Sprintf("malformed %s request: %v", svc.name, m.err))
		}
		return errorEnvelope(err)
	}
	out, err := proto.MarshalOptions{}.MarshalAppend([]byte{envOK}, resp)
	if err != nil {
		return codeEnvelope(codes.Internal, fmt.Sprintf("error encoding %s response: %v", svc.name, err))
	}
	return out
}

// instantiateHostModule defines import module "keel" in the module's runtime.
func (m *Module) instantiateHostModule(ctx context.Context) error {
	i32, i64 := api.ValueTypeI32, api.ValueTypeI64
	_, err := m.rt.NewHostModuleBuilder("keel").
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(m.hostCall), []api.ValueType{i32, i32, i32}, []api.ValueType{i64}).
		WithParameterNames("service", "ptr", "len").
		Export("host_call").
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(m.hostLog), []api.ValueType{i32, i32, i32}, nil).
		WithParameterNames("level", "ptr", "len").
		Export("log").
		Instantiate(ctx)
	return err
}

// hostCall implements keel.host_call(service, ptr, len) -> (ptr<<32 | len).
func (m *Module) hostCall(ctx context.Context, mod api.Module, stack []uint64) {
	id, ptr, n := api.DecodeU32(stack[0]), api.DecodeU32(stack[1]), api.DecodeU32(stack[2])
	inst := instanceFrom(ctx)
	if inst != nil && inst.inAlloc {
		m.fault(ctx, mod, inst, errors.New("host_call from inside malloc or free"), stack)
		return
	}
	var env []byte
	if in, err := readGuest(mod.Memory(), ptr, n); err != nil {
		env = codeEnvelope(codes.InvalidArgument, "host_call: "+err.Error())
	} else {
		env = m.host.serve(ctx, id, in)
	}
	writer := inst
	if writer == nil || writer.malloc == nil {
		// A host call during _initialize, before the instance's exports are bound.
		writer = &instance{m: m, mod: mod, malloc: mod.ExportedFunction("malloc")}
	}
	p, err := writer.write(ctx, env)
	if err != nil {
		m.fault(ctx, mod, inst, fmt.Errorf("host_call could not return its result: %w", err), stack)
		return
	}
	stack[0] = pack(p, uint32(len(env)))
}

// fault ends the current call of a guest that broke the ABI inside a host function: its
// state is unknown, so the module is closed and the call fails with err.
func (m *Module) fault(ctx context.Context, mod api.Module, inst *instance, err error, stack []uint64) {
	if inst != nil && inst.fault == nil {
		inst.fault = err
	}
	_ = mod.CloseWithExitCode(ctx, exitCodeHostFault)
	stack[0] = 0
}

// exitCodeHostFault closes a module whose guest broke the ABI inside a host call.
const exitCodeHostFault = 0xdead

// hostLog implements keel.log(level, ptr, len).
func (m *Module) hostLog(_ context.Context, mod api.Module, stack []uint64) {
	level, ptr, n := api.DecodeU32(stack[0]), api.DecodeU32(stack[1]), api.DecodeU32(stack[2])
	b, err := readGuest(mod.Memory(), ptr, n)
	if err != nil {
		m.log.Warn("invalid log call from guest", "error", err)
		return
	}
	if len(b) > maxLogBytes {
		b = b[:maxLogBytes]
	}
	lvl := hclog.Level(level)
	if lvl < hclog.Trace || lvl > hclog.Error {
		lvl = hclog.Info
	}
	msg := validUTF8(b)
	m.log.Log(lvl, msg)
	m.sink.write(lvl, msg, "")
}
