// Command wasm-counter is the smallest wasm extension: a per-company counter kept in host
// storage, with an activity entry per increment, plus two routes that show the module's
// limits at work (hog runs out of memory, spin runs out of time). Build it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o counter.wasm .
//
// and put counter.wasm beside manifest.json.
package main

import (
	"context"
	_ "embed"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/keelhq/keel/sdk/wasmguest"
)

//go:embed manifest.json
var manifestJSON []byte

// storageKey is the key of the counter in each company's storage.
const storageKey = "count"

// Counter is the extension.
type Counter struct{}

func init() { wasmguest.Register(&Counter{}) }

// main is empty: the module is a reactor, and the host calls its exports.
func main() {}

// Manifest returns the embedded manifest.
func (c *Counter) Manifest() []byte { return manifestJSON }

// HTTPHandler serves the manifest's routes.
func (c *Counter) HTTPHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/companies/{companyId}/wasm-counter", c.get)
	mux.HandleFunc("POST /api/companies/{companyId}/wasm-counter/increment", c.increment)
	mux.HandleFunc("POST /api/companies/{companyId}/wasm-counter/hog", hog)
	mux.HandleFunc("POST /api/companies/{companyId}/wasm-counter/spin", spin)
	return mux
}

// countResponse is the body of the counter routes.
type countResponse struct {
	Count int64 `json:"count"`
}

func companyID(r *http.Request) string {
	if id := wasmguest.CompanyIDFrom(r.Context()); id != "" {
		return id
	}
	return r.PathValue("companyId")
}

func (c *Counter) get(w http.ResponseWriter, r *http.Request) {
	n, err := load(r.Context(), companyID(r))
	if err != nil {
		wasmguest.Logf(wasmguest.LevelError, "error reading counter: %v", err)
		wasmguest.WriteErr(w, err)
		return
	}
	wasmguest.WriteJSON(w, http.StatusOK, countResponse{Count: n})
}

func (c *Counter) increment(w http.ResponseWriter, r *http.Request) {
	ctx, company := r.Context(), companyID(r)
	n, err := load(ctx, company)
	if err != nil {
		wasmguest.WriteErr(w, err)
		return
	}
	n++
	if err := wasmguest.StorageSet(ctx, company, storageKey, strconv.AppendInt(nil, n, 10)); err != nil {
		wasmguest.Logf(wasmguest.LevelError, "error writing counter: %v", err)
		wasmguest.WriteErr(w, err)
		return
	}
	err = wasmguest.LogActivity(ctx, &wasmguest.ActivityEntry{
		CompanyID: company, Actor: wasmguest.ActorFrom(ctx), Action: "wasm_counter.incremented",
		EntityType: "wasm_counter", EntityID: company, Details: countResponse{Count: n},
	})
	if err != nil {
		wasmguest.Logf(wasmguest.LevelError, "%v", err)
		wasmguest.WriteErr(w, err)
		return
	}
	wasmguest.WriteJSON(w, http.StatusOK, countResponse{Count: n})
}

// ExecuteTool runs the declared tools: count reads the counter of the caller's company;
// read_note reads a file of the company's notes folder, which the host mounts into the
// module (its only filesystem), and says so on stdout, which lands in the plugin's log.
func (c *Counter) ExecuteTool(ctx context.Context, call *wasmguest.ToolCall) (*wasmguest.ToolResult, error) {
	switch call.Tool {
	case "count":
	case "read_note":
		return readNote(call)
	default:
		return nil, &wasmguest.Error{Status: http.StatusNotFound, Message: "unknown tool " + call.Tool}
	}
	n, err := load(ctx, call.RunContext.CompanyID)
	if err != nil {
		return nil, err
	}
	return &wasmguest.ToolResult{Content: fmt.Sprintf("the counter is at %d", n), Data: countResponse{Count: n}}, nil
}

// readNote reads parameters.file: a path relative to the notes folder, or an absolute one
// (which the module cannot reach unless it lies in a mounted folder).
func readNote(call *wasmguest.ToolCall) (*wasmguest.ToolResult, error) {
	var in struct {
		File string `json:"file"`
	}
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	folder, ok := call.LocalFolders["notes"]
	if !ok {
		return &wasmguest.ToolResult{Error: "the notes folder is not set for this company"}, nil
	}
	p := in.File
	if !strings.HasPrefix(p, "/") {
		p = folder.Path + "/" + p
	}
	b, err := os.ReadFile(p)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cannot read %s: %v\n", in.File, err)
		return &wasmguest.ToolResult{Error: err.Error()}, nil
	}
	fmt.Printf("read note %s (%d bytes)\n", in.File, len(b))
	return &wasmguest.ToolResult{Content: string(b)}, nil
}

// load reads the company's counter (0 when unset).
func load(ctx context.Context, company string) (int64, error) {
	b, found, err := wasmguest.StorageGet(ctx, company, storageKey)
	if err != nil || !found {
		return 0, err
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("error parsing counter %q: %w", b, err)
	}
	return n, nil
}

// hoard keeps what hog allocates reachable, so the collector cannot free it.
var hoard [][]byte

// hog allocates memory until the module's memory limit stops it; it never answers.
func hog(w http.ResponseWriter, _ *http.Request) {
	for {
		b := make([]byte, 4<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		hoard = append(hoard, b)
	}
}

// spins counts loop turns so the loop has an effect the compiler keeps.
var spins uint64

// spin loops until the module's time limit stops it; it never answers.
func spin(w http.ResponseWriter, _ *http.Request) {
	for {
		spins++
	}
}

var _ wasmguest.ToolExecutor = (*Counter)(nil)
