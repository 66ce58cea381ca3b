package wasmrt

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/tetratelabs/wazero"
)

// Config configures a Runtime.
type Config struct {
	// CacheDir keeps compiled modules across restarts; empty keeps them in memory only.
	CacheDir string
	// Logger is the host's logger; each module logs under its extension key.
	Logger hclog.Logger
}

// Runtime compiles and runs wasm extensions. All modules share one compilation cache.
type Runtime struct {
	cache wazero.CompilationCache
	log   hclog.Logger

	mu      sync.Mutex
	modules map[*Module]struct{}
	closed  bool
}

// New returns a Runtime whose compilation cache lives in cfg.CacheDir.
func New(ctx context.Context, cfg Config) (*Runtime, error) {
	_ = ctx
	log := cfg.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	var cache wazero.CompilationCache
	if cfg.CacheDir != "" {
		c, err := wazero.NewCompilationCacheWithDir(cfg.CacheDir)
		if err != nil {
			return nil, fmt.Errorf("error opening wasm compilation cache %s: %w", cfg.CacheDir, err)
		}
		cache = c
	} else {
		cache = wazero.NewCompilationCache()
	}
	return &Runtime{cache: cache, log: log, modules: map[*Module]struct{}{}}, nil
}

// Close closes every loaded module, then the compilation cache. It is idempotent.
func (r *Runtime) Close(ctx context.Context) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	mods := make([]*Module, 0, len(r.modules))
	for m := range r.modules {
		mods = append(mods, m)
	}
	r.mu.Unlock()
	var errs []error
	for _, m := range mods {
		errs = append(errs, m.Close(ctx))
	}
	errs = append(errs, r.cache.Close(ctx))
	return errors.Join(errs...)
}

func (r *Runtime) add(m *Module) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return errors.New("wasm runtime is closed")
	}
	r.modules[m] = struct{}{}
	return nil
}

func (r *Runtime) remove(m *Module) {
	r.mu.Lock()
	delete(r.modules, m)
	r.mu.Unlock()
}
