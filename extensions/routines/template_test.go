package routines

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseTemplate(t *testing.T) {
	t.Parallel()
	refs, err := parseTemplate("Report for {{team}} on {{ date }}: {{payload.repo.name}} {single} }}")
	require.NoError(t, err)
	require.Len(t, refs, 3)
	require.Equal(t, "team", refs[0].Name)
	require.Equal(t, "date", refs[1].Name)
	require.Equal(t, "payload", refs[2].Name)
	require.Equal(t, []string{"repo", "name"}, refs[2].Path)

	for _, bad := range []string{"{{", "x {{team", "{{}}", "{{ }}", "{{1abc}}", "{{a b}}", "{{a-b}}", "{{a.}}", "{{{a}}}", "{{a}} {{"} {
		_, err := parseTemplate(bad)
		require.Error(t, err, bad)
	}
	refs, err = parseTemplate("no references, {braces} fine")
	require.NoError(t, err)
	require.Empty(t, refs)
}

func TestCheckTemplate(t *testing.T) {
	t.Parallel()
	vars := []Variable{{Name: "team", Type: "text"}}
	require.Empty(t, checkTemplate("title", "{{team}} {{date}} {{timestamp}} {{payload}} {{payload.a.b}}", vars))
	d := checkTemplate("title", "{{team}} {{nope}} {{nope}}", vars)
	require.Len(t, d, 1)
	require.Equal(t, "title", d[0].Path)
	require.Contains(t, d[0].Message, "{{nope}}")
	d = checkTemplate("description", "{{team.x}}", vars)
	require.Len(t, d, 1)
	require.Contains(t, d[0].Message, "only payload references")
	d = checkTemplate("description", "broken {{", vars)
	require.Len(t, d, 1)
	require.Contains(t, d[0].Message, "unterminated")
}

func TestNormalizeVariables(t *testing.T) {
	t.Parallel()
	vars, d := normalizeVariables([]Variable{{Name: "team"}, {Name: "size", Type: "number", DefaultValue: ptr("3")}})
	require.Empty(t, d)
	require.Equal(t, "text", vars[0].Type)
	require.Equal(t, "team", vars[0].Label)
	bad := []struct {
		v    Variable
		path string
	}{
		{Variable{Name: "1x"}, "variables.0.name"},
		{Variable{Name: "date"}, "variables.0.name"},
		{Variable{Name: "x", Type: "blob"}, "variables.0.type"},
		{Variable{Name: "x", Type: "number", DefaultValue: ptr("many")}, "variables.0.defaultValue"},
		{Variable{Name: "x", Type: "boolean", DefaultValue: ptr("yes")}, "variables.0.defaultValue"},
		{Variable{Name: "x", Type: "date", DefaultValue: ptr("2026-13-01")}, "variables.0.defaultValue"},
		{Variable{Name: "x", Type: "select"}, "variables.0.options"},
		{Variable{Name: "x", Type: "select", Options: []string{"a"}, DefaultValue: ptr("b")}, "variables.0.defaultValue"},
		{Variable{Name: "x", Options: []string{"a"}}, "variables.0.options"},
		{Variable{Name: "x", Label: strings.Repeat("l", 201)}, "variables.0.label"},
	}
	for _, tc := range bad {
		_, d := normalizeVariables([]Variable{tc.v})
		require.NotEmpty(t, d, "%+v", tc.v)
		require.Equal(t, tc.path, d[0].Path, "%+v", tc.v)
	}
	_, d = normalizeVariables([]Variable{{Name: "a"}, {Name: "a"}})
	require.Equal(t, "variables.1.name", d[0].Path)
}

func TestResolveVariablesAndRender(t *testing.T) {
	t.Parallel()
	vars := []Variable{
		{Name: "team", Type: "text", Required: true, DefaultValue: ptr("core")},
		{Name: "count", Type: "number"},
		{Name: "ticket", Type: "text", Required: true},
	}
	raw := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }
	values, problems, missing := resolveVariables(vars, map[string]json.RawMessage{"ticket": raw("T-1"), "count": raw(2)}, true)
	require.Empty(t, problems)
	require.Empty(t, missing)
	require.Equal(t, map[string]string{"team": "core", "count": "2", "ticket": "T-1"}, values)

	_, _, missing = resolveVariables(vars, nil, true)
	require.Equal(t, []string{"ticket"}, missing)
	_, problems, _ = resolveVariables(vars, map[string]json.RawMessage{"ticket": raw("x"), "extra": raw("y")}, true)
	require.Equal(t, "variables.extra", problems[0].Path)
	_, problems, _ = resolveVariables(vars, map[string]json.RawMessage{"ticket": raw("x"), "extra": raw("y")}, false)
	require.Empty(t, problems, "webhook senders' extra fields are ignored")
	_, problems, _ = resolveVariables(vars, map[string]json.RawMessage{"ticket": raw("x"), "count": raw("many")}, true)
	require.Equal(t, "variables.count", problems[0].Path)
	_, problems, _ = resolveVariables(vars, map[string]json.RawMessage{"ticket": raw(map[string]int{"a": 1})}, true)
	require.Equal(t, "variables.ticket", problems[0].Path)

	payload := map[string]any{"repo": map[string]any{"name": "keel", "stars": float64(5)}, "list": []any{"a", "b"}}
	for k, v := range builtinValues(time.Date(2026, 4, 28, 12, 17, 0, 0, time.UTC), payload) {
		values[k] = v
	}
	out := renderTemplate("{{team}}/{{ticket}} on {{date}} at {{timestamp}}: {{payload.repo.name}} {{payload.repo.stars}} "+
		"{{payload.list.1}} {{payload.missing}} {{payload.repo}}", values, payload)
	require.Equal(t, `core/T-1 on 2026-04-28 at April 28, 2026 at 12:17 PM UTC: keel 5 b {{payload.missing}} {"name":"keel","stars":5}`, out)
	require.Contains(t, values["payload"], `"name": "keel"`)
	require.Empty(t, builtinValues(time.Now(), nil)["payload"])
	big := map[string]any{"blob": strings.Repeat("x", 20000)}
	require.True(t, strings.HasSuffix(builtinValues(time.Now(), big)["payload"], "... (truncated)"))
}
