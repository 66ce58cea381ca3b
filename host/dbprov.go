package host

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/keelhq/keel/sdk"
)

// dbProvisioner gives each extension with the database capability one schema, ext_<key>,
// owned by its own login role that can touch nothing else. Roles are cluster-wide while
// schemas are per database, so the role name carries a digest of the instance id: two keel
// instances on one server never share (or fight over) a role. The role's password is
// derived from the instance secret, so every node of one instance agrees on it.
type dbProvisioner struct {
	pool       *pgxpool.Pool
	secret     []byte
	instanceID string
	// mu serializes provisioning on this node before a connection is taken: the advisory
	// lock serializes it anyway, and extensions starting together would otherwise each hold
	// one of the kernel's few connections while they wait for it.
	mu sync.Mutex
}

// ExtensionSchema returns the schema (and role) name of an extension key.
func ExtensionSchema(key string) string {
	return sdk.SchemaName(key)
}

// ProvisionExtensionDatabase implements supervisor.DatabaseProvisioner.
func (p *dbProvisioner) ProvisionExtensionDatabase(ctx context.Context, key string) (string, error) {
	schema := ExtensionSchema(key)
	name := ExtensionRole(key, p.instanceID)
	ident := pgx.Identifier{name}.Sanitize()
	schemaIdent := pgx.Identifier{schema}.Sanitize()
	mac := hmac.New(sha256.New, p.secret)
	mac.Write([]byte("db-role:" + name))
	password := hex.EncodeToString(mac.Sum(nil))
	p.mu.Lock()
	defer p.mu.Unlock()
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
		`CREATE SCHEMA IF NOT EXISTS `+schemaIdent+` AUTHORIZATION `+ident,
		`ALTER SCHEMA `+schemaIdent+` OWNER TO `+ident,
		`ALTER ROLE `+ident+` IN DATABASE `+pgx.Identifier{dbName}.Sanitize()+` SET search_path = `+schemaIdent,
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
		dsnQuote(cfg.Host), cfg.Port, dsnQuote(dbName), name, password, sslMode(cfg), schema), nil
}

// ExtensionRole returns the login role of an extension in one instance:
// ext_<key>_<8 hex digits of sha256(instance id)>, kept within PostgreSQL's 63 bytes.
func ExtensionRole(key, instanceID string) string {
	sum := sha256.Sum256([]byte(instanceID))
	base := ExtensionSchema(key)
	if len(base) > 50 {
		base = base[:50]
	}
	return base + "_" + hex.EncodeToString(sum[:4])
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

// DropExtensionDatabase implements supervisor.DatabaseDropper: it drops the extension's
// schema (its tables with it) and its login role, for an uninstall with purge. Dropping
// what does not exist is not an error.
func (p *dbProvisioner) DropExtensionDatabase(ctx context.Context, key string) error {
	schema := pgx.Identifier{ExtensionSchema(key)}.Sanitize()
	name := ExtensionRole(key, p.instanceID)
	p.mu.Lock()
	defer p.mu.Unlock()
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("error dropping database of %s: %w", key, err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(727002)`); err != nil {
		return fmt.Errorf("error dropping database of %s: %w", key, err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(727002)`) //nolint:errcheck
	// The extension's own connections (a process that just stopped) are closed first, so
	// that dropping its role is not refused.
	if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1`, name); err != nil {
		return fmt.Errorf("error dropping database of %s: %w", key, err)
	}
	if _, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+schema+` CASCADE`); err != nil {
		return fmt.Errorf("error dropping schema of %s: %w", key, err)
	}
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)`, name).Scan(&exists); err != nil {
		return fmt.Errorf("error dropping role of %s: %w", key, err)
	}
	if !exists {
		return nil
	}
	ident := pgx.Identifier{name}.Sanitize()
	for _, stmt := range []string{`DROP OWNED BY ` + ident, `DROP ROLE ` + ident} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("error dropping role of %s: %w", key, err)
		}
	}
	return nil
}
