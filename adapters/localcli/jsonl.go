package localcli

import (
	"encoding/json"
	"strings"
)

// Obj is one decoded JSON object of a CLI's output, with lenient accessors.
type Obj map[string]any

// ParseObj decodes a line holding a JSON object; ok is false for anything else.
func ParseObj(line string) (Obj, bool) {
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, "{") {
		return nil, false
	}
	var o map[string]any
	if err := json.Unmarshal([]byte(line), &o); err != nil {
		return nil, false
	}
	return o, true
}

// Str returns the first of keys holding a non-empty string.
func (o Obj) Str(keys ...string) string {
	for _, k := range keys {
		if s, ok := o[k].(string); ok && s != "" {
			return s
		}
	}
	return ""
}

// Num returns the first of keys holding a number.
func (o Obj) Num(keys ...string) (float64, bool) {
	for _, k := range keys {
		if n, ok := o[k].(float64); ok {
			return n, true
		}
	}
	return 0, false
}

// Int returns the first of keys holding a number, as an integer (0 when none).
func (o Obj) Int(keys ...string) int64 {
	n, _ := o.Num(keys...)
	return int64(n)
}

// Bool returns a boolean key.
func (o Obj) Bool(k string) bool {
	b, _ := o[k].(bool)
	return b
}

// Map returns an object key (nil when absent).
func (o Obj) Map(k string) Obj {
	if m, ok := o[k].(map[string]any); ok {
		return m
	}
	return nil
}

// List returns an array key.
func (o Obj) List(k string) []any {
	l, _ := o[k].([]any)
	return l
}

// ErrorText renders an error field: a string, or an object's message, error, code or
// detail, else its JSON.
func ErrorText(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case map[string]any:
		o := Obj(t)
		if s := o.Str("message", "error", "code", "detail"); s != "" {
			return s
		}
		if inner := o.Map("error"); inner != nil {
			return ErrorText(map[string]any(inner))
		}
		if d := o.Map("data"); d != nil {
			if s := d.Str("message"); s != "" {
				return s
			}
		}
		b, _ := json.Marshal(t)
		return string(b)
	case nil:
		return ""
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// TextOf extracts message text: a string, an object's text, or the text parts of its
// content array (types text, output_text, content).
func TextOf(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case map[string]any:
		o := Obj(t)
		if s := o.Str("text"); s != "" {
			return s
		}
		if s, ok := o["content"].(string); ok {
			return s
		}
		var parts []string
		for _, p := range o.List("content") {
			po, ok := p.(map[string]any)
			if !ok {
				continue
			}
			switch Obj(po).Str("type") {
			case "text", "output_text", "content":
				if s := Obj(po).Str("text", "content"); s != "" {
					parts = append(parts, s)
				}
			}
		}
		return strings.Join(parts, "")
	}
	return ""
}
