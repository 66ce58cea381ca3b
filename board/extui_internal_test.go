package board

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSanitizeSlot: a plugin's fragment keeps its content, forms and htmx requests to its
// own routes (sent through the board), and loses scripts, styles, event handlers, unsafe
// URLs and htmx requests anywhere else.
func TestSanitizeSlot(t *testing.T) {
	t.Parallel()
	s := placedSlot{Plugin: &uiContribution{PluginID: "11111111-2222-3333-4444-555555555555", PluginKey: "acme.tool"}, ID: "home"}
	board := `/c/co-1/x/acme.tool/home?at=`
	tests := []struct {
		name, in string
		want     []string
		absent   []string
	}{
		{"Script", `<p>ok</p><script>alert(1)</script>`, []string{"<p>ok</p>"}, []string{"<script", "alert"}},
		{"Style", `<style>p{}</style><p style="color:red">x</p>`, []string{"<p>x</p>"}, []string{"<style", "style="}},
		{"EventHandlers", `<button type="button" onclick="x()" onmouseover="y()">b</button><img src="/a.png" onerror="z()">`, []string{`<button type="button">b</button>`}, []string{"onclick", "onerror", "onmouseover"}},
		{"JavaScriptURL", `<a href="javascript:alert(1)">x</a>`, []string{"x"}, []string{"javascript:"}},
		{"OwnHxGet", `<button hx-get="/api/plugins/acme.tool/html/x?companyId=co-1" hx-target="#out" hx-swap="innerHTML">go</button>`,
			[]string{`hx-get="` + board + `%2Fapi%2Fplugins%2Facme.tool%2Fhtml%2Fx%3FcompanyId%3Dco-1"`, `hx-target="#out"`, `hx-swap="innerHTML"`}, nil},
		{"OwnByID", `<form hx-post="/api/plugins/11111111-2222-3333-4444-555555555555/save"><input name="n" type="text"></form>`,
			[]string{`hx-post="` + board + `%2Fapi%2Fplugins%2F11111111-2222-3333-4444-555555555555%2Fsave"`, `<input name="n" type="text">`}, nil},
		{"OtherPluginHx", `<button hx-get="/api/plugins/other.tool/html/x">go</button>`, []string{"<button>go</button>"}, []string{"hx-get"}},
		{"KernelHx", `<button hx-post="/api/companies/co-1">go</button>`, []string{"<button>go</button>"}, []string{"hx-post"}},
		{"ForeignHx", `<button hx-get="https://evil.example/x">go</button>`, nil, []string{"hx-get", "evil"}},
		{"DotSegments", `<button hx-get="/api/plugins/acme.tool/../../companies">go</button>`, nil, []string{"hx-get"}},
		{"OtherHtmx", `<div hx-on:click="alert(1)" hx-vals='js:{a:1}' hx-trigger="every 1s" hx-target="body > *">x</div>`, []string{"<div>x</div>"}, []string{"hx-on", "hx-vals", "hx-trigger", "hx-target"}},
		{"BadSwap", `<div hx-swap="innerHTML settle:1s">x</div>`, nil, []string{"hx-swap"}},
		{"OwnLink", `<a href="/api/plugins/acme.tool/html/page?p=1">p</a>`, []string{`href="` + board + `%2Fapi%2Fplugins%2Facme.tool%2Fhtml%2Fpage%3Fp%3D1"`}, nil},
		{"FormAction", `<form action="https://evil.example" method="post"><button type="submit">s</button></form>`, []string{`<form method="post">`}, []string{"evil"}},
		{"Iframe", `<iframe src="https://evil.example"></iframe><object data="x"></object>`, nil, []string{"iframe", "object"}},
		{"AttributeQuotes", `<a href="/api/plugins/acme.tool/x?a=&quot;b">q</a>`, []string{"%22b"}, []string{`"b"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out := sanitizeSlot(tt.in, s, "co-1")
			for _, w := range tt.want {
				require.Contains(t, out, w)
			}
			for _, a := range tt.absent {
				require.NotContains(t, out, a)
			}
		})
	}
}

// TestSlotVarsFill: placeholders are filled escaped, and a missing value is reported.
func TestSlotVarsFill(t *testing.T) {
	t.Parallel()
	got, ok := slotVars{"companyId": "co 1", "issueId": "a/b"}.fill("/api/plugins/x/issues/{issueId}?companyId={companyId}")
	require.True(t, ok)
	require.Equal(t, "/api/plugins/x/issues/a%2Fb?companyId=co%201", got)
	_, ok = slotVars{"companyId": "co"}.fill("/api/plugins/x/issues/{issueId}")
	require.False(t, ok)
}

// FuzzSanitizeSlot: no fragment gets a script, an event handler or a foreign htmx request
// through.
func FuzzSanitizeSlot(f *testing.F) {
	s := placedSlot{Plugin: &uiContribution{PluginID: "id-1", PluginKey: "acme.tool"}, ID: "home"}
	f.Add(`<p onclick="x">a</p><script>b</script>`)
	f.Add(`<a hx-get="/api/plugins/acme.tool/x" href="javascript:y">c</a>`)
	f.Add(`<div hx-post="//evil.example/x">d</div>`)
	f.Fuzz(func(t *testing.T, in string) {
		out := sanitizeSlot(in, s, "co-1")
		require.NotRegexp(t, `(?i)<script|<style|<[^>]*\s(on[a-z]*|style)=|<[^>]*="\s*javascript:`, out)
		for _, m := range slotURLAttr.FindAllStringSubmatch(out, -1) {
			if m[1] == "hx-get" || m[1] == "hx-post" {
				require.Regexp(t, `^/c/co-1/x/acme\.tool/home\?at=`, m[2])
			}
		}
	})
}
