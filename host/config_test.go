package host_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/host"
)

// TestConfigFromEnvExtensionGOMAXPROCS reads SERVICE_EXTENSION_GOMAXPROCS: unset keeps the
// default (filled in by Start), 0 leaves Go's default, and a bad value is an error.
func TestConfigFromEnvExtensionGOMAXPROCS(t *testing.T) {
	tests := []struct {
		env     string
		want    int
		wantErr string
	}{
		{env: "", want: 0},
		{env: "2", want: 2},
		{env: "0", want: -1},
		{env: "-3", wantErr: "is not a non-negative integer"},
		{env: "many", wantErr: "is not a non-negative integer"},
	}
	for _, tc := range tests {
		t.Run(tc.env, func(t *testing.T) {
			t.Setenv("SERVICE_EXTENSION_GOMAXPROCS", tc.env)
			cfg, err := host.ConfigFromEnv()
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, cfg.ExtensionGOMAXPROCS)
		})
	}
}

// TestStartConfigFailures checks that each bad setting is refused in one line naming the
// cause and the fix, before a database or extension starts, and never echoes a password.
func TestStartConfigFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  host.Config
		want string
	}{
		{"PortRange", host.Config{Port: 70000}, "SERVICE_PORT 70000 is out of range: use 1 to 65535, or 0 for a free port"},
		{"PGPortRange", host.Config{PGPort: -1}, "SERVICE_PG_PORT -1 is out of range: use 1 to 65535, or leave it unset for the Unix socket only"},
		{"Mode", host.Config{DeploymentMode: "trusted"}, `SERVICE_DEPLOYMENT_MODE "trusted" is not a deployment mode: use local_trusted or authenticated`},
		{"Exposure", host.Config{DeploymentExposure: "internet"}, `SERVICE_DEPLOYMENT_EXPOSURE "internet" is not an exposure: use private or public`},
		{"Scheme", host.Config{DatabaseURL: "mysql://u:hunter2@db/keel"}, `DATABASE_URL has the unsupported scheme "mysql": keel needs PostgreSQL, postgres://user:password@host:5432/database`},
		{"BadURL", host.Config{DatabaseURL: "postgres://u:hunter2@db:port/keel"}, "DATABASE_URL is not a valid URL: use postgres://user:password@host:5432/database"},
		{"Unreachable", host.Config{DatabaseURL: "postgres://keel:hunter2@127.0.0.1:1/keel"}, "cannot reach the database at 127.0.0.1:1/keel as keel (DATABASE_URL): "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.cfg.Home = t.TempDir()
			_, err := host.Start(context.Background(), tc.cfg, nil)
			require.ErrorContains(t, err, tc.want)
			require.NotContains(t, err.Error(), "hunter2")
			require.NotContains(t, err.Error(), "\n")
			_, statErr := os.Stat(filepath.Join(tc.cfg.Home, "db"))
			require.ErrorIs(t, statErr, os.ErrNotExist, "nothing was initialized")
		})
	}
}
