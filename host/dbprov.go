package host

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// dbProvisioner gives each extension with the database capability one schema, ext_<key>,
// owned by its own login role that can touch nothing else. The role's password is derived
// from the instance secret, so every keel node sharing the database agrees on it.
type dbProvisioner struct {
	pool   *pgxpool.Pool
	secret []byte
}

// ExtensionSchema returns the schema (and role) name of an extension key.
func ExtensionSchema(key string) string {
	return "ext_" + strings.ReplaceAll(key, ".", "_")
}

// ProvisionExtensionDatabase implements supervisor.DatabaseProvisioner.
func (p *dbProvisioner) ProvisionExtensionDatabase(ctx context.Context, key string) (string, error) {
	name := ExtensionSchema(key)
	ident := pgx.Identifier{name}.Sanitize()
	mac := hmac.New(sha256.New, p.secret)
	mac.Write([]byte("db-role:" + name))
	password := hex.EncodeToString(mac.Sum(nil))
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		return "", fmt.Errorf("error provisioning database of %s: %w", key, err)
	}
	defer conn.Release()
	// Serialize provisioning across nodes; CREATE ROLE has no IF NOT EXISTS.
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(727002)`); err != nil {
		return "", fmt.Errorf("error provisioning database of %s: %w", key, err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(727002)`) //nolint:errcheck
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)`, name).Scan(&exists); err != nil {
		return "", fmt.Errorf("error provisioning database of %s: %w", key, err)
	}
	var dbName string
	if err := conn.QueryRow(ctx, `SELECT current_database()`).Scan(&dbName); err != nil {
		return "", fmt.Errorf("error provisioning database of %s: %w", key, err)
	}
	stmts := []string{}
	if !exists {
		stmts = append(stmts, `CREATE ROLE `+ident+` LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT`)
	}
	stmts = append(stmts,
		`ALTER ROLE `+ident+` PASSWORD '`+password+`'`,
		`CREATE SCHEMA IF NOT EXISTS `+ident+` AUTHORIZATION `+ident,
		`ALTER ROLE `+ident+` SET search_path = `+ident,
		`GRANT CONNECT ON DATABASE `+pgx.Identifier{dbName}.Sanitize()+` TO `+ident,
		`REVOKE ALL ON SCHEMA kernel FROM `+ident,
	)
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			return "", fmt.Errorf("error provisioning database of %s: %w", key, err)
		}
	}
	cfg := p.pool.Config().ConnConfig
	return fmt.Sprintf("host=%s port=%d dbname=%s user=%s password=%s sslmode=%s search_path=%s",
		dsnQuote(cfg.Host), cfg.Port, dsnQuote(dbName), name, password, sslMode(cfg), name), nil
}

func sslMode(cfg *pgx.ConnConfig) string {
	if cfg.TLSConfig == nil {
		return "disable"
	}
	return "require"
}

func dsnQuote(s string) string {
	if s == "" || strings.ContainsAny(s, ` '\`) {
		return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
	}
	return s
}
