package main

import (
	"bytes"
	"context"
	"regexp"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/host/pgembed/pgtest"
	"github.com/keelhq/keel/kernel"
)

// TestBootstrapCEOCommand runs `keel bootstrap-ceo` in process: it prints a link to a
// stored bootstrap_ceo invite (a second run revokes the first), and refuses once an
// instance admin exists unless --force.
func TestBootstrapCEOCommand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.NewDatabase(t)
	run := func(args ...string) (string, error) {
		cmd := rootCommand()
		var stdout, stderr bytes.Buffer
		cmd.SetOut(&stdout)
		cmd.SetErr(&stderr)
		cmd.SetArgs(append([]string{"bootstrap-ceo", "--home", t.TempDir(), "--database-url", dsn}, args...))
		err := cmd.ExecuteContext(ctx)
		return stdout.String(), err
	}
	link := regexp.MustCompile(`https://keel\.example/api/invites/(` + kernel.InviteTokenPrefix + `[0-9a-f]+)`)
	out, err := run("--base-url", "https://keel.example/")
	require.NoError(t, err)
	first := link.FindStringSubmatch(out)
	require.Len(t, first, 2, out)
	out, err = run("--base-url", "https://keel.example")
	require.NoError(t, err)
	second := link.FindStringSubmatch(out)
	require.Len(t, second, 2, out)

	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var open []string
	rows, err := conn.Query(ctx, `SELECT token_hash FROM kernel.invites WHERE invite_type = 'bootstrap_ceo' AND revoked_at IS NULL AND company_id IS NULL`)
	require.NoError(t, err)
	for rows.Next() {
		var h string
		require.NoError(t, rows.Scan(&h))
		open = append(open, h)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{kernel.HashToken(second[1])}, open)

	_, err = conn.Exec(ctx, `INSERT INTO kernel.users (id, email, name) VALUES ('u-admin', 'admin@keel.example', 'Admin');
		INSERT INTO kernel.instance_user_roles (user_id, role) VALUES ('u-admin', 'instance_admin')`)
	require.NoError(t, err)
	_, err = run()
	require.ErrorContains(t, err, "already has an instance admin")
	out, err = run("--force", "--json")
	require.NoError(t, err)
	require.Contains(t, out, `"inviteUrl": "http://127.0.0.1:`)
}
