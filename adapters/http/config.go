package httpadapter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/keelhq/keel/sdk/adapter"
)

// ConfigSchema is the JSON Schema of the http adapter's adapterConfig.
const ConfigSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "http adapter config",
  "type": "object",
  "required": ["url"],
  "properties": {
    "url": {"type": "string", "minLength": 1, "description": "The http or https URL invoked for each run."},
    "method": {"type": "string", "description": "HTTP method (default POST)."},
    "headers": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Request headers."},
    "timeoutMs": {"type": "number", "minimum": 0, "description": "Request timeout in milliseconds; 0 means none."},
    "timeoutSec": {"type": "number", "minimum": 0, "description": "Request timeout in seconds, when timeoutMs is not set."},
    "payloadTemplate": {"type": "object", "description": "Fields sent in the body beside agentId, runId and context."}
  }
}`

// Config is the http adapter's adapterConfig. Unknown keys are ignored.
type Config struct {
	URL             string            `json:"url"`
	Method          string            `json:"method,omitempty"`
	Headers         map[string]string `json:"headers,omitempty"`
	TimeoutMs       float64           `json:"timeoutMs,omitempty"`
	TimeoutSec      float64           `json:"timeoutSec,omitempty"`
	PayloadTemplate map[string]any    `json:"payloadTemplate,omitempty"`
}

// ParseConfig decodes and checks an adapterConfig: the url is required and must be an
// absolute http or https URL; the method defaults to POST.
func ParseConfig(raw json.RawMessage) (*Config, error) {
	var c Config
	if t := bytes.TrimSpace(raw); len(t) > 0 && string(t) != "null" {
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, fmt.Errorf("Invalid HTTP adapter config: %v", err)
		}
	}
	if strings.TrimSpace(c.URL) == "" {
		return nil, fmt.Errorf("HTTP adapter missing url")
	}
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("Invalid HTTP adapter url %q: it must be an absolute http or https URL", c.URL)
	}
	c.Method = strings.ToUpper(strings.TrimSpace(c.Method))
	if c.Method == "" {
		c.Method = http.MethodPost
	}
	if strings.ContainsAny(c.Method, " \t\r\n") {
		return nil, fmt.Errorf("Invalid HTTP adapter method %q", c.Method)
	}
	if c.TimeoutMs < 0 || c.TimeoutSec < 0 {
		return nil, fmt.Errorf("Invalid HTTP adapter config: the timeout must not be negative")
	}
	return &c, nil
}

// timeout is the request timeout, zero for none: timeoutMs, else timeoutSec.
func (c *Config) timeout() time.Duration {
	if c.TimeoutMs > 0 {
		return time.Duration(c.TimeoutMs * float64(time.Millisecond))
	}
	return time.Duration(c.TimeoutSec * float64(time.Second))
}

func testEnvironment(req *adapter.TestEnvironmentRequest) *adapter.TestEnvironmentResult {
	c, err := ParseConfig(req.Config)
	if err != nil {
		return &adapter.TestEnvironmentResult{OK: false, Checks: []adapter.Check{{Name: "url", OK: false, Message: err.Error()}}}
	}
	return &adapter.TestEnvironmentResult{OK: true, Checks: []adapter.Check{{Name: "url", OK: true, Message: c.Method + " " + c.URL}}}
}
