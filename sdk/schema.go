package sdk

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/invopop/jsonschema"
	schemav5 "github.com/santhosh-tekuri/jsonschema/v5"
)

// ManifestSchemaJSON is the published JSON Schema of the manifest, generated from the Go
// types by GenerateManifestSchema and committed as manifest.schema.json.
//
//go:embed manifest.schema.json
var ManifestSchemaJSON []byte

// ManifestSchemaID is the $id of the published manifest schema.
const ManifestSchemaID = "https://keel.dev/schemas/extension-manifest/v1.json"

// GenerateManifestSchema reflects the manifest schema from the Go types: every object is
// closed (additionalProperties false) and field comments become descriptions.
func GenerateManifestSchema() ([]byte, error) {
	r := &jsonschema.Reflector{RequiredFromJSONSchemaTags: false, DoNotReference: false}
	if err := r.AddGoComments("github.com/keelhq/keel/sdk", "./"); err != nil {
		// Comments are optional (they need the source tree); the schema stays valid without them.
		_ = err
	}
	s := r.Reflect(&Manifest{})
	s.ID = ManifestSchemaID
	s.Title = "keel extension manifest"
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("error encoding manifest schema: %w", err)
	}
	return append(b, '\n'), nil
}

var (
	manifestSchemaOnce sync.Once
	manifestSchema     *schemav5.Schema
	manifestSchemaErr  error
)

// CompileSchema compiles a JSON Schema document.
func CompileSchema(id string, doc []byte) (*schemav5.Schema, error) {
	c := schemav5.NewCompiler()
	c.Draft = schemav5.Draft2020
	if err := c.AddResource(id, bytes.NewReader(doc)); err != nil {
		return nil, fmt.Errorf("error loading schema %s: %w", id, err)
	}
	s, err := c.Compile(id)
	if err != nil {
		return nil, fmt.Errorf("error compiling schema %s: %w", id, err)
	}
	return s, nil
}

// ValidateManifestSchema checks manifest JSON against the published schema.
func ValidateManifestSchema(data []byte) error {
	manifestSchemaOnce.Do(func() {
		manifestSchema, manifestSchemaErr = CompileSchema(ManifestSchemaID, ManifestSchemaJSON)
	})
	if manifestSchemaErr != nil {
		return manifestSchemaErr
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return fmt.Errorf("invalid manifest: %w", err)
	}
	if err := manifestSchema.Validate(v); err != nil {
		return fmt.Errorf("invalid manifest: %v", err)
	}
	return nil
}

// ValidateConfig checks an extension config against the manifest's config schema.
func (m *Manifest) ValidateConfig(config []byte) error {
	if len(m.ConfigSchema) == 0 {
		return nil
	}
	s, err := CompileSchema(m.Key+"/config", m.ConfigSchema)
	if err != nil {
		return err
	}
	var v any
	if len(bytes.TrimSpace(config)) == 0 {
		config = []byte("{}")
	}
	if err := json.Unmarshal(config, &v); err != nil {
		return fmt.Errorf("invalid config for %s: %w", m.Key, err)
	}
	if err := s.Validate(v); err != nil {
		return fmt.Errorf("invalid config for %s: %v", m.Key, err)
	}
	return nil
}
