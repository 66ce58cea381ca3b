package routines

import (
	"strings"
	"testing"
)

// FuzzTemplate checks the template parser on arbitrary text: it never panics; the
// references it returns are ordered, well delimited and non-overlapping; rendering every
// plain reference with a marker reproduces the text with exactly those references replaced
// (payload paths with no payload stay literal); and checking a template never panics.
func FuzzTemplate(f *testing.F) {
	for _, seed := range []string{"", "plain", "{{a}}", "x {{ a }} y {{b_1}}", "{{payload.a.b}}", "{{", "}}", "{{{a}}}",
		"{{a}}}", "{a}", "{{date}} {{timestamp}}", "{{a b}}", "é{{ü}}", "{{a}}{{b}}", "{{ payload }}"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_ = checkTemplate("title", s, []Variable{{Name: "a"}, {Name: "b_1"}})
		refs, err := parseTemplate(s)
		if err != nil {
			if renderTemplate(s, map[string]string{"a": "X"}, nil) != s {
				t.Fatalf("a malformed template must render unchanged: %q", s)
			}
			return
		}
		values := map[string]string{}
		var want strings.Builder
		last := 0
		for i, r := range refs {
			if r.Start < last || r.End <= r.Start || r.End > len(s) {
				t.Fatalf("ref %d out of order or bounds: %+v in %q", i, r, s)
			}
			if !strings.HasPrefix(s[r.Start:], "{{") || !strings.HasSuffix(s[:r.End], "}}") {
				t.Fatalf("ref %d not delimited by braces: %q", i, s[r.Start:r.End])
			}
			if r.Name == "" {
				t.Fatalf("ref %d has no name: %q", i, s)
			}
			want.WriteString(s[last:r.Start])
			if len(r.Path) > 0 {
				want.WriteString(s[r.Start:r.End])
			} else {
				values[r.Name] = "<" + r.Name + ">"
				want.WriteString(values[r.Name])
			}
			last = r.End
		}
		want.WriteString(s[last:])
		if got := renderTemplate(s, values, nil); got != want.String() {
			t.Fatalf("render %q = %q, want %q", s, got, want.String())
		}
		// Literal text between references never holds an opening "{{".
		for i, r := range refs {
			start := 0
			if i > 0 {
				start = refs[i-1].End
			}
			if strings.Contains(s[start:r.Start], "{{") {
				t.Fatalf("literal text before ref %d holds {{: %q", i, s)
			}
		}
	})
}
