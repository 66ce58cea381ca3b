package skills

import (
	"context"
	"strings"

	"github.com/keelhq/keel/sdk"
)

// The host keeps a plugin's managed skills (sdk.ManagedSkill) through these methods, the
// same contract as the other owners of managed resources: create and update take the
// declared fields with the skill's SKILL.md as markdown, get and delete take a skillId. A
// managed skill's key is prefixed with plugin/<plugin>/ so two plugins, or a plugin and the
// company, never share one.
func init() {
	addMethods(map[string]method{
		"managed.create": {
			Description: "Create or update a plugin's managed skill. Input {key, slug?, name?, description?, markdown, metadata " +
				"{managedBy: {pluginKey, resourceKey}}}. Output the skill.",
			Call: (*Skills).methodManagedCreate,
		},
		"managed.update": {
			Description: "Put a managed skill's declared fields and SKILL.md back. Input {skillId, key, slug?, name?, description?, " +
				"markdown, metadata}. Output the skill. 404 \"Skill not found\".",
			Call: (*Skills).methodManagedUpdate,
		},
		"managed.delete": {
			Description: "Delete a managed skill. Input {skillId}. Output the deleted skill. 404 \"Skill not found\".",
			Call:        (*Skills).methodManagedDelete,
		},
	})
}

// managedInput is the host's description of one managed skill.
type managedInput struct {
	SkillID     string         `json:"skillId"`
	Key         string         `json:"key"`
	Slug        string         `json:"slug"`
	Name        string         `json:"name"`
	Description *string        `json:"description"`
	Markdown    string         `json:"markdown"`
	Metadata    map[string]any `json:"metadata"`
}

// pluginOf returns the plugin key in metadata.managedBy.
func (m *managedInput) pluginOf() string {
	by, _ := m.Metadata["managedBy"].(map[string]any)
	k, _ := by["pluginKey"].(string)
	return k
}

func (x *Skills) managedUpsert(ctx context.Context, call *sdk.MethodCall, m *managedInput) (any, error) {
	plugin := x.pluginSlug(m)
	if plugin == "" {
		return nil, sdk.Invalid("metadata.managedBy.pluginKey", "is required")
	}
	key := normalizeKey(m.Key)
	if key == "" {
		return nil, sdk.Invalid("key", "must be slash-separated lowercase segments")
	}
	if !strings.HasPrefix(key, "plugin/"+plugin+"/") {
		key = "plugin/" + plugin + "/" + key
	}
	pluginKey := m.pluginOf()
	in := &methodInput{Key: key, Slug: m.Slug, Name: m.Name, Description: m.Description, Metadata: m.Metadata,
		ManagedBy: &pluginKey, Files: []MethodFile{{Path: SkillFile, Content: m.Markdown}}}
	res, err := x.upsert(ctx, call, in)
	if err != nil {
		return nil, err
	}
	return res.Skill, nil
}

func (x *Skills) pluginSlug(m *managedInput) string { return Slugify(m.pluginOf()) }

func (x *Skills) methodManagedCreate(ctx context.Context, call *sdk.MethodCall) (any, error) {
	m := &managedInput{}
	if err := call.Bind(m); err != nil {
		return nil, err
	}
	if !sdk.IsUUID(call.CompanyID) {
		return nil, sdk.Invalid("companyId", "the call must name a company")
	}
	return x.managedUpsert(ctx, call, m)
}

func (x *Skills) methodManagedUpdate(ctx context.Context, call *sdk.MethodCall) (any, error) {
	m := &managedInput{}
	if err := call.Bind(m); err != nil {
		return nil, err
	}
	s, err := x.managedSkill(ctx, call.CompanyID, m.SkillID)
	if err != nil {
		return nil, err
	}
	m.Key = s.Key
	return x.managedUpsert(ctx, call, m)
}

func (x *Skills) methodManagedDelete(ctx context.Context, call *sdk.MethodCall) (any, error) {
	m := &managedInput{}
	if err := call.Bind(m); err != nil {
		return nil, err
	}
	s, err := x.managedSkill(ctx, call.CompanyID, m.SkillID)
	if err != nil {
		return nil, err
	}
	if err := x.deleteSkill(sdk.WithRequestInfo(ctx, call.Actor, call.CompanyID, "", nil), call.CompanyID, s); err != nil {
		return nil, err
	}
	return s, nil
}

// managedSkill reads a skill of the call's company that a plugin manages.
func (x *Skills) managedSkill(ctx context.Context, companyID, skillID string) (*Skill, error) {
	if !sdk.IsUUID(companyID) {
		return nil, sdk.Invalid("companyId", "the call must name a company")
	}
	if !sdk.IsUUID(skillID) {
		return nil, sdk.Invalid("skillId", "must be a UUID")
	}
	s, err := skillGet(ctx, x.pool, companyID, strings.ToLower(skillID))
	if err != nil {
		return nil, err
	}
	if s == nil || s.ManagedBy == nil {
		return nil, sdk.NotFound(msgSkillNotFound)
	}
	return s, nil
}
