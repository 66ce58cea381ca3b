package secrets

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// MasterKeyEnv is the environment variable that carries the master key.
const MasterKeyEnv = "SERVICE_SECRETS_MASTER_KEY"

// MasterKeyFile is the name of the generated key file in the extension's data directory.
const MasterKeyFile = "master.key"

// SchemeLocalEncryptedV1 is the scheme of locally encrypted material.
const SchemeLocalEncryptedV1 = "local_encrypted_v1"

// masterKeySize is the length of an AES-256 key.
const masterKeySize = 32

// Material is the stored form of one secret version's value: AES-256-GCM ciphertext with
// its nonce and tag, each base64 (REFERENCE.md 2.9 "local_encrypted material").
type Material struct {
	Scheme     string `json:"scheme"`
	IV         string `json:"iv"`
	Tag        string `json:"tag"`
	Ciphertext string `json:"ciphertext"`
}

// ParseMasterKey reads a 32-byte master key written as base64 (standard or URL alphabet,
// padded or not), as 64 hex digits, or as a raw 32-character string. Surrounding
// whitespace is ignored.
func ParseMasterKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("master key is empty")
	}
	if len(s) == 2*masterKeySize {
		if b, err := hex.DecodeString(s); err == nil {
			return b, nil
		}
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil && len(b) == masterKeySize {
			return b, nil
		}
	}
	if len(s) == masterKeySize {
		return []byte(s), nil
	}
	return nil, fmt.Errorf("master key must be 32 bytes as base64, 64 hex digits or a raw 32-character string (got %d characters)", len(s))
}

// loadMasterKey returns the master key from SERVICE_SECRETS_MASTER_KEY when it is set, and
// otherwise from dataDir/master.key, generating that file (base64, mode 0600) on first use.
// It reports where the key came from ("env" or "file").
func loadMasterKey(dataDir string) ([]byte, string, error) {
	if v, ok := os.LookupEnv(MasterKeyEnv); ok && strings.TrimSpace(v) != "" {
		k, err := ParseMasterKey(v)
		if err != nil {
			return nil, "", fmt.Errorf("error reading %s: %w", MasterKeyEnv, err)
		}
		return k, "env", nil
	}
	if dataDir == "" {
		return nil, "", fmt.Errorf("no %s and no data directory for %s", MasterKeyEnv, MasterKeyFile)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, "", fmt.Errorf("error creating data directory: %w", err)
	}
	path := filepath.Join(dataDir, MasterKeyFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		k, perr := ParseMasterKey(string(b))
		if perr != nil {
			return nil, "", fmt.Errorf("error reading %s: %w", path, perr)
		}
		return k, "file", nil
	case !errors.Is(err, os.ErrNotExist):
		return nil, "", fmt.Errorf("error reading %s: %w", path, err)
	}
	k := make([]byte, masterKeySize)
	if _, err := rand.Read(k); err != nil {
		return nil, "", fmt.Errorf("error generating master key: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		// Another process won the race; use its key.
		return loadMasterKey(dataDir)
	}
	if err != nil {
		return nil, "", fmt.Errorf("error creating %s: %w", path, err)
	}
	if _, err := f.WriteString(base64.StdEncoding.EncodeToString(k) + "\n"); err != nil {
		_ = f.Close()
		return nil, "", fmt.Errorf("error writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return nil, "", fmt.Errorf("error writing %s: %w", path, err)
	}
	return k, "file", nil
}

// sealer encrypts and decrypts secret values under the master key.
type sealer struct {
	aead cipher.AEAD
	mac  []byte
}

// newSealer returns a sealer for a 32-byte master key.
func newSealer(key []byte) (*sealer, error) {
	if len(key) != masterKeySize {
		return nil, fmt.Errorf("master key must be %d bytes, got %d", masterKeySize, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("error creating cipher: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("error creating GCM: %w", err)
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte("keel secrets value digest v1"))
	return &sealer{aead: aead, mac: m.Sum(nil)}, nil
}

// seal encrypts a value with a fresh 12-byte nonce. aad binds the ciphertext to its
// secret and version so material cannot be moved between rows.
func (s *sealer) seal(plaintext, aad []byte) (*Material, error) {
	iv := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(iv); err != nil {
		return nil, fmt.Errorf("error generating nonce: %w", err)
	}
	out := s.aead.Seal(nil, iv, plaintext, aad)
	n := len(out) - s.aead.Overhead()
	return &Material{
		Scheme:     SchemeLocalEncryptedV1,
		IV:         base64.StdEncoding.EncodeToString(iv),
		Tag:        base64.StdEncoding.EncodeToString(out[n:]),
		Ciphertext: base64.StdEncoding.EncodeToString(out[:n]),
	}, nil
}

// errUndecryptable is returned for material that fails authentication or is malformed.
var errUndecryptable = errors.New("secret material cannot be decrypted")

// open decrypts material sealed with the same key and aad.
func (s *sealer) open(m *Material, aad []byte) ([]byte, error) {
	if m == nil || m.Scheme != SchemeLocalEncryptedV1 {
		return nil, errUndecryptable
	}
	iv, err1 := base64.StdEncoding.DecodeString(m.IV)
	tag, err2 := base64.StdEncoding.DecodeString(m.Tag)
	ct, err3 := base64.StdEncoding.DecodeString(m.Ciphertext)
	if err1 != nil || err2 != nil || err3 != nil || len(iv) != s.aead.NonceSize() || len(tag) != s.aead.Overhead() {
		return nil, errUndecryptable
	}
	pt, err := s.aead.Open(nil, iv, append(ct, tag...), aad)
	if err != nil {
		return nil, errUndecryptable
	}
	return pt, nil
}

// digest is a keyed SHA-256 of a value (stored as valueSha256), so equal values can be
// recognized without a plain hash that would let weak secrets be guessed offline.
func (s *sealer) digest(value []byte) string {
	m := hmac.New(sha256.New, s.mac)
	m.Write(value)
	return hex.EncodeToString(m.Sum(nil))
}

// versionAAD is the additional data that binds material to a secret version.
func versionAAD(secretID string, version int) []byte {
	return fmt.Appendf(nil, "keel-secret:%s:%d", secretID, version)
}

// MasterKeyDir returns the secrets extension's data directory under keel's home, where
// master.key lives when SERVICE_SECRETS_MASTER_KEY is not set.
func MasterKeyDir(home string) string { return filepath.Join(home, "extensions", Key) }

// MasterKeyPresent reports whether a master key is available without generating one: the
// environment variable is set or the key file exists in dataDir.
func MasterKeyPresent(dataDir string) bool {
	if v, ok := os.LookupEnv(MasterKeyEnv); ok && strings.TrimSpace(v) != "" {
		return true
	}
	_, err := os.Stat(filepath.Join(dataDir, MasterKeyFile))
	return err == nil
}

// LoadMasterKey returns the master key the secrets extension will use (see loadMasterKey),
// generating the key file on first use.
func LoadMasterKey(dataDir string) ([]byte, error) {
	k, _, err := loadMasterKey(dataDir)
	return k, err
}
