package wasmguest

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	extensionv1 "github.com/keelhq/keel/sdk/proto/extension/v1"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

// These tests check the hand-written codec against the generated code of sdk/proto: the
// host side encodes and decodes with the generated types.

func marshal(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	require.NoError(t, err)
	return b
}

// withUnknownFields appends fields the guest does not know, of every wire type.
func withUnknownFields(b []byte) []byte {
	b = protowire.AppendTag(b, 90, protowire.VarintType)
	b = protowire.AppendVarint(b, 7)
	b = protowire.AppendTag(b, 91, protowire.Fixed32Type)
	b = protowire.AppendFixed32(b, 7)
	b = protowire.AppendTag(b, 92, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, 7)
	b = protowire.AppendTag(b, 93, protowire.BytesType)
	b = protowire.AppendString(b, "x")
	b = protowire.AppendTag(b, 94, protowire.StartGroupType)
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, 1)
	return protowire.AppendTag(b, 94, protowire.EndGroupType)
}

var testActor = &extensionv1.Actor{
	Type: "agent", UserId: "u", AgentId: "a", CompanyId: "c", RunId: "r", Source: "agent_key",
	IsInstanceAdmin: true, CompanyIds: []string{"c", "d"}, KeyId: "k",
}

func wantActor() *Actor {
	return &Actor{Type: "agent", UserID: "u", AgentID: "a", CompanyID: "c", RunID: "r", Source: "agent_key",
		IsInstanceAdmin: true, CompanyIDs: []string{"c", "d"}, KeyID: "k"}
}

func TestDecodeExtensionRequests(t *testing.T) {
	req := &extensionv1.HTTPRequest{
		Method: "POST", Path: "/api/x/1", Pattern: "POST /api/x/{id}", Params: map[string]string{"id": "1", "e": ""},
		RawQuery: "a=b", Headers: map[string]*extensionv1.HeaderValues{"X-A": {Values: []string{"1", "2"}}, "X-B": {}},
		Body: []byte("body"), Actor: testActor, CompanyId: "c", RequestId: "req",
	}
	got, err := decodeHTTPRequest(withUnknownFields(marshal(t, req)))
	require.NoError(t, err)
	require.Equal(t, &httpRequest{
		Method: "POST", Path: "/api/x/1", Pattern: "POST /api/x/{id}", Params: map[string]string{"id": "1", "e": ""},
		RawQuery: "a=b", Headers: map[string][]string{"X-A": {"1", "2"}, "X-B": nil}, Body: []byte("body"),
		Actor: wantActor(), CompanyID: "c", RequestID: "req",
	}, got)

	env, err := decodeEnv(withUnknownFields(marshal(t, &extensionv1.ConfigureRequest{
		ConfigJson: []byte(`{"a":1}`), HostBrokerId: 9, DatabaseUrl: "postgres://", DataDir: "/d", InstanceId: "i",
		ApiUrl: "http://x", KernelVersion: "0.1.0",
	})))
	require.NoError(t, err)
	require.Equal(t, &Env{Config: json.RawMessage(`{"a":1}`), DataDir: "/d", InstanceID: "i", APIURL: "http://x", KernelVersion: "0.1.0"}, env)

	call, err := decodeMethodCall(marshal(t, &extensionv1.CallRequest{
		Method: "m", InputJson: []byte(`[1]`), Actor: testActor, Caller: "kernel", CompanyId: "c",
	}))
	require.NoError(t, err)
	require.Equal(t, &MethodCall{Method: "m", Input: json.RawMessage(`[1]`), Actor: wantActor(), Caller: "kernel", CompanyID: "c"}, call)

	job, err := decodeJobRun(marshal(t, &extensionv1.RunJobRequest{JobKey: "j", ArgsJson: []byte(`{}`), Attempt: 3, JobId: "id"}))
	require.NoError(t, err)
	require.Equal(t, &JobRun{Key: "j", Args: json.RawMessage(`{}`), Attempt: 3, ID: "id"}, job)

	ev, err := decodeEvent(marshal(t, &extensionv1.Event{Id: "e", Type: "t", CompanyId: "c", PayloadJson: []byte(`1`), OccurredAt: "now", Source: "kernel"}))
	require.NoError(t, err)
	require.Equal(t, &Event{ID: "e", Type: "t", CompanyID: "c", Payload: json.RawMessage(`1`), OccurredAt: "now", Source: "kernel"}, ev)

	_, err = decodeHTTPRequest([]byte{0x0a, 0x05, 'a'}) // truncated
	require.Error(t, err)
}

// testExtension implements every optional interface.
type testExtension struct {
	env *Env
}

func (e *testExtension) Manifest() []byte { return []byte(`{"key":"test.ext"}`) }

func (e *testExtension) Configure(_ context.Context, env *Env) error {
	if string(env.Config) == `"bad"` {
		return errors.New("bad config")
	}
	e.env = env
	return nil
}

func (e *testExtension) HTTPHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/things/{id}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("X-Two", "a")
		w.Header().Add("X-Two", "b")
		WriteJSON(w, http.StatusAccepted, map[string]string{
			"id": r.PathValue("id"), "param": ParamFrom(r.Context(), "id"), "actor": ActorFrom(r.Context()).AgentID,
			"company": CompanyIDFrom(r.Context()), "header": r.Header.Get("x-lower"), "query": r.URL.Query().Get("q"),
			"request": RequestIDFrom(r.Context()), "pattern": PatternFrom(r.Context()),
		})
	})
	mux.HandleFunc("POST /api/raw", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("<html></html>")) })
	mux.HandleFunc("POST /api/err", func(w http.ResponseWriter, _ *http.Request) {
		WriteErr(w, &Error{Status: http.StatusConflict, Message: "taken", Code: "taken", Details: map[string]int{"n": 1}})
	})
	mux.HandleFunc("POST /api/panic", func(http.ResponseWriter, *http.Request) { panic("boom") })
	return mux
}

func (e *testExtension) CallMethod(_ context.Context, call *MethodCall) (any, error) {
	if call.Method == "fail" {
		return nil, &Error{Status: http.StatusTeapot, Message: "teapot", Code: "tea", Details: []int{1}, Source: SourceDownstream}
	}
	if call.Method == "plain" {
		return nil, errors.New("plain failure")
	}
	return map[string]any{"method": call.Method, "input": call.Input, "company": call.CompanyID}, nil
}

func (e *testExtension) RunJob(_ context.Context, job *JobRun) error {
	if job.Key == "bad" {
		return errors.New("job failed")
	}
	return nil
}

func (e *testExtension) OnEvent(context.Context, *Event) error { return nil }

func (e *testExtension) Health(context.Context) error {
	if e.env == nil {
		return errors.New("unconfigured")
	}
	return nil
}

func (e *testExtension) Stop(context.Context) error { return nil }

// run dispatches op and decodes an ok result into resp, returning the error envelope's
// code and message otherwise.
func run(t *testing.T, op uint32, req, resp proto.Message) (Code, string) {
	t.Helper()
	env := dispatch(op, marshal(t, req))
	require.NotEmpty(t, env)
	switch env[0] {
	case envOK:
		require.NoError(t, proto.Unmarshal(env[1:], resp))
		return 0, ""
	case envCodeError:
		return Code(env[1]), string(env[2:])
	default:
		t.Fatalf("unexpected envelope status %d", env[0])
		return 0, ""
	}
}

func TestDispatch(t *testing.T) {
	ext := &testExtension{}
	registered, handler = ext, nil
	t.Cleanup(func() { registered, handler = nil, nil })

	var desc extensionv1.DescribeResponse
	code, _ := run(t, opDescribe, &extensionv1.DescribeRequest{}, &desc)
	require.Zero(t, code)
	require.JSONEq(t, `{"key":"test.ext"}`, string(desc.ManifestJson))

	var health extensionv1.HealthResponse
	run(t, opHealth, &extensionv1.HealthRequest{}, &health)
	require.Equal(t, "degraded", health.Status)
	require.Equal(t, "unconfigured", health.Message)

	code, msg := run(t, opConfigure, &extensionv1.ConfigureRequest{ConfigJson: []byte(`"bad"`)}, &extensionv1.ConfigureResponse{})
	require.Equal(t, CodeFailedPrecondition, code)
	require.Equal(t, "error configuring: bad config", msg)
	code, _ = run(t, opConfigure, &extensionv1.ConfigureRequest{ConfigJson: []byte(`{}`), InstanceId: "i"}, &extensionv1.ConfigureResponse{})
	require.Zero(t, code)
	require.Equal(t, "i", ext.env.InstanceID)
	run(t, opHealth, &extensionv1.HealthRequest{}, &health)
	require.Equal(t, "ok", health.Status)

	var res extensionv1.HTTPResponse
	code, _ = run(t, opHandle, &extensionv1.HTTPRequest{
		Method: "GET", Path: "/api/things/42", RawQuery: "q=v", Pattern: "GET /api/things/{id}", Params: map[string]string{"id": "42"},
		Headers: map[string]*extensionv1.HeaderValues{"x-lower": {Values: []string{"yes"}}}, Actor: testActor, CompanyId: "c", RequestId: "r1",
	}, &res)
	require.Zero(t, code)
	require.Equal(t, int32(http.StatusAccepted), res.Status)
	require.Equal(t, []string{"a", "b"}, res.Headers["X-Two"].GetValues())
	require.Equal(t, []string{"application/json; charset=utf-8"}, res.Headers["Content-Type"].GetValues())
	require.JSONEq(t, `{"id":"42","param":"42","actor":"a","company":"c","header":"yes","query":"v","request":"r1","pattern":"GET /api/things/{id}"}`, string(res.Body))

	run(t, opHandle, &extensionv1.HTTPRequest{Method: "POST", Path: "/api/raw"}, &res)
	require.Equal(t, int32(http.StatusOK), res.Status)
	require.Equal(t, []string{"text/html; charset=utf-8"}, res.Headers["Content-Type"].GetValues(), "content type sniffed like net/http")

	run(t, opHandle, &extensionv1.HTTPRequest{Method: "POST", Path: "/api/err"}, &res)
	require.Equal(t, int32(http.StatusConflict), res.Status)
	require.JSONEq(t, `{"error":"taken","code":"taken","details":{"n":1}}`, string(res.Body))

	run(t, opHandle, &extensionv1.HTTPRequest{Method: "GET", Path: "/nowhere"}, &res)
	require.Equal(t, int32(http.StatusNotFound), res.Status)

	code, msg = run(t, opHandle, &extensionv1.HTTPRequest{Method: "POST", Path: "/api/panic"}, &res)
	require.Equal(t, CodeInternal, code)
	require.Equal(t, "panic in Handle: boom", msg)

	var callRes extensionv1.CallResponse
	run(t, opCall, &extensionv1.CallRequest{Method: "echo", InputJson: []byte(`{"a":1}`), CompanyId: "c"}, &callRes)
	require.Nil(t, callRes.Error)
	require.JSONEq(t, `{"method":"echo","input":{"a":1},"company":"c"}`, string(callRes.OutputJson))
	run(t, opCall, &extensionv1.CallRequest{Method: "fail"}, &callRes)
	require.True(t, proto.Equal(&extensionv1.Error{Status: 418, Message: "teapot", Code: "tea", DetailsJson: []byte(`[1]`), Source: "downstream"}, callRes.Error), "%v", callRes.Error)
	run(t, opCall, &extensionv1.CallRequest{Method: "plain"}, &callRes)
	require.True(t, proto.Equal(&extensionv1.Error{Status: 500, Message: "plain failure", Source: "plugin"}, callRes.Error), "%v", callRes.Error)

	var jobRes extensionv1.RunJobResponse
	run(t, opRunJob, &extensionv1.RunJobRequest{JobKey: "good"}, &jobRes)
	require.Nil(t, jobRes.Error)
	run(t, opRunJob, &extensionv1.RunJobRequest{JobKey: "bad"}, &jobRes)
	require.Equal(t, "job failed", jobRes.Error.GetMessage())

	var evRes extensionv1.OnEventResponse
	code, _ = run(t, opOnEvent, &extensionv1.Event{Type: "x"}, &evRes)
	require.Zero(t, code)
	require.Nil(t, evRes.Error)

	code, _ = run(t, opShutdown, &extensionv1.ShutdownRequest{}, &extensionv1.ShutdownResponse{})
	require.Zero(t, code)

	code, msg = run(t, 99, &extensionv1.ShutdownRequest{}, &extensionv1.ShutdownResponse{})
	require.Equal(t, CodeUnimplemented, code)
	require.Equal(t, "unknown operation 99", msg)
}

// bareExtension implements only the base interface.
type bareExtension struct{}

func (bareExtension) Manifest() []byte { return []byte(`{}`) }

func TestDispatchUnimplemented(t *testing.T) {
	registered, handler = bareExtension{}, nil
	t.Cleanup(func() { registered, handler = nil, nil })
	for op, want := range map[uint32]string{
		opHandle: "extension serves no routes", opCall: "extension provides no methods",
		opRunJob: "extension runs no jobs", opOnEvent: "extension handles no events",
	} {
		code, msg := run(t, op, &extensionv1.DescribeRequest{}, &extensionv1.DescribeResponse{})
		require.Equal(t, CodeUnimplemented, code)
		require.Equal(t, want, msg)
	}
	var health extensionv1.HealthResponse
	run(t, opHealth, &extensionv1.HealthRequest{}, &health)
	require.Equal(t, "ok", health.Status)
}

// fakeHost answers host calls with the generated types, checking each request.
type fakeHost struct {
	t       *testing.T
	service uint32
	want    proto.Message // the request the guest must send
	resp    proto.Message // the response to send
	errEnv  []byte        // an error envelope to send instead
}

func (h *fakeHost) call(service uint32, in []byte) []byte {
	require.Equal(h.t, h.service, service)
	got := h.want.ProtoReflect().New().Interface()
	require.NoError(h.t, proto.Unmarshal(in, got))
	require.True(h.t, proto.Equal(h.want, got), "request: want %v, got %v", h.want, got)
	if h.errEnv != nil {
		return h.errEnv
	}
	b, err := proto.MarshalOptions{}.MarshalAppend([]byte{envOK}, h.resp)
	require.NoError(h.t, err)
	return b
}

func TestHostClients(t *testing.T) {
	ctx := context.Background()
	h := &fakeHost{t: t}
	hostCallFunc = h.call
	t.Cleanup(func() { hostCallFunc = func(uint32, []byte) []byte { return nil } })
	expect := func(service uint32, want, resp proto.Message) {
		h.service, h.want, h.resp, h.errEnv = service, want, resp, nil
	}

	expect(1, &hostv1.AppendActivityRequest{CompanyId: "c", ActorType: "agent", ActorId: "a", Action: "x.y", EntityType: "e",
		EntityId: "1", AgentId: "a", RunId: "r", DetailsJson: []byte(`{"n":1}`)}, &hostv1.AppendActivityResponse{Id: "id", CreatedAt: "now"})
	act, err := Activity(ctx, &AppendActivityRequest{CompanyID: "c", ActorType: "agent", ActorID: "a", Action: "x.y", EntityType: "e",
		EntityID: "1", AgentID: "a", RunID: "r", DetailsJSON: []byte(`{"n":1}`)})
	require.NoError(t, err)
	require.Equal(t, &AppendActivityResponse{ID: "id", CreatedAt: "now"}, act)

	expect(1, &hostv1.AppendActivityRequest{CompanyId: "c", ActorType: "user", ActorId: "u", Action: "x.y", DetailsJson: []byte(`{"n":2}`)}, &hostv1.AppendActivityResponse{})
	require.NoError(t, LogActivity(ctx, &ActivityEntry{CompanyID: "c", Actor: &Actor{Type: "board", UserID: "u"}, Action: "x.y", Details: map[string]int{"n": 2}}))

	expect(2, &hostv1.CheckRequest{Actor: testActor, CompanyId: "c", Permission: "p"}, &hostv1.CheckResponse{Allowed: false, Reason: "no"})
	chk, err := AuthzCheck(ctx, &CheckRequest{Actor: wantActor(), CompanyID: "c", Permission: "p"})
	require.NoError(t, err)
	require.Equal(t, &CheckResponse{Reason: "no"}, chk)

	expect(3, &hostv1.GetAgentRequest{AgentId: "a"}, &hostv1.AgentIdentity{Id: "a", CompanyId: "c", Name: "n", UrlKey: "u", Role: "r", Status: "s", CreatedAt: "c1", UpdatedAt: "u1"})
	agent, err := GetAgent(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, &AgentIdentity{ID: "a", CompanyID: "c", Name: "n", URLKey: "u", Role: "r", Status: "s", CreatedAt: "c1", UpdatedAt: "u1"}, agent)

	expect(4, &hostv1.GetCompanyRequest{CompanyId: "c"}, &hostv1.CompanyResponse{CompanyJson: []byte(`{"id":"c"}`)})
	company, err := GetCompany(ctx, "c")
	require.NoError(t, err)
	require.JSONEq(t, `{"id":"c"}`, string(company))

	expect(5, &hostv1.InvokeRequest{Method: "o.m", InputJson: []byte(`{"a":1}`), Actor: testActor, CompanyId: "c"}, &hostv1.InvokeResponse{OutputJson: []byte(`{"b":2}`)})
	var out struct{ B int }
	require.NoError(t, Call(ctx, "o.m", wantActor(), "c", map[string]int{"a": 1}, &out))
	require.Equal(t, 2, out.B)
	expect(5, &hostv1.InvokeRequest{Method: "o.m", InputJson: []byte(`null`)}, &hostv1.InvokeResponse{Error: &extensionv1.Error{Status: 404, Message: "nope", Code: "nf", DetailsJson: []byte(`{}`), Source: "downstream"}})
	err = Call(ctx, "o.m", nil, "", nil, nil)
	require.Equal(t, &Error{Status: 404, Message: "nope", Code: "nf", Details: json.RawMessage(`{}`), Source: "downstream"}, err)

	expect(6, &hostv1.PublishRequest{Type: "t", CompanyId: "c", PayloadJson: []byte(`1`)}, &hostv1.PublishResponse{Id: "p"})
	pub, err := Publish(ctx, &PublishRequest{Type: "t", CompanyID: "c", PayloadJSON: []byte(`1`)})
	require.NoError(t, err)
	require.Equal(t, "p", pub.ID)

	expect(7, &hostv1.GetSettingsRequest{Section: "general"}, &hostv1.GetSettingsResponse{SettingsJson: []byte(`{"x":true}`)})
	settings, err := Settings(ctx, "general")
	require.NoError(t, err)
	require.JSONEq(t, `{"x":true}`, string(settings))

	expect(8, &hostv1.StorageKey{CompanyId: "c", Key: "k"}, &hostv1.StorageGetResponse{Value: []byte("v"), Found: true})
	v, found, err := StorageGet(ctx, "c", "k")
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, "v", string(v))

	expect(9, &hostv1.StorageSetRequest{CompanyId: "c", Key: "k", Value: []byte("v")}, &hostv1.StorageSetResponse{})
	require.NoError(t, StorageSet(ctx, "c", "k", []byte("v")))

	expect(10, &hostv1.StorageKey{CompanyId: "c", Key: "k"}, &hostv1.StorageDeleteResponse{Deleted: true})
	deleted, err := StorageDelete(ctx, "c", "k")
	require.NoError(t, err)
	require.True(t, deleted)

	expect(11, &hostv1.EnqueueRequest{JobKey: "j", ArgsJson: []byte(`{}`), UniqueKey: "u", RunAt: "later", MaxAttempts: -3}, &hostv1.EnqueueResponse{JobId: "1", Duplicate: true})
	enq, err := Enqueue(ctx, &EnqueueRequest{JobKey: "j", ArgsJSON: []byte(`{}`), UniqueKey: "u", RunAt: "later", MaxAttempts: -3})
	require.NoError(t, err)
	require.Equal(t, &EnqueueResponse{JobID: "1", Duplicate: true}, enq)

	expect(12, &hostv1.ResolveSecretRequest{CompanyId: "c", SecretId: "s", Version: 2}, &hostv1.ResolveSecretResponse{Value: "shh", Version: 2})
	sec, err := ResolveSecret(ctx, &ResolveSecretRequest{CompanyID: "c", SecretID: "s", Version: 2})
	require.NoError(t, err)
	require.Equal(t, &ResolveSecretResponse{Value: "shh", Version: 2}, sec)

	// Errors from the host keep their service and code.
	expect(8, &hostv1.StorageKey{CompanyId: "c", Key: "k"}, nil)
	h.errEnv = append([]byte{envCodeError, byte(CodePermissionDenied)}, "capability storage not declared"...)
	_, _, err = StorageGet(ctx, "c", "k")
	require.Equal(t, &HostError{Service: "storage.get", Code: CodePermissionDenied, Message: "capability storage not declared"}, err)
	h.errEnv = append([]byte{envError}, "plain"...)
	_, _, err = StorageGet(ctx, "c", "k")
	require.Equal(t, &HostError{Service: "storage.get", Code: CodeUnknown, Message: "plain"}, err)
	h.errEnv = []byte{envOK, 0xff} // malformed response
	_, _, err = StorageGet(ctx, "c", "k")
	require.ErrorContains(t, err, "storage.get: malformed response from host")

	canceled, cancel := context.WithCancel(ctx)
	cancel()
	_, _, err = StorageGet(canceled, "c", "k")
	require.Equal(t, CodeDeadlineExceeded, err.(*HostError).Code)
}

func TestNoHost(t *testing.T) {
	_, _, err := StorageGet(context.Background(), "c", "k")
	require.Equal(t, &HostError{Service: "storage.get", Code: CodeUnavailable, Message: ErrNoHost.Message}, err)
}

// FuzzDecodeHTTPRequest checks that the guest decoder never panics and agrees with the
// generated code on whatever the generated code accepts.
func FuzzDecodeHTTPRequest(f *testing.F) {
	f.Add(marshal(f, &extensionv1.HTTPRequest{Method: "GET", Path: "/a", Params: map[string]string{"a": "b"},
		Headers: map[string]*extensionv1.HeaderValues{"X": {Values: []string{"1"}}}, Body: []byte("b"), Actor: testActor}))
	f.Add(withUnknownFields(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodeHTTPRequest(b)
		_, _ = decodeEnv(b)
		_, _ = decodeMethodCall(b)
		_, _ = decodeJobRun(b)
		_, _ = decodeEvent(b)
		var want extensionv1.HTTPRequest
		if proto.Unmarshal(b, &want) != nil {
			return
		}
		require.NoError(t, err)
		require.Equal(t, want.Method, got.Method)
		require.Equal(t, want.Path, got.Path)
		require.Equal(t, want.RawQuery, got.RawQuery)
		require.Equal(t, string(want.Body), string(got.Body))
		require.Equal(t, len(want.Params), len(got.Params))
		for k, v := range want.Params {
			require.Equal(t, v, got.Params[k])
		}
		require.Equal(t, len(want.Headers), len(got.Headers))
		for k, v := range want.Headers {
			require.Equal(t, len(v.GetValues()), len(got.Headers[k]))
		}
		require.Equal(t, want.Actor != nil, got.Actor != nil)
		if want.Actor != nil {
			require.Equal(t, want.Actor.CompanyIds, got.Actor.CompanyIDs)
			require.Equal(t, want.Actor.Type, got.Actor.Type)
		}
	})
}
