package environments

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/keelhq/keel/internal/agentuser"
)

// The local driver runs commands as the agents' OS user, as the local adapters do
// (internal/agentuser): when keel runs as root, that user owns every lease directory and
// runs every command, so a login's credential lands in its home and a command cannot read
// keel's data dir or keys.

// mkdirOwned makes dir (and its missing parents) and gives what it made to the agent user.
func mkdirOwned(dir string) error {
	u, err := agentuser.Get()
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
		if err := u.Chown(d); err != nil {
			return fmt.Errorf("error giving %s to the agent user: %w", d, err)
		}
	}
	return nil
}

// asAgentUser sets cmd to run as the agent user, with its HOME, when there is one.
func asAgentUser(cmd *exec.Cmd, env map[string]string) error {
	u, err := agentuser.Get()
	if err != nil || u == nil {
		return err
	}
	cmd.SysProcAttr.Credential = u.Credential()
	env["HOME"], env["USER"], env["LOGNAME"] = u.Home, u.Name, u.Name
	return nil
}

// defaultRoot is where environments without a workspaceRoot keep their leases: the agent
// user's home when commands run as it (keel's data dir is root's alone), else dataDir.
func defaultRoot(dataDir string) (string, error) {
	u, err := agentuser.Get()
	if err != nil {
		return "", err
	}
	if u == nil {
		return filepath.Join(dataDir, "local"), nil
	}
	return filepath.Join(u.Home, "environments"), nil
}
