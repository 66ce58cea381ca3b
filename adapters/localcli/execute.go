package localcli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/keelhq/keel/adapters/internal/procrun"
	"github.com/keelhq/keel/internal/agentuser"
	"github.com/keelhq/keel/sdk/adapter"
)

// Invocation is one run of a CLI adapter as the spec's hooks see it.
type Invocation struct {
	Req    *adapter.ExecuteRequest
	Config *Config
	// Command is the resolved CLI binary.
	Command string
	// Cwd is the run's working directory.
	Cwd string
	// Home is HOME of the CLI process.
	Home string
	// RunDir is a scratch directory of the run, readable by the CLI, removed after it.
	RunDir string
	// Env is the CLI's environment; Prepare may change it.
	Env map[string]string
	// Prompt is the attempt's prompt.
	Prompt string
	// ResumeID is the session the attempt resumes, "" for a fresh one.
	ResumeID string
	// SessionID is the session keel named for the attempt (Spec.NewSession), if any.
	SessionID string
	// Instructions is the instructions file's text with its provenance note, "" for none;
	// InstructionsPath is the file.
	Instructions, InstructionsPath string
	// Model is the effective model ("" passes none).
	Model string
	// AsRoot is set when the CLI runs as root (keel runs as root and SERVICE_AGENT_USER is "-").
	AsRoot bool

	// user is the agent user the CLI runs as, nil for the adapter's own user.
	user *agentuser.User

	ev *procrun.Emitter
}

// Log writes a system line to the run log.
func (inv *Invocation) Log(line string) {
	if inv.ev != nil {
		inv.ev.LogText("system", line+"\n")
	}
}

// sessionParams are the saved session parameters of a CLI adapter.
type sessionParams struct {
	SessionID string `json:"sessionId"`
	Cwd       string `json:"cwd,omitempty"`
}

// attempt is one spawn of the CLI and what its output said.
type attempt struct {
	exit   *procrun.Exit
	parsed *Parsed
}

func (a *attempt) output() string { return a.exit.Stdout + "\n" + a.exit.Stderr }

// failed reports whether the attempt failed: the CLI did not exit 0 or reported an error.
func (a *attempt) failed() bool {
	return a.exit.StartErr != nil || a.exit.Failed() || a.parsed.Error != "" || a.parsed.Refusal || a.parsed.MaxTurns
}

// Execute runs one heartbeat run through the CLI (adapter.Runner).
func (x *Extension) Execute(ctx context.Context, req *adapter.ExecuteRequest) (*adapter.ExecuteResult, error) {
	s := x.spec
	c, err := s.ParseConfig(req.Config)
	if err != nil {
		return failedResult(err, "invalid_config"), nil
	}
	p, done, err := x.runs.Begin(req.RunID, c.grace())
	if err != nil {
		return nil, err
	}
	defer done()
	ev := procrun.NewEmitter(x.host, x.log, req.RunID, req.CompanyID)
	defer ev.Close()
	inv := &Invocation{Req: req, Config: c, ev: ev, Model: c.Model}
	if inv.Model == "" {
		inv.Model = s.DefaultModel
	}
	if s.RequireProviderModel {
		if err := checkProviderModel(s, inv.Model); err != nil {
			inv.Log("[service] " + err.Error())
			return failedResult(err, "invalid_config"), nil
		}
	}
	path, err := resolveCommand(c.Command, c.Cwd)
	if err != nil {
		msg := fmt.Sprintf("%s CLI %q is not installed or not on PATH", s.Tool, c.Command)
		inv.Log("[service] " + msg)
		return &adapter.ExecuteResult{Status: adapter.StatusFailed, ErrorMessage: msg, ErrorCode: "cli_not_installed"}, nil
	}
	inv.Command = path
	au, err := agentuser.Get()
	if err != nil {
		return failedResult(err, ""), nil
	}
	if inv.Cwd, err = x.workDir(c, req, au); err != nil {
		return failedResult(err, "invalid_config"), nil
	}
	if inv.RunDir, err = os.MkdirTemp("", "keel-run-"); err != nil {
		return nil, fmt.Errorf("error creating run directory: %w", err)
	}
	defer os.RemoveAll(inv.RunDir)
	inv.Env = envMap(procrun.BuildEnv(os.Environ(), c.Env, req.Env, req.AuthToken))
	// The workspace variables name the directory the CLI runs in, whoever chose it
	// (REFERENCE.md 3 step 5); AGENT_HOME is the agent's own directory.
	if inv.Env["SERVICE_WORKSPACE_CWD"] == "" {
		inv.Env["SERVICE_WORKSPACE_CWD"] = inv.Cwd
		inv.Env["SERVICE_WORKSPACE_SOURCE"] = "agent_home"
		if c.Cwd != "" {
			inv.Env["SERVICE_WORKSPACE_SOURCE"] = "adapter_config"
		}
	}
	if home, err := x.agentDir(req, au); err == nil {
		inv.Env["AGENT_HOME"] = home
	}
	inv.Home = inv.Env["HOME"]
	inv.AsRoot = au == nil && os.Geteuid() == 0
	inv.user = au
	if au != nil {
		inv.Home = au.Home
		inv.Env["HOME"], inv.Env["USER"], inv.Env["LOGNAME"] = au.Home, au.Name, au.Name
		if err := os.Chown(inv.RunDir, int(au.UID), int(au.GID)); err != nil {
			return nil, fmt.Errorf("error handing run directory to %s: %w", au.Name, err)
		}
	}
	if h := c.Env["HOME"]; h != "" {
		inv.Home, inv.Env["HOME"] = h, h
	}
	loadInstructions(inv)
	inv.ResumeID = resumable(s, inv)
	if s.SkillsDir != nil && len(req.Skills) > 0 {
		if dir := s.SkillsDir(inv); dir != "" {
			linkSkills(inv, dir, au)
		}
	}
	if s.Prepare != nil {
		if err := s.Prepare(inv); err != nil {
			inv.Log("[service] " + err.Error())
			return failedResult(err, ""), nil
		}
	}
	first := x.attempt(ctx, p, inv, au)
	last, retried := first, false
	if inv.ResumeID != "" && p.Reason() == procrun.ReasonNone && first.failed() &&
		s.UnknownSession != nil && s.UnknownSession.MatchString(first.output()+"\n"+first.parsed.Error) {
		inv.Log(fmt.Sprintf("[service] %s resume session %q is unavailable; retrying with a fresh session.", s.Tool, inv.ResumeID))
		inv.ResumeID = ""
		last, retried = x.attempt(ctx, p, inv, au), true
	}
	return x.result(p, inv, last, retried), nil
}

// attempt builds the attempt's session, prompt and arguments and runs the CLI once.
func (x *Extension) attempt(ctx context.Context, p *procrun.Proc, inv *Invocation, au *agentuser.User) *attempt {
	s := x.spec
	inv.SessionID = ""
	if inv.ResumeID == "" && s.NewSession != nil {
		id, err := s.NewSession(inv)
		if err != nil {
			inv.Log("[service] " + err.Error())
		}
		inv.SessionID = id
		if au != nil && id != "" {
			_ = os.Chown(id, int(au.UID), int(au.GID))
		}
	}
	inv.Prompt = buildPrompt(s, inv)
	args := s.Args(inv)
	shown := make([]string, len(args))
	copy(shown, args)
	if !s.PromptOnStdin {
		for i, a := range shown {
			if a == inv.Prompt {
				shown[i] = fmt.Sprintf("<prompt %d chars>", len(inv.Prompt))
			}
		}
	}
	desc := fmt.Sprintf("[service] %s %s", inv.Command, strings.Join(shown, " "))
	if s.PromptOnStdin {
		desc += fmt.Sprintf(" (stdin prompt %d chars)", len(inv.Prompt))
	}
	inv.Log(desc + " in " + inv.Cwd)
	parser := s.NewParser(inv)
	errParser, _ := parser.(StderrParser)
	cmd := &procrun.Command{Path: inv.Command, Args: args, Dir: inv.Cwd, Env: envList(inv.Env),
		Timeout: inv.Config.timeout(),
		OnLine: func(stream, line string) {
			if stream != "stdout" {
				if stream == "stderr" && errParser != nil {
					errParser.StderrLine(line)
				}
				return
			}
			if payload := parser.Line(line); payload != nil {
				b, err := json.Marshal(payload)
				if err == nil {
					inv.ev.Add(adapter.RunEvent{Kind: "event", Stream: "stdout", Payload: b})
				}
			}
		}}
	if s.PromptOnStdin {
		cmd.Stdin = inv.Prompt
	}
	if au != nil {
		cmd.Credential = au.Credential()
	}
	exit := procrun.Run(ctx, p, inv.ev, cmd)
	if exit.StartErr != nil {
		inv.Log(fmt.Sprintf("[service] Failed to start %s: %v", inv.Command, exit.StartErr))
	}
	return &attempt{exit: exit, parsed: parser.Result()}
}

// result classifies the last attempt into the run's result.
func (x *Extension) result(p *procrun.Proc, inv *Invocation, a *attempt, retried bool) *adapter.ExecuteResult {
	s := x.spec
	e, parsed := a.exit, a.parsed
	res := &adapter.ExecuteResult{PID: e.PID, ExitCode: e.ExitCode, Signal: e.Signal, Summary: parsed.Summary}
	rj := map[string]any{"stdout": e.Stdout, "stderr": e.Stderr}
	if parsed.StopReason != "" {
		rj["stopReason"] = parsed.StopReason
	}
	if parsed.MaxTurns {
		rj["stopReason"] = "max_turns_exhausted"
	}
	res.ResultJSON, _ = json.Marshal(rj)
	if parsed.HasUsage {
		u := parsed.Usage
		res.Usage = &u
	}
	res.CostUSD = parsed.CostUSD
	res.Model = parsed.Model
	if res.Model == "" {
		res.Model = inv.Model
	}
	res.Provider, res.Biller, res.BillingType = s.billing(inv)
	// The session: what the CLI reported, else the one keel named or resumed.
	sid := parsed.SessionID
	if sid == "" {
		sid = inv.SessionID
	}
	if sid == "" && !retried {
		sid = inv.ResumeID
	}
	if sid != "" {
		res.SessionID = sid
		res.SessionParams, _ = json.Marshal(sessionParams{SessionID: sid, Cwd: inv.Cwd})
		res.SessionDisplayID = sid
		if len(sid) > 16 {
			res.SessionDisplayID = sid[:16]
		}
	}
	res.ClearSession = parsed.MaxTurns || (retried && sid == "")
	switch p.Reason() {
	case procrun.ReasonCancelled:
		res.Status, res.ErrorCode, res.ErrorMessage = adapter.StatusCancelled, "cancelled", "Run cancelled"
		return res
	case procrun.ReasonTimedOut:
		res.Status, res.TimedOut, res.ErrorCode = adapter.StatusTimedOut, true, "timeout"
		res.ErrorMessage = fmt.Sprintf("Timed out after %gs", inv.Config.TimeoutSec)
		if s.AuthRequired != nil && s.AuthRequired.MatchString(a.output()) {
			res.ErrorCode = s.Code + "_auth_required"
		}
		return res
	}
	if e.StartErr != nil {
		res.Status, res.ErrorCode = adapter.StatusFailed, "spawn_failed"
		res.ErrorMessage = fmt.Sprintf("Failed to start %s: %v", inv.Command, e.StartErr)
		if errors.Is(e.StartErr, fs.ErrNotExist) || errors.Is(e.StartErr, exec.ErrNotFound) {
			res.ErrorCode = "cli_not_installed"
		}
		return res
	}
	if !a.failed() {
		res.Status = adapter.StatusSucceeded
		return res
	}
	res.Status = adapter.StatusFailed
	if res.ExitCode != nil && *res.ExitCode == 0 {
		// The CLI exited 0 but its output reported a failure.
		one := 1
		res.ExitCode = &one
	}
	maxTurns := parsed.MaxTurns || (s.MaxTurnsExitCode != 0 && e.ExitCode != nil && *e.ExitCode == s.MaxTurnsExitCode)
	res.ClearSession = res.ClearSession || maxTurns
	res.ErrorMessage = parsed.Error
	if res.ErrorMessage == "" {
		res.ErrorMessage = parsed.Message
	}
	if res.ErrorMessage == "" {
		res.ErrorMessage = firstLine(e.Stderr)
	}
	if res.ErrorMessage == "" {
		switch {
		case e.WaitErr != nil:
			res.ErrorMessage = fmt.Sprintf("Error waiting for %s: %v", s.Tool, e.WaitErr)
		case e.Signal != "":
			res.ErrorMessage = fmt.Sprintf("%s terminated by signal %s", s.Tool, e.Signal)
		case parsed.Refusal:
			res.ErrorMessage = s.Tool + " refused the request"
		case maxTurns:
			res.ErrorMessage = s.Tool + " stopped at its turn limit"
		default:
			res.ErrorMessage = fmt.Sprintf("%s exited with code %d", s.Tool, *res.ExitCode)
		}
	}
	switch {
	case s.AuthRequired != nil && s.AuthRequired.MatchString(a.output()+"\n"+parsed.Error):
		res.ErrorCode = s.Code + "_auth_required"
	case maxTurns:
		res.ErrorCode = "max_turns_exhausted"
	case parsed.Refusal:
		res.ErrorCode = s.Code + "_refusal"
	case s.CrashCode != "" && parsed.Events && !parsed.Terminal && e.Failed():
		res.ErrorCode = s.CrashCode
	default:
		for _, c := range s.ErrorClasses {
			if c.Re.MatchString(a.output() + "\n" + parsed.Error) {
				res.ErrorCode = c.Code
				break
			}
		}
	}
	if maxTurns {
		var rj map[string]any
		if json.Unmarshal(res.ResultJSON, &rj) == nil {
			rj["stopReason"] = "max_turns_exhausted"
			res.ResultJSON, _ = json.Marshal(rj)
		}
	}
	return res
}

// billing returns provider, biller and billing type of a run.
func (s *Spec) billing(inv *Invocation) (provider, biller, billingType string) {
	provider = s.Provider
	if provider == "" {
		if p, _, ok := strings.Cut(inv.Model, "/"); ok {
			provider = p
		}
	}
	biller = s.Biller
	if biller == "" {
		biller = provider
	}
	billingType = "unknown"
	if len(s.APIKeyEnv) > 0 {
		billingType = "subscription"
		for _, k := range s.APIKeyEnv {
			if inv.Env[k] != "" {
				billingType = "api"
			}
		}
	}
	return provider, biller, billingType
}

// resumable returns the saved session the run may resume, or "": the task's saved session
// when it was made in the same cwd and the spec accepts it. A session of another cwd is
// noted in the run log and a fresh one starts.
func resumable(s *Spec, inv *Invocation) string {
	rt := inv.Req.Runtime
	if rt == nil {
		return ""
	}
	var sp sessionParams
	if len(rt.SessionParams) > 0 {
		_ = json.Unmarshal(rt.SessionParams, &sp)
	}
	if sp.SessionID == "" {
		sp.SessionID = rt.SessionID
	}
	if sp.SessionID == "" {
		return ""
	}
	if sp.Cwd != "" && filepath.Clean(sp.Cwd) != filepath.Clean(inv.Cwd) {
		inv.Log(fmt.Sprintf("[service] %s session %q was saved for cwd %q and will not be resumed in %q.", s.Tool, sp.SessionID, sp.Cwd, inv.Cwd))
		return ""
	}
	if s.CanResume != nil && !s.CanResume(inv, sp.SessionID) {
		inv.Log(fmt.Sprintf("[service] %s session %q cannot be resumed; starting a fresh session.", s.Tool, sp.SessionID))
		return ""
	}
	return sp.SessionID
}

// workDir returns the run's working directory: the run's workspace (SERVICE_WORKSPACE_CWD),
// else the configured cwd (made when missing), else the agent's own directory under the
// adapter's data directory.
func (x *Extension) workDir(c *Config, req *adapter.ExecuteRequest, au *agentuser.User) (string, error) {
	if ws := req.Env["SERVICE_WORKSPACE_CWD"]; ws != "" {
		return ws, nil
	}
	if c.Cwd != "" {
		if !filepath.IsAbs(c.Cwd) {
			return "", &configError{fmt.Sprintf("%s adapter cwd %q must be an absolute path", x.spec.Type, c.Cwd)}
		}
		if err := os.MkdirAll(c.Cwd, 0o755); err != nil {
			return "", &configError{fmt.Sprintf("%s adapter cwd %q cannot be created: %v", x.spec.Type, c.Cwd, err)}
		}
		return c.Cwd, nil
	}
	return x.agentDir(req, au)
}

// agentDir returns the agent's own directory under the adapter's data directory (the agent
// user's home when agents run as one), made when missing.
func (x *Extension) agentDir(req *adapter.ExecuteRequest, au *agentuser.User) (string, error) {
	base := x.dataDir
	if base == "" {
		base = os.TempDir()
	}
	base = filepath.Join(base, "workspaces")
	if au != nil {
		var err error
		if base, err = au.WorkspaceBase(); err != nil {
			return "", err
		}
	}
	name := req.AgentID
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

// linkSkills links each of the run's skills into dir as dir/<name> (existing entries are
// left alone).
func linkSkills(inv *Invocation, dir string, au *agentuser.User) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		inv.Log(fmt.Sprintf("[service] Warning: could not create skills directory %s: %v", dir, err))
		return
	}
	if au != nil {
		_ = os.Chown(dir, int(au.UID), int(au.GID))
	}
	for _, sk := range inv.Req.Skills {
		name := filepath.Base(filepath.Clean("/" + sk.Name))
		if name == "/" || name == "." || sk.Path == "" {
			continue
		}
		target := filepath.Join(dir, name)
		if _, err := os.Lstat(target); err == nil {
			continue
		}
		if au != nil {
			// keel's data dir, where skills are materialised, is closed to the agent user:
			// it gets a copy it owns instead of a link it could not follow.
			if err := copySkill(sk.Path, target, au); err != nil {
				inv.Log(fmt.Sprintf("[service] Warning: could not copy skill %s: %v", name, err))
			}
			continue
		}
		if err := os.Symlink(sk.Path, target); err != nil {
			inv.Log(fmt.Sprintf("[service] Warning: could not link skill %s: %v", name, err))
		}
	}
}

// copySkill copies a skill's folder (regular files and folders only) to target, owned by
// the agent user.
func copySkill(src, target string, au *agentuser.User) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		dst := filepath.Join(target, rel)
		switch {
		case d.IsDir():
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return err
			}
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if err := os.WriteFile(dst, b, info.Mode().Perm()); err != nil {
				return err
			}
		default:
			return nil
		}
		return os.Lchown(dst, int(au.UID), int(au.GID))
	})
}

// maxReadBytes bounds a file read for the CLI (instructions, its config).
const maxReadBytes = 4 << 20

// ReadFile reads a file the way the CLI would: as the agent user when the CLI runs as one
// (through cat under its credential), so a config cannot make the adapter, which may run as
// root, read a file the agent could not.
func (inv *Invocation) ReadFile(path string) ([]byte, error) {
	if inv.user == nil {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return io.ReadAll(io.LimitReader(f, maxReadBytes))
	}
	cmd := exec.Command("cat", "--", path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: inv.user.Credential()}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return nil, errors.New(msg)
		}
		return nil, err
	}
	if len(out) > maxReadBytes {
		out = out[:maxReadBytes]
	}
	return out, nil
}

// resolveCommand finds the CLI binary: an absolute path, a path relative to cwd, or a name
// on PATH.
func resolveCommand(command, cwd string) (string, error) {
	if command == "" {
		return "", exec.ErrNotFound
	}
	if strings.Contains(command, "/") && !filepath.IsAbs(command) && cwd != "" {
		command = filepath.Join(cwd, command)
	}
	return exec.LookPath(command)
}

// checkProviderModel checks a provider/model id.
func checkProviderModel(s *Spec, model string) error {
	i := strings.Index(model, "/")
	if i <= 0 || i == len(model)-1 {
		return &configError{fmt.Sprintf("%s requires `adapterConfig.model` in provider/model format.", s.Tool)}
	}
	return nil
}

func failedResult(err error, code string) *adapter.ExecuteResult {
	return &adapter.ExecuteResult{Status: adapter.StatusFailed, ErrorMessage: err.Error(), ErrorCode: code}
}

func firstLine(s string) string {
	for _, line := range strings.Split(s, "\n") {
		if t := strings.TrimSpace(line); t != "" {
			return t
		}
	}
	return ""
}

func envMap(list []string) map[string]string {
	m := make(map[string]string, len(list))
	for _, kv := range list {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

func envList(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	return out
}
