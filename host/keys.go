package host

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"

	"github.com/keelhq/keel/extensions/decisions"
	"github.com/keelhq/keel/extensions/secrets"
	"github.com/keelhq/keel/kernel"
)

// instanceKey is a key kept outside the database whose products the database holds.
type instanceKey struct {
	// name is the key's fingerprint name in the database.
	name string
	// what says what the database holds under the key, for the refusal.
	what string
	// file and env are where the key comes from.
	file, env string
	// present reports whether the key is there without generating it.
	present func() bool
	// load returns the key, generating it (as its extension would) when missing.
	load func() ([]byte, error)
}

// instanceKeys lists the keys checked at start.
func instanceKeys(home string) []instanceKey {
	sdir, ddir := secrets.MasterKeyDir(home), decisions.SigningKeyDir(home)
	return []instanceKey{
		{
			name: "secrets_master_key", what: "secrets encrypted",
			file: filepath.Join(sdir, secrets.MasterKeyFile), env: secrets.MasterKeyEnv,
			present: func() bool { return secrets.MasterKeyPresent(sdir) },
			load:    func() ([]byte, error) { return secrets.LoadMasterKey(sdir) },
		},
		{
			name: "decision_signing_key", what: "decisions signed",
			file: filepath.Join(ddir, decisions.SigningKeyFile), env: decisions.SigningSecretEnv,
			present: func() bool { return decisions.SigningKeyPresent(ddir) },
			load:    func() ([]byte, error) { return decisions.LoadSigningKey(ddir) },
		},
	}
}

// keyFingerprint identifies a key without revealing it: an HMAC of a constant under the
// key, hex.
func keyFingerprint(key []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("keel key fingerprint v1"))
	return hex.EncodeToString(mac.Sum(nil))
}

// checkInstanceKeys makes sure the database and the keys kept in the data dir (or the
// environment) belong to the same instance, before any extension starts: the first start
// records each key's fingerprint, and a later start with a different key, or with none
// where the database already holds one's fingerprint, is refused with one line naming the
// cause and the fix. A missing key is generated here, as its extension would, only when the
// database has no fingerprint for it.
func checkInstanceKeys(ctx context.Context, k *kernel.Kernel, home string) error {
	for _, ik := range instanceKeys(home) {
		recorded, err := k.KeyFingerprint(ctx, ik.name)
		if err != nil {
			return err
		}
		if recorded != "" && !ik.present() {
			return fmt.Errorf("the database holds %s under a key that is not here: restore %s from the same backup as the database, or set %s to that key, or point keel at a fresh database",
				ik.what, ik.file, ik.env)
		}
		key, err := ik.load()
		if err != nil {
			return fmt.Errorf("error loading %s: %w", ik.file, err)
		}
		fp := keyFingerprint(key)
		if recorded, err = k.RecordKeyFingerprint(ctx, ik.name, fp); err != nil {
			return err
		}
		if recorded != fp {
			return fmt.Errorf("the database holds %s under a different key than %s or %s: use the key from the same instance (or backup) as the database, or point keel at a fresh database",
				ik.what, ik.file, ik.env)
		}
	}
	return nil
}
