package kernel

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBlockedAddress(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		addr            string
		private, public string
	}{
		{"93.184.216.34", "", ""},
		{"2606:2800:220:1:248:1893:25c8:1946", "", ""},
		{"127.0.0.1", "", "loopback"},
		{"::1", "", "loopback"},
		{"::ffff:127.0.0.1", "", "loopback"},
		{"10.0.0.1", "", "private"},
		{"172.16.5.4", "", "private"},
		{"192.168.1.1", "", "private"},
		{"fd00::1", "", "private"},
		{"100.64.0.1", "", "private"},
		{"169.254.169.254", "link-local", "link-local"},
		{"fe80::1", "link-local", "link-local"},
		{"0.0.0.0", "unspecified", "unspecified"},
		{"0.1.2.3", "unspecified", "unspecified"},
		{"::", "unspecified", "unspecified"},
		{"224.0.0.1", "link-local", "link-local"},
		{"239.1.1.1", "multicast", "multicast"},
		{"64:ff9b::7f00:1", "translated", "translated"},
	} {
		a := netip.MustParseAddr(c.addr)
		require.Equal(t, c.private, blockedAddress(a, true), "%s on a private deployment", c.addr)
		require.Equal(t, c.public, blockedAddress(a, false), "%s on a public deployment", c.addr)
	}
}

func TestUserSlugAndInitials(t *testing.T) {
	t.Parallel()
	require.Equal(t, "ada-lovelace", UserSlug("Ada  Lovelace!", "x@y"))
	require.Equal(t, "zoë-o-brien", UserSlug("Zoë O'Brien", ""))
	require.Equal(t, "bob-smith", UserSlug("", "bob.smith@example.com"))
	require.Equal(t, "user", UserSlug("", "@"))
	require.Equal(t, "AC", initials("acme  corp inc"))
	require.Equal(t, "?", initials("  "))
	require.Equal(t, "9L", initials("9 lives"))
}
