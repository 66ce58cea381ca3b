package cases

import (
	"strings"
	"unicode/utf8"
)

// anchorContext is how many characters of context an anchor keeps either side.
const anchorContext = 32

// Anchor is a text range of a document revision: the quoted text, the context either side
// and character (Unicode code point) offsets, end exclusive.
type Anchor struct {
	Quote  string `json:"quote"`
	Prefix string `json:"prefix"`
	Suffix string `json:"suffix"`
	Start  int    `json:"startOffset"`
	End    int    `json:"endOffset"`
}

// locate finds the anchor's quote in body: among every occurrence it picks the one whose
// surroundings best match the prefix and suffix, then the one nearest the old start. It
// returns the anchor refreshed for body (new offsets and context), or false when the quote
// does not occur.
func locate(body string, a Anchor) (Anchor, bool) {
	if a.Quote == "" {
		return Anchor{}, false
	}
	runes := []rune(body)
	quoteLen := utf8.RuneCountInString(a.Quote)
	prefix, suffix := []rune(a.Prefix), []rune(a.Suffix)
	best, bestScore, bestDist := -1, -1, 0
	// start counts runes up to byteAt incrementally: one pass over body for all occurrences.
	counted, start := 0, 0
	for from := 0; from <= len(body); {
		i := strings.Index(body[from:], a.Quote)
		if i < 0 {
			break
		}
		byteAt := from + i
		start += utf8.RuneCountInString(body[counted:byteAt])
		counted = byteAt
		score := commonSuffix(runes[max(0, start-len(prefix)):start], prefix) +
			commonPrefix(runes[start+quoteLen:min(len(runes), start+quoteLen+len(suffix))], suffix)
		dist := start - a.Start
		if dist < 0 {
			dist = -dist
		}
		if score > bestScore || score == bestScore && dist < bestDist {
			best, bestScore, bestDist = start, score, dist
		}
		_, size := utf8.DecodeRuneInString(body[byteAt:])
		from = byteAt + max(size, 1)
	}
	if best < 0 {
		return Anchor{}, false
	}
	return anchorAt(runes, best, best+quoteLen), true
}

// anchorAt is the anchor of runes[start:end] with its context.
func anchorAt(runes []rune, start, end int) Anchor {
	return Anchor{Quote: string(runes[start:end]), Prefix: string(runes[max(0, start-anchorContext):start]),
		Suffix: string(runes[end:min(len(runes), end+anchorContext)]), Start: start, End: end}
}

// commonSuffix counts the runes ra and rb share at their ends.
func commonSuffix(ra, rb []rune) int {
	n := 0
	for n < len(ra) && n < len(rb) && ra[len(ra)-1-n] == rb[len(rb)-1-n] {
		n++
	}
	return n
}

// commonPrefix counts the runes ra and rb share at their starts.
func commonPrefix(ra, rb []rune) int {
	n := 0
	for n < len(ra) && n < len(rb) && ra[n] == rb[n] {
		n++
	}
	return n
}
