package sdk

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	extensionv1 "github.com/keelhq/keel/sdk/proto/extension/v1"
)

// server adapts an Extension to the generated gRPC service.
type server struct {
	extensionv1.UnimplementedExtensionServer
	ext    Extension
	broker *plugin.GRPCBroker
	log    hclog.Logger

	mu      sync.RWMutex
	handler http.Handler
	env     *Env
	// metrics is the registry handed to the extension as Env.Metrics, kept across Configures.
	metrics *prometheus.Registry
}

func newServer(ext Extension, broker *plugin.GRPCBroker) *server {
	return &server{ext: ext, broker: broker, metrics: prometheus.NewRegistry(), log: hclog.New(&hclog.LoggerOptions{
		Name: ext.Manifest().Key, Output: os.Stderr, JSONFormat: true, Level: hclog.Info,
	})}
}

// NewServer returns the gRPC service implementation for an extension whose host services
// come from env (used by in-process tests and non-go-plugin transports).
func NewServer(ext Extension, env *Env) extensionv1.ExtensionServer {
	s := &server{ext: ext, env: env, log: hclog.NewNullLogger(), metrics: prometheus.NewRegistry()}
	if env != nil && env.Logger != nil {
		s.log = env.Logger
	}
	if env != nil && env.Metrics != nil {
		s.metrics = env.Metrics
	}
	if hp, ok := ext.(HTTPProvider); ok {
		s.handler = hp.HTTPHandler()
	}
	return s
}

func (s *server) Describe(context.Context, *extensionv1.DescribeRequest) (*extensionv1.DescribeResponse, error) {
	b, err := json.Marshal(s.ext.Manifest())
	if err != nil {
		return nil, status.Errorf(codes.Internal, "error encoding manifest: %v", err)
	}
	return &extensionv1.DescribeResponse{ManifestJson: b}, nil
}

func (s *server) Configure(ctx context.Context, req *extensionv1.ConfigureRequest) (*extensionv1.ConfigureResponse, error) {
	env := &Env{
		Config: req.ConfigJson, DatabaseURL: req.DatabaseUrl, DataDir: req.DataDir, InstanceID: req.InstanceId,
		APIURL: req.ApiUrl, KernelVersion: req.KernelVersion, Logger: s.log, Metrics: s.metrics,
		Key: s.ext.Manifest().Key,
	}
	if env.DatabaseURL != "" {
		env.Schema = SchemaName(env.Key)
	}
	if s.broker != nil && req.HostBrokerId != 0 {
		conn, err := s.broker.DialWithOptions(req.HostBrokerId, GRPCDialOptions()...)
		if err != nil {
			return nil, status.Errorf(codes.Unavailable, "error dialing host services: %v", err)
		}
		env.Host = NewHost(conn)
	}
	if c, ok := s.ext.(Configurer); ok {
		if err := c.Configure(ctx, env); err != nil {
			return nil, status.Errorf(codes.FailedPrecondition, "error configuring %s: %v", s.ext.Manifest().Key, err)
		}
	}
	s.mu.Lock()
	s.env = env
	if hp, ok := s.ext.(HTTPProvider); ok {
		s.handler = hp.HTTPHandler()
	}
	s.mu.Unlock()
	return &extensionv1.ConfigureResponse{}, nil
}

func (s *server) Handle(ctx context.Context, req *extensionv1.HTTPRequest) (*extensionv1.HTTPResponse, error) {
	s.mu.RLock()
	h := s.handler
	s.mu.RUnlock()
	if h == nil {
		return nil, status.Error(codes.Unimplemented, "extension serves no routes")
	}
	if req.RequestId != "" {
		ctx = WithLogger(ctx, s.log.With("request_id", req.RequestId))
	} else {
		ctx = WithLogger(ctx, s.log)
	}
	return ServeHTTPRequest(ctx, h, req), nil
}

func (s *server) Call(ctx context.Context, req *extensionv1.CallRequest) (*extensionv1.CallResponse, error) {
	if req.Method == MetricsMethod && req.Caller == metricsCaller {
		b, err := encodeMetrics(s.metrics)
		if err != nil {
			return &extensionv1.CallResponse{Error: toProtoError(err)}, nil
		}
		return &extensionv1.CallResponse{OutputJson: b}, nil
	}
	if req.Caller == hostCaller {
		if out, handled, err := s.reservedConfigCall(ctx, req.Method, req.InputJson); handled {
			return encodeCallResult(req.Method, out, err), nil
		}
	}
	if req.Caller == featureCaller && IsEnvironmentMethod(req.Method) {
		ctx = WithLogger(ctx, s.log)
		p, ok := s.ext.(EnvironmentDriverProvider)
		if !ok {
			return encodeCallResult(req.Method, nil, &Error{Status: 501, Code: "method_not_provided", Message: "extension implements no environment driver"}), nil
		}
		out, err := CallEnvironmentDriver(WithRequestInfo(ctx, req.Actor, req.CompanyId, "", nil), p.EnvironmentDriver(), req.Method, req.InputJson)
		return encodeCallResult(req.Method, out, err), nil
	}
	if req.Caller == featureCaller && IsReservedMethod(req.Method) {
		ctx = WithLogger(ctx, s.log)
		if out, handled, err := callFeature(ctx, s.ext, req.Method, req.Actor, req.InputJson); handled {
			return encodeCallResult(req.Method, out, err), nil
		}
	}
	mp, ok := s.ext.(MethodProvider)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "extension provides no methods")
	}
	out, err := mp.CallMethod(ctx, &MethodCall{Method: req.Method, Input: req.InputJson, Actor: req.Actor, Caller: req.Caller, CompanyID: req.CompanyId})
	if err != nil {
		return &extensionv1.CallResponse{Error: toProtoError(err)}, nil
	}
	b, err := json.Marshal(out)
	if err != nil {
		return &extensionv1.CallResponse{Error: toProtoError(fmt.Errorf("error encoding result of %s: %w", req.Method, err))}, nil
	}
	return &extensionv1.CallResponse{OutputJson: b}, nil
}

func (s *server) RunJob(ctx context.Context, req *extensionv1.RunJobRequest) (*extensionv1.RunJobResponse, error) {
	jr, ok := s.ext.(JobRunner)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "extension runs no jobs")
	}
	ctx = WithLogger(ctx, s.log.With("job", req.JobKey))
	err := jr.RunJob(ctx, &JobRun{Key: req.JobKey, Args: req.ArgsJson, Attempt: int(req.Attempt), ID: req.JobId})
	return &extensionv1.RunJobResponse{Error: toProtoError(err)}, nil
}

func (s *server) OnEvent(ctx context.Context, ev *extensionv1.Event) (*extensionv1.OnEventResponse, error) {
	eh, ok := s.ext.(EventHandler)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "extension handles no events")
	}
	err := eh.OnEvent(ctx, &Event{ID: ev.Id, Type: ev.Type, CompanyID: ev.CompanyId, Payload: ev.PayloadJson, OccurredAt: ev.OccurredAt, Source: ev.Source})
	return &extensionv1.OnEventResponse{Error: toProtoError(err)}, nil
}

func (s *server) Health(ctx context.Context, _ *extensionv1.HealthRequest) (*extensionv1.HealthResponse, error) {
	if hc, ok := s.ext.(HealthChecker); ok {
		if err := hc.Health(ctx); err != nil {
			return &extensionv1.HealthResponse{Status: "degraded", Message: err.Error()}, nil
		}
	}
	return &extensionv1.HealthResponse{Status: "ok"}, nil
}

func (s *server) Shutdown(ctx context.Context, _ *extensionv1.ShutdownRequest) (*extensionv1.ShutdownResponse, error) {
	if st, ok := s.ext.(Stopper); ok {
		if err := st.Stop(ctx); err != nil {
			return nil, status.Errorf(codes.Internal, "error stopping: %v", err)
		}
	}
	return &extensionv1.ShutdownResponse{}, nil
}

var _ extensionv1.ExtensionServer = (*server)(nil)

// encodeCallResult turns a reserved call's result or error into its response.
func encodeCallResult(method string, out any, err error) *extensionv1.CallResponse {
	if err != nil {
		return &extensionv1.CallResponse{Error: toProtoError(err)}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return &extensionv1.CallResponse{Error: toProtoError(fmt.Errorf("error encoding result of %s: %w", method, err))}
	}
	return &extensionv1.CallResponse{OutputJson: b}
}
