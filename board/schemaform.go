package board

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// formSchema is the part of a JSON Schema the board turns into a form: objects with
// properties, strings (format, enum, pattern), integers and numbers with bounds, booleans,
// arrays of strings, numbers or enums, and secret references. Anything else is edited as
// JSON text.
type formSchema struct {
	Type        json.RawMessage        `json:"type"`
	Title       string                 `json:"title"`
	Description string                 `json:"description"`
	Format      string                 `json:"format"`
	Pattern     string                 `json:"pattern"`
	Enum        []any                  `json:"enum"`
	Const       any                    `json:"const"`
	Default     any                    `json:"default"`
	Minimum     *float64               `json:"minimum"`
	Maximum     *float64               `json:"maximum"`
	MinLength   *int                   `json:"minLength"`
	MaxLength   *int                   `json:"maxLength"`
	WriteOnly   bool                   `json:"writeOnly"`
	XSecret     bool                   `json:"x-secret"`
	Properties  map[string]*formSchema `json:"properties"`
	Required    []string               `json:"required"`
	Items       *formSchema            `json:"items"`
	// order is the properties' order in the schema's text (JSON objects keep it; Go maps
	// do not).
	order []string
}

// UnmarshalJSON decodes the schema and remembers the order of its properties.
func (s *formSchema) UnmarshalJSON(b []byte) error {
	type plain formSchema
	if err := json.Unmarshal(b, (*plain)(s)); err != nil {
		return err
	}
	var raw struct {
		Properties json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(b, &raw); err != nil || len(raw.Properties) == 0 {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(string(raw.Properties)))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil
		}
		if k, ok := t.(string); ok {
			s.order = append(s.order, k)
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil
		}
	}
	return nil
}

// typ is the schema's type: the first non-null one of a type list; "" when it has none.
func (s *formSchema) typ() string {
	var one string
	if json.Unmarshal(s.Type, &one) == nil {
		return one
	}
	var many []string
	if json.Unmarshal(s.Type, &many) == nil {
		for _, t := range many {
			if t != "null" {
				return t
			}
		}
	}
	if len(s.Properties) > 0 {
		return "object"
	}
	return ""
}

// propertyNames are the object's properties in the schema's order.
func (s *formSchema) propertyNames() []string {
	names := make([]string, 0, len(s.Properties))
	seen := map[string]bool{}
	for _, k := range s.order {
		if _, ok := s.Properties[k]; ok && !seen[k] {
			seen[k] = true
			names = append(names, k)
		}
	}
	var rest []string
	for k := range s.Properties {
		if !seen[k] {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	return append(names, rest...)
}

// isSecretRef says whether the schema describes a secret reference: a string of format
// secret-ref, or an object whose type property is the constant "secret_ref" (the
// {type:"secret_ref", secretId, version} binding).
func (s *formSchema) isSecretRef() bool {
	if s.Format == "secret-ref" || s.Format == "secret_ref" {
		return true
	}
	t, ok := s.Properties["type"]
	if !ok || s.Properties["secretId"] == nil {
		return false
	}
	if t.Const == "secret_ref" {
		return true
	}
	return len(t.Enum) == 1 && t.Enum[0] == "secret_ref"
}

// parseFormSchema decodes a JSON Schema for a form. An empty or null schema is an object
// with no properties.
func parseFormSchema(raw json.RawMessage) (*formSchema, error) {
	s := &formSchema{}
	if len(raw) == 0 || string(raw) == "null" {
		return s, nil
	}
	if err := json.Unmarshal(raw, s); err != nil {
		return nil, fmt.Errorf("error reading the config schema: %w", err)
	}
	return s, nil
}

// Form field kinds.
const (
	fieldText     = "text"     // a string (input type from its format)
	fieldSecret   = "secret"   // a write-only string: a password input never filled in
	fieldSecretID = "secretid" // a secret reference: the secret's id
	fieldInteger  = "integer"
	fieldNumber   = "number"
	fieldBoolean  = "boolean"
	fieldSelect   = "select" // one of an enum
	fieldChecks   = "checks" // several of an enum (an array of enums)
	fieldLines    = "lines"  // an array of strings or numbers, one per line
	fieldObject   = "object" // a fieldset of the properties
	fieldJSON     = "json"   // anything else, as JSON text
)

// formOption is one choice of a select or a group of checkboxes.
type formOption struct {
	Value, Label string
	Selected     bool
}

// formField is one control of a schema form (or a fieldset of them).
type formField struct {
	Kind string
	// Name is the form field's name: the property path joined with dots under the form's
	// prefix (cfg.retry.max).
	Name      string
	ID        string
	Label     string
	Help      string
	InputType string
	Required  bool
	Value     string
	Checked   bool
	Options   []formOption
	Min, Max  string
	Step      string
	Pattern   string
	MaxLength string
	Error     string
	Children  []*formField
}

// HelpID is the id of the field's help text (for aria-describedby).
func (f *formField) HelpID() string { return f.ID + "-help" }

// ErrorID is the id of the field's error text.
func (f *formField) ErrorID() string { return f.ID + "-error" }

// DescribedBy lists the ids that describe the control.
func (f *formField) DescribedBy() string {
	var ids []string
	if f.Help != "" {
		ids = append(ids, f.HelpID())
	}
	if f.Error != "" {
		ids = append(ids, f.ErrorID())
	}
	return strings.Join(ids, " ")
}

// schemaForm is a form generated from a JSON Schema: its fields and the errors of the
// last parse.
type schemaForm struct {
	Fields []*formField
	// Errors are the per-field messages, keyed by field name.
	Errors map[string]string
}

// HasErrors says whether any field was refused.
func (f *schemaForm) HasErrors() bool { return len(f.Errors) > 0 }

// newSchemaForm builds the form of schema under the field-name prefix (which also prefixes
// the controls' ids), filled from value (a decoded JSON object) or, when posted is not
// nil, from what the visitor posted, with errs shown beside their fields.
func newSchemaForm(schema *formSchema, prefix string, value any, posted url.Values, errs map[string]string) *schemaForm {
	f := &schemaForm{Errors: errs}
	obj, _ := value.(map[string]any)
	req := requiredSet(schema)
	for _, name := range schema.propertyNames() {
		f.Fields = append(f.Fields, buildField(schema.Properties[name], name, prefix+"."+name, obj[name], hasKey(obj, name), req[name], posted, errs, 0))
	}
	return f
}

// maxFormDepth bounds how deep nested objects are rendered as fieldsets; deeper ones are
// JSON text.
const maxFormDepth = 8

func hasKey(m map[string]any, k string) bool {
	_, ok := m[k]
	return ok
}

func requiredSet(s *formSchema) map[string]bool {
	req := make(map[string]bool, len(s.Required))
	for _, r := range s.Required {
		req[r] = true
	}
	return req
}

var idUnsafe = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

func buildField(s *formSchema, prop, name string, value any, present, required bool, posted url.Values, errs map[string]string, depth int) *formField {
	if s == nil {
		s = &formSchema{}
	}
	f := &formField{Name: name, ID: "f-" + idUnsafe.ReplaceAllString(name, "-"), Label: s.Title, Help: s.Description,
		Required: required, Error: errs[name]}
	if f.Label == "" {
		f.Label = prop
	}
	if !present && s.Default != nil {
		value, present = s.Default, true
	}
	postedValue := func() (string, bool) {
		if posted == nil {
			return "", false
		}
		v, ok := posted[name]
		if !ok || len(v) == 0 {
			return "", posted != nil
		}
		return v[0], true
	}
	setValue := func(v string) {
		if pv, ok := postedValue(); ok {
			f.Value = pv
			return
		}
		f.Value = v
	}
	typ := s.typ()
	switch {
	case s.isSecretRef():
		f.Kind, f.InputType = fieldSecretID, "text"
		if f.Help == "" {
			f.Help = "The id of a company secret."
		}
		v := ""
		switch x := value.(type) {
		case string:
			v = x
		case map[string]any:
			v, _ = x["secretId"].(string)
		}
		setValue(v)
	case len(s.Enum) > 0 && typ != "array" && typ != "object":
		f.Kind = fieldSelect
		cur := ""
		if present {
			cur = scalarText(value)
		}
		if pv, ok := postedValue(); ok {
			cur = pv
		}
		if !required {
			f.Options = append(f.Options, formOption{Value: "", Label: "—", Selected: cur == ""})
		}
		for _, e := range s.Enum {
			t := scalarText(e)
			f.Options = append(f.Options, formOption{Value: t, Label: t, Selected: t == cur})
		}
	case typ == "boolean":
		f.Kind = fieldBoolean
		b, _ := value.(bool)
		if posted != nil {
			b = posted.Get(name) != ""
		}
		f.Checked = b
	case typ == "integer" || typ == "number":
		f.Kind, f.InputType = fieldNumber, "number"
		f.Step = "any"
		if typ == "integer" {
			f.Kind, f.Step = fieldInteger, "1"
		}
		if s.Minimum != nil {
			f.Min = strconv.FormatFloat(*s.Minimum, 'f', -1, 64)
		}
		if s.Maximum != nil {
			f.Max = strconv.FormatFloat(*s.Maximum, 'f', -1, 64)
		}
		v := ""
		if present {
			v = scalarText(value)
		}
		setValue(v)
	case typ == "array" && s.Items != nil && len(s.Items.Enum) > 0:
		f.Kind = fieldChecks
		chosen := map[string]bool{}
		if arr, ok := value.([]any); ok {
			for _, v := range arr {
				chosen[scalarText(v)] = true
			}
		}
		if posted != nil {
			chosen = map[string]bool{}
			for _, v := range posted[name] {
				chosen[v] = true
			}
		}
		for _, e := range s.Items.Enum {
			t := scalarText(e)
			f.Options = append(f.Options, formOption{Value: t, Label: t, Selected: chosen[t]})
		}
	case typ == "array" && s.Items != nil && isLineItem(s.Items.typ()):
		f.Kind = fieldLines
		if f.Help == "" {
			f.Help = "One per line."
		} else {
			f.Help += " One per line."
		}
		var lines []string
		if arr, ok := value.([]any); ok {
			for _, v := range arr {
				lines = append(lines, scalarText(v))
			}
		}
		setValue(strings.Join(lines, "\n"))
	case typ == "object" && len(s.Properties) > 0 && depth < maxFormDepth:
		f.Kind = fieldObject
		obj, _ := value.(map[string]any)
		req := requiredSet(s)
		for _, p := range s.propertyNames() {
			f.Children = append(f.Children, buildField(s.Properties[p], p, name+"."+p, obj[p], hasKey(obj, p), req[p], posted, errs, depth+1))
		}
	case typ == "string":
		f.Kind, f.InputType = fieldText, inputTypeOf(s.Format)
		if s.WriteOnly || s.XSecret || s.Format == "password" {
			f.Kind, f.InputType = fieldSecret, "password"
			if f.Help == "" {
				f.Help = "Write-only: leave empty to keep the current value."
			}
			return f
		}
		f.Pattern = s.Pattern
		if s.MaxLength != nil {
			f.MaxLength = strconv.Itoa(*s.MaxLength)
		}
		v, _ := value.(string)
		setValue(v)
	default:
		f.Kind = fieldJSON
		if f.Help == "" {
			f.Help = "JSON."
		}
		v := ""
		if present {
			b, _ := json.MarshalIndent(value, "", "  ")
			v = string(b)
		}
		setValue(v)
	}
	return f
}

func isLineItem(t string) bool { return t == "string" || t == "integer" || t == "number" }

// inputTypeOf is the HTML input type of a string format.
func inputTypeOf(format string) string {
	switch format {
	case "email":
		return "email"
	case "uri", "url":
		return "url"
	case "date":
		return "date"
	case "time":
		return "time"
	case "date-time":
		return "datetime-local"
	}
	return "text"
}

// scalarText is how a JSON scalar is written in a form control.
func scalarText(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case json.Number:
		return x.String()
	case int:
		return strconv.Itoa(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case bool:
		return strconv.FormatBool(x)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// parseSchemaForm reads a posted schema form back into a JSON object of the schema's
// types: fields the schema does not name are dropped, empty optional fields are left out
// (an unchecked box is false when the field has a default or a current value), write-only
// fields left empty keep current's value. errs holds a message per refused
// field (keyed by field name); the object is only meaningful when errs is empty.
func parseSchemaForm(schema *formSchema, prefix string, form url.Values, current map[string]any) (map[string]any, map[string]string) {
	errs := map[string]string{}
	out := parseObject(schema, prefix, form, current, errs, 0)
	if out == nil {
		out = map[string]any{}
	}
	return out, errs
}

func parseObject(s *formSchema, prefix string, form url.Values, current map[string]any, errs map[string]string, depth int) map[string]any {
	out := map[string]any{}
	req := requiredSet(s)
	for _, p := range s.propertyNames() {
		ps := s.Properties[p]
		if ps == nil {
			continue
		}
		v, ok := parseField(ps, prefix+"."+p, form, current[p], req[p], errs, depth)
		if ok {
			out[p] = v
		}
	}
	return out
}

// parseField reads one field; ok is false when the field is left out.
func parseField(s *formSchema, name string, form url.Values, current any, required bool, errs map[string]string, depth int) (any, bool) {
	raw := strings.TrimSpace(form.Get(name))
	missing := func() (any, bool) {
		if required {
			errs[name] = "Required."
		}
		return nil, false
	}
	typ := s.typ()
	switch {
	case s.isSecretRef():
		if raw == "" {
			return missing()
		}
		if s.Format == "secret-ref" || s.Format == "secret_ref" || s.typ() == "string" {
			return raw, true
		}
		return map[string]any{"type": "secret_ref", "secretId": raw, "version": "latest"}, true
	case len(s.Enum) > 0 && typ != "array" && typ != "object":
		if raw == "" {
			return missing()
		}
		for _, e := range s.Enum {
			if scalarText(e) == raw {
				return e, true
			}
		}
		errs[name] = "Choose one of the options."
		return nil, false
	case typ == "boolean":
		// An unchecked box is false, but stays out of the object when nothing said
		// otherwise (no default, no current value), so empty fieldsets are left out.
		if raw == "" && !required && s.Default == nil && current == nil {
			return nil, false
		}
		return raw != "", true
	case typ == "integer":
		if raw == "" {
			return missing()
		}
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			errs[name] = "Must be a whole number."
			return nil, false
		}
		if msg := outOfBounds(s, float64(n)); msg != "" {
			errs[name] = msg
			return nil, false
		}
		return n, true
	case typ == "number":
		if raw == "" {
			return missing()
		}
		x, err := strconv.ParseFloat(raw, 64)
		if err != nil || math.IsInf(x, 0) || math.IsNaN(x) {
			errs[name] = "Must be a number."
			return nil, false
		}
		if msg := outOfBounds(s, x); msg != "" {
			errs[name] = msg
			return nil, false
		}
		return x, true
	case typ == "array" && s.Items != nil && len(s.Items.Enum) > 0:
		out := []any{}
		for _, v := range form[name] {
			for _, e := range s.Items.Enum {
				if scalarText(e) == v {
					out = append(out, e)
					break
				}
			}
		}
		if len(out) == 0 {
			if required {
				errs[name] = "Choose at least one."
				return nil, false
			}
			if current == nil {
				return nil, false
			}
		}
		return out, true
	case typ == "array" && s.Items != nil && isLineItem(s.Items.typ()):
		out := []any{}
		for i, line := range strings.Split(form.Get(name), "\n") {
			line = strings.TrimSpace(line)
			if line == "" {
				continue
			}
			switch s.Items.typ() {
			case "integer":
				n, err := strconv.ParseInt(line, 10, 64)
				if err != nil {
					errs[name] = fmt.Sprintf("Line %d must be a whole number.", i+1)
					return nil, false
				}
				out = append(out, n)
			case "number":
				x, err := strconv.ParseFloat(line, 64)
				if err != nil || math.IsInf(x, 0) || math.IsNaN(x) {
					errs[name] = fmt.Sprintf("Line %d must be a number.", i+1)
					return nil, false
				}
				out = append(out, x)
			default:
				out = append(out, line)
			}
		}
		if len(out) == 0 {
			if _, sent := form[name]; !sent {
				return nil, false
			}
			if required {
				errs[name] = "Required."
				return nil, false
			}
		}
		return out, true
	case typ == "object" && len(s.Properties) > 0 && depth < maxFormDepth:
		cur, _ := current.(map[string]any)
		before := len(errs)
		obj := parseObject(s, name, form, cur, errs, depth+1)
		if len(obj) == 0 && !required && len(errs) == before {
			return nil, false
		}
		return obj, true
	case typ == "string":
		if s.WriteOnly || s.XSecret || s.Format == "password" {
			if form.Get(name) == "" {
				if current != nil {
					return current, true
				}
				return missing()
			}
			return form.Get(name), true
		}
		v := form.Get(name)
		if strings.TrimSpace(v) == "" {
			return missing()
		}
		if s.MaxLength != nil && len([]rune(v)) > *s.MaxLength {
			errs[name] = fmt.Sprintf("At most %d characters.", *s.MaxLength)
			return nil, false
		}
		if s.MinLength != nil && len([]rune(v)) < *s.MinLength {
			errs[name] = fmt.Sprintf("At least %d characters.", *s.MinLength)
			return nil, false
		}
		if s.Pattern != "" {
			if re, err := regexp.Compile(s.Pattern); err == nil && !re.MatchString(v) {
				errs[name] = "Does not match the expected pattern " + s.Pattern + "."
				return nil, false
			}
		}
		return v, true
	default:
		if raw == "" {
			return missing()
		}
		var v any
		if err := json.Unmarshal([]byte(raw), &v); err != nil {
			errs[name] = "Must be valid JSON."
			return nil, false
		}
		return v, true
	}
}

// outOfBounds is the message of a number outside the schema's bounds ("" when inside).
func outOfBounds(s *formSchema, x float64) string {
	if s.Minimum != nil && x < *s.Minimum {
		return "Must be at least " + strconv.FormatFloat(*s.Minimum, 'f', -1, 64) + "."
	}
	if s.Maximum != nil && x > *s.Maximum {
		return "Must be at most " + strconv.FormatFloat(*s.Maximum, 'f', -1, 64) + "."
	}
	return ""
}

// ariaInvalid is the aria-invalid value of a field.
func ariaInvalid(f *formField) string {
	if f.Error != "" {
		return "true"
	}
	return "false"
}
