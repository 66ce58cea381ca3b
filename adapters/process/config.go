package process

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/keelhq/keel/adapters/internal/procrun"
	"github.com/keelhq/keel/internal/agentuser"
	"github.com/keelhq/keel/sdk/adapter"
)

// defaultGrace is how long a signalled run may take to exit before SIGKILL.
const defaultGrace = 15 * time.Second

// ConfigSchema is the JSON Schema of the process adapter's adapterConfig.
const ConfigSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "process adapter config",
  "type": "object",
  "required": ["command"],
  "properties": {
    "command": {"type": "string", "minLength": 1, "description": "The executable to run, a path or a name looked up in PATH."},
    "args": {"type": "array", "items": {"type": "string"}, "description": "Arguments passed to the command."},
    "cwd": {"type": "string", "description": "Working directory; default a per-agent directory under the adapter's data directory."},
    "env": {"type": "object", "additionalProperties": {"type": ["string", "object"]}, "description": "Extra environment variables; keel's SERVICE_* variables win over them."},
    "timeoutSec": {"type": "number", "minimum": 0, "description": "Run timeout in seconds; 0 means none."},
    "graceSec": {"type": "number", "minimum": 0, "description": "Seconds between SIGTERM and SIGKILL (default 15)."}
  }
}`

// Config is the process adapter's adapterConfig. Unknown keys are ignored, so an agent's
// config may carry keys of other layers (prompt templates and the like).
type Config struct {
	Command    string            `json:"command"`
	Args       []string          `json:"args,omitempty"`
	Cwd        string            `json:"cwd,omitempty"`
	Env        map[string]string `json:"-"`
	TimeoutSec float64           `json:"timeoutSec,omitempty"`
	GraceSec   *float64          `json:"graceSec,omitempty"`
}

// configError is a config the adapter cannot run, reported as a failed run.
type configError struct{ msg string }

func (e *configError) Error() string { return e.msg }

// ParseConfig decodes and checks an adapterConfig. Env values are strings; a resolved
// secret binding left as an object is accepted when it has a string "value".
func ParseConfig(raw json.RawMessage) (*Config, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil, &configError{"Process adapter missing command"}
	}
	var c Config
	var wire struct {
		Env map[string]json.RawMessage `json:"env"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, &configError{fmt.Sprintf("Invalid process adapter config: %v", err)}
	}
	if err := json.Unmarshal(raw, &wire); err != nil {
		return nil, &configError{fmt.Sprintf("Invalid process adapter config: %v", err)}
	}
	if strings.TrimSpace(c.Command) == "" {
		return nil, &configError{"Process adapter missing command"}
	}
	if c.TimeoutSec < 0 {
		return nil, &configError{"Invalid process adapter config: timeoutSec must not be negative"}
	}
	if c.GraceSec != nil && *c.GraceSec < 0 {
		return nil, &configError{"Invalid process adapter config: graceSec must not be negative"}
	}
	if len(wire.Env) > 0 {
		c.Env = make(map[string]string, len(wire.Env))
		for k, v := range wire.Env {
			s, err := envValue(v)
			if err != nil {
				return nil, &configError{fmt.Sprintf("Invalid process adapter config: env %s: %v", k, err)}
			}
			c.Env[k] = s
		}
	}
	return &c, nil
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

// timeout is the run timeout, zero for none.
func (c *Config) timeout() time.Duration { return time.Duration(c.TimeoutSec * float64(time.Second)) }

// grace is the time between SIGTERM and SIGKILL.
func (c *Config) grace() time.Duration {
	if c.GraceSec == nil {
		return defaultGrace
	}
	return time.Duration(*c.GraceSec * float64(time.Second))
}

// BuildEnv composes a run's environment (procrun.BuildEnv): the allowed part of the
// inherited environment, then the config env, then the request's env, which wins.
func BuildEnv(inherited []string, configEnv, requestEnv map[string]string, authToken string) []string {
	return procrun.BuildEnv(inherited, configEnv, requestEnv, authToken)
}

// workDir returns the run's working directory: the configured cwd, which must exist, or a
// per-agent directory under the data directory, made on demand.
func (a *Adapter) workDir(c *Config, agentID string) (string, error) {
	if c.Cwd != "" {
		st, err := os.Stat(c.Cwd)
		if err != nil || !st.IsDir() {
			return "", &configError{fmt.Sprintf("Process adapter cwd %q is not an existing directory", c.Cwd)}
		}
		return c.Cwd, nil
	}
	base := a.dataDir
	if base == "" {
		base = os.TempDir()
	}
	base = filepath.Join(base, "workspaces")
	au, err := agentuser.Get()
	if err != nil {
		return "", err
	}
	if au != nil {
		if base, err = au.WorkspaceBase(); err != nil {
			return "", err
		}
	}
	name := agentID
	if name == "" {
		name = "_shared"
	}
	dir := filepath.Join(base, filepath.Base(filepath.Clean("/"+name)))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("error creating work directory %s: %w", dir, err)
	}
	if au != nil {
		if err := os.Chown(dir, int(au.UID), int(au.GID)); err != nil {
			return "", fmt.Errorf("error handing work directory %s to %s: %w", dir, au.Name, err)
		}
	}
	return dir, nil
}

// TestEnvironment checks that the config parses, the command resolves and the cwd exists
// (adapter.Runner).
func (a *Adapter) TestEnvironment(req *adapter.TestEnvironmentRequest) *adapter.TestEnvironmentResult {
	res := &adapter.TestEnvironmentResult{OK: true}
	add := func(name string, err error, okMsg string) {
		ch := adapter.Check{Name: name, OK: err == nil, Message: okMsg}
		if err != nil {
			ch.Message = err.Error()
			res.OK = false
		}
		res.Checks = append(res.Checks, ch)
	}
	c, err := ParseConfig(req.Config)
	add("config", err, "")
	if err != nil {
		return res
	}
	if c.Cwd != "" {
		st, err := os.Stat(c.Cwd)
		if err == nil && !st.IsDir() {
			err = fmt.Errorf("%s is not a directory", c.Cwd)
		}
		if err != nil {
			err = fmt.Errorf("cwd %q is not an existing directory", c.Cwd)
		}
		add("cwd", err, c.Cwd)
	}
	cmd := c.Command
	if strings.Contains(cmd, "/") && !filepath.IsAbs(cmd) && c.Cwd != "" {
		cmd = filepath.Join(c.Cwd, cmd)
	}
	path, err := exec.LookPath(cmd)
	if err != nil {
		err = fmt.Errorf("command %q not found: %v", c.Command, err)
	}
	add("command", err, path)
	return res
}
