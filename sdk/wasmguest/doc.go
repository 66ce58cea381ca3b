// Package wasmguest is what a keel wasm extension imports: it implements the guest side of
// the keel wasm ABI (the exports keel_api_version, malloc, free and keel_call), adapts
// manifest routes to an ordinary http.Handler, and offers typed clients for the host
// services, each going through the host function keel.host_call.
//
// A wasm extension is a package main built as a WASI reactor:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o ext.wasm .
//
// It registers itself from init and leaves main empty:
//
//	func init() { wasmguest.Register(&Counter{}) }
//	func main() {}
//
// The package is deliberately self-contained: it encodes the keel.extension.v1 and
// keel.host.v1 messages itself with protowire instead of importing the generated packages,
// because those import google.golang.org/grpc, which makes a guest module about 20 MB,
// takes the host over ten seconds to compile and about 400 ms to instantiate. The wire
// format is the same; codec_test.go checks it against the generated code.
//
// The host runs one call at a time per module instance and may run several instances of the
// module side by side, each configured separately, and discards an instance that trapped or
// broke a limit. Keep state that must survive in host storage (StorageGet, StorageSet), not
// in package variables. Goroutines started by the extension only run while the host is
// inside a call; the extension has no sockets and no files.
//
// Outside GOOS=wasip1 the package compiles (so tools and tests work) but every host call
// fails with ErrNoHost.
package wasmguest
