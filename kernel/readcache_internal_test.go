package kernel

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReadCacheTokens: an answer is stored only when no invalidation of its company (or of
// every company) happened since its read began, and nothing is served while the cache is
// not listening for other nodes.
func TestReadCacheTokens(t *testing.T) {
	t.Parallel()
	c := NewReadCache(nil)
	entry := func(body string) *CachedRead {
		return &CachedRead{Status: 200, Body: []byte(body), ETag: ETagOf([]byte(body))}
	}

	hit, tok := c.Get("a", "k")
	require.Nil(t, hit)
	c.Put("a", "k", tok, entry("x"))
	hit, _ = c.Get("a", "k")
	require.Nil(t, hit, "nothing is kept before the cache listens")

	c.setListening(true)
	_, tok = c.Get("a", "k")
	c.Put("a", "k", tok, entry("x"))
	hit, _ = c.Get("a", "k")
	require.NotNil(t, hit)
	require.Equal(t, "x", string(hit.Body))

	tests := []struct {
		name       string
		invalidate string
		kept       bool
	}{
		{"the same company", "a", false},
		{"another company", "b", true},
		{"every company", "", false},
		{"every company, from another node", "*", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c.invalidateLocal("a")
			_, tok := c.Get("a", "k") // a read begins
			c.invalidateLocal(tc.invalidate)
			c.Put("a", "k", tok, entry("stale?")) // and ends after the write
			hit, _ := c.Get("a", "k")
			require.Equal(t, tc.kept, hit != nil)
		})
	}

	_, tok = c.Get("a", "k")
	c.Put("a", "k", tok, entry("x"))
	hit, _ = c.Get("a", "k")
	require.NotNil(t, hit)
	c.Invalidate("a")
	hit, _ = c.Get("a", "k")
	require.Nil(t, hit, "a local write forgets at once")
	c.setListening(false)
	_, tok = c.Get("a", "k")
	c.Put("a", "k", tok, entry("x"))
	hit, _ = c.Get("a", "k")
	require.Nil(t, hit, "nothing is served while not listening")

	require.True(t, ETagMatches(`W/"x", `+ETagOf([]byte("y")), ETagOf([]byte("y"))))
	require.False(t, ETagMatches(`"x"`, ETagOf([]byte("y"))))
	require.Equal(t, []string{"*"}, chunkIDs([]string{"a", "*"}))
	long := chunkIDs([]string{strings.Repeat("a", 4000), strings.Repeat("b", 4000)})
	require.Len(t, long, 2)
}
