package skills

import (
	"fmt"
	"strconv"
	"strings"
)

// Frontmatter limits: a SKILL.md header is small; anything deeper or longer is refused.
const (
	fmMaxDepth = 16
	fmMaxLines = 2000
)

// Frontmatter is a SKILL.md split into its parsed YAML header and its Markdown body.
type Frontmatter struct {
	// Fields are the header's keys: strings, booleans, numbers (float64), nil, nested
	// map[string]any objects and []any list literals.
	Fields map[string]any
	// Body is the Markdown after the header (the whole file when there is no header).
	Body string
	// Present says the file had a header.
	Present bool
	// Warnings name header lines that were skipped (unsupported YAML forms).
	Warnings []string
}

// ParseFrontmatter reads the YAML frontmatter of a SKILL.md. The reader supports what the
// spec asks of it and nothing more: flat scalars (plain, single- or double-quoted, and the
// | and > block forms), nested objects by indentation, and list literals ([a, "b", {k: v}]).
// Block sequences ("- item") and other YAML forms are skipped with a warning. A header
// that is not closed is not a header. It never panics.
func ParseFrontmatter(src string) (*Frontmatter, error) {
	src = strings.TrimPrefix(src, "\ufeff")
	src = strings.ReplaceAll(src, "\r\n", "\n")
	out := &Frontmatter{Fields: map[string]any{}, Body: src}
	if !strings.HasPrefix(src, "---\n") && src != "---" {
		return out, nil
	}
	rest := strings.TrimPrefix(src, "---")
	rest = strings.TrimPrefix(rest, "\n")
	lines := strings.Split(rest, "\n")
	end := -1
	for i, l := range lines {
		if t := strings.TrimRight(l, " \t"); t == "---" || t == "..." {
			end = i
			break
		}
	}
	if end < 0 {
		return out, nil
	}
	if end > fmMaxLines {
		return nil, fmt.Errorf("frontmatter is longer than %d lines", fmMaxLines)
	}
	out.Present = true
	out.Body = strings.TrimPrefix(strings.Join(lines[end+1:], "\n"), "\n")
	p := &fmParser{lines: lines[:end], warn: func(s string) { out.Warnings = append(out.Warnings, s) }}
	fields, err := p.object(0, 0)
	if err != nil {
		return nil, err
	}
	out.Fields = fields
	return out, nil
}

// fmParser walks header lines.
type fmParser struct {
	lines []string
	pos   int
	warn  func(string)
}

// indentOf counts leading spaces (a tab counts as two).
func indentOf(l string) int {
	n := 0
	for _, r := range l {
		switch r {
		case ' ':
			n++
		case '\t':
			n += 2
		default:
			return n
		}
	}
	return n
}

// skippable reports a blank or comment line.
func skippable(l string) bool {
	t := strings.TrimSpace(l)
	return t == "" || strings.HasPrefix(t, "#")
}

// object reads keys at one indentation until a line indented less.
func (p *fmParser) object(indent, depth int) (map[string]any, error) {
	if depth > fmMaxDepth {
		return nil, fmt.Errorf("frontmatter nests deeper than %d levels", fmMaxDepth)
	}
	out := map[string]any{}
	level := -1
	for p.pos < len(p.lines) {
		l := p.lines[p.pos]
		if skippable(l) {
			p.pos++
			continue
		}
		in := indentOf(l)
		if in < indent || level >= 0 && in < level {
			return out, nil
		}
		if level < 0 {
			level = in
		}
		if in > level {
			p.warn(fmt.Sprintf("line %d: unexpected indentation, skipped", p.pos+2))
			p.pos++
			continue
		}
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "- ") || t == "-" {
			p.warn(fmt.Sprintf("line %d: block lists are not supported (use a list literal), skipped", p.pos+2))
			p.pos++
			continue
		}
		key, val, ok := splitKey(t)
		if !ok {
			p.warn(fmt.Sprintf("line %d: not a key: value pair, skipped", p.pos+2))
			p.pos++
			continue
		}
		p.pos++
		switch v := strings.TrimSpace(stripComment(val)); {
		case v == "":
			// A nested object follows on more-indented lines (or the value is null).
			if p.nextIndent() > level {
				child, err := p.object(level+1, depth+1)
				if err != nil {
					return nil, err
				}
				out[key] = child
			} else {
				out[key] = nil
			}
		case v == "|" || v == ">" || v == "|-" || v == ">-" || v == "|+" || v == ">+":
			out[key] = p.block(level, v[0] == '>', len(v) == 1 || v[1] == '+')
		default:
			sv, err := parseScalar(v, depth)
			if err != nil {
				p.warn(fmt.Sprintf("line %d: %v, kept as text", p.pos+1, err))
				sv = v
			}
			out[key] = sv
		}
	}
	return out, nil
}

// nextIndent is the indentation of the next meaningful line, -1 at the end.
func (p *fmParser) nextIndent() int {
	for i := p.pos; i < len(p.lines); i++ {
		if !skippable(p.lines[i]) {
			return indentOf(p.lines[i])
		}
	}
	return -1
}

// block reads a | (literal) or > (folded) block scalar indented more than level.
func (p *fmParser) block(level int, folded, keepEnd bool) string {
	var parts []string
	indent := -1
	for p.pos < len(p.lines) {
		l := p.lines[p.pos]
		if strings.TrimSpace(l) == "" {
			parts = append(parts, "")
			p.pos++
			continue
		}
		in := indentOf(l)
		if in <= level {
			break
		}
		if indent < 0 {
			indent = in
		}
		parts = append(parts, strings.TrimLeft(l, " \t")[0:])
		if in > indent {
			parts[len(parts)-1] = strings.Repeat(" ", in-indent) + parts[len(parts)-1]
		}
		p.pos++
	}
	for len(parts) > 0 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	sep := "\n"
	if folded {
		sep = " "
	}
	s := strings.Join(parts, sep)
	if folded {
		s = strings.ReplaceAll(s, "  ", "\n")
	}
	if keepEnd && s != "" {
		s += "\n"
	}
	return s
}

// splitKey splits "key: value" (the key may be quoted).
func splitKey(t string) (string, string, bool) {
	if t == "" {
		return "", "", false
	}
	if t[0] == '"' || t[0] == '\'' {
		k, rest, err := quoted(t)
		if err != nil {
			return "", "", false
		}
		rest = strings.TrimLeft(rest, " ")
		if !strings.HasPrefix(rest, ":") {
			return "", "", false
		}
		return k, rest[1:], true
	}
	i := strings.Index(t, ":")
	for i >= 0 && i+1 < len(t) && t[i+1] != ' ' && t[i+1] != '\t' {
		j := strings.Index(t[i+1:], ":")
		if j < 0 {
			return "", "", false
		}
		i += 1 + j
	}
	if i <= 0 {
		return "", "", false
	}
	k := strings.TrimSpace(t[:i])
	if k == "" || strings.ContainsAny(k, "{}[],#&*!|>'\"%@`") {
		return "", "", false
	}
	return k, t[i+1:], true
}

// stripComment removes a trailing " # comment" outside quotes and brackets.
func stripComment(v string) string {
	var quote byte
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case quote != 0:
			if c == '\\' && quote == '"' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '#' && (i == 0 || v[i-1] == ' ' || v[i-1] == '\t'):
			return v[:i]
		}
	}
	return v
}

// quoted reads a quoted string at the start of s and returns it with the rest of s.
func quoted(s string) (string, string, error) {
	q := s[0]
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case q == '\'' && c == '\'':
			if i+1 < len(s) && s[i+1] == '\'' {
				b.WriteByte('\'')
				i++
				continue
			}
			return b.String(), s[i+1:], nil
		case q == '"' && c == '"':
			return b.String(), s[i+1:], nil
		case q == '"' && c == '\\' && i+1 < len(s):
			i++
			switch s[i] {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case '0':
				b.WriteByte(0)
			case 'u':
				if i+4 < len(s) {
					if r, err := strconv.ParseUint(s[i+1:i+5], 16, 32); err == nil {
						b.WriteRune(rune(r))
						i += 4
						continue
					}
				}
				b.WriteString(`\u`)
			default:
				b.WriteByte(s[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", "", fmt.Errorf("unterminated quoted string")
}

// parseScalar reads one value: a quoted string, a list literal, an object literal, or a
// plain scalar (true, false, null, a number or text).
func parseScalar(v string, depth int) (any, error) {
	switch v[0] {
	case '"', '\'':
		s, rest, err := quoted(v)
		if err != nil {
			return nil, err
		}
		if strings.TrimSpace(rest) != "" {
			return nil, fmt.Errorf("text after a quoted string")
		}
		return s, nil
	case '[', '{':
		f := &flow{s: v}
		out, err := f.value(depth)
		if err != nil {
			return nil, err
		}
		f.space()
		if f.i != len(f.s) {
			return nil, fmt.Errorf("text after a literal")
		}
		return out, nil
	}
	return plain(v), nil
}

// plain types a plain scalar.
func plain(v string) any {
	switch strings.ToLower(v) {
	case "true", "yes", "on":
		return true
	case "false", "no", "off":
		return false
	case "null", "~":
		return nil
	}
	if n, err := strconv.ParseFloat(v, 64); err == nil && !strings.ContainsAny(v, "xXpP_") && len(v) < 32 {
		lower := strings.ToLower(v)
		if !strings.Contains(lower, "inf") && !strings.Contains(lower, "nan") {
			return n
		}
	}
	return v
}

// flow parses list and object literals.
type flow struct {
	s string
	i int
}

func (f *flow) space() {
	for f.i < len(f.s) && (f.s[f.i] == ' ' || f.s[f.i] == '\t') {
		f.i++
	}
}

func (f *flow) value(depth int) (any, error) {
	if depth > fmMaxDepth {
		return nil, fmt.Errorf("literal nests deeper than %d levels", fmMaxDepth)
	}
	f.space()
	if f.i >= len(f.s) {
		return nil, fmt.Errorf("unterminated literal")
	}
	switch c := f.s[f.i]; c {
	case '[':
		f.i++
		out := []any{}
		for {
			f.space()
			if f.i < len(f.s) && f.s[f.i] == ']' {
				f.i++
				return out, nil
			}
			v, err := f.value(depth + 1)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
			f.space()
			if f.i < len(f.s) && f.s[f.i] == ',' {
				f.i++
				continue
			}
			if f.i < len(f.s) && f.s[f.i] == ']' {
				f.i++
				return out, nil
			}
			return nil, fmt.Errorf("expected , or ] in a list literal")
		}
	case '{':
		f.i++
		out := map[string]any{}
		for {
			f.space()
			if f.i < len(f.s) && f.s[f.i] == '}' {
				f.i++
				return out, nil
			}
			k, err := f.key()
			if err != nil {
				return nil, err
			}
			v, err := f.value(depth + 1)
			if err != nil {
				return nil, err
			}
			out[k] = v
			f.space()
			if f.i < len(f.s) && f.s[f.i] == ',' {
				f.i++
				continue
			}
			if f.i < len(f.s) && f.s[f.i] == '}' {
				f.i++
				return out, nil
			}
			return nil, fmt.Errorf("expected , or } in an object literal")
		}
	case '"', '\'':
		s, rest, err := quoted(f.s[f.i:])
		if err != nil {
			return nil, err
		}
		f.i = len(f.s) - len(rest)
		return s, nil
	default:
		start := f.i
		for f.i < len(f.s) && !strings.ContainsRune(",]}", rune(f.s[f.i])) {
			f.i++
		}
		t := strings.TrimSpace(f.s[start:f.i])
		if t == "" {
			return nil, fmt.Errorf("empty item in a literal")
		}
		return plain(t), nil
	}
}

// key reads "key:" inside an object literal.
func (f *flow) key() (string, error) {
	f.space()
	if f.i < len(f.s) && (f.s[f.i] == '"' || f.s[f.i] == '\'') {
		k, rest, err := quoted(f.s[f.i:])
		if err != nil {
			return "", err
		}
		f.i = len(f.s) - len(rest)
		f.space()
		if f.i >= len(f.s) || f.s[f.i] != ':' {
			return "", fmt.Errorf("expected : after a key")
		}
		f.i++
		return k, nil
	}
	start := f.i
	for f.i < len(f.s) && f.s[f.i] != ':' && !strings.ContainsRune(",]}{[", rune(f.s[f.i])) {
		f.i++
	}
	if f.i >= len(f.s) || f.s[f.i] != ':' {
		return "", fmt.Errorf("expected key: value in an object literal")
	}
	k := strings.TrimSpace(f.s[start:f.i])
	f.i++
	if k == "" {
		return "", fmt.Errorf("empty key in an object literal")
	}
	return k, nil
}
