package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/host/pgembed/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestBackupRestoreCommands runs `keel backup` and `keel restore DIR` in process against
// databases of the shared test cluster: the restore brings back the rows and the data
// dir's files (not its caches), and refuses a non-empty data dir unless --force.
func TestBackupRestoreCommands(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.NewDatabase(t)
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `CREATE SCHEMA app; CREATE TABLE app.items (id int PRIMARY KEY, name text); INSERT INTO app.items SELECT g, 'item ' || g FROM generate_series(1, 250) g`)
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))

	home := t.TempDir()
	attachment := filepath.Join("extensions", "work", "attachments", "c1", "ab", "a1")
	require.NoError(t, os.MkdirAll(filepath.Join(home, filepath.Dir(attachment)), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(home, attachment), []byte("attachment bytes"), 0o600))
	require.NoError(t, os.MkdirAll(filepath.Join(home, "wasm-cache"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(home, "wasm-cache", "compiled"), []byte("cache"), 0o600))

	run := func(args ...string) (string, string, error) {
		cmd := rootCommand()
		var stdout, stderr bytes.Buffer
		cmd.SetOut(&stdout)
		cmd.SetErr(&stderr)
		cmd.SetArgs(args)
		err := cmd.ExecuteContext(ctx)
		return stdout.String(), stderr.String(), err
	}
	out, progress, err := run("backup", "--home", home, "--database-url", dsn, "--keep", "1")
	require.NoError(t, err)
	require.Contains(t, progress, "keel: database: dumping every schema\n")
	require.Contains(t, progress, "keel: files: 1 of 1")
	require.Contains(t, out, "retention: keep the 1 newest, none older than 30 days; 1 kept, 0 pruned")
	dir := regexp.MustCompile(`backup written to (\S+) in`).FindStringSubmatch(out)
	require.Len(t, dir, 2, out)
	require.Equal(t, filepath.Join(home, "backups"), filepath.Dir(dir[1]))

	target := filepath.Join(t.TempDir(), "restored")
	out, _, err = run("restore", dir[1], "--home", target, "--database-url", pgtest.NewDatabase(t))
	require.NoError(t, err)
	require.Contains(t, out, "into "+target)
	require.Contains(t, out, "1 tables (250 rows, counts checked), 1 files")
	b, err := os.ReadFile(filepath.Join(target, attachment))
	require.NoError(t, err)
	require.Equal(t, "attachment bytes", string(b))
	_, err = os.Stat(filepath.Join(target, "wasm-cache"))
	require.True(t, os.IsNotExist(err), "caches are not backed up")

	_, _, err = run("restore", dir[1], "--home", target, "--database-url", pgtest.NewDatabase(t))
	require.ErrorContains(t, err, "data dir "+target+" is not empty: restore into an empty data dir, or pass --force to replace its contents")
	_, _, err = run("restore", dir[1], "--home", t.TempDir(), "--database-url", dsn)
	require.ErrorContains(t, err, "the database to restore into already holds tables (app.items): restore into an empty database")
	_, _, err = run("restore", dir[1], "--home", target, "--force", "--database-url", pgtest.NewDatabase(t))
	require.NoError(t, err)
	_, _, err = run("restore", home, "--home", t.TempDir())
	require.ErrorContains(t, err, "is not a keel backup: it has no manifest.json")
}
