// Package wasmrttest helps test wasm extensions: it builds a guest package into a module
// and provides in-memory host services to load it with.
package wasmrttest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keelhq/keel/host/hostsvc"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

var (
	buildsMu sync.Mutex
	builds   = map[string]*build{}
)

// build is one package's module, built once per test binary.
type build struct {
	once sync.Once
	wasm []byte
	err  error
}

// BuildModule builds the Go package in dir with GOOS=wasip1 GOARCH=wasm
// -buildmode=c-shared and returns the path of the module, a file in t.TempDir(). The
// build runs once per dir per test binary; later calls copy the cached module.
func BuildModule(t testing.TB, dir string) (wasmPath string) {
	t.Helper()
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatalf("wasmrttest: %v", err)
	}
	buildsMu.Lock()
	b := builds[abs]
	if b == nil {
		b = &build{}
		builds[abs] = b
	}
	buildsMu.Unlock()
	b.once.Do(func() { b.wasm, b.err = goBuild(abs) })
	if b.err != nil {
		t.Fatalf("wasmrttest: %v", b.err)
	}
	wasmPath = filepath.Join(t.TempDir(), filepath.Base(abs)+".wasm")
	if err := os.WriteFile(wasmPath, b.wasm, 0o644); err != nil {
		t.Fatalf("wasmrttest: %v", err)
	}
	return wasmPath
}

func goBuild(dir string) ([]byte, error) {
	tmp, err := os.MkdirTemp("", "wasmrttest-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	out := filepath.Join(tmp, "module.wasm")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-trimpath", "-o", out, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("error building wasm module in %s: %v\n%s", dir, err, stderr.String())
	}
	return os.ReadFile(out)
}

// Services are in-memory host services for tests: Storage and Activity record what the
// module does; the other services are left nil (unavailable).
type Services struct {
	Storage  *Storage
	Activity *Activity
}

// NewServices returns empty in-memory services.
func NewServices() *Services {
	return &Services{Storage: &Storage{data: map[string][]byte{}}, Activity: &Activity{}}
}

// HostServices returns the services as hostsvc.Services for wasmrt.LoadParams.
func (s *Services) HostServices() *hostsvc.Services {
	return &hostsvc.Services{Storage: s.Storage, Activity: s.Activity}
}

// Storage is an in-memory hostv1.StorageServer; keys are scoped by company. Safe for
// concurrent use.
type Storage struct {
	hostv1.UnimplementedStorageServer

	mu    sync.Mutex
	data  map[string][]byte
	calls int
}

func storageKey(companyID, key string) string { return strconv.Quote(companyID) + "/" + key }

// Get implements hostv1.StorageServer.
func (s *Storage) Get(_ context.Context, req *hostv1.StorageKey) (*hostv1.StorageGetResponse, error) {
	if req.CompanyId == "" || req.Key == "" {
		return nil, status.Error(codes.InvalidArgument, "company_id and key are required")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	v, ok := s.data[storageKey(req.CompanyId, req.Key)]
	return &hostv1.StorageGetResponse{Value: bytes.Clone(v), Found: ok}, nil
}

// Set implements hostv1.StorageServer.
func (s *Storage) Set(_ context.Context, req *hostv1.StorageSetRequest) (*hostv1.StorageSetResponse, error) {
	if req.CompanyId == "" || req.Key == "" {
		return nil, status.Error(codes.InvalidArgument, "company_id and key are required")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	s.data[storageKey(req.CompanyId, req.Key)] = bytes.Clone(req.Value)
	return &hostv1.StorageSetResponse{}, nil
}

// Delete implements hostv1.StorageServer.
func (s *Storage) Delete(_ context.Context, req *hostv1.StorageKey) (*hostv1.StorageDeleteResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	k := storageKey(req.CompanyId, req.Key)
	_, ok := s.data[k]
	delete(s.data, k)
	return &hostv1.StorageDeleteResponse{Deleted: ok}, nil
}

// Value returns the stored value of a company's key.
func (s *Storage) Value(companyID, key string) (value []byte, found bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.data[storageKey(companyID, key)]
	return bytes.Clone(v), ok
}

// Calls returns how many calls the storage served.
func (s *Storage) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// Keys returns the stored keys, sorted, as "\"company\"/key".
func (s *Storage) Keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]string, 0, len(s.data))
	for k := range s.data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Activity is an in-memory hostv1.ActivityServer that records every entry. Safe for
// concurrent use.
type Activity struct {
	hostv1.UnimplementedActivityServer

	mu      sync.Mutex
	entries []*hostv1.AppendActivityRequest
}

// Append implements hostv1.ActivityServer.
func (a *Activity) Append(_ context.Context, req *hostv1.AppendActivityRequest) (*hostv1.AppendActivityResponse, error) {
	if req.CompanyId == "" || req.Action == "" {
		return nil, status.Error(codes.InvalidArgument, "company_id and action are required")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.entries = append(a.entries, req)
	return &hostv1.AppendActivityResponse{Id: strconv.Itoa(len(a.entries)), CreatedAt: "2026-01-01T00:00:00Z"}, nil
}

// Entries returns the appended entries, oldest first.
func (a *Activity) Entries() []*hostv1.AppendActivityRequest {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]*hostv1.AppendActivityRequest(nil), a.entries...)
}

var (
	_ hostv1.StorageServer  = (*Storage)(nil)
	_ hostv1.ActivityServer = (*Activity)(nil)
)
