package decisions

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// SigningSecretEnv carries the decision signing secret (at least 32 characters).
const SigningSecretEnv = "SERVICE_DECISION_SIGNING_SECRET"

// SigningKeyFile is the generated key file in the extension's data directory (mode 0600).
const SigningKeyFile = "decision-signing.key"

// SpecVersion is the version identifier of the signed specification.
const SpecVersion = "decision-spec-v1"

// minSecretLen is the shortest accepted signing secret.
const minSecretLen = 32

// signer signs and verifies a decision's specification (REFERENCE.md key fact 10):
// "decision-spec-v1." + hex(HMAC-SHA256(secret, "decision-spec-v1:" + canonical({decisionId,
// options, targetSnapshots}))).
type signer struct{ secret []byte }

// loadSigner reads the secret from SERVICE_DECISION_SIGNING_SECRET when it is long enough,
// and otherwise from dataDir/decision-signing.key, generating the file on first use. Without a
// data directory it falls back to a key held in memory for the life of the process. It
// reports where the key came from.
func loadSigner(dataDir string) (*signer, string, error) {
	if v := strings.TrimSpace(os.Getenv(SigningSecretEnv)); len(v) >= minSecretLen {
		return &signer{secret: []byte(v)}, "env", nil
	}
	if dataDir == "" {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return nil, "", fmt.Errorf("error generating signing key: %w", err)
		}
		return &signer{secret: []byte(hex.EncodeToString(b))}, "memory", nil
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, "", fmt.Errorf("error creating data directory: %w", err)
	}
	path := filepath.Join(dataDir, SigningKeyFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil && len(strings.TrimSpace(string(b))) >= minSecretLen:
		return &signer{secret: []byte(strings.TrimSpace(string(b)))}, "file", nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return nil, "", fmt.Errorf("error reading %s: %w", path, err)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return nil, "", fmt.Errorf("error generating signing key: %w", err)
	}
	key := hex.EncodeToString(raw)
	if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
		return nil, "", fmt.Errorf("error writing %s: %w", path, err)
	}
	return &signer{secret: []byte(key)}, "generated", nil
}

// sign returns the signed spec of a decision.
func (s *signer) sign(decisionID string, options, targetSnapshots json.RawMessage) (string, error) {
	canon, err := canonical(map[string]json.RawMessage{"decisionId": mustJSON(decisionID), "options": options,
		"targetSnapshots": targetSnapshots})
	if err != nil {
		return "", fmt.Errorf("error canonicalizing decision spec: %w", err)
	}
	mac := hmac.New(sha256.New, s.secret)
	mac.Write([]byte(SpecVersion + ":"))
	mac.Write(canon)
	return SpecVersion + "." + hex.EncodeToString(mac.Sum(nil)), nil
}

// verify reports whether signed matches the decision's stored options and snapshots.
func (s *signer) verify(decisionID string, options, targetSnapshots json.RawMessage, signed string) bool {
	want, err := s.sign(decisionID, options, targetSnapshots)
	if err != nil {
		return false
	}
	return hmac.Equal([]byte(want), []byte(signed))
}

// canonical encodes v as JSON with object keys sorted recursively, no whitespace and no
// HTML escaping; numbers keep their literal form.
func canonical(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var generic any
	if err := dec.Decode(&generic); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(generic); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// mustJSON encodes a value that always encodes (strings, maps of plain values).
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("decisions: encoding %T: %v", v, err))
	}
	return b
}

// SigningKeyDir returns the decisions extension's data directory under keel's home.
func SigningKeyDir(home string) string { return filepath.Join(home, "extensions", Key) }

// SigningKeyPresent reports whether a signing key is available without generating one.
func SigningKeyPresent(dataDir string) bool {
	if len(strings.TrimSpace(os.Getenv(SigningSecretEnv))) >= minSecretLen {
		return true
	}
	b, err := os.ReadFile(filepath.Join(dataDir, SigningKeyFile))
	return err == nil && len(strings.TrimSpace(string(b))) >= minSecretLen
}

// LoadSigningKey returns the signing key the decisions extension will use (see loadSigner),
// generating the key file on first use.
func LoadSigningKey(dataDir string) ([]byte, error) {
	s, _, err := loadSigner(dataDir)
	if err != nil {
		return nil, err
	}
	return s.secret, nil
}
