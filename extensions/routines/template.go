package routines

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Routine titles and descriptions are templates: {{name}} is replaced at dispatch by the
// value of a declared variable or of a built-in one. {{payload.a.b}} walks the run's trigger
// payload. A reference that is malformed or names nothing is refused when the routine is
// saved, so every saved template resolves.

// Built-in variables: always available, never declared.
const (
	builtinDate      = "date"
	builtinTimestamp = "timestamp"
	builtinPayload   = "payload"
)

var builtinVariables = []string{builtinDate, builtinTimestamp, builtinPayload}

// Variable types (REFERENCE.md 5).
var variableTypes = []string{"text", "textarea", "number", "boolean", "select", "date"}

// Limits of variables.
const (
	maxVariables       = 50
	maxVariableName    = 64
	maxVariableLabel   = 200
	maxVariableValue   = 10000
	maxSelectOptions   = 100
	payloadRenderLimit = 8 << 10
)

var (
	variableNameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*$`)
	// refRE is the inside of {{…}}: a name, optionally followed by dotted path segments.
	refRE  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_-]+)*$`)
	dateRE = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)
)

// Variable is one template variable of a routine.
type Variable struct {
	// Name is referenced as {{name}}: a letter, then letters, digits or underscores.
	Name string `json:"name" jsonschema:"pattern=^[A-Za-z][A-Za-z0-9_]*$,maxLength=64"`
	// Label is the human-readable name (default the name).
	Label string `json:"label"`
	// Type is text (default), textarea, number, boolean, select or date.
	Type string `json:"type" jsonschema:"enum=text,enum=textarea,enum=number,enum=boolean,enum=select,enum=date"`
	// Required variables must have a value at dispatch: a run's own value or the default.
	Required bool `json:"required"`
	// DefaultValue is used when a run supplies no value.
	DefaultValue *string `json:"defaultValue"`
	// Options are the allowed values of a select variable.
	Options []string `json:"options,omitempty"`
}

// templateRef is one {{…}} reference in a template.
type templateRef struct {
	// Name is the first segment; Path holds the dotted segments after it.
	Name string
	Path []string
	// Start and End delimit the reference, braces included, in bytes.
	Start, End int
}

// templateError is a malformed template.
type templateError struct {
	Offset int
	Reason string
}

func (e *templateError) Error() string {
	return fmt.Sprintf("%s at character %d", e.Reason, e.Offset+1)
}

// parseTemplate returns the {{…}} references of s in order, or the first malformed one: a
// "{{" without its "}}", or an inside that is not a name with optional dotted segments.
// Single braces are plain text.
func parseTemplate(s string) ([]templateRef, error) {
	var refs []templateRef
	i := 0
	for {
		open := strings.Index(s[i:], "{{")
		if open < 0 {
			return refs, nil
		}
		open += i
		closeAt := strings.Index(s[open+2:], "}}")
		if closeAt < 0 {
			return nil, &templateError{Offset: utf8.RuneCountInString(s[:open]), Reason: `unterminated "{{"`}
		}
		closeAt += open + 2
		inner := strings.TrimSpace(s[open+2 : closeAt])
		if !refRE.MatchString(inner) {
			return nil, &templateError{Offset: utf8.RuneCountInString(s[:open]),
				Reason: fmt.Sprintf("%q is not a variable reference (use {{name}})", s[open:closeAt+2])}
		}
		parts := strings.Split(inner, ".")
		refs = append(refs, templateRef{Name: parts[0], Path: parts[1:], Start: open, End: closeAt + 2})
		i = closeAt + 2
	}
}

// checkTemplate reports the problems of one template against the declared variables: the
// first malformed reference, or every reference that names nothing.
func checkTemplate(field, s string, vars []Variable) []detail {
	refs, err := parseTemplate(s)
	if err != nil {
		return []detail{{Path: field, Message: err.Error()}}
	}
	var out []detail
	seen := map[string]bool{}
	for _, r := range refs {
		switch {
		case r.Name == builtinPayload:
		case len(r.Path) > 0:
			out = append(out, detail{Path: field, Message: fmt.Sprintf("{{%s.%s}}: only payload references may have a path",
				r.Name, strings.Join(r.Path, "."))})
		case slices.Contains(builtinVariables, r.Name) || variableIndex(vars, r.Name) >= 0:
		case !seen[r.Name]:
			seen[r.Name] = true
			out = append(out, detail{Path: field, Message: fmt.Sprintf("{{%s}} is not a variable of this routine", r.Name)})
		}
	}
	return out
}

func variableIndex(vars []Variable, name string) int {
	return slices.IndexFunc(vars, func(v Variable) bool { return v.Name == name })
}

// normalizeVariables fills defaults (type text, label = name) and checks every variable;
// problems are reported under variables.<i>.<field>.
func normalizeVariables(vars []Variable) ([]Variable, []detail) {
	var out []detail
	bad := func(i int, field, msg string) {
		out = append(out, detail{Path: fmt.Sprintf("variables.%d.%s", i, field), Message: msg})
	}
	if len(vars) > maxVariables {
		return nil, []detail{{Path: "variables", Message: fmt.Sprintf("must hold at most %d variables", maxVariables)}}
	}
	norm := make([]Variable, len(vars))
	seen := map[string]bool{}
	for i, v := range vars {
		v.Name = strings.TrimSpace(v.Name)
		v.Label = strings.TrimSpace(v.Label)
		switch {
		case !variableNameRE.MatchString(v.Name) || len(v.Name) > maxVariableName:
			bad(i, "name", "must start with a letter and hold only letters, digits and underscores (at most 64)")
		case slices.Contains(builtinVariables, v.Name):
			bad(i, "name", fmt.Sprintf("%q is a built-in variable", v.Name))
		case seen[v.Name]:
			bad(i, "name", fmt.Sprintf("%q is declared twice", v.Name))
		}
		seen[v.Name] = true
		if v.Label == "" {
			v.Label = v.Name
		}
		if utf8.RuneCountInString(v.Label) > maxVariableLabel {
			bad(i, "label", fmt.Sprintf("must be at most %d characters", maxVariableLabel))
		}
		if v.Type == "" {
			v.Type = "text"
		}
		if !slices.Contains(variableTypes, v.Type) {
			bad(i, "type", "must be one of "+strings.Join(variableTypes, ", "))
		}
		if v.Type == "select" {
			if len(v.Options) == 0 || len(v.Options) > maxSelectOptions {
				bad(i, "options", fmt.Sprintf("a select variable needs 1 to %d options", maxSelectOptions))
			}
		} else if len(v.Options) > 0 {
			bad(i, "options", "only select variables have options")
		}
		if v.DefaultValue != nil {
			if msg := checkVariableValue(v, *v.DefaultValue); msg != "" && *v.DefaultValue != "" {
				bad(i, "defaultValue", msg)
			}
		}
		norm[i] = v
	}
	return norm, out
}

// checkVariableValue says what is wrong with a value for a variable ("" when it fits).
func checkVariableValue(v Variable, value string) string {
	if utf8.RuneCountInString(value) > maxVariableValue {
		return fmt.Sprintf("must be at most %d characters", maxVariableValue)
	}
	switch v.Type {
	case "number":
		if _, err := strconv.ParseFloat(value, 64); err != nil {
			return "must be a number"
		}
	case "boolean":
		if value != "true" && value != "false" {
			return "must be true or false"
		}
	case "date":
		if _, err := time.Parse(time.DateOnly, value); err != nil || !dateRE.MatchString(value) {
			return "must be a date (YYYY-MM-DD)"
		}
	case "select":
		if !slices.Contains(v.Options, value) {
			return "must be one of the variable's options"
		}
	}
	return ""
}

// missingRequired names the required variables without a non-empty default, in order.
func missingRequired(vars []Variable) []string {
	var out []string
	for _, v := range vars {
		if v.Required && (v.DefaultValue == nil || *v.DefaultValue == "") {
			out = append(out, v.Name)
		}
	}
	return out
}

// variableValue turns a JSON value supplied for a variable into its text: strings as they
// are, numbers and booleans printed; anything else is refused.
func variableValue(raw json.RawMessage) (string, bool) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", false
	}
	switch x := v.(type) {
	case string:
		return x, true
	case bool:
		return strconv.FormatBool(x), true
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), true
	case nil:
		return "", true
	}
	return "", false
}

// resolveVariables returns the value of every declared variable for one run: the run's
// own value, else the default. Unknown names in given are refused when strict (a manual
// run names them on purpose) and ignored otherwise (a webhook sender's extra fields).
// problems lists bad given values; missing names required variables left without a value.
func resolveVariables(vars []Variable, given map[string]json.RawMessage, strict bool) (values map[string]string, problems []detail, missing []string) {
	values = make(map[string]string, len(vars))
	names := make([]string, 0, len(given))
	for name := range given {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		i := variableIndex(vars, name)
		if i < 0 {
			if strict {
				problems = append(problems, detail{Path: "variables." + name, Message: "is not a variable of this routine"})
			}
			continue
		}
		s, ok := variableValue(given[name])
		if !ok {
			problems = append(problems, detail{Path: "variables." + name, Message: "must be a string, number or boolean"})
			continue
		}
		if s == "" {
			continue
		}
		if msg := checkVariableValue(vars[i], s); msg != "" {
			problems = append(problems, detail{Path: "variables." + name, Message: msg})
			continue
		}
		values[name] = s
	}
	for _, v := range vars {
		if _, ok := values[v.Name]; ok {
			continue
		}
		if v.DefaultValue != nil && *v.DefaultValue != "" {
			values[v.Name] = *v.DefaultValue
			continue
		}
		if v.Required {
			missing = append(missing, v.Name)
			continue
		}
		values[v.Name] = ""
	}
	return values, problems, missing
}

// builtinValues returns the built-in variables at now for a run's trigger payload.
func builtinValues(now time.Time, payload any) map[string]string {
	now = now.UTC()
	out := map[string]string{
		builtinDate:      now.Format(time.DateOnly),
		builtinTimestamp: now.Format("January 2, 2006 at 3:04 PM UTC"),
		builtinPayload:   "",
	}
	if payload != nil {
		if b, err := json.MarshalIndent(payload, "", "  "); err == nil {
			s := string(b)
			if len(s) > payloadRenderLimit {
				s = truncateUTF8(s, payloadRenderLimit) + "... (truncated)"
			}
			out[builtinPayload] = s
		}
	}
	return out
}

func truncateUTF8(s string, n int) string {
	for n > 0 && n < len(s) && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// renderTemplate replaces every reference of s with its value. Payload paths walk payload;
// a path that leads nowhere is left as written, so the gap shows. A template that does not
// parse is returned unchanged (saved templates always parse).
func renderTemplate(s string, values map[string]string, payload any) string {
	refs, err := parseTemplate(s)
	if err != nil || len(refs) == 0 {
		return s
	}
	var b strings.Builder
	last := 0
	for _, r := range refs {
		b.WriteString(s[last:r.Start])
		last = r.End
		if r.Name == builtinPayload && len(r.Path) > 0 {
			if v, ok := payloadPath(payload, r.Path); ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[r.Start:r.End])
			}
			continue
		}
		if v, ok := values[r.Name]; ok {
			b.WriteString(v)
		} else {
			b.WriteString(s[r.Start:r.End])
		}
	}
	b.WriteString(s[last:])
	return b.String()
}

// payloadPath walks a decoded JSON value; strings print as they are, other scalars as
// JSON, objects and arrays as compact JSON.
func payloadPath(payload any, path []string) (string, bool) {
	cur := payload
	for _, seg := range path {
		switch x := cur.(type) {
		case map[string]any:
			v, ok := x[seg]
			if !ok {
				return "", false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(x) {
				return "", false
			}
			cur = x[i]
		default:
			return "", false
		}
	}
	switch x := cur.(type) {
	case string:
		return x, true
	case nil:
		return "", false
	}
	b, err := json.Marshal(cur)
	if err != nil {
		return "", false
	}
	return string(b), true
}
