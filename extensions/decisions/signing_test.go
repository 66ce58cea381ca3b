package decisions

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSigner(t *testing.T) {
	t.Run("MatchesTheReferenceForm", func(t *testing.T) {
		s := &signer{secret: []byte("0123456789abcdef0123456789abcdef")}
		options := json.RawMessage(`[{"label":"A & <b>","id":"a","effects":[]}]`)
		snaps := json.RawMessage(`{"11111111-1111-1111-1111-111111111111":{"status":"todo","assigneeAgentId":null,"updatedAt":"2026-01-01T00:00:00Z"}}`)
		got, err := s.sign("d-1", options, snaps)
		require.NoError(t, err)
		canon := `{"decisionId":"d-1","options":[{"effects":[],"id":"a","label":"A & <b>"}],"targetSnapshots":` +
			`{"11111111-1111-1111-1111-111111111111":{"assigneeAgentId":null,"status":"todo","updatedAt":"2026-01-01T00:00:00Z"}}}`
		mac := hmac.New(sha256.New, s.secret)
		mac.Write([]byte("decision-spec-v1:" + canon))
		require.Equal(t, "decision-spec-v1."+hex.EncodeToString(mac.Sum(nil)), got)
		require.True(t, s.verify("d-1", options, snaps, got))
		require.False(t, s.verify("d-2", options, snaps, got))
		require.False(t, s.verify("d-1", json.RawMessage(`[]`), snaps, got))
	})

	t.Run("KeyFromEnvOrGeneratedFile", func(t *testing.T) {
		dir := t.TempDir()
		t.Setenv(SigningSecretEnv, "too short")
		s, source, err := loadSigner(dir)
		require.NoError(t, err)
		require.Equal(t, "generated", source)
		fi, err := os.Stat(filepath.Join(dir, SigningKeyFile))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
		again, source, err := loadSigner(dir)
		require.NoError(t, err)
		require.Equal(t, "file", source)
		require.Equal(t, s.secret, again.secret)

		t.Setenv(SigningSecretEnv, "a-signing-secret-of-at-least-32-characters")
		fromEnv, source, err := loadSigner(dir)
		require.NoError(t, err)
		require.Equal(t, "env", source)
		require.Equal(t, []byte("a-signing-secret-of-at-least-32-characters"), fromEnv.secret)
	})
}

func TestSubstitute(t *testing.T) {
	require.Equal(t, "because x and ", substitute("because {{input.why}} and {{ input.other }}", map[string]string{"why": "x"}))
}
