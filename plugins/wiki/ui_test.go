package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRenderMarkdown: a page's markdown renders without raw HTML, and links to other
// wiki pages become links to their page fragments.
func TestRenderMarkdown(t *testing.T) {
	t.Parallel()
	link := func(dest string) string {
		if !strings.HasSuffix(dest, ".md") {
			return dest
		}
		return "LINK(" + dest + ")"
	}
	tests := []struct {
		name, src string
		contains  []string
		absent    []string
	}{
		{"Heading", "# Billing\n\nThe *pager* rotates.", []string{"<h1>Billing</h1>", "<em>pager</em>"}, nil},
		{"RawHTMLEscaped", "Hi <script>alert(1)</script> <img src=x onerror=alert(1)>", nil, []string{"<script", "<img", "onerror="}},
		{"Links", "[billing](../concepts/billing.md) and [site](https://example.com)", []string{`href="LINK(../concepts/billing.md)"`, `href="https://example.com"`}, nil},
		{"JavaScriptURL", "[x](javascript:alert(1))", nil, []string{"javascript:"}},
		{"Table", "| a | b |\n|---|---|\n| 1 | 2 |", []string{"<table>", "<td>1</td>"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, err := renderMarkdown([]byte(tt.src), link)
			require.NoError(t, err)
			for _, s := range tt.contains {
				require.Contains(t, string(out), s)
			}
			for _, s := range tt.absent {
				require.NotContains(t, string(out), s)
			}
		})
	}
}
