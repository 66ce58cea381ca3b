package agents

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestGuardMarkerPatch(t *testing.T) {
	t.Parallel()
	stored := json.RawMessage(`{"serviceBuiltInAgent":{"key":"summarizer","featureKeys":["status_cards"]},"team":"ops"}`)
	for _, tc := range []struct {
		name, stored, patch string
		refused             bool
		want                string
	}{
		{name: "NoMetadataInPatch", stored: string(stored), patch: `{"name":"x"}`},
		{name: "OtherKeysKeepTheMarker", stored: string(stored), patch: `{"metadata":{"team":"dev"}}`,
			want: `{"serviceBuiltInAgent":{"key":"summarizer","featureKeys":["status_cards"]},"team":"dev"}`},
		{name: "SameMarkerIsNotATouch", stored: string(stored),
			patch: `{"metadata":{"serviceBuiltInAgent":{"featureKeys":["status_cards"],"key":"summarizer"}}}`},
		{name: "ChangedMarker", stored: string(stored), patch: `{"metadata":{"serviceBuiltInAgent":{"key":"briefs"}}}`, refused: true},
		{name: "NullMarker", stored: string(stored), patch: `{"metadata":{"serviceBuiltInAgent":null}}`, refused: true},
		{name: "NullMetadata", stored: string(stored), patch: `{"metadata":null}`, refused: true},
		{name: "MarkerOnAnOrdinaryAgent", stored: `{}`, patch: `{"metadata":{"serviceBuiltInAgent":{"key":"briefs"}}}`, refused: true},
		{name: "OrdinaryAgentNullMetadata", stored: `{}`, patch: `{"metadata":null}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var raw map[string]json.RawMessage
			require.NoError(t, json.Unmarshal([]byte(tc.patch), &raw))
			err := guardMarkerPatch(json.RawMessage(tc.stored), raw)
			if tc.refused {
				require.ErrorContains(t, err, "serviceBuiltInAgent")
				return
			}
			require.NoError(t, err)
			if tc.want != "" {
				require.JSONEq(t, tc.want, string(raw["metadata"]))
			}
		})
	}
}

func TestWithMarker(t *testing.T) {
	t.Parallel()
	require.JSONEq(t, `{"serviceBuiltInAgent":{"key":"k"}}`, string(withMarker(json.RawMessage(`null`), json.RawMessage(`{"key":"k"}`))))
	require.JSONEq(t, `{"a":1}`, string(withMarker(json.RawMessage(`{"a":1,"serviceBuiltInAgent":{"key":"k"}}`), nil)))
}
