package sdk

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// CapManaged lets a plugin declare managed resources (Manifest.Managed) and read or
// reconcile them through the reserved calls ManagedListMethod, ManagedReconcileMethod and
// ManagedResetMethod. An upgrade that starts declaring them asks for it, so an admin
// approves a plugin that begins creating agents.
const CapManaged = "managed"

// Managed resource kinds.
const (
	ManagedAgentKind   = "agent"
	ManagedProjectKind = "project"
	ManagedRoutineKind = "routine"
	ManagedSkillKind   = "skill"
)

// Reserved calls with which a plugin reads and reconciles its own managed resources in a
// company (see Host.ManagedResources). They need no `uses` entry and no calls capability:
// a plugin reaches only its own resources.
const (
	// ManagedListMethod lists the resources: input ManagedRequest, output ManagedResourceList.
	ManagedListMethod = "keel.managed.list"
	// ManagedReconcileMethod creates what is missing: input ManagedRequest, output ManagedResourceList.
	ManagedReconcileMethod = "keel.managed.reconcile"
	// ManagedResetMethod puts one resource back to its declaration (the board's edits of
	// the declared fields are undone; a missing one is created): input ManagedRequest with
	// Kind and Key, output ManagedResourceList.
	ManagedResetMethod = "keel.managed.reset"
)

// Managed lists the agents, projects, routines and skills keel creates for a plugin in
// every company, through their owners (the agents, work, routines and skills extensions),
// and keeps: keys are stable, so a re-enable or an upgrade never duplicates one; a resource
// the board edited keeps the board's edits; only a missing one (deleted by its owner) is
// created again. Uninstalling with purge terminates the agents, deletes the projects and
// skills and archives the routines; uninstalling without purge leaves them.
type Managed struct {
	Agents   []ManagedAgent   `json:"agents,omitempty"`
	Projects []ManagedProject `json:"projects,omitempty"`
	Routines []ManagedRoutine `json:"routines,omitempty"`
	Skills   []ManagedSkill   `json:"skills,omitempty"`
}

// ManagedAgent is an agent a plugin keeps in every company (the wiki's maintainer).
type ManagedAgent struct {
	// Key names the agent within the plugin (agentKey), such as wiki-maintainer.
	Key string `json:"key" jsonschema:"pattern=^[a-z0-9][a-z0-9._:-]*$"`
	// Name is the agent's display name (a numeric suffix is added when the company has one).
	Name string `json:"name" jsonschema:"minLength=1"`
	// Role is one of the agents owner's roles (default general).
	Role string `json:"role,omitempty"`
	// Title is the agent's job title.
	Title string `json:"title,omitempty"`
	// Icon names the agent's icon.
	Icon string `json:"icon,omitempty"`
	// Capabilities describes what the agent does, for other agents.
	Capabilities string `json:"capabilities,omitempty"`
	// AdapterType is the adapter the agent runs with (default process).
	AdapterType string `json:"adapterType,omitempty"`
	// AdapterPreference lists adapter types in order of preference: the first one the
	// company's adapter registry knows is used, else AdapterType.
	AdapterPreference []string `json:"adapterPreference,omitempty"`
	// AdapterConfig is the adapter's configuration.
	AdapterConfig json.RawMessage `json:"adapterConfig,omitempty" jsonschema:"type=object"`
	// RuntimeConfig is the agent's runtime configuration.
	RuntimeConfig json.RawMessage `json:"runtimeConfig,omitempty" jsonschema:"type=object"`
	// DesiredSkills are skill keys the agent should have.
	DesiredSkills []string `json:"desiredSkills,omitempty"`
	// BudgetMonthlyCents is the agent's monthly budget (default 0).
	BudgetMonthlyCents int64 `json:"budgetMonthlyCents,omitempty" jsonschema:"minimum=0"`
	// Status is the status the agent is created with: paused (default) or idle.
	Status string `json:"status,omitempty" jsonschema:"enum=paused,enum=idle"`
}

// ManagedProject is a project a plugin keeps in every company.
type ManagedProject struct {
	// Key names the project within the plugin (projectKey), such as llm-wiki.
	Key string `json:"key" jsonschema:"pattern=^[a-z0-9][a-z0-9._:-]*$"`
	// Name is the project's name.
	Name string `json:"name" jsonschema:"minLength=1"`
	// Description says what the project is for.
	Description string `json:"description,omitempty"`
	// Status is backlog, planned, in_progress (default), completed or cancelled.
	Status string `json:"status,omitempty" jsonschema:"enum=backlog,enum=planned,enum=in_progress,enum=completed,enum=cancelled"`
	// Color is #RRGGBB.
	Color string `json:"color,omitempty" jsonschema:"pattern=^#[0-9a-fA-F]{6}$"`
	// Icon names the project's icon.
	Icon string `json:"icon,omitempty"`
}

// ManagedRoutine is a routine a plugin keeps in every company. It is created paused with
// its schedule off unless it says otherwise: an admin turns it on.
type ManagedRoutine struct {
	// Key names the routine within the plugin (routineKey), such as nightly-wiki-lint.
	Key string `json:"key" jsonschema:"pattern=^[a-z0-9][a-z0-9._:-]*$"`
	// Title is the routine's title (the title of each execution issue).
	Title string `json:"title" jsonschema:"minLength=1"`
	// Description is the execution issue's description.
	Description string `json:"description,omitempty"`
	// AgentKey is the key of the plugin's managed agent that runs it.
	AgentKey string `json:"agentKey,omitempty"`
	// ProjectKey is the key of the plugin's managed project its issues belong to.
	ProjectKey string `json:"projectKey,omitempty"`
	// Priority is critical, high, medium or low (default low).
	Priority string `json:"priority,omitempty" jsonschema:"enum=critical,enum=high,enum=medium,enum=low"`
	// Status is paused (default) or active.
	Status string `json:"status,omitempty" jsonschema:"enum=paused,enum=active"`
	// ConcurrencyPolicy is coalesce_if_active, always_enqueue or skip_if_active (default).
	ConcurrencyPolicy string `json:"concurrencyPolicy,omitempty" jsonschema:"enum=coalesce_if_active,enum=always_enqueue,enum=skip_if_active"`
	// CatchUpPolicy is skip_missed (default) or enqueue_missed_with_cap.
	CatchUpPolicy string `json:"catchUpPolicy,omitempty" jsonschema:"enum=skip_missed,enum=enqueue_missed_with_cap"`
	// Schedule is the routine's schedule trigger, if it has one.
	Schedule *ManagedSchedule `json:"schedule,omitempty"`
}

// ManagedSchedule is a managed routine's schedule trigger.
type ManagedSchedule struct {
	// Cron is a five-field cron expression.
	Cron string `json:"cron" jsonschema:"minLength=1"`
	// Timezone is an IANA zone (default UTC).
	Timezone string `json:"timezone,omitempty"`
	// Label names the trigger.
	Label string `json:"label,omitempty"`
	// Enabled turns the schedule on at creation (default false: off until an admin turns it on).
	Enabled bool `json:"enabled,omitempty"`
}

// ManagedSkill is a skill a plugin keeps in every company, its Markdown a file of the package.
type ManagedSkill struct {
	// Key names the skill within the plugin, such as wiki-ingest.
	Key string `json:"key" jsonschema:"pattern=^[a-z0-9][a-z0-9._:-]*$"`
	// Slug is the skill's kebab-case slug (default the key).
	Slug string `json:"slug,omitempty"`
	// Name is the skill's name.
	Name string `json:"name,omitempty"`
	// Description says when to use the skill.
	Description string `json:"description,omitempty"`
	// Markdown is the path of its SKILL.md inside the package (default skills/<key>/SKILL.md).
	Markdown string `json:"markdown,omitempty"`
}

// SkillMarkdown returns the package path of the skill's SKILL.md.
func (s *ManagedSkill) SkillMarkdown() string {
	if s.Markdown != "" {
		return s.Markdown
	}
	return "skills/" + s.Key + "/SKILL.md"
}

// Empty reports whether nothing is declared.
func (m *Managed) Empty() bool {
	return m == nil || len(m.Agents)+len(m.Projects)+len(m.Routines)+len(m.Skills) == 0
}

// Count returns how many resources are declared.
func (m *Managed) Count() int {
	if m == nil {
		return 0
	}
	return len(m.Agents) + len(m.Projects) + len(m.Routines) + len(m.Skills)
}

// Declares reports whether a resource of the kind and key is declared.
func (m *Managed) Declares(kind, key string) bool {
	if m == nil {
		return false
	}
	switch kind {
	case ManagedAgentKind:
		for _, a := range m.Agents {
			if a.Key == key {
				return true
			}
		}
	case ManagedProjectKind:
		for _, p := range m.Projects {
			if p.Key == key {
				return true
			}
		}
	case ManagedRoutineKind:
		for _, r := range m.Routines {
			if r.Key == key {
				return true
			}
		}
	case ManagedSkillKind:
		for _, s := range m.Skills {
			if s.Key == key {
				return true
			}
		}
	}
	return false
}

// validateManaged checks managed declarations: the capability, unique keys per kind,
// routines naming declared agents and projects, skill paths inside the package.
func (m *Manifest) validateManaged() error {
	d := m.Managed
	if d.Empty() {
		return nil
	}
	if !m.HasCapability(CapManaged) {
		return fmt.Errorf("invalid manifest %s: declares managed resources but lacks the managed capability", m.Key)
	}
	seen := map[string]bool{}
	check := func(kind, key string) error {
		if !featureKeyPattern.MatchString(key) || seen[kind+"/"+key] {
			return fmt.Errorf("invalid manifest %s: managed %s %q is malformed or repeated", m.Key, kind, key)
		}
		seen[kind+"/"+key] = true
		return nil
	}
	for _, a := range d.Agents {
		if err := check(ManagedAgentKind, a.Key); err != nil {
			return err
		}
		if a.Name == "" {
			return fmt.Errorf("invalid manifest %s: managed agent %q needs a name", m.Key, a.Key)
		}
	}
	for _, p := range d.Projects {
		if err := check(ManagedProjectKind, p.Key); err != nil {
			return err
		}
		if p.Name == "" {
			return fmt.Errorf("invalid manifest %s: managed project %q needs a name", m.Key, p.Key)
		}
	}
	for _, s := range d.Skills {
		if err := check(ManagedSkillKind, s.Key); err != nil {
			return err
		}
		if !IsPackagePath(s.SkillMarkdown()) {
			return fmt.Errorf("invalid manifest %s: managed skill %q markdown %q must be a relative path inside the package", m.Key, s.Key, s.Markdown)
		}
	}
	for _, r := range d.Routines {
		if err := check(ManagedRoutineKind, r.Key); err != nil {
			return err
		}
		if r.Title == "" {
			return fmt.Errorf("invalid manifest %s: managed routine %q needs a title", m.Key, r.Key)
		}
		if r.AgentKey != "" && !d.Declares(ManagedAgentKind, r.AgentKey) {
			return fmt.Errorf("invalid manifest %s: managed routine %q names agent %q, which is not a managed agent", m.Key, r.Key, r.AgentKey)
		}
		if r.ProjectKey != "" && !d.Declares(ManagedProjectKind, r.ProjectKey) {
			return fmt.Errorf("invalid manifest %s: managed routine %q names project %q, which is not a managed project", m.Key, r.Key, r.ProjectKey)
		}
		if r.Schedule != nil && r.Schedule.Cron == "" {
			return fmt.Errorf("invalid manifest %s: managed routine %q has a schedule without a cron expression", m.Key, r.Key)
		}
	}
	return nil
}

// Managed resource states, as the list reports them.
const (
	// ManagedMissing is declared but not (yet) created in the company.
	ManagedMissing = "missing"
	// ManagedCreated was created by the last reconcile.
	ManagedCreated = "created"
	// ManagedResolved exists and is kept as it is (the board's edits included).
	ManagedResolved = "resolved"
	// ManagedRecreated was deleted by its owner and created again by the last reconcile.
	ManagedRecreated = "recreated"
	// ManagedReset was put back to its declaration.
	ManagedReset = "reset"
	// ManagedError could not be created or checked; LastError says why.
	ManagedError = "error"
	// ManagedSkipped has no owner on this instance (no extension provides its methods).
	ManagedSkipped = "skipped"
)

// ManagedResource is one managed resource of a plugin in a company.
type ManagedResource struct {
	Kind string `json:"kind"`
	// Key is the declared key (agentKey, projectKey, routineKey, skill key).
	Key string `json:"resourceKey"`
	// ResourceID is the owner's id of the resource, null while it is missing.
	ResourceID *string `json:"resourceId"`
	// Status is missing, created, resolved, recreated, reset, error or skipped.
	Status string `json:"status"`
	// Name is the resource's name or title when it was last seen.
	Name string `json:"name,omitempty"`
	// OwnerStatus is the resource's own status when it was last seen (an agent's paused).
	OwnerStatus string    `json:"ownerStatus,omitempty"`
	LastError   *string   `json:"lastError"`
	CheckedAt   time.Time `json:"checkedAt"`
}

// ManagedResourceList is a plugin's managed resources in one company.
type ManagedResourceList struct {
	PluginID  string             `json:"pluginId"`
	PluginKey string             `json:"pluginKey"`
	CompanyID string             `json:"companyId"`
	Resources []*ManagedResource `json:"resources"`
}

// Find returns the resource of a kind and key, or nil.
func (l *ManagedResourceList) Find(kind, key string) *ManagedResource {
	if l == nil {
		return nil
	}
	for _, r := range l.Resources {
		if r.Kind == kind && r.Key == key {
			return r
		}
	}
	return nil
}

// ManagedRequest is the input of the reserved managed calls.
type ManagedRequest struct {
	CompanyID string `json:"companyId"`
	// Kind and Key name the resource a reset replaces.
	Kind string `json:"kind,omitempty"`
	Key  string `json:"resourceKey,omitempty"`
}

// ManagedResources lists the plugin's managed resources in a company as last reconciled
// (a declared one never created is missing).
func (h *Host) ManagedResources(ctx context.Context, companyID string) (*ManagedResourceList, error) {
	var out ManagedResourceList
	if err := h.Call(ctx, ManagedListMethod, SystemActor(), companyID, &ManagedRequest{CompanyID: companyID}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ReconcileManaged creates the plugin's missing managed resources in a company and returns
// them all, each with its owner's id (a wiki bootstrap calls it before it needs the
// maintainer agent and project).
func (h *Host) ReconcileManaged(ctx context.Context, companyID string) (*ManagedResourceList, error) {
	var out ManagedResourceList
	if err := h.Call(ctx, ManagedReconcileMethod, SystemActor(), companyID, &ManagedRequest{CompanyID: companyID}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ResetManaged puts one managed resource in a company back to its declaration: the same
// resource (its id, history and issues kept) gets the declared fields again.
func (h *Host) ResetManaged(ctx context.Context, companyID, kind, key string) (*ManagedResourceList, error) {
	var out ManagedResourceList
	if err := h.Call(ctx, ManagedResetMethod, SystemActor(), companyID, &ManagedRequest{CompanyID: companyID, Kind: kind, Key: key}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ManagedResourceID returns the owner's id of one managed resource in a company, creating
// the missing ones first; "" with an error when it cannot be made.
func (h *Host) ManagedResourceID(ctx context.Context, companyID, kind, key string) (string, error) {
	l, err := h.ManagedResources(ctx, companyID)
	if err != nil {
		return "", err
	}
	if r := l.Find(kind, key); r != nil && r.ResourceID != nil {
		return *r.ResourceID, nil
	}
	if l, err = h.ReconcileManaged(ctx, companyID); err != nil {
		return "", err
	}
	r := l.Find(kind, key)
	switch {
	case r == nil:
		return "", fmt.Errorf("managed %s %q is not declared", kind, key)
	case r.ResourceID == nil:
		msg := r.Status
		if r.LastError != nil {
			msg = *r.LastError
		}
		return "", fmt.Errorf("managed %s %q could not be made: %s", kind, key, msg)
	}
	return *r.ResourceID, nil
}
