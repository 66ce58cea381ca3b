package wasmrt

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/sys"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// instance is one module instance. It serves one call at a time and is owned by that call;
// nothing in it is shared between goroutines.
type instance struct {
	m      *Module
	mod    api.Module
	malloc api.Function
	free   api.Function
	entry  api.Function // keel_call
	stderr *guestOutput

	configGen uint64
	// mountGen is the module's mount generation the instance was made with; an instance
	// of an older one is closed instead of being pooled again.
	mountGen uint64
	// done ends sleeps of the current call (its context's Done).
	done <-chan struct{}
	// fault is set by a host function when the guest broke the ABI or trapped inside a
	// nested call; it fails the current call.
	fault error
	// broken is set when a call failed in a way that leaves the instance unusable.
	broken bool
	// inAlloc is set while the host runs the guest's malloc or free; a host call from
	// there would re-enter them.
	inAlloc bool

	// mem is the instance's linear memory, released when the instance is closed.
	mem linearMemory

	callStack  [3]uint64
	allocStack [1]uint64
}

type instanceKey struct{}

func withInstance(ctx context.Context, inst *instance) context.Context {
	return context.WithValue(ctx, instanceKey{}, inst)
}

func instanceFrom(ctx context.Context) *instance {
	inst, _ := ctx.Value(instanceKey{}).(*instance)
	return inst
}

// Causes of a call context's end, to tell the time limit from the caller's deadline.
var (
	errTimeLimitCause = errors.New("wasm call time limit")
	errModuleClosed   = errors.New("wasm module closed")
)

// minStartTimeout is the least time an instance gets to start (_initialize runs the guest's
// package initializers), however small the call time limit.
const minStartTimeout = 10 * time.Second

// callContext returns the context of one call on inst: the caller's, bounded by timeout,
// ended by Module.Close, carrying the instance for the host functions.
func (m *Module) callContext(parent context.Context, inst *instance, timeout time.Duration) (context.Context, func()) {
	ctx, cancelTimeout := context.WithTimeoutCause(parent, timeout, errTimeLimitCause)
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(m.ctx, func() { cancel(errModuleClosed) })
	inst.done = ctx.Done()
	return withInstance(ctx, inst), func() {
		stop()
		cancel(nil)
		cancelTimeout()
	}
}

// newInstance instantiates the module (running _initialize within the time limit, but
// never less than minStartTimeout) and checks keel_api_version.
func (m *Module) newInstance(parent context.Context) (*instance, error) {
	m.mu.Lock()
	mounts, mountGen := m.mounts, m.mountGen
	m.mu.Unlock()
	inst := &instance{m: m, stderr: newGuestOutput(m.log, m.sink, "stderr"), mountGen: mountGen}
	cfg := wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions(m.start...).
		WithFSConfig(fsConfig(mounts)).
		WithStdout(newGuestOutput(m.log, m.sink, "stdout")).
		WithStderr(inst.stderr).
		WithSysWalltime().
		WithSysNanotime().
		WithNanosleep(inst.nanosleep).
		WithRandSource(rand.Reader)
	ctx, done := m.callContext(parent, inst, max(m.timeout, minStartTimeout))
	defer done()
	ctx = experimental.WithMemoryAllocator(ctx, experimental.MemoryAllocatorFunc(func(_, maxBytes uint64) experimental.LinearMemory {
		inst.mem = newLinearMemory(maxBytes)
		return inst.mem
	}))
	mod, err := m.rt.InstantiateModule(ctx, m.compiled, cfg)
	if err != nil {
		inst.mod = mod
		err = m.failure(ctx, parent, inst, "instantiate", err)
		inst.close()
		return nil, err
	}
	inst.mod = mod
	inst.malloc = mod.ExportedFunction("malloc")
	inst.free = mod.ExportedFunction("free")
	inst.entry = mod.ExportedFunction("keel_call")
	res, err := mod.ExportedFunction("keel_api_version").Call(ctx)
	if err != nil {
		err = m.failure(ctx, parent, inst, "keel_api_version", err)
		inst.close()
		return nil, err
	}
	if v := int32(res[0]); v != APIVersion {
		inst.close()
		return nil, fmt.Errorf("wasm extension %s speaks keel wasm ABI v%d; the host speaks v%d", m.key, v, APIVersion)
	}
	return inst, nil
}

// close closes the instance's module and releases its memory; no call may run on it. It is
// idempotent.
func (inst *instance) close() {
	if inst.mod != nil {
		_ = inst.mod.Close(context.Background())
	}
	if inst.mem != nil {
		inst.mem.release()
		inst.mem = nil
	}
}

// nanosleep sleeps for the guest (poll_oneoff) but never past the end of the current call.
func (inst *instance) nanosleep(ns int64) {
	t := time.NewTimer(time.Duration(ns))
	defer t.Stop()
	select {
	case <-t.C:
	case <-inst.done:
	}
}

// call runs keel_call(op) with in as input and decodes the ok payload into resp. Errors:
// a *CallError when the instance broke (it must be discarded), a status error for what the
// extension reported or for the caller's context.
func (inst *instance) call(parent context.Context, op uint32, in []byte, resp proto.Message) error {
	m := inst.m
	ctx, done := m.callContext(parent, inst, m.timeout)
	defer done()
	inst.fault = nil
	inst.stderr.reset()
	name := opName(op)

	var ptr uint32
	if len(in) > 0 {
		p, err := inst.write(ctx, in)
		if err != nil {
			return m.failure(ctx, parent, inst, name, err)
		}
		ptr = p
	}
	inst.callStack = [3]uint64{uint64(op), uint64(ptr), uint64(len(in))}
	if err := inst.entry.CallWithStack(ctx, inst.callStack[:]); err != nil {
		return m.failure(ctx, parent, inst, name, err)
	}
	if inst.fault != nil {
		return m.failure(ctx, parent, inst, name, inst.fault)
	}
	result := inst.callStack[0]
	if len(in) > 0 {
		if err := inst.release(ctx, ptr); err != nil {
			return m.failure(ctx, parent, inst, name, err)
		}
	}
	rptr, rn := unpack(result)
	raw, err := readGuest(inst.mod.Memory(), rptr, rn)
	if err != nil {
		return m.failure(ctx, parent, inst, name, fmt.Errorf("invalid result: %w", err))
	}
	env, err := decodeEnvelope(raw)
	if err == nil && env.ok {
		err = proto.Unmarshal(env.payload, resp) // copies; raw may move once the guest runs
	}
	if err != nil {
		return m.failure(ctx, parent, inst, name, fmt.Errorf("malformed %s result: %w", name, err))
	}
	if err := inst.release(ctx, rptr); err != nil {
		return m.failure(ctx, parent, inst, name, err)
	}
	return env.err()
}

// write copies b into a block from the guest's malloc and returns its address.
func (inst *instance) write(ctx context.Context, b []byte) (uint32, error) {
	inst.allocStack[0] = uint64(len(b))
	inst.inAlloc = true
	err := inst.malloc.CallWithStack(ctx, inst.allocStack[:])
	inst.inAlloc = false
	if err != nil {
		return 0, err
	}
	ptr := uint32(inst.allocStack[0])
	if !inst.mod.Memory().Write(ptr, b) {
		return 0, fmt.Errorf("malloc(%d) returned %d, outside guest memory", len(b), ptr)
	}
	return ptr, nil
}

// release calls the guest's free on ptr.
func (inst *instance) release(ctx context.Context, ptr uint32) error {
	inst.allocStack[0] = uint64(ptr)
	inst.inAlloc = true
	defer func() { inst.inAlloc = false }()
	return inst.free.CallWithStack(ctx, inst.allocStack[:])
}

// failure turns an error of a call into what the caller sees. ctx is the call's context
// (with the time limit), parent the caller's.
func (m *Module) failure(ctx, parent context.Context, inst *instance, op string, err error) error {
	inst.broken = true
	if m.isClosed() {
		return m.errClosed()
	}
	ce := &CallError{Key: m.key, Op: op, Kind: ErrTrap, Cause: err}
	var exit *sys.ExitError
	switch {
	case inst.fault != nil:
		ce.Detail = inst.fault.Error()
	case errors.As(err, &exit) && (exit.ExitCode() == sys.ExitCodeDeadlineExceeded || exit.ExitCode() == sys.ExitCodeContextCanceled):
		if cause := context.Cause(ctx); errors.Is(cause, errTimeLimitCause) {
			ce.Kind, ce.Limit = ErrTimeLimit, m.timeoutMS
			if op == "instantiate" {
				ce.Limit = int(max(m.timeout, minStartTimeout) / time.Millisecond)
			}
		} else if errors.Is(cause, errModuleClosed) {
			return m.errClosed()
		} else if perr := parent.Err(); perr != nil {
			return status.FromContextError(perr).Err()
		} else {
			ce.Detail = "canceled"
		}
	case inst.stderr.sawOutOfMemory():
		ce.Kind, ce.Limit = ErrMemoryLimit, m.memoryMB
	case errors.As(err, &exit):
		ce.Detail = fmt.Sprintf("exited with code %d", exit.ExitCode())
	case inst.nearMemoryLimit():
		ce.Kind, ce.Limit = ErrMemoryLimit, m.memoryMB
	default:
		ce.Detail = firstLine(err.Error())
	}
	if ce.Kind == ErrTrap {
		if line := inst.stderr.firstLine(); line != "" {
			ce.Detail += " (" + line + ")"
		}
	}
	// One line at warn; the guest's stderr (often a Go stack trace) only at debug.
	m.log.Warn("wasm call failed; instance discarded", "op", op, "error", ce.Error())
	if head := inst.stderr.headText(); head != "" && m.log.IsDebug() {
		m.log.Debug("stderr of the failed wasm call", "op", op, "stderr", head)
	}
	return ce
}

// nearMemoryLimit reports whether the instance's memory is within a Go heap arena (4 MiB)
// of the limit: a trap there most likely comes from a failed allocation in a guest that
// did not say so on stderr (Go guests print "fatal error: out of memory").
func (inst *instance) nearMemoryLimit() bool {
	if inst.mod == nil || inst.mod.Memory() == nil {
		return false
	}
	const arena = 4 << 20
	limit := uint64(inst.m.memPages) * 65536
	return uint64(inst.mod.Memory().Size())+arena >= limit
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}
