package thetagateway

import (
	"context"
	"errors"
	"time"

	"github.com/keelhq/keel/adapters/internal/gateway"
	"github.com/keelhq/keel/sdk/adapter"
)

// probeTimeout bounds the handshake probe.
const probeTimeout = 3 * time.Second

// TestEnvironment checks a config (adapter.Runner): the URL, the transport and the
// credentials, then probes the handshake: the challenge and a connect request in probe
// mode (REFERENCE-adapters.md 7, testEnvironment).
func (a *Adapter) TestEnvironment(req *adapter.TestEnvironmentRequest) *adapter.TestEnvironmentResult {
	var checks []adapter.Check
	add := func(name, level, msg, hint string) {
		checks = append(checks, adapter.Check{Name: name, OK: level != "error", Level: level, Message: msg, Hint: hint})
	}
	done := func() *adapter.TestEnvironmentResult {
		out := &adapter.TestEnvironmentResult{OK: true, Status: "pass", Checks: checks}
		for _, c := range checks {
			switch {
			case c.Level == "error":
				out.OK, out.Status = false, "fail"
			case c.Level == "warn" && out.Status == "pass":
				out.Status = "warn"
			}
		}
		return out
	}
	c, err := ParseConfig(req.Config)
	if err != nil {
		var ce *configError
		code := "openclaw_gateway_config_invalid"
		if errors.As(err, &ce) {
			code = ce.Code
		}
		if code == "openclaw_gateway_url_protocol" {
			code = "openclaw_gateway_url_protocol_invalid"
		}
		add(code, "error", err.Error(), "")
		return done()
	}
	add("openclaw_gateway_url_valid", "info", "Gateway URL "+c.URL, "")
	if c.PlainRemote {
		add("openclaw_gateway_plaintext_remote_ws", "warn", "ws:// to a non-loopback host sends credentials in the clear", "Use wss://.")
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout+5*time.Second)
	defer cancel()
	s, err := a.resolveSecrets(ctx, &Config{AuthToken: c.AuthToken, Password: c.Password, DeviceToken: c.DeviceToken, DisableDeviceAuth: true}, req.CompanyID)
	if err != nil {
		add("openclaw_gateway_auth_missing", "warn", err.Error(), "")
		s = &secrets{}
	}
	s.token = c.authToken(s.token)
	if s.token != "" || s.password != "" {
		add("openclaw_gateway_auth_present", "info", "A gateway token or password is configured", "")
	} else {
		add("openclaw_gateway_auth_missing", "warn", "No gateway token or password is configured", "Set authToken (or a token header) unless the gateway needs none.")
	}
	probe := *c
	probe.ClientID, probe.ClientVersion, probe.ClientMode, probe.ConnectTimeout = defaultClientID, "service-probe", "probe", probeTimeout
	r := &run{a: a, c: &probe, sec: s, red: gateway.NewRedactor(s.token, s.password)}
	pctx, pcancel := context.WithTimeout(ctx, probeTimeout)
	defer pcancel()
	cl, err := r.connect(pctx, c.Scopes, false, nil)
	var ge *gatewayError
	switch {
	case err == nil:
		cl.close("service-probe")
		add("openclaw_gateway_probe_ok", "info", "The gateway answered the challenge and accepted the connect request", "")
	case errors.As(err, &ge):
		add("openclaw_gateway_probe_challenge_only", "warn", "The gateway sent its challenge but refused the probe: "+r.red.Redact(ge.Error()), "")
	case isTimeout(err):
		add("openclaw_gateway_probe_failed", "warn", "The gateway did not complete the handshake: "+r.red.Redact(err.Error()), "")
	default:
		add("openclaw_gateway_probe_error", "warn", "The gateway could not be reached: "+r.red.Redact(err.Error()), "Check that the gateway is up and reachable from this host.")
	}
	return done()
}

func isTimeout(err error) bool {
	var te *timeoutError
	return errors.As(err, &te)
}
