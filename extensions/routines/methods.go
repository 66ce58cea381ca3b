package routines

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"time"

	"github.com/keelhq/keel/sdk"
)

func init() {
	addMethods(map[string]method{
		"tick": {
			Description: "Run the schedule ticker at an instant (kernel and system callers only). Input {now: RFC 3339, default the " +
				"wall clock}. Output {now, claimed, runs: [{id, routineId, triggerId, status, scheduledFor}], recovered}.",
			Call: (*Routines).methodTick,
		},
		"invokeRoute": {
			Description: "Serve one of the extension's own routes for an owner that manages routines on a company's behalf " +
				"(builtinagents only). Input {method, path, body}: the route runs with the call's actor and company, with " +
				"every check the HTTP route makes. Output {status, body}: the route's answer, errors included.",
			Call: (*Routines).methodInvokeRoute,
		},
	})
}

// routeCallers are the extensions that may call invokeRoute.
var routeCallers = []string{"builtinagents"}

// routeAnswer is the output of invokeRoute.
type routeAnswer struct {
	Status int             `json:"status"`
	Body   json.RawMessage `json:"body,omitempty"`
}

func (x *Routines) methodInvokeRoute(ctx context.Context, call *sdk.MethodCall) (any, error) {
	if !slices.Contains(routeCallers, call.Caller) {
		return nil, forbidden("Only the built-in agent service may invoke routine routes")
	}
	var in struct {
		Method string          `json:"method"`
		Path   string          `json:"path"`
		Body   json.RawMessage `json:"body"`
	}
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	if !strings.HasPrefix(in.Path, "/api/") || strings.ContainsAny(in.Path, "?#") {
		return nil, invalid("path", "must be an /api/ path without a query")
	}
	if x.mux == nil {
		return nil, fmt.Errorf("routines extension is not configured")
	}
	actor := call.Actor
	if actor == nil || actor.Type == "" || actor.Type == "none" {
		actor = sdk.SystemActor()
	}
	ctx = sdk.WithRequestInfo(ctx, actor, call.CompanyID, "", nil)
	req, err := http.NewRequestWithContext(ctx, in.Method, in.Path, bytes.NewReader(in.Body))
	if err != nil {
		return nil, invalid("method", err.Error())
	}
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	x.mux.ServeHTTP(rec, req)
	return &routeAnswer{Status: rec.Code, Body: bytes.TrimSpace(rec.Body.Bytes())}, nil
}

func (x *Routines) methodTick(ctx context.Context, call *sdk.MethodCall) (any, error) {
	if call.Caller != "kernel" && (call.Actor == nil || call.Actor.Type != "system") {
		return nil, forbidden("Only the kernel or the system may tick routines")
	}
	var in struct {
		Now string `json:"now"`
	}
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	now := time.Now()
	if s := strings.TrimSpace(in.Now); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return nil, invalid("now", "must be an RFC 3339 time")
		}
		now = t
	}
	return x.tick(ctx, now)
}
