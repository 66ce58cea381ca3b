package sdk

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// unknownManifestField reports a manifest field keel does not know in one line, with the
// closest known field name when one is near: "unknown field capabilites, did you mean
// capabilities". Other decoding problems are left to the schema check.
func unknownManifestField(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var m Manifest
	err := dec.Decode(&m)
	if err == nil {
		return nil
	}
	name, ok := strings.CutPrefix(err.Error(), `json: unknown field "`)
	if !ok {
		return nil
	}
	name = strings.TrimSuffix(name, `"`)
	if best := closestName(name, jsonFieldNames(reflect.TypeFor[Manifest]())); best != "" {
		return fmt.Errorf("invalid manifest: unknown field %s, did you mean %s", name, best)
	}
	return fmt.Errorf("invalid manifest: unknown field %s", name)
}

// jsonFieldNames returns the JSON names of t's fields and of the structs it holds, sorted.
func jsonFieldNames(t reflect.Type) []string {
	seen := map[string]bool{}
	visited := map[reflect.Type]bool{}
	var walk func(reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || visited[t] {
			return
		}
		visited[t] = true
		for f := range t.Fields() {
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if name == "" && !f.Anonymous {
				name = f.Name
			}
			if name != "" {
				seen[name] = true
			}
			walk(f.Type)
		}
	}
	walk(t)
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// closestName returns the candidate nearest to name by edit distance (case-insensitive),
// or "" when none is within a third of the name's length.
func closestName(name string, candidates []string) string {
	best, bestDist := "", len(name)/3+1
	for _, c := range candidates {
		if d := levenshtein(strings.ToLower(name), strings.ToLower(c)); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// levenshtein is the edit distance between a and b, counted in runes.
func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
