package secrets

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func testKey() []byte { return bytes.Repeat([]byte{0x42}, 32) }

func TestSealOpenRoundTrip(t *testing.T) {
	t.Parallel()
	s, err := newSealer(testKey())
	require.NoError(t, err)
	for _, v := range []string{"", "x", "sk-live-0123456789", string(bytes.Repeat([]byte("ü"), 5000))} {
		m, err := s.seal([]byte(v), versionAAD("id", 1))
		require.NoError(t, err)
		require.Equal(t, SchemeLocalEncryptedV1, m.Scheme)
		iv, err := base64.StdEncoding.DecodeString(m.IV)
		require.NoError(t, err)
		require.Len(t, iv, 12)
		tag, err := base64.StdEncoding.DecodeString(m.Tag)
		require.NoError(t, err)
		require.Len(t, tag, 16)
		if len(v) > 8 {
			require.NotContains(t, m.Ciphertext+m.IV+m.Tag, v)
		}
		got, err := s.open(m, versionAAD("id", 1))
		require.NoError(t, err)
		require.Equal(t, v, string(got))
	}
	a, _ := s.seal([]byte("same"), nil)
	b, _ := s.seal([]byte("same"), nil)
	require.NotEqual(t, a.IV, b.IV, "every seal uses a fresh nonce")
	require.Equal(t, s.digest([]byte("same")), s.digest([]byte("same")))
	require.NotEqual(t, s.digest([]byte("same")), s.digest([]byte("other")))
}

func TestOpenDetectsTampering(t *testing.T) {
	t.Parallel()
	s, err := newSealer(testKey())
	require.NoError(t, err)
	other, err := newSealer(bytes.Repeat([]byte{0x43}, 32))
	require.NoError(t, err)
	aad := versionAAD("secret", 2)
	m, err := s.seal([]byte("top secret value"), aad)
	require.NoError(t, err)
	flip := func(b64 string) string {
		b, _ := base64.StdEncoding.DecodeString(b64)
		b[0] ^= 1
		return base64.StdEncoding.EncodeToString(b)
	}
	cases := []struct {
		name string
		m    Material
		aad  []byte
		s    *sealer
	}{
		{"ciphertext", Material{m.Scheme, m.IV, m.Tag, flip(m.Ciphertext)}, aad, s},
		{"tag", Material{m.Scheme, m.IV, flip(m.Tag), m.Ciphertext}, aad, s},
		{"iv", Material{m.Scheme, flip(m.IV), m.Tag, m.Ciphertext}, aad, s},
		{"scheme", Material{"plain", m.IV, m.Tag, m.Ciphertext}, aad, s},
		{"bad base64", Material{m.Scheme, "!!", m.Tag, m.Ciphertext}, aad, s},
		{"short tag", Material{m.Scheme, m.IV, "AAAA", m.Ciphertext}, aad, s},
		{"other version", *m, versionAAD("secret", 1), s},
		{"other secret", *m, versionAAD("other", 2), s},
		{"other key", *m, aad, other},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.s.open(&tc.m, tc.aad)
			require.ErrorIs(t, err, errUndecryptable)
		})
	}
	_, err = s.open(nil, aad)
	require.ErrorIs(t, err, errUndecryptable)
}

func TestParseMasterKey(t *testing.T) {
	t.Parallel()
	key := []byte("0123456789abcdefghijklmnopqrstuv")
	cases := []struct {
		name, in string
		want     []byte
		wantErr  bool
	}{
		{"base64", base64.StdEncoding.EncodeToString(key), key, false},
		{"base64 raw", base64.RawStdEncoding.EncodeToString(key), key, false},
		{"base64 url", base64.URLEncoding.EncodeToString(testKey()), testKey(), false},
		{"base64 with newline", base64.StdEncoding.EncodeToString(key) + "\n", key, false},
		{"hex", hex.EncodeToString(key), key, false},
		{"hex upper", "4242424242424242424242424242424242424242424242424242424242424242", testKey(), false},
		{"raw", string(key), key, false},
		{"empty", "", nil, true},
		{"blank", "   ", nil, true},
		{"short", "tooshort", nil, true},
		{"base64 of 16 bytes", base64.StdEncoding.EncodeToString(key[:16]), nil, true},
		{"33 characters", string(key) + "x", nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseMasterKey(tc.in)
			if tc.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func FuzzParseMasterKey(f *testing.F) {
	f.Add(base64.StdEncoding.EncodeToString(testKey()))
	f.Add(hex.EncodeToString(testKey()))
	f.Add("0123456789abcdefghijklmnopqrstuv")
	f.Add("")
	f.Add("====")
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseMasterKey(s)
		if err != nil {
			require.Nil(t, k)
			return
		}
		require.Len(t, k, 32)
		_, err = newSealer(k)
		require.NoError(t, err)
		// A parsed key survives the file format the extension writes.
		again, err := ParseMasterKey(base64.StdEncoding.EncodeToString(k) + "\n")
		require.NoError(t, err)
		require.Equal(t, k, again)
	})
}

func TestLoadMasterKeyGeneratesFile(t *testing.T) {
	t.Setenv(MasterKeyEnv, "")
	dir := filepath.Join(t.TempDir(), "data")
	k1, src, err := loadMasterKey(dir)
	require.NoError(t, err)
	require.Equal(t, "file", src)
	require.Len(t, k1, 32)
	st, err := os.Stat(filepath.Join(dir, MasterKeyFile))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	k2, _, err := loadMasterKey(dir)
	require.NoError(t, err)
	require.Equal(t, k1, k2, "the generated key is reused")

	t.Setenv(MasterKeyEnv, hex.EncodeToString(testKey()))
	k3, src, err := loadMasterKey(dir)
	require.NoError(t, err)
	require.Equal(t, "env", src)
	require.Equal(t, testKey(), k3)

	t.Setenv(MasterKeyEnv, "not a key")
	_, _, err = loadMasterKey(dir)
	require.ErrorContains(t, err, MasterKeyEnv)
}

func TestDeriveKeyAndSelector(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"OpenAI API key": "OPENAI_API_KEY", "  github--token ": "GITHUB_TOKEN", "3rd party": "_3RD_PARTY",
		"€€€": "SECRET", "db.password": "DB_PASSWORD",
	} {
		require.Equal(t, want, deriveKey(in), in)
		require.Regexp(t, keyRE, deriveKey(in))
	}
	for in, want := range map[string]string{`"latest"`: "latest", ``: "latest", `null`: "latest", `0`: "latest", `3`: "3", `"4"`: "4"} {
		got, ok := parseSelector([]byte(in))
		require.True(t, ok, in)
		require.Equal(t, want, string(got), in)
	}
	for _, in := range []string{`-1`, `"x"`, `{}`, `1.5`} {
		_, ok := parseSelector([]byte(in))
		require.False(t, ok, in)
	}
}
