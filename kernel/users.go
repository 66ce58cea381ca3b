package kernel

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5"
)

// RoleInstanceAdmin is the instance role of instance admins.
const RoleInstanceAdmin = "instance_admin"

// UserSlug derives the slug a user is addressed by in company-scoped profile routes: the
// name lowercased with runs of other characters turned into dashes ("Ada Lovelace" →
// "ada-lovelace"), else the email's local part.
func UserSlug(name, email string) string {
	slug := slugify(name)
	if slug == "" {
		local, _, _ := strings.Cut(email, "@")
		slug = slugify(local)
	}
	if slug == "" {
		slug = "user"
	}
	return slug
}

func slugify(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(r)
			dash = false
			continue
		}
		dash = true
	}
	return b.String()
}

// DirectoryUser is one person of a company's user directory.
type DirectoryUser struct {
	ID             string    `json:"id"`
	Name           string    `json:"name"`
	Email          string    `json:"email"`
	Slug           string    `json:"slug"`
	MembershipID   string    `json:"membershipId"`
	MembershipRole string    `json:"membershipRole"`
	Status         string    `json:"status"`
	JoinedAt       time.Time `json:"joinedAt"`
}

// companyUsers lists the people who are members of a company (any status), owners first.
func (k *Kernel) companyUsers(ctx context.Context, companyID string, activeOnly bool) ([]*DirectoryUser, error) {
	rows, err := k.Pool.Query(ctx, `SELECT u.id, u.name, u.email, m.id::text, m.membership_role, m.status, m.created_at
		FROM kernel.company_memberships m JOIN kernel.users u ON u.id = m.principal_id
		WHERE m.company_id = $1 AND m.principal_type = 'user' AND (NOT $2 OR m.status = 'active')
		ORDER BY array_position(ARRAY['owner','admin','operator','member','viewer'], m.membership_role), lower(u.name), u.id`,
		companyID, activeOnly)
	if err != nil {
		return nil, fmt.Errorf("error listing company users: %w", err)
	}
	defer rows.Close()
	out := []*DirectoryUser{}
	for rows.Next() {
		var u DirectoryUser
		if err := rows.Scan(&u.ID, &u.Name, &u.Email, &u.MembershipID, &u.MembershipRole, &u.Status, &u.JoinedAt); err != nil {
			return nil, fmt.Errorf("error listing company users: %w", err)
		}
		u.Slug, u.JoinedAt = UserSlug(u.Name, u.Email), u.JoinedAt.UTC()
		out = append(out, &u)
	}
	return out, rows.Err()
}

type userDirectoryRequest struct {
	CompanyID string `path:"companyId"`
}

type userDirectoryEndpoint struct{ k *Kernel }

func (e *userDirectoryEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "GET /api/companies/{companyId}/user-directory", Access: AccessEither, CompanyFrom: CompanyFromPath,
		Summary: "The company's active people (name, email, slug, role), for mentions and assignment pickers"}
}

func (e *userDirectoryEndpoint) Execute(ctx context.Context, req *userDirectoryRequest) (*[]*DirectoryUser, error) {
	out, err := e.k.companyUsers(ctx, req.CompanyID, true)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// CompanyUserProfile is a person as one company sees them.
type CompanyUserProfile struct {
	ID             string    `json:"id"`
	Name           string    `json:"name"`
	Email          string    `json:"email"`
	Slug           string    `json:"slug"`
	CompanyID      string    `json:"companyId"`
	MembershipID   string    `json:"membershipId"`
	MembershipRole string    `json:"membershipRole"`
	Status         string    `json:"status"`
	JoinedAt       time.Time `json:"joinedAt"`
	// Permissions are the keys the person holds in the company: role defaults and grants.
	Permissions []string `json:"permissions"`
	// ActivityCount and LastActiveAt count the person's activity entries in the company.
	ActivityCount  int64          `json:"activityCount"`
	LastActiveAt   *time.Time     `json:"lastActiveAt"`
	RecentActivity []*ActivityRow `json:"recentActivity"`
	CreatedAt      time.Time      `json:"createdAt"`
}

// ActivityRow is one activity entry of a profile.
type ActivityRow struct {
	ID         string    `json:"id"`
	Action     string    `json:"action"`
	EntityType string    `json:"entityType"`
	EntityID   string    `json:"entityId"`
	CreatedAt  time.Time `json:"createdAt"`
}

type companyUserProfileRequest struct {
	CompanyID string `path:"companyId"`
	UserSlug  string `path:"userSlug"`
}

type companyUserProfileEndpoint struct{ k *Kernel }

func (e *companyUserProfileEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "GET /api/companies/{companyId}/users/{userSlug}/profile", Access: AccessEither, CompanyFrom: CompanyFromPath,
		Summary: "A member's profile in this company, by slug or user id: role, permissions and recent activity"}
}

func (e *companyUserProfileEndpoint) Execute(ctx context.Context, req *companyUserProfileRequest) (*CompanyUserProfile, error) {
	k := e.k
	users, err := k.companyUsers(ctx, req.CompanyID, false)
	if err != nil {
		return nil, err
	}
	var u *DirectoryUser
	for _, c := range users {
		if c.ID == req.UserSlug {
			u = c
			break
		}
	}
	if u == nil {
		slug := strings.ToLower(req.UserSlug)
		for _, c := range users {
			if c.Slug == slug {
				u = c
				break
			}
		}
	}
	if u == nil {
		return nil, NotFound("User not found")
	}
	p := &CompanyUserProfile{ID: u.ID, Name: u.Name, Email: u.Email, Slug: u.Slug, CompanyID: req.CompanyID, MembershipID: u.MembershipID,
		MembershipRole: u.MembershipRole, Status: u.Status, JoinedAt: u.JoinedAt, RecentActivity: []*ActivityRow{}}
	perms := map[string]bool{}
	if u.Status == "active" {
		for _, key := range RoleDefaultGrants[u.MembershipRole] {
			perms[key] = true
		}
	}
	rows, err := k.Pool.Query(ctx, `SELECT permission_key FROM kernel.principal_permission_grants
		WHERE company_id = $1 AND principal_type = 'user' AND principal_id = $2`, req.CompanyID, u.ID)
	if err != nil {
		return nil, fmt.Errorf("error reading grants: %w", err)
	}
	for rows.Next() {
		var key string
		if err := rows.Scan(&key); err != nil {
			rows.Close()
			return nil, fmt.Errorf("error reading grants: %w", err)
		}
		perms[key] = true
	}
	rows.Close()
	p.Permissions = make([]string, 0, len(perms))
	for key := range perms {
		p.Permissions = append(p.Permissions, key)
	}
	slices.Sort(p.Permissions)
	if err := k.Pool.QueryRow(ctx, `SELECT count(*), max(created_at) FROM kernel.activity_log
		WHERE company_id = $1 AND actor_type = 'user' AND actor_id = $2`, req.CompanyID, u.ID).Scan(&p.ActivityCount, &p.LastActiveAt); err != nil {
		return nil, fmt.Errorf("error counting activity: %w", err)
	}
	act, err := k.Pool.Query(ctx, `SELECT id::text, action, entity_type, entity_id, created_at FROM kernel.activity_log
		WHERE company_id = $1 AND actor_type = 'user' AND actor_id = $2 ORDER BY created_at DESC, id DESC LIMIT 10`, req.CompanyID, u.ID)
	if err != nil {
		return nil, fmt.Errorf("error reading activity: %w", err)
	}
	defer act.Close()
	for act.Next() {
		var r ActivityRow
		if err := act.Scan(&r.ID, &r.Action, &r.EntityType, &r.EntityID, &r.CreatedAt); err != nil {
			return nil, fmt.Errorf("error reading activity: %w", err)
		}
		r.CreatedAt = r.CreatedAt.UTC()
		p.RecentActivity = append(p.RecentActivity, &r)
	}
	if err := k.Pool.QueryRow(ctx, `SELECT created_at FROM kernel.users WHERE id = $1`, u.ID).Scan(&p.CreatedAt); err != nil {
		return nil, fmt.Errorf("error reading user: %w", err)
	}
	p.CreatedAt = p.CreatedAt.UTC()
	return p, act.Err()
}

// CompanyAccess is one company a user can reach.
type CompanyAccess struct {
	CompanyID      string `json:"companyId"`
	CompanyName    string `json:"companyName"`
	MembershipRole string `json:"membershipRole"`
	Status         string `json:"status"`
}

// AdminUser is a user as the instance admin sees them.
type AdminUser struct {
	ID              string           `json:"id"`
	Name            string           `json:"name"`
	Email           string           `json:"email"`
	IsInstanceAdmin bool             `json:"isInstanceAdmin"`
	Companies       []*CompanyAccess `json:"companies"`
	CreatedAt       time.Time        `json:"createdAt"`
	UpdatedAt       time.Time        `json:"updatedAt"`
}

// adminUsers lists users matching the text (name or email, case-insensitive) or one user.
func (k *Kernel) adminUsers(ctx context.Context, text, userID string, limit int) ([]*AdminUser, error) {
	rows, err := k.Pool.Query(ctx, `SELECT u.id, u.name, u.email, u.created_at, u.updated_at,
			EXISTS (SELECT 1 FROM kernel.instance_user_roles r WHERE r.user_id = u.id AND r.role = 'instance_admin')
		FROM kernel.users u
		WHERE ($1 = '' OR u.name ILIKE '%' || $1 || '%' ESCAPE '\' OR u.email ILIKE '%' || $1 || '%' ESCAPE '\')
			AND ($2 = '' OR u.id = $2)
		ORDER BY lower(u.name), u.id LIMIT $3`, likeEscape(text), userID, limit)
	if err != nil {
		return nil, fmt.Errorf("error listing users: %w", err)
	}
	out := []*AdminUser{}
	byID := map[string]*AdminUser{}
	for rows.Next() {
		u := &AdminUser{Companies: []*CompanyAccess{}}
		if err := rows.Scan(&u.ID, &u.Name, &u.Email, &u.CreatedAt, &u.UpdatedAt, &u.IsInstanceAdmin); err != nil {
			rows.Close()
			return nil, fmt.Errorf("error listing users: %w", err)
		}
		u.CreatedAt, u.UpdatedAt = u.CreatedAt.UTC(), u.UpdatedAt.UTC()
		out = append(out, u)
		byID[u.ID] = u
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error listing users: %w", err)
	}
	if len(out) == 0 {
		return out, nil
	}
	ids := make([]string, 0, len(out))
	for _, u := range out {
		ids = append(ids, u.ID)
	}
	mrows, err := k.Pool.Query(ctx, `SELECT m.principal_id, m.company_id::text, c.name, m.membership_role, m.status
		FROM kernel.company_memberships m JOIN kernel.companies c ON c.id = m.company_id
		WHERE m.principal_type = 'user' AND m.principal_id = ANY($1) ORDER BY lower(c.name), c.id`, ids)
	if err != nil {
		return nil, fmt.Errorf("error listing memberships: %w", err)
	}
	defer mrows.Close()
	for mrows.Next() {
		var uid string
		var c CompanyAccess
		if err := mrows.Scan(&uid, &c.CompanyID, &c.CompanyName, &c.MembershipRole, &c.Status); err != nil {
			return nil, fmt.Errorf("error listing memberships: %w", err)
		}
		byID[uid].Companies = append(byID[uid].Companies, &c)
	}
	return out, mrows.Err()
}

func (k *Kernel) adminUser(ctx context.Context, userID string) (*AdminUser, error) {
	list, err := k.adminUsers(ctx, "", userID, 1)
	if err != nil {
		return nil, err
	}
	if userID == "" || len(list) == 0 {
		return nil, NotFound("User not found")
	}
	return list[0], nil
}

type adminUserListRequest struct {
	// Query searches names and emails (q and search are accepted too).
	Query  string `query:"query"`
	Q      string `query:"q"`
	Search string `query:"search"`
	// Limit is 1 to 500 (default 100).
	Limit int `query:"limit"`
}

type adminUserListEndpoint struct{ k *Kernel }

func (e *adminUserListEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "GET /api/admin/users", Access: AccessInstanceAdmin,
		Summary: "Every user of the instance with instance-admin flag and companies; query searches names and emails"}
}

func (e *adminUserListEndpoint) Execute(ctx context.Context, req *adminUserListRequest) (*[]*AdminUser, error) {
	text := strings.TrimSpace(req.Query + req.Q + req.Search)
	limit := req.Limit
	switch {
	case limit == 0:
		limit = 100
	case limit < 1 || limit > 500:
		return nil, ValidationError(ValidationDetail{Path: "limit", Message: "must be between 1 and 500"})
	}
	if len(text) > 200 {
		return nil, ValidationError(ValidationDetail{Path: "query", Message: "must be at most 200 characters"})
	}
	out, err := e.k.adminUsers(ctx, text, "", limit)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

type adminUserRequest struct {
	UserID string `path:"userId" json:"-"`
}

type promoteAdminEndpoint struct{ k *Kernel }

func (e *promoteAdminEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "POST /api/admin/users/{userId}/promote-instance-admin", Access: AccessInstanceAdmin,
		Summary: "Make a user an instance admin"}
}

func (e *promoteAdminEndpoint) Execute(ctx context.Context, req *adminUserRequest) (*AdminUser, error) {
	k := e.k
	if _, err := k.adminUser(ctx, req.UserID); err != nil {
		return nil, err
	}
	tag, err := k.Pool.Exec(ctx, `INSERT INTO kernel.instance_user_roles (user_id, role) VALUES ($1, 'instance_admin') ON CONFLICT DO NOTHING`, req.UserID)
	if err != nil {
		return nil, fmt.Errorf("error promoting user %s: %w", req.UserID, err)
	}
	if tag.RowsAffected() > 0 {
		k.recordActivity(ctx, actorActivity(ctx, &ActivityInsertParams{Action: "user.instance_admin_promoted", EntityType: "user", EntityID: req.UserID}))
	}
	return k.adminUser(ctx, req.UserID)
}

type demoteAdminEndpoint struct{ k *Kernel }

func (e *demoteAdminEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "POST /api/admin/users/{userId}/demote-instance-admin", Access: AccessInstanceAdmin,
		Summary: "Remove a user's instance-admin role; the last instance admin cannot be demoted", Errors: []int{http.StatusConflict}}
}

// errLastInstanceAdmin refuses to leave the instance without an admin who can sign in.
var errLastInstanceAdmin = Conflict("Cannot demote the last instance admin").WithCode("last_instance_admin")

func (e *demoteAdminEndpoint) Execute(ctx context.Context, req *adminUserRequest) (*AdminUser, error) {
	k := e.k
	if _, err := k.adminUser(ctx, req.UserID); err != nil {
		return nil, err
	}
	tx, err := k.Pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("error demoting user: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	// Demotions serialise, so two admins demoting each other cannot both succeed.
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('kernel.instance_admins'))`); err != nil {
		return nil, fmt.Errorf("error demoting user: %w", err)
	}
	var isAdmin bool
	var others int
	// In authenticated mode the implicit local board cannot sign in, so it does not count.
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM kernel.instance_user_roles WHERE user_id = $1 AND role = 'instance_admin'),
			(SELECT count(*) FROM kernel.instance_user_roles WHERE role = 'instance_admin' AND user_id <> $1 AND ($2 OR user_id <> $3))`,
		req.UserID, k.cfg.DeploymentMode == ModeLocalTrusted, LocalBoardUserID).Scan(&isAdmin, &others); err != nil {
		return nil, fmt.Errorf("error counting instance admins: %w", err)
	}
	if isAdmin {
		if others == 0 {
			return nil, errLastInstanceAdmin
		}
		if _, err := tx.Exec(ctx, `DELETE FROM kernel.instance_user_roles WHERE user_id = $1 AND role = 'instance_admin'`, req.UserID); err != nil {
			return nil, fmt.Errorf("error demoting user %s: %w", req.UserID, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("error demoting user: %w", err)
	}
	if isAdmin {
		k.recordActivity(ctx, actorActivity(ctx, &ActivityInsertParams{Action: "user.instance_admin_demoted", EntityType: "user", EntityID: req.UserID}))
	}
	return k.adminUser(ctx, req.UserID)
}

// UserCompanyAccess is the set of companies a user can reach.
type UserCompanyAccess struct {
	UserID          string           `json:"userId"`
	IsInstanceAdmin bool             `json:"isInstanceAdmin"`
	CompanyIDs      []string         `json:"companyIds"`
	Companies       []*CompanyAccess `json:"companies"`
}

func (k *Kernel) companyAccess(ctx context.Context, userID string) (*UserCompanyAccess, error) {
	u, err := k.adminUser(ctx, userID)
	if err != nil {
		return nil, err
	}
	out := &UserCompanyAccess{UserID: u.ID, IsInstanceAdmin: u.IsInstanceAdmin, CompanyIDs: []string{}, Companies: []*CompanyAccess{}}
	for _, c := range u.Companies {
		if c.Status == "active" {
			out.CompanyIDs = append(out.CompanyIDs, c.CompanyID)
			out.Companies = append(out.Companies, c)
		}
	}
	return out, nil
}

type companyAccessGetEndpoint struct{ k *Kernel }

func (e *companyAccessGetEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "GET /api/admin/users/{userId}/company-access", Access: AccessInstanceAdmin,
		Summary: "The companies a user is an active member of, with roles"}
}

func (e *companyAccessGetEndpoint) Execute(ctx context.Context, req *adminUserRequest) (*UserCompanyAccess, error) {
	return e.k.companyAccess(ctx, req.UserID)
}

// CompanyAccessInput is one company of a company-access replacement.
type CompanyAccessInput struct {
	CompanyID string `json:"companyId" jsonschema:"required"`
	// MembershipRole defaults to the existing role, else operator.
	MembershipRole string `json:"membershipRole,omitempty" jsonschema:"enum=owner,enum=admin,enum=operator,enum=viewer,enum=member"`
}

type companyAccessPutRequest struct {
	UserID string `path:"userId" json:"-"`
	// CompanyIDs is the complete set of companies (roles kept, operator for new ones).
	CompanyIDs *[]string `json:"companyIds,omitempty"`
	// Companies is the complete set with roles; give this or companyIds.
	Companies *[]CompanyAccessInput `json:"companies,omitempty"`
}

type companyAccessPutEndpoint struct{ k *Kernel }

func (e *companyAccessPutEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "PUT /api/admin/users/{userId}/company-access", Access: AccessInstanceAdmin,
		Summary: "Replace the companies a user is an active member of: missing ones are added, others archived",
		Errors:  []int{http.StatusConflict, http.StatusUnprocessableEntity}}
}

func (e *companyAccessPutEndpoint) Execute(ctx context.Context, req *companyAccessPutRequest) (*UserCompanyAccess, error) {
	k := e.k
	var want []CompanyAccessInput
	switch {
	case req.Companies != nil && req.CompanyIDs != nil:
		return nil, ValidationError(ValidationDetail{Path: "companies", Message: "give companies or companyIds, not both"})
	case req.Companies != nil:
		want = *req.Companies
	case req.CompanyIDs != nil:
		for _, id := range *req.CompanyIDs {
			want = append(want, CompanyAccessInput{CompanyID: id})
		}
	default:
		return nil, ValidationError(ValidationDetail{Path: "companyIds", Message: "is required"})
	}
	var d detailList
	seen := map[string]bool{}
	for i, c := range want {
		if !isUUID(c.CompanyID) {
			d.add(fmt.Sprintf("companies[%d].companyId", i), "must be a UUID")
		} else if seen[c.CompanyID] {
			d.add(fmt.Sprintf("companies[%d].companyId", i), "is listed twice")
		}
		seen[c.CompanyID] = true
		if c.MembershipRole != "" {
			r, ok := normalizeMembershipRole(PrincipalUser, c.MembershipRole)
			if !ok {
				d.add(fmt.Sprintf("companies[%d].membershipRole", i), "must be one of "+strings.Join(MembershipRoles, ", "))
			}
			want[i].MembershipRole = r
		}
	}
	if err := d.err(); err != nil {
		return nil, err
	}
	if _, err := k.adminUser(ctx, req.UserID); err != nil {
		return nil, err
	}
	added, removed, err := k.companyAccessReplace(ctx, req.UserID, want)
	if err != nil {
		return nil, err
	}
	for _, id := range added {
		if err := k.appendActorActivity(ctx, id, "member.access_granted", "user", req.UserID, map[string]any{"userId": req.UserID}); err != nil {
			return nil, err
		}
	}
	for _, id := range removed {
		if err := k.appendActorActivity(ctx, id, "member.access_removed", "user", req.UserID, map[string]any{"userId": req.UserID}); err != nil {
			return nil, err
		}
	}
	return k.companyAccess(ctx, req.UserID)
}

// companyAccessReplace applies a company-access replacement in one transaction, refusing
// to archive a company's last active owner; it returns the companies gained and lost.
func (k *Kernel) companyAccessReplace(ctx context.Context, userID string, want []CompanyAccessInput) (added, removed []string, err error) {
	tx, err := k.Pool.Begin(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("error replacing company access: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	ids := make([]string, 0, len(want))
	for _, c := range want {
		ids = append(ids, c.CompanyID)
	}
	var found int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM kernel.companies WHERE id = ANY($1::uuid[])`, ids).Scan(&found); err != nil {
		return nil, nil, fmt.Errorf("error checking companies: %w", err)
	}
	if found != len(ids) {
		return nil, nil, Unprocessable("One or more companies do not exist")
	}
	current := map[string]struct{ role, status string }{}
	rows, err := tx.Query(ctx, `SELECT company_id::text, membership_role, status FROM kernel.company_memberships
		WHERE principal_type = 'user' AND principal_id = $1 FOR UPDATE`, userID)
	if err != nil {
		return nil, nil, fmt.Errorf("error reading memberships: %w", err)
	}
	for rows.Next() {
		var id, role, status string
		if err := rows.Scan(&id, &role, &status); err != nil {
			rows.Close()
			return nil, nil, fmt.Errorf("error reading memberships: %w", err)
		}
		current[id] = struct{ role, status string }{role, status}
	}
	rows.Close()
	for _, c := range want {
		cur, ok := current[c.CompanyID]
		role := c.MembershipRole
		if role == "" {
			role = "operator"
			if ok {
				role = cur.role
			}
		}
		if ok && cur.status == "active" && cur.role == role {
			continue
		}
		if ok && cur.role == "owner" && role != "owner" && cur.status == "active" {
			if err := lastOwnerCheck(ctx, tx, c.CompanyID, userID); err != nil {
				return nil, nil, err
			}
		}
		if _, err := tx.Exec(ctx, `INSERT INTO kernel.company_memberships (id, company_id, principal_type, principal_id, status, membership_role)
			VALUES ($1, $2, 'user', $3, 'active', $4)
			ON CONFLICT (company_id, principal_type, principal_id) DO UPDATE SET status = 'active', membership_role = EXCLUDED.membership_role,
				updated_at = now()`, newID(), c.CompanyID, userID, role); err != nil {
			return nil, nil, fmt.Errorf("error granting company access: %w", err)
		}
		if !ok || cur.status != "active" {
			added = append(added, c.CompanyID)
		}
	}
	for id, cur := range current {
		if seen := slices.Contains(ids, id); seen || cur.status != "active" {
			continue
		}
		if cur.role == "owner" {
			if err := lastOwnerCheck(ctx, tx, id, userID); err != nil {
				return nil, nil, err
			}
		}
		if _, err := tx.Exec(ctx, `UPDATE kernel.company_memberships SET status = 'archived', updated_at = now()
			WHERE company_id = $1 AND principal_type = 'user' AND principal_id = $2`, id, userID); err != nil {
			return nil, nil, fmt.Errorf("error removing company access: %w", err)
		}
		removed = append(removed, id)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, nil, fmt.Errorf("error replacing company access: %w", err)
	}
	slices.Sort(added)
	slices.Sort(removed)
	return added, removed, nil
}

// lastOwnerCheck refuses a change that would leave the company without another active owner.
func lastOwnerCheck(ctx context.Context, tx pgx.Tx, companyID, userID string) error {
	var others int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM kernel.company_memberships WHERE company_id = $1 AND principal_type = 'user'
		AND membership_role = 'owner' AND status = 'active' AND principal_id <> $2`, companyID, userID).Scan(&others); err != nil {
		return fmt.Errorf("error counting owners: %w", err)
	}
	if others == 0 {
		return Conflict("Company must keep at least one active owner")
	}
	return nil
}

func (k *Kernel) userRoutes() []*Route {
	return []*Route{
		Mount[userDirectoryRequest, []*DirectoryUser](&userDirectoryEndpoint{k}),
		Mount[companyUserProfileRequest, CompanyUserProfile](&companyUserProfileEndpoint{k}),
		Mount[adminUserListRequest, []*AdminUser](&adminUserListEndpoint{k}),
		Mount[adminUserRequest, AdminUser](&promoteAdminEndpoint{k}),
		Mount[adminUserRequest, AdminUser](&demoteAdminEndpoint{k}),
		Mount[adminUserRequest, UserCompanyAccess](&companyAccessGetEndpoint{k}),
		Mount[companyAccessPutRequest, UserCompanyAccess](&companyAccessPutEndpoint{k}),
	}
}
