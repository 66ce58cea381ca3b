package costs

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/keelhq/keel/sdk"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

// settleFunc recalculates a company's spend and evaluates its budget policies for the
// agents and projects that received cost events.
type settleFunc func(ctx context.Context, companyID string, agentIDs, projectIDs []string) error

// spendQueue coalesces the settling of a company's spend: while one settle of a company
// runs, the cost events that arrive join the next one, which starts when it ends and sees
// them all. Settles of one company never overlap in this process (and take a database
// advisory lock against other nodes), so the spend they write only moves forward, and a
// request that waits for its settle reads its own event in the figures.
type spendQueue struct {
	settle  settleFunc
	mu      sync.Mutex
	running map[string]bool
	next    map[string]*settleBatch
}

// settleBatch is one settle of a company and the requests waiting for it.
type settleBatch struct {
	companyID string
	agents    map[string]bool
	projects  map[string]bool
	done      chan struct{}
	err       error
}

func newSpendQueue(settle settleFunc) *spendQueue {
	return &spendQueue{settle: settle, running: map[string]bool{}, next: map[string]*settleBatch{}}
}

// do settles a company's spend after a cost event of agentID (and projectID, may be
// empty) and returns when a settle that started after the call has finished.
func (q *spendQueue) do(ctx context.Context, companyID, agentID, projectID string) error {
	q.mu.Lock()
	b := q.next[companyID]
	if b == nil {
		b = &settleBatch{companyID: companyID, agents: map[string]bool{}, projects: map[string]bool{}, done: make(chan struct{})}
		q.next[companyID] = b
	}
	if agentID != "" {
		b.agents[agentID] = true
	}
	if projectID != "" {
		b.projects[projectID] = true
	}
	if !q.running[companyID] {
		q.running[companyID] = true
		delete(q.next, companyID)
		go q.run(b)
	}
	q.mu.Unlock()
	select {
	case <-b.done:
		return b.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run settles b and then every batch that queued behind it, until none is left.
func (q *spendQueue) run(b *settleBatch) {
	for b != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		b.err = q.settle(ctx, b.companyID, sortedKeys(b.agents), sortedKeys(b.projects))
		cancel()
		close(b.done)
		q.mu.Lock()
		nb := q.next[b.companyID]
		if nb == nil {
			delete(q.running, b.companyID)
		} else {
			delete(q.next, b.companyID)
		}
		q.mu.Unlock()
		b = nb
	}
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// lockCompanySQL and unlockCompanySQL take and release a company's spend lock, which
// serializes settles, resolutions and the maintenance job of one company across keel nodes.
// The lock is held at session level on one pooled connection, and all the work under it runs
// on that connection: each statement still commits on its own (as it did when the lock was
// held by a transaction next to the pool), but a holder never waits for a second connection
// of the pool while keeping one, so a busy pool cannot stall the lock holders.
const (
	lockCompanySQL   = `SELECT pg_advisory_lock(hashtextextended($1, 11))`
	unlockCompanySQL = `SELECT pg_advisory_unlock(hashtextextended($1, 11))`
)

// querier runs statements: the pool, or the one connection that holds a company's lock.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// lockedConn is a pooled connection holding a company's spend lock.
type lockedConn struct {
	*pgxpool.Conn
	key string
}

// acquireCompanyConn takes a pooled connection for work under a company's spend lock; the
// lock itself is taken by lockCompany, or by the first statement of a batch.
func (c *Costs) acquireCompanyConn(ctx context.Context, companyID string) (*lockedConn, error) {
	conn, err := c.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("error taking a database connection for company %s: %w", companyID, err)
	}
	return &lockedConn{Conn: conn, key: "costs-company:" + companyID}, nil
}

// lockCompany acquires a connection and takes the company's spend lock on it. The caller
// releases both with release.
func (c *Costs) lockCompany(ctx context.Context, companyID string) (*lockedConn, error) {
	lc, err := c.acquireCompanyConn(ctx, companyID)
	if err != nil {
		return nil, err
	}
	if _, err := lc.Exec(ctx, lockCompanySQL, lc.key); err != nil {
		lc.discard()
		return nil, fmt.Errorf("error locking the spend of company %s: %w", companyID, err)
	}
	return lc, nil
}

// release gives up the lock (when locked) and returns the connection to the pool. A
// connection whose unlock fails is closed, which releases the lock with the session.
func (lc *lockedConn) release(locked bool) {
	if locked {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := lc.Exec(ctx, unlockCompanySQL, lc.key); err != nil {
			lc.discard()
			return
		}
	}
	lc.Release()
}

// discard closes the connection (ending its session and any lock it holds) and hands it back.
func (lc *lockedConn) discard() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = lc.Conn.Conn().Close(ctx)
	lc.Release()
}

// settleSpend recalculates spentMonthlyCents (current UTC month) of the company and of the
// agents that received events, and evaluates the active budget policies of the company and
// of those agents and projects. The lock and the month's sums go in one round trip.
func (c *Costs) settleSpend(ctx context.Context, companyID string, agentIDs, projectIDs []string) error {
	lc, err := c.acquireCompanyConn(ctx, companyID)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	ms, me := monthWindow(now)
	b := &pgx.Batch{}
	b.Queue(lockCompanySQL, lc.key)
	b.Queue(sumScopesSQL, companyID, &ms, &me)
	br := lc.SendBatch(ctx, b)
	_, lockErr := br.Exec()
	var month *scopeSums
	if lockErr == nil {
		rows, qerr := br.Query()
		if qerr != nil {
			err = fmt.Errorf("error summing spend of company %s: %w", companyID, qerr)
		} else {
			month, err = scanScopeSums(companyID, rows)
		}
	}
	if cerr := br.Close(); lockErr == nil && err == nil && cerr != nil {
		err = fmt.Errorf("error summing spend of company %s: %w", companyID, cerr)
	}
	if lockErr != nil {
		lc.discard()
		return fmt.Errorf("error settling spend of company %s: %w", companyID, lockErr)
	}
	defer lc.release(true)
	if err != nil {
		return err
	}
	budgets, err := c.pushSpend(ctx, companyID, month, agentIDs)
	if err != nil {
		return err
	}
	if err := c.reconcileMonthlyPolicies(ctx, lc, companyID, budgets); err != nil {
		return err
	}
	return c.evaluatePolicies(ctx, lc, companyID, agentIDs, projectIDs, now, month)
}

// monthlyBudget is the budgetMonthlyCents an owner shows for a company or agent scope.
type monthlyBudget struct {
	ScopeType string
	ScopeID   string
	Cents     int64
}

// pushSpend writes this month's spend to the kernel's company record and, in one call, to
// the agents' configuration, side by side, and returns the monthly budgets those records
// show.
func (c *Costs) pushSpend(ctx context.Context, companyID string, month *scopeSums, agentIDs []string) ([]monthlyBudget, error) {
	var budgets []monthlyBudget
	var agentsErr error
	agentsDone := make(chan struct{})
	go func() {
		defer close(agentsDone)
		if len(agentIDs) == 0 {
			return
		}
		spent := make(map[string]int64, len(agentIDs))
		for _, id := range agentIDs {
			spent[id] = month.Agents[id]
		}
		var out struct {
			Agents map[string]int64 `json:"agents"`
		}
		err := c.host.Call(ctx, "agents.setSpend", sdk.SystemActor(), companyID, map[string]any{"spent": spent}, &out)
		switch {
		case err == nil:
			for _, id := range agentIDs {
				if cents, ok := out.Agents[id]; ok {
					budgets = append(budgets, monthlyBudget{scopeAgent, id, cents})
				}
			}
		case sdk.IsMethodNotProvided(err):
		default:
			agentsErr = fmt.Errorf("error storing spend of agents of company %s: %w", companyID, err)
		}
	}()
	spent := month.Company
	rec, err := c.updateCompanyBudget(ctx, &hostv1.UpdateCompanyBudgetRequest{CompanyId: companyID, SpentMonthlyCents: &spent})
	<-agentsDone
	if err != nil {
		return nil, err
	}
	if agentsErr != nil {
		return nil, agentsErr
	}
	var co companyRecord
	if err := json.Unmarshal(rec, &co); err != nil {
		return nil, fmt.Errorf("error decoding company %s: %w", companyID, err)
	}
	return append(budgets, monthlyBudget{scopeCompany, companyID, co.BudgetMonthlyCents}), nil
}

// reconcileMonthlyPolicySQL makes the monthly billed-cents policy of each company or agent
// scope carry the budgetMonthlyCents its owner shows: a budget set on the company or agent
// record directly (company create, agent update) creates or updates the policy, so that
// it is enforced. Unchanged policies are left alone; changed ones are returned.
const reconcileMonthlyPolicySQL = `WITH want (scope_type, scope_id, amount) AS (
	SELECT * FROM unnest($2::text[], $3::uuid[], $4::bigint[])
)
INSERT INTO budget_policies AS p (id, company_id, scope_type, scope_id, metric, window_kind, amount)
SELECT gen_random_uuid(), $1, w.scope_type, w.scope_id, 'billed_cents', 'calendar_month_utc', w.amount FROM want w
WHERE w.amount > 0 OR EXISTS (SELECT 1 FROM budget_policies x WHERE x.company_id = $1 AND x.scope_type = w.scope_type
	AND x.scope_id = w.scope_id AND x.metric = 'billed_cents' AND x.window_kind = 'calendar_month_utc')
ON CONFLICT (company_id, scope_type, scope_id, metric, window_kind) DO UPDATE SET amount = excluded.amount, updated_at = now()
	WHERE p.amount <> excluded.amount
RETURNING p.id::text, p.scope_type, p.scope_id::text, p.amount`

// reconcileMonthlyPolicies applies reconcileMonthlyPolicySQL and logs each policy it changed.
func (c *Costs) reconcileMonthlyPolicies(ctx context.Context, db querier, companyID string, budgets []monthlyBudget) error {
	if len(budgets) == 0 {
		return nil
	}
	types, ids, amounts := make([]string, len(budgets)), make([]string, len(budgets)), make([]int64, len(budgets))
	for i, b := range budgets {
		types[i], ids[i], amounts[i] = b.ScopeType, b.ScopeID, b.Cents
	}
	rows, err := db.Query(ctx, reconcileMonthlyPolicySQL, companyID, types, ids, amounts)
	if err != nil {
		return fmt.Errorf("error reconciling monthly budget policies of company %s: %w", companyID, err)
	}
	defer rows.Close()
	type changed struct {
		id, scopeType, scopeID string
		amount                 int64
	}
	var out []changed
	for rows.Next() {
		var ch changed
		if err := rows.Scan(&ch.id, &ch.scopeType, &ch.scopeID, &ch.amount); err != nil {
			return fmt.Errorf("error reconciling monthly budget policies of company %s: %w", companyID, err)
		}
		out = append(out, ch)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("error reconciling monthly budget policies of company %s: %w", companyID, err)
	}
	for _, ch := range out {
		c.activity(ctx, nil, companyID, "budget.policy_upserted", "budget_policy", ch.id, map[string]any{"scopeType": ch.scopeType,
			"scopeId": ch.scopeID, "windowKind": windowMonth, "amount": ch.amount, "source": "budgetMonthlyCents"})
	}
	return nil
}
