// Package sdk is everything an extension author imports: the manifest and its published JSON
// Schema, Serve for process extensions, the HTTP adapter that turns manifest routes into an
// ordinary http.Handler with the caller in the context, and typed clients for the host
// services. Wasm guests use sdk/wasmguest; tests use github.com/keelhq/keel/sdktest.
package sdk

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Extension kinds.
const (
	KindFeature = "feature"
	KindAdapter = "adapter"
	KindPlugin  = "plugin"
)

// Runtime kinds.
const (
	RuntimeProcess = "process"
	RuntimeWasm    = "wasm"
)

// Capabilities name the host services an extension may use.
const (
	CapActivity   = "activity"
	CapAuthz      = "authz"
	CapPrincipals = "principals"
	CapCompanies  = "companies"
	CapCalls      = "calls"
	CapJobs       = "jobs"
	CapEvents     = "events"
	CapSecrets    = "secrets"
	CapSettings   = "settings"
	CapStorage    = "storage"
	CapDatabase   = "database"
	// CapManaged (managed.go) lets a plugin declare managed resources.
)

// AllCapabilities lists every capability a manifest may declare.
var AllCapabilities = []string{CapActivity, CapAuthz, CapPrincipals, CapCompanies, CapCalls, CapJobs, CapEvents, CapSecrets, CapSettings, CapStorage, CapDatabase, CapManaged, CapEnvironmentDrivers}

// Manifest declares an extension: what it is, how it runs, which host services it uses, the
// methods it provides and uses, its routes, jobs, event subscriptions, UI slots, the flag
// that gates it and its config schema. Decoding is strict: unknown fields are an error.
type Manifest struct {
	// Key is the extension's id: lowercase, dot-namespaced, underscores not spaces (example.notes).
	Key string `json:"key" jsonschema:"pattern=^[a-z][a-z0-9_]*(\\.[a-z][a-z0-9_]*)*$"`
	// Version is the extension's semantic version.
	Version string `json:"version" jsonschema:"pattern=^[0-9]+\\.[0-9]+\\.[0-9]+([-+].*)?$"`
	// Kind is feature, adapter or plugin.
	Kind string `json:"kind" jsonschema:"enum=feature,enum=adapter,enum=plugin"`
	// DisplayName is a human-readable name.
	DisplayName string `json:"displayName,omitempty"`
	// Description says what the extension does.
	Description string `json:"description,omitempty"`
	// Runtime says how the extension runs.
	Runtime Runtime `json:"runtime"`
	// Kernel is the range of kernel versions supported, such as ">=0.1 <1.0".
	Kernel string `json:"kernel,omitempty"`
	// Capabilities are the host services the extension may use.
	Capabilities []string `json:"capabilities,omitempty"`
	// Provides are the methods other extensions may call.
	Provides []Method `json:"provides,omitempty"`
	// Uses are the methods ("owner.method") this extension calls.
	Uses []string `json:"uses,omitempty"`
	// Routes are the HTTP routes served, at the spec's own paths.
	Routes []Route `json:"routes,omitempty"`
	// Jobs are background jobs, run on a cron schedule, an interval or on demand.
	Jobs []Job `json:"jobs,omitempty"`
	// Events are the event types the extension subscribes to ("issue.created", "activity.logged", "*").
	Events []string `json:"events,omitempty"`
	// UI lists UI contributions.
	UI *UI `json:"ui,omitempty"`
	// Tools are agent tools the extension executes (reserved call keel.tool.execute).
	Tools []Tool `json:"tools,omitempty"`
	// Webhooks are inbound webhook endpoints, served unauthenticated at
	// POST /api/plugins/{pluginId}/webhooks/{endpointKey} (reserved call keel.webhook).
	Webhooks []Webhook `json:"webhooks,omitempty"`
	// LocalFolders are host folders a company points the extension at, one path per company.
	LocalFolders []LocalFolder `json:"localFolders,omitempty"`
	// Managed are agents, projects, routines and skills keel creates and keeps for the
	// plugin in every company (needs the managed capability).
	Managed *Managed `json:"managed,omitempty"`
	// EnvironmentDrivers are execution backends the extension implements (the
	// EnvironmentDriver contract, reserved calls keel.environment.*); declaring one needs
	// the environment_drivers capability.
	EnvironmentDrivers []EnvironmentDriverDecl `json:"environmentDrivers,omitempty"`
	// Flag is the experimental instance setting that must be on for the extension to run.
	Flag string `json:"flag,omitempty"`
	// FlagOff is the answer of the extension's routes while its flag is off (default 404 "Not found").
	FlagOff *FlagOffResponse `json:"flagOff,omitempty"`
	// ConfigSchema is the JSON Schema of the extension's config.
	ConfigSchema json.RawMessage `json:"configSchema,omitempty"`
}

// FlagOffResponse is the error a flag-gated extension's routes answer while the flag is off.
type FlagOffResponse struct {
	// Status is the HTTP status, 400 to 599.
	Status int `json:"status" jsonschema:"minimum=400,maximum=599"`
	// Error is the error text.
	Error string `json:"error"`
	// Code is an optional machine-readable code.
	Code string `json:"code,omitempty"`
}

// Runtime says how an extension runs.
type Runtime struct {
	// Kind is process (go-plugin over gRPC) or wasm (wazero, inside the host).
	Kind string `json:"kind" jsonschema:"enum=process,enum=wasm"`
	// Executable is the file name of a process extension, beside the manifest. Empty for
	// first-party extensions, which run as `keel extension <key>`, and for packages that
	// list their executables per platform in artifacts.
	Executable string `json:"executable,omitempty"`
	// Module is the file name of a wasm module, beside the manifest.
	Module string `json:"module,omitempty"`
	// SHA256 is the hex digest the executable or module must match.
	SHA256 string `json:"sha256,omitempty" jsonschema:"pattern=^[0-9a-f]{64}$"`
	// Artifacts are a process extension's executables by platform ("linux-amd64", as
	// goos-goarch), each a path inside the package and its sha256; the host runs the one of
	// its own platform. `keel extension pack` writes the digests.
	Artifacts map[string]Artifact `json:"artifacts,omitempty"`
	// Limits bound a wasm module.
	Limits *Limits `json:"limits,omitempty"`
	// Lazy starts a process extension on first use and stops it when idle (adapters are lazy
	// unless this says false).
	Lazy *bool `json:"lazy,omitempty"`
	// IdleStopAfter is how long a lazy extension may sit unused before it is stopped (default 10m).
	IdleStopAfter string `json:"idleStopAfter,omitempty"`
}

// Artifact is one platform's executable in a package.
type Artifact struct {
	// Path is the executable's path inside the package, such as bin/linux-amd64/notes.
	Path string `json:"path" jsonschema:"minLength=1"`
	// SHA256 is the hex digest the executable must match.
	SHA256 string `json:"sha256,omitempty" jsonschema:"pattern=^[0-9a-f]{64}$"`
}

// Platform returns the artifact key of a platform ("linux-amd64").
func Platform(goos, goarch string) string { return goos + "-" + goarch }

// ExecutableFor returns the path (relative to the package) and expected sha256 of the
// executable a process extension runs on a platform: its artifact for that platform, else
// its single executable. ok is false when it has neither.
func (r *Runtime) ExecutableFor(platform string) (path, sha256 string, ok bool) {
	if a, found := r.Artifacts[platform]; found {
		return a.Path, a.SHA256, true
	}
	if r.Executable != "" {
		return r.Executable, r.SHA256, true
	}
	return "", "", false
}

// IsLazy reports whether the extension starts on first use.
func (m *Manifest) IsLazy() bool {
	if m.Runtime.Kind != RuntimeProcess {
		return false
	}
	if m.Runtime.Lazy != nil {
		return *m.Runtime.Lazy
	}
	return m.Kind == KindAdapter
}

// Limits bound one wasm call.
type Limits struct {
	// MemoryMB caps the module's linear memory (default 128).
	MemoryMB int `json:"memoryMB,omitempty" jsonschema:"minimum=1,maximum=4096"`
	// TimeoutMS caps one call's wall time (default 5000).
	TimeoutMS int `json:"timeoutMs,omitempty" jsonschema:"minimum=1,maximum=900000"`
	// Instances caps the pool of warm instances (default 4).
	Instances int `json:"instances,omitempty" jsonschema:"minimum=1,maximum=64"`
}

// Method is one method an extension provides.
type Method struct {
	// Name is the method name, unique within the extension.
	Name string `json:"name" jsonschema:"pattern=^[a-z][A-Za-z0-9_.]*$"`
	// Description says what the method does.
	Description string `json:"description,omitempty"`
	// Requires are capabilities a caller must declare in its own manifest to call the
	// method ("secrets" for a method that hands out secret values): a method is reached
	// through Calls, and a capability gate on the host service alone would be bypassed.
	Requires []string `json:"requires,omitempty"`
	// ReadOnly declares that the method changes nothing: the host keeps the company's
	// cached reads (see Route.Cache) after a call, where it forgets them after any other
	// call, since a method may write. A method that writes must not set it, or cached
	// reads stay stale for up to the cache's lifetime.
	ReadOnly bool `json:"readOnly,omitempty"`
}

// Route access policies.
const (
	AccessPublic        = "public"
	AccessBoard         = "board"
	AccessAgent         = "agent"
	AccessEither        = "either"
	AccessInstanceAdmin = "instance_admin"
)

// Route is one HTTP route served by the extension.
type Route struct {
	// Method is GET, POST, PUT, PATCH or DELETE.
	Method string `json:"method" jsonschema:"enum=GET,enum=POST,enum=PUT,enum=PATCH,enum=DELETE"`
	// Path is the full path with {name} parameters, such as /api/companies/{companyId}/notes.
	Path string `json:"path" jsonschema:"pattern=^/api/"`
	// Access says who may call: public, board, agent, either or instance_admin.
	Access string `json:"access" jsonschema:"enum=public,enum=board,enum=agent,enum=either,enum=instance_admin"`
	// Permission is a permission key the caller must hold in the route's company.
	Permission string `json:"permission,omitempty"`
	// Company says how the route's company is resolved for scoping.
	Company *CompanyResolution `json:"company,omitempty"`
	// Summary documents the route in /api/openapi.json.
	Summary string `json:"summary,omitempty"`
	// RequestSchema is the JSON Schema of the request body, for /api/openapi.json.
	RequestSchema json.RawMessage `json:"requestSchema,omitempty"`
	// Status is the success status the route answers (default 200), for /api/openapi.json.
	Status int `json:"status,omitempty" jsonschema:"minimum=200,maximum=299"`
	// ResponseSchema is the JSON Schema of the success answer's body, for /api/openapi.json.
	// Named types may live under $defs, referenced as #/$defs/Name.
	ResponseSchema json.RawMessage `json:"responseSchema,omitempty"`
	// Query documents the query parameters the route reads.
	Query []QueryParam `json:"query,omitempty"`
	// Errors lists error statuses the route can answer beyond those its access, path
	// parameters and body imply (such as 409 for a conflict), for /api/openapi.json.
	Errors []int `json:"errors,omitempty"`
	// TimeoutSec raises the host's bound on one request of this route (default the host's
	// request timeout, 60 s), for routes that do long work such as company imports.
	TimeoutSec int `json:"timeoutSec,omitempty" jsonschema:"minimum=1,maximum=3600"`
	// Cache lets the host keep this GET route's 200 answers per company, path, query and
	// actor, and answer repeats itself (with an ETag) until a write invalidates the company.
	// Only for a route whose company the kernel resolves, whose answer depends on nothing
	// else, and whose data changes only in requests, calls, jobs and events the host
	// delivers (never in the extension's own background work).
	Cache bool `json:"cache,omitempty"`
}

// QueryParam is one query parameter of a route.
type QueryParam struct {
	// Name is the parameter's name.
	Name string `json:"name"`
	// Description says what the parameter does.
	Description string `json:"description,omitempty"`
	// Required is true when the route refuses a request without it.
	Required bool `json:"required,omitempty"`
	// Schema is the JSON Schema of the parameter's value.
	Schema json.RawMessage `json:"schema,omitempty"`
}

// CompanyResolution says where a route's company id is found.
type CompanyResolution struct {
	// From is path, query, body or actor (the agent's own company; a query key for boards).
	From string `json:"from" jsonschema:"enum=path,enum=query,enum=body,enum=actor"`
	// Key is the parameter or field name (default companyId).
	Key string `json:"key,omitempty"`
}

// Job is a declared background job.
type Job struct {
	// Key names the job within the extension.
	Key string `json:"key" jsonschema:"pattern=^[a-z][a-z0-9_-]*$"`
	// Cron is a five-field cron schedule in UTC (or with a CRON_TZ= prefix).
	Cron string `json:"cron,omitempty"`
	// Every is an interval such as 30s or 5m.
	Every string `json:"every,omitempty"`
	// Description says what the job does.
	Description string `json:"description,omitempty"`
}

// UI lists UI contributions. Their entries are files under the package's ui/ directory,
// served at GET /api/plugins/{pluginId}/ui/{file}.
type UI struct {
	Slots []UISlot `json:"slots,omitempty"`
	// Launchers are buttons or menu items that open the extension's UI or perform an action.
	Launchers []UILauncher `json:"launchers,omitempty"`
}

// UISlot is one UI contribution. It is rendered either by a script (Entry, for clients
// that run extension JavaScript) or, on keel's board, by one of the extension's own GET
// routes answering an HTML fragment (Route), which the board sanitises and places in the
// slot. A slot needs at least one of the two.
type UISlot struct {
	// Slot is the place in the UI: company.sidebar, company.page, company.dashboardWidget,
	// company.settingsPage, issue.detailTab, agent.detailTab or instance.settingsPage (the
	// reference's names, such as page or detailTab, are kept as they are).
	Slot string `json:"slot"`
	// ID names the slot within the extension; the board's page of a page slot is
	// /c/{companyId}/x/{extensionKey}/{id}. Default: the slot's position in the list.
	ID string `json:"id,omitempty" jsonschema:"pattern=^[a-z0-9][a-z0-9_-]*$"`
	// Entry is the script that renders it, relative to the package's ui/ directory.
	Entry string `json:"entry,omitempty"`
	// Route is the path of one of the extension's own GET routes that answers the slot as an
	// HTML fragment (Content-Type text/html), with {companyId}, {issueId}, {agentId} or
	// {userId} placeholders (and an optional query, such as ?companyId={companyId}), filled
	// in by the board for the page it renders the slot on.
	Route string `json:"route,omitempty"`
	// Role is the minimum role that sees it.
	Role string `json:"role,omitempty"`
	// DisplayName is the slot's title.
	DisplayName string `json:"displayName,omitempty"`
	// ExportName is the entry's export that renders the slot.
	ExportName string `json:"exportName,omitempty"`
}

// UILauncher is a button or menu item contributed to the UI.
type UILauncher struct {
	// ID names the launcher within the extension.
	ID string `json:"id" jsonschema:"pattern=^[a-z0-9][a-z0-9._:-]*$"`
	// DisplayName is the launcher's label.
	DisplayName string `json:"displayName"`
	// Placement is where it appears, such as globalToolbarButton or contextMenuItem.
	Placement string `json:"placement"`
	// Action is what it does: navigate, openModal, openDrawer, openPopover, performAction or deepLink.
	Action string `json:"action" jsonschema:"enum=navigate,enum=openModal,enum=openDrawer,enum=openPopover,enum=performAction,enum=deepLink"`
	// Target is the entry, route, action key or URL the action refers to.
	Target string `json:"target,omitempty"`
}

// Tool is an agent tool: agents and board users call it through
// POST /api/plugins/tools/execute with parameters checked against ParametersSchema.
type Tool struct {
	// Name is unique within the extension; callers name the tool "<extension key>:<name>".
	Name string `json:"name" jsonschema:"pattern=^[a-z][a-z0-9_]*$"`
	// DisplayName is a human-readable name.
	DisplayName string `json:"displayName,omitempty"`
	// Description tells an agent what the tool does and when to use it.
	Description string `json:"description"`
	// ParametersSchema is the JSON Schema of the tool's parameters (an object).
	ParametersSchema json.RawMessage `json:"parametersSchema,omitempty"`
}

// Webhook is an inbound webhook endpoint.
type Webhook struct {
	// EndpointKey is the last path segment of the endpoint.
	EndpointKey string `json:"endpointKey" jsonschema:"pattern=^[a-z0-9][a-z0-9._-]*$"`
	// DisplayName is a human-readable name.
	DisplayName string `json:"displayName,omitempty"`
	// Description says who sends it and what it does.
	Description string `json:"description,omitempty"`
}

// Local folder access modes.
const (
	FolderRead      = "read"
	FolderReadWrite = "readWrite"
)

// LocalFolder is a folder on the host a company sets a path for
// (PUT /api/plugins/{pluginId}/companies/{companyId}/local-folders/{folderKey}).
type LocalFolder struct {
	// FolderKey names the folder within the extension.
	FolderKey string `json:"folderKey" jsonschema:"pattern=^[a-z0-9][a-z0-9._:-]*$"`
	// DisplayName is a human-readable name.
	DisplayName string `json:"displayName,omitempty"`
	// Description says what the folder holds.
	Description string `json:"description,omitempty"`
	// Access is read or readWrite (default readWrite).
	Access string `json:"access,omitempty" jsonschema:"enum=read,enum=readWrite"`
	// RequiredDirectories must exist under the folder (relative paths) for it to be healthy.
	RequiredDirectories []string `json:"requiredDirectories,omitempty"`
	// RequiredFiles must exist under the folder (relative paths) for it to be healthy.
	RequiredFiles []string `json:"requiredFiles,omitempty"`
}

// FolderAccess returns the folder's access mode, readWrite by default.
func (f *LocalFolder) FolderAccess() string {
	if f.Access == "" {
		return FolderReadWrite
	}
	return f.Access
}

// Tool returns the declared tool with the name, or nil.
func (m *Manifest) Tool(name string) *Tool {
	for i := range m.Tools {
		if m.Tools[i].Name == name {
			return &m.Tools[i]
		}
	}
	return nil
}

// Webhook returns the declared webhook endpoint with the key, or nil.
func (m *Manifest) Webhook(key string) *Webhook {
	for i := range m.Webhooks {
		if m.Webhooks[i].EndpointKey == key {
			return &m.Webhooks[i]
		}
	}
	return nil
}

// LocalFolder returns the declared local folder with the key, or nil.
func (m *Manifest) LocalFolder(key string) *LocalFolder {
	for i := range m.LocalFolders {
		if m.LocalFolders[i].FolderKey == key {
			return &m.LocalFolders[i]
		}
	}
	return nil
}

// Job returns the declared job with the key, or nil.
func (m *Manifest) Job(key string) *Job {
	for i := range m.Jobs {
		if m.Jobs[i].Key == key {
			return &m.Jobs[i]
		}
	}
	return nil
}

// relativeClean reports whether p is a relative path that stays inside its base: not
// absolute, no backslash, no empty, "." or ".." segment.
func relativeClean(p string) bool {
	if p == "" || strings.HasPrefix(p, "/") || strings.Contains(p, "\\") || strings.ContainsRune(p, 0) {
		return false
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

// validateFeatures checks tools, webhooks, local folders and UI contributions.
func (m *Manifest) validateFeatures() error {
	tools := map[string]bool{}
	for _, t := range m.Tools {
		if !toolPattern.MatchString(t.Name) || tools[t.Name] {
			return fmt.Errorf("invalid manifest %s: tool %q is malformed or repeated", m.Key, t.Name)
		}
		tools[t.Name] = true
		if strings.TrimSpace(t.Description) == "" {
			return fmt.Errorf("invalid manifest %s: tool %q needs a description", m.Key, t.Name)
		}
		if len(t.ParametersSchema) > 0 {
			if _, err := CompileSchema(m.Key+"/tools/"+t.Name, t.ParametersSchema); err != nil {
				return fmt.Errorf("invalid manifest %s: parameters schema of tool %q: %w", m.Key, t.Name, err)
			}
		}
	}
	drivers := map[string]bool{}
	for _, d := range m.EnvironmentDrivers {
		if !envDriverPattern.MatchString(d.Driver) || drivers[d.Driver] || d.Driver == "local" {
			return fmt.Errorf("invalid manifest %s: environment driver %q is malformed, repeated or reserved", m.Key, d.Driver)
		}
		drivers[d.Driver] = true
		if !m.HasCapability(CapEnvironmentDrivers) {
			return fmt.Errorf("invalid manifest %s: declaring environment drivers needs the %s capability", m.Key, CapEnvironmentDrivers)
		}
		if len(d.ConfigSchema) > 0 {
			if _, err := CompileSchema(m.Key+"/environmentDrivers/"+d.Driver, d.ConfigSchema); err != nil {
				return fmt.Errorf("invalid manifest %s: config schema of environment driver %q: %w", m.Key, d.Driver, err)
			}
		}
	}
	hooks := map[string]bool{}
	for _, w := range m.Webhooks {
		if !featureKeyPattern.MatchString(w.EndpointKey) || hooks[w.EndpointKey] {
			return fmt.Errorf("invalid manifest %s: webhook endpoint %q is malformed or repeated", m.Key, w.EndpointKey)
		}
		hooks[w.EndpointKey] = true
	}
	folders := map[string]bool{}
	for _, f := range m.LocalFolders {
		if !featureKeyPattern.MatchString(f.FolderKey) || folders[f.FolderKey] {
			return fmt.Errorf("invalid manifest %s: local folder %q is malformed or repeated", m.Key, f.FolderKey)
		}
		folders[f.FolderKey] = true
		switch f.Access {
		case "", FolderRead, FolderReadWrite:
		default:
			return fmt.Errorf("invalid manifest %s: local folder %q access must be read or readWrite", m.Key, f.FolderKey)
		}
		for _, p := range append(append([]string{}, f.RequiredDirectories...), f.RequiredFiles...) {
			if !relativeClean(p) {
				return fmt.Errorf("invalid manifest %s: local folder %q requires %q, which is not a relative path inside it", m.Key, f.FolderKey, p)
			}
		}
	}
	if m.UI != nil {
		ids := map[string]bool{}
		for i, s := range m.UI.Slots {
			if s.Entry == "" && s.Route == "" {
				return fmt.Errorf("invalid manifest %s: UI slot %q needs an entry or a route", m.Key, s.Slot)
			}
			if s.Entry != "" && !relativeClean(s.Entry) {
				return fmt.Errorf("invalid manifest %s: UI slot %q entry %q must be a relative path inside ui/", m.Key, s.Slot, s.Entry)
			}
			id := s.SlotID(i)
			if ids[id] {
				return fmt.Errorf("invalid manifest %s: UI slot id %q is repeated", m.Key, id)
			}
			ids[id] = true
			if s.Route != "" {
				if err := m.validateSlotRoute(s); err != nil {
					return err
				}
			}
		}
		launchers := map[string]bool{}
		for _, l := range m.UI.Launchers {
			if !featureKeyPattern.MatchString(l.ID) || launchers[l.ID] {
				return fmt.Errorf("invalid manifest %s: UI launcher %q is malformed or repeated", m.Key, l.ID)
			}
			launchers[l.ID] = true
		}
	}
	return nil
}

var (
	keyPattern      = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$`)
	platformPattern = regexp.MustCompile(`^[a-z0-9]+-[a-z0-9]+$`)
	eventPattern    = regexp.MustCompile(`^(\*|[a-z][a-z0-9_]*(\.[a-z*][a-z0-9_]*)*)$`)
	methodPattern   = regexp.MustCompile(`^[a-z][A-Za-z0-9_.]*$`)
	toolPattern     = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	// featureKeyPattern is the form of webhook endpoint keys, folder keys and launcher ids.
	featureKeyPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._:-]*$`)
	// envDriverPattern is the form of environment driver keys.
	envDriverPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)
)

// ParseManifest strictly decodes a manifest (unknown fields are an error), checks it against
// the published JSON Schema and then checks what the schema cannot say.
func ParseManifest(data []byte) (*Manifest, error) {
	if err := unknownManifestField(data); err != nil {
		return nil, err
	}
	if err := ValidateManifestSchema(data); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("invalid manifest: %w", err)
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

// Validate checks the manifest's internal consistency.
func (m *Manifest) Validate() error {
	if !keyPattern.MatchString(m.Key) {
		return fmt.Errorf("invalid manifest: key %q must be lowercase, dot-namespaced, underscores not spaces", m.Key)
	}
	if m.Version == "" {
		return fmt.Errorf("invalid manifest %s: version is required", m.Key)
	}
	switch m.Kind {
	case KindFeature, KindAdapter, KindPlugin:
	default:
		return fmt.Errorf("invalid manifest %s: kind must be feature, adapter or plugin", m.Key)
	}
	switch m.Runtime.Kind {
	case RuntimeProcess:
		if m.Runtime.Module != "" {
			return fmt.Errorf("invalid manifest %s: a process runtime has no module", m.Key)
		}
		if m.Runtime.Executable != "" && len(m.Runtime.Artifacts) > 0 {
			return fmt.Errorf("invalid manifest %s: a process runtime names an executable or artifacts per platform, not both", m.Key)
		}
		for platform, a := range m.Runtime.Artifacts {
			if !platformPattern.MatchString(platform) {
				return fmt.Errorf("invalid manifest %s: artifact platform %q must be goos-goarch, such as linux-amd64", m.Key, platform)
			}
			if !IsPackagePath(a.Path) {
				return fmt.Errorf("invalid manifest %s: artifact %s path %q must be a relative path inside the package", m.Key, platform, a.Path)
			}
		}
	case RuntimeWasm:
		if m.Runtime.Module == "" {
			return fmt.Errorf("invalid manifest %s: a wasm runtime needs a module", m.Key)
		}
		if len(m.Runtime.Artifacts) > 0 {
			return fmt.Errorf("invalid manifest %s: a wasm runtime has no artifacts (the module runs everywhere)", m.Key)
		}
	default:
		return fmt.Errorf("invalid manifest %s: runtime kind must be process or wasm", m.Key)
	}
	caps := map[string]bool{}
	for _, c := range AllCapabilities {
		caps[c] = true
	}
	for _, c := range m.Capabilities {
		if !caps[c] {
			return fmt.Errorf("invalid manifest %s: unknown capability %q", m.Key, c)
		}
	}
	seen := map[string]bool{}
	for _, p := range m.Provides {
		if IsReservedMethod(p.Name) {
			return fmt.Errorf("invalid manifest %s: provided method %q is reserved for the host", m.Key, p.Name)
		}
		if !methodPattern.MatchString(p.Name) || seen[p.Name] {
			return fmt.Errorf("invalid manifest %s: provided method %q is malformed or repeated", m.Key, p.Name)
		}
		seen[p.Name] = true
		for _, c := range p.Requires {
			if !caps[c] {
				return fmt.Errorf("invalid manifest %s: provided method %q requires unknown capability %q", m.Key, p.Name, c)
			}
		}
	}
	if len(m.Uses) > 0 && !m.HasCapability(CapCalls) {
		return fmt.Errorf("invalid manifest %s: uses methods but lacks the calls capability", m.Key)
	}
	for _, u := range m.Uses {
		owner, method, ok := strings.Cut(u, ".")
		_ = owner
		if !ok || method == "" {
			return fmt.Errorf("invalid manifest %s: used method %q must be owner.method", m.Key, u)
		}
	}
	routes := map[string]bool{}
	for _, r := range m.Routes {
		id := r.Method + " " + r.Path
		if routes[id] {
			return fmt.Errorf("invalid manifest %s: route %s declared twice", m.Key, id)
		}
		routes[id] = true
		if r.Company != nil && r.Company.From == "path" {
			key := r.Company.Key
			if key == "" {
				key = "companyId"
			}
			if !strings.Contains(r.Path, "{"+key+"}") {
				return fmt.Errorf("invalid manifest %s: route %s resolves the company from path parameter %q it does not have", m.Key, id, key)
			}
		}
	}
	jobs := map[string]bool{}
	for _, j := range m.Jobs {
		if jobs[j.Key] {
			return fmt.Errorf("invalid manifest %s: job %q declared twice", m.Key, j.Key)
		}
		jobs[j.Key] = true
		if j.Cron != "" && j.Every != "" {
			return fmt.Errorf("invalid manifest %s: job %q has both cron and every", m.Key, j.Key)
		}
	}
	if len(m.Jobs) > 0 && !m.HasCapability(CapJobs) {
		return fmt.Errorf("invalid manifest %s: declares jobs but lacks the jobs capability", m.Key)
	}
	for _, e := range m.Events {
		if !eventPattern.MatchString(e) {
			return fmt.Errorf("invalid manifest %s: event subscription %q is malformed", m.Key, e)
		}
	}
	if m.Runtime.IdleStopAfter != "" {
		if d, err := time.ParseDuration(m.Runtime.IdleStopAfter); err != nil || d < time.Second {
			return fmt.Errorf("invalid manifest %s: idleStopAfter %q must be a duration of at least 1s", m.Key, m.Runtime.IdleStopAfter)
		}
	}
	if m.FlagOff != nil && m.Flag == "" {
		return fmt.Errorf("invalid manifest %s: flagOff without a flag", m.Key)
	}
	if len(m.ConfigSchema) > 0 {
		if _, err := CompileSchema(m.Key+"/config", m.ConfigSchema); err != nil {
			return fmt.Errorf("invalid manifest %s: config schema: %w", m.Key, err)
		}
	}
	if err := m.validateManaged(); err != nil {
		return err
	}
	return m.validateFeatures()
}

// IsPackagePath reports whether p is a clean relative slash-separated path that stays
// inside its package: not absolute, no "..", no empty or "." segments, no backslashes.
func IsPackagePath(p string) bool {
	if p == "" || strings.HasPrefix(p, "/") || strings.ContainsAny(p, "\\\x00") {
		return false
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

// HasCapability reports whether the manifest declares a capability.
func (m *Manifest) HasCapability(c string) bool {
	for _, x := range m.Capabilities {
		if x == c {
			return true
		}
	}
	return false
}

// MethodRequires returns the capabilities a caller of a provided method must declare.
func (m *Manifest) MethodRequires(name string) []string {
	for _, p := range m.Provides {
		if p.Name == name {
			return p.Requires
		}
	}
	return nil
}

// ProvidesMethod reports whether the manifest provides a method.
func (m *Manifest) ProvidesMethod(name string) bool {
	return m.providedMethod(name) != nil
}

// MethodReadOnly reports whether the manifest provides the method and declares it
// read-only.
func (m *Manifest) MethodReadOnly(name string) bool {
	p := m.providedMethod(name)
	return p != nil && p.ReadOnly
}

func (m *Manifest) providedMethod(name string) *Method {
	for i := range m.Provides {
		if m.Provides[i].Name == name {
			return &m.Provides[i]
		}
	}
	return nil
}

// UsesMethod reports whether the manifest declares that it uses "owner.method". A use
// ending in ".*" covers every method under that prefix ("adapter.*" reaches every adapter
// type, including ones registered later).
func (m *Manifest) UsesMethod(qualified string) bool {
	for _, u := range m.Uses {
		if u == qualified {
			return true
		}
		if prefix, ok := strings.CutSuffix(u, "*"); ok && strings.HasSuffix(prefix, ".") && strings.HasPrefix(qualified, prefix) {
			return true
		}
	}
	return false
}
