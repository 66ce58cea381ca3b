package zetagateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/keelhq/keel/adapters/internal/gateway"
)

// ConfigSchema is the JSON Schema of a zeta_gateway agent's adapterConfig (spec part 2,
// "Remote-run gateway adapter config").
const ConfigSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "zeta_gateway adapter config",
  "type": "object",
  "required": ["apiBaseUrl", "apiKey"],
  "$defs": {
    "secret": {
      "oneOf": [
        {"type": "string", "minLength": 1},
        {"type": "object", "required": ["type", "secretId"], "properties": {
          "type": {"const": "secret_ref"}, "secretId": {"type": "string", "minLength": 1},
          "version": {"oneOf": [{"const": "latest"}, {"type": "integer", "minimum": 1}]}}},
        {"type": "object", "required": ["type", "value"], "properties": {"type": {"const": "plain"}, "value": {"type": "string"}}}
      ]
    }
  },
  "properties": {
    "apiBaseUrl": {"type": "string", "minLength": 1, "description": "Base URL of the remote run server (http or https). A dashboard root or chat URL (port 9119, path / or /chat) is mapped to its /api path; HTTPS is preferred for non-loopback hosts."},
    "baseUrl": {"type": "string", "minLength": 1, "description": "Alias of apiBaseUrl."},
    "url": {"type": "string", "minLength": 1, "description": "Alias of apiBaseUrl."},
    "apiKey": {"$ref": "#/$defs/secret", "description": "The remote server's key (not a keel API key), sent as a Bearer token. Stored as a secret reference {type: secret_ref, secretId, version}; a plain value given on create or patch is moved into a company secret."},
    "token": {"$ref": "#/$defs/secret", "description": "Alias of apiKey."},
    "dangerouslyAllowInsecureRemoteHttp": {"type": "boolean", "default": false, "description": "Allow plain HTTP to a non-loopback host; loopback HTTP is always allowed."},
    "sessionKeyStrategy": {"enum": ["issue", "agent", "run", "none"], "default": "issue", "description": "issue (one session per issue), agent (one per agent), run (one per run), none (no session header)."},
    "timeoutSec": {"type": "number", "minimum": 0, "default": 600, "description": "Run timeout in seconds; 0 means none. On timeout the remote run is stopped."},
    "eventReconnectMs": {"type": "number", "minimum": 0, "default": 2000, "description": "Delay before reconnecting the event stream after a non-terminal disconnect (clamped to 250-30000)."},
    "pollIntervalMs": {"type": "number", "minimum": 0, "default": 1000, "description": "Interval of the status polls that back the event stream up (clamped to 250-10000)."},
    "serviceApiUrl": {"type": "string", "description": "The keel API URL the remote agent calls back, when it differs from this instance's."},
    "headers": {"oneOf": [{"type": "object", "additionalProperties": {"type": "string"}}, {"type": "string"}], "description": "Extra request headers (an object or a JSON object string). Authorization, Accept, Content-Type, Idempotency-Key and X-Hermes-Session-Key are generated and cannot be overridden."},
    "instructions": {"type": "string", "description": "Instructions sent with each run (default: follow the wake instructions, expose no secrets)."},
    "payloadTemplate": {"type": "object", "description": "Fields merged into the POST /v1/runs body; its input is prepended to the wake text and its instructions are used when instructions is not set."},
    "graceSec": {"type": "number", "minimum": 0, "description": "Extra seconds the engine waits past timeoutSec for the adapter to report."}
  }
}`

// Defaults and bounds of the timing keys (spec part 2: 600 s and 2000 ms).
const (
	defaultTimeoutSec     = 600
	defaultReconnect      = 2000 * time.Millisecond
	defaultPollInterval   = time.Second
	minReconnect          = 250 * time.Millisecond
	maxReconnect          = 30 * time.Second
	minPollInterval       = 250 * time.Millisecond
	maxPollInterval       = 10 * time.Second
	dashboardPort         = "9119"
	defaultSessionKeyMode = "issue"
)

// protectedHeaders are the generated headers config headers cannot set (lowercase).
var protectedHeaders = map[string]bool{
	"authorization": true, "accept": true, "content-type": true, "idempotency-key": true,
	"x-hermes-session-key": true, "host": true, "content-length": true, "connection": true,
	"transfer-encoding": true, "cookie": true, "last-event-id": true,
}

// Config is a zeta_gateway agent's adapterConfig, normalised.
type Config struct {
	// BaseURL is the normalised API base (no trailing slash).
	BaseURL string
	// DashboardMapped is true when a dashboard or chat URL was mapped to its /api path.
	DashboardMapped bool
	// PlainHTTP is true for http:// and Loopback for a loopback host.
	PlainHTTP, Loopback  bool
	AllowInsecure        bool
	APIKey               *gateway.SecretValue
	SessionKeyStrategy   string
	Timeout              time.Duration
	Reconnect, PollEvery time.Duration
	ServiceAPIURL        string
	Headers              map[string]string
	IgnoredHeaders       []string
	Instructions         string
	PayloadTemplate      map[string]any
}

// configError is a config problem with its reference error code.
type configError struct {
	Code, Message string
}

func (e *configError) Error() string { return e.Message }

type rawConfig struct {
	APIBaseURL         string               `json:"apiBaseUrl"`
	BaseURL            string               `json:"baseUrl"`
	URL                string               `json:"url"`
	APIKey             *gateway.SecretValue `json:"apiKey"`
	Token              *gateway.SecretValue `json:"token"`
	AllowInsecure      bool                 `json:"dangerouslyAllowInsecureRemoteHttp"`
	SessionKeyStrategy string               `json:"sessionKeyStrategy"`
	TimeoutSec         *float64             `json:"timeoutSec"`
	EventReconnectMs   *float64             `json:"eventReconnectMs"`
	PollIntervalMs     *float64             `json:"pollIntervalMs"`
	ServiceAPIURL      string               `json:"serviceApiUrl"`
	Headers            json.RawMessage      `json:"headers"`
	Instructions       string               `json:"instructions"`
	PayloadTemplate    map[string]any       `json:"payloadTemplate"`
}

// ParseConfig decodes and checks an adapterConfig. The base URL and the key are required;
// plain HTTP to a non-loopback host is refused unless dangerouslyAllowInsecureRemoteHttp.
func ParseConfig(raw json.RawMessage) (*Config, error) {
	var rc rawConfig
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" || t[0] != '{' {
		return nil, &configError{"hermes_gateway_api_base_url_missing", "zeta_gateway adapter config must be an object with apiBaseUrl and apiKey"}
	}
	if err := json.Unmarshal(raw, &rc); err != nil {
		return nil, &configError{"hermes_gateway_config_invalid", fmt.Sprintf("Invalid zeta_gateway adapter config: %v", err)}
	}
	c := &Config{AllowInsecure: rc.AllowInsecure, ServiceAPIURL: strings.TrimSpace(rc.ServiceAPIURL),
		Instructions: rc.Instructions, PayloadTemplate: rc.PayloadTemplate}
	base := strings.TrimSpace(rc.APIBaseURL)
	for _, alias := range []string{rc.BaseURL, rc.URL} {
		if base == "" {
			base = strings.TrimSpace(alias)
		}
	}
	if base == "" {
		return nil, &configError{"hermes_gateway_api_base_url_missing", "zeta_gateway adapter config is missing apiBaseUrl"}
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, &configError{"hermes_gateway_api_base_url_invalid", fmt.Sprintf("Invalid apiBaseUrl %q: it must be an absolute http or https URL", base)}
	}
	if u.Port() == dashboardPort && (u.Path == "" || u.Path == "/" || strings.TrimRight(u.Path, "/") == "/chat") {
		u.Path, c.DashboardMapped = "/api", true
	}
	u.RawQuery, u.Fragment = "", ""
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	c.BaseURL = u.String()
	c.PlainHTTP, c.Loopback = u.Scheme == "http", gateway.IsLoopbackHost(u.Hostname())
	if c.PlainHTTP && !c.Loopback && !c.AllowInsecure {
		return nil, &configError{"hermes_gateway_plain_http_remote_denied", fmt.Sprintf(
			"Plain HTTP to non-loopback host %s is refused; use https or set dangerouslyAllowInsecureRemoteHttp", u.Hostname())}
	}
	c.APIKey = rc.APIKey
	if !c.APIKey.IsSet() {
		c.APIKey = rc.Token
	}
	if !c.APIKey.IsSet() {
		return nil, &configError{"hermes_gateway_api_key_missing", "zeta_gateway adapter config is missing apiKey"}
	}
	switch s := strings.TrimSpace(rc.SessionKeyStrategy); s {
	case "":
		c.SessionKeyStrategy = defaultSessionKeyMode
	case "issue", "agent", "run", "none":
		c.SessionKeyStrategy = s
	default:
		return nil, &configError{"hermes_gateway_config_invalid", fmt.Sprintf("Invalid sessionKeyStrategy %q: use issue, agent, run or none", s)}
	}
	c.Timeout = defaultTimeoutSec * time.Second
	if rc.TimeoutSec != nil {
		if *rc.TimeoutSec < 0 {
			return nil, &configError{"hermes_gateway_config_invalid", "Invalid timeoutSec: it must not be negative"}
		}
		c.Timeout = time.Duration(*rc.TimeoutSec * float64(time.Second))
	}
	c.Reconnect = clampMs(rc.EventReconnectMs, defaultReconnect, minReconnect, maxReconnect)
	c.PollEvery = clampMs(rc.PollIntervalMs, defaultPollInterval, minPollInterval, maxPollInterval)
	headers, err := parseHeaders(rc.Headers)
	if err != nil {
		return nil, &configError{"hermes_gateway_config_invalid", err.Error()}
	}
	c.Headers = map[string]string{}
	for k, v := range headers {
		if protectedHeaders[strings.ToLower(k)] {
			c.IgnoredHeaders = append(c.IgnoredHeaders, k)
			continue
		}
		c.Headers[http.CanonicalHeaderKey(k)] = v
	}
	return c, nil
}

// parseHeaders reads headers given as an object or as a JSON object string.
func parseHeaders(raw json.RawMessage) (map[string]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("Invalid headers: %v", err)
		}
		if strings.TrimSpace(s) == "" {
			return nil, nil
		}
		raw = json.RawMessage(s)
	}
	var h map[string]string
	if err := json.Unmarshal(raw, &h); err != nil {
		return nil, fmt.Errorf("Invalid headers: they must be an object of strings")
	}
	for k, v := range h {
		if k == "" || strings.ContainsAny(k, " \t\r\n:") || strings.ContainsAny(v, "\r\n") {
			return nil, fmt.Errorf("Invalid header %q", k)
		}
	}
	return h, nil
}

func clampMs(v *float64, def, lo, hi time.Duration) time.Duration {
	if v == nil || *v <= 0 {
		return def
	}
	d := time.Duration(*v * float64(time.Millisecond))
	return max(lo, min(hi, d))
}

// sessionKey is the run's session key under the strategy ("" for none): agent →
// service:company:<c>:agent:<a>; run → service:run:<r>; issue →
// service:company:<c>:agent:<a>:issue:<i> (or :run:<r> without an issue).
func sessionKey(strategy, companyID, agentID, runID, issueID string) string {
	agent := "service:company:" + companyID + ":agent:" + agentID
	switch strategy {
	case "none":
		return ""
	case "agent":
		return agent
	case "run":
		return "service:run:" + runID
	}
	if issueID != "" {
		return agent + ":issue:" + issueID
	}
	return agent + ":run:" + runID
}
