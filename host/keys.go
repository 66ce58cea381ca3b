package host

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/keelhq/keel/extensions/secrets"
	"github.com/keelhq/keel/kernel"
)

// masterKeyFingerprint is the name under which the secrets master key's fingerprint is
// recorded in the database.
const masterKeyFingerprint = "secrets_master_key"

// checkMasterKey makes sure the database and the secrets master key belong to the same
// instance, before any extension starts: the first start records the key's fingerprint,
// and a later start with a different key (or none, where the database already holds one's
// fingerprint) is refused with one line naming the cause and the fix. A key is generated
// here, as the secrets extension would, when neither the database nor the data dir has one.
func checkMasterKey(ctx context.Context, k *kernel.Kernel, home string) error {
	dir := secrets.MasterKeyDir(home)
	recorded, err := k.KeyFingerprint(ctx, masterKeyFingerprint)
	if err != nil {
		return err
	}
	if recorded != "" && !secrets.MasterKeyPresent(dir) {
		return fmt.Errorf("the database holds secrets encrypted under a master key that is not here: restore %s from the same backup as the database, or set %s to that key, or point keel at a fresh database",
			filepath.Join(dir, secrets.MasterKeyFile), secrets.MasterKeyEnv)
	}
	key, err := secrets.LoadMasterKey(dir)
	if err != nil {
		return fmt.Errorf("error loading the secrets master key: %w", err)
	}
	fp := secrets.MasterKeyFingerprint(key)
	if recorded, err = k.RecordKeyFingerprint(ctx, masterKeyFingerprint, fp); err != nil {
		return err
	}
	if recorded != fp {
		return fmt.Errorf("the database holds secrets encrypted under a different master key than %s or %s: use the key from the same instance (or backup) as the database, or point keel at a fresh database",
			filepath.Join(dir, secrets.MasterKeyFile), secrets.MasterKeyEnv)
	}
	return nil
}
