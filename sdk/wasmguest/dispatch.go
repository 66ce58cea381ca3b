package wasmguest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
)

// Operations of keel_call (ABI v1). These never change.
const (
	opDescribe  = 1
	opConfigure = 2
	opHandle    = 3
	opCall      = 4
	opRunJob    = 5
	opOnEvent   = 6
	opHealth    = 7
	opShutdown  = 8
)

var opNames = [...]string{
	opDescribe: "Describe", opConfigure: "Configure", opHandle: "Handle", opCall: "Call",
	opRunJob: "RunJob", opOnEvent: "OnEvent", opHealth: "Health", opShutdown: "Shutdown",
}

// handler is the registered extension's HTTP handler, set after Configure (or lazily for
// an extension that is never configured).
var handler http.Handler

// dispatch serves one keel_call: in is the encoded request; the result is the envelope
// (status byte, then the encoded response or the error). A panic in the extension becomes
// an error envelope; the instance stays usable.
func dispatch(op uint32, in []byte) (env []byte) {
	defer func() {
		if r := recover(); r != nil {
			name := "operation"
			if op < uint32(len(opNames)) && opNames[op] != "" {
				name = opNames[op]
			}
			env = errorEnvelope(CodeInternal, fmt.Sprintf("panic in %s: %v", name, r))
		}
	}()
	ext := registered
	if ext == nil {
		return errorEnvelope(CodeFailedPrecondition, "wasmguest: no extension registered (call wasmguest.Register from init)")
	}
	ctx := context.Background()
	switch op {
	case opDescribe:
		e := okEncoder()
		e.bytes(1, ext.Manifest())
		return e.b
	case opConfigure:
		env, err := decodeEnv(in)
		if err != nil {
			return errorEnvelope(CodeInvalidArgument, "malformed ConfigureRequest: "+err.Error())
		}
		if c, ok := ext.(Configurer); ok {
			if err := c.Configure(ctx, env); err != nil {
				return errorEnvelope(CodeFailedPrecondition, "error configuring: "+err.Error())
			}
		}
		if hp, ok := ext.(HTTPProvider); ok {
			handler = hp.HTTPHandler()
		}
		return okEncoder().b
	case opHandle:
		h := handler
		if h == nil {
			hp, ok := ext.(HTTPProvider)
			if !ok {
				return errorEnvelope(CodeUnimplemented, "extension serves no routes")
			}
			h = hp.HTTPHandler()
			handler = h
		}
		req, err := decodeHTTPRequest(in)
		if err != nil {
			return errorEnvelope(CodeInvalidArgument, "malformed HTTPRequest: "+err.Error())
		}
		return serveHTTP(ctx, h, req)
	case opCall:
		c, err := decodeMethodCall(in)
		if err != nil {
			return errorEnvelope(CodeInvalidArgument, "malformed CallRequest: "+err.Error())
		}
		if c.Actor != nil {
			ctx = context.WithValue(ctx, actorKey, c.Actor)
		}
		ctx = context.WithValue(ctx, companyKey, c.CompanyID)
		e := okEncoder()
		out, handled, err := callFeature(ctx, ext, c)
		if !handled {
			mp, ok := ext.(MethodProvider)
			if !ok {
				return errorEnvelope(CodeUnimplemented, "extension provides no methods")
			}
			out, err = mp.CallMethod(ctx, c)
		}
		if err == nil {
			var b []byte
			if b, err = json.Marshal(out); err == nil {
				e.bytes(1, b)
				return e.b
			}
			err = fmt.Errorf("error encoding result of %s: %w", c.Method, err)
		}
		e.message(2, protoError(err).encode)
		return e.b
	case opRunJob:
		jr, ok := ext.(JobRunner)
		if !ok {
			return errorEnvelope(CodeUnimplemented, "extension runs no jobs")
		}
		j, err := decodeJobRun(in)
		if err != nil {
			return errorEnvelope(CodeInvalidArgument, "malformed RunJobRequest: "+err.Error())
		}
		return resultEnvelope(jr.RunJob(ctx, j))
	case opOnEvent:
		eh, ok := ext.(EventHandler)
		if !ok {
			return errorEnvelope(CodeUnimplemented, "extension handles no events")
		}
		ev, err := decodeEvent(in)
		if err != nil {
			return errorEnvelope(CodeInvalidArgument, "malformed Event: "+err.Error())
		}
		return resultEnvelope(eh.OnEvent(ctx, ev))
	case opHealth:
		e := okEncoder()
		if hc, ok := ext.(HealthChecker); ok {
			if err := hc.Health(ctx); err != nil {
				e.string(1, "degraded")
				e.string(2, err.Error())
				return e.b
			}
		}
		e.string(1, "ok")
		return e.b
	case opShutdown:
		if st, ok := ext.(Stopper); ok {
			if err := st.Stop(ctx); err != nil {
				return errorEnvelope(CodeInternal, "error stopping: "+err.Error())
			}
		}
		return okEncoder().b
	default:
		return errorEnvelope(CodeUnimplemented, fmt.Sprintf("unknown operation %d", op))
	}
}

// okEncoder returns an encoder whose buffer starts with the ok status byte.
func okEncoder() encoder { return encoder{b: []byte{envOK}} }

// resultEnvelope encodes RunJobResponse and OnEventResponse: field 1 is the error, if any.
func resultEnvelope(err error) []byte {
	e := okEncoder()
	if err != nil {
		e.message(1, protoError(err).encode)
	}
	return e.b
}

func errorEnvelope(code Code, msg string) []byte {
	b := make([]byte, 2, 2+len(msg))
	b[0], b[1] = envCodeError, byte(code)
	return append(b, msg...)
}
