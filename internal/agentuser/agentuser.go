// Package agentuser resolves the unprivileged OS account agent commands run as when keel
// runs as root. The local adapters, the environments' local driver and the execution
// workspaces all run commands or hand folders to this one account, so a command cannot
// read keel's data dir, its keys or the database password (all 0600/0700 of root), nor
// signal keel's processes, and a CLI login's credential lands in that account's home.
package agentuser

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
)

// Env names the OS user agent commands run as when keel runs as root ("-" or root: keel's
// own user).
const Env = "SERVICE_AGENT_USER"

// DefaultName is the account used when Env is unset; it is created when missing.
const DefaultName = "keel-agent"

// User is the unprivileged account.
type User struct {
	Name     string
	UID, GID uint32
	Home     string
}

var (
	once   sync.Once
	val    *User
	valErr error
)

// Get returns the agent user, or nil when commands run as this process's own user: the
// process is not root, or Env is "-" or root. A missing account is created (useradd
// --system) once per process.
func Get() (*User, error) {
	once.Do(func() { val, valErr = lookup(os.Getenv(Env)) })
	return val, valErr
}

func lookup(name string) (*User, error) {
	if os.Geteuid() != 0 || name == "-" || name == "root" {
		return nil, nil
	}
	if name == "" {
		name = DefaultName
	}
	u, err := user.Lookup(name)
	if errors.As(err, new(user.UnknownUserError)) {
		home := filepath.Join("/var/lib", name)
		out, cerr := exec.Command("useradd", "--system", "--user-group", "--create-home", "--home-dir", home,
			"--shell", "/usr/sbin/nologin", name).CombinedOutput()
		// Another keel process may have created the account at the same moment: look again
		// before giving up.
		if u, err = user.Lookup(name); err != nil && cerr != nil {
			return nil, fmt.Errorf("error creating the agent user %s (%s): %v: %s", name, Env, cerr, out)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("error looking up the agent user %s (%s): %w", name, Env, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil || uid == 0 {
		return nil, fmt.Errorf("the agent user %s (%s) must be an unprivileged user with numeric ids", name, Env)
	}
	return &User{Name: name, UID: uint32(uid), GID: uint32(gid), Home: u.HomeDir}, nil
}

// Credential is the process credential of the agent user, without supplementary groups.
func (u *User) Credential() *syscall.Credential {
	return &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: []uint32{}}
}

// Chown gives path (not what it holds) to the agent user.
func (u *User) Chown(path string) error {
	return os.Lchown(path, int(u.UID), int(u.GID))
}

// WorkspaceBase is where default workspaces go for the agent user: its home's workspaces
// folder, which it owns (keel's data dir is root's alone).
func (u *User) WorkspaceBase() (string, error) {
	base := filepath.Join(u.Home, "workspaces")
	if err := os.MkdirAll(base, 0o700); err != nil {
		return "", fmt.Errorf("error creating %s: %w", base, err)
	}
	if err := u.Chown(base); err != nil {
		return "", fmt.Errorf("error giving %s to the agent user: %w", base, err)
	}
	return base, nil
}
