// Package extensions holds keel's first-party feature areas, one folder each, and the
// registry through which they are compiled into the keel binary. Each first-party extension
// registers a factory from its package's init; the host launches it as its own process with
// `keel extension <key>`. Package extensions/all imports every first-party extension.
package extensions

import (
	"fmt"
	"sort"
	"sync"

	"github.com/keelhq/keel/sdk"
)

// Factory returns a new, unconfigured instance of a first-party extension.
type Factory func() sdk.Extension

var (
	mu        sync.RWMutex
	factories = map[string]Factory{}
)

// Register adds a first-party extension under its manifest key. It panics on a duplicate
// key, which is a programming error caught at start. It does not call the factory, so an
// extension may build its manifest from tables that other init functions fill.
func Register(key string, f Factory) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := factories[key]; dup {
		panic(fmt.Sprintf("extension %s registered twice", key))
	}
	factories[key] = f
}

// Lookup returns the factory of a first-party extension.
func Lookup(key string) (Factory, bool) {
	mu.RLock()
	defer mu.RUnlock()
	f, ok := factories[key]
	return f, ok
}

// Keys lists the registered first-party extensions, sorted.
func Keys() []string {
	mu.RLock()
	defer mu.RUnlock()
	keys := make([]string, 0, len(factories))
	for k := range factories {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
