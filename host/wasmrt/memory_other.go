//go:build !(linux || darwin)

package wasmrt

// newLinearMemory returns memory for an instance that may grow to maxBytes.
func newLinearMemory(maxBytes uint64) linearMemory {
	return &sliceMemory{max: maxBytes}
}
