package localcli

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/keelhq/keel/adapters/internal/procrun"
	"github.com/keelhq/keel/internal/agentuser"
	"github.com/keelhq/keel/sdk/adapter"
)

// versionTimeout bounds the CLI's --version probe.
const versionTimeout = 15 * time.Second

// TestEnvironment checks a config (adapter.Runner): the config, the cwd, whether the CLI
// is installed, its version, and whether it is logged in (an API key in the config env,
// or the CLI's own login file under HOME). keel's own environment does not count: a run
// does not inherit its API keys.
func (x *Extension) TestEnvironment(req *adapter.TestEnvironmentRequest) *adapter.TestEnvironmentResult {
	s := x.spec
	res := &adapter.TestEnvironmentResult{}
	add := func(code, level, msg, hint string) {
		res.Checks = append(res.Checks, adapter.Check{Name: s.Code + "_" + code, OK: level != "error", Level: level, Message: msg, Hint: hint})
	}
	defer func() {
		res.OK, res.Status = true, "pass"
		for _, ch := range res.Checks {
			switch ch.Level {
			case "error":
				res.OK, res.Status = false, "fail"
			case "warn":
				if res.Status == "pass" {
					res.Status = "warn"
				}
			}
		}
	}()
	c, err := s.ParseConfig(req.Config)
	if err != nil {
		add("config_invalid", "error", err.Error(), "")
		return res
	}
	if c.Cwd != "" {
		if st, err := os.Stat(c.Cwd); err == nil && st.IsDir() {
			add("cwd_valid", "info", "Working directory "+c.Cwd+" exists", "")
		} else if st, err := os.Stat(filepath.Dir(c.Cwd)); filepath.IsAbs(c.Cwd) && err == nil && st.IsDir() {
			add("cwd_valid", "info", "Working directory "+c.Cwd+" will be created", "")
		} else {
			add("cwd_invalid", "error", fmt.Sprintf("Working directory %q does not exist and cannot be created", c.Cwd), "Set cwd to an absolute directory path.")
		}
	}
	if s.RequireProviderModel {
		model := c.Model
		if model == "" {
			model = s.DefaultModel
		}
		if model == "" {
			add("model_required", "error", s.Tool+" requires a model in provider/model format", "")
		} else if err := checkProviderModel(s, model); err != nil {
			add("model_invalid", "error", err.Error(), "")
		} else {
			add("model_configured", "info", "Model "+model, "")
		}
	}
	path, err := resolveCommand(c.Command, c.Cwd)
	if err != nil {
		add("command_unresolvable", "error", fmt.Sprintf("%s CLI %q is not installed or not on PATH", s.Tool, c.Command), s.InstallHint)
		return res
	}
	add("command_resolvable", "info", "Command resolves to "+path, "")
	au, _ := agentuser.Get()
	env := envMap(procrun.BuildEnv(os.Environ(), c.Env, nil, ""))
	home := env["HOME"]
	if au != nil {
		home = au.Home
		env["HOME"] = home
	}
	if h := c.Env["HOME"]; h != "" {
		home, env["HOME"] = h, h
	}
	if v, err := probeVersion(path, env, au); err != nil {
		add("version_failed", "warn", fmt.Sprintf("%s --version failed: %v", c.Command, err), "")
	} else {
		add("version", "info", v, "")
	}
	for _, k := range s.AuthEnv {
		if c.Env[k] != "" {
			add("api_key_present", "info", k+" is set in the adapter config env", "")
			return res
		}
	}
	for _, f := range s.AuthFiles {
		if home == "" {
			break
		}
		if st, err := os.Stat(filepath.Join(home, f)); err == nil && st.Size() > 0 {
			add("native_auth_present", "info", "Logged in: "+filepath.Join(home, f)+" exists", "")
			return res
		}
	}
	if len(s.AuthEnv) > 0 || len(s.AuthFiles) > 0 {
		add("auth_missing", "warn", fmt.Sprintf("%s does not look logged in: none of %s is set and no login file was found under %s",
			s.Tool, strings.Join(s.AuthEnv, ", "), home), s.LoginHint)
	}
	return res
}

// probeVersion runs `<cli> --version` and returns the first line it prints.
func probeVersion(path string, env map[string]string, au *agentuser.User) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), versionTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "--version")
	cmd.Env = envList(env)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if au != nil {
		cmd.SysProcAttr.Credential = au.Credential()
		cmd.Dir = au.Home
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		if line := firstLine(string(out)); line != "" {
			return "", fmt.Errorf("%v: %s", err, line)
		}
		return "", err
	}
	v := firstLine(string(out))
	if v == "" {
		return "", fmt.Errorf("no version printed")
	}
	return v, nil
}
