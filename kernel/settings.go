package kernel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/invopop/jsonschema"
	"github.com/jackc/pgx/v5"
)

// Instance settings sections exposed by the API. Other rows of kernel.instance_settings
// (the agent JWT secret, for one) are never exposed.
const (
	SettingsGeneral      = "general"
	SettingsExperimental = "experimental"
)

type settingKind int

const (
	settingBool settingKind = iota
	settingNullableString
	settingEnum
)

// settingDef is one known key of a settings section, in display order.
type settingDef struct {
	key  string
	kind settingKind
	def  any
	enum []string
}

// experimentalSettings are the experimental flags. Cases, status cards and built-in agents
// are experimental and off by default (spec).
var experimentalSettings = []settingDef{
	{key: "enableEnvironments", def: false},
	{key: "enableNativeRunner", def: true},
	{key: "enableManagedSandboxOnly", def: false},
	{key: "enableIsolatedWorkspaces", def: false},
	{key: "enableIsolatedWorkspacesByDefault", def: false},
	{key: "enableStreamlinedLeftNavigation", def: true},
	{key: "enableStreamlinedUi", def: true},
	{key: "enableApps", def: true},
	{key: "enableChatConnectors", def: false},
	{key: "enablePipelines", def: false},
	{key: "enableCases", def: false},
	{key: "enableAgentChat", def: false},
	{key: "enableConferenceRoomChat", def: false},
	{key: "enableClassicTaskInterface", def: false},
	{key: "enableIssuePlanDecompositions", def: false},
	{key: "enableExperimentalFileViewer", def: false},
	{key: "enableExternalObjects", def: false},
	{key: "enableSmokeLab", def: false},
	{key: "enableBuiltInAgents", def: false},
	{key: "enableBetaSkills", def: false},
	{key: "enableSummaries", def: false},
	{key: "enableStatusCards", def: false},
	{key: "enableDecisions", def: false},
	{key: "enableGoalsSidebarLink", def: false},
	{key: "enableServerInfoDebugView", def: false},
	{key: "enableServiceDeveloperMode", def: false},
	{key: "enableSimplifiedEnglishInteractions", def: false},
	{key: "enableFirstTaskPlanProposal", def: false},
	{key: "autoRestartDevServerWhenIdle", def: false},
	{key: "enableWorkspaceBranchReconcileForward", def: true},
	{key: "enableWorkspaceDirtyQuarantineRepair", def: true},
	{key: "enableOwnerInstanceAdmin", def: false},
	{key: "enableSandboxDuplexBridge", def: false},
	{key: "enableRunnerPreviewIngress", def: false},
	{key: "enableWorktreeRunExecution", def: false},
	{key: "worktreeRunExecutionActivatedAt", kind: settingNullableString},
	{key: "worktreeRunExecutionActivationInstanceId", kind: settingNullableString},
}

// generalSettings are the general instance settings.
var generalSettings = []settingDef{
	{key: "censorUsernameInLogs", def: false},
	{key: "keyboardShortcuts", def: true},
	{key: "feedbackDataSharingPreference", kind: settingEnum, def: "prompt", enum: []string{"allowed", "not_allowed", "prompt"}},
}

func settingsDefs(section string) ([]settingDef, bool) {
	switch section {
	case SettingsGeneral:
		return generalSettings, true
	case SettingsExperimental:
		return experimentalSettings, true
	}
	return nil, false
}

// check decodes a raw value for the key, or says what was expected.
func (d settingDef) check(raw json.RawMessage) (any, string) {
	raw = bytes.TrimSpace(raw)
	switch d.kind {
	case settingBool:
		var b bool
		if bytes.Equal(raw, []byte("null")) || json.Unmarshal(raw, &b) != nil {
			return nil, "expected boolean"
		}
		return b, ""
	case settingNullableString:
		if bytes.Equal(raw, []byte("null")) {
			return nil, ""
		}
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil, "expected string or null"
		}
		return s, ""
	case settingEnum:
		var s string
		if json.Unmarshal(raw, &s) != nil || !slices.Contains(d.enum, s) {
			return nil, fmt.Sprintf("expected one of %q", d.enum)
		}
		return s, ""
	}
	return nil, "unsupported setting"
}

func (d settingDef) schema() *jsonschema.Schema {
	switch d.kind {
	case settingBool:
		return &jsonschema.Schema{Type: "boolean"}
	case settingNullableString:
		return &jsonschema.Schema{AnyOf: []*jsonschema.Schema{{Type: "string"}, {Type: "null"}}}
	default:
		enum := make([]any, len(d.enum))
		for i, v := range d.enum {
			enum[i] = v
		}
		return &jsonschema.Schema{Type: "string", Enum: enum}
	}
}

// settingsValues is one section rendered: every known key, stored value or default.
type settingsValues struct {
	json   json.RawMessage
	values map[string]any
}

// renderSettings merges stored overrides over the defaults, in definition order; a stored
// value of the wrong type (from an older version) falls back to the default.
func renderSettings(defs []settingDef, stored map[string]json.RawMessage) (*settingsValues, error) {
	out := &settingsValues{values: make(map[string]any, len(defs))}
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, d := range defs {
		v := d.def
		if raw, ok := stored[d.key]; ok {
			if got, msg := d.check(raw); msg == "" {
				v = got
			}
		}
		out.values[d.key] = v
		if i > 0 {
			buf.WriteByte(',')
		}
		kb, _ := json.Marshal(d.key)
		vb, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("error encoding setting %s: %w", d.key, err)
		}
		buf.Write(kb)
		buf.WriteByte(':')
		buf.Write(vb)
	}
	buf.WriteByte('}')
	out.json = buf.Bytes()
	return out, nil
}

// settingsCacheTTL bounds how stale another node's settings change can be here; a PATCH
// on this node replaces the entry at once.
const settingsCacheTTL = time.Second

type settingsCacheEntry struct {
	v  *settingsValues
	at time.Time
}

// settingsCache holds rendered sections by instance id and section.
var settingsCache sync.Map

func (k *Kernel) settingsCacheKey(section string) string { return k.instanceID + "\x00" + section }

func (k *Kernel) settingsLoad(ctx context.Context, section string) (*settingsValues, error) {
	defs, ok := settingsDefs(section)
	if !ok {
		return nil, fmt.Errorf("error reading settings: unknown section %q", section)
	}
	key := k.settingsCacheKey(section)
	if e, ok := settingsCache.Load(key); ok {
		if ce := e.(*settingsCacheEntry); time.Since(ce.at) < settingsCacheTTL {
			return ce.v, nil
		}
	}
	var raw []byte
	err := k.Pool.QueryRow(ctx, `SELECT value FROM kernel.instance_settings WHERE section = $1`, section).Scan(&raw)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("error reading %s settings: %w", section, err)
	}
	v, err := k.settingsStore(section, defs, raw)
	if err != nil {
		return nil, err
	}
	return v, nil
}

func (k *Kernel) settingsStore(section string, defs []settingDef, raw []byte) (*settingsValues, error) {
	stored := map[string]json.RawMessage{}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &stored); err != nil {
			return nil, fmt.Errorf("error decoding %s settings: %w", section, err)
		}
	}
	v, err := renderSettings(defs, stored)
	if err != nil {
		return nil, err
	}
	settingsCache.Store(k.settingsCacheKey(section), &settingsCacheEntry{v: v, at: time.Now()})
	return v, nil
}

// SettingsGet returns a settings section ("general" or "experimental") with every known key.
func (k *Kernel) SettingsGet(ctx context.Context, section string) (json.RawMessage, error) {
	v, err := k.settingsLoad(ctx, section)
	if err != nil {
		return nil, err
	}
	return append(json.RawMessage(nil), v.json...), nil
}

// ExperimentalFlag returns one boolean experimental flag, such as enableCases.
func (k *Kernel) ExperimentalFlag(ctx context.Context, name string) (bool, error) {
	v, err := k.settingsLoad(ctx, SettingsExperimental)
	if err != nil {
		return false, err
	}
	raw, ok := v.values[name]
	if !ok {
		return false, fmt.Errorf("unknown experimental flag %q", name)
	}
	b, ok := raw.(bool)
	if !ok {
		return false, fmt.Errorf("experimental setting %q is not a boolean flag", name)
	}
	return b, nil
}

// SettingsUpdate validates a partial update of a section (known keys, right types) and
// merges it atomically into the stored values; it returns the whole section.
func (k *Kernel) SettingsUpdate(ctx context.Context, section string, patch map[string]json.RawMessage) (json.RawMessage, error) {
	defs, ok := settingsDefs(section)
	if !ok {
		return nil, fmt.Errorf("error updating settings: unknown section %q", section)
	}
	if err := validateSettingsPatch(defs, patch); err != nil {
		return nil, err
	}
	clean := make(map[string]any, len(patch))
	for _, d := range defs {
		if raw, ok := patch[d.key]; ok {
			clean[d.key], _ = d.check(raw)
		}
	}
	b, err := json.Marshal(clean)
	if err != nil {
		return nil, fmt.Errorf("error encoding %s settings: %w", section, err)
	}
	var merged []byte
	err = k.Pool.QueryRow(ctx, `INSERT INTO kernel.instance_settings (section, value) VALUES ($1, $2::jsonb)
		ON CONFLICT (section) DO UPDATE SET value = kernel.instance_settings.value || EXCLUDED.value, updated_at = now()
		RETURNING value`, section, string(b)).Scan(&merged)
	if err != nil {
		return nil, fmt.Errorf("error updating %s settings: %w", section, err)
	}
	v, err := k.settingsStore(section, defs, merged)
	if err != nil {
		return nil, err
	}
	k.notifySettingsChanged(section)
	return append(json.RawMessage(nil), v.json...), nil
}

// OnSettingsChanged registers fn to be called (in its own goroutine) after a settings
// section changes on this node, or on another node (SettingsChangedElsewhere, at once when
// the host listens for registry notices).
func (k *Kernel) OnSettingsChanged(fn func(section string)) {
	k.settingsMu.Lock()
	defer k.settingsMu.Unlock()
	k.settingsListeners = append(k.settingsListeners, fn)
}

// SettingsChangedElsewhere tells this node that another node changed a settings section:
// the cached copy is dropped and the OnSettingsChanged listeners run.
func (k *Kernel) SettingsChangedElsewhere(section string) {
	settingsCache.Delete(k.settingsCacheKey(section))
	k.notifySettingsChanged(section)
}

func (k *Kernel) notifySettingsChanged(section string) {
	k.settingsMu.Lock()
	listeners := append([]func(string){}, k.settingsListeners...)
	k.settingsMu.Unlock()
	for _, fn := range listeners {
		go fn(section)
	}
}

func validateSettingsPatch(defs []settingDef, patch map[string]json.RawMessage) error {
	var d detailList
	keys := make([]string, 0, len(patch))
	for key := range patch {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	for _, key := range keys {
		i := slices.IndexFunc(defs, func(s settingDef) bool { return s.key == key })
		if i < 0 {
			d.add(key, "unknown field")
			continue
		}
		if _, msg := defs[i].check(patch[key]); msg != "" {
			d.add(key, msg)
		}
	}
	return d.err()
}

// settingsPatch is a PATCH body for one section: a JSON object of known keys.
type settingsPatch struct {
	values map[string]json.RawMessage
}

func (p *settingsPatch) bind(c *fiber.Ctx) error {
	body := bytes.TrimSpace(c.Body())
	if len(body) == 0 {
		body = []byte("{}")
	}
	if err := json.Unmarshal(body, &p.values); err != nil || p.values == nil {
		return ValidationError(ValidationDetail{Path: "", Message: "expected a JSON object"})
	}
	return nil
}

func settingsSchema(defs []settingDef) *jsonschema.Schema {
	props := jsonschema.NewProperties()
	for _, d := range defs {
		props.Set(d.key, d.schema())
	}
	return &jsonschema.Schema{Type: "object", Properties: props, AdditionalProperties: jsonschema.FalseSchema}
}

type generalSettingsPatch struct{ settingsPatch }

// Bind decodes the body as a JSON object.
func (p *generalSettingsPatch) Bind(c *fiber.Ctx, _ *RequestContext) error { return p.bind(c) }

// JSONSchema documents the known general settings.
func (generalSettingsPatch) JSONSchema() *jsonschema.Schema { return settingsSchema(generalSettings) }

type experimentalSettingsPatch struct{ settingsPatch }

// Bind decodes the body as a JSON object.
func (p *experimentalSettingsPatch) Bind(c *fiber.Ctx, _ *RequestContext) error { return p.bind(c) }

// JSONSchema documents the known experimental flags.
func (experimentalSettingsPatch) JSONSchema() *jsonschema.Schema {
	return settingsSchema(experimentalSettings)
}

// settingsBody is a section written as stored JSON.
type settingsBody json.RawMessage

// WriteResponse writes the section.
func (b *settingsBody) WriteResponse(c *fiber.Ctx, status int) error {
	c.Status(status)
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSONCharsetUTF8)
	return c.Send(*b)
}

// JSONSchema documents the body as an object.
func (settingsBody) JSONSchema() *jsonschema.Schema { return &jsonschema.Schema{Type: "object"} }

type settingsGetEndpoint struct {
	k       *Kernel
	section string
}

func (e *settingsGetEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "GET /api/instance/settings/" + e.section, Access: AccessBoard,
		Summary: "Read the " + e.section + " instance settings"}
}

func (e *settingsGetEndpoint) Execute(ctx context.Context, _ *struct{}) (*settingsBody, error) {
	b, err := e.k.SettingsGet(ctx, e.section)
	if err != nil {
		return nil, Internal(err)
	}
	body := settingsBody(b)
	return &body, nil
}

func (k *Kernel) settingsPatchExecute(ctx context.Context, section string, patch map[string]json.RawMessage) (*settingsBody, error) {
	b, err := k.SettingsUpdate(ctx, section, patch)
	if err != nil {
		var apiErr *APIError
		if errors.As(err, &apiErr) {
			return nil, apiErr
		}
		return nil, Internal(err)
	}
	if len(patch) > 0 {
		changes := make(map[string]json.RawMessage, len(patch))
		for key, v := range patch {
			changes[key] = v
		}
		if err := k.appendActorActivity(ctx, "", "instance.settings_updated", "instance_settings", section,
			map[string]any{"section": section, "changes": changes}); err != nil {
			return nil, err
		}
	}
	body := settingsBody(b)
	return &body, nil
}

type generalSettingsPatchEndpoint struct{ k *Kernel }

func (e *generalSettingsPatchEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "PATCH /api/instance/settings/general", Access: AccessInstanceAdmin,
		Summary: "Update general instance settings (known keys only)"}
}

func (e *generalSettingsPatchEndpoint) Execute(ctx context.Context, req *generalSettingsPatch) (*settingsBody, error) {
	return e.k.settingsPatchExecute(ctx, SettingsGeneral, req.values)
}

type experimentalSettingsPatchEndpoint struct{ k *Kernel }

func (e *experimentalSettingsPatchEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "PATCH /api/instance/settings/experimental", Access: AccessInstanceAdmin,
		Summary: "Update experimental flags (known keys only)"}
}

func (e *experimentalSettingsPatchEndpoint) Execute(ctx context.Context, req *experimentalSettingsPatch) (*settingsBody, error) {
	return e.k.settingsPatchExecute(ctx, SettingsExperimental, req.values)
}

func (k *Kernel) settingsRoutes() []*Route {
	return []*Route{
		Mount[struct{}, settingsBody](&settingsGetEndpoint{k, SettingsGeneral}),
		Mount[generalSettingsPatch, settingsBody](&generalSettingsPatchEndpoint{k}),
		Mount[struct{}, settingsBody](&settingsGetEndpoint{k, SettingsExperimental}),
		Mount[experimentalSettingsPatch, settingsBody](&experimentalSettingsPatchEndpoint{k}),
	}
}
