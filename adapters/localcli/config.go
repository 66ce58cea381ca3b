package localcli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// defaultGrace is how long a stopped CLI may take to exit before SIGKILL (graceSec 20).
const defaultGrace = 20 * time.Second

// sharedProperties are the adapterConfig properties every CLI adapter takes.
const sharedProperties = `
    "command": {"type": "string", "minLength": 1, "description": "The CLI binary, a path or a name looked up in PATH."},
    "cwd": {"type": "string", "description": "Working directory; default the run's workspace or the agent's own directory."},
    "model": {"type": "string", "description": "Model id passed to the CLI."},
    "instructionsFilePath": {"type": "string", "description": "Agent instructions file (absolute, or relative to cwd)."},
    "promptTemplate": {"type": "string", "description": "Prompt template; {{agent.id}}, {{agent.name}}, {{agentId}}, {{companyId}}, {{runId}}, {{context.*}}."},
    "bootstrapPromptTemplate": {"type": "string", "description": "Prompt prepended when a session starts fresh."},
    "extraArgs": {"type": "array", "items": {"type": "string"}, "description": "Extra CLI arguments, passed as they are (never through a shell)."},
    "args": {"type": "array", "items": {"type": "string"}, "description": "Legacy name of extraArgs."},
    "env": {"type": "object", "additionalProperties": {"type": ["string", "object"]}, "description": "Extra environment variables (values or secret references); keel's SERVICE_* variables win over them."},
    "timeoutSec": {"type": "number", "minimum": 0, "description": "Run timeout in seconds; 0 means none."},
    "graceSec": {"type": "number", "minimum": 0, "description": "Seconds between SIGTERM and SIGKILL (default 20)."},
    "engine": {"type": "string", "enum": ["auto", "cli", "acp"], "description": "keel drives the CLI's own non-interactive mode; every value runs the CLI engine."}`

// ConfigSchema returns the JSON Schema of a spec's adapterConfig.
func (s *Spec) ConfigSchema() string {
	props := strings.TrimSpace(s.ConfigProperties)
	props = strings.TrimSuffix(strings.TrimPrefix(props, "{"), "}")
	all := sharedProperties
	if strings.TrimSpace(props) != "" {
		all += "," + props
	}
	return `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "` + s.Type + ` adapter config",
  "type": "object",
  "properties": {` + all + `
  }
}`
}

// Config is a CLI adapter's adapterConfig: the shared keys decoded, every key kept in Raw
// for the type's own.
type Config struct {
	Command                 string
	Cwd                     string
	Model                   string
	InstructionsFilePath    string
	PromptTemplate          string
	BootstrapPromptTemplate string
	ExtraArgs               []string
	Env                     map[string]string
	TimeoutSec              float64
	GraceSec                *float64
	Raw                     map[string]json.RawMessage
}

// configError is a config the adapter cannot run, reported as a failed run.
type configError struct{ msg string }

func (e *configError) Error() string { return e.msg }

// ParseConfig decodes an adapterConfig for s. null is the empty config.
func (s *Spec) ParseConfig(raw json.RawMessage) (*Config, error) {
	c := &Config{Raw: map[string]json.RawMessage{}}
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &c.Raw); err != nil {
			return nil, &configError{fmt.Sprintf("Invalid %s adapter config: must be a JSON object", s.Type)}
		}
	}
	var errs []string
	str := func(k string) string {
		v, err := c.String(k)
		if err != nil {
			errs = append(errs, err.Error())
		}
		return v
	}
	keys := s.CommandKeys
	if len(keys) == 0 {
		keys = []string{"command"}
	}
	for _, k := range keys {
		if c.Command = strings.TrimSpace(str(k)); c.Command != "" {
			break
		}
	}
	if c.Command == "" {
		c.Command = s.DefaultCommand
	}
	c.Cwd = str("cwd")
	c.Model = strings.TrimSpace(str("model"))
	c.InstructionsFilePath = str("instructionsFilePath")
	c.PromptTemplate = str("promptTemplate")
	c.BootstrapPromptTemplate = str("bootstrapPromptTemplate")
	for _, k := range []string{"extraArgs", "args"} {
		v, ok := c.Raw[k]
		if !ok || string(v) == "null" {
			continue
		}
		if err := json.Unmarshal(v, &c.ExtraArgs); err != nil {
			errs = append(errs, k+" must be an array of strings")
		}
		break
	}
	c.TimeoutSec = s.DefaultTimeoutSec
	if n, err := c.Number("timeoutSec"); err != nil || (n != nil && *n < 0) {
		errs = append(errs, "timeoutSec must be a non-negative number")
	} else if n != nil && (*n > 0 || s.DefaultTimeoutSec == 0) {
		c.TimeoutSec = *n
	}
	if n, err := c.Number("graceSec"); err != nil || (n != nil && *n < 0) {
		errs = append(errs, "graceSec must be a non-negative number")
	} else if n != nil {
		c.GraceSec = n
	} else if s.DefaultGraceSec > 0 {
		g := s.DefaultGraceSec
		c.GraceSec = &g
	}
	if v, ok := c.Raw["env"]; ok && string(v) != "null" {
		var env map[string]json.RawMessage
		if err := json.Unmarshal(v, &env); err != nil {
			errs = append(errs, "env must be an object")
		}
		c.Env = make(map[string]string, len(env))
		for k, ev := range env {
			val, err := envValue(ev)
			if err != nil {
				errs = append(errs, fmt.Sprintf("env %s: %v", k, err))
				continue
			}
			c.Env[k] = val
		}
	}
	if len(errs) > 0 {
		return nil, &configError{fmt.Sprintf("Invalid %s adapter config: %s", s.Type, strings.Join(errs, "; "))}
	}
	return c, nil
}

func envValue(v json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(v, &s); err == nil {
		return s, nil
	}
	var obj struct {
		Value *string `json:"value"`
	}
	if err := json.Unmarshal(v, &obj); err == nil && obj.Value != nil {
		return *obj.Value, nil
	}
	return "", fmt.Errorf("value must be a string")
}

// String returns a string key ("" when absent or null).
func (c *Config) String(k string) (string, error) {
	v, ok := c.Raw[k]
	if !ok || string(v) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", fmt.Errorf("%s must be a string", k)
	}
	return s, nil
}

// Str returns a string key, "" when absent or not a string.
func (c *Config) Str(k string) string {
	s, _ := c.String(k)
	return strings.TrimSpace(s)
}

// Number returns a number key (nil when absent or null).
func (c *Config) Number(k string) (*float64, error) {
	v, ok := c.Raw[k]
	if !ok || string(v) == "null" {
		return nil, nil
	}
	var n float64
	if err := json.Unmarshal(v, &n); err != nil {
		return nil, fmt.Errorf("%s must be a number", k)
	}
	return &n, nil
}

// Int returns a positive integer key, 0 when absent or not positive.
func (c *Config) Int(k string) int {
	n, _ := c.Number(k)
	if n == nil || *n < 1 {
		return 0
	}
	return int(*n)
}

// Bool returns a boolean key, def when absent or not a boolean.
func (c *Config) Bool(k string, def bool) bool {
	v, ok := c.Raw[k]
	if !ok {
		return def
	}
	var b bool
	if err := json.Unmarshal(v, &b); err != nil {
		return def
	}
	return b
}

// Strings returns a string-array key (a comma list string is split).
func (c *Config) Strings(k string) []string {
	v, ok := c.Raw[k]
	if !ok {
		return nil
	}
	var list []string
	if json.Unmarshal(v, &list) == nil {
		return list
	}
	var s string
	if json.Unmarshal(v, &s) == nil && strings.TrimSpace(s) != "" {
		for _, part := range strings.Split(s, ",") {
			if p := strings.TrimSpace(part); p != "" {
				list = append(list, p)
			}
		}
	}
	return list
}

func (c *Config) timeout() time.Duration { return time.Duration(c.TimeoutSec * float64(time.Second)) }

func (c *Config) grace() time.Duration {
	if c.GraceSec == nil {
		return defaultGrace
	}
	return time.Duration(*c.GraceSec * float64(time.Second))
}
