// Command probe is a wasm extension for the wasmrt tests: it reports its config and
// instance, panics, sleeps, exits, breaks the host_call ABI on purpose, and implements
// every optional operation.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strconv"
	"time"
	"unsafe"

	"github.com/keelhq/keel/sdk/wasmguest"
)

// instanceID tells instances apart; it is drawn when the instance starts.
var instanceID = func() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}()

// Probe is the extension.
type Probe struct {
	config     json.RawMessage
	configured int
}

func init() { wasmguest.Register(&Probe{}) }

func main() {}

// Manifest returns a minimal manifest.
func (p *Probe) Manifest() []byte {
	return []byte(`{"key":"test.probe","version":"0.1.0","kind":"plugin","runtime":{"kind":"wasm","module":"probe.wasm"}}`)
}

// Configure records the config; config {"fail": true} is refused.
func (p *Probe) Configure(_ context.Context, env *wasmguest.Env) error {
	var c struct{ Fail bool }
	_ = json.Unmarshal(env.Config, &c)
	if c.Fail {
		return errors.New("refusing config")
	}
	p.config = env.Config
	p.configured++
	wasmguest.Logf(wasmguest.LevelInfo, "configured instance %s", instanceID)
	return nil
}

//go:wasmimport keel host_call
func rawHostCall(service uint32, ptr, n uint32) uint64

// HTTPHandler serves the probe routes.
func (p *Probe) HTTPHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/probe/info", func(w http.ResponseWriter, r *http.Request) {
		a := wasmguest.ActorFrom(r.Context())
		wasmguest.WriteJSON(w, http.StatusOK, map[string]any{
			"instance": instanceID, "config": p.config, "configured": p.configured,
			"actor": a.Type, "userId": a.UserID, "company": wasmguest.CompanyIDFrom(r.Context()),
			"param": r.PathValue("x"), "query": r.URL.Query().Get("q"), "header": r.Header.Get("X-Probe"),
			"pattern": wasmguest.PatternFrom(r.Context()), "method": r.Method,
		})
	})
	mux.HandleFunc("POST /api/probe/echo/{x}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("X-Multi", "a")
		w.Header().Add("X-Multi", "b")
		w.WriteHeader(http.StatusCreated)
		buf := make([]byte, 1<<16)
		for {
			n, err := r.Body.Read(buf)
			_, _ = w.Write(buf[:n])
			if err != nil {
				break
			}
		}
	})
	mux.HandleFunc("POST /api/probe/panic", func(http.ResponseWriter, *http.Request) { panic("boom") })
	mux.HandleFunc("POST /api/probe/exit", func(http.ResponseWriter, *http.Request) { os.Exit(3) })
	mux.HandleFunc("POST /api/probe/sleep", func(w http.ResponseWriter, r *http.Request) {
		ms, _ := strconv.Atoi(r.URL.Query().Get("ms"))
		time.Sleep(time.Duration(ms) * time.Millisecond)
		wasmguest.WriteJSON(w, http.StatusOK, map[string]string{"instance": instanceID})
	})
	mux.HandleFunc("POST /api/probe/storage", func(w http.ResponseWriter, r *http.Request) {
		_, _, err := wasmguest.StorageGet(r.Context(), "c1", "k")
		writeHostErr(w, err)
	})
	mux.HandleFunc("POST /api/probe/activity", func(w http.ResponseWriter, r *http.Request) {
		_, err := wasmguest.Activity(r.Context(), &wasmguest.AppendActivityRequest{CompanyID: "c1", Action: "probe.done"})
		writeHostErr(w, err)
	})
	mux.HandleFunc("POST /api/probe/settings", func(w http.ResponseWriter, r *http.Request) {
		_, err := wasmguest.Settings(r.Context(), "general")
		writeHostErr(w, err)
	})
	mux.HandleFunc("POST /api/probe/raw", func(w http.ResponseWriter, r *http.Request) {
		// Breaks the ABI on purpose: service, ptr and len come from the query.
		q := r.URL.Query()
		svc, _ := strconv.ParseUint(q.Get("svc"), 10, 32)
		ptr, _ := strconv.ParseUint(q.Get("ptr"), 10, 32)
		n, _ := strconv.ParseUint(q.Get("len"), 10, 32)
		res := rawHostCall(uint32(svc), uint32(ptr), uint32(n))
		rp, rn := uint32(res>>32), uint32(res)
		env := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(nil), uintptr(rp))), rn)
		wasmguest.WriteJSON(w, http.StatusOK, map[string]any{"status": env[0], "message": string(env[1:])})
	})
	return mux
}

func writeHostErr(w http.ResponseWriter, err error) {
	var he *wasmguest.HostError
	if errors.As(err, &he) {
		wasmguest.WriteJSON(w, http.StatusOK, map[string]any{"service": he.Service, "code": he.Code, "message": he.Message})
		return
	}
	wasmguest.WriteJSON(w, http.StatusOK, map[string]any{"ok": err == nil})
}

// CallMethod echoes its input; method "fail" fails with a 409.
func (p *Probe) CallMethod(_ context.Context, call *wasmguest.MethodCall) (any, error) {
	if call.Method == "fail" {
		return nil, &wasmguest.Error{Status: http.StatusConflict, Code: "probe_conflict", Message: "conflict"}
	}
	var in any
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	return map[string]any{"method": call.Method, "input": in, "caller": call.Caller, "company": call.CompanyID}, nil
}

// RunJob fails job "bad".
func (p *Probe) RunJob(_ context.Context, job *wasmguest.JobRun) error {
	if job.Key == "bad" {
		return errors.New("job failed")
	}
	return nil
}

// OnEvent accepts every event.
func (p *Probe) OnEvent(context.Context, *wasmguest.Event) error { return nil }

// Health reports degraded until configured.
func (p *Probe) Health(context.Context) error {
	if p.configured == 0 {
		return errors.New("not configured")
	}
	return nil
}
