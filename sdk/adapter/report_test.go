package adapter_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdk/adapter"
)

func TestParseReport(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		wantErr string
		check   func(t *testing.T, res *adapter.ExecuteResult)
	}{
		{name: "full report", in: `{"usage":{"inputTokens":100,"outputTokens":20,"cachedInputTokens":5},"provider":"anthropic",
			"model":"m-1","billingType":"metered_api","costUsd":0.5,"cacheAdjustedCostUsd":0.4,"sessionId":"s-1","summary":"did it","extra":true}`,
			check: func(t *testing.T, res *adapter.ExecuteResult) {
				require.Equal(t, &adapter.Usage{InputTokens: 100, OutputTokens: 20, CachedInputTokens: 5}, res.Usage)
				require.Equal(t, "anthropic", res.Provider)
				require.Equal(t, "m-1", res.Model)
				require.Equal(t, 0.4, *res.CacheAdjustedCostUSD)
				require.Equal(t, "s-1", res.SessionID)
				require.Equal(t, "did it", res.Summary)
			}},
		{name: "partial report keeps other fields", in: `{"model":"m-2"}`,
			check: func(t *testing.T, res *adapter.ExecuteResult) {
				require.Equal(t, "m-2", res.Model)
				require.Equal(t, "kept", res.Summary)
				require.Nil(t, res.Usage)
			}},
		{name: "empty", in: "  ", wantErr: "empty run report"},
		{name: "not an object", in: `[1]`, wantErr: "not a JSON object"},
		{name: "negative tokens", in: `{"usage":{"inputTokens":-1}}`, wantErr: "must not be negative"},
		{name: "string cost", in: `{"costUsd":"1"}`, wantErr: "not a JSON object"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, err := adapter.ParseReport([]byte(tc.in))
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			res := &adapter.ExecuteResult{Summary: "kept"}
			r.Apply(res)
			tc.check(t, res)
		})
	}
}

func FuzzParseReport(f *testing.F) {
	f.Add([]byte(`{"usage":{"inputTokens":1},"costUsd":0.1}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`nul`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := adapter.ParseReport(data)
		if err != nil {
			return
		}
		if r.Usage != nil {
			require.GreaterOrEqual(t, r.Usage.InputTokens, int64(0))
		}
		r.Apply(&adapter.ExecuteResult{})
	})
}
