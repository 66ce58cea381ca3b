package agents

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	schemav5 "github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/adapter"
)

// knownAdapterTypes are the spec's adapter types (spec part 1, "Agent"). Any other type must
// be provided by an installed adapter extension ("externally registered adapter types are
// also allowed").
var knownAdapterTypes = adapter.SpecTypes

// gatewayDeviceAdapterType is the adapter type that signs its connection with an Ed25519
// device key (REFERENCE-adapters.md 7).
const gatewayDeviceAdapterType = "theta_gateway"

// checkAdapterType refuses an adapter type the host's adapter registry does not know: 422
// "Unknown adapter type: <type>" (the reference product's text) followed by the known
// types. The registry knows the spec's types and every loaded adapter's.
func (a *Agents) checkAdapterType(ctx context.Context, companyID, adapterType string) error {
	if slices.Contains(knownAdapterTypes, adapterType) {
		return nil
	}
	var list adapter.TypeList
	if err := a.host.Call(ctx, adapter.ListMethod, sdk.SystemActor(), companyID, struct{}{}, &list); err != nil {
		return fmt.Errorf("error listing adapter types: %w", err)
	}
	if slices.Contains(list.Types, adapterType) {
		return nil
	}
	return unprocessable(fmt.Sprintf("Unknown adapter type: %s (known types: %s)", adapterType, strings.Join(list.Types, ", ")))
}

// resolveAdapter returns the extension key that serves a new run of an adapter type now
// (the override unless it is paused, else the built-in). A type nothing serves resolves
// to its conventional key, whose calls then fail as not provided.
func (a *Agents) resolveAdapter(ctx context.Context, companyID, adapterType string) (string, error) {
	var res adapter.Resolution
	err := a.host.Call(ctx, adapter.ResolveMethod, sdk.SystemActor(), companyID, adapter.ResolveRequest{Type: adapterType}, &res)
	switch {
	case err == nil && res.Key != "":
		return res.Key, nil
	case err == nil || sdk.IsMethodNotProvided(err):
		return adapter.ExtensionKey(adapterType), nil
	default:
		return "", fmt.Errorf("error resolving adapter %s: %w", adapterType, err)
	}
}

// remoteRunAdapterType is the adapter type whose apiKey (the remote run server's key) is
// kept as a secret reference (spec part 2, "Remote-run gateway adapter config").
const remoteRunAdapterType = "zeta_gateway"

// ensureConfigSecrets keeps an adapterConfig's credentials as company secrets: a
// theta_gateway agent's device key (ensureDeviceKey) and a zeta_gateway agent's apiKey
// (ensureAPIKeySecret).
func (a *Agents) ensureConfigSecrets(ctx context.Context, companyID, agentName string, cfg *configRow) error {
	if err := a.ensureDeviceKey(ctx, companyID, agentName, cfg); err != nil {
		return err
	}
	return a.ensureAPIKeySecret(ctx, companyID, agentName, cfg)
}

// ensureAPIKeySecret moves a zeta_gateway agent's plaintext apiKey (or its alias token,
// as a string or a {type:"plain", value} binding) into a company secret and keeps only a
// secret reference ({type:"secret_ref", secretId, version:"latest"}) in adapterConfig, so
// reads never show the key. Other adapter types and references are left alone.
func (a *Agents) ensureAPIKeySecret(ctx context.Context, companyID, agentName string, cfg *configRow) error {
	if cfg.AdapterType != remoteRunAdapterType || len(cfg.AdapterConfig) == 0 || string(cfg.AdapterConfig) == "null" {
		return nil
	}
	conf := map[string]json.RawMessage{}
	if err := json.Unmarshal(cfg.AdapterConfig, &conf); err != nil {
		return invalid("adapterConfig", "must be an object")
	}
	changed := false
	for _, field := range []string{"apiKey", "token"} {
		raw, ok := conf[field]
		if !ok {
			continue
		}
		var value string
		if json.Unmarshal(raw, &value) != nil {
			var plain struct {
				Type  string `json:"type"`
				Value string `json:"value"`
			}
			if json.Unmarshal(raw, &plain) != nil || plain.Type != "plain" {
				continue
			}
			value = plain.Value
		}
		if value == "" {
			continue
		}
		var sec struct {
			SecretID string `json:"secretId"`
		}
		desc := "Remote run server key of gateway agent " + agentName
		if err := a.host.Call(ctx, "secrets.createManaged", sdk.ActorFrom(ctx), companyID, map[string]any{
			"companyId": companyID, "name": "Remote run key " + agentName, "description": desc, "value": value,
		}, &sec); err != nil {
			if sdk.IsMethodNotProvided(err) {
				return unprocessable("zeta_gateway agents need the secrets extension to keep their apiKey")
			}
			return fmt.Errorf("error storing apiKey of agent %s: %w", agentName, err)
		}
		conf[field] = mustJSON(map[string]any{"type": "secret_ref", "secretId": sec.SecretID, "version": "latest"})
		changed = true
	}
	if changed {
		cfg.AdapterConfig = mustJSON(conf)
	}
	return nil
}

// ensureDeviceKey gives a theta_gateway agent its device private key, as the reference
// product does, unless adapterConfig.disableDeviceAuth is true: a missing
// devicePrivateKeyPem is generated (Ed25519, PKCS#8 PEM), and a plaintext one is moved into
// a company secret. Either way adapterConfig keeps only a secret reference
// ({type:"secret_ref", secretId, version:"latest"}), so reads never show the key. Other
// adapter types and configs that already hold a reference are left alone.
func (a *Agents) ensureDeviceKey(ctx context.Context, companyID, agentName string, cfg *configRow) error {
	conf, value, need, err := deviceKeyPlan(cfg)
	if err != nil || !need {
		return err
	}
	if value == "" {
		pemKey, err := newDevicePrivateKeyPEM()
		if err != nil {
			return err
		}
		value = pemKey
	}
	var sec struct {
		SecretID string `json:"secretId"`
	}
	desc := "Ed25519 device private key of gateway agent " + agentName
	if err := a.host.Call(ctx, "secrets.createManaged", sdk.ActorFrom(ctx), companyID, map[string]any{
		"companyId": companyID, "name": "Gateway device key " + agentName, "description": desc, "value": value,
	}, &sec); err != nil {
		if sdk.IsMethodNotProvided(err) {
			return unprocessable("theta_gateway agents need the secrets extension to keep their device key (or set disableDeviceAuth)")
		}
		return fmt.Errorf("error storing device key of agent %s: %w", agentName, err)
	}
	conf["devicePrivateKeyPem"] = mustJSON(map[string]any{"type": "secret_ref", "secretId": sec.SecretID, "version": "latest"})
	cfg.AdapterConfig = mustJSON(conf)
	return nil
}

// deviceKeyPlan reads what ensureDeviceKey must do with cfg: need is false for other
// adapter types, disabled device auth and a key already kept as a secret_ref; value is the
// caller's plaintext PEM, or "" to generate one. A devicePrivateKeyPem that is neither is a
// 400 (never quoting the value).
func deviceKeyPlan(cfg *configRow) (conf map[string]json.RawMessage, value string, need bool, err error) {
	if cfg.AdapterType != gatewayDeviceAdapterType {
		return nil, "", false, nil
	}
	conf = map[string]json.RawMessage{}
	if len(cfg.AdapterConfig) > 0 && string(cfg.AdapterConfig) != "null" {
		if err := json.Unmarshal(cfg.AdapterConfig, &conf); err != nil {
			return nil, "", false, invalid("adapterConfig", "must be an object")
		}
	}
	var disabled bool
	if raw, ok := conf["disableDeviceAuth"]; ok && json.Unmarshal(raw, &disabled) == nil && disabled {
		return nil, "", false, nil
	}
	if raw, ok := conf["devicePrivateKeyPem"]; ok && string(raw) != "null" {
		var ref struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(raw, &ref) == nil && ref.Type == "secret_ref" {
			return nil, "", false, nil
		}
		if json.Unmarshal(raw, &value) != nil || !strings.Contains(value, "PRIVATE KEY") {
			return nil, "", false, invalid("adapterConfig.devicePrivateKeyPem", "must be a PEM private key or a secret_ref")
		}
	}
	return conf, value, true, nil
}

// newDevicePrivateKeyPEM generates an Ed25519 private key as a PKCS#8 PEM block.
func newDevicePrivateKeyPEM() (string, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", fmt.Errorf("error generating device key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return "", fmt.Errorf("error encoding device key: %w", err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), nil
}

// configSchemas caches compiled adapterConfig schemas by their text.
var configSchemas sync.Map

// checkAdapterConfig validates an adapterConfig against the JSON Schema the adapter serving
// the type declares (its info), when one is loaded: a value of the wrong shape is a 400
// Validation error naming adapterConfig.<path>. Missing keys are allowed (an agent may
// exist with an incomplete config and be completed later), and so are keys the schema does
// not name. A type no loaded adapter serves is not checked. It returns the adapter's
// default config keys (info.defaultConfig), which a create fills in.
func (a *Agents) checkAdapterConfig(ctx context.Context, companyID, adapterType string, config json.RawMessage) (json.RawMessage, error) {
	key, err := a.resolveAdapter(ctx, companyID, adapterType)
	if err != nil {
		return nil, err
	}
	var info adapter.Info
	if err := a.host.Call(ctx, adapter.MethodOf(key, adapter.MethodInfo), sdk.SystemActor(), companyID, struct{}{}, &info); err != nil {
		if sdk.IsMethodNotProvided(err) {
			return nil, nil
		}
		a.log.Warn("error describing adapter; its config is not checked", "adapter", key, "error", err)
		return nil, nil
	}
	return info.DefaultConfig, a.validateAdapterConfig(key, adapterType, info.ConfigSchema, config)
}

// validateAdapterConfig checks config against an adapter's schema (checkAdapterConfig).
func (a *Agents) validateAdapterConfig(key, adapterType string, configSchema, config json.RawMessage) error {
	if len(configSchema) == 0 || string(configSchema) == "null" {
		return nil
	}
	var err error
	var schema *schemav5.Schema
	if s, ok := configSchemas.Load(string(configSchema)); ok {
		schema = s.(*schemav5.Schema)
	} else {
		if schema, err = sdk.CompileSchema(adapterType+"/adapterConfig", configSchema); err != nil {
			a.log.Warn("adapter config schema does not compile; its config is not checked", "adapter", key, "error", err)
			return nil
		}
		configSchemas.Store(string(configSchema), schema)
	}
	var v any = map[string]any{}
	if len(config) > 0 && string(config) != "null" {
		if err := json.Unmarshal(config, &v); err != nil {
			return invalid("adapterConfig", "must be an object")
		}
	}
	err = schema.Validate(v)
	var ve *schemav5.ValidationError
	if err == nil || !errors.As(err, &ve) {
		return nil
	}
	var details []sdk.ValidationDetail
	for _, u := range ve.BasicOutput().Errors {
		if u.Error == "" || strings.HasPrefix(u.Error, "doesn't validate with") || strings.HasPrefix(u.Error, "missing propert") {
			continue
		}
		path := "adapterConfig" + strings.ReplaceAll(u.InstanceLocation, "/", ".")
		details = append(details, sdk.ValidationDetail{Path: path, Message: u.Error})
	}
	if len(details) == 0 {
		return nil
	}
	return sdk.ValidationError(details...)
}
