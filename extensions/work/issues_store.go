package work

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/schema"
)

// issueStore holds the SQL of the issues area: issues, their labels and blocker edges, labels
// and read and inbox marks. Its methods are Noun+Verb with one params struct, sorted
// alphabetically. db is the pool or a transaction; pool, when set, is the pgx pool under
// the bun pool, which the reads that may run outside a transaction use directly.
type issueStore struct {
	db   bun.IDB
	pool *pgxpool.Pool
}

// newIssueStore returns the issue store over db (the pool or a transaction).
func newIssueStore(db bun.IDB) *issueStore { return &issueStore{db: db} }

var (
	issueColumnsOnce sync.Once
	issueColumnsSQL  string
)

// issueColumns is the column list of Issue, for RETURNING clauses of raw statements (the
// table also has the generated search_vector, which the model does not map).
func issueColumns() string {
	issueColumnsOnce.Do(func() {
		t := reflect.TypeFor[Issue]()
		names := make([]string, 0, t.NumField())
		for i := range t.NumField() {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("bun"), ",")
			if name == "" || strings.Contains(name, ":") {
				continue
			}
			names = append(names, name)
		}
		issueColumnsSQL = strings.Join(names, ", ")
	})
	return issueColumnsSQL
}

// issueSQLArgs are named arguments (?name) of a raw statement.
type issueSQLArgs map[string]any

// AppendNamedArg implements schema.NamedArgAppender.
func (a issueSQLArgs) AppendNamedArg(gen schema.QueryGen, b []byte, name string) ([]byte, bool) {
	v, ok := a[name]
	if !ok {
		return b, false
	}
	if qa, ok := v.(schema.QueryAppender); ok {
		bb, err := qa.AppendQuery(gen, b)
		if err != nil {
			return dialect.AppendError(b, err), true
		}
		return bb, true
	}
	return gen.Append(b, v), true
}

// issueUnresolvedBlockersSQL is true when the issue named by the column issues.id has a
// blocker that is not done (only done resolves a blocker; cancelled does not).
const issueUnresolvedBlockersSQL = `EXISTS (SELECT 1 FROM issue_relations ur JOIN issues ub ON ub.id = ur.issue_id
	WHERE ur.related_issue_id = issues.id AND ur.type = 'blocks' AND ub.status <> 'done')`

// Sort expressions; they match the expression indexes of migration 0010 exactly.
const (
	issuePriorityRankSQL = `(CASE priority WHEN 'critical' THEN 4 WHEN 'high' THEN 3 WHEN 'medium' THEN 2 ELSE 1 END)`
	issueStatusRankSQL   = `(CASE status WHEN 'backlog' THEN 1 WHEN 'todo' THEN 2 WHEN 'in_progress' THEN 3 WHEN 'in_review' THEN 4
        WHEN 'blocked' THEN 5 WHEN 'done' THEN 6 ELSE 7 END)`
)

// IssueBrief is a compact reference to an issue (blockers, blocked issues, ancestors).
type IssueBrief struct {
	ID         string `bun:"id" json:"id"`
	Identifier string `bun:"identifier" json:"identifier"`
	Title      string `bun:"title" json:"title"`
	Status     string `bun:"status" json:"status"`
}

// issueUniqueViolation reports whether err is a unique violation of the named constraint or
// index (any when constraint is empty).
func issueUniqueViolation(err error, constraint string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505" && (constraint == "" || pgErr.ConstraintName == constraint)
}

// IssueAncestorsListParams names the issue whose parent chain is listed.
type IssueAncestorsListParams struct{ IssueID string }

// IssueAncestorsList returns the parent chain of an issue, nearest first (at most 50 levels).
func (s *issueStore) IssueAncestorsList(ctx context.Context, p *IssueAncestorsListParams) ([]IssueBrief, error) {
	out := []IssueBrief{}
	err := s.db.NewRaw(`WITH RECURSIVE up(id, depth) AS (
			SELECT parent_id, 1 FROM issues WHERE id = ? AND parent_id IS NOT NULL
			UNION ALL
			SELECT i.parent_id, up.depth + 1 FROM up JOIN issues i ON i.id = up.id
			WHERE i.parent_id IS NOT NULL AND up.depth < 50
		)
		SELECT i.id, i.identifier, i.title, i.status FROM up JOIN issues i ON i.id = up.id ORDER BY up.depth`, p.IssueID).
		Scan(ctx, &out)
	if err != nil {
		return nil, fmt.Errorf("error listing ancestors of issue %s: %w", p.IssueID, err)
	}
	return out, nil
}

// IssueBlockerAddParams adds one "blocks" edge: BlockerID blocks IssueID.
type IssueBlockerAddParams struct {
	CompanyID        string
	BlockerID        string
	IssueID          string
	CreatedByAgentID *string
	CreatedByUserID  *string
}

// IssueBlockerAdd adds a blocker edge (a no-op when it exists).
func (s *issueStore) IssueBlockerAdd(ctx context.Context, p *IssueBlockerAddParams) error {
	if _, err := s.db.NewRaw(`INSERT INTO issue_relations (id, company_id, issue_id, related_issue_id, type, created_by_agent_id, created_by_user_id)
		VALUES (gen_random_uuid(), ?, ?, ?, 'blocks', ?, ?) ON CONFLICT DO NOTHING`,
		p.CompanyID, p.BlockerID, p.IssueID, p.CreatedByAgentID, p.CreatedByUserID).Exec(ctx); err != nil {
		return fmt.Errorf("error adding blocker %s of issue %s: %w", p.BlockerID, p.IssueID, err)
	}
	return nil
}

// IssueBlockerEdgesReachableParams names the issue whose downstream blocker graph is read.
type IssueBlockerEdgesReachableParams struct{ IssueID string }

// IssueBlockerEdge is one "blocks" edge: BlockerID blocks BlockedID.
type IssueBlockerEdge struct {
	BlockerID string `bun:"issue_id"`
	BlockedID string `bun:"related_issue_id"`
}

// IssueBlockerEdgesReachable returns every "blocks" edge reachable from an issue by following
// the issues it blocks, transitively (a recursive CTE); the caller searches it for cycles.
func (s *issueStore) IssueBlockerEdgesReachable(ctx context.Context, p *IssueBlockerEdgesReachableParams) ([]IssueBlockerEdge, error) {
	var out []IssueBlockerEdge
	err := s.db.NewRaw(`WITH RECURSIVE reach(id) AS (
			SELECT ?::uuid
			UNION
			SELECT r.related_issue_id FROM reach JOIN issue_relations r ON r.issue_id = reach.id AND r.type = 'blocks'
		)
		SELECT r.issue_id, r.related_issue_id FROM issue_relations r JOIN reach ON r.issue_id = reach.id
		WHERE r.type = 'blocks'`, p.IssueID).Scan(ctx, &out)
	if err != nil {
		return nil, fmt.Errorf("error reading the blocker graph below issue %s: %w", p.IssueID, err)
	}
	return out, nil
}

// IssueBlockerStatus is a blocker of an issue with its readiness.
type IssueBlockerStatus struct {
	IssueBrief
	Resolved bool `bun:"resolved" json:"resolved"`
}

// IssueBlockersListParams names the blocked issue.
type IssueBlockersListParams struct{ IssueID string }

// IssueBlockersList returns the issues blocking an issue, with resolved = done.
func (s *issueStore) IssueBlockersList(ctx context.Context, p *IssueBlockersListParams) ([]IssueBlockerStatus, error) {
	out := []IssueBlockerStatus{}
	err := s.db.NewRaw(`SELECT b.id, b.identifier, b.title, b.status, b.status = 'done' AS resolved
		FROM issue_relations r JOIN issues b ON b.id = r.issue_id
		WHERE r.related_issue_id = ? AND r.type = 'blocks' ORDER BY b.issue_number`, p.IssueID).Scan(ctx, &out)
	if err != nil {
		return nil, fmt.Errorf("error listing blockers of issue %s: %w", p.IssueID, err)
	}
	return out, nil
}

// IssueBlockersLockParams names the company whose blocker graph is locked.
type IssueBlockersLockParams struct{ CompanyID string }

// IssueBlockersLock serializes blocker-graph writes of a company for the rest of the
// transaction, so that two concurrent edits cannot close a cycle between them.
func (s *issueStore) IssueBlockersLock(ctx context.Context, p *IssueBlockersLockParams) error {
	if _, err := s.db.NewRaw(`SELECT pg_advisory_xact_lock(hashtext('ext_work.issue_blockers'), hashtext(?))`, p.CompanyID).
		Exec(ctx); err != nil {
		return fmt.Errorf("error locking the blocker graph of company %s: %w", p.CompanyID, err)
	}
	return nil
}

// IssueBlockersReplaceParams sets the complete blocker set of an issue.
type IssueBlockersReplaceParams struct {
	CompanyID        string
	IssueID          string
	BlockerIDs       []string
	CreatedByAgentID *string
	CreatedByUserID  *string
}

// IssueBlockersReplace replaces the blockers of an issue and returns the ids added and
// removed. Run it in a transaction holding IssueBlockersLock.
func (s *issueStore) IssueBlockersReplace(ctx context.Context, p *IssueBlockersReplaceParams) (added, removed []string, err error) {
	var current []string
	if err := s.db.NewRaw(`SELECT issue_id::text FROM issue_relations WHERE related_issue_id = ? AND type = 'blocks'`, p.IssueID).
		Scan(ctx, &current); err != nil {
		return nil, nil, fmt.Errorf("error reading blockers of issue %s: %w", p.IssueID, err)
	}
	want := map[string]bool{}
	for _, id := range p.BlockerIDs {
		want[id] = true
	}
	have := map[string]bool{}
	for _, id := range current {
		have[id] = true
		if !want[id] {
			removed = append(removed, id)
		}
	}
	for _, id := range p.BlockerIDs {
		if !have[id] {
			added = append(added, id)
			have[id] = true
		}
	}
	if len(removed) > 0 {
		if _, err := s.db.NewRaw(`DELETE FROM issue_relations WHERE related_issue_id = ? AND type = 'blocks' AND issue_id IN (?)`,
			p.IssueID, bun.In(removed)).Exec(ctx); err != nil {
			return nil, nil, fmt.Errorf("error removing blockers of issue %s: %w", p.IssueID, err)
		}
	}
	for _, id := range added {
		if _, err := s.db.NewRaw(`INSERT INTO issue_relations (id, company_id, issue_id, related_issue_id, type, created_by_agent_id, created_by_user_id)
			VALUES (gen_random_uuid(), ?, ?, ?, 'blocks', ?, ?) ON CONFLICT DO NOTHING`,
			p.CompanyID, id, p.IssueID, p.CreatedByAgentID, p.CreatedByUserID).Exec(ctx); err != nil {
			return nil, nil, fmt.Errorf("error adding blocker %s of issue %s: %w", id, p.IssueID, err)
		}
	}
	return added, removed, nil
}

// IssueBlocksListParams names the blocking issue.
type IssueBlocksListParams struct{ IssueID string }

// IssueBlocksList returns the issues an issue blocks.
func (s *issueStore) IssueBlocksList(ctx context.Context, p *IssueBlocksListParams) ([]IssueBrief, error) {
	out := []IssueBrief{}
	err := s.db.NewRaw(`SELECT i.id, i.identifier, i.title, i.status
		FROM issue_relations r JOIN issues i ON i.id = r.related_issue_id
		WHERE r.issue_id = ? AND r.type = 'blocks' ORDER BY i.issue_number`, p.IssueID).Scan(ctx, &out)
	if err != nil {
		return nil, fmt.Errorf("error listing issues blocked by %s: %w", p.IssueID, err)
	}
	return out, nil
}

// IssueCheckoutParams is one checkout attempt by a run of an agent.
type IssueCheckoutParams struct {
	IssueID          string
	AgentID          string
	RunID            string
	AgentNameKey     *string
	ExpectedStatuses []string
}

// IssueCheckout is the atomic conditional checkout of REFERENCE.md 2.2: it assigns the
// issue to the agent, sets the checkout and execution run, moves it to in_progress and
// stamps startedAt (first entry only) when the status is expected and not terminal, the
// issue is unassigned or the agent's with no or the same checkout run, the execution lock is
// free or this run's, and no blocker is unresolved. It returns nil when nothing matched.
func (s *issueStore) IssueCheckout(ctx context.Context, p *IssueCheckoutParams) (*Issue, error) {
	return s.issueUpdateReturning(ctx, `UPDATE issues SET assignee_agent_id = ?agent, assignee_user_id = NULL,
			checkout_run_id = ?run, execution_run_id = ?run, execution_agent_name_key = ?key, execution_locked_at = now(),
			status = 'in_progress', started_at = COALESCE(started_at, now()),
			unblock_descriptor = CASE WHEN status = 'blocked' THEN NULL ELSE unblock_descriptor END, updated_at = now()
		WHERE id = ?id AND status IN (?expected) AND status NOT IN ('done', 'cancelled')
			AND (assignee_agent_id IS NULL OR (assignee_agent_id = ?agent AND (checkout_run_id IS NULL OR checkout_run_id = ?run)))
			AND (execution_run_id IS NULL OR execution_run_id = ?run)
			AND NOT `+issueUnresolvedBlockersSQL,
		checkoutArgs(p, ""))
}

// IssueCheckoutAdoptParams adopts an in_progress issue of the agent whose checkout run is
// PreviousRunID (empty: none) for a new run.
type IssueCheckoutAdoptParams struct {
	IssueCheckoutParams
	PreviousRunID string
}

// IssueCheckoutAdopt moves the checkout of an in_progress issue assigned to the agent from
// a missing (PreviousRunID empty) or stale run to this run, conditionally; nil when the
// issue changed meanwhile.
func (s *issueStore) IssueCheckoutAdopt(ctx context.Context, p *IssueCheckoutAdoptParams) (*Issue, error) {
	prev := "checkout_run_id IS NULL"
	if p.PreviousRunID != "" {
		prev = "checkout_run_id = ?prev"
	}
	return s.issueUpdateReturning(ctx, `UPDATE issues SET checkout_run_id = ?run, execution_run_id = ?run,
			execution_agent_name_key = ?key, execution_locked_at = now(), started_at = COALESCE(started_at, now()), updated_at = now()
		WHERE id = ?id AND status = 'in_progress' AND assignee_agent_id = ?agent AND `+prev+`
			AND (execution_run_id IS NULL OR execution_run_id = ?run OR execution_run_id = ?prev)
			AND NOT `+issueUnresolvedBlockersSQL,
		checkoutArgs(&p.IssueCheckoutParams, p.PreviousRunID))
}

func checkoutArgs(p *IssueCheckoutParams, prev string) issueSQLArgs {
	return issueSQLArgs{"id": p.IssueID, "agent": p.AgentID, "run": p.RunID, "key": p.AgentNameKey,
		"expected": bun.In(p.ExpectedStatuses), "prev": prev}
}

// IssueCountParams counts the issues a list would return (limit and offset ignored).
type IssueCountParams = IssueListParams

// IssueCount counts the issues matching the list filters.
func (s *issueStore) IssueCount(ctx context.Context, p *IssueCountParams) (int, error) {
	n, err := s.issueListQuery(p, nil).Count(ctx)
	if err != nil {
		return 0, fmt.Errorf("error counting issues of company %s: %w", p.CompanyID, err)
	}
	return int(n), nil
}

// IssueDeleteParams names the issue to delete.
type IssueDeleteParams struct{ ID string }

// IssueDeleted is what an issue delete left for the caller to clear outside the database:
// the stored paths of its attachments' files.
type IssueDeleted struct {
	AttachmentPaths []string
}

// IssueDelete deletes an issue with everything it owns, in one transaction: its documents
// and their revisions (which a document key links to exactly one issue), and through
// foreign keys its comments, attachments, work products, labels, blocker edges and marks.
// Children keep existing with parent_id set null. The attachment files are the caller's to
// remove once this returns.
func (s *issueStore) IssueDelete(ctx context.Context, p *IssueDeleteParams) (*IssueDeleted, error) {
	out := &IssueDeleted{}
	err := s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if err := tx.NewSelect().Table("issue_attachments").Column("storage_path").Where("issue_id = ?", p.ID).
			Scan(ctx, &out.AttachmentPaths); err != nil {
			return err
		}
		var docIDs []string
		if err := tx.NewSelect().Table("issue_documents").Column("document_id").Where("issue_id = ?", p.ID).
			Scan(ctx, &docIDs); err != nil {
			return err
		}
		if _, err := tx.NewDelete().Model((*Issue)(nil)).Where("id = ?", p.ID).Exec(ctx); err != nil {
			return err
		}
		if len(docIDs) > 0 {
			if _, err := tx.NewDelete().Table("documents").Where("id IN (?)", bun.In(docIDs)).Exec(ctx); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("error deleting issue %s: %w", p.ID, err)
	}
	return out, nil
}

// IssueDependentsReadyParams names a blocker whose blocked issues are examined.
type IssueDependentsReadyParams struct {
	// BlockerID is the issue that just resolved (or is about to disappear).
	BlockerID string
	// IgnoreBlocker treats BlockerID as gone (used before deleting it).
	IgnoreBlocker bool
}

// IssueDependent is an issue blocked by the blocker that now has no unresolved blocker.
type IssueDependent struct {
	ID              string  `bun:"id"`
	CompanyID       string  `bun:"company_id"`
	Status          string  `bun:"status"`
	AssigneeAgentID *string `bun:"assignee_agent_id"`
}

// IssueDependentsReady returns the non-terminal issues a blocker blocks that have no
// unresolved blocker left.
func (s *issueStore) IssueDependentsReady(ctx context.Context, p *IssueDependentsReadyParams) ([]IssueDependent, error) {
	var out []IssueDependent
	ignore := ""
	if p.IgnoreBlocker {
		ignore = "AND r2.issue_id <> ?0"
	}
	err := s.db.NewRaw(`SELECT i.id, i.company_id, i.status, i.assignee_agent_id
		FROM issue_relations r JOIN issues i ON i.id = r.related_issue_id
		WHERE r.issue_id = ?0 AND r.type = 'blocks' AND i.status NOT IN ('done', 'cancelled')
			AND NOT EXISTS (SELECT 1 FROM issue_relations r2 JOIN issues b ON b.id = r2.issue_id
				WHERE r2.related_issue_id = i.id AND r2.type = 'blocks' AND b.status <> 'done' `+ignore+`)`,
		p.BlockerID).Scan(ctx, &out)
	if err != nil {
		return nil, fmt.Errorf("error listing issues unblocked by %s: %w", p.BlockerID, err)
	}
	return out, nil
}

// IssueDescendantsCancelParams names the root of the tree to cancel.
type IssueDescendantsCancelParams struct{ IssueID string }

// IssueDescendantsCancel cancels an issue and every non-terminal descendant (stamping
// cancelledAt and clearing checkout and execution locks) and returns the issues it changed
// as they were before, so the caller can report the changes.
func (s *issueStore) IssueDescendantsCancel(ctx context.Context, p *IssueDescendantsCancelParams) ([]IssueBrief, error) {
	var out []IssueBrief
	err := s.db.NewRaw(`WITH RECURSIVE tree(id, depth) AS (
			SELECT id, 0 FROM issues WHERE id = ?
			UNION
			SELECT i.id, tree.depth + 1 FROM tree JOIN issues i ON i.parent_id = tree.id WHERE tree.depth < 100
		), old AS (
			SELECT i.id, i.identifier, i.title, i.status FROM issues i
			WHERE i.id IN (SELECT id FROM tree) AND i.status NOT IN ('done', 'cancelled') FOR UPDATE
		), upd AS (
			UPDATE issues SET status = 'cancelled', cancelled_at = COALESCE(cancelled_at, now()), checkout_run_id = NULL,
				execution_run_id = NULL, execution_agent_name_key = NULL, execution_locked_at = NULL,
				unblock_descriptor = NULL, updated_at = now()
			FROM old WHERE issues.id = old.id RETURNING issues.id
		)
		SELECT old.id, old.identifier, old.title, old.status FROM old JOIN upd ON upd.id = old.id`, p.IssueID).Scan(ctx, &out)
	if err != nil {
		return nil, fmt.Errorf("error cancelling the tree of issue %s: %w", p.IssueID, err)
	}
	return out, nil
}

// IssueExecutionLockClearParams names an issue and the stale run holding its execution lock.
type IssueExecutionLockClearParams struct {
	IssueID string
	RunID   string
}

// IssueExecutionLockClear clears an execution lock still held by the given run.
func (s *issueStore) IssueExecutionLockClear(ctx context.Context, p *IssueExecutionLockClearParams) (bool, error) {
	res, err := s.db.NewRaw(`UPDATE issues SET execution_run_id = NULL, execution_agent_name_key = NULL, execution_locked_at = NULL,
			checkout_run_id = CASE WHEN checkout_run_id = ?1 THEN NULL ELSE checkout_run_id END
		WHERE id = ?0 AND execution_run_id = ?1`, p.IssueID, p.RunID).Exec(ctx)
	if err != nil {
		return false, fmt.Errorf("error clearing the execution lock of issue %s: %w", p.IssueID, err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// IssueGetParams names an issue by id; ForUpdate locks the row for the transaction.
type IssueGetParams struct {
	ID        string
	ForUpdate bool
}

// IssueGet returns an issue by id, or nil.
func (s *issueStore) IssueGet(ctx context.Context, p *IssueGetParams) (*Issue, error) {
	iss := new(Issue)
	q := s.db.NewSelect().Model(iss).Where("id = ?", p.ID)
	if p.ForUpdate {
		q = q.For("UPDATE")
	}
	if err := q.Scan(ctx); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, nil
		}
		return nil, fmt.Errorf("error reading issue %s: %w", p.ID, err)
	}
	return iss, nil
}

// IssueGetByIdempotencyKeyParams names a company and an idempotency key.
type IssueGetByIdempotencyKeyParams struct {
	CompanyID string
	Key       string
}

// IssueGetByIdempotencyKey returns the issue created with an idempotency key, or nil.
func (s *issueStore) IssueGetByIdempotencyKey(ctx context.Context, p *IssueGetByIdempotencyKeyParams) (*Issue, error) {
	iss := new(Issue)
	err := s.db.NewSelect().Model(iss).Where("company_id = ? AND idempotency_key = ?", p.CompanyID, p.Key).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("error reading issue by idempotency key: %w", err)
	}
	return iss, nil
}

// IssueIDsInCompanyParams names a company and issue ids.
type IssueIDsInCompanyParams struct {
	CompanyID string
	IDs       []string
}

// IssueIDsInCompany returns those of the ids that are issues of the company.
func (s *issueStore) IssueIDsInCompany(ctx context.Context, p *IssueIDsInCompanyParams) (map[string]bool, error) {
	found := map[string]bool{}
	if len(p.IDs) == 0 {
		return found, nil
	}
	var ids []string
	if err := s.db.NewRaw(`SELECT id::text FROM issues WHERE company_id = ? AND id IN (?)`, p.CompanyID, bun.In(p.IDs)).
		Scan(ctx, &ids); err != nil {
		return nil, fmt.Errorf("error checking issues of company %s: %w", p.CompanyID, err)
	}
	for _, id := range ids {
		found[id] = true
	}
	return found, nil
}

// IssueIdentifiersListParams names issues by id.
type IssueIdentifiersListParams struct{ IDs []string }

// IssueIdentifiersList maps the ids of existing issues to their identifiers.
func (s *issueStore) IssueIdentifiersList(ctx context.Context, p *IssueIdentifiersListParams) (map[string]string, error) {
	out := map[string]string{}
	if len(p.IDs) == 0 {
		return out, nil
	}
	var rows []IssueBrief
	if err := s.db.NewRaw(`SELECT id, identifier, title, status FROM issues WHERE id IN (?)`, bun.In(p.IDs)).Scan(ctx, &rows); err != nil {
		return nil, fmt.Errorf("error reading issue identifiers: %w", err)
	}
	for _, r := range rows {
		out[r.ID] = r.Identifier
	}
	return out, nil
}

// IssueInsertParams holds a new issue.
type IssueInsertParams struct{ Issue *Issue }

// IssueInsert inserts an issue and fills its created and updated times. A duplicate
// idempotency key is reported by issueUniqueViolation(err, "issues_idempotency_key").
func (s *issueStore) IssueInsert(ctx context.Context, p *IssueInsertParams) error {
	iss := p.Issue
	runner := issueSQLRunner(s.db)
	if runner == nil {
		if _, err := s.db.NewInsert().Model(iss).Returning("created_at, updated_at").Exec(ctx); err != nil {
			return fmt.Errorf("error inserting issue: %w", err)
		}
		return nil
	}
	// One statement text for every issue, with $n parameters, so the connection prepares it
	// once; bun would write the values into the text, a new statement each time.
	err := runner.QueryRowContext(ctx, issueInsertSQL(), issueInsertArgs(iss)...).Scan(&iss.CreatedAt, &iss.UpdatedAt)
	if err != nil {
		return fmt.Errorf("error inserting issue: %w", err)
	}
	return nil
}

// issueInsertArgs are the parameters of issueInsertSQL for iss.
func issueInsertArgs(iss *Issue) []any {
	var unblock any
	if len(iss.UnblockDescriptor) > 0 {
		unblock = string(iss.UnblockDescriptor)
	}
	return []any{iss.ID, iss.CompanyID, iss.ProjectID, iss.ProjectWorkspaceID,
		iss.GoalID, iss.ParentID, iss.Title, iss.Description, iss.Status, iss.WorkMode, iss.Priority, iss.ReviewPolicy,
		iss.AssigneeAgentID, iss.AssigneeUserID, iss.CheckoutRunID, iss.ExecutionRunID, iss.ExecutionAgentNameKey,
		iss.ExecutionLockedAt, iss.CreatedByAgentID, iss.CreatedByUserID, iss.ResponsibleUserID, iss.IssueNumber,
		iss.Identifier, iss.OriginKind, iss.OriginID, iss.OriginRunID, iss.OriginFingerprint, iss.RequestDepth,
		iss.BillingCode, unblock, iss.IdempotencyKey, iss.StartedAt, iss.CompletedAt, iss.CancelledAt,
		iss.HiddenAt}
}

// issueInsertSQL inserts every column of an issue but created_at and updated_at (their
// defaults), in the struct's order, and returns those two.
func issueInsertSQL() string {
	issueInsertOnce.Do(func() {
		cols := strings.Split(issueColumns(), ", ")
		cols = slicesDeleteStr(cols, "created_at", "updated_at")
		ph := make([]string, len(cols))
		for i := range cols {
			ph[i] = fmt.Sprintf("$%d", i+1)
		}
		issueInsertText = `INSERT INTO issues (` + strings.Join(cols, ", ") + `) VALUES (` + strings.Join(ph, ", ") +
			`) RETURNING created_at, updated_at`
	})
	return issueInsertText
}

var (
	issueInsertOnce sync.Once
	issueInsertText string
)

// slicesDeleteStr returns s without the given values.
func slicesDeleteStr(s []string, drop ...string) []string {
	out := s[:0]
	for _, v := range s {
		keep := true
		for _, d := range drop {
			keep = keep && v != d
		}
		if keep {
			out = append(out, v)
		}
	}
	return out
}

// sqlRowQuerier runs one statement with $n parameters and returns its row.
type sqlRowQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// issueSQLRunner returns the database/sql handle under a bun pool or transaction, whose
// statements take $n parameters as they are (bun's own methods write the values into the
// text); nil for any other bun.IDB.
func issueSQLRunner(db bun.IDB) sqlRowQuerier {
	switch x := db.(type) {
	case bun.Tx:
		return x.Tx
	case *bun.Tx:
		return x.Tx
	case *bun.DB:
		return x.DB
	}
	return nil
}

// IssueLabelsListParams names the issues whose labels are read.
type IssueLabelsListParams struct{ IssueIDs []string }

// issueLabelRow is a label of an issue.
type issueLabelRow struct {
	IssueID string `bun:"issue_id"`
	Label
}

// issueLabelsSQL reads the labels of a set of issues ($1, uuid[]) sorted by name.
const issueLabelsSQL = `SELECT il.issue_id::text, l.id::text, l.company_id::text, l.name, l.color, l.created_at
	FROM issue_labels il JOIN labels l ON l.id = il.label_id
	WHERE il.issue_id = ANY($1::uuid[]) ORDER BY lower(l.name), l.id`

// IssueLabelsListPool is IssueLabelsList outside a transaction: pgx runs one statement text
// whatever the issues (prepared once per connection) and scans the rows in binary format.
func (s *issueStore) IssueLabelsListPool(ctx context.Context, pool *pgxpool.Pool, p *IssueLabelsListParams) (map[string][]Label, error) {
	out := map[string][]Label{}
	if len(p.IssueIDs) == 0 {
		return out, nil
	}
	rows, err := pool.Query(ctx, issueLabelsSQL, p.IssueIDs)
	if err != nil {
		return nil, fmt.Errorf("error listing labels of issues: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var issueID string
		var l Label
		if err := rows.Scan(&issueID, &l.ID, &l.CompanyID, &l.Name, &l.Color, &l.CreatedAt); err != nil {
			return nil, fmt.Errorf("error listing labels of issues: %w", err)
		}
		out[issueID] = append(out[issueID], l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error listing labels of issues: %w", err)
	}
	return out, nil
}

// IssueLabelsList returns the labels of each issue, sorted by name.
func (s *issueStore) IssueLabelsList(ctx context.Context, p *IssueLabelsListParams) (map[string][]Label, error) {
	out := map[string][]Label{}
	if len(p.IssueIDs) == 0 {
		return out, nil
	}
	var rows []issueLabelRow
	err := s.db.NewRaw(`SELECT il.issue_id, l.id, l.company_id, l.name, l.color, l.created_at
		FROM issue_labels il JOIN labels l ON l.id = il.label_id
		WHERE il.issue_id IN (?) ORDER BY lower(l.name), l.id`, bun.In(p.IssueIDs)).Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("error listing labels of issues: %w", err)
	}
	for _, r := range rows {
		out[r.IssueID] = append(out[r.IssueID], r.Label)
	}
	return out, nil
}

// IssueLabelsReplaceParams sets the complete label set of an issue.
type IssueLabelsReplaceParams struct {
	CompanyID string
	IssueID   string
	LabelIDs  []string
}

// IssueLabelsReplace replaces the labels of an issue.
func (s *issueStore) IssueLabelsReplace(ctx context.Context, p *IssueLabelsReplaceParams) error {
	if _, err := s.db.NewRaw(`DELETE FROM issue_labels WHERE issue_id = ?`, p.IssueID).Exec(ctx); err != nil {
		return fmt.Errorf("error clearing labels of issue %s: %w", p.IssueID, err)
	}
	if len(p.LabelIDs) == 0 {
		return nil
	}
	if _, err := s.db.NewRaw(`INSERT INTO issue_labels (issue_id, label_id, company_id)
		SELECT ?, l, ? FROM unnest(?::uuid[]) AS l ON CONFLICT DO NOTHING`, p.IssueID, p.CompanyID, pgdialect.Array(p.LabelIDs)).Exec(ctx); err != nil {
		return fmt.Errorf("error setting labels of issue %s: %w", p.IssueID, err)
	}
	return nil
}

// IssueListParams are the filters, order and page of an issue list. Every filter is
// served by an index of migrations 0001, 0010 or 0045 (see TestIssueListUsesIndexes);
// hidden issues are always left out.
type IssueListParams struct {
	CompanyID string
	Statuses  []string
	// AssigneeAgentID filters by agent; Unassigned selects issues with no assignee agent.
	AssigneeAgentID string
	Unassigned      bool
	AssigneeUserID  string
	ProjectID       string
	// ParentID filters by parent; TopLevel selects issues without a parent.
	ParentID string
	TopLevel bool
	GoalID   string
	LabelID  string
	// Q matches title and identifier words by prefix (search_vector, weight A), or the
	// identifier exactly.
	Q                        string
	OriginKind               string
	OriginKindPrefix         string
	OriginID                 string
	ExcludeRoutineExecutions bool
	// SortField is updatedAt (default), createdAt, priority or status; SortDir desc (default) or asc.
	SortField string
	SortDir   string
	Limit     int
	Offset    int
}

// IssueList returns a page of a company's issues.
func (s *issueStore) IssueList(ctx context.Context, pool *pgxpool.Pool, p *IssueListParams) ([]*Issue, error) {
	// bun builds the statement; pgx runs it and scans the rows straight into Issue fields in
	// the binary format, without database/sql's per-column conversions and bun's reflection,
	// which cost more than the query itself on a page of 50.
	query := s.issueListSelect(p, nil).ColumnExpr(issueColumns()).String()
	rows, err := pool.Query(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("error listing issues of company %s: %w", p.CompanyID, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*Issue, error) {
		iss := new(Issue)
		return iss, r.Scan(issueScanDest(iss)...)
	})
	if err != nil {
		return nil, fmt.Errorf("error listing issues of company %s: %w", p.CompanyID, err)
	}
	return out, nil
}

// issueScanDest returns the fields of iss in the order of issueColumns (the struct's).
func issueScanDest(iss *Issue) []any {
	return []any{&iss.ID, &iss.CompanyID, &iss.ProjectID, &iss.ProjectWorkspaceID, &iss.GoalID, &iss.ParentID,
		&iss.Title, &iss.Description, &iss.Status, &iss.WorkMode, &iss.Priority, &iss.ReviewPolicy,
		&iss.AssigneeAgentID, &iss.AssigneeUserID, &iss.CheckoutRunID, &iss.ExecutionRunID, &iss.ExecutionAgentNameKey,
		&iss.ExecutionLockedAt, &iss.CreatedByAgentID, &iss.CreatedByUserID, &iss.ResponsibleUserID, &iss.IssueNumber,
		&iss.Identifier, &iss.OriginKind, &iss.OriginID, &iss.OriginRunID, &iss.OriginFingerprint, &iss.RequestDepth,
		&iss.BillingCode, &iss.UnblockDescriptor, &iss.IdempotencyKey, &iss.StartedAt, &iss.CompletedAt, &iss.CancelledAt,
		&iss.HiddenAt, &iss.CreatedAt, &iss.UpdatedAt}
}

// issueListSelect is the complete select of IssueList: filters, order and page. Every sort
// has a matching index: (company_id, updated_at, id), (company_id, created_at, id) and the
// priority and status rank expression indexes; asc scans them backwards.
func (s *issueStore) issueListSelect(p *IssueListParams, dest *[]*Issue) *bun.SelectQuery {
	q := s.issueListQuery(p, dest)
	dir := "DESC"
	if p.SortDir == "asc" {
		dir = "ASC"
	}
	switch p.SortField {
	case "createdAt":
		q = q.OrderExpr("created_at " + dir).OrderExpr("id " + dir)
	case "priority":
		q = q.OrderExpr(issuePriorityRankSQL + " " + dir).OrderExpr("updated_at " + dir).OrderExpr("id " + dir)
	case "status":
		q = q.OrderExpr(issueStatusRankSQL + " " + dir).OrderExpr("updated_at " + dir).OrderExpr("id " + dir)
	default:
		q = q.OrderExpr("updated_at " + dir).OrderExpr("id " + dir)
	}
	return q.Limit(int64(p.Limit)).Offset(int64(p.Offset))
}

// issueListQuery builds the filtered select of IssueList and IssueCount (model nil: count).
func (s *issueStore) issueListQuery(p *IssueListParams, dest *[]*Issue) *bun.SelectQuery {
	q := s.db.NewSelect()
	if dest != nil {
		q = q.Model(dest)
	} else {
		q = q.Model((*Issue)(nil))
	}
	// Hidden issues (a plugin's operation issues) are never listed or counted; the sort
	// and broad filter indexes are partial on the same predicate (migration 0045).
	q = q.Where("company_id = ?", p.CompanyID).Where("hidden_at IS NULL")
	if len(p.Statuses) > 0 {
		q = q.Where("status IN (?)", bun.In(p.Statuses))
	}
	switch {
	case p.Unassigned:
		q = q.Where("assignee_agent_id IS NULL")
	case p.AssigneeAgentID != "":
		q = q.Where("assignee_agent_id = ?", p.AssigneeAgentID)
	}
	if p.AssigneeUserID != "" {
		q = q.Where("assignee_user_id = ?", p.AssigneeUserID)
	}
	if p.ProjectID != "" {
		q = q.Where("project_id = ?", p.ProjectID)
	}
	switch {
	case p.TopLevel:
		q = q.Where("parent_id IS NULL")
	case p.ParentID != "":
		q = q.Where("parent_id = ?", p.ParentID)
	}
	if p.GoalID != "" {
		q = q.Where("goal_id = ?", p.GoalID)
	}
	if p.LabelID != "" {
		q = q.Where("id IN (SELECT il.issue_id FROM issue_labels il WHERE il.label_id = ?)", p.LabelID)
	}
	if p.Q != "" {
		// Each word of q becomes a prefix match on the title and identifier lexemes; the
		// words are parsed by the same parser that built search_vector.
		q = q.Where(`(search_vector @@ (SELECT to_tsquery('simple', string_agg(quote_literal(t.lexeme) || ':*A', ' & '))
			FROM unnest(to_tsvector('simple', ?)) AS t) OR upper(identifier) = upper(?))`, p.Q, p.Q)
	}
	if p.OriginKind != "" {
		q = q.Where("origin_kind = ?", p.OriginKind)
	}
	if p.OriginKindPrefix != "" {
		q = q.Where("origin_kind LIKE ?", issueLikePrefix(p.OriginKindPrefix))
	}
	if p.OriginID != "" {
		q = q.Where("origin_id = ?", p.OriginID)
	}
	if p.ExcludeRoutineExecutions {
		q = q.Where("origin_kind <> 'routine_execution'")
	}
	return q
}

// issueLikePrefix escapes s for LIKE and appends the wildcard.
func issueLikePrefix(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return r.Replace(s) + "%"
}

// IssueMarkDeleteParams removes one read or inbox-archive mark.
type IssueMarkDeleteParams struct {
	Kind          issueMarkKind
	IssueID       string
	PrincipalType string
	PrincipalID   string
}

// IssueMarkDelete removes a mark and reports whether one existed.
func (s *issueStore) IssueMarkDelete(ctx context.Context, p *IssueMarkDeleteParams) (bool, error) {
	res, err := s.db.NewRaw(`DELETE FROM ? WHERE issue_id = ? AND principal_type = ? AND principal_id = ?`,
		bun.Ident(p.Kind.table()), p.IssueID, p.PrincipalType, p.PrincipalID).Exec(ctx)
	if err != nil {
		return false, fmt.Errorf("error removing %s mark of issue %s: %w", p.Kind, p.IssueID, err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// IssueMarkUpsertParams sets one read or inbox-archive mark to now.
type IssueMarkUpsertParams struct {
	Kind          issueMarkKind
	CompanyID     string
	IssueID       string
	PrincipalType string
	PrincipalID   string
}

// IssueMarkUpsert sets a mark to now and returns its time.
func (s *issueStore) IssueMarkUpsert(ctx context.Context, p *IssueMarkUpsertParams) (time.Time, error) {
	var at time.Time
	col := bun.Ident(p.Kind.column())
	err := s.db.NewRaw(`INSERT INTO ? (issue_id, company_id, principal_type, principal_id, ?) VALUES (?, ?, ?, ?, now())
		ON CONFLICT (issue_id, principal_type, principal_id) DO UPDATE SET ? = excluded.? RETURNING ?`,
		bun.Ident(p.Kind.table()), col, p.IssueID, p.CompanyID, p.PrincipalType, p.PrincipalID, col, col, col).Scan(ctx, &at)
	if err != nil {
		return time.Time{}, fmt.Errorf("error setting %s mark of issue %s: %w", p.Kind, p.IssueID, err)
	}
	return at, nil
}

// IssueParentCycleParams asks whether making ParentID the parent of IssueID closes a loop.
type IssueParentCycleParams struct {
	IssueID  string
	ParentID string
}

// IssueParentCycle reports whether IssueID is ParentID or one of its ancestors.
func (s *issueStore) IssueParentCycle(ctx context.Context, p *IssueParentCycleParams) (bool, error) {
	var found bool
	err := s.db.NewRaw(`WITH RECURSIVE up(id, depth) AS (
			SELECT ?::uuid, 0
			UNION ALL
			SELECT i.parent_id, up.depth + 1 FROM up JOIN issues i ON i.id = up.id WHERE i.parent_id IS NOT NULL AND up.depth < 1000
		)
		SELECT EXISTS (SELECT 1 FROM up WHERE id = ?)`, p.ParentID, p.IssueID).Scan(ctx, &found)
	if err != nil {
		return false, fmt.Errorf("error checking the parent chain of issue %s: %w", p.ParentID, err)
	}
	return found, nil
}

// IssueRefExistsParams names a project, workspace or goal that must exist in a company.
type IssueRefExistsParams struct {
	// Table is projects, project_workspaces or goals.
	Table     string
	CompanyID string
	ID        string
	// ProjectID, for a workspace, requires it to belong to that project.
	ProjectID string
}

// IssueRefExists reports whether the referenced row exists in the company. The statement
// takes $n parameters (one prepared text per table, not one per id as bun would write it);
// an id that is not a UUID exists nowhere.
func (s *issueStore) IssueRefExists(ctx context.Context, p *IssueRefExistsParams) (bool, error) {
	if !isUUID(p.ID) || (p.ProjectID != "" && !isUUID(p.ProjectID)) {
		return false, nil
	}
	q := `SELECT EXISTS (SELECT 1 FROM ` + pgx.Identifier{p.Table}.Sanitize() + ` WHERE id = $1 AND company_id = $2`
	args := []any{p.ID, p.CompanyID}
	if p.ProjectID != "" {
		q += ` AND project_id = $3`
		args = append(args, p.ProjectID)
	}
	q += `)`
	var ok bool
	var err error
	if s.pool != nil {
		err = s.pool.QueryRow(ctx, q, args...).Scan(&ok)
	} else if runner := issueSQLRunner(s.db); runner != nil {
		err = runner.QueryRowContext(ctx, q, args...).Scan(&ok)
	} else {
		err = fmt.Errorf("no database/sql handle under %T", s.db)
	}
	if err != nil {
		return false, fmt.Errorf("error checking %s %s: %w", p.Table, p.ID, err)
	}
	return ok, nil
}

// IssueRelatedBriefsParams names the project and goal of an issue (either may be empty).
type IssueRelatedBriefsParams struct {
	ProjectID string
	GoalID    string
}

// IssueProjectBrief is the project an issue shows.
type IssueProjectBrief struct {
	ID   string `bun:"id" json:"id"`
	Name string `bun:"name" json:"name"`
}

// IssueGoalBrief is the goal an issue shows.
type IssueGoalBrief struct {
	ID    string `bun:"id" json:"id"`
	Title string `bun:"title" json:"title"`
}

// IssueRelatedBriefs returns the project and goal briefs (nil when unset or gone).
func (s *issueStore) IssueRelatedBriefs(ctx context.Context, p *IssueRelatedBriefsParams) (*IssueProjectBrief, *IssueGoalBrief, error) {
	var proj *IssueProjectBrief
	var goal *IssueGoalBrief
	if p.ProjectID != "" {
		var rows []IssueProjectBrief
		if err := s.db.NewRaw(`SELECT id, name FROM projects WHERE id = ?`, p.ProjectID).Scan(ctx, &rows); err != nil {
			return nil, nil, fmt.Errorf("error reading project %s: %w", p.ProjectID, err)
		}
		if len(rows) > 0 {
			proj = &rows[0]
		}
	}
	if p.GoalID != "" {
		var rows []IssueGoalBrief
		if err := s.db.NewRaw(`SELECT id, title FROM goals WHERE id = ?`, p.GoalID).Scan(ctx, &rows); err != nil {
			return nil, nil, fmt.Errorf("error reading goal %s: %w", p.GoalID, err)
		}
		if len(rows) > 0 {
			goal = &rows[0]
		}
	}
	return proj, goal, nil
}

// IssueReleaseParams releases an issue as it was read: the update applies only while the
// assignee and checkout run are still the ones seen, so a concurrent checkout is not undone.
type IssueReleaseParams struct {
	IssueID             string
	SeenAssigneeAgentID *string
	SeenCheckoutRunID   *string
}

// IssueRelease moves in_progress back to todo (other statuses stay) and clears the agent
// assignee and the checkout and execution locks; nil when the issue changed meanwhile.
func (s *issueStore) IssueRelease(ctx context.Context, p *IssueReleaseParams) (*Issue, error) {
	return s.issueUpdateReturning(ctx, `UPDATE issues SET status = CASE WHEN status = 'in_progress' THEN 'todo' ELSE status END,
			assignee_agent_id = NULL, checkout_run_id = NULL, execution_run_id = NULL, execution_agent_name_key = NULL,
			execution_locked_at = NULL, updated_at = now()
		WHERE id = ?id AND assignee_agent_id IS NOT DISTINCT FROM ?assignee::uuid AND checkout_run_id IS NOT DISTINCT FROM ?run::text`,
		issueSQLArgs{"id": p.IssueID, "assignee": p.SeenAssigneeAgentID, "run": p.SeenCheckoutRunID})
}

// IssueSnapshotsListParams names a company and issue ids.
type IssueSnapshotsListParams struct {
	CompanyID string
	IDs       []string
}

// IssueSnapshot is the small view of an issue other extensions keep (decision targets).
type IssueSnapshot struct {
	ID              string    `bun:"id" json:"id"`
	Identifier      string    `bun:"identifier" json:"identifier"`
	Title           string    `bun:"title" json:"title"`
	Status          string    `bun:"status" json:"status"`
	AssigneeAgentID *string   `bun:"assignee_agent_id" json:"assigneeAgentId"`
	AssigneeUserID  *string   `bun:"assignee_user_id" json:"assigneeUserId"`
	UpdatedAt       time.Time `bun:"updated_at" json:"updatedAt"`
	// ChildCount and DescendantCount count the issues directly and transitively under it.
	ChildCount      int `bun:"child_count" json:"childCount"`
	DescendantCount int `bun:"descendant_count" json:"descendantCount"`
}

// IssueSnapshotsList returns snapshots of those of the ids that are issues of the company.
func (s *issueStore) IssueSnapshotsList(ctx context.Context, p *IssueSnapshotsListParams) ([]IssueSnapshot, error) {
	out := []IssueSnapshot{}
	if len(p.IDs) == 0 {
		return out, nil
	}
	err := s.db.NewRaw(`SELECT i.id, i.identifier, i.title, i.status, i.assignee_agent_id, i.assignee_user_id, i.updated_at,
			(SELECT count(*) FROM issues c WHERE c.parent_id = i.id) AS child_count,
			(WITH RECURSIVE tree(id, depth) AS (
				SELECT c.id, 1 FROM issues c WHERE c.parent_id = i.id
				UNION
				SELECT c.id, tree.depth + 1 FROM tree JOIN issues c ON c.parent_id = tree.id WHERE tree.depth < 100
			) SELECT count(DISTINCT id) FROM tree) AS descendant_count
		FROM issues i WHERE i.company_id = ? AND i.id IN (?)`, p.CompanyID, bun.In(p.IDs)).Scan(ctx, &out)
	if err != nil {
		return nil, fmt.Errorf("error reading issue snapshots: %w", err)
	}
	return out, nil
}

// IssueUnresolvedBlockersParams names an issue.
type IssueUnresolvedBlockersParams struct{ IssueID string }

// IssueUnresolvedBlockers returns the ids of an issue's blockers that are not done.
func (s *issueStore) IssueUnresolvedBlockers(ctx context.Context, p *IssueUnresolvedBlockersParams) ([]string, error) {
	ids := []string{}
	err := s.db.NewRaw(`SELECT b.id::text FROM issue_relations r JOIN issues b ON b.id = r.issue_id
		WHERE r.related_issue_id = ? AND r.type = 'blocks' AND b.status <> 'done' ORDER BY b.issue_number`, p.IssueID).Scan(ctx, &ids)
	if err != nil {
		return nil, fmt.Errorf("error reading unresolved blockers of issue %s: %w", p.IssueID, err)
	}
	return ids, nil
}

// IssuePendingApprovalExistsParams names an issue.
type IssuePendingApprovalExistsParams struct{ IssueID string }

// IssuePendingApprovalExists reports whether an approval linked to the issue still waits for
// a decision (pending or revision_requested).
func (s *issueStore) IssuePendingApprovalExists(ctx context.Context, p *IssuePendingApprovalExistsParams) (bool, error) {
	var ok bool
	err := s.db.NewRaw(`SELECT EXISTS (SELECT 1 FROM issue_approvals ia JOIN approvals a ON a.id = ia.approval_id
		WHERE ia.issue_id = ? AND a.status IN ('pending', 'revision_requested'))`, p.IssueID).Scan(ctx, &ok)
	if err != nil {
		return false, fmt.Errorf("error reading pending approvals of issue %s: %w", p.IssueID, err)
	}
	return ok, nil
}

// IssueUpdateParams writes the named columns of an issue (updated_at is always set).
type IssueUpdateParams struct {
	Issue   *Issue
	Columns []string
}

// IssueUpdate writes the columns and refreshes updated_at.
func (s *issueStore) IssueUpdate(ctx context.Context, p *IssueUpdateParams) error {
	q := s.db.NewUpdate().Model(p.Issue)
	if len(p.Columns) > 0 {
		q = q.Column(p.Columns...)
	}
	_, err := q.Set("updated_at = now()").WherePK().Returning("updated_at").Exec(ctx)
	if err != nil {
		return fmt.Errorf("error updating issue %s: %w", p.Issue.ID, err)
	}
	return nil
}

// issueUpdateReturning runs an UPDATE … RETURNING the issue columns with named arguments;
// nil when no row matched.
func (s *issueStore) issueUpdateReturning(ctx context.Context, query string, args issueSQLArgs) (*Issue, error) {
	iss := new(Issue)
	err := s.db.NewRaw(query+" RETURNING "+issueColumns(), args).Scan(ctx, iss)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("error updating issue %v: %w", args["id"], err)
	}
	return iss, nil
}

// LabelDeleteParams names a label.
type LabelDeleteParams struct{ ID string }

// LabelDelete deletes a label (its issue links go with it).
func (s *issueStore) LabelDelete(ctx context.Context, p *LabelDeleteParams) error {
	if _, err := s.db.NewDelete().Model((*Label)(nil)).Where("id = ?", p.ID).Exec(ctx); err != nil {
		return fmt.Errorf("error deleting label %s: %w", p.ID, err)
	}
	return nil
}

// LabelGetParams names a label.
type LabelGetParams struct{ ID string }

// LabelGet returns a label, or nil.
func (s *issueStore) LabelGet(ctx context.Context, p *LabelGetParams) (*Label, error) {
	l := new(Label)
	err := s.db.NewSelect().Model(l).Where("id = ?", p.ID).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("error reading label %s: %w", p.ID, err)
	}
	return l, nil
}

// LabelIDsInCompanyParams names a company and label ids.
type LabelIDsInCompanyParams struct {
	CompanyID string
	IDs       []string
}

// LabelIDsInCompany counts how many of the ids are labels of the company.
func (s *issueStore) LabelIDsInCompany(ctx context.Context, p *LabelIDsInCompanyParams) (int, error) {
	if len(p.IDs) == 0 {
		return 0, nil
	}
	n, err := s.db.NewSelect().Model((*Label)(nil)).Where("company_id = ? AND id IN (?)", p.CompanyID, bun.In(p.IDs)).Count(ctx)
	if err != nil {
		return 0, fmt.Errorf("error checking labels of company %s: %w", p.CompanyID, err)
	}
	return int(n), nil
}

// LabelInsertParams holds a new label.
type LabelInsertParams struct{ Label *Label }

// LabelInsert inserts a label; a duplicate name is issueUniqueViolation(err, "labels_company_name_key").
func (s *issueStore) LabelInsert(ctx context.Context, p *LabelInsertParams) error {
	if _, err := s.db.NewInsert().Model(p.Label).Returning("created_at").Exec(ctx); err != nil {
		return fmt.Errorf("error inserting label: %w", err)
	}
	return nil
}

// LabelListParams names a company.
type LabelListParams struct{ CompanyID string }

// LabelList returns a company's labels by name.
func (s *issueStore) LabelList(ctx context.Context, p *LabelListParams) ([]Label, error) {
	out := []Label{}
	if err := s.db.NewSelect().Model(&out).Where("company_id = ?", p.CompanyID).OrderExpr("lower(name), id").Scan(ctx); err != nil {
		return nil, fmt.Errorf("error listing labels of company %s: %w", p.CompanyID, err)
	}
	return out, nil
}
