package wasmrt

import "github.com/tetratelabs/wazero/experimental"

// linearMemory backs one instance's linear memory. wazero calls Free when it closes the
// module, which may happen while the instance's call is still on the stack (a deadline in
// a nested call); Free therefore only marks the memory, and the instance releases it with
// release once no call runs on it.
type linearMemory interface {
	experimental.LinearMemory
	release()
}

// sliceMemory is the portable linear memory: a Go slice grown by doubling (the Go
// collector frees it).
type sliceMemory struct {
	buf []byte
	max uint64
}

func (m *sliceMemory) Reallocate(size uint64) []byte {
	if size > m.max {
		return nil
	}
	if size <= uint64(cap(m.buf)) {
		m.buf = m.buf[:size]
		return m.buf
	}
	grown := make([]byte, size, min(max(size, 2*uint64(cap(m.buf))), m.max))
	copy(grown, m.buf)
	m.buf = grown
	return m.buf
}

func (m *sliceMemory) Free() {}

func (m *sliceMemory) release() { m.buf = nil }
