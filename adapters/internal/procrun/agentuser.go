package procrun

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

// agentUserEnv names the OS user agent commands run as when keel runs as root.
const agentUserEnv = "SERVICE_AGENT_USER"

// defaultAgentUser is created when missing.
const defaultAgentUser = "keel-agent"

// User is the unprivileged account agent processes run as when the adapter runs as
// root: such a process cannot read keel's data dir, its keys or the database password
// (all 0600/0700 of root), nor signal keel's processes.
type User struct {
	Name     string
	UID, GID uint32
	Home     string
}

var (
	agentUserOnce sync.Once
	agentUserVal  *User
	agentUserErr  error
)

// AgentUser returns the agent user, or nil when agent commands run as the adapter's own
// user: the adapter is not root, or SERVICE_AGENT_USER is "-". A missing user is created
// (useradd --system) once.
func AgentUser() (*User, error) {
	agentUserOnce.Do(func() { agentUserVal, agentUserErr = lookupAgentUser(os.Getenv(agentUserEnv)) })
	return agentUserVal, agentUserErr
}

func lookupAgentUser(name string) (*User, error) {
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
			return nil, fmt.Errorf("creating the agent user %s (SERVICE_AGENT_USER): %v: %s", name, cerr, out)
		}
		u, err = user.Lookup(name)
	}
	if err != nil {
		return nil, fmt.Errorf("looking up the agent user %s (SERVICE_AGENT_USER): %w", name, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil || uid == 0 {
		return nil, fmt.Errorf("the agent user %s (SERVICE_AGENT_USER) must be an unprivileged user with numeric ids", name)
	}
	return &User{Name: name, UID: uint32(uid), GID: uint32(gid), Home: u.HomeDir}, nil
}

// Credential is the process credential of the agent user.
func (u *User) Credential() *syscall.Credential {
	return &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: []uint32{}, NoSetGroups: false}
}

// WorkspaceBase is where default workspaces go for the agent user: its home, which it owns
// (keel's data dir is root's alone).
func (u *User) WorkspaceBase() (string, error) {
	base := filepath.Join(u.Home, "workspaces")
	if err := os.MkdirAll(base, 0o700); err != nil {
		return "", fmt.Errorf("error creating %s: %w", base, err)
	}
	return base, os.Chown(base, int(u.UID), int(u.GID))
}
