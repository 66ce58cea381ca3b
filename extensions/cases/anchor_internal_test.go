package cases

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLocate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body string
		in         Anchor
		ok         bool
		start      int
	}{
		{"Single", "the quick brown fox", Anchor{Quote: "brown"}, true, 10},
		{"Missing", "the quick brown fox", Anchor{Quote: "purple"}, false, 0},
		{"Empty", "abc", Anchor{}, false, 0},
		{"PrefixPicksSecond", "a cat; the cat sat", Anchor{Quote: "cat", Prefix: "the "}, true, 11},
		{"SuffixPicksFirst", "cat nap, cat sat", Anchor{Quote: "cat", Suffix: " nap"}, true, 0},
		{"NearestOldStart", "x x x x", Anchor{Quote: "x", Start: 4}, true, 4},
		{"RuneOffsets", "héllo wörld", Anchor{Quote: "wörld"}, true, 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := locate(tt.body, tt.in)
			require.Equal(t, tt.ok, ok)
			if ok {
				require.Equal(t, tt.start, got.Start)
				require.Equal(t, tt.in.Quote, got.Quote)
				require.Equal(t, tt.start+len([]rune(tt.in.Quote)), got.End)
			}
		})
	}
}
