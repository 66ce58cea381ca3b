package zetagateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/keelhq/keel/sdk/adapter"
)

// healthTimeout bounds the health probe.
const healthTimeout = 2 * time.Second

// TestEnvironment checks a config (adapter.Runner): the base URL, the key, the transport,
// then GET {base}/health (REFERENCE-adapters.md 8, testEnvironment).
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
		code := "hermes_gateway_config_invalid"
		if errors.As(err, &ce) {
			code = ce.Code
		}
		hint := ""
		if code == "hermes_gateway_plain_http_remote_denied" {
			hint = "Use https, or set dangerouslyAllowInsecureRemoteHttp on a trusted network."
		}
		add(code, "error", err.Error(), hint)
		return done()
	}
	add("hermes_gateway_api_base_url_valid", "info", "API base "+c.BaseURL, "")
	if c.DashboardMapped {
		add("hermes_gateway_dashboard_root_mapped", "info", "The dashboard URL was mapped to its API path "+c.BaseURL, "")
	}
	switch {
	case c.PlainHTTP && c.Loopback:
		add("hermes_gateway_loopback_http_allowed", "info", "Plain HTTP to a loopback host is allowed", "")
	case c.PlainHTTP:
		add("hermes_gateway_plain_http_remote_unsafe_allowed", "warn", "Plain HTTP to a non-loopback host is allowed by dangerouslyAllowInsecureRemoteHttp", "Use https.")
	}
	ctx, cancel := context.WithTimeout(context.Background(), healthTimeout+5*time.Second)
	defer cancel()
	key, err := c.APIKey.Resolve(ctx, a.host, req.CompanyID, Key)
	if err != nil {
		add("hermes_gateway_api_key_missing", "error", "apiKey cannot be resolved: "+err.Error(), "")
		return done()
	}
	hctx, hcancel := context.WithTimeout(ctx, healthTimeout)
	defer hcancel()
	hreq, err := http.NewRequestWithContext(hctx, http.MethodGet, c.BaseURL+"/health", nil)
	if err != nil {
		add("hermes_gateway_health_unreachable", "error", err.Error(), "")
		return done()
	}
	for k, v := range c.Headers {
		hreq.Header.Set(k, v)
	}
	hreq.Header.Set("Authorization", "Bearer "+key)
	res, err := a.client.Do(hreq)
	if err != nil {
		add("hermes_gateway_health_unreachable", "error", fmt.Sprintf("GET %s/health failed: %v", c.BaseURL, err), "Check that the run server is up and reachable from this host.")
		return done()
	}
	res.Body.Close()
	if res.StatusCode < 200 || res.StatusCode > 299 {
		add("hermes_gateway_health_failed", "error", fmt.Sprintf("GET %s/health answered HTTP %d", c.BaseURL, res.StatusCode), "")
		return done()
	}
	add("hermes_gateway_health_ok", "info", fmt.Sprintf("GET %s/health answered HTTP %d", c.BaseURL, res.StatusCode), "")
	return done()
}
