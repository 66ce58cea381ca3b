package process_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/adapters/process"
)

func TestBuildEnv(t *testing.T) {
	t.Parallel()
	got := process.BuildEnv(
		[]string{"PATH=/bin", "SERVICE_API_KEY=leaked", "SERVICE_AGENT_ID=leaked", "SERVICE_RUNTIME_API_URL=http://rt",
			"SERVICE_LISTEN_HOST=0.0.0.0", "SERVICE_LISTEN_PORT=3100", "KEEL_EXTENSION_ROLE=adapter.process", "HOME=/home/x",
			"DATABASE_URL=postgres://keel:pw@db/keel", "PGPASSWORD=pw", "SERVICE_SECRETS_MASTER_KEY=k", "AWS_SECRET_ACCESS_KEY=s",
			"LC_ALL=C.UTF-8", "LANG=C.UTF-8"},
		map[string]string{"SERVICE_AGENT_ID": "config", "EXTRA": "1"},
		map[string]string{"SERVICE_AGENT_ID": "agent-1", "SERVICE_RUN_ID": "run-1"},
		"jwt",
	)
	require.Equal(t, []string{
		"EXTRA=1", "HOME=/home/x", "LANG=C.UTF-8", "LC_ALL=C.UTF-8", "PATH=/bin", "SERVICE_AGENT_ID=agent-1", "SERVICE_API_KEY=jwt",
		"SERVICE_LISTEN_HOST=0.0.0.0", "SERVICE_LISTEN_PORT=3100", "SERVICE_RUNTIME_API_URL=http://rt", "SERVICE_RUN_ID=run-1",
	}, got)
}

func TestParseConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, config, err string
	}{
		{"ok", `{"command":"x","args":["a"],"timeoutSec":1.5,"graceSec":0,"promptTemplate":"ignored"}`, ""},
		{"missing", `{}`, "Process adapter missing command"},
		{"blank", `{"command":"  "}`, "Process adapter missing command"},
		{"null", `null`, "Process adapter missing command"},
		{"wrong type", `{"command":5}`, "Invalid process adapter config"},
		{"negative timeout", `{"command":"x","timeoutSec":-1}`, "timeoutSec must not be negative"},
		{"env not a string", `{"command":"x","env":{"A":5}}`, "env A: value must be a string"},
	} {
		_, err := process.ParseConfig([]byte(tc.config))
		if tc.err == "" {
			require.NoError(t, err, tc.name)
		} else {
			require.ErrorContains(t, err, tc.err, tc.name)
		}
	}
}
