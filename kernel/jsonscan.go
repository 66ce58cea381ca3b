package kernel

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Messages of the text problems ScanJSON and ScanText report.
const (
	msgNUL       = "must not contain a NUL character"
	msgUTF8      = "must be valid UTF-8"
	msgSurrogate = "must not contain an unpaired UTF-16 surrogate escape"
)

// maxTextProblems caps how many problems one scan reports.
const maxTextProblems = 20

// maxJSONDepth is the deepest nesting ScanJSON accepts, the same as encoding/json's.
const maxJSONDepth = 10000

// errJSONSyntax is wrapped by the syntax errors of ScanJSON.
var errJSONSyntax = errors.New("malformed JSON")

// ScanJSON checks a JSON text in one pass for strings PostgreSQL refuses to store: NUL
// characters (raw or escaped as \u0000), invalid UTF-8 and escaped UTF-16 surrogates that
// do not pair up. It returns one detail per offending string (object keys included), named
// by its JSON path (`title`, `labels[2].name`, the empty path for the top-level value), and
// a non-nil error when b is not one JSON value (it wraps errJSONSyntax and says where).
// A raw NUL inside a string is reported as a problem, not as a syntax error, so a field
// can be named; every other control character in a string is a syntax error, as in JSON.
func ScanJSON(b []byte) ([]ValidationDetail, error) {
	s := &jsonScanner{b: b}
	s.skipSpace()
	if err := s.value(0); err != nil {
		return s.problems, err
	}
	s.skipSpace()
	if s.i < len(s.b) {
		return s.problems, s.syntax("unexpected data after the top-level value")
	}
	return s.problems, nil
}

// ScanText checks a body that is not JSON for the same problems as ScanJSON: a NUL byte
// or invalid UTF-8 anywhere in it. path names the body in the details.
func ScanText(b []byte, path string) []ValidationDetail {
	var out []ValidationDetail
	if strings.IndexByte(string(b), 0) >= 0 {
		out = append(out, ValidationDetail{Path: path, Message: msgNUL})
	}
	if !utf8.Valid(b) {
		out = append(out, ValidationDetail{Path: path, Message: msgUTF8})
	}
	return out
}

type jsonScanner struct {
	b        []byte
	i        int
	path     []pathSeg // where the scan is; turned into text only for a problem
	problems []ValidationDetail
	// seen dedupes problems of one string: at most one detail per message per path.
	seen map[string]bool
}

func (s *jsonScanner) syntax(what string) error {
	return fmt.Errorf("%w at offset %d: %s", errJSONSyntax, s.i, what)
}

func (s *jsonScanner) skipSpace() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// pathSeg is one step of a JSON path: an object key (its raw quoted bytes) or an index.
type pathSeg struct {
	rawKey []byte
	index  int
}

func (seg pathSeg) String() string {
	if seg.rawKey == nil {
		return "[" + strconv.Itoa(seg.index) + "]"
	}
	return "." + keyText(seg.rawKey)
}

func (s *jsonScanner) pathString(rawKey []byte) string {
	var sb strings.Builder
	for _, seg := range s.path {
		sb.WriteString(seg.String())
	}
	if rawKey != nil {
		sb.WriteString(pathSeg{rawKey: rawKey}.String())
	}
	return strings.TrimPrefix(sb.String(), ".")
}

func (s *jsonScanner) report(path, msg string) {
	if len(s.problems) >= maxTextProblems {
		return
	}
	if s.seen == nil {
		s.seen = map[string]bool{}
	}
	k := path + "\x00" + msg
	if s.seen[k] {
		return
	}
	s.seen[k] = true
	s.problems = append(s.problems, ValidationDetail{Path: path, Message: msg})
}

func (s *jsonScanner) value(depth int) error {
	if s.i >= len(s.b) {
		return s.syntax("unexpected end of input")
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return s.object(depth + 1)
	case c == '[':
		return s.array(depth + 1)
	case c == '"':
		msgs, err := s.str()
		if err != nil {
			return err
		}
		for _, m := range msgs {
			s.report(s.pathString(nil), m)
		}
		return nil
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	default:
		return s.syntax(fmt.Sprintf("unexpected character %q", c))
	}
}

func (s *jsonScanner) literal(word string) error {
	if len(s.b)-s.i < len(word) || string(s.b[s.i:s.i+len(word)]) != word {
		return s.syntax("invalid literal")
	}
	s.i += len(word)
	return nil
}

func (s *jsonScanner) digits() int {
	n := 0
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
		n++
	}
	return n
}

func (s *jsonScanner) number() error {
	if s.b[s.i] == '-' {
		s.i++
	}
	if s.i >= len(s.b) {
		return s.syntax("unexpected end of number")
	}
	if s.b[s.i] == '0' {
		s.i++
	} else if s.digits() == 0 {
		return s.syntax("invalid number")
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if s.digits() == 0 {
			return s.syntax("invalid number")
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if s.digits() == 0 {
			return s.syntax("invalid number")
		}
	}
	return nil
}

func (s *jsonScanner) object(depth int) error {
	if depth > maxJSONDepth {
		return s.syntax("nested too deeply")
	}
	s.i++ // {
	s.skipSpace()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return nil
	}
	for {
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return s.syntax("expected a string key")
		}
		start := s.i
		msgs, err := s.str()
		if err != nil {
			return err
		}
		rawKey := s.b[start:s.i]
		for _, m := range msgs {
			s.report(s.pathString(rawKey), m)
		}
		s.skipSpace()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return s.syntax("expected ':' after an object key")
		}
		s.i++
		s.skipSpace()
		s.path = append(s.path, pathSeg{rawKey: rawKey})
		err = s.value(depth)
		s.path = s.path[:len(s.path)-1]
		if err != nil {
			return err
		}
		s.skipSpace()
		if s.i >= len(s.b) {
			return s.syntax("unexpected end of object")
		}
		switch s.b[s.i] {
		case ',':
			s.i++
			s.skipSpace()
		case '}':
			s.i++
			return nil
		default:
			return s.syntax("expected ',' or '}' in an object")
		}
	}
}

func (s *jsonScanner) array(depth int) error {
	if depth > maxJSONDepth {
		return s.syntax("nested too deeply")
	}
	s.i++ // [
	s.skipSpace()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		return nil
	}
	for n := 0; ; n++ {
		s.path = append(s.path, pathSeg{index: n})
		err := s.value(depth)
		s.path = s.path[:len(s.path)-1]
		if err != nil {
			return err
		}
		s.skipSpace()
		if s.i >= len(s.b) {
			return s.syntax("unexpected end of array")
		}
		switch s.b[s.i] {
		case ',':
			s.i++
			s.skipSpace()
		case ']':
			s.i++
			return nil
		default:
			return s.syntax("expected ',' or ']' in an array")
		}
	}
}

// keyText returns the text of a raw quoted key for a path, NULs and invalid bytes
// replaced by U+FFFD.
func keyText(raw []byte) string {
	if plainASCII(raw[1 : len(raw)-1]) {
		return string(raw[1 : len(raw)-1])
	}
	var k string
	if json.Unmarshal(raw, &k) != nil {
		k = string(raw[1 : len(raw)-1])
	}
	return strings.ReplaceAll(strings.ToValidUTF8(k, "\uFFFD"), "\x00", "\uFFFD")
}

// str scans one string starting at its opening quote and returns the problems found.
func (s *jsonScanner) str() ([]string, error) {
	s.i++ // opening quote
	var (
		msgs  []string
		found = func(m string) {
			for _, x := range msgs {
				if x == m {
					return
				}
			}
			msgs = append(msgs, m)
		}
	)
	for {
		// Fast path: printable ASCII other than the quote and the backslash.
		for s.i < len(s.b) {
			if c := s.b[s.i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' {
				break
			}
			s.i++
		}
		if s.i >= len(s.b) {
			return nil, s.syntax("unexpected end of string")
		}
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return msgs, nil
		case c == '\\':
			if s.i+1 >= len(s.b) {
				return nil, s.syntax("unexpected end of string")
			}
			e := s.b[s.i+1]
			switch e {
			case '"', '\\', '/':
				s.i += 2
			case 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				r, ok := s.hex4(s.i + 2)
				if !ok {
					return nil, s.syntax("invalid \\u escape")
				}
				s.i += 6
				switch {
				case r == 0:
					found(msgNUL)
				case r >= 0xD800 && r <= 0xDBFF:
					// A high surrogate must be followed by an escaped low one.
					if s.i+1 < len(s.b) && s.b[s.i] == '\\' && s.b[s.i+1] == 'u' {
						if lo, ok := s.hex4(s.i + 2); ok && lo >= 0xDC00 && lo <= 0xDFFF {
							s.i += 6
							continue
						}
					}
					found(msgSurrogate)
				case r >= 0xDC00 && r <= 0xDFFF:
					found(msgSurrogate)
				default:
				}
			default:
				return nil, s.syntax("invalid escape in string")
			}
		case c == 0:
			found(msgNUL)
			s.i++
		case c < 0x20:
			return nil, s.syntax("control character in string")
		case c < utf8.RuneSelf:
			s.i++
		default:
			r, size := utf8.DecodeRune(s.b[s.i:])
			if r == utf8.RuneError && size == 1 {
				found(msgUTF8)
			}
			s.i += size
		}
	}
}

func (s *jsonScanner) hex4(at int) (rune, bool) {
	if at+4 > len(s.b) {
		return 0, false
	}
	var r rune
	for _, c := range s.b[at : at+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}

// plainASCII reports whether b is printable ASCII without escapes.
func plainASCII(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c >= utf8.RuneSelf || c == '\\' {
			return false
		}
	}
	return true
}
