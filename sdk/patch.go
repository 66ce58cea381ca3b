package sdk

import (
	"bytes"
	"encoding/json"

	"github.com/invopop/jsonschema"
)

// PatchField is one field of a partial update (PATCH) body: Set says the key was present,
// Null that it was null. The zero value leaves the field alone. Use it for fields where
// "absent", "null" and a value mean three different things.
type PatchField[T any] struct {
	Set   bool
	Null  bool
	Value T
}

// UnmarshalJSON records that the field was present, and whether it was null.
func (f *PatchField[T]) UnmarshalJSON(b []byte) error {
	f.Set = true
	if string(bytes.TrimSpace(b)) == "null" {
		var zero T
		f.Null, f.Value = true, zero
		return nil
	}
	f.Null = false
	return json.Unmarshal(b, &f.Value)
}

// JSONSchema documents the field as its value type or null.
func (PatchField[T]) JSONSchema() *jsonschema.Schema {
	s := (&jsonschema.Reflector{DoNotReference: true}).Reflect(new(T))
	s.Version = ""
	return &jsonschema.Schema{AnyOf: []*jsonschema.Schema{s, {Type: "null"}}}
}
