//go:build !wasip1

package wasmguest

// Outside wasip1 there is no host: hostCallFunc stays the stub that makes every host call
// fail with ErrNoHost, and Log discards its line. The ABI exports live in abi_wasip1.go.
