package host_test

import (
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
