package portability

import "encoding/json"

// The frontmatter of each markdown-backed file. References between entities use the
// package's own names (agent and project slugs, issue refs), never database ids.

// CompanyFront is COMPANY.md's frontmatter; the body is the description.
type CompanyFront struct {
	Name               string  `yaml:"name" json:"name"`
	IssuePrefix        string  `yaml:"issuePrefix,omitempty" json:"issuePrefix,omitempty"`
	BudgetMonthlyCents int64   `yaml:"budgetMonthlyCents" json:"budgetMonthlyCents"`
	BrandColor         *string `yaml:"brandColor,omitempty" json:"brandColor,omitempty"`
}

// AgentFront is agents/<slug>/AGENT.md's frontmatter; the body is the capabilities text.
type AgentFront struct {
	Slug               string          `yaml:"slug" json:"slug"`
	Name               string          `yaml:"name" json:"name"`
	Role               string          `yaml:"role,omitempty" json:"role,omitempty"`
	Title              *string         `yaml:"title,omitempty" json:"title,omitempty"`
	Icon               *string         `yaml:"icon,omitempty" json:"icon,omitempty"`
	ReportsTo          string          `yaml:"reportsTo,omitempty" json:"reportsTo,omitempty"`
	AdapterType        string          `yaml:"adapterType" json:"adapterType"`
	AdapterConfig      map[string]any  `yaml:"adapterConfig,omitempty" json:"adapterConfig,omitempty"`
	RuntimeConfig      map[string]any  `yaml:"runtimeConfig,omitempty" json:"runtimeConfig,omitempty"`
	BudgetMonthlyCents int64           `yaml:"budgetMonthlyCents" json:"budgetMonthlyCents"`
	Permissions        map[string]bool `yaml:"permissions,omitempty" json:"permissions,omitempty"`
	DesiredSkills      []string        `yaml:"desiredSkills,omitempty" json:"desiredSkills,omitempty"`
	Metadata           map[string]any  `yaml:"metadata,omitempty" json:"metadata,omitempty"`
}

// ProjectFront is projects/<slug>/PROJECT.md's frontmatter; the body is the description.
type ProjectFront struct {
	Slug       string  `yaml:"slug" json:"slug"`
	Name       string  `yaml:"name" json:"name"`
	Status     string  `yaml:"status,omitempty" json:"status,omitempty"`
	LeadAgent  string  `yaml:"leadAgent,omitempty" json:"leadAgent,omitempty"`
	TargetDate *string `yaml:"targetDate,omitempty" json:"targetDate,omitempty"`
	Color      *string `yaml:"color,omitempty" json:"color,omitempty"`
	Icon       *string `yaml:"icon,omitempty" json:"icon,omitempty"`
}

// IssueFront is issues/<ref>/ISSUE.md's frontmatter; the body is the description. Comments
// and documents sit beside it as markdown files.
type IssueFront struct {
	Ref          string           `yaml:"ref" json:"ref"`
	Title        string           `yaml:"title" json:"title"`
	Status       string           `yaml:"status" json:"status"`
	Priority     string           `yaml:"priority,omitempty" json:"priority,omitempty"`
	WorkMode     string           `yaml:"workMode,omitempty" json:"workMode,omitempty"`
	Project      string           `yaml:"project,omitempty" json:"project,omitempty"`
	Parent       string           `yaml:"parent,omitempty" json:"parent,omitempty"`
	BlockedBy    []string         `yaml:"blockedBy,omitempty" json:"blockedBy,omitempty"`
	Assignee     string           `yaml:"assignee,omitempty" json:"assignee,omitempty"`
	AssigneeUser *string          `yaml:"assigneeUserId,omitempty" json:"assigneeUserId,omitempty"`
	ReviewPolicy string           `yaml:"reviewPolicy,omitempty" json:"reviewPolicy,omitempty"`
	BillingCode  *string          `yaml:"billingCode,omitempty" json:"billingCode,omitempty"`
	RequestDepth int              `yaml:"requestDepth,omitempty" json:"requestDepth,omitempty"`
	Labels       []LabelRef       `yaml:"labels,omitempty" json:"labels,omitempty"`
	Monitor      map[string]any   `yaml:"monitor,omitempty" json:"monitor,omitempty"`
	WorkProducts []map[string]any `yaml:"workProducts,omitempty" json:"workProducts,omitempty"`
	Attachments  []AttachmentRef  `yaml:"attachments,omitempty" json:"attachments,omitempty"`
	Comments     []string         `yaml:"comments,omitempty" json:"comments,omitempty"`
	Documents    []string         `yaml:"documents,omitempty" json:"documents,omitempty"`
}

// LabelRef is a label by name and colour.
type LabelRef struct {
	Name  string `yaml:"name" json:"name"`
	Color string `yaml:"color" json:"color"`
}

// AttachmentRef is an attachment of an issue: its name and the asset holding its bytes.
type AttachmentRef struct {
	FileName    string `yaml:"fileName" json:"fileName"`
	ContentType string `yaml:"contentType" json:"contentType"`
	SHA256      string `yaml:"sha256" json:"sha256"`
	SizeBytes   int64  `yaml:"sizeBytes" json:"sizeBytes"`
	Path        string `yaml:"path" json:"path"`
}

// CommentFront is issues/<ref>/comments/<n>.md's frontmatter; the body is the comment.
type CommentFront struct {
	AuthorType string `yaml:"authorType,omitempty" json:"authorType,omitempty"`
	Author     string `yaml:"author,omitempty" json:"author,omitempty"`
	CreatedAt  string `yaml:"createdAt,omitempty" json:"createdAt,omitempty"`
}

// DocumentFront is issues/<ref>/documents/<key>.md's frontmatter; the body is the document.
type DocumentFront struct {
	Key    string  `yaml:"key" json:"key"`
	Title  *string `yaml:"title,omitempty" json:"title,omitempty"`
	Format string  `yaml:"format,omitempty" json:"format,omitempty"`
}

// RoutineFront is routines/<slug>/ROUTINE.md's frontmatter; the body is the description.
type RoutineFront struct {
	Slug               string           `yaml:"slug" json:"slug"`
	Title              string           `yaml:"title" json:"title"`
	Assignee           string           `yaml:"assignee,omitempty" json:"assignee,omitempty"`
	Project            string           `yaml:"project,omitempty" json:"project,omitempty"`
	Priority           string           `yaml:"priority,omitempty" json:"priority,omitempty"`
	Status             string           `yaml:"status,omitempty" json:"status,omitempty"`
	ConcurrencyPolicy  string           `yaml:"concurrencyPolicy,omitempty" json:"concurrencyPolicy,omitempty"`
	CatchUpPolicy      string           `yaml:"catchUpPolicy,omitempty" json:"catchUpPolicy,omitempty"`
	Variables          []map[string]any `yaml:"variables,omitempty" json:"variables,omitempty"`
	Triggers           []TriggerRef     `yaml:"triggers,omitempty" json:"triggers,omitempty"`
	ActivityGatePolicy string           `yaml:"activityGatePolicy,omitempty" json:"activityGatePolicy,omitempty"`
}

// TriggerRef is a schedule trigger (webhook and api triggers carry secrets and stay behind).
type TriggerRef struct {
	Kind           string  `yaml:"kind" json:"kind"`
	Label          *string `yaml:"label,omitempty" json:"label,omitempty"`
	Enabled        bool    `yaml:"enabled" json:"enabled"`
	CronExpression *string `yaml:"cronExpression,omitempty" json:"cronExpression,omitempty"`
	Timezone       *string `yaml:"timezone,omitempty" json:"timezone,omitempty"`
}

// SkillMeta is skills/<slug>/skill.json: what SKILL.md does not say about a skill.
type SkillMeta struct {
	Key           string         `json:"key"`
	Slug          string         `json:"slug"`
	Name          string         `json:"name"`
	Description   string         `json:"description"`
	SourceType    string         `json:"sourceType"`
	SourceLocator *string        `json:"sourceLocator,omitempty"`
	SourceRef     *string        `json:"sourceRef,omitempty"`
	Metadata      map[string]any `json:"metadata,omitempty"`
}

// jsonObject decodes a JSON object into a map (nil for null or non-objects).
func jsonObject(raw json.RawMessage) map[string]any {
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	return m
}
