package idem_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdk/idem"
)

func TestCheckKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, key, want string
	}{
		{"Plain", "create-issue-42", ""},
		{"Longest", strings.Repeat("k", idem.MaxKeyLen), ""},
		{"PrintablePunctuation", "a b~!@#$%^&*()", ""},
		{"Empty", "", "must not be empty"},
		{"TooLong", strings.Repeat("k", idem.MaxKeyLen+1), "must be at most 255 characters"},
		{"Control", "a\tb", "must be printable ASCII"},
		{"NUL", "a\x00b", "must be printable ASCII"},
		{"NonASCII", "clé", "must be printable ASCII"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, idem.CheckKey(tc.key))
		})
	}
}

func TestPrincipal(t *testing.T) {
	t.Parallel()
	require.Equal(t, "agent:a1", idem.Principal("agent", "", "a1"))
	require.Equal(t, "user:u1", idem.Principal("board", "u1", ""))
	require.Equal(t, "board", idem.Principal("board", "", ""))
	require.Equal(t, "system", idem.Principal("system", "", ""))
	require.Empty(t, idem.Principal("none", "", ""))
}

func TestFingerprint(t *testing.T) {
	t.Parallel()
	base := idem.Fingerprint("POST", "/api/x", "", []byte(`{"a":1}`))
	require.Len(t, base, 64)
	require.Equal(t, base, idem.Fingerprint("POST", "/api/x", "", []byte(`{"a":1}`)))
	for _, other := range []string{
		idem.Fingerprint("PUT", "/api/x", "", []byte(`{"a":1}`)),
		idem.Fingerprint("POST", "/api/y", "", []byte(`{"a":1}`)),
		idem.Fingerprint("POST", "/api/x", "q=1", []byte(`{"a":1}`)),
		idem.Fingerprint("POST", "/api/x", "", []byte(`{"a":2}`)),
	} {
		require.NotEqual(t, base, other)
	}
}

func TestTableSQL(t *testing.T) {
	t.Parallel()
	sql := idem.TableSQL("ext_notes.idempotency_keys")
	require.Contains(t, sql, "CREATE TABLE IF NOT EXISTS ext_notes.idempotency_keys")
	require.Contains(t, sql, "CREATE INDEX IF NOT EXISTS idempotency_keys_created_at_idx ON ext_notes.idempotency_keys")
	require.Contains(t, sql, "PRIMARY KEY (principal, key)")
}
