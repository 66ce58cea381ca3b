package wasmrt

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/keelhq/keel/host/hostsvc"
	"github.com/keelhq/keel/sdk"
	extensionv1 "github.com/keelhq/keel/sdk/proto/extension/v1"
)

// Default limits, used where sdk.Limits leaves a field zero.
const (
	DefaultMemoryMB  = 128
	DefaultTimeoutMS = 5000
	DefaultInstances = 4
)

// LoadParams says what to load and what the module may reach.
type LoadParams struct {
	// Key is the extension key, used in errors and as the logger name.
	Key string
	// ModulePath is the .wasm file.
	ModulePath string
	// SHA256 is the hex digest the file must match; empty skips the check (dev dirs).
	SHA256 string
	// Limits bound each instance and call; zero fields take the defaults.
	Limits sdk.Limits
	// Services are the host services opened for the extension; nil fields are unavailable.
	Services *hostsvc.Services
	// Capabilities are the manifest's capabilities; host calls outside them are refused.
	Capabilities []string
	// Mounts are the host folders the module sees (its declared local folders); without
	// any it sees no filesystem at all. SetMounts changes them.
	Mounts []Mount
	// Output receives what the module logs (stdout and stderr lines, keel.log calls) as
	// hclog JSON lines, like a process extension's stderr; nil drops it.
	Output io.Writer
}

// Mount is a host directory a module sees at a guest path.
type Mount struct {
	// HostPath is the directory on the host (already checked: absolute, real, a directory).
	HostPath string
	// GuestPath is where the module sees it, such as /local-folders/<companyId>/notes.
	GuestPath string
	// ReadOnly refuses the module's writes.
	ReadOnly bool
}

// SetMounts changes the folders the module sees: instances made from now on mount them,
// idle instances are closed, and busy ones are closed when their call ends. Setting the
// same mounts again changes nothing.
func (m *Module) SetMounts(mounts []Mount) {
	m.mu.Lock()
	if slices.Equal(m.mounts, mounts) {
		m.mu.Unlock()
		return
	}
	m.mounts = slices.Clone(mounts)
	m.mountGen++
	idle := m.idle
	m.idle = nil
	m.mu.Unlock()
	for _, inst := range idle {
		inst.close()
	}
}

// Module is one loaded wasm extension: a compiled module and a pool of instances. It
// implements extensionv1.ExtensionClient; the call options are ignored.
type Module struct {
	key       string
	owner     *Runtime
	rt        wazero.Runtime
	compiled  wazero.CompiledModule
	log       hclog.Logger
	host      *hostCalls
	start     []string
	memoryMB  int
	memPages  uint32
	timeout   time.Duration
	timeoutMS int

	slots chan struct{} // one token per instance in use by a call
	// ctx ends when the module is closed, interrupting calls in flight.
	ctx    context.Context
	cancel context.CancelFunc

	mu        sync.Mutex
	idle      []*instance
	closed    bool
	config    []byte // the last ConfigureRequest, encoded
	configGen uint64 // bumped by each Configure
	mounts    []Mount
	mountGen  uint64 // bumped by each change of mounts

	// sink is the extension's own log (LoadParams.Output).
	sink *guestSink
}

var _ extensionv1.ExtensionClient = (*Module)(nil)

// abiExports are the functions a module must export, with their signatures.
var abiExports = []struct {
	name            string
	params, results []api.ValueType
}{
	{"keel_api_version", nil, []api.ValueType{api.ValueTypeI32}},
	{"malloc", []api.ValueType{api.ValueTypeI32}, []api.ValueType{api.ValueTypeI32}},
	{"free", []api.ValueType{api.ValueTypeI32}, nil},
	{"keel_call", []api.ValueType{api.ValueTypeI32, api.ValueTypeI32, api.ValueTypeI32}, []api.ValueType{api.ValueTypeI64}},
}

// Load verifies the module file against p.SHA256, compiles it (through the shared cache),
// checks the ABI, and starts one instance to check keel_api_version and warm the pool.
func (r *Runtime) Load(ctx context.Context, p LoadParams) (*Module, error) {
	if p.Key == "" {
		return nil, errors.New("error loading wasm extension: key is required")
	}
	bin, err := os.ReadFile(p.ModulePath)
	if err != nil {
		return nil, fmt.Errorf("error loading wasm extension %s: %w", p.Key, err)
	}
	if p.SHA256 != "" {
		sum := sha256.Sum256(bin)
		if got := hex.EncodeToString(sum[:]); !strings.EqualFold(got, p.SHA256) {
			return nil, fmt.Errorf("error loading wasm extension %s: module %s has sha256 %s, but the manifest expects %s", p.Key, p.ModulePath, got, p.SHA256)
		}
	}
	m := &Module{key: p.Key, owner: r, log: r.log.Named(p.Key), mounts: slices.Clone(p.Mounts)}
	if p.Output != nil {
		m.sink = &guestSink{out: p.Output}
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.memoryMB, m.timeoutMS = p.Limits.MemoryMB, p.Limits.TimeoutMS
	if m.memoryMB <= 0 {
		m.memoryMB = DefaultMemoryMB
	}
	if m.timeoutMS <= 0 {
		m.timeoutMS = DefaultTimeoutMS
	}
	instances := p.Limits.Instances
	if instances <= 0 {
		instances = DefaultInstances
	}
	m.memPages = uint32(min(m.memoryMB, 4096) * 16) // 64 KiB pages
	m.timeout = time.Duration(m.timeoutMS) * time.Millisecond
	m.slots = make(chan struct{}, instances)

	m.rt = wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().
		WithCompilationCache(r.cache).
		WithCloseOnContextDone(true).
		WithMemoryLimitPages(m.memPages))
	fail := func(err error) (*Module, error) {
		m.cancel()
		_ = m.rt.Close(context.Background())
		return nil, fmt.Errorf("error loading wasm extension %s: %w", p.Key, err)
	}
	started := time.Now()
	m.compiled, err = m.rt.CompileModule(ctx, bin)
	if err != nil {
		if strings.Contains(err.Error(), "over limit") {
			return fail(fmt.Errorf("module needs more memory than its limit of %dMB: %w", m.memoryMB, err))
		}
		return fail(fmt.Errorf("error compiling %s: %w", p.ModulePath, err))
	}
	m.log.Debug("compiled wasm module", "path", p.ModulePath, "bytes", len(bin), "duration", time.Since(started))
	if m.start, err = checkABI(m.compiled); err != nil {
		return fail(err)
	}
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, m.rt); err != nil {
		return fail(fmt.Errorf("error instantiating WASI: %w", err))
	}
	m.host = newHostCalls(p.Key, p.Services, p.Capabilities, m.log)
	if err := m.instantiateHostModule(ctx); err != nil {
		return fail(fmt.Errorf("error instantiating host functions: %w", err))
	}
	inst, err := m.newInstance(ctx)
	if err != nil {
		return fail(err)
	}
	m.idle = append(m.idle, inst)
	if err := r.add(m); err != nil {
		inst.close()
		return fail(err)
	}
	return m, nil
}

// checkABI checks the exports and imports of the keel ABI and returns the start functions.
func checkABI(c wazero.CompiledModule) ([]string, error) {
	exports := c.ExportedFunctions()
	var missing, wrong []string
	for _, want := range abiExports {
		def, ok := exports[want.name]
		if !ok {
			missing = append(missing, want.name)
			continue
		}
		if !slices.Equal(def.ParamTypes(), want.params) || !slices.Equal(def.ResultTypes(), want.results) {
			wrong = append(wrong, fmt.Sprintf("%s is %s, want %s", want.name,
				signature(def.ParamTypes(), def.ResultTypes()), signature(want.params, want.results)))
		}
	}
	if len(c.ExportedMemories()) == 0 {
		missing = append(missing, "memory")
	}
	var problems []string
	if len(missing) > 0 {
		problems = append(problems, "missing exports "+strings.Join(missing, ", "))
	}
	if len(wrong) > 0 {
		problems = append(problems, "wrong signatures: "+strings.Join(wrong, "; "))
	}
	for _, def := range c.ImportedFunctions() {
		mod, name, _ := def.Import()
		switch {
		case mod == wasi_snapshot_preview1.ModuleName:
		case mod == "keel" && (name == "host_call" || name == "log"):
		default:
			problems = append(problems, fmt.Sprintf("imports %s.%s, which the host does not provide", mod, name))
		}
	}
	_, reactor := exports["_initialize"]
	if _, command := exports["_start"]; command && !reactor {
		problems = append(problems, "is a WASI command (exports _start, not _initialize); build a reactor, e.g. go build -buildmode=c-shared")
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("module does not implement the keel wasm ABI v%d: %s", APIVersion, strings.Join(problems, "; "))
	}
	if reactor {
		return []string{"_initialize"}, nil
	}
	return nil, nil
}

func signature(params, results []api.ValueType) string {
	name := func(ts []api.ValueType) string {
		s := make([]string, len(ts))
		for i, t := range ts {
			s[i] = api.ValueTypeName(t)
		}
		return "(" + strings.Join(s, ", ") + ")"
	}
	return name(params) + " -> " + name(results)
}

// Close interrupts calls in flight (they fail with Unavailable), waits for them to end,
// and closes every instance and the module's wazero runtime. If ctx ends first, Close
// returns its error and leaves the runtime to be collected. It is idempotent.
func (m *Module) Close(ctx context.Context) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.mu.Unlock()
	m.cancel()
	m.owner.remove(m)
	for taken := range cap(m.slots) { // wait until no call runs
		select {
		case m.slots <- struct{}{}:
		case <-ctx.Done():
			for range taken {
				<-m.slots
			}
			return fmt.Errorf("error closing wasm extension %s: %w", m.key, ctx.Err())
		}
	}
	m.mu.Lock()
	idle := m.idle
	m.idle = nil
	m.mu.Unlock()
	for _, inst := range idle {
		inst.close()
	}
	err := m.rt.Close(ctx)
	for range cap(m.slots) {
		<-m.slots
	}
	return err
}

func (m *Module) isClosed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}

func (m *Module) errClosed() error {
	return status.Errorf(codes.Unavailable, "wasm extension %s is closed", m.key)
}

// acquire returns an instance for one call: an idle one, or a new one while fewer than
// Limits.Instances are in use; otherwise it waits.
func (m *Module) acquire(ctx context.Context) (*instance, error) {
	select {
	case m.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		<-m.slots
		return nil, m.errClosed()
	}
	if n := len(m.idle); n > 0 {
		inst := m.idle[n-1]
		m.idle = m.idle[:n-1]
		m.mu.Unlock()
		return inst, nil
	}
	m.mu.Unlock()
	inst, err := m.newInstance(ctx)
	if err != nil {
		<-m.slots
		return nil, err
	}
	return inst, nil
}

// release returns a healthy instance to the pool and closes a broken one.
func (m *Module) release(inst *instance, healthy bool) {
	m.mu.Lock()
	if healthy && !m.closed && inst.mountGen == m.mountGen {
		m.idle = append(m.idle, inst)
		m.mu.Unlock()
	} else {
		m.mu.Unlock()
		inst.close()
	}
	<-m.slots
}

// invoke runs one operation on a pooled, configured instance and decodes the response.
func (m *Module) invoke(ctx context.Context, op uint32, req, resp proto.Message) error {
	in, err := proto.Marshal(req)
	if err != nil {
		return status.Errorf(codes.Internal, "error encoding %s request: %v", opName(op), err)
	}
	inst, err := m.acquire(ctx)
	if err != nil {
		return err
	}
	defer func() { m.release(inst, !inst.broken) }()
	if err := m.configure(ctx, inst); err != nil {
		return err // a refused config leaves the instance intact but unconfigured
	}
	return inst.call(ctx, op, in, resp)
}

// configure runs Configure on inst if it has not seen the current config.
func (m *Module) configure(ctx context.Context, inst *instance) error {
	m.mu.Lock()
	cfg, gen := m.config, m.configGen
	m.mu.Unlock()
	if inst.configGen == gen {
		return nil
	}
	if err := inst.call(ctx, opConfigure, cfg, &extensionv1.ConfigureResponse{}); err != nil {
		return err
	}
	inst.configGen = gen
	return nil
}

// Describe runs operation Describe.
func (m *Module) Describe(ctx context.Context, req *extensionv1.DescribeRequest, _ ...grpc.CallOption) (*extensionv1.DescribeResponse, error) {
	resp := &extensionv1.DescribeResponse{}
	if err := m.invoke(ctx, opDescribe, req, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// Configure records req as the config of every instance and configures one instance now,
// so a refused config fails here; other instances are configured before their next call.
func (m *Module) Configure(ctx context.Context, req *extensionv1.ConfigureRequest, _ ...grpc.CallOption) (*extensionv1.ConfigureResponse, error) {
	in, err := proto.Marshal(req)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "error encoding Configure request: %v", err)
	}
	m.mu.Lock()
	m.config = in
	m.configGen++
	m.mu.Unlock()
	inst, err := m.acquire(ctx)
	if err != nil {
		return nil, err
	}
	err = m.configure(ctx, inst)
	m.release(inst, !inst.broken)
	if err != nil {
		return nil, err
	}
	return &extensionv1.ConfigureResponse{}, nil
}

// Handle runs operation Handle.
func (m *Module) Handle(ctx context.Context, req *extensionv1.HTTPRequest, _ ...grpc.CallOption) (*extensionv1.HTTPResponse, error) {
	resp := &extensionv1.HTTPResponse{}
	if err := m.invoke(ctx, opHandle, req, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// Call runs operation Call.
func (m *Module) Call(ctx context.Context, req *extensionv1.CallRequest, _ ...grpc.CallOption) (*extensionv1.CallResponse, error) {
	resp := &extensionv1.CallResponse{}
	if err := m.invoke(ctx, opCall, req, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// RunJob runs operation RunJob.
func (m *Module) RunJob(ctx context.Context, req *extensionv1.RunJobRequest, _ ...grpc.CallOption) (*extensionv1.RunJobResponse, error) {
	resp := &extensionv1.RunJobResponse{}
	if err := m.invoke(ctx, opRunJob, req, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// OnEvent runs operation OnEvent.
func (m *Module) OnEvent(ctx context.Context, req *extensionv1.Event, _ ...grpc.CallOption) (*extensionv1.OnEventResponse, error) {
	resp := &extensionv1.OnEventResponse{}
	if err := m.invoke(ctx, opOnEvent, req, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// Health runs operation Health on one instance.
func (m *Module) Health(ctx context.Context, req *extensionv1.HealthRequest, _ ...grpc.CallOption) (*extensionv1.HealthResponse, error) {
	resp := &extensionv1.HealthResponse{}
	if err := m.invoke(ctx, opHealth, req, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// Shutdown runs operation Shutdown on every idle instance and closes them; instances busy
// with a call are left to finish. Later calls start fresh, configured instances.
func (m *Module) Shutdown(ctx context.Context, req *extensionv1.ShutdownRequest, _ ...grpc.CallOption) (*extensionv1.ShutdownResponse, error) {
	in, err := proto.Marshal(req)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "error encoding Shutdown request: %v", err)
	}
	m.mu.Lock()
	idle := m.idle
	m.idle = nil
	m.mu.Unlock()
	var first error
	for i, inst := range idle {
		select {
		case m.slots <- struct{}{}: // count the instance as in use while Shutdown runs on it
		case <-ctx.Done():
			for _, inst := range idle[i:] {
				inst.close()
			}
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		if m.isClosed() {
			err = m.errClosed()
		} else {
			err = inst.call(ctx, opShutdown, in, &extensionv1.ShutdownResponse{})
		}
		if err != nil && first == nil {
			first = err
		}
		inst.close()
		<-m.slots
	}
	if first != nil {
		return nil, first
	}
	return &extensionv1.ShutdownResponse{}, nil
}
