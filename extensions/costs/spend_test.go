package costs

import (
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDecomposeCoversRangeExactly checks that the spans of a range tile it: sorted by
// start they are contiguous, do not overlap, begin at from and end at to, and each lies on
// its grain's boundaries (months, days, hours).
func TestDecomposeCoversRangeExactly(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	instant := func() *time.Time {
		switch rng.IntN(8) {
		case 0:
			return nil
		case 1: // on a month boundary
			v := base.AddDate(0, rng.IntN(14), 0)
			return &v
		case 2: // on a day boundary
			v := base.AddDate(0, 0, rng.IntN(400))
			return &v
		case 3: // on an hour boundary
			v := base.Add(time.Duration(rng.IntN(400*24)) * time.Hour)
			return &v
		}
		v := base.Add(time.Duration(rng.Int64N(int64(400 * 24 * time.Hour))))
		return &v
	}
	type piece struct {
		from, to *time.Time
		grain    string
	}
	aligned := func(t *time.Time, grain string) bool {
		if t == nil {
			return true
		}
		switch grain {
		case "m":
			return t.Day() == 1 && t.Equal(t.Truncate(24*time.Hour))
		case "d":
			return t.Equal(t.Truncate(24 * time.Hour))
		case "h":
			return t.Equal(t.Truncate(time.Hour))
		}
		return true
	}
	for i := range 20000 {
		from, to := instant(), instant()
		if from != nil && to != nil && to.Before(*from) {
			from, to = to, from
		}
		sp := decompose(from, to)
		var ps []piece
		for _, g := range []struct {
			grain string
			list  []span
		}{{"m", sp.monthly}, {"d", sp.daily}, {"h", sp.hourly}, {"r", sp.raw}} {
			for _, s := range g.list {
				require.True(t, before(s.From, s.To), "case %d: empty %s span", i, g.grain)
				require.True(t, aligned(s.From, g.grain) && aligned(s.To, g.grain), "case %d: %s span off its grain", i, g.grain)
				ps = append(ps, piece{s.From, s.To, g.grain})
			}
		}
		if from != nil && to != nil && !from.Before(*to) {
			require.Empty(t, ps, "case %d", i)
			continue
		}
		sort.Slice(ps, func(a, b int) bool { return ps[a].from == nil || (ps[b].from != nil && ps[a].from.Before(*ps[b].from)) })
		require.NotEmpty(t, ps, "case %d", i)
		require.Equal(t, from == nil, ps[0].from == nil, "case %d: starts at from", i)
		if from != nil {
			require.True(t, from.Equal(*ps[0].from), "case %d: starts at from", i)
		}
		last := ps[len(ps)-1]
		require.Equal(t, to == nil, last.to == nil, "case %d: ends at to", i)
		if to != nil {
			require.True(t, to.Equal(*last.to), "case %d: ends at to", i)
		}
		for k := 1; k < len(ps); k++ {
			require.NotNil(t, ps[k-1].to, "case %d", i)
			require.True(t, ps[k-1].to.Equal(*ps[k].from), "case %d: gap or overlap between %s and %s spans", i, ps[k-1].grain, ps[k].grain)
		}
	}
}
