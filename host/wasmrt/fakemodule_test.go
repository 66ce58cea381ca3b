package wasmrt_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeModule describes a hand-assembled module that speaks (part of) the ABI, for the
// tests of what Load refuses. Its functions do nothing useful.
type fakeModule struct {
	version int32    // what keel_api_version returns
	exports []string // which of keel_api_version, malloc, free, keel_call, _start to export
	badFree bool     // export free as (i64) -> ()
	result  uint64   // what keel_call returns
	// reentrant makes keel_call and malloc call keel.host_call(8, 0, 0): the host's malloc
	// for the result then re-enters host_call.
	reentrant bool
}

const (
	i32 = 0x7f
	i64 = 0x7e
)

// writeModule assembles m into a .wasm file in t.TempDir().
func writeModule(t *testing.T, m fakeModule) string {
	t.Helper()
	type fn struct {
		name            string
		params, results []byte
		body            []byte
	}
	freeParam := byte(i32)
	if m.badFree {
		freeParam = i64
	}
	all := map[string]fn{
		"keel_api_version": {"keel_api_version", nil, []byte{i32}, append([]byte{0x41}, sleb(int64(m.version))...)},
		"malloc":           {"malloc", []byte{i32}, []byte{i32}, append([]byte{0x41}, sleb(1024)...)},
		"free":             {"free", []byte{freeParam}, nil, nil},
		"keel_call":        {"keel_call", []byte{i32, i32, i32}, []byte{i64}, append([]byte{0x42}, sleb(int64(m.result))...)},
		"_start":           {"_start", nil, nil, nil},
	}
	// call keel.host_call(8, 0, 0) (function 0, the import) and drop the result
	callHost := []byte{0x41, 8, 0x41, 0, 0x41, 0, 0x10, 0, 0x1a}
	var fns []fn
	for _, name := range m.exports {
		f := all[name]
		if m.reentrant && (name == "keel_call" || name == "malloc") {
			f.body = cat(callHost, f.body)
		}
		fns = append(fns, f)
	}
	var types, funcs, exports, code [][]byte
	for i, f := range fns {
		types = append(types, cat([]byte{0x60}, vec(bytesOf(f.params)), vec(bytesOf(f.results))))
		funcs = append(funcs, uleb(uint64(i)))
		exports = append(exports, cat(name(f.name), []byte{0x00}, uleb(uint64(i+1)))) // after the import
		body := cat([]byte{0x00}, f.body, []byte{0x0b})                               // no locals, body, end
		code = append(code, cat(uleb(uint64(len(body))), body))
	}
	types = append(types, []byte{0x60, 3, i32, i32, i32, 1, i64}) // host_call's type
	imports := [][]byte{cat(name("keel"), name("host_call"), []byte{0x00}, uleb(uint64(len(fns))))}
	exports = append(exports, cat(name("memory"), []byte{0x02, 0x00}))
	bin := cat([]byte("\x00asm"), []byte{1, 0, 0, 0},
		section(1, vec(types)), section(2, vec(imports)), section(3, vec(funcs)),
		section(5, vec([][]byte{{0x00, 0x01}})), // one memory, min 1 page
		section(7, vec(exports)), section(10, vec(code)))
	path := filepath.Join(t.TempDir(), "fake.wasm")
	require.NoError(t, os.WriteFile(path, bin, 0o644))
	return path
}

func bytesOf(b []byte) [][]byte {
	out := make([][]byte, len(b))
	for i := range b {
		out[i] = b[i : i+1]
	}
	return out
}

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func vec(items [][]byte) []byte { return cat(uleb(uint64(len(items))), cat(items...)) }

func name(s string) []byte { return cat(uleb(uint64(len(s))), []byte(s)) }

func section(id byte, content []byte) []byte {
	return cat([]byte{id}, uleb(uint64(len(content))), content)
}

func uleb(v uint64) []byte {
	var out []byte
	for {
		b := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			b |= 0x80
		}
		out = append(out, b)
		if v == 0 {
			return out
		}
	}
}

func sleb(v int64) []byte {
	var out []byte
	for {
		b := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && b&0x40 == 0) || (v == -1 && b&0x40 != 0) {
			return append(out, b)
		}
		out = append(out, b|0x80)
	}
}
