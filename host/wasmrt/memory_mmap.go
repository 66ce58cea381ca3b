//go:build linux || darwin

package wasmrt

import "syscall"

// mmapMemory reserves the instance's whole memory limit as one anonymous mapping, so
// growing never copies and untouched pages cost nothing; pages are returned to the system
// when the instance is released.
type mmapMemory struct {
	mapping []byte
}

// newLinearMemory returns memory for an instance that may grow to maxBytes.
func newLinearMemory(maxBytes uint64) linearMemory {
	if maxBytes == 0 || maxBytes > 1<<32 {
		return &sliceMemory{max: maxBytes}
	}
	b, err := syscall.Mmap(-1, 0, int(maxBytes), syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_NORESERVE)
	if err != nil {
		return &sliceMemory{max: maxBytes}
	}
	return &mmapMemory{mapping: b}
}

// Reallocate returns the first size bytes of the mapping; the address never changes.
func (m *mmapMemory) Reallocate(size uint64) []byte {
	if m.mapping == nil || size > uint64(len(m.mapping)) {
		return nil
	}
	return m.mapping[:size:size]
}

// Free does nothing: see linearMemory.
func (m *mmapMemory) Free() {}

// release unmaps the memory; no call may run on the instance any more.
func (m *mmapMemory) release() {
	if m.mapping != nil {
		_ = syscall.Munmap(m.mapping)
		m.mapping = nil
	}
}
