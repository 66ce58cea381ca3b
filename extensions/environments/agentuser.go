package environments

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
)

// The local driver runs commands as the agents' OS user, as the local adapters do
// (adapters/internal/procrun): when keel runs as root, SERVICE_AGENT_USER (default
// keel-agent, created when missing; "-" or root: keel's own user) owns every lease
// directory and runs every command, so a login's credential lands in that user's home and a
// command cannot read keel's data dir or keys.
const (
	agentUserEnv     = "SERVICE_AGENT_USER"
	defaultAgentUser = "keel-agent"
)

// osUser is the unprivileged account commands run as.
type osUser struct {
	name     string
	uid, gid uint32
	home     string
}

var (
	agentUserOnce sync.Once
	agentUserVal  *osUser
	agentUserErr  error
)

// agentUser returns the agent user, or nil when commands run as this process's user.
func agentUser() (*osUser, error) {
	agentUserOnce.Do(func() { agentUserVal, agentUserErr = lookupAgentUser(os.Getenv(agentUserEnv)) })
	return agentUserVal, agentUserErr
}

func lookupAgentUser(name string) (*osUser, error) {
	if os.Geteuid() != 0 || name == "-" || name == "root" {
		return nil, nil
	}
	if name == "" {
		name = defaultAgentUser
	}
	u, err := user.Lookup(name)
	if _, missing := err.(user.UnknownUserError); missing {
		home := filepath.Join("/var/lib", name)
		out, cerr := exec.Command("useradd", "--system", "--user-group", "--create-home", "--home-dir", home,
			"--shell", "/usr/sbin/nologin", name).CombinedOutput()
		if cerr != nil {
			return nil, fmt.Errorf("error creating the agent user %s (%s): %v: %s", name, agentUserEnv, cerr, out)
		}
		u, err = user.Lookup(name)
	}
	if err != nil {
		return nil, fmt.Errorf("error looking up the agent user %s (%s): %w", name, agentUserEnv, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil || uid == 0 {
		return nil, fmt.Errorf("the agent user %s (%s) must be an unprivileged user with numeric ids", name, agentUserEnv)
	}
	return &osUser{name: name, uid: uint32(uid), gid: uint32(gid), home: u.HomeDir}, nil
}

// mkdirOwned makes dir (and its missing parents) and gives what it made to the agent user.
func mkdirOwned(dir string) error {
	u, err := agentUser()
	if err != nil {
		return err
	}
	var made []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil || d == filepath.Dir(d) {
			break
		}
		made = append(made, d)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if u == nil {
		return nil
	}
	for _, d := range made {
		if err := os.Chown(d, int(u.uid), int(u.gid)); err != nil {
			return fmt.Errorf("error giving %s to the agent user: %w", d, err)
		}
	}
	return nil
}

// asAgentUser sets cmd to run as the agent user, with its HOME, when there is one.
func asAgentUser(cmd *exec.Cmd, env map[string]string) error {
	u, err := agentUser()
	if err != nil || u == nil {
		return err
	}
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: u.uid, Gid: u.gid, Groups: []uint32{}}
	env["HOME"], env["USER"], env["LOGNAME"] = u.home, u.name, u.name
	return nil
}

// defaultRoot is where environments without a workspaceRoot keep their leases: the agent
// user's home when commands run as it (keel's data dir is root's alone), else dataDir.
func defaultRoot(dataDir string) (string, error) {
	u, err := agentUser()
	if err != nil {
		return "", err
	}
	if u == nil {
		return filepath.Join(dataDir, "local"), nil
	}
	return filepath.Join(u.home, "environments"), nil
}
