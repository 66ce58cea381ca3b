package sdk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	schemav5 "github.com/santhosh-tekuri/jsonschema/v5"
)

// ConfigChangedMethod is the reserved Call method with which the host delivers a new
// config to a running extension (POST /api/plugins/{id}/config), without a restart. The
// SDK answers it by calling the extension's ConfigChangeHandler, if any. Extensions never
// see it, and no manifest can provide it.
const ConfigChangedMethod = "keel.config.changed"

// ConfigValidateMethod is the reserved Call method with which the host asks an extension's
// ConfigValidator about a config (POST /api/plugins/{id}/config/test). The SDK answers
// CodeNotSupported for an extension without one.
const ConfigValidateMethod = "keel.config.validate"

// CodeNotSupported is the error code of a reserved call the extension does not implement.
const CodeNotSupported = "not_supported"

// hostCaller is the caller the host sends reserved calls as.
const hostCaller = "host"

// ConfigChangeHandler is implemented by extensions that react to a config change while
// running (the Env given to Configure keeps the config of that start). OnConfigChange is
// called with the new config, already valid against the manifest's config schema; an
// error is reported to the admin who saved it (the config stays saved). Since protocol v1.
type ConfigChangeHandler interface {
	OnConfigChange(ctx context.Context, config json.RawMessage) error
}

// ConfigValidator is implemented by extensions that check a config beyond its JSON Schema
// (reachability of a URL, a credential's validity). ValidateConfig returns the warnings to
// show, or an error saying why the config is invalid; it must not keep the config. Since
// protocol v1.
type ConfigValidator interface {
	ValidateConfig(ctx context.Context, config json.RawMessage) (warnings []string, err error)
}

// configValidation is the output of ConfigValidateMethod.
type configValidation struct {
	Warnings []string `json:"warnings,omitempty"`
}

// reservedCall answers the host's reserved config methods; handled reports whether
// req.Method was one.
func (s *server) reservedConfigCall(ctx context.Context, method string, input []byte) (out any, handled bool, err error) {
	switch method {
	case ConfigChangedMethod:
		s.mu.Lock()
		if s.env != nil {
			// A copy: the extension may be reading the Env it was configured with.
			env := *s.env
			env.Config = append(json.RawMessage(nil), input...)
			s.env = &env
		}
		s.mu.Unlock()
		if h, ok := s.ext.(ConfigChangeHandler); ok {
			if err := h.OnConfigChange(ctx, input); err != nil {
				return nil, true, err
			}
		}
		return struct{}{}, true, nil
	case ConfigValidateMethod:
		v, ok := s.ext.(ConfigValidator)
		if !ok {
			return nil, true, &Error{Status: http.StatusNotImplemented, Code: CodeNotSupported, Message: "This extension does not support configuration testing."}
		}
		warnings, err := v.ValidateConfig(ctx, input)
		if err != nil {
			return nil, true, err
		}
		return configValidation{Warnings: warnings}, true, nil
	}
	return nil, false, nil
}

// ConfigFieldError is one way a config fails the manifest's config schema.
type ConfigFieldError struct {
	// Field is the JSON pointer of the offending value ("/maxNotes"; "/" for the whole).
	Field   string `json:"field"`
	Message string `json:"message"`
}

// ConfigFieldErrors checks a config against the manifest's config schema and returns
// every failure by field (nil when it matches or the manifest declares no schema). The
// error reports a schema that does not compile or a config that is not JSON.
func (m *Manifest) ConfigFieldErrors(config []byte) ([]ConfigFieldError, error) {
	if len(m.ConfigSchema) == 0 {
		return nil, nil
	}
	s, err := CompileSchema(m.Key+"/config", m.ConfigSchema)
	if err != nil {
		return nil, err
	}
	var v any
	if len(bytes.TrimSpace(config)) == 0 {
		config = []byte("{}")
	}
	if err := json.Unmarshal(config, &v); err != nil {
		return []ConfigFieldError{{Field: "/", Message: "not JSON: " + err.Error()}}, nil
	}
	err = s.Validate(v)
	if err == nil {
		return nil, nil
	}
	var ve *schemav5.ValidationError
	if !errors.As(err, &ve) {
		return nil, fmt.Errorf("error validating config of %s: %w", m.Key, err)
	}
	var out []ConfigFieldError
	for _, u := range ve.BasicOutput().Errors {
		if u.Error == "" || strings.HasPrefix(u.Error, "doesn't validate with") {
			continue
		}
		field := u.InstanceLocation
		if field == "" {
			field = "/"
		}
		out = append(out, ConfigFieldError{Field: field, Message: u.Error})
	}
	if len(out) == 0 {
		out = append(out, ConfigFieldError{Field: "/", Message: ve.Error()})
	}
	return out, nil
}
