package wasmrt

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/keelhq/keel/host/wasmrt/wasmrttest"
	"github.com/keelhq/keel/sdk"
	extensionv1 "github.com/keelhq/keel/sdk/proto/extension/v1"
)

func TestSmoke(t *testing.T) {
	ctx := context.Background()
	t0 := time.Now()
	path := wasmrttest.BuildModule(t, "../../examples/wasm-counter")
	t.Log("build", time.Since(t0))
	rt, err := New(ctx, Config{CacheDir: t.TempDir(), Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Debug})})
	if err != nil { t.Fatal(err) }
	defer rt.Close(ctx)
	fakes := wasmrttest.NewServices()
	t0 = time.Now()
	m, err := rt.Load(ctx, LoadParams{Key: "example.wasm_counter", ModulePath: path, Limits: sdk.Limits{MemoryMB: 64, TimeoutMS: 1000}, Services: fakes.HostServices(), Capabilities: []string{"activity", "storage"}})
	if err != nil { t.Fatal(err) }
	t.Log("load", time.Since(t0))
	d, err := m.Describe(ctx, &extensionv1.DescribeRequest{})
	if err != nil { t.Fatal(err) }
	t.Log(string(d.ManifestJson)[:50])
	_, err = m.Configure(ctx, &extensionv1.ConfigureRequest{ConfigJson: []byte(`{}`)})
	if err != nil { t.Fatal(err) }
	for i := 0; i < 3; i++ {
		res, err := m.Handle(ctx, &extensionv1.HTTPRequest{Method: "POST", Path: "/api/companies/c1/wasm-counter/increment", CompanyId: "c1", Params: map[string]string{"companyId": "c1"}, Actor: &extensionv1.Actor{Type: "board", UserId: "u1"}})
		if err != nil { t.Fatal(err) }
		t.Log(res.Status, string(res.Body), res.Headers)
	}
	t0 = time.Now()
	_, err = m.Handle(ctx, &extensionv1.HTTPRequest{Method: "POST", Path: "/api/companies/c1/wasm-counter/hog"})
	t.Log("hog", err, time.Since(t0))
	t0 = time.Now()
	_, err = m.Handle(ctx, &extensionv1.HTTPRequest{Method: "POST", Path: "/api/companies/c1/wasm-counter/spin"})
	t.Log("spin", err, time.Since(t0))
	res, err := m.Handle(ctx, &extensionv1.HTTPRequest{Method: "GET", Path: "/api/companies/c1/wasm-counter"})
	if err != nil { t.Fatal(err) }
	t.Log(res.Status, string(res.Body))
	t.Log(fakes.Activity.Entries())
}
