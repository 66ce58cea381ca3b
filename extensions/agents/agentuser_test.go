package agents_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/host"
	"github.com/keelhq/keel/sdktest"
)

// TestAgentProcessesRunUnprivileged runs, as root, an agent whose script tries to learn
// who it is, to read keel's secrets master key and to find the database in its
// environment: it runs as the agent user, cannot read the key, and sees no DATABASE_URL.
func TestAgentProcessesRunUnprivileged(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("agent processes change user only when keel runs as root")
	}
	t.Parallel()
	var home string
	h := sdktest.Start(t, sdktest.Options{Builtins: true, Configure: func(c *host.Config) {
		c.AgentUser = "keel-agent-test"
		home = c.Home
	}})
	company := h.CreateCompany("Unprivileged Co")
	// The secrets extension writes its master key into keel's data dir on start.
	res := h.Do("POST", "/api/companies/"+company+"/secrets", map[string]any{"name": "Key", "value": "v"})
	require.Equal(t, 201, res.Status, "%s", res.Body)
	keyFile := filepath.Join(home, "extensions", "secrets", "master.key")
	_, err := os.Stat(keyFile)
	require.NoError(t, err)
	script := `id -un; cat '` + keyFile + `' >/dev/null 2>&1 && echo READ-KEY || echo no-key; ` +
		`test -n "$DATABASE_URL$PGPASSWORD" && echo HAS-DB || echo no-db; pwd`
	ag := hbAgent(t, h, company, "Sandboxed", "process", map[string]any{"command": "/bin/sh", "args": []string{"-c", script}}, nil)
	run := wake(t, h, ag.ID, map[string]any{"source": "on_demand"})
	done := waitRun(t, h, run["id"].(string), 60*time.Second, "succeeded", "failed")
	require.Equal(t, "succeeded", done["status"], "%v", done)
	out := done["resultJson"].(map[string]any)["stdout"].(string)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 4, out)
	require.Equal(t, "keel-agent-test", lines[0])
	require.Equal(t, "no-key", lines[1])
	require.Equal(t, "no-db", lines[2])
	require.True(t, strings.HasPrefix(lines[3], "/var/lib/keel-agent-test/workspaces/"), lines[3])
}
