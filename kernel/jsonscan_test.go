package kernel

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestScanJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		in     string
		want   []ValidationDetail
		syntax bool
	}{
		{name: "Clean", in: `{"title":"ok","labels":[{"name":"a"}],"n":-1.5e3,"b":true,"z":null}`},
		{name: "EscapedNUL", in: `{"title":"a\u0000b"}`, want: []ValidationDetail{{Path: "title", Message: msgNUL}}},
		{name: "RawNUL", in: "{\"title\":\"a\x00b\"}", want: []ValidationDetail{{Path: "title", Message: msgNUL}}},
		{name: "NestedPath", in: `{"labels":[{"name":"x"},{"name":"y"},{"name":"\u0000"}]}`,
			want: []ValidationDetail{{Path: "labels[2].name", Message: msgNUL}}},
		{name: "InvalidUTF8", in: "{\"description\":\"caf\xe9\"}", want: []ValidationDetail{{Path: "description", Message: msgUTF8}}},
		{name: "LoneHighSurrogate", in: `{"t":"\ud800x"}`, want: []ValidationDetail{{Path: "t", Message: msgSurrogate}}},
		{name: "LoneLowSurrogate", in: `{"t":"\udc00"}`, want: []ValidationDetail{{Path: "t", Message: msgSurrogate}}},
		{name: "PairedSurrogates", in: `{"t":"\ud83d\ude00"}`},
		{name: "KeyWithNUL", in: `{"meta":{"a\u0000":1}}`, want: []ValidationDetail{{Path: "meta.a\uFFFD", Message: msgNUL}}},
		{name: "TopLevelString", in: `"\u0000"`, want: []ValidationDetail{{Path: "", Message: msgNUL}}},
		{name: "SeveralProblems", in: "{\"a\":\"\\u0000\",\"b\":[\"\xff\"]}",
			want: []ValidationDetail{{Path: "a", Message: msgNUL}, {Path: "b[0]", Message: msgUTF8}}},
		{name: "Malformed", in: `{"title":`, syntax: true},
		{name: "TrailingData", in: `{} {}`, syntax: true},
		{name: "ControlChar", in: "{\"a\":\"\x01\"}", syntax: true},
		{name: "BadEscape", in: `{"a":"\x"}`, syntax: true},
		{name: "BadNumber", in: `{"a":01}`, syntax: true},
		{name: "NotJSON", in: `hello`, syntax: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := ScanJSON([]byte(tc.in))
			if tc.syntax {
				require.ErrorIs(t, err, errJSONSyntax)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}

	t.Run("CapsProblems", func(t *testing.T) {
		t.Parallel()
		in := "[" + strings.Repeat(`"\u0000",`, 100) + `"x"]`
		got, err := ScanJSON([]byte(in))
		require.NoError(t, err)
		require.Len(t, got, maxTextProblems)
	})

	t.Run("DeepNesting", func(t *testing.T) {
		t.Parallel()
		_, err := ScanJSON([]byte(strings.Repeat("[", maxJSONDepth+1) + strings.Repeat("]", maxJSONDepth+1)))
		require.ErrorIs(t, err, errJSONSyntax)
		_, err = ScanJSON([]byte(strings.Repeat("[", 100) + strings.Repeat("]", 100)))
		require.NoError(t, err)
	})
}

// FuzzScanJSON checks ScanJSON against encoding/json: a text with no problems is valid
// exactly when json.Valid says so, and then it is valid UTF-8 whose strings hold no NUL.
func FuzzScanJSON(f *testing.F) {
	for _, seed := range []string{
		`{}`, `[]`, `{"a":"b"}`, `{"a":"\u0000"}`, "{\"a\":\"\x00\"}", "\"\xff\"", `"\ud800"`, `"\ud83d\ude00"`,
		`{"labels":[{"name":"x"}]}`, `[1,-2.5e+3,true,false,null]`, `{"a":`, `nul`, `"\u00e9"`, `{"\u0000":1}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		problems, err := ScanJSON(b)
		if len(problems) > 0 {
			return
		}
		require.Equal(t, json.Valid(b), err == nil, "input %q: %v", b, err)
		if err != nil {
			return
		}
		require.True(t, utf8.Valid(b), "input %q", b)
		var v any
		require.NoError(t, json.Unmarshal(b, &v))
		var walk func(any)
		walk = func(v any) {
			switch x := v.(type) {
			case string:
				require.NotContains(t, x, "\x00", "input %q", b)
			case []any:
				for _, e := range x {
					walk(e)
				}
			case map[string]any:
				for k, e := range x {
					walk(k)
					walk(e)
				}
			}
		}
		walk(v)
	})
}

func BenchmarkScanJSON(b *testing.B) {
	for _, bc := range []struct {
		name string
		body []byte
	}{
		{"IssueCreate", []byte(`{"title":"Fix the login page","description":"The login page breaks when the password has a quote in it; see the attached trace.","status":"todo","priority":"high","assigneeAgentId":"0193a4a4-5b7e-7c1e-9c1a-2f1d3e4a5b6c","labelIds":["0193a4a4-5b7e-7c1e-9c1a-2f1d3e4a5b6d"]}`)},
		{"OneMiBDescription", []byte(`{"description":"` + strings.Repeat("lorem ipsum é ", 1<<16) + `"}`)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ScanJSON(bc.body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
