package kernel

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/jackc/pgx/v5"
)

// Permission keys the kernel knows (REFERENCE.md 2.11 and spec part 1).
var PermissionKeys = []string{
	"agents:create", "agents:configure", "agents:suggest-changes", "skills:create", "skills:suggest-changes",
	"environments:manage", "tools:admin", "tools:manage_connections", "tools:manage_profiles", "tools:view_audit",
	"audit:view_agent_actions", "tools:use", "tools:manage_runtime", "inbox:manage", "users:invite",
	"users:manage_permissions", "tasks:assign", "tasks:assign_scope", "tasks:manage_active_checkouts",
	"pipelines:write", "joins:approve", "secrets:read", "company_scope:read", "decision_queue:read",
	"decision_queue:manage", "issue:read", "issue:comment", "issue:mutate",
}

// RoleDefaultGrants are the permission keys each human membership role holds by default.
var RoleDefaultGrants = map[string][]string{
	"owner": {"agents:create", "agents:configure", "skills:create", "environments:manage", "users:invite",
		"users:manage_permissions", "tasks:assign", "joins:approve", "secrets:read", "company_scope:read",
		"decision_queue:read", "decision_queue:manage", "tasks:manage_active_checkouts", "issue:read", "issue:comment", "issue:mutate"},
	"admin": {"agents:create", "agents:configure", "skills:create", "environments:manage", "users:invite",
		"tasks:assign", "joins:approve", "secrets:read", "company_scope:read", "decision_queue:read",
		"decision_queue:manage", "tasks:manage_active_checkouts", "issue:read", "issue:comment", "issue:mutate"},
	"operator": {"tasks:assign", "company_scope:read", "issue:read", "issue:comment", "issue:mutate"},
	"viewer":   {"company_scope:read", "issue:read"},
}

// ceoAgentGrants are held implicitly by an agent whose role is ceo.
var ceoAgentGrants = []string{"agents:create", "tasks:assign", "company_scope:read", "secrets:read", "decision_queue:read", "issue:read", "issue:comment", "issue:mutate"}

// companyExistsCache remembers companies known to exist; deletion clears an entry.
type companyExistsCache struct{ m sync.Map }

var knownCompanies companyExistsCache

func (k *Kernel) companyExists(ctx context.Context, id string) (bool, error) {
	if _, ok := knownCompanies.m.Load(k.instanceID + id); ok {
		return true, nil
	}
	var exists bool
	if err := k.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM kernel.companies WHERE id = $1)`, id).Scan(&exists); err != nil {
		return false, fmt.Errorf("error checking company %s: %w", id, err)
	}
	if exists {
		knownCompanies.m.Store(k.instanceID+id, struct{}{})
	}
	return exists, nil
}

func (k *Kernel) forgetCompany(id string) { knownCompanies.m.Delete(k.instanceID + id) }

// CanAccessCompany reports whether the actor may reach the company at all.
func (k *Kernel) CanAccessCompany(a *Actor, companyID string) bool {
	switch {
	case a == nil:
		return false
	case a.IsAgent():
		return a.CompanyID == companyID
	case a.IsBoard():
		if a.IsLocalImplicit() || a.IsInstanceAdmin {
			return true
		}
		m, ok := a.MembershipFor(companyID)
		return ok && m.Status == "active"
	}
	return false
}

// AuthorizeCompany checks company access (403), existence (404) and, when permission is
// set, the permission key (403 naming it).
func (k *Kernel) AuthorizeCompany(ctx context.Context, a *Actor, companyID, permission string) error {
	if !k.CanAccessCompany(a, companyID) {
		return Forbidden("You do not have access to this company")
	}
	exists, err := k.companyExists(ctx, companyID)
	if err != nil {
		return Internal(err)
	}
	if !exists {
		return NotFound("Company not found")
	}
	if permission == "" {
		return nil
	}
	ok, err := k.HasPermission(ctx, a, companyID, permission)
	if err != nil {
		return Internal(err)
	}
	if !ok {
		return Forbidden(fmt.Sprintf("Missing permission %s for this company", permission)).WithCode("permission_denied")
	}
	return nil
}

// HasPermission reports whether the actor holds a permission key in a company: the local
// board and instance admins hold all; board users hold their role's defaults plus explicit
// grants; agents hold explicit grants, and a ceo agent the CEO's implicit ones.
func (k *Kernel) HasPermission(ctx context.Context, a *Actor, companyID, permission string) (bool, error) {
	if !k.CanAccessCompany(a, companyID) {
		return false, nil
	}
	principalType, principalID := "user", a.UserID
	switch {
	case a.IsBoard():
		if a.IsLocalImplicit() || a.IsInstanceAdmin {
			return true, nil
		}
		if m, ok := a.MembershipFor(companyID); ok && m.Status == "active" && slices.Contains(RoleDefaultGrants[m.MembershipRole], permission) {
			return true, nil
		}
	case a.IsAgent():
		if a.AgentRole == "ceo" && slices.Contains(ceoAgentGrants, permission) {
			return true, nil
		}
		principalType, principalID = "agent", a.AgentID
	default:
		return false, nil
	}
	var one int
	err := k.Pool.QueryRow(ctx, `SELECT 1 FROM kernel.principal_permission_grants
		WHERE company_id = $1 AND principal_type = $2 AND principal_id = $3 AND permission_key = $4`,
		companyID, principalType, principalID, permission).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("error reading permission grants: %w", err)
	}
	return true, nil
}
