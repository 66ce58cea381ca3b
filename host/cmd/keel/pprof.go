package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strings"
)

// pprofDirEnv names a directory: when it is set, keel serve and every first-party extension
// process serve Go's pprof handlers on a loopback port of their own and write the address
// to <dir>/<role>.addr (role "serve" or the extension key), for profiling under load.
const pprofDirEnv = "SERVICE_PPROF_DIR"

// startPprof serves pprof for this process when SERVICE_PPROF_DIR is set. A failure is
// reported on stderr and never stops the process.
func startPprof(role string) {
	dir := os.Getenv(pprofDirEnv)
	if dir == "" {
		return
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintf(os.Stderr, "keel: pprof for %s not served: %v\n", role, err)
		return
	}
	name := strings.NewReplacer("/", "_", string(filepath.Separator), "_").Replace(role) + ".addr"
	if err := os.WriteFile(filepath.Join(dir, name), []byte(ln.Addr().String()+"\n"), 0o600); err != nil {
		fmt.Fprintf(os.Stderr, "keel: pprof for %s not served: %v\n", role, err)
		ln.Close()
		return
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	go http.Serve(ln, mux) //nolint:errcheck // lives as long as the process
}
