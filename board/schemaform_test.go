package board

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// testSchema covers every kind of field a schema form knows.
const testSchema = `{
  "type": "object",
  "required": ["name", "mode", "retries"],
  "properties": {
    "name": {"type": "string", "title": "Display name", "description": "Shown in the sidebar.", "maxLength": 20},
    "email": {"type": "string", "format": "email"},
    "slug": {"type": "string", "pattern": "^[a-z]+$"},
    "mode": {"type": "string", "enum": ["fast", "slow"], "default": "fast"},
    "level": {"type": "integer", "enum": [1, 2, 3]},
    "retries": {"type": "integer", "minimum": 0, "maximum": 10, "default": 3},
    "ratio": {"type": ["number", "null"], "minimum": 0.5},
    "enabled": {"type": "boolean", "default": true},
    "tags": {"type": "array", "items": {"type": "string"}},
    "ports": {"type": "array", "items": {"type": "integer"}},
    "days": {"type": "array", "items": {"type": "string", "enum": ["mon", "tue", "wed"]}},
    "token": {"type": "string", "writeOnly": true},
    "apiKey": {"type": "object", "properties": {"type": {"const": "secret_ref"}, "secretId": {"type": "string"}, "version": {"type": "string"}}},
    "keyRef": {"type": "string", "format": "secret-ref"},
    "limits": {"type": "object", "title": "Limits", "properties": {
      "max": {"type": "integer"},
      "inner": {"type": "object", "properties": {"deep": {"type": "boolean"}}}
    }},
    "extra": {"type": "object"}
  }
}`

func mustSchema(t testing.TB, raw string) *formSchema {
	t.Helper()
	s, err := parseFormSchema(json.RawMessage(raw))
	require.NoError(t, err)
	return s
}

func TestSchemaFormFields(t *testing.T) {
	t.Parallel()
	s := mustSchema(t, testSchema)
	f := newSchemaForm(s, "cfg", map[string]any{"name": "Wiki", "days": []any{"tue"}, "limits": map[string]any{"max": float64(5)},
		"apiKey": map[string]any{"type": "secret_ref", "secretId": "s-1"}, "token": "hidden"}, nil, nil)
	byName := map[string]*formField{}
	var walk func([]*formField)
	walk = func(fs []*formField) {
		for _, f := range fs {
			byName[f.Name] = f
			walk(f.Children)
		}
	}
	walk(f.Fields)
	// The schema's order is kept.
	require.Equal(t, "cfg.name", f.Fields[0].Name)
	require.Equal(t, "cfg.extra", f.Fields[len(f.Fields)-1].Name)
	tests := []struct {
		name, kind, label, value string
		required, checked        bool
	}{
		{"cfg.name", fieldText, "Display name", "Wiki", true, false},
		{"cfg.email", fieldText, "email", "", false, false},
		{"cfg.mode", fieldSelect, "mode", "", true, false},
		{"cfg.level", fieldSelect, "level", "", false, false},
		{"cfg.retries", fieldInteger, "retries", "3", true, false},
		{"cfg.ratio", fieldNumber, "ratio", "", false, false},
		{"cfg.enabled", fieldBoolean, "enabled", "", false, true},
		{"cfg.tags", fieldLines, "tags", "", false, false},
		{"cfg.ports", fieldLines, "ports", "", false, false},
		{"cfg.days", fieldChecks, "days", "", false, false},
		{"cfg.token", fieldSecret, "token", "", false, false},
		{"cfg.apiKey", fieldSecretID, "apiKey", "s-1", false, false},
		{"cfg.keyRef", fieldSecretID, "keyRef", "", false, false},
		{"cfg.limits", fieldObject, "Limits", "", false, false},
		{"cfg.limits.max", fieldInteger, "max", "5", false, false},
		{"cfg.limits.inner.deep", fieldBoolean, "deep", "", false, false},
		{"cfg.extra", fieldJSON, "extra", "", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := byName[tt.name]
			require.NotNil(t, got)
			require.Equal(t, tt.kind, got.Kind)
			require.Equal(t, tt.label, got.Label)
			require.Equal(t, tt.value, got.Value)
			require.Equal(t, tt.required, got.Required)
			require.Equal(t, tt.checked, got.Checked)
		})
	}
	require.Equal(t, "email", byName["cfg.email"].InputType)
	require.Equal(t, "^[a-z]+$", byName["cfg.slug"].Pattern)
	require.Equal(t, "20", byName["cfg.name"].MaxLength)
	require.Equal(t, "Shown in the sidebar.", byName["cfg.name"].Help)
	require.Equal(t, "0", byName["cfg.retries"].Min)
	require.Equal(t, "10", byName["cfg.retries"].Max)
	require.Equal(t, []formOption{{"fast", "fast", true}, {"slow", "slow", false}}, byName["cfg.mode"].Options, "a required enum has no empty choice; the default is chosen")
	require.Equal(t, formOption{"", "—", true}, byName["cfg.level"].Options[0])
	require.Equal(t, []formOption{{"mon", "mon", false}, {"tue", "tue", true}, {"wed", "wed", false}}, byName["cfg.days"].Options)

	var buf bytes.Buffer
	require.NoError(t, schemaFormFields(f).Render(context.Background(), &buf))
	html := buf.String()
	require.Contains(t, html, `<label for="f-cfg-name">Display name`)
	require.Contains(t, html, `<legend>Limits</legend>`)
	require.NotContains(t, html, "hidden\"", "a write-only value is never echoed")
	require.NotContains(t, html, "style=")
}

func TestSchemaFormParse(t *testing.T) {
	t.Parallel()
	s := mustSchema(t, testSchema)
	base := url.Values{"cfg.name": {"Wiki"}, "cfg.mode": {"slow"}, "cfg.retries": {"4"}}
	with := func(kv ...string) url.Values {
		v := url.Values{}
		for k, vs := range base {
			v[k] = vs
		}
		for i := 0; i+1 < len(kv); i += 2 {
			v[kv[i]] = append(v[kv[i]], kv[i+1])
		}
		return v
	}
	tests := []struct {
		name    string
		form    url.Values
		current map[string]any
		want    map[string]any
		errs    map[string]string
	}{
		{"minimal", with(), nil,
			map[string]any{"name": "Wiki", "mode": "slow", "retries": int64(4), "enabled": false}, nil},
		{"every kind", with("cfg.email", "a@b.c", "cfg.slug", "abc", "cfg.level", "2", "cfg.ratio", "0.75", "cfg.enabled", "true",
			"cfg.tags", "a\n\n b \n", "cfg.ports", "80\n443", "cfg.days", "wed", "cfg.days", "mon", "cfg.days", "sun",
			"cfg.token", "s3cret", "cfg.apiKey", "sec-1", "cfg.keyRef", "sec-2", "cfg.limits.max", "7", "cfg.limits.inner.deep", "true",
			"cfg.extra", `{"a":[1]}`, "cfg.unknown", "dropped", "other", "dropped"), nil,
			map[string]any{"name": "Wiki", "email": "a@b.c", "slug": "abc", "mode": "slow", "level": float64(2), "retries": int64(4),
				"ratio": 0.75, "enabled": true, "tags": []any{"a", "b"}, "ports": []any{int64(80), int64(443)},
				"days": []any{"wed", "mon"}, "token": "s3cret",
				"apiKey": map[string]any{"type": "secret_ref", "secretId": "sec-1", "version": "latest"}, "keyRef": "sec-2",
				"limits": map[string]any{"max": int64(7), "inner": map[string]any{"deep": true}},
				"extra":  map[string]any{"a": []any{float64(1)}}}, nil},
		{"write-only kept", with(), map[string]any{"token": "old"},
			map[string]any{"name": "Wiki", "mode": "slow", "retries": int64(4), "enabled": false, "token": "old"}, nil},
		{"missing required", url.Values{}, nil, nil,
			map[string]string{"cfg.name": "Required.", "cfg.mode": "Required.", "cfg.retries": "Required."}},
		{"bad numbers", with("cfg.ratio", "NaN", "cfg.ports", "80\nhttp", "cfg.limits.max", "1.5"), nil, nil,
			map[string]string{"cfg.ratio": "Must be a number.", "cfg.ports": "Line 2 must be a whole number.", "cfg.limits.max": "Must be a whole number."}},
		{"out of bounds", with("cfg.ratio", "0.1"), nil, nil, map[string]string{"cfg.ratio": "Must be at least 0.5."}},
		{"too many retries", url.Values{"cfg.name": {"W"}, "cfg.mode": {"fast"}, "cfg.retries": {"11"}}, nil, nil,
			map[string]string{"cfg.retries": "Must be at most 10."}},
		{"bad enum", with("cfg.level", "9"), nil, nil, map[string]string{"cfg.level": "Choose one of the options."}},
		{"bad pattern", with("cfg.slug", "ABC"), nil, nil, map[string]string{"cfg.slug": "Does not match the expected pattern ^[a-z]+$."}},
		{"too long", url.Values{"cfg.name": {strings.Repeat("é", 21)}, "cfg.mode": {"fast"}, "cfg.retries": {"0"}}, nil, nil,
			map[string]string{"cfg.name": "At most 20 characters."}},
		{"not a whole number", url.Values{"cfg.name": {"W"}, "cfg.mode": {"fast"}, "cfg.retries": {"two"}}, nil, nil,
			map[string]string{"cfg.retries": "Must be a whole number."}},
		{"bad json", with("cfg.extra", "{"), nil, nil, map[string]string{"cfg.extra": "Must be valid JSON."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, errs := parseSchemaForm(s, "cfg", tt.form, tt.current)
			if len(tt.errs) > 0 {
				require.Equal(t, tt.errs, errs)
				return
			}
			require.Empty(t, errs)
			require.Equal(t, tt.want, got)
		})
	}
}

// TestSchemaFormRedisplay: a refused form shows what was posted and the field's message.
func TestSchemaFormRedisplay(t *testing.T) {
	t.Parallel()
	s := mustSchema(t, testSchema)
	posted := url.Values{"cfg.name": {"Wiki"}, "cfg.mode": {"slow"}, "cfg.retries": {"lots"}}
	_, errs := parseSchemaForm(s, "cfg", posted, nil)
	f := newSchemaForm(s, "cfg", map[string]any{"retries": float64(2)}, posted, errs)
	var buf bytes.Buffer
	require.NoError(t, schemaFormFields(f).Render(context.Background(), &buf))
	html := buf.String()
	require.Contains(t, html, `value="lots"`)
	require.Contains(t, html, "Must be a whole number.")
	require.Contains(t, html, `aria-invalid="true"`)
	require.Contains(t, html, `<option value="slow" selected>`)
}

// FuzzParseSchemaForm: any posted form parses without panicking into JSON of the schema's
// types, and keeps only the schema's fields.
func FuzzParseSchemaForm(f *testing.F) {
	s := mustSchema(f, testSchema)
	f.Add("cfg.name", "Wiki", "cfg.retries", "3")
	f.Add("cfg.ports", "1\n2\nx", "cfg.ratio", "1e400")
	f.Add("cfg.limits.max", "-9223372036854775809", "cfg.extra", "[[[")
	f.Add("cfg.days", "mon", "cfg.level", "2")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		form := url.Values{k1: {v1}, k2: {v2}}
		got, errs := parseSchemaForm(s, "cfg", form, nil)
		_, err := json.Marshal(got)
		require.NoError(t, err)
		for k := range got {
			require.Contains(t, s.Properties, k)
		}
		for k := range errs {
			require.True(t, strings.HasPrefix(k, "cfg."), k)
		}
		if n, ok := got["retries"]; ok {
			require.IsType(t, int64(0), n)
			require.True(t, n.(int64) >= 0 && n.(int64) <= 10)
		}
		if r, ok := got["ratio"]; ok {
			require.IsType(t, float64(0), r)
		}
		f := newSchemaForm(s, "cfg", got, form, errs)
		var buf bytes.Buffer
		require.NoError(t, schemaFormFields(f).Render(context.Background(), &buf))
	})
}
