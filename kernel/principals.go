package kernel

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Agent statuses (spec part 1 "Agent").
const (
	AgentStatusActive          = "active"
	AgentStatusPaused          = "paused"
	AgentStatusIdle            = "idle"
	AgentStatusRunning         = "running"
	AgentStatusError           = "error"
	AgentStatusPendingApproval = "pending_approval"
	AgentStatusTerminated      = "terminated"
)

// AgentStatuses lists every valid agent status.
var AgentStatuses = []string{
	AgentStatusActive, AgentStatusPaused, AgentStatusIdle, AgentStatusRunning,
	AgentStatusError, AgentStatusPendingApproval, AgentStatusTerminated,
}

// AgentIdentity is the kernel-owned part of an agent: who it is, where it belongs and
// whether it may authenticate. Configuration, adapters and runtime state belong to the
// agents extension.
type AgentIdentity struct {
	ID        string    `json:"id"`
	CompanyID string    `json:"companyId"`
	Name      string    `json:"name"`
	URLKey    string    `json:"urlKey"`
	Role      string    `json:"role"`
	Status    string    `json:"status"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// AgentCreateParams describes a new agent. Role defaults to general and Status to idle.
type AgentCreateParams struct {
	CompanyID string
	Name      string
	Role      string
	Status    string
}

const agentColumns = `id::text, company_id::text, name, url_key, role, status, created_at, updated_at`

func scanAgent(row pgx.Row) (*AgentIdentity, error) {
	var a AgentIdentity
	if err := row.Scan(&a.ID, &a.CompanyID, &a.Name, &a.URLKey, &a.Role, &a.Status, &a.CreatedAt, &a.UpdatedAt); err != nil {
		return nil, err
	}
	return &a, nil
}

// AgentURLKey derives the company-unique URL key of an agent name: lowercase, every run
// of characters other than a-z and 0-9 replaced by '-', trimmed of '-'. A name with no such
// characters yields "agent".
func AgentURLKey(name string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			dash = false
			continue
		}
		if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	key := strings.TrimRight(b.String(), "-")
	if key == "" {
		return "agent"
	}
	return key
}

// lockAgentNames serializes name and URL key allocation within one company for the rest of
// the transaction; the partial unique index agents_company_url_key_live stays the last word.
func lockAgentNames(ctx context.Context, tx pgx.Tx, companyID string) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('kernel.agents.url_key'), hashtext($1))`, companyID); err != nil {
		return fmt.Errorf("error locking agent names of company %s: %w", companyID, err)
	}
	return nil
}

func violatesUnique(err error, constraint string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505" && (constraint == "" || pgErr.ConstraintName == constraint)
}

func violatesForeignKey(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23503"
}

// AgentCreate creates an agent. Its URL key is derived from the name; when a non-terminated
// agent of the company already holds that key, a numeric suffix is added to both the name and
// the key ("Builder 2", builder-2), taking the lowest free number from 2. The caller records
// the activity entry.
func (k *Kernel) AgentCreate(ctx context.Context, p *AgentCreateParams) (*AgentIdentity, error) {
	name := strings.TrimSpace(p.Name)
	var details []ValidationDetail
	if name == "" {
		details = append(details, ValidationDetail{Path: "name", Message: "is required"})
	} else if len(name) > 200 {
		details = append(details, ValidationDetail{Path: "name", Message: "must be at most 200 characters"})
	}
	if !isUUID(p.CompanyID) {
		details = append(details, ValidationDetail{Path: "companyId", Message: "must be a UUID"})
	}
	role := strings.TrimSpace(p.Role)
	if role == "" {
		role = "general"
	}
	status := p.Status
	if status == "" {
		status = AgentStatusIdle
	}
	if !slices.Contains(AgentStatuses, status) || status == AgentStatusTerminated {
		details = append(details, ValidationDetail{Path: "status", Message: "must be one of active, paused, idle, running, error, pending_approval"})
	}
	if len(details) > 0 {
		return nil, ValidationError(details...)
	}

	// The advisory lock makes concurrent creates in one company pick distinct suffixes; the
	// retry covers writers that bypass it (direct SQL) and hit the unique index instead.
	for attempt := 0; ; attempt++ {
		a, err := k.agentCreateOnce(ctx, p.CompanyID, name, role, status)
		if err != nil && violatesUnique(err, "agents_company_url_key_live") && attempt < 5 {
			continue
		}
		return a, err
	}
}

func (k *Kernel) agentCreateOnce(ctx context.Context, companyID, name, role, status string) (*AgentIdentity, error) {
	tx, err := k.Pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("error creating agent: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if err := lockAgentNames(ctx, tx, companyID); err != nil {
		return nil, err
	}
	base := AgentURLKey(name)
	rows, err := tx.Query(ctx, `SELECT url_key FROM kernel.agents
		WHERE company_id = $1 AND status <> 'terminated' AND (url_key = $2 OR url_key LIKE $3)`,
		companyID, base, likeEscape(base)+"-%")
	if err != nil {
		return nil, fmt.Errorf("error reading agent url keys: %w", err)
	}
	taken := map[string]bool{}
	for rows.Next() {
		var key string
		if err := rows.Scan(&key); err != nil {
			rows.Close()
			return nil, fmt.Errorf("error reading agent url keys: %w", err)
		}
		taken[key] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error reading agent url keys: %w", err)
	}
	finalName, urlKey := name, base
	for n := 2; taken[urlKey]; n++ {
		finalName, urlKey = name+" "+strconv.Itoa(n), base+"-"+strconv.Itoa(n)
	}
	a, err := scanAgent(tx.QueryRow(ctx, `INSERT INTO kernel.agents (id, company_id, name, url_key, role, status)
		VALUES ($1, $2, $3, $4, $5, $6) RETURNING `+agentColumns,
		newID(), companyID, finalName, urlKey, role, status))
	if violatesForeignKey(err) {
		return nil, NotFound("Company not found")
	}
	if err != nil {
		return nil, fmt.Errorf("error creating agent: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("error creating agent: %w", err)
	}
	return a, nil
}

func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// AgentGetByID returns an agent, terminated ones included; a missing agent or an id that is
// not a UUID is (nil, nil).
func (k *Kernel) AgentGetByID(ctx context.Context, id string) (*AgentIdentity, error) {
	if !isUUID(id) {
		return nil, nil
	}
	a, err := scanAgent(k.Pool.QueryRow(ctx, `SELECT `+agentColumns+` FROM kernel.agents WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("error reading agent %s: %w", id, err)
	}
	return a, nil
}

// AgentGetByURLKey returns the non-terminated agent of a company holding a URL key
// (compared case-insensitively), or (nil, nil).
func (k *Kernel) AgentGetByURLKey(ctx context.Context, companyID, urlKey string) (*AgentIdentity, error) {
	if !isUUID(companyID) {
		return nil, nil
	}
	a, err := scanAgent(k.Pool.QueryRow(ctx, `SELECT `+agentColumns+` FROM kernel.agents
		WHERE company_id = $1 AND url_key = $2 AND status <> 'terminated'`, companyID, strings.ToLower(strings.TrimSpace(urlKey))))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("error reading agent %s of company %s: %w", urlKey, companyID, err)
	}
	return a, nil
}

// AgentList returns the agents of a company in creation order, terminated ones only when
// includeTerminated is set. The list is never nil.
func (k *Kernel) AgentList(ctx context.Context, companyID string, includeTerminated bool) ([]*AgentIdentity, error) {
	out := []*AgentIdentity{}
	if !isUUID(companyID) {
		return out, nil
	}
	rows, err := k.Pool.Query(ctx, `SELECT `+agentColumns+` FROM kernel.agents
		WHERE company_id = $1 AND ($2 OR status <> 'terminated') ORDER BY created_at, id`, companyID, includeTerminated)
	if err != nil {
		return nil, fmt.Errorf("error listing agents of company %s: %w", companyID, err)
	}
	defer rows.Close()
	for rows.Next() {
		a, err := scanAgent(rows)
		if err != nil {
			return nil, fmt.Errorf("error listing agents of company %s: %w", companyID, err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error listing agents of company %s: %w", companyID, err)
	}
	return out, nil
}

// AgentSetStatus moves an agent to a status. Terminated is final: moving a terminated agent
// to any other status is a 409; setting terminated again is a no-op. Terminating revokes all
// the agent's API keys in the same transaction, and since actor resolution reads the agent
// on every request, the agent's credentials stop working at once. A missing agent is a 404;
// an unknown status a 400. The caller records the activity entry.
func (k *Kernel) AgentSetStatus(ctx context.Context, id, status string) (*AgentIdentity, error) {
	return k.AgentSetStatusFrom(ctx, id, status, nil)
}

// AgentSetStatusFrom is AgentSetStatus applied only while the agent's status is one of
// from (any status when from is empty); otherwise the agent is returned unchanged. The
// check and the change happen under one row lock.
func (k *Kernel) AgentSetStatusFrom(ctx context.Context, id, status string, from []string) (*AgentIdentity, error) {
	if !slices.Contains(AgentStatuses, status) {
		return nil, ValidationError(ValidationDetail{Path: "status", Message: "must be one of " + strings.Join(AgentStatuses, ", ")})
	}
	if !isUUID(id) {
		return nil, NotFound("Agent not found")
	}
	tx, err := k.Pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("error setting status of agent %s: %w", id, err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	cur, err := scanAgent(tx.QueryRow(ctx, `SELECT `+agentColumns+` FROM kernel.agents WHERE id = $1 FOR UPDATE`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, NotFound("Agent not found")
	}
	if err != nil {
		return nil, fmt.Errorf("error reading agent %s: %w", id, err)
	}
	if len(from) > 0 && !slices.Contains(from, cur.Status) {
		return cur, nil
	}
	if cur.Status == AgentStatusTerminated {
		if status == AgentStatusTerminated {
			return cur, nil
		}
		return nil, Conflict("Terminated agents cannot change status").WithCode("agent_terminated")
	}
	if cur.Status == status {
		return cur, nil
	}
	a, err := scanAgent(tx.QueryRow(ctx, `UPDATE kernel.agents SET status = $2, updated_at = now() WHERE id = $1 RETURNING `+agentColumns, id, status))
	if err != nil {
		return nil, fmt.Errorf("error setting status of agent %s: %w", id, err)
	}
	if status == AgentStatusTerminated {
		if _, err := tx.Exec(ctx, `UPDATE kernel.agent_api_keys SET revoked_at = now() WHERE agent_id = $1 AND revoked_at IS NULL`, id); err != nil {
			return nil, fmt.Errorf("error revoking keys of agent %s: %w", id, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("error setting status of agent %s: %w", id, err)
	}
	return a, nil
}

// AgentRename renames an agent and re-derives its URL key. When another non-terminated agent
// of the company holds the new key the rename is a 409 "Agent name already in use"; a missing
// agent is a 404. The caller records the activity entry.
func (k *Kernel) AgentRename(ctx context.Context, id, name string) (*AgentIdentity, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return nil, ValidationError(ValidationDetail{Path: "name", Message: "is required"})
	}
	if len(name) > 200 {
		return nil, ValidationError(ValidationDetail{Path: "name", Message: "must be at most 200 characters"})
	}
	if !isUUID(id) {
		return nil, NotFound("Agent not found")
	}
	tx, err := k.Pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("error renaming agent %s: %w", id, err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	var companyID string
	err = tx.QueryRow(ctx, `SELECT company_id::text FROM kernel.agents WHERE id = $1`, id).Scan(&companyID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, NotFound("Agent not found")
	}
	if err != nil {
		return nil, fmt.Errorf("error reading agent %s: %w", id, err)
	}
	if err := lockAgentNames(ctx, tx, companyID); err != nil {
		return nil, err
	}
	urlKey := AgentURLKey(name)
	var taken bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM kernel.agents a, kernel.agents self
		WHERE self.id = $1 AND self.status <> 'terminated' AND a.company_id = self.company_id
			AND a.id <> self.id AND a.status <> 'terminated' AND a.url_key = $2)`, id, urlKey).Scan(&taken); err != nil {
		return nil, fmt.Errorf("error checking agent name: %w", err)
	}
	if taken {
		return nil, Conflict("Agent name already in use")
	}
	a, err := scanAgent(tx.QueryRow(ctx, `UPDATE kernel.agents SET name = $2, url_key = $3, updated_at = now() WHERE id = $1 RETURNING `+agentColumns, id, name, urlKey))
	if violatesUnique(err, "agents_company_url_key_live") {
		return nil, Conflict("Agent name already in use")
	}
	if err != nil {
		return nil, fmt.Errorf("error renaming agent %s: %w", id, err)
	}
	if err := tx.Commit(ctx); err != nil {
		if violatesUnique(err, "agents_company_url_key_live") {
			return nil, Conflict("Agent name already in use")
		}
		return nil, fmt.Errorf("error renaming agent %s: %w", id, err)
	}
	return a, nil
}

// agentRoles are the roles an agent may have (REFERENCE.md 2.6).
var agentRoles = map[string]bool{"ceo": true, "cto": true, "cmo": true, "cfo": true, "security": true, "engineer": true,
	"designer": true, "pm": true, "qa": true, "devops": true, "researcher": true, "general": true}

// AgentSetRole changes an agent's role.
func (k *Kernel) AgentSetRole(ctx context.Context, id, role string) (*AgentIdentity, error) {
	if !agentRoles[role] {
		return nil, ValidationError(ValidationDetail{Path: "role", Message: "unknown role " + role})
	}
	if !isUUID(id) {
		return nil, NotFound("Agent not found")
	}
	tag, err := k.Pool.Exec(ctx, `UPDATE kernel.agents SET role = $2, updated_at = now() WHERE id = $1`, id, role)
	if err != nil {
		return nil, fmt.Errorf("error changing role of agent %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return nil, NotFound("Agent not found")
	}
	return k.AgentGetByID(ctx, id)
}
