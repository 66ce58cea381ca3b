package pgembed

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5"
)

// The superuser logs in with a password on the Unix socket too (scram-sha-256): a process
// that can reach the socket, an agent's command say, cannot log in without the password,
// which is kept in a 0600 file of keel's own user beside the data dir.

// passwordPath is where the superuser's password is kept for a requested data dir:
// "<data dir>.password" (SERVICE_HOME/db.password for keel).
func passwordPath(reqDir string) string { return filepath.Clean(reqDir) + ".password" }

// loadPassword reads the superuser password; ok is false when the file does not exist.
func loadPassword(path string) (pw string, ok bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("reading the database password file %s: %w", path, err)
	}
	pw = strings.TrimSpace(string(b))
	if pw == "" {
		return "", false, fmt.Errorf("the database password file %s is empty; restore it, or remove it with the cluster to start afresh", path)
	}
	return pw, true, nil
}

// createPassword makes a random superuser password and keeps it, mode 0600.
func createPassword(path string) (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating the database password: %w", err)
	}
	pw := hex.EncodeToString(b)
	if err := os.WriteFile(path, []byte(pw+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("writing the database password file %s: %w", path, err)
	}
	return pw, nil
}

// writeInitdbPwfile writes the password where initdb, running as the server user, can read
// it (the private socket directory, which that user owns; initdb wants an empty data dir)
// and returns a function removing it.
func writeInitdbPwfile(dir string, u serverUser, pw string) (string, func(), error) {
	path := filepath.Join(dir, ".keel-initdb-pwfile")
	if err := os.WriteFile(path, []byte(pw+"\n"), 0o600); err != nil {
		return "", nil, fmt.Errorf("writing the initdb password file: %w", err)
	}
	if u.root() {
		if err := os.Chown(path, u.uid, u.gid); err != nil {
			_ = os.Remove(path)
			return "", nil, fmt.Errorf("handing the initdb password file to %s: %w", u.name, err)
		}
	}
	return path, func() { _ = os.Remove(path) }, nil
}

// hbaTrustsLocal reports whether pg_hba.conf still trusts local (socket) logins, as
// clusters made by earlier keel versions do.
func hbaTrustsLocal(dataDir string) (bool, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, "pg_hba.conf"))
	if err != nil {
		return false, fmt.Errorf("reading pg_hba.conf of %s: %w", dataDir, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 4 && f[0] == "local" && f[len(f)-1] == "trust" {
			return true, nil
		}
	}
	return false, nil
}

// requireLocalPassword moves a cluster that still trusts socket logins to passwords: the
// superuser gets the password and every local trust line becomes scram-sha-256, applied
// with a configuration reload. It connects while trust still holds.
func (c *Cluster) requireLocalPassword(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		return fmt.Errorf("connecting to set the superuser password: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// The password is hex, so it needs no escaping beyond the quotes.
	if _, err := conn.Exec(ctx, "ALTER ROLE "+pgx.Identifier{superuser}.Sanitize()+" PASSWORD '"+c.password+"'"); err != nil {
		return fmt.Errorf("setting the superuser password: %w", err)
	}
	path := filepath.Join(c.dataDir, "pg_hba.conf")
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	var out bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		if len(f) >= 4 && f[0] == "local" && f[len(f)-1] == "trust" {
			line = strings.TrimSuffix(strings.TrimRight(line, " \t"), "trust") + "scram-sha-256"
		}
		out.WriteString(line + "\n")
	}
	if err := os.WriteFile(path, out.Bytes(), 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		return fmt.Errorf("reloading the server configuration: %w", err)
	}
	c.log.Info("the embedded cluster now requires the superuser password on its socket too", "password_file", c.passwordFile)
	return nil
}

// ConnectionURLs returns postgres:// URLs for database as the superuser of the cluster
// kept for the requested data dir reqDir, with the password from its 0600 file: one over
// the Unix socket and, when port is set (SERVICE_PG_PORT), one over 127.0.0.1:port. The
// cluster need not be running; the URLs work while it does.
func ConnectionURLs(reqDir string, port int, database string) (socket, tcp string, err error) {
	reqDir, err = filepath.Abs(reqDir)
	if err != nil {
		return "", "", fmt.Errorf("resolving data dir %s: %w", reqDir, err)
	}
	pw, ok, err := loadPassword(passwordPath(reqDir))
	if err != nil {
		return "", "", err
	}
	if !ok {
		return "", "", fmt.Errorf("no database password at %s: start keel once (keel serve) with this SERVICE_HOME to create the cluster", passwordPath(reqDir))
	}
	dataDir := reqDir
	if _, err := os.Stat(filepath.Join(reqDir, "PG_VERSION")); err != nil {
		// As root, the cluster may live in the fallback directory (see Start).
		if alt := filepath.Join(fallbackRoot, "pg-"+shortHash(reqDir)); dirExists(alt) {
			dataDir = alt
		}
	}
	sockPort := defaultPort
	if port > 0 {
		sockPort = port
	}
	user := url.UserPassword(superuser, pw)
	socket = (&url.URL{Scheme: "postgres", User: user, Path: "/" + database,
		RawQuery: url.Values{"host": {filepath.Join(socketRoot, "keel-pg-"+shortHash(dataDir))}, "port": {fmt.Sprint(sockPort)}, "sslmode": {"disable"}}.Encode()}).String()
	if port > 0 {
		tcp = (&url.URL{Scheme: "postgres", User: user, Host: fmt.Sprintf("127.0.0.1:%d", port), Path: "/" + database, RawQuery: "sslmode=disable"}).String()
	}
	return socket, tcp, nil
}

// dirExists reports whether path is an existing directory.
func dirExists(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}
