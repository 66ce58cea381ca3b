package kernel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"
	"github.com/invopop/jsonschema"
	"github.com/jackc/pgx/v5"

	"github.com/keelhq/keel/sdk/idem"
)

// Company statuses.
const (
	CompanyActive   = "active"
	CompanyPaused   = "paused"
	CompanyArchived = "archived"
)

// MaxAttachmentBytes is the largest per-company attachment limit (1 GiB).
const MaxAttachmentBytes = 1 << 30

// ErrIssuePrefixInUse is returned by CompanyInsert when an explicit issue prefix is taken.
var ErrIssuePrefixInUse = errors.New("issue prefix already in use")

// Company is a company record as the API shows it.
type Company struct {
	ID                                 string          `json:"id"`
	Name                               string          `json:"name"`
	Description                        *string         `json:"description"`
	Status                             string          `json:"status"`
	IssuePrefix                        string          `json:"issuePrefix"`
	IssueCounter                       int64           `json:"issueCounter"`
	BudgetMonthlyCents                 int64           `json:"budgetMonthlyCents"`
	SpentMonthlyCents                  int64           `json:"spentMonthlyCents"`
	DefaultResponsibleUserID           *string         `json:"defaultResponsibleUserId"`
	RequireBoardApprovalForNewAgents   bool            `json:"requireBoardApprovalForNewAgents"`
	InteractionResolverGovernance      json.RawMessage `json:"interactionResolverGovernance"`
	FeedbackDataSharingEnabled         bool            `json:"feedbackDataSharingEnabled"`
	FeedbackDataSharingConsentAt       *time.Time      `json:"feedbackDataSharingConsentAt"`
	FeedbackDataSharingConsentByUserID *string         `json:"feedbackDataSharingConsentByUserId"`
	FeedbackDataSharingTermsVersion    *string         `json:"feedbackDataSharingTermsVersion"`
	LogoAssetID                        *string         `json:"logoAssetId"`
	BrandColor                         *string         `json:"brandColor"`
	LogoURL                            *string         `json:"logoUrl"`
	AttachmentMaxBytes                 int64           `json:"attachmentMaxBytes"`
	PauseReason                        *string         `json:"pauseReason"`
	PausedAt                           *time.Time      `json:"pausedAt"`
	CreatedAt                          time.Time       `json:"createdAt"`
	UpdatedAt                          time.Time       `json:"updatedAt"`
}

// PatchField is one field of a partial update: Set says the field was given, Null that it
// was given as null (clearing a nullable column). The zero value leaves the field alone.
// In a JSON body an absent key leaves Set false.
type PatchField[T any] struct {
	Set   bool
	Null  bool
	Value T
}

// PatchValue returns a PatchField setting v.
func PatchValue[T any](v T) PatchField[T] { return PatchField[T]{Set: true, Value: v} }

// PatchNull returns a PatchField clearing the field.
func PatchNull[T any]() PatchField[T] { return PatchField[T]{Set: true, Null: true} }

// UnmarshalJSON records that the field was present, and whether it was null.
func (f *PatchField[T]) UnmarshalJSON(b []byte) error {
	f.Set = true
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		var zero T
		f.Null, f.Value = true, zero
		return nil
	}
	f.Null = false
	return json.Unmarshal(b, &f.Value)
}

// MarshalJSON writes the value, or null when unset or null.
func (f PatchField[T]) MarshalJSON() ([]byte, error) {
	if !f.Set || f.Null {
		return []byte("null"), nil
	}
	return json.Marshal(f.Value)
}

// JSONSchema documents the field as its value type or null.
func (f PatchField[T]) JSONSchema() *jsonschema.Schema {
	var inner *jsonschema.Schema
	switch any(f.Value).(type) {
	case string:
		inner = &jsonschema.Schema{Type: "string"}
	case int, int32, int64:
		inner = &jsonschema.Schema{Type: "integer"}
	case bool:
		inner = &jsonschema.Schema{Type: "boolean"}
	case json.RawMessage:
		inner = &jsonschema.Schema{Type: "object"}
	default:
		return &jsonschema.Schema{}
	}
	return &jsonschema.Schema{AnyOf: []*jsonschema.Schema{inner, {Type: "null"}}}
}

// ptr returns the field's value as a nullable SQL argument.
func (f PatchField[T]) ptr() *T {
	if f.Null {
		return nil
	}
	v := f.Value
	return &v
}

// detailList collects validation failures of one request.
type detailList []ValidationDetail

func (d *detailList) add(path, msg string) {
	*d = append(*d, ValidationDetail{Path: path, Message: msg})
}

func (d detailList) err() error {
	if len(d) == 0 {
		return nil
	}
	return ValidationError(d...)
}

var (
	issuePrefixPattern = regexp.MustCompile(`^[A-Z]{2,10}$`)
	brandColorPattern  = regexp.MustCompile(`^#[0-9A-Fa-f]{6}$`)
)

const (
	maxCompanyNameLen        = 200
	maxCompanyDescriptionLen = 10000
	maxPauseReasonLen        = 1000
	maxTermsVersionLen       = 200
	// maxKeyNameLen limits the label of an API key.
	maxKeyNameLen = 200
	maxLogoURLLen = 2048
)

func validLogoURL(s string) bool {
	if len(s) > maxLogoURLLen {
		return false
	}
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

func validCompanyStatus(s string) bool {
	return s == CompanyActive || s == CompanyPaused || s == CompanyArchived
}

// DeriveIssuePrefix returns the base issue prefix of a company name: its first three A–Z
// letters, uppercased, or CMP when it has none. Collisions append "A" (see CompanyInsert).
func DeriveIssuePrefix(name string) string {
	var b []byte
	for i := 0; i < len(name) && len(b) < 3; i++ {
		c := name[i]
		if c >= 'a' && c <= 'z' {
			c -= 'a' - 'A'
		}
		if c >= 'A' && c <= 'Z' {
			b = append(b, c)
		}
	}
	if len(b) == 0 {
		return "CMP"
	}
	return string(b)
}

const companyColumns = `id::text, name, description, status, issue_prefix, issue_counter, budget_monthly_cents,
	spent_monthly_cents, default_responsible_user_id, require_board_approval_for_new_agents,
	interaction_resolver_governance, feedback_data_sharing_enabled, feedback_data_sharing_consent_at,
	feedback_data_sharing_consent_by_user_id, feedback_data_sharing_terms_version, logo_asset_id, brand_color,
	logo_url, attachment_max_bytes, pause_reason, paused_at, created_at, updated_at`

func scanCompany(row pgx.Row) (*Company, error) {
	var c Company
	err := row.Scan(&c.ID, &c.Name, &c.Description, &c.Status, &c.IssuePrefix, &c.IssueCounter, &c.BudgetMonthlyCents,
		&c.SpentMonthlyCents, &c.DefaultResponsibleUserID, &c.RequireBoardApprovalForNewAgents,
		&c.InteractionResolverGovernance, &c.FeedbackDataSharingEnabled, &c.FeedbackDataSharingConsentAt,
		&c.FeedbackDataSharingConsentByUserID, &c.FeedbackDataSharingTermsVersion, &c.LogoAssetID, &c.BrandColor,
		&c.LogoURL, &c.AttachmentMaxBytes, &c.PauseReason, &c.PausedAt, &c.CreatedAt, &c.UpdatedAt)
	if err != nil {
		return nil, err
	}
	c.CreatedAt, c.UpdatedAt = c.CreatedAt.UTC(), c.UpdatedAt.UTC()
	for _, t := range []*time.Time{c.FeedbackDataSharingConsentAt, c.PausedAt} {
		if t != nil {
			*t = t.UTC()
		}
	}
	if len(c.InteractionResolverGovernance) == 0 {
		c.InteractionResolverGovernance = json.RawMessage("{}")
	}
	return &c, nil
}

// CompanyGetByID returns one company; a missing company (or a malformed id) is (nil, nil).
func (k *Kernel) CompanyGetByID(ctx context.Context, id string) (*Company, error) {
	if !isUUID(id) {
		return nil, nil
	}
	c, err := scanCompany(k.Pool.QueryRow(ctx, `SELECT `+companyColumns+` FROM kernel.companies WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("error reading company %s: %w", id, err)
	}
	return c, nil
}

// CompanyInsertParams describes a new company.
type CompanyInsertParams struct {
	Name        string
	Description *string
	// IssuePrefix is used as given (ErrIssuePrefixInUse when taken); empty derives one.
	IssuePrefix                      string
	BudgetMonthlyCents               int64
	AttachmentMaxBytes               int64 // 0 takes the instance default
	RequireBoardApprovalForNewAgents bool
	// DefaultResponsibleUserID defaults to CreatorUserID.
	DefaultResponsibleUserID string
	// CreatorUserID, when set, becomes an active owner member of the company.
	CreatorUserID string
}

// CompanyInsert creates a company and its creator's owner membership in one transaction.
// A derived issue prefix is the name's DeriveIssuePrefix, with "A" appended until it is free;
// concurrent inserts never fail on the prefix, each gets a distinct one. Like the other
// store methods it appends no activity: the caller records company.created.
func (k *Kernel) CompanyInsert(ctx context.Context, p *CompanyInsertParams) (*Company, error) {
	attachmentMax := p.AttachmentMaxBytes
	if attachmentMax <= 0 {
		attachmentMax = min(k.cfg.AttachmentMaxBytes, MaxAttachmentBytes)
	}
	responsible := p.DefaultResponsibleUserID
	if responsible == "" {
		responsible = p.CreatorUserID
	}
	tx, err := k.Pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("error creating company: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck

	id := newID()
	insert := func(prefix string) (*Company, error) {
		c, err := scanCompany(tx.QueryRow(ctx, `INSERT INTO kernel.companies
			(id, name, description, issue_prefix, budget_monthly_cents, attachment_max_bytes,
			 require_board_approval_for_new_agents, default_responsible_user_id)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
			ON CONFLICT (issue_prefix) DO NOTHING
			RETURNING `+companyColumns,
			id, p.Name, p.Description, prefix, p.BudgetMonthlyCents, attachmentMax,
			p.RequireBoardApprovalForNewAgents, nullable(responsible)))
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, nil
		}
		return c, err
	}

	var company *Company
	if p.IssuePrefix != "" {
		company, err = insert(p.IssuePrefix)
		if err != nil {
			return nil, fmt.Errorf("error creating company: %w", err)
		}
		if company == nil {
			return nil, ErrIssuePrefixInUse
		}
	} else {
		base := DeriveIssuePrefix(p.Name)
		taken := map[string]bool{}
		rows, err := tx.Query(ctx, `SELECT issue_prefix FROM kernel.companies WHERE issue_prefix ~ $1`, "^"+base+"A*$")
		if err != nil {
			return nil, fmt.Errorf("error reading issue prefixes: %w", err)
		}
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				rows.Close()
				return nil, fmt.Errorf("error reading issue prefixes: %w", err)
			}
			taken[s] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("error reading issue prefixes: %w", err)
		}
		candidate := base
		// Each failed attempt means another transaction committed that prefix meanwhile.
		for attempt := 0; company == nil; attempt++ {
			if attempt == 1000 {
				return nil, fmt.Errorf("error creating company: no free issue prefix after %d attempts", attempt)
			}
			for taken[candidate] {
				candidate += "A"
			}
			company, err = insert(candidate)
			if err != nil {
				return nil, fmt.Errorf("error creating company: %w", err)
			}
			taken[candidate] = true
		}
	}
	if p.CreatorUserID != "" {
		if _, err := tx.Exec(ctx, `INSERT INTO kernel.company_memberships
			(id, company_id, principal_type, principal_id, status, membership_role)
			VALUES ($1, $2, 'user', $3, 'active', 'owner') ON CONFLICT DO NOTHING`,
			newID(), company.ID, p.CreatorUserID); err != nil {
			return nil, fmt.Errorf("error adding company owner: %w", err)
		}
	}
	if answer, err := json.Marshal(company); err == nil {
		// A create retried with the same Idempotency-Key after this commit gets this answer.
		if err := idem.RecordAnswer(ctx, tx, http.StatusCreated, fiber.MIMEApplicationJSONCharsetUTF8, answer); err != nil {
			return nil, err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("error creating company: %w", err)
	}
	return company, nil
}

// CompanyListParams filters CompanyList.
type CompanyListParams struct {
	// All lists every company; otherwise only those in IDs.
	All bool
	IDs []string
	// IncludeArchived also lists archived companies.
	IncludeArchived bool
}

// CompanyList returns companies in creation order.
func (k *Kernel) CompanyList(ctx context.Context, p *CompanyListParams) ([]*Company, error) {
	ids := p.IDs
	if ids == nil {
		ids = []string{}
	}
	rows, err := k.Pool.Query(ctx, `SELECT `+companyColumns+` FROM kernel.companies
		WHERE ($1 OR id = ANY($2::uuid[])) AND ($3 OR status <> 'archived')
		ORDER BY created_at, id`, p.All, ids, p.IncludeArchived)
	if err != nil {
		return nil, fmt.Errorf("error listing companies: %w", err)
	}
	defer rows.Close()
	out := []*Company{}
	for rows.Next() {
		c, err := scanCompany(rows)
		if err != nil {
			return nil, fmt.Errorf("error listing companies: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error listing companies: %w", err)
	}
	return out, nil
}

// CompanyUpdateParams is a partial update of a company; unset fields are left alone.
type CompanyUpdateParams struct {
	ID                               string
	Name                             PatchField[string]
	Description                      PatchField[string]
	Status                           PatchField[string]
	PauseReason                      PatchField[string]
	BudgetMonthlyCents               PatchField[int64]
	SpentMonthlyCents                PatchField[int64]
	RequireBoardApprovalForNewAgents PatchField[bool]
	AttachmentMaxBytes               PatchField[int64]
	BrandColor                       PatchField[string]
	LogoURL                          PatchField[string]
	LogoAssetID                      PatchField[string]
	DefaultResponsibleUserID         PatchField[string]
	InteractionResolverGovernance    PatchField[json.RawMessage]
	FeedbackDataSharingEnabled       PatchField[bool]
	FeedbackDataSharingTermsVersion  PatchField[string]
	// ConsentByUserID is recorded as the consenting user when feedback sharing is enabled.
	ConsentByUserID string
}

// CompanyUpdate applies a partial update and returns the company; a missing company is
// (nil, nil). Setting the status keeps pausedAt/pauseReason only while paused.
func (k *Kernel) CompanyUpdate(ctx context.Context, p *CompanyUpdateParams) (*Company, error) {
	if !isUUID(p.ID) {
		return nil, nil
	}
	args := []any{p.ID}
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	sets := []string{"updated_at = now()"}
	set := func(column string, v any) { sets = append(sets, column+" = "+arg(v)) }
	if p.Name.Set {
		set("name", p.Name.Value)
	}
	if p.Description.Set {
		set("description", p.Description.ptr())
	}
	if p.Status.Set {
		st := arg(p.Status.Value)
		reason := "pause_reason"
		if p.PauseReason.Set {
			reason = arg(p.PauseReason.ptr()) + "::text"
		}
		sets = append(sets,
			"status = "+st,
			"paused_at = CASE WHEN "+st+"::text = 'paused' THEN COALESCE(paused_at, now()) END",
			"pause_reason = CASE WHEN "+st+"::text = 'paused' THEN "+reason+" END",
			"archived_at = CASE WHEN "+st+"::text = 'archived' THEN COALESCE(archived_at, now()) END")
	} else if p.PauseReason.Set {
		set("pause_reason", p.PauseReason.ptr())
	}
	if p.BudgetMonthlyCents.Set {
		set("budget_monthly_cents", p.BudgetMonthlyCents.Value)
	}
	if p.SpentMonthlyCents.Set {
		set("spent_monthly_cents", p.SpentMonthlyCents.Value)
	}
	if p.RequireBoardApprovalForNewAgents.Set {
		set("require_board_approval_for_new_agents", p.RequireBoardApprovalForNewAgents.Value)
	}
	if p.AttachmentMaxBytes.Set {
		set("attachment_max_bytes", p.AttachmentMaxBytes.Value)
	}
	if p.BrandColor.Set {
		set("brand_color", p.BrandColor.ptr())
	}
	if p.LogoURL.Set {
		set("logo_url", p.LogoURL.ptr())
	}
	if p.LogoAssetID.Set {
		set("logo_asset_id", p.LogoAssetID.ptr())
	}
	if p.DefaultResponsibleUserID.Set {
		set("default_responsible_user_id", p.DefaultResponsibleUserID.ptr())
	}
	if p.InteractionResolverGovernance.Set {
		v := p.InteractionResolverGovernance.Value
		if p.InteractionResolverGovernance.Null || len(v) == 0 {
			v = json.RawMessage("{}")
		}
		set("interaction_resolver_governance", v)
	}
	if p.FeedbackDataSharingEnabled.Set {
		on := arg(p.FeedbackDataSharingEnabled.Value) + "::boolean"
		by := arg(nullable(p.ConsentByUserID)) + "::text"
		sets = append(sets,
			"feedback_data_sharing_enabled = "+on,
			"feedback_data_sharing_consent_at = CASE WHEN "+on+" THEN CASE WHEN feedback_data_sharing_enabled THEN feedback_data_sharing_consent_at ELSE now() END END",
			"feedback_data_sharing_consent_by_user_id = CASE WHEN "+on+" THEN CASE WHEN feedback_data_sharing_enabled THEN feedback_data_sharing_consent_by_user_id ELSE "+by+" END END")
	}
	if p.FeedbackDataSharingTermsVersion.Set {
		set("feedback_data_sharing_terms_version", p.FeedbackDataSharingTermsVersion.ptr())
	}
	c, err := scanCompany(k.Pool.QueryRow(ctx, `UPDATE kernel.companies SET `+strings.Join(sets, ", ")+
		` WHERE id = $1 RETURNING `+companyColumns, args...))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("error updating company %s: %w", p.ID, err)
	}
	return c, nil
}

// CompanyDelete deletes a company with its memberships, grants, agents and agent keys, and
// records entry (a "company.deleted" activity entry) in the same transaction; its delivery
// tells every extension to purge the company's rows and files, at least once, even if keel
// stops right after the delete. The activity log keeps the company's entries. It reports
// whether the company existed.
func (k *Kernel) CompanyDelete(ctx context.Context, id string, entry *ActivityInsertParams) (bool, error) {
	if !isUUID(id) {
		return false, nil
	}
	e, err := newActivityEntry(entry)
	if err != nil {
		return false, err
	}
	tx, err := k.Pool.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("error deleting company %s: %w", id, err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	tag, err := tx.Exec(ctx, `DELETE FROM kernel.companies WHERE id = $1`, id)
	if err != nil {
		return false, fmt.Errorf("error deleting company %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return false, nil
	}
	if err := k.activityInsertTx(ctx, tx, entry, e); err != nil {
		return false, err
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("error deleting company %s: %w", id, err)
	}
	k.feed.notify(id)
	k.forgetCompany(id)
	return true, nil
}

// CompanyStats are instance-level company statistics over the companies the caller sees.
type CompanyStats struct {
	Total                   int                          `json:"total"`
	ByStatus                map[string]int               `json:"byStatus"`
	TotalAgents             int                          `json:"totalAgents"`
	AgentsByStatus          map[string]int               `json:"agentsByStatus"`
	TotalMembers            int                          `json:"totalMembers"`
	TotalBudgetMonthlyCents int64                        `json:"totalBudgetMonthlyCents"`
	TotalSpentMonthlyCents  int64                        `json:"totalSpentMonthlyCents"`
	Companies               map[string]CompanyStatsEntry `json:"companies"`
}

// CompanyStatsEntry are one company's counts.
type CompanyStatsEntry struct {
	Status       string `json:"status"`
	AgentCount   int    `json:"agentCount"`
	MemberCount  int    `json:"memberCount"`
	IssueCounter int64  `json:"issueCounter"`
}

// CompanyStatsGetParams selects the companies CompanyStatsGet counts.
type CompanyStatsGetParams struct {
	// All counts every company; otherwise only those in IDs.
	All bool
	IDs []string
}

// CompanyStatsGet computes statistics over the selected companies, archived included.
func (k *Kernel) CompanyStatsGet(ctx context.Context, p *CompanyStatsGetParams) (*CompanyStats, error) {
	all, ids := p.All, p.IDs
	if ids == nil {
		ids = []string{}
	}
	st := &CompanyStats{
		ByStatus:       map[string]int{CompanyActive: 0, CompanyPaused: 0, CompanyArchived: 0},
		AgentsByStatus: map[string]int{},
		Companies:      map[string]CompanyStatsEntry{},
	}
	rows, err := k.Pool.Query(ctx, `SELECT c.id::text, c.status, c.issue_counter, c.budget_monthly_cents, c.spent_monthly_cents,
			(SELECT count(*) FROM kernel.agents a WHERE a.company_id = c.id AND a.status <> 'terminated'),
			(SELECT count(*) FROM kernel.company_memberships m WHERE m.company_id = c.id AND m.principal_type = 'user' AND m.status = 'active')
		FROM kernel.companies c WHERE $1 OR c.id = ANY($2::uuid[])`, all, ids)
	if err != nil {
		return nil, fmt.Errorf("error reading company statistics: %w", err)
	}
	for rows.Next() {
		var id string
		var e CompanyStatsEntry
		var budget, spent int64
		if err := rows.Scan(&id, &e.Status, &e.IssueCounter, &budget, &spent, &e.AgentCount, &e.MemberCount); err != nil {
			rows.Close()
			return nil, fmt.Errorf("error reading company statistics: %w", err)
		}
		st.Total++
		st.ByStatus[e.Status]++
		st.TotalAgents += e.AgentCount
		st.TotalMembers += e.MemberCount
		st.TotalBudgetMonthlyCents += budget
		st.TotalSpentMonthlyCents += spent
		st.Companies[id] = e
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error reading company statistics: %w", err)
	}
	rows, err = k.Pool.Query(ctx, `SELECT status, count(*) FROM kernel.agents WHERE $1 OR company_id = ANY($2::uuid[]) GROUP BY status`, all, ids)
	if err != nil {
		return nil, fmt.Errorf("error reading agent statistics: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var status string
		var n int
		if err := rows.Scan(&status, &n); err != nil {
			return nil, fmt.Errorf("error reading agent statistics: %w", err)
		}
		st.AgentsByStatus[status] = n
	}
	return st, rows.Err()
}

// seesAllCompanies reports whether the actor sees every company of the instance.
func seesAllCompanies(a *Actor) bool {
	return a.IsBoard() && (a.IsLocalImplicit() || a.IsInstanceAdmin)
}

// requireCompanyManager allows the trusted local board, instance admins and active owners
// or admins of the company (or only owners when ownerOnly).
func requireCompanyManager(a *Actor, companyID string, ownerOnly bool) error {
	if seesAllCompanies(a) {
		return nil
	}
	if m, ok := a.MembershipFor(companyID); ok && m.Status == "active" {
		if m.MembershipRole == "owner" || (!ownerOnly && m.MembershipRole == "admin") {
			return nil
		}
	}
	if ownerOnly {
		return Forbidden("Only company owners can do this")
	}
	return Forbidden("Only company owners and admins can change company settings")
}

// appendActorActivity appends an activity entry attributed to the request's actor.
func (k *Kernel) appendActorActivity(ctx context.Context, companyID, action, entityType, entityID string, details any) error {
	a := ActorFrom(ctx)
	actorType, actorID, agentID := ActorFields(a)
	_, err := k.ActivityInsert(ctx, &ActivityInsertParams{
		CompanyID: companyID, ActorType: actorType, ActorID: actorID, AgentID: agentID, RunID: a.RunID,
		Action: action, EntityType: entityType, EntityID: entityID, Details: details,
	})
	if err != nil {
		return Internal(err)
	}
	return nil
}

// companyRequest addresses one company by path.
type companyRequest struct {
	CompanyID string `path:"companyId" json:"-"`
}

// companyGet loads the company a route was authorized for (404 when it vanished since).
func (k *Kernel) companyGet(ctx context.Context, id string) (*Company, error) {
	c, err := k.CompanyGetByID(ctx, id)
	if err != nil {
		return nil, Internal(err)
	}
	if c == nil {
		return nil, NotFound("Company not found")
	}
	return c, nil
}

type companyListRequest struct {
	IncludeArchived bool `query:"includeArchived"`
}

type companyListEndpoint struct{ k *Kernel }

func (e *companyListEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "GET /api/companies", Access: AccessEither,
		Summary: "List the companies visible to the caller (archived ones with includeArchived=true)"}
}

func (e *companyListEndpoint) Execute(ctx context.Context, req *companyListRequest) (*[]*Company, error) {
	a := ActorFrom(ctx)
	list, err := e.k.CompanyList(ctx, &CompanyListParams{All: seesAllCompanies(a), IDs: a.CompanyIDs(), IncludeArchived: req.IncludeArchived})
	if err != nil {
		return nil, Internal(err)
	}
	return &list, nil
}

type companyStatsEndpoint struct{ k *Kernel }

func (e *companyStatsEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "GET /api/companies/stats", Access: AccessBoard,
		Summary: "Instance-level company statistics over the companies the caller sees"}
}

func (e *companyStatsEndpoint) Execute(ctx context.Context, _ *struct{}) (*CompanyStats, error) {
	a := ActorFrom(ctx)
	st, err := e.k.CompanyStatsGet(ctx, &CompanyStatsGetParams{All: seesAllCompanies(a), IDs: a.CompanyIDs()})
	if err != nil {
		return nil, Internal(err)
	}
	return st, nil
}

type companyGetEndpoint struct{ k *Kernel }

func (e *companyGetEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "GET /api/companies/{companyId}", Access: AccessEither, CompanyFrom: CompanyFromPath,
		Summary: "Read one company"}
}

func (e *companyGetEndpoint) Execute(ctx context.Context, req *companyRequest) (*Company, error) {
	return e.k.companyGet(ctx, req.CompanyID)
}

type companyCreateRequest struct {
	Name                             string  `json:"name" jsonschema:"required,minLength=1,maxLength=200"`
	Description                      *string `json:"description,omitempty"`
	IssuePrefix                      *string `json:"issuePrefix,omitempty" jsonschema:"pattern=^[A-Za-z]{2\\,10}$"`
	BudgetMonthlyCents               *int64  `json:"budgetMonthlyCents,omitempty" jsonschema:"minimum=0"`
	AttachmentMaxBytes               *int64  `json:"attachmentMaxBytes,omitempty" jsonschema:"minimum=1,maximum=1073741824"`
	RequireBoardApprovalForNewAgents *bool   `json:"requireBoardApprovalForNewAgents,omitempty"`
	DefaultResponsibleUserID         *string `json:"defaultResponsibleUserId,omitempty"`
}

type companyCreateEndpoint struct{ k *Kernel }

func (e *companyCreateEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "POST /api/companies", Status: http.StatusCreated, Access: AccessBoard,
		Summary: "Create a company; the creator becomes its owner"}
}

func (e *companyCreateEndpoint) Execute(ctx context.Context, req *companyCreateRequest) (*Company, error) {
	a := ActorFrom(ctx)
	var d detailList
	name := strings.TrimSpace(req.Name)
	if name == "" {
		d.add("name", "is required")
	} else if utf8.RuneCountInString(name) > maxCompanyNameLen {
		d.add("name", "must be at most 200 characters")
	}
	if req.Description != nil && utf8.RuneCountInString(*req.Description) > maxCompanyDescriptionLen {
		d.add("description", "must be at most 10000 characters")
	}
	prefix := ""
	if req.IssuePrefix != nil {
		prefix = strings.ToUpper(strings.TrimSpace(*req.IssuePrefix))
		if !issuePrefixPattern.MatchString(prefix) {
			d.add("issuePrefix", "must be 2 to 10 letters A-Z")
		}
	}
	var budget, attachmentMax int64
	if req.BudgetMonthlyCents != nil {
		budget = *req.BudgetMonthlyCents
		if budget < 0 {
			d.add("budgetMonthlyCents", "must be at least 0")
		}
	}
	if req.AttachmentMaxBytes != nil {
		attachmentMax = *req.AttachmentMaxBytes
		if attachmentMax < 1 || attachmentMax > MaxAttachmentBytes {
			d.add("attachmentMaxBytes", "must be between 1 and 1073741824 (1 GiB)")
		}
	}
	responsible := ""
	if req.DefaultResponsibleUserID != nil && *req.DefaultResponsibleUserID != "" {
		responsible = *req.DefaultResponsibleUserID
		ok, err := e.k.userExists(ctx, responsible)
		if err != nil {
			return nil, Internal(err)
		}
		if !ok {
			d.add("defaultResponsibleUserId", "user not found")
		}
	}
	if err := d.err(); err != nil {
		return nil, err
	}
	c, err := e.k.CompanyInsert(ctx, &CompanyInsertParams{
		Name: name, Description: req.Description, IssuePrefix: prefix, BudgetMonthlyCents: budget,
		AttachmentMaxBytes: attachmentMax, RequireBoardApprovalForNewAgents: req.RequireBoardApprovalForNewAgents != nil && *req.RequireBoardApprovalForNewAgents,
		DefaultResponsibleUserID: responsible, CreatorUserID: a.UserID,
	})
	if errors.Is(err, ErrIssuePrefixInUse) {
		return nil, Conflict("Issue prefix already in use")
	}
	if err != nil {
		return nil, Internal(err)
	}
	if err := e.k.appendActorActivity(ctx, c.ID, "company.created", "company", c.ID,
		map[string]any{"name": c.Name, "issuePrefix": c.IssuePrefix}); err != nil {
		return nil, err
	}
	e.k.notifyCompanyCreated(c.ID)
	return c, nil
}

func (k *Kernel) userExists(ctx context.Context, id string) (bool, error) {
	var ok bool
	if err := k.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM kernel.users WHERE id = $1)`, id).Scan(&ok); err != nil {
		return false, fmt.Errorf("error reading user %s: %w", id, err)
	}
	return ok, nil
}

type companyUpdateRequest struct {
	CompanyID                        string                      `path:"companyId" json:"-"`
	Name                             PatchField[string]          `json:"name"`
	Description                      PatchField[string]          `json:"description"`
	Status                           PatchField[string]          `json:"status" jsonschema:"enum=active,enum=paused,enum=archived"`
	PauseReason                      PatchField[string]          `json:"pauseReason"`
	BudgetMonthlyCents               PatchField[int64]           `json:"budgetMonthlyCents"`
	SpentMonthlyCents                PatchField[int64]           `json:"spentMonthlyCents"`
	RequireBoardApprovalForNewAgents PatchField[bool]            `json:"requireBoardApprovalForNewAgents"`
	AttachmentMaxBytes               PatchField[int64]           `json:"attachmentMaxBytes"`
	BrandColor                       PatchField[string]          `json:"brandColor"`
	LogoURL                          PatchField[string]          `json:"logoUrl"`
	DefaultResponsibleUserID         PatchField[string]          `json:"defaultResponsibleUserId"`
	InteractionResolverGovernance    PatchField[json.RawMessage] `json:"interactionResolverGovernance"`
	FeedbackDataSharingEnabled       PatchField[bool]            `json:"feedbackDataSharingEnabled"`
	FeedbackDataSharingTermsVersion  PatchField[string]          `json:"feedbackDataSharingTermsVersion"`
}

type companyUpdateEndpoint struct{ k *Kernel }

func (e *companyUpdateEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "PATCH /api/companies/{companyId}", Access: AccessBoard, CompanyFrom: CompanyFromPath,
		Summary: "Update a company (owners and admins)"}
}

func (e *companyUpdateEndpoint) Execute(ctx context.Context, req *companyUpdateRequest) (*Company, error) {
	a := ActorFrom(ctx)
	if err := requireCompanyManager(a, req.CompanyID, false); err != nil {
		return nil, err
	}
	var d detailList
	changes := map[string]any{}
	note := func(key string, set, null bool, v any) {
		if set {
			if null {
				changes[key] = nil
			} else {
				changes[key] = v
			}
		}
	}
	if req.Name.Set {
		req.Name.Value = strings.TrimSpace(req.Name.Value)
		switch n := utf8.RuneCountInString(req.Name.Value); {
		case req.Name.Null || n == 0:
			d.add("name", "must be a non-empty string")
		case n > maxCompanyNameLen:
			d.add("name", "must be at most 200 characters")
		}
	}
	note("name", req.Name.Set, false, req.Name.Value)
	if req.Description.Set && utf8.RuneCountInString(req.Description.Value) > maxCompanyDescriptionLen {
		d.add("description", "must be at most 10000 characters")
	}
	note("description", req.Description.Set, req.Description.Null, req.Description.Value)
	if req.Status.Set && (req.Status.Null || !validCompanyStatus(req.Status.Value)) {
		d.add("status", "must be one of active, paused, archived")
	}
	note("status", req.Status.Set, false, req.Status.Value)
	if req.PauseReason.Set && utf8.RuneCountInString(req.PauseReason.Value) > maxPauseReasonLen {
		d.add("pauseReason", fmt.Sprintf("must be at most %d characters", maxPauseReasonLen))
	}
	note("pauseReason", req.PauseReason.Set, req.PauseReason.Null, req.PauseReason.Value)
	for _, f := range []struct {
		key string
		v   *PatchField[int64]
		max int64
	}{{"budgetMonthlyCents", &req.BudgetMonthlyCents, 0}, {"spentMonthlyCents", &req.SpentMonthlyCents, 0}, {"attachmentMaxBytes", &req.AttachmentMaxBytes, MaxAttachmentBytes}} {
		if !f.v.Set {
			continue
		}
		switch {
		case f.v.Null:
			d.add(f.key, "must be an integer")
		case f.max > 0 && (f.v.Value < 1 || f.v.Value > f.max):
			d.add(f.key, "must be between 1 and 1073741824 (1 GiB)")
		case f.v.Value < 0:
			d.add(f.key, "must be at least 0")
		}
		note(f.key, true, false, f.v.Value)
	}
	if req.RequireBoardApprovalForNewAgents.Set && req.RequireBoardApprovalForNewAgents.Null {
		d.add("requireBoardApprovalForNewAgents", "must be a boolean")
	}
	note("requireBoardApprovalForNewAgents", req.RequireBoardApprovalForNewAgents.Set, false, req.RequireBoardApprovalForNewAgents.Value)
	validateBranding(&d, req.BrandColor, req.LogoURL)
	note("brandColor", req.BrandColor.Set, req.BrandColor.Null, req.BrandColor.Value)
	note("logoUrl", req.LogoURL.Set, req.LogoURL.Null, req.LogoURL.Value)
	if f := req.DefaultResponsibleUserID; f.Set && !f.Null {
		ok, err := e.k.userExists(ctx, f.Value)
		if err != nil {
			return nil, Internal(err)
		}
		if !ok {
			d.add("defaultResponsibleUserId", "user not found")
		}
	}
	note("defaultResponsibleUserId", req.DefaultResponsibleUserID.Set, req.DefaultResponsibleUserID.Null, req.DefaultResponsibleUserID.Value)
	if f := req.InteractionResolverGovernance; f.Set && !f.Null && !bytes.HasPrefix(bytes.TrimSpace(f.Value), []byte("{")) {
		d.add("interactionResolverGovernance", "must be an object")
	}
	note("interactionResolverGovernance", req.InteractionResolverGovernance.Set, req.InteractionResolverGovernance.Null, req.InteractionResolverGovernance.Value)
	if req.FeedbackDataSharingEnabled.Set && req.FeedbackDataSharingEnabled.Null {
		d.add("feedbackDataSharingEnabled", "must be a boolean")
	}
	note("feedbackDataSharingEnabled", req.FeedbackDataSharingEnabled.Set, false, req.FeedbackDataSharingEnabled.Value)
	if req.FeedbackDataSharingTermsVersion.Set && utf8.RuneCountInString(req.FeedbackDataSharingTermsVersion.Value) > maxTermsVersionLen {
		d.add("feedbackDataSharingTermsVersion", fmt.Sprintf("must be at most %d characters", maxTermsVersionLen))
	}
	note("feedbackDataSharingTermsVersion", req.FeedbackDataSharingTermsVersion.Set, req.FeedbackDataSharingTermsVersion.Null, req.FeedbackDataSharingTermsVersion.Value)
	if err := d.err(); err != nil {
		return nil, err
	}
	before, err := e.k.companyGet(ctx, req.CompanyID)
	if err != nil {
		return nil, err
	}
	if len(changes) == 0 {
		return before, nil
	}
	if req.Name.Set {
		req.Name.Value = strings.TrimSpace(req.Name.Value)
	}
	c, err := e.k.CompanyUpdate(ctx, &CompanyUpdateParams{
		ID: req.CompanyID, Name: req.Name, Description: req.Description, Status: req.Status, PauseReason: req.PauseReason,
		BudgetMonthlyCents: req.BudgetMonthlyCents, SpentMonthlyCents: req.SpentMonthlyCents,
		RequireBoardApprovalForNewAgents: req.RequireBoardApprovalForNewAgents, AttachmentMaxBytes: req.AttachmentMaxBytes,
		BrandColor: req.BrandColor, LogoURL: req.LogoURL, DefaultResponsibleUserID: req.DefaultResponsibleUserID,
		InteractionResolverGovernance: req.InteractionResolverGovernance, FeedbackDataSharingEnabled: req.FeedbackDataSharingEnabled,
		FeedbackDataSharingTermsVersion: req.FeedbackDataSharingTermsVersion, ConsentByUserID: a.UserID,
	})
	if err != nil {
		return nil, Internal(err)
	}
	if c == nil {
		return nil, NotFound("Company not found")
	}
	action := "company.updated"
	if before.Status != CompanyArchived && c.Status == CompanyArchived {
		action = "company.archived"
	}
	if err := e.k.appendActorActivity(ctx, c.ID, action, "company", c.ID,
		map[string]any{"changes": changes, "previousStatus": before.Status}); err != nil {
		return nil, err
	}
	return c, nil
}

func validateBranding(d *detailList, brandColor, logoURL PatchField[string]) {
	if brandColor.Set && !brandColor.Null && !brandColorPattern.MatchString(brandColor.Value) {
		d.add("brandColor", "must be a hex colour #RRGGBB or null")
	}
	if logoURL.Set && !logoURL.Null && !validLogoURL(logoURL.Value) {
		d.add("logoUrl", "must be an http(s) URL or null")
	}
}

type companyBrandingRequest struct {
	CompanyID  string             `path:"companyId" json:"-"`
	BrandColor PatchField[string] `json:"brandColor" jsonschema:"pattern=^#[0-9A-Fa-f]{6}$"`
	LogoURL    PatchField[string] `json:"logoUrl"`
}

type companyBrandingEndpoint struct{ k *Kernel }

func (e *companyBrandingEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "PATCH /api/companies/{companyId}/branding", Access: AccessBoard, CompanyFrom: CompanyFromPath,
		Summary: "Update a company's branding (brandColor, logoUrl)"}
}

func (e *companyBrandingEndpoint) Execute(ctx context.Context, req *companyBrandingRequest) (*Company, error) {
	if err := requireCompanyManager(ActorFrom(ctx), req.CompanyID, false); err != nil {
		return nil, err
	}
	if !req.BrandColor.Set && !req.LogoURL.Set {
		// Other fields are ignored, so a body without a branding field changes nothing: the
		// reference product refuses it.
		return nil, ValidationError(ValidationDetail{Path: "", Message: "At least one branding field must be provided"})
	}
	var d detailList
	validateBranding(&d, req.BrandColor, req.LogoURL)
	if err := d.err(); err != nil {
		return nil, err
	}
	c, err := e.k.CompanyUpdate(ctx, &CompanyUpdateParams{ID: req.CompanyID, BrandColor: req.BrandColor, LogoURL: req.LogoURL})
	if err != nil {
		return nil, Internal(err)
	}
	if c == nil {
		return nil, NotFound("Company not found")
	}
	if err := e.k.appendActorActivity(ctx, c.ID, "company.branding_updated", "company", c.ID,
		map[string]any{"brandColor": c.BrandColor, "logoUrl": c.LogoURL}); err != nil {
		return nil, err
	}
	return c, nil
}

type companyArchiveEndpoint struct{ k *Kernel }

func (e *companyArchiveEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "POST /api/companies/{companyId}/archive", Access: AccessBoard, CompanyFrom: CompanyFromPath,
		Summary: "Archive a company (reversible with PATCH status active)"}
}

func (e *companyArchiveEndpoint) Execute(ctx context.Context, req *companyRequest) (*Company, error) {
	if err := requireCompanyManager(ActorFrom(ctx), req.CompanyID, false); err != nil {
		return nil, err
	}
	before, err := e.k.companyGet(ctx, req.CompanyID)
	if err != nil {
		return nil, err
	}
	if before.Status == CompanyArchived {
		return before, nil
	}
	c, err := e.k.CompanyUpdate(ctx, &CompanyUpdateParams{ID: req.CompanyID, Status: PatchValue(CompanyArchived)})
	if err != nil {
		return nil, Internal(err)
	}
	if c == nil {
		return nil, NotFound("Company not found")
	}
	if err := e.k.appendActorActivity(ctx, c.ID, "company.archived", "company", c.ID,
		map[string]any{"previousStatus": before.Status}); err != nil {
		return nil, err
	}
	return c, nil
}

// CompanyDeleted is the body of a successful company deletion.
type CompanyDeleted struct {
	OK bool   `json:"ok"`
	ID string `json:"id"`
}

type companyDeleteEndpoint struct{ k *Kernel }

func (e *companyDeleteEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "DELETE /api/companies/{companyId}", Access: AccessBoard, CompanyFrom: CompanyFromPath,
		Summary: "Delete a company (only when company deletion is enabled; owners)"}
}

func (e *companyDeleteEndpoint) Execute(ctx context.Context, req *companyRequest) (*CompanyDeleted, error) {
	if !e.k.cfg.EnableCompanyDeletion {
		return nil, Forbidden("Company deletion is disabled")
	}
	if err := requireCompanyManager(ActorFrom(ctx), req.CompanyID, true); err != nil {
		return nil, err
	}
	c, err := e.k.companyGet(ctx, req.CompanyID)
	if err != nil {
		return nil, err
	}
	a := ActorFrom(ctx)
	actorType, actorID, agentID := ActorFields(a)
	ok, err := e.k.CompanyDelete(ctx, req.CompanyID, &ActivityInsertParams{
		CompanyID: c.ID, ActorType: actorType, ActorID: actorID, AgentID: agentID, RunID: a.RunID,
		Action: "company.deleted", EntityType: "company", EntityID: c.ID,
		Details: map[string]any{"name": c.Name, "issuePrefix": c.IssuePrefix},
	})
	if err != nil {
		return nil, Internal(err)
	}
	if !ok {
		return nil, NotFound("Company not found")
	}
	return &CompanyDeleted{OK: true, ID: c.ID}, nil
}

func (k *Kernel) companyRoutes() []*Route {
	return []*Route{
		Mount[companyListRequest, []*Company](&companyListEndpoint{k}),
		Mount[struct{}, CompanyStats](&companyStatsEndpoint{k}),
		Mount[companyRequest, Company](&companyGetEndpoint{k}),
		Mount[companyCreateRequest, Company](&companyCreateEndpoint{k}),
		Mount[companyUpdateRequest, Company](&companyUpdateEndpoint{k}),
		Mount[companyBrandingRequest, Company](&companyBrandingEndpoint{k}),
		Mount[companyRequest, Company](&companyArchiveEndpoint{k}),
		Mount[companyRequest, CompanyDeleted](&companyDeleteEndpoint{k}),
	}
}
