package kernel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Membership roles and statuses (REFERENCE.md 2.11). "member" is kept for agents and
// normalised to operator for users.
var (
	MembershipRoles    = []string{"owner", "admin", "operator", "viewer", "member"}
	MembershipStatuses = []string{"pending", "active", "suspended", "archived"}
)

// Principal types of memberships and grants.
const (
	PrincipalUser  = "user"
	PrincipalAgent = "agent"
)

// Member is one company membership as the API shows it, with the principal's explicit
// permission grants (role defaults are not repeated here).
type Member struct {
	ID             string         `json:"id"`
	CompanyID      string         `json:"companyId"`
	PrincipalType  string         `json:"principalType"`
	PrincipalID    string         `json:"principalId"`
	Status         string         `json:"status"`
	MembershipRole string         `json:"membershipRole"`
	Grants         []*MemberGrant `json:"grants"`
	// User is set for user principals.
	User *MemberUser `json:"user,omitempty"`
	// Agent is set for agent principals.
	Agent     *MemberAgent `json:"agent,omitempty"`
	CreatedAt time.Time    `json:"createdAt"`
	UpdatedAt time.Time    `json:"updatedAt"`
}

// MemberUser is the user behind a user membership.
type MemberUser struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Email string `json:"email"`
}

// MemberAgent is the agent behind an agent membership.
type MemberAgent struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Role   string `json:"role"`
	Status string `json:"status"`
}

// MemberGrant is one explicit permission grant.
type MemberGrant struct {
	PermissionKey   string          `json:"permissionKey"`
	Scope           json.RawMessage `json:"scope"`
	GrantedByUserID *string         `json:"grantedByUserId"`
	CreatedAt       time.Time       `json:"createdAt"`
}

// normalizeMembershipRole maps "member" to operator for users and checks the role.
func normalizeMembershipRole(principalType, role string) (string, bool) {
	if !slices.Contains(MembershipRoles, role) {
		return "", false
	}
	if role == "member" && principalType == PrincipalUser {
		return "operator", true
	}
	return role, true
}

func validPrincipalType(t string) bool { return t == PrincipalUser || t == PrincipalAgent }

// MembershipEnsure makes sure the principal is an active member of the company: a missing
// membership is created with the role (member becomes operator for users), an inactive one
// is reactivated keeping its role. A new membership appends member.added.
func (k *Kernel) MembershipEnsure(ctx context.Context, companyID, principalType, principalID, role string) error {
	if !validPrincipalType(principalType) {
		return fmt.Errorf("error ensuring membership: unknown principal type %q", principalType)
	}
	norm, ok := normalizeMembershipRole(principalType, role)
	if !ok {
		return fmt.Errorf("error ensuring membership: unknown membership role %q", role)
	}
	var id string
	var inserted bool
	err := k.Pool.QueryRow(ctx, `INSERT INTO kernel.company_memberships
		(id, company_id, principal_type, principal_id, status, membership_role) VALUES ($1, $2, $3, $4, 'active', $5)
		ON CONFLICT (company_id, principal_type, principal_id) DO UPDATE SET status = 'active', updated_at = now()
			WHERE kernel.company_memberships.status <> 'active'
		RETURNING id::text, xmax = 0`, newID(), companyID, principalType, principalID, norm).Scan(&id, &inserted)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // already active
	}
	if err != nil {
		return fmt.Errorf("error ensuring membership of %s %s in company %s: %w", principalType, principalID, companyID, err)
	}
	action := "member.reactivated"
	if inserted {
		action = "member.added"
	}
	_, err = k.ActivityInsert(ctx, &ActivityInsertParams{CompanyID: companyID, Action: action, EntityType: "member", EntityID: id,
		Details: map[string]any{"principalType": principalType, "principalId": principalID, "membershipRole": norm}})
	return err
}

// GrantPermission gives a principal an explicit permission key in a company (no-op when it
// already holds it) and appends permission.granted, attributed to grantedBy when set.
func (k *Kernel) GrantPermission(ctx context.Context, companyID, principalType, principalID, key, grantedBy string) error {
	if !slices.Contains(PermissionKeys, key) {
		return fmt.Errorf("error granting permission: unknown permission key %q", key)
	}
	if !validPrincipalType(principalType) {
		return fmt.Errorf("error granting permission: unknown principal type %q", principalType)
	}
	tag, err := k.Pool.Exec(ctx, `INSERT INTO kernel.principal_permission_grants
		(id, company_id, principal_type, principal_id, permission_key, granted_by_user_id) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (company_id, principal_type, principal_id, permission_key) DO NOTHING`,
		newID(), companyID, principalType, principalID, key, nullable(grantedBy))
	if err != nil {
		return fmt.Errorf("error granting %s to %s %s: %w", key, principalType, principalID, err)
	}
	if tag.RowsAffected() == 0 {
		return nil
	}
	return k.grantActivity(ctx, "permission.granted", companyID, principalType, principalID, key, grantedBy)
}

// RevokePermission removes an explicit permission key (no-op when not held) and appends
// permission.revoked, attributed to revokedBy when set.
func (k *Kernel) RevokePermission(ctx context.Context, companyID, principalType, principalID, key, revokedBy string) error {
	tag, err := k.Pool.Exec(ctx, `DELETE FROM kernel.principal_permission_grants
		WHERE company_id = $1 AND principal_type = $2 AND principal_id = $3 AND permission_key = $4`,
		companyID, principalType, principalID, key)
	if err != nil {
		return fmt.Errorf("error revoking %s from %s %s: %w", key, principalType, principalID, err)
	}
	if tag.RowsAffected() == 0 {
		return nil
	}
	return k.grantActivity(ctx, "permission.revoked", companyID, principalType, principalID, key, revokedBy)
}

func (k *Kernel) grantActivity(ctx context.Context, action, companyID, principalType, principalID, key, by string) error {
	actorType := "system"
	if by != "" {
		actorType = "user"
	}
	_, err := k.ActivityInsert(ctx, &ActivityInsertParams{CompanyID: companyID, ActorType: actorType, ActorID: by,
		Action: action, EntityType: principalType, EntityID: principalID,
		Details: map[string]any{"permissionKey": key, "principalType": principalType, "principalId": principalID}})
	return err
}

// MemberListParams filters MemberList.
type MemberListParams struct {
	CompanyID     string
	PrincipalType string
	Status        string
	// ID selects one membership.
	ID string
}

// MemberList returns a company's memberships with their grants, owners first.
func (k *Kernel) MemberList(ctx context.Context, p *MemberListParams) ([]*Member, error) {
	rows, err := k.Pool.Query(ctx, `SELECT m.id::text, m.company_id::text, m.principal_type, m.principal_id, m.status,
			m.membership_role, m.created_at, m.updated_at, u.id, u.name, u.email, a.id::text, a.name, a.role, a.status
		FROM kernel.company_memberships m
		LEFT JOIN kernel.users u ON m.principal_type = 'user' AND u.id = m.principal_id
		LEFT JOIN kernel.agents a ON m.principal_type = 'agent' AND a.id::text = m.principal_id AND a.company_id = m.company_id
		WHERE m.company_id = $1 AND ($2 = '' OR m.principal_type = $2) AND ($3 = '' OR m.status = $3)
			AND ($4 = '' OR m.id::text = $4)
		ORDER BY array_position(ARRAY['owner','admin','operator','member','viewer'], m.membership_role), m.created_at, m.id`,
		p.CompanyID, p.PrincipalType, p.Status, p.ID)
	if err != nil {
		return nil, fmt.Errorf("error listing members: %w", err)
	}
	out := []*Member{}
	byPrincipal := map[string]*Member{}
	for rows.Next() {
		m := &Member{Grants: []*MemberGrant{}}
		var uID, uName, uEmail, aID, aName, aRole, aStatus *string
		if err := rows.Scan(&m.ID, &m.CompanyID, &m.PrincipalType, &m.PrincipalID, &m.Status, &m.MembershipRole,
			&m.CreatedAt, &m.UpdatedAt, &uID, &uName, &uEmail, &aID, &aName, &aRole, &aStatus); err != nil {
			rows.Close()
			return nil, fmt.Errorf("error listing members: %w", err)
		}
		m.CreatedAt, m.UpdatedAt = m.CreatedAt.UTC(), m.UpdatedAt.UTC()
		if uID != nil {
			m.User = &MemberUser{ID: *uID, Name: *uName, Email: *uEmail}
		}
		if aID != nil {
			m.Agent = &MemberAgent{ID: *aID, Name: *aName, Role: *aRole, Status: *aStatus}
		}
		out = append(out, m)
		byPrincipal[m.PrincipalType+"\x00"+m.PrincipalID] = m
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error listing members: %w", err)
	}
	if len(out) == 0 {
		return out, nil
	}
	grants, err := k.Pool.Query(ctx, `SELECT principal_type, principal_id, permission_key, scope, granted_by_user_id, created_at
		FROM kernel.principal_permission_grants WHERE company_id = $1 ORDER BY permission_key`, p.CompanyID)
	if err != nil {
		return nil, fmt.Errorf("error listing grants: %w", err)
	}
	defer grants.Close()
	for grants.Next() {
		var pt, pid string
		g := &MemberGrant{}
		if err := grants.Scan(&pt, &pid, &g.PermissionKey, &g.Scope, &g.GrantedByUserID, &g.CreatedAt); err != nil {
			return nil, fmt.Errorf("error listing grants: %w", err)
		}
		g.CreatedAt = g.CreatedAt.UTC()
		if len(g.Scope) == 0 {
			g.Scope = json.RawMessage("null")
		}
		if m := byPrincipal[pt+"\x00"+pid]; m != nil {
			m.Grants = append(m.Grants, g)
		}
	}
	return out, grants.Err()
}

// MemberGetByID returns one membership of a company; a missing one is (nil, nil).
func (k *Kernel) MemberGetByID(ctx context.Context, companyID, memberID string) (*Member, error) {
	if !isUUID(memberID) {
		return nil, nil
	}
	list, err := k.MemberList(ctx, &MemberListParams{CompanyID: companyID, ID: memberID})
	if err != nil || len(list) == 0 {
		return nil, err
	}
	return list[0], nil
}

// GrantInput is one requested explicit grant.
type GrantInput struct {
	PermissionKey string          `json:"permissionKey" jsonschema:"required"`
	Scope         json.RawMessage `json:"scope,omitempty"`
}

// MemberUpdateParams changes one membership; nil fields are left alone. Grants, when not
// nil, replace the principal's explicit grants.
type MemberUpdateParams struct {
	CompanyID      string
	MemberID       string
	MembershipRole *string
	Status         *string
	Grants         *[]GrantInput
	// ActorUserID is recorded as the granting user.
	ActorUserID string
}

// errLastOwner is returned by MemberUpdate when the change would leave no active owner.
var errLastOwner = errors.New("company must keep at least one active owner")

// MemberUpdate applies a membership change in one transaction, refusing to remove the
// company's last active user owner. It returns the granted and revoked keys.
func (k *Kernel) MemberUpdate(ctx context.Context, p *MemberUpdateParams) (added, removed []string, err error) {
	tx, err := k.Pool.Begin(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("error updating member: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	// Lock the company's active owners first so that concurrent demotions serialise.
	rows, err := tx.Query(ctx, `SELECT id::text FROM kernel.company_memberships
		WHERE company_id = $1 AND principal_type = 'user' AND membership_role = 'owner' AND status = 'active'
		ORDER BY id FOR UPDATE`, p.CompanyID)
	if err != nil {
		return nil, nil, fmt.Errorf("error locking owners: %w", err)
	}
	var owners []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, nil, fmt.Errorf("error locking owners: %w", err)
		}
		owners = append(owners, id)
	}
	rows.Close()
	var principalType, principalID, role, status string
	err = tx.QueryRow(ctx, `SELECT principal_type, principal_id, membership_role, status FROM kernel.company_memberships
		WHERE company_id = $1 AND id = $2 FOR UPDATE`, p.CompanyID, p.MemberID).Scan(&principalType, &principalID, &role, &status)
	if err != nil {
		return nil, nil, fmt.Errorf("error reading member %s: %w", p.MemberID, err)
	}
	newRole, newStatus := role, status
	if p.MembershipRole != nil {
		newRole, _ = normalizeMembershipRole(principalType, *p.MembershipRole)
	}
	if p.Status != nil {
		newStatus = *p.Status
	}
	wasOwner := principalType == PrincipalUser && role == "owner" && status == "active"
	staysOwner := newRole == "owner" && newStatus == "active"
	if wasOwner && !staysOwner && len(owners) <= 1 {
		return nil, nil, errLastOwner
	}
	if newRole != role || newStatus != status {
		if _, err := tx.Exec(ctx, `UPDATE kernel.company_memberships SET membership_role = $3, status = $4, updated_at = now()
			WHERE company_id = $1 AND id = $2`, p.CompanyID, p.MemberID, newRole, newStatus); err != nil {
			return nil, nil, fmt.Errorf("error updating member %s: %w", p.MemberID, err)
		}
	}
	if p.Grants != nil {
		held := map[string]bool{}
		rows, err := tx.Query(ctx, `SELECT permission_key FROM kernel.principal_permission_grants
			WHERE company_id = $1 AND principal_type = $2 AND principal_id = $3`, p.CompanyID, principalType, principalID)
		if err != nil {
			return nil, nil, fmt.Errorf("error reading grants: %w", err)
		}
		for rows.Next() {
			var key string
			if err := rows.Scan(&key); err != nil {
				rows.Close()
				return nil, nil, fmt.Errorf("error reading grants: %w", err)
			}
			held[key] = true
		}
		rows.Close()
		keep := make([]string, 0, len(*p.Grants))
		for _, g := range *p.Grants {
			keep = append(keep, g.PermissionKey)
			var scope any
			if len(g.Scope) > 0 && !bytes.Equal(g.Scope, []byte("null")) {
				scope = g.Scope
			}
			if _, err := tx.Exec(ctx, `INSERT INTO kernel.principal_permission_grants
				(id, company_id, principal_type, principal_id, permission_key, scope, granted_by_user_id)
				VALUES ($1, $2, $3, $4, $5, $6, $7)
				ON CONFLICT (company_id, principal_type, principal_id, permission_key)
				DO UPDATE SET scope = EXCLUDED.scope`,
				newID(), p.CompanyID, principalType, principalID, g.PermissionKey, scope, nullable(p.ActorUserID)); err != nil {
				return nil, nil, fmt.Errorf("error granting %s: %w", g.PermissionKey, err)
			}
			if !held[g.PermissionKey] {
				added = append(added, g.PermissionKey)
			}
		}
		for key := range held {
			if !slices.Contains(keep, key) {
				removed = append(removed, key)
			}
		}
		slices.Sort(removed)
		if _, err := tx.Exec(ctx, `DELETE FROM kernel.principal_permission_grants
			WHERE company_id = $1 AND principal_type = $2 AND principal_id = $3 AND NOT (permission_key = ANY($4))`,
			p.CompanyID, principalType, principalID, keep); err != nil {
			return nil, nil, fmt.Errorf("error revoking grants: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, nil, fmt.Errorf("error updating member: %w", err)
	}
	return added, removed, nil
}

type memberListRequest struct {
	CompanyID     string `path:"companyId"`
	PrincipalType string `query:"principalType"`
	Status        string `query:"status"`
}

type memberListEndpoint struct{ k *Kernel }

func (e *memberListEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "GET /api/companies/{companyId}/members", Access: AccessBoard, CompanyFrom: CompanyFromPath,
		Summary: "List a company's members with their explicit grants"}
}

func (e *memberListEndpoint) Execute(ctx context.Context, req *memberListRequest) (*[]*Member, error) {
	var d detailList
	if req.PrincipalType != "" && !validPrincipalType(req.PrincipalType) {
		d.add("principalType", "must be user or agent")
	}
	if req.Status != "" && !slices.Contains(MembershipStatuses, req.Status) {
		d.add("status", "must be one of "+strings.Join(MembershipStatuses, ", "))
	}
	if err := d.err(); err != nil {
		return nil, err
	}
	list, err := e.k.MemberList(ctx, &MemberListParams{CompanyID: req.CompanyID, PrincipalType: req.PrincipalType, Status: req.Status})
	if err != nil {
		return nil, Internal(err)
	}
	return &list, nil
}

type memberUpdateRequest struct {
	CompanyID      string        `path:"companyId" json:"-"`
	MemberID       string        `path:"memberId" json:"-"`
	MembershipRole *string       `json:"membershipRole,omitempty" jsonschema:"enum=owner,enum=admin,enum=operator,enum=viewer,enum=member"`
	Status         *string       `json:"status,omitempty" jsonschema:"enum=pending,enum=active,enum=suspended,enum=archived"`
	Grants         *[]GrantInput `json:"grants,omitempty"`
}

type memberPatchRequest struct {
	CompanyID      string  `path:"companyId" json:"-"`
	MemberID       string  `path:"memberId" json:"-"`
	MembershipRole *string `json:"membershipRole,omitempty" jsonschema:"enum=owner,enum=admin,enum=operator,enum=viewer,enum=member"`
	Status         *string `json:"status,omitempty" jsonschema:"enum=pending,enum=active,enum=suspended,enum=archived"`
}

type memberPermissionsRequest struct {
	CompanyID string        `path:"companyId" json:"-"`
	MemberID  string        `path:"memberId" json:"-"`
	Grants    *[]GrantInput `json:"grants" jsonschema:"required"`
}

type memberArchiveRequest struct {
	CompanyID string `path:"companyId" json:"-"`
	MemberID  string `path:"memberId" json:"-"`
}

// memberChange validates and applies a membership change for the request's actor and
// appends its activity entries.
func (k *Kernel) memberChange(ctx context.Context, companyID, memberID string, role, status *string, grants *[]GrantInput, action string) (*Member, error) {
	a := ActorFrom(ctx)
	var d detailList
	if role != nil && !slices.Contains(MembershipRoles, *role) {
		d.add("membershipRole", "must be one of "+strings.Join(MembershipRoles, ", "))
	}
	if status != nil && !slices.Contains(MembershipStatuses, *status) {
		d.add("status", "must be one of "+strings.Join(MembershipStatuses, ", "))
	}
	var deduped []GrantInput
	if grants != nil {
		seen := map[string]int{}
		for i, g := range *grants {
			path := fmt.Sprintf("grants[%d]", i)
			if !slices.Contains(PermissionKeys, g.PermissionKey) {
				d.add(path+".permissionKey", "unknown permission key")
				continue
			}
			s := bytes.TrimSpace(g.Scope)
			if len(s) > 0 && !bytes.Equal(s, []byte("null")) && s[0] != '{' {
				d.add(path+".scope", "must be an object or null")
				continue
			}
			if j, ok := seen[g.PermissionKey]; ok {
				deduped[j] = g
				continue
			}
			seen[g.PermissionKey] = len(deduped)
			deduped = append(deduped, g)
		}
		if deduped == nil {
			deduped = []GrantInput{}
		}
	}
	if err := d.err(); err != nil {
		return nil, err
	}
	before, err := k.MemberGetByID(ctx, companyID, memberID)
	if err != nil {
		return nil, Internal(err)
	}
	if before == nil {
		return nil, NotFound("Member not found")
	}
	// Owner memberships are changed by owners only.
	touchesOwner := before.MembershipRole == "owner" || (role != nil && *role == "owner")
	if touchesOwner && (role != nil || status != nil) {
		if err := requireCompanyManager(a, companyID, true); err != nil {
			return nil, Forbidden("Only company owners can change owner memberships")
		}
	}
	params := &MemberUpdateParams{CompanyID: companyID, MemberID: memberID, MembershipRole: role, Status: status, ActorUserID: a.UserID}
	if grants != nil {
		params.Grants = &deduped
	}
	added, removed, err := k.MemberUpdate(ctx, params)
	if errors.Is(err, errLastOwner) {
		return nil, Conflict("Company must keep at least one active owner")
	}
	if err != nil {
		return nil, Internal(err)
	}
	after, err := k.MemberGetByID(ctx, companyID, memberID)
	if err != nil {
		return nil, Internal(err)
	}
	if after == nil {
		return nil, NotFound("Member not found")
	}
	if after.MembershipRole != before.MembershipRole || after.Status != before.Status {
		if err := k.appendActorActivity(ctx, companyID, action, "member", memberID, map[string]any{
			"principalType": after.PrincipalType, "principalId": after.PrincipalID,
			"membershipRole": after.MembershipRole, "previousMembershipRole": before.MembershipRole,
			"status": after.Status, "previousStatus": before.Status,
		}); err != nil {
			return nil, err
		}
	}
	if grants != nil {
		if added == nil {
			added = []string{}
		}
		if removed == nil {
			removed = []string{}
		}
		keys := make([]string, 0, len(deduped))
		for _, g := range deduped {
			keys = append(keys, g.PermissionKey)
		}
		if err := k.appendActorActivity(ctx, companyID, "member.permissions_updated", "member", memberID, map[string]any{
			"principalType": after.PrincipalType, "principalId": after.PrincipalID,
			"grants": keys, "added": added, "removed": removed,
		}); err != nil {
			return nil, err
		}
	}
	return after, nil
}

type memberUpdateEndpoint struct{ k *Kernel }

func (e *memberUpdateEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "PATCH /api/companies/{companyId}/members/{memberId}", Access: AccessBoard,
		CompanyFrom: CompanyFromPath, Permission: "users:manage_permissions",
		Summary: "Change a member's role or status (member becomes operator for users)"}
}

func (e *memberUpdateEndpoint) Execute(ctx context.Context, req *memberPatchRequest) (*Member, error) {
	return e.k.memberChange(ctx, req.CompanyID, req.MemberID, req.MembershipRole, req.Status, nil, "member.updated")
}

type memberRoleAndGrantsEndpoint struct{ k *Kernel }

func (e *memberRoleAndGrantsEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "PATCH /api/companies/{companyId}/members/{memberId}/role-and-grants", Access: AccessBoard,
		CompanyFrom: CompanyFromPath, Permission: "users:manage_permissions",
		Summary: "Change a member's role, status and explicit grants in one step"}
}

func (e *memberRoleAndGrantsEndpoint) Execute(ctx context.Context, req *memberUpdateRequest) (*Member, error) {
	return e.k.memberChange(ctx, req.CompanyID, req.MemberID, req.MembershipRole, req.Status, req.Grants, "member.updated")
}

type memberPermissionsEndpoint struct{ k *Kernel }

func (e *memberPermissionsEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "PATCH /api/companies/{companyId}/members/{memberId}/permissions", Access: AccessBoard,
		CompanyFrom: CompanyFromPath, Permission: "users:manage_permissions",
		Summary: "Replace a member's explicit permission grants"}
}

func (e *memberPermissionsEndpoint) Execute(ctx context.Context, req *memberPermissionsRequest) (*Member, error) {
	if req.Grants == nil {
		return nil, ValidationError(ValidationDetail{Path: "grants", Message: "is required"})
	}
	return e.k.memberChange(ctx, req.CompanyID, req.MemberID, nil, nil, req.Grants, "member.updated")
}

type memberArchiveEndpoint struct{ k *Kernel }

func (e *memberArchiveEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "POST /api/companies/{companyId}/members/{memberId}/archive", Access: AccessBoard,
		CompanyFrom: CompanyFromPath, Permission: "users:manage_permissions", Summary: "Archive a membership"}
}

func (e *memberArchiveEndpoint) Execute(ctx context.Context, req *memberArchiveRequest) (*Member, error) {
	archived := "archived"
	return e.k.memberChange(ctx, req.CompanyID, req.MemberID, nil, &archived, nil, "member.archived")
}

func (k *Kernel) memberRoutes() []*Route {
	return []*Route{
		Mount[memberListRequest, []*Member](&memberListEndpoint{k}),
		Mount[memberPatchRequest, Member](&memberUpdateEndpoint{k}),
		Mount[memberUpdateRequest, Member](&memberRoleAndGrantsEndpoint{k}),
		Mount[memberPermissionsRequest, Member](&memberPermissionsEndpoint{k}),
		Mount[memberArchiveRequest, Member](&memberArchiveEndpoint{k}),
	}
}
