package host

import (
	"context"
	"path/filepath"

	"github.com/hashicorp/go-hclog"

	"github.com/keelhq/keel/host/hostsvc"
	"github.com/keelhq/keel/host/supervisor"
	"github.com/keelhq/keel/host/wasmrt"
)

// wasmLoader runs wasm extensions on one shared wazero runtime whose compilation cache
// lives in the data dir, so a module compiles once per keel version, not once per start.
type wasmLoader struct {
	rt *wasmrt.Runtime
}

func newWasmLoader(ctx context.Context, cacheDir string, log hclog.Logger) (*wasmLoader, error) {
	rt, err := wasmrt.New(ctx, wasmrt.Config{CacheDir: cacheDir, Logger: log})
	if err != nil {
		return nil, err
	}
	return &wasmLoader{rt: rt}, nil
}

// LoadWasm implements supervisor.WasmLoader. Limit failures come back as
// *wasmrt.CallError, which carries its HTTP status and code (supervisor.LimitError).
func (l *wasmLoader) LoadWasm(ctx context.Context, src *supervisor.Source, services *hostsvc.Services, opts *supervisor.WasmOptions) (supervisor.WasmModule, error) {
	mf := src.Manifest
	p := wasmrt.LoadParams{
		Key: mf.Key, ModulePath: filepath.Join(src.Dir, filepath.Clean("/" + mf.Runtime.Module)[1:]),
		SHA256: mf.Runtime.SHA256, Services: services, Capabilities: mf.Capabilities,
	}
	if mf.Runtime.Limits != nil {
		p.Limits = *mf.Runtime.Limits
	}
	if opts != nil {
		p.Output = opts.Output
		p.Mounts = wasmMounts(opts.Mounts)
	}
	mod, err := l.rt.Load(ctx, p)
	if err != nil {
		return nil, err
	}
	return &wasmModule{mod}, nil
}

// wasmModule is a loaded module whose folder mounts the supervisor can change.
type wasmModule struct{ *wasmrt.Module }

// SetMounts implements supervisor.WasmMounter.
func (w *wasmModule) SetMounts(mounts []supervisor.WasmMount) { w.Module.SetMounts(wasmMounts(mounts)) }

func wasmMounts(in []supervisor.WasmMount) []wasmrt.Mount {
	out := make([]wasmrt.Mount, 0, len(in))
	for _, m := range in {
		out = append(out, wasmrt.Mount{HostPath: m.HostPath, GuestPath: m.GuestPath, ReadOnly: m.ReadOnly})
	}
	return out
}

// Close releases the runtime.
func (l *wasmLoader) Close(ctx context.Context) {
	if l.rt != nil {
		_ = l.rt.Close(ctx)
	}
}

var (
	_ supervisor.LimitError  = (*wasmrt.CallError)(nil)
	_ supervisor.WasmMounter = (*wasmModule)(nil)
)
