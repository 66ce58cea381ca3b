package environments

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/keelhq/keel/sdk"
)

// DriverInfo is one driver in GET /api/companies/{companyId}/environments/capabilities.
type DriverInfo struct {
	Driver      string `json:"driver"`
	DisplayName string `json:"displayName"`
	Description string `json:"description,omitempty"`
	// Source is builtin (the local driver) or plugin.
	Source string `json:"source"`
	// PluginKey is the extension that declares a plugin driver.
	PluginKey string `json:"pluginKey,omitempty"`
	// ConfigSchema is the JSON Schema of an environment's config on the driver.
	ConfigSchema json.RawMessage `json:"configSchema,omitempty"`
	// Operations are the contract methods every driver answers.
	Operations []string `json:"operations"`
}

// operations are the driver contract's methods, as the capabilities list names them.
var operations = []string{"validateConfig", "probe", "acquireLease", "resumeLease", "releaseLease", "destroyLease",
	"realizeWorkspace", "execute"}

// Capabilities is the answer of GET /api/companies/{companyId}/environments/capabilities.
type Capabilities struct {
	Drivers []DriverInfo `json:"drivers"`
	// DeviceLogin says that adapter device logins run in environments.
	DeviceLogin bool `json:"deviceLogin"`
}

// drivers lists the built-in driver and the ones loaded plugins declare.
func (x *Environments) drivers(ctx context.Context, companyID string) ([]DriverInfo, error) {
	out := []DriverInfo{{Driver: localDriverKey, DisplayName: "Local", Source: "builtin",
		Description:  "Runs on this host: leases are directories, commands are processes.",
		ConfigSchema: json.RawMessage(localConfigSchema), Operations: operations}}
	var list sdk.EnvironmentDriverList
	if err := x.host.Call(ctx, sdk.EnvironmentDriversMethod, sdk.SystemActor(), companyID, struct{}{}, &list); err != nil {
		return nil, fmt.Errorf("error listing environment drivers: %w", err)
	}
	for _, d := range list.Drivers {
		name := d.DisplayName
		if name == "" {
			name = d.Driver
		}
		out = append(out, DriverInfo{Driver: d.Driver, DisplayName: name, Description: d.Description, Source: "plugin",
			PluginKey: d.Extension, ConfigSchema: d.ConfigSchema, Operations: operations})
	}
	return out, nil
}

// driverFor returns the driver info of a key, or a 422 naming the known drivers.
func (x *Environments) driverFor(ctx context.Context, companyID, key string) (*DriverInfo, error) {
	list, err := x.drivers(ctx, companyID)
	if err != nil {
		return nil, err
	}
	known := make([]string, 0, len(list))
	for i := range list {
		if list[i].Driver == key {
			return &list[i], nil
		}
		known = append(known, list[i].Driver)
	}
	return nil, sdk.Unprocessable(fmt.Sprintf("Unknown environment driver: %s (known drivers: %s)", key, strings.Join(known, ", ")))
}

// callDriver sends one contract method to the driver: in process for the local driver,
// through the host's relay for a plugin's. out may be nil.
func (x *Environments) callDriver(ctx context.Context, companyID, driver, method string, in any, out any) error {
	if driver == localDriverKey {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("error encoding %s input: %w", method, err)
		}
		res, err := sdk.CallEnvironmentDriver(ctx, x.local, method, b)
		if err != nil || out == nil {
			return err
		}
		rb, err := json.Marshal(res)
		if err != nil {
			return fmt.Errorf("error encoding %s result: %w", method, err)
		}
		return json.Unmarshal(rb, out)
	}
	b, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("error encoding %s input: %w", method, err)
	}
	err = x.host.Call(ctx, sdk.EnvironmentDriverCallMethod, sdk.SystemActor(), companyID,
		sdk.EnvironmentDriverCall{Driver: driver, Method: method, Input: b}, out)
	if sdk.IsMethodNotProvided(err) {
		return sdk.NewError(http.StatusServiceUnavailable, fmt.Sprintf("Environment driver %s is not available", driver))
	}
	return err
}

// execute runs a command in a lease. The local driver streams lines to req.OnOutput as
// they come; a plugin driver's output is replayed to it when the command ends.
func (x *Environments) execute(ctx context.Context, companyID, driver string, req *sdk.EnvExecRequest) (*sdk.EnvExecResult, error) {
	if driver == localDriverKey {
		return x.local.Execute(ctx, req)
	}
	var res sdk.EnvExecResult
	if err := x.callDriver(ctx, companyID, driver, sdk.EnvExecuteMethod, req, &res); err != nil {
		return nil, err
	}
	if req.OnOutput != nil {
		for _, l := range strings.Split(strings.TrimRight(res.Stdout, "\n"), "\n") {
			req.OnOutput("stdout", l)
		}
		for _, l := range strings.Split(strings.TrimRight(res.Stderr, "\n"), "\n") {
			req.OnOutput("stderr", l)
		}
	}
	return &res, nil
}

// validateConfig checks a config against the driver's schema, then asks the driver, and
// returns the config to store (the driver's normalized one when it gives one).
func (x *Environments) validateConfig(ctx context.Context, companyID string, d *DriverInfo, envID string, config json.RawMessage) (json.RawMessage, error) {
	if len(config) == 0 || string(config) == "null" {
		config = json.RawMessage(`{}`)
	}
	var obj map[string]any
	if err := json.Unmarshal(config, &obj); err != nil || obj == nil {
		return nil, sdk.ValidationError(sdk.ValidationDetail{Path: "config", Message: "must be an object"})
	}
	if len(d.ConfigSchema) > 0 {
		s, err := sdk.CompileSchema("environments/"+d.Driver, d.ConfigSchema)
		if err == nil {
			if err := s.Validate(obj); err != nil {
				return nil, sdk.Unprocessable(fmt.Sprintf("Invalid %s environment config: %s", d.Driver, schemaMessage(err)))
			}
		}
	}
	var res sdk.EnvValidateResult
	if err := x.callDriver(ctx, companyID, d.Driver, sdk.EnvValidateConfigMethod,
		&sdk.EnvironmentRef{Driver: d.Driver, EnvironmentID: envID, CompanyID: companyID, Config: config}, &res); err != nil {
		return nil, err
	}
	if !res.OK {
		msg := strings.Join(res.Errors, "; ")
		if msg == "" {
			msg = "rejected by the driver"
		}
		return nil, sdk.Unprocessable(fmt.Sprintf("Invalid %s environment config: %s", d.Driver, msg))
	}
	if len(res.NormalizedConfig) > 0 && string(res.NormalizedConfig) != "null" {
		return res.NormalizedConfig, nil
	}
	return config, nil
}

// schemaMessage is the first line of a schema validation error.
func schemaMessage(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, "\n"); i >= 0 {
		rest := strings.TrimSpace(msg[i+1:])
		if rest != "" {
			return rest
		}
	}
	return msg
}
