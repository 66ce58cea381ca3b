package sdk

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestUISlotRoute: a slot's route must be one of the extension's own GET routes, with
// placeholders the board can fill on the slot's pages.
func TestUISlotRoute(t *testing.T) {
	t.Parallel()
	manifest := func(slots string) string {
		return `{"key":"example.ui","version":"0.1.0","kind":"plugin","runtime":{"kind":"process","executable":"x"},
		 "routes":[{"method":"GET","path":"/api/plugins/example.ui/html/home","access":"board","company":{"from":"query"}},
		  {"method":"GET","path":"/api/plugins/example.ui/html/issues/{issueId}","access":"board"},
		  {"method":"POST","path":"/api/plugins/example.ui/html/save","access":"board"}],
		 "ui":{"slots":[` + slots + `]}}`
	}
	tests := []struct {
		name, slots, err string
	}{
		{"RouteWithQuery", `{"slot":"company.page","id":"home","route":"/api/plugins/example.ui/html/home?companyId={companyId}"}`, ""},
		{"PathParam", `{"slot":"issue.detailTab","route":"/api/plugins/example.ui/html/issues/{issueId}"}`, ""},
		{"EntryOnly", `{"slot":"company.sidebar","entry":"index.js"}`, ""},
		{"Neither", `{"slot":"company.sidebar"}`, "needs an entry or a route"},
		{"UnknownRoute", `{"slot":"company.page","route":"/api/plugins/example.ui/html/nope"}`, "is not one of the extension's GET routes"},
		{"NotGET", `{"slot":"company.page","route":"/api/plugins/example.ui/html/save"}`, "is not one of the extension's GET routes"},
		{"UnknownPlaceholder", `{"slot":"company.page","route":"/api/plugins/example.ui/html/home?x={secret}"}`, "placeholder {secret}"},
		{"UnfillablePlaceholder", `{"slot":"company.page","route":"/api/plugins/example.ui/html/issues/{issueId}"}`, "cannot fill on a company.page slot"},
		{"Foreign", `{"slot":"company.page","route":"https://evil.example/x"}`, "must be a path under /api/"},
		{"RepeatedID", `{"slot":"company.page","id":"a","entry":"x.js"},{"slot":"company.sidebar","id":"a","entry":"x.js"}`, "is repeated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseManifest([]byte(manifest(tt.slots)))
			if tt.err == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.err)
		})
	}
}
