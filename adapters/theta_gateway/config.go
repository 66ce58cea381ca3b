package thetagateway

import (
	"bytes"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/keelhq/keel/adapters/internal/gateway"
)

// ConfigSchema is the JSON Schema of a theta_gateway agent's adapterConfig
// (REFERENCE-adapters.md 7).
const ConfigSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "theta_gateway adapter config",
  "type": "object",
  "required": ["url"],
  "$defs": {
    "secret": {
      "oneOf": [
        {"type": "string"},
        {"type": "object", "required": ["type", "secretId"], "properties": {
          "type": {"const": "secret_ref"}, "secretId": {"type": "string", "minLength": 1},
          "version": {"oneOf": [{"const": "latest"}, {"type": "integer", "minimum": 1}]}}},
        {"type": "object", "required": ["type", "value"], "properties": {"type": {"const": "plain"}, "value": {"type": "string"}}}
      ]
    }
  },
  "properties": {
    "url": {"type": "string", "minLength": 1, "description": "The gateway's WebSocket URL (ws:// or wss://)."},
    "headers": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Handshake headers (x-openclaw-token, x-openclaw-auth, authorization)."},
    "authToken": {"$ref": "#/$defs/secret", "description": "Gateway token (a string or a secret reference); sent in the connect request and as a Bearer authorization header."},
    "token": {"$ref": "#/$defs/secret", "description": "Alias of authToken."},
    "password": {"$ref": "#/$defs/secret", "description": "Gateway password."},
    "deviceToken": {"$ref": "#/$defs/secret", "description": "Device token issued by the gateway."},
    "clientId": {"type": "string", "default": "gateway-client", "description": "Client id in the connect request."},
    "clientMode": {"type": "string", "default": "backend", "description": "Client mode in the connect request."},
    "clientVersion": {"type": "string", "default": "keel", "description": "Client version in the connect request."},
    "role": {"type": "string", "default": "operator", "description": "Role requested on connect."},
    "scopes": {"oneOf": [{"type": "array", "items": {"type": "string"}}, {"type": "string"}], "description": "Scopes requested on connect (a list or a comma-separated string; default operator.admin)."},
    "deviceFamily": {"type": "string", "description": "Device family reported on connect and signed."},
    "disableDeviceAuth": {"type": "boolean", "default": false, "description": "Connect without a signed device identity."},
    "devicePrivateKeyPem": {"$ref": "#/$defs/secret", "description": "Ed25519 device private key (PKCS#8 PEM). Generated on agent create and kept as a secret reference; without one an ephemeral key is used per run."},
    "autoPairOnFirstConnect": {"type": "boolean", "default": true, "description": "Approve this device's pairing request once when the gateway answers pairing required (needs a token or password)."},
    "payloadTemplate": {"type": "object", "description": "Fields merged into the agent request's params; its message or text is put before the wake text."},
    "agentId": {"type": "string", "description": "The gateway agent to run; prefixes the session key with agent:<agentId>:."},
    "timeoutSec": {"type": "number", "minimum": 0, "default": 120, "description": "Run timeout in seconds (0: none)."},
    "waitTimeoutMs": {"type": "number", "minimum": 0, "description": "agent.wait timeout (default timeoutSec x 1000, or 30000 when timeoutSec is 0)."},
    "sessionKeyStrategy": {"enum": ["issue", "fixed", "run"], "default": "issue", "description": "issue (service:issue:<issueId>), fixed (sessionKey), run (service:run:<runId>)."},
    "sessionKey": {"type": "string", "description": "The fixed session key (default service)."},
    "serviceApiUrl": {"type": "string", "description": "The keel API URL the remote agent calls back, when it differs from this instance's."},
    "claimedApiKeyPath": {"type": "string", "description": "Where the remote agent keeps its keel API key (named in the wake text)."},
    "streamTransport": {"type": "string", "description": "Ignored (WebSocket only)."},
    "transport": {"type": "string", "description": "Ignored (WebSocket only)."},
    "graceSec": {"type": "number", "minimum": 0, "description": "Extra seconds the engine waits past timeoutSec for the adapter to report."}
  }
}`

// Defaults (REFERENCE-adapters.md 7).
const (
	defaultTimeoutSec        = 120
	defaultClientID          = "gateway-client"
	defaultClientMode        = "backend"
	defaultClientVersion     = "keel"
	defaultRole              = "operator"
	defaultScope             = "operator.admin"
	defaultSessionKey        = "service"
	defaultClaimedAPIKeyPath = "~/.openclaw/workspace/service-claimed-api-key.json"
	// protocolVersion is the gateway protocol spoken.
	protocolVersion = 4
)

// Config is a theta_gateway agent's adapterConfig, normalised.
type Config struct {
	URL               string
	PlainRemote       bool
	Headers           map[string]string
	AuthToken         *gateway.SecretValue
	Password          *gateway.SecretValue
	DeviceToken       *gateway.SecretValue
	ClientID          string
	ClientMode        string
	ClientVersion     string
	Role              string
	Scopes            []string
	DeviceFamily      string
	DisableDeviceAuth bool
	DeviceKey         *gateway.SecretValue
	AutoPair          bool
	PayloadTemplate   map[string]any
	AgentID           string
	Timeout           time.Duration
	WaitTimeout       time.Duration
	ConnectTimeout    time.Duration
	SessionStrategy   string
	SessionKey        string
	ServiceAPIURL     string
	ClaimedAPIKeyPath string
	// Ignored lists the keys given that this adapter ignores.
	Ignored []string
}

// configError is a config problem with its reference error code.
type configError struct {
	Code, Message string
}

func (e *configError) Error() string { return e.Message }

type rawConfig struct {
	URL               string               `json:"url"`
	Headers           map[string]string    `json:"headers"`
	AuthToken         *gateway.SecretValue `json:"authToken"`
	Token             *gateway.SecretValue `json:"token"`
	Password          *gateway.SecretValue `json:"password"`
	DeviceToken       *gateway.SecretValue `json:"deviceToken"`
	ClientID          string               `json:"clientId"`
	ClientMode        string               `json:"clientMode"`
	ClientVersion     string               `json:"clientVersion"`
	Role              string               `json:"role"`
	Scopes            json.RawMessage      `json:"scopes"`
	DeviceFamily      string               `json:"deviceFamily"`
	DisableDeviceAuth bool                 `json:"disableDeviceAuth"`
	DeviceKey         *gateway.SecretValue `json:"devicePrivateKeyPem"`
	AutoPair          *bool                `json:"autoPairOnFirstConnect"`
	PayloadTemplate   map[string]any       `json:"payloadTemplate"`
	AgentID           string               `json:"agentId"`
	TimeoutSec        *float64             `json:"timeoutSec"`
	WaitTimeoutMs     *float64             `json:"waitTimeoutMs"`
	SessionStrategy   string               `json:"sessionKeyStrategy"`
	SessionKey        string               `json:"sessionKey"`
	ServiceAPIURL     string               `json:"serviceApiUrl"`
	ClaimedAPIKeyPath string               `json:"claimedApiKeyPath"`
	StreamTransport   string               `json:"streamTransport"`
	Transport         string               `json:"transport"`
}

func orDefault(s, def string) string {
	if s = strings.TrimSpace(s); s != "" {
		return s
	}
	return def
}

// ParseConfig decodes and checks an adapterConfig: the url is required and must be a ws://
// or wss:// URL.
func ParseConfig(raw json.RawMessage) (*Config, error) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" || t[0] != '{' {
		return nil, &configError{"openclaw_gateway_url_missing", "theta_gateway adapter config must be an object with a url"}
	}
	var rc rawConfig
	if err := json.Unmarshal(raw, &rc); err != nil {
		return nil, &configError{"openclaw_gateway_config_invalid", fmt.Sprintf("Invalid theta_gateway adapter config: %v", err)}
	}
	c := &Config{Headers: map[string]string{}, Password: rc.Password, DeviceToken: rc.DeviceToken,
		ClientID: orDefault(rc.ClientID, defaultClientID), ClientMode: orDefault(rc.ClientMode, defaultClientMode),
		ClientVersion: orDefault(rc.ClientVersion, defaultClientVersion), Role: orDefault(rc.Role, defaultRole),
		DeviceFamily: strings.TrimSpace(rc.DeviceFamily), DisableDeviceAuth: rc.DisableDeviceAuth, DeviceKey: rc.DeviceKey,
		AutoPair: rc.AutoPair == nil || *rc.AutoPair, PayloadTemplate: rc.PayloadTemplate, AgentID: strings.TrimSpace(rc.AgentID),
		SessionKey: orDefault(rc.SessionKey, defaultSessionKey), ServiceAPIURL: strings.TrimSpace(rc.ServiceAPIURL),
		ClaimedAPIKeyPath: orDefault(rc.ClaimedAPIKeyPath, defaultClaimedAPIKeyPath)}
	u := strings.TrimSpace(rc.URL)
	if u == "" {
		return nil, &configError{"openclaw_gateway_url_missing", "theta_gateway adapter config is missing url"}
	}
	pu, err := url.Parse(u)
	if err != nil || pu.Host == "" {
		return nil, &configError{"openclaw_gateway_url_invalid", fmt.Sprintf("Invalid gateway url %q", u)}
	}
	if pu.Scheme != "ws" && pu.Scheme != "wss" {
		return nil, &configError{"openclaw_gateway_url_protocol", fmt.Sprintf("Invalid gateway url %q: it must start with ws:// or wss://", u)}
	}
	c.URL, c.PlainRemote = pu.String(), pu.Scheme == "ws" && !gateway.IsLoopbackHost(pu.Hostname())
	for k, v := range rc.Headers {
		if k == "" || strings.ContainsAny(k, " \t\r\n:") || strings.ContainsAny(v, "\r\n") {
			return nil, &configError{"openclaw_gateway_config_invalid", fmt.Sprintf("Invalid header %q", k)}
		}
		c.Headers[strings.ToLower(k)] = v
	}
	c.AuthToken = rc.AuthToken
	if !c.AuthToken.IsSet() {
		c.AuthToken = rc.Token
	}
	scopes, err := parseScopes(rc.Scopes)
	if err != nil {
		return nil, &configError{"openclaw_gateway_config_invalid", err.Error()}
	}
	c.Scopes = scopes
	switch s := strings.TrimSpace(rc.SessionStrategy); s {
	case "":
		c.SessionStrategy = "issue"
	case "issue", "fixed", "run":
		c.SessionStrategy = s
	default:
		return nil, &configError{"openclaw_gateway_config_invalid", fmt.Sprintf("Invalid sessionKeyStrategy %q: use issue, fixed or run", s)}
	}
	timeoutSec := float64(defaultTimeoutSec)
	if rc.TimeoutSec != nil {
		if *rc.TimeoutSec < 0 {
			return nil, &configError{"openclaw_gateway_config_invalid", "Invalid timeoutSec: it must not be negative"}
		}
		timeoutSec = *rc.TimeoutSec
	}
	c.Timeout = time.Duration(timeoutSec * float64(time.Second))
	switch {
	case rc.WaitTimeoutMs != nil && *rc.WaitTimeoutMs > 0:
		c.WaitTimeout = time.Duration(*rc.WaitTimeoutMs * float64(time.Millisecond))
	case timeoutSec > 0:
		c.WaitTimeout = c.Timeout
	default:
		c.WaitTimeout = 30 * time.Second
	}
	c.ConnectTimeout = 10 * time.Second
	if c.Timeout > 0 {
		c.ConnectTimeout = min(c.Timeout, 15*time.Second)
	}
	if rc.StreamTransport != "" {
		c.Ignored = append(c.Ignored, "streamTransport")
	}
	if rc.Transport != "" {
		c.Ignored = append(c.Ignored, "transport")
	}
	return c, nil
}

func parseScopes(raw json.RawMessage) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	var list []string
	if len(raw) > 0 && string(raw) != "null" {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			list = strings.Split(s, ",")
		} else if err := json.Unmarshal(raw, &list); err != nil {
			return nil, fmt.Errorf("Invalid scopes: a list of strings or a comma-separated string")
		}
	}
	var out []string
	for _, s := range list {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		out = []string{defaultScope}
	}
	return out, nil
}

// authToken returns the gateway token: authToken/token, else the x-openclaw-token header,
// else x-openclaw-auth or authorization (Bearer stripped). Unlike the reference product it
// never falls back to the host's $OPENCLAW_TOKEN: an operator's token is not handed to
// whatever gateway a company's agent config names.
func (c *Config) authToken(resolved string) string {
	if resolved != "" {
		return resolved
	}
	if v := strings.TrimSpace(c.Headers["x-openclaw-token"]); v != "" {
		return v
	}
	for _, h := range []string{"x-openclaw-auth", "authorization"} {
		if v := strings.TrimSpace(c.Headers[h]); v != "" {
			if len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
				v = strings.TrimSpace(v[7:])
			}
			return v
		}
	}
	return ""
}

// handshakeHeaders are the WebSocket handshake's headers: the config's, plus a Bearer
// authorization with the token when the config sets none.
func (c *Config) handshakeHeaders(token string) http.Header {
	h := http.Header{}
	for k, v := range c.Headers {
		h.Set(k, v)
	}
	if token != "" && h.Get("Authorization") == "" {
		h.Set("Authorization", "Bearer "+token)
	}
	return h
}

// sessionKey is the run's session key: run → service:run:<runId>; issue (with an issue) →
// service:issue:<issueId>; otherwise the fixed key. With an agentId, a key that does not
// start with agent: is prefixed agent:<agentId>:.
func (c *Config) sessionKeyFor(runID, issueID string) string {
	var key string
	switch {
	case c.SessionStrategy == "run":
		key = "service:run:" + runID
	case c.SessionStrategy == "issue" && issueID != "":
		key = "service:issue:" + issueID
	default:
		key = c.SessionKey
	}
	if c.AgentID != "" && !strings.HasPrefix(key, "agent:") {
		key = "agent:" + c.AgentID + ":" + key
	}
	return key
}

// parsePrivateKey reads an Ed25519 private key from PEM (PKCS#8).
func parsePrivateKey(pemText string) (ed25519.PrivateKey, error) {
	block, _ := pem.Decode([]byte(pemText))
	if block == nil {
		return nil, fmt.Errorf("devicePrivateKeyPem is not a PEM block")
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("devicePrivateKeyPem is not a PKCS#8 private key: %w", err)
	}
	priv, ok := key.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("devicePrivateKeyPem is not an Ed25519 key")
	}
	return priv, nil
}
