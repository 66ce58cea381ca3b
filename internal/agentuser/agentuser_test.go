package agentuser

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLookup(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"-", "root"} {
		u, err := lookup(name)
		require.NoError(t, err, name)
		require.Nil(t, u, "%s means keel's own user", name)
	}
	if os.Geteuid() != 0 {
		u, err := lookup("nobody")
		require.NoError(t, err)
		require.Nil(t, u, "a process that is not root runs commands as itself")
		return
	}
	u, err := lookup("nobody")
	require.NoError(t, err)
	require.Equal(t, "nobody", u.Name)
	require.NotZero(t, u.UID)
	require.Equal(t, u.UID, u.Credential().Uid)
	require.Empty(t, u.Credential().Groups, "no supplementary groups")
}
