//go:build wasip1

package wasmguest

import "unsafe"

// allocs keeps every block handed out by malloc alive until free: the host writes into it
// (requests, host call results) or reads from it (results) while Go holds no other pointer.
var allocs = map[uintptr][]byte{}

// alloc returns a block of n bytes kept alive until free.
func alloc(n uint32) []byte {
	b := make([]byte, max(n, 1))[:n]
	allocs[uintptr(unsafe.Pointer(unsafe.SliceData(b)))] = b
	return b
}

// keep registers b (non-empty) as a block the host frees, and returns its address.
func keep(b []byte) uint32 {
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	allocs[p] = b
	return uint32(p)
}

// take removes the block at p and returns it (nil if p is not a live block).
func take(p uint32) []byte {
	b, ok := allocs[uintptr(p)]
	if !ok {
		return nil
	}
	delete(allocs, uintptr(p))
	return b
}

//go:wasmexport keel_api_version
func keelAPIVersion() int32 { return 1 }

//go:wasmexport malloc
func wasmMalloc(size uint32) uint32 {
	return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(alloc(size)))))
}

//go:wasmexport free
func wasmFree(ptr uint32) { delete(allocs, uintptr(ptr)) }

// keelCall serves one operation: ptr and n hold the request the host wrote into a block
// from malloc (the host frees it; n 0 means no block); the result packs (ptr<<32 | len) of
// the envelope, a block the host frees after reading.
//
//go:wasmexport keel_call
func keelCall(op, ptr, n uint32) uint64 {
	var env []byte
	if in, ok := allocs[uintptr(ptr)]; n > 0 && (!ok || n > uint32(len(in))) {
		env = errorEnvelope(CodeInvalidArgument, "request is not a block from malloc")
	} else {
		env = dispatch(op, in[:n:n])
	}
	return uint64(keep(env))<<32 | uint64(len(env))
}

//go:wasmimport keel host_call
func hostCall(service uint32, ptr unsafe.Pointer, n uint32) uint64

//go:wasmimport keel log
func hostLog(level uint32, ptr unsafe.Pointer, n uint32)

func init() {
	hostCallFunc = func(service uint32, in []byte) []byte {
		r := hostCall(service, unsafe.Pointer(unsafe.SliceData(in)), uint32(len(in)))
		env, n := take(uint32(r>>32)), uint32(r)
		if env == nil || n > uint32(len(env)) {
			return append([]byte{envError}, "host returned a result that is not a block from malloc"...)
		}
		return env[:n]
	}
	logFunc = func(level Level, msg string) {
		b := unsafe.StringData(msg)
		hostLog(uint32(level), unsafe.Pointer(b), uint32(len(msg)))
	}
}
