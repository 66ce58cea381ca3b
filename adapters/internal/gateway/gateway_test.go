package gateway_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/adapters/internal/gateway"
)

func TestSecretValue(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in      string
		plain   string
		id      string
		version int
		err     string
	}{
		{in: `"k-1"`, plain: "k-1"},
		{in: `{"type":"plain","value":"k-2"}`, plain: "k-2"},
		{in: `{"type":"secret_ref","secretId":"s-1"}`, id: "s-1"},
		{in: `{"type":"secret_ref","secretId":"s-1","version":"latest"}`, id: "s-1"},
		{in: `{"type":"secret_ref","secretId":"s-1","version":3}`, id: "s-1", version: 3},
		{in: `{"type":"secret_ref","secretId":"s-1","version":"3"}`, id: "s-1", version: 3},
		{in: `{"type":"secret_ref","secretId":"s-1","version":0}`, err: "version"},
		{in: `{"type":"secret_ref"}`, err: "secretId"},
		{in: `{"type":"env","name":"X"}`, err: "secret reference"},
		{in: `12`, err: "secret reference"},
	} {
		var v gateway.SecretValue
		err := json.Unmarshal([]byte(tc.in), &v)
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.plain, v.Plain, tc.in)
		require.Equal(t, tc.id, v.SecretID, tc.in)
		require.Equal(t, tc.version, v.Version, tc.in)
		require.True(t, v.IsSet())
	}
}

func TestIsLoopbackHost(t *testing.T) {
	t.Parallel()
	for host, want := range map[string]bool{"localhost": true, "LOCALHOST.": true, "api.localhost": true, "127.0.0.1": true,
		"127.9.9.9": true, "::1": true, "[::1]": true, "10.0.0.1": false, "example.com": false, "localhost.example.com": false} {
		require.Equal(t, want, gateway.IsLoopbackHost(host), host)
	}
}

func TestRedactor(t *testing.T) {
	t.Parallel()
	r := gateway.NewRedactor("sk-remote-1234", "", "ab")
	got := r.Redact(`{"auth":"Bearer abc.def","key":"sk-remote-1234","session":"service:issue:42","note":"ab"}`)
	require.Equal(t, `{"auth":"Bearer [REDACTED]","key":"[REDACTED]","session":"service:[REDACTED]","note":"ab"}`, got)
}

func TestWakeText(t *testing.T) {
	t.Parallel()
	text := gateway.WakeText("Rita", map[string]string{"SERVICE_RUN_ID": "r-1", "SERVICE_API_URL": "http://local"}, "https://keel.example.com",
		"~/key.json", map[string]any{"issueId": "i-1"})
	require.Contains(t, text, "You are Rita")
	require.Contains(t, text, "- SERVICE_RUN_ID=r-1")
	require.Contains(t, text, "- SERVICE_API_URL=https://keel.example.com", "serviceApiUrl wins")
	require.Contains(t, text, "Load SERVICE_API_KEY from ~/key.json.")
	require.Contains(t, text, `"issueId": "i-1"`)
}
