package costs

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// A spend read over a time range is answered from four sources, so that its cost does not
// grow with the ledger: whole UTC calendar months from the monthly rollups, whole days at
// the ragged ends from the daily ones, whole hours from the hourly ones, and the remaining
// sub-hour slivers from cost_events through its (company_id, occurred_at) index. spans is
// that decomposition.
type spans struct {
	monthly, daily, hourly, raw []span
}

// span is a half-open interval [From, To); a nil end is open.
type span struct {
	From, To *time.Time
}

// decompose splits [from, to) (nil ends open) into monthly, daily, hourly and raw spans.
func decompose(from, to *time.Time) spans {
	var s spans
	ms, me := ceilMonth(from), floorMonth(to)
	if before(ms, me) {
		s.monthly = append(s.monthly, span{ms, me})
		if from != nil && from.Before(*ms) {
			s.addDays(*from, *ms)
		}
		if to != nil && me.Before(*to) {
			s.addDays(*me, *to)
		}
		return s
	}
	// Both ends are set here (an open end always leaves whole months between them).
	s.addDays(*from, *to)
	return s
}

// addDays splits a bounded region into whole days, whole hours and raw slivers.
func (s *spans) addDays(a, b time.Time) {
	if !a.Before(b) {
		return
	}
	ds, de := ceilTo(&a, 24*time.Hour), floorTo(&b, 24*time.Hour)
	if !ds.Before(*de) {
		s.addHours(a, b)
		return
	}
	s.daily = append(s.daily, span{ds, de})
	s.addHours(a, *ds)
	s.addHours(*de, b)
}

// addHours splits a bounded region into whole hours and raw slivers.
func (s *spans) addHours(a, b time.Time) {
	if !a.Before(b) {
		return
	}
	hs, he := ceilTo(&a, time.Hour), floorTo(&b, time.Hour)
	if !hs.Before(*he) {
		s.raw = append(s.raw, span{&a, &b})
		return
	}
	s.hourly = append(s.hourly, span{hs, he})
	if a.Before(*hs) {
		s.raw = append(s.raw, span{&a, hs})
	}
	if he.Before(b) {
		s.raw = append(s.raw, span{he, &b})
	}
}

func (s spans) empty() bool { return len(s.monthly)+len(s.daily)+len(s.hourly)+len(s.raw) == 0 }

// ceilMonth and floorMonth round a UTC instant up and down to the start of a calendar
// month; nil stays nil.
func ceilMonth(t *time.Time) *time.Time {
	v := floorMonth(t)
	if v != nil && v.Before(*t) {
		n := v.AddDate(0, 1, 0)
		v = &n
	}
	return v
}

func floorMonth(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	v := time.Date(u.Year(), u.Month(), 1, 0, 0, 0, 0, time.UTC)
	return &v
}

// ceilTo and floorTo round a UTC instant up and down to a multiple of d (days and hours are
// aligned in UTC); nil stays nil.
func ceilTo(t *time.Time, d time.Duration) *time.Time {
	if t == nil {
		return nil
	}
	v := t.UTC().Truncate(d)
	if v.Before(*t) {
		v = v.Add(d)
	}
	return &v
}

func floorTo(t *time.Time, d time.Duration) *time.Time {
	if t == nil {
		return nil
	}
	v := t.UTC().Truncate(d)
	return &v
}

// before orders possibly open ends: a nil a is minus infinity, a nil b plus infinity.
func before(a, b *time.Time) bool { return a == nil || b == nil || a.Before(*b) }

// rangeSpans turns a read's inclusive [from, to] into spans (to is widened by the
// database's one-microsecond resolution).
func rangeSpans(r timeRange) spans {
	to := r.To
	if to != nil {
		v := to.Add(time.Microsecond)
		to = &v
	}
	return decompose(r.From, to)
}

// spendFilter narrows a spend read to one agent or one project.
type spendFilter struct {
	AgentID   string
	ProjectID string
}

// spendRow is one group of a spend read. Keys hold the group columns as text (nil for null).
type spendRow struct {
	Keys                 []*string
	CostCents            int64
	InputTokens          int64
	CachedInputTokens    int64
	OutputTokens         int64
	APIRunCount          int64
	SubscriptionRunCount int64
	SubInputTokens       int64
	SubCachedInputTokens int64
	SubOutputTokens      int64
	EventCount           int64
	// ProviderCount and ModelCount are counted only by distinct reads.
	ProviderCount int64
	ModelCount    int64
}

// key returns group column i ("" for null).
func (r *spendRow) key(i int) string {
	if i >= len(r.Keys) || r.Keys[i] == nil {
		return ""
	}
	return *r.Keys[i]
}

// groupable lists the columns a spend read may group by.
var groupable = map[string]bool{"agent_id": true, "project_id": true, "provider": true, "biller": true, "billing_type": true, "model": true}

// subscriptionTypes are the billing types whose runs count as subscription runs.
const subscriptionTypes = `('subscription_included', 'subscription_overage')`

// spendSQL builds the read of a company's spend over sp grouped by group (no group: one
// total row); distinct adds the counts of distinct providers and models per group. It
// returns "" when sp is empty.
func spendSQL(companyID string, sp spans, group []string, f spendFilter, distinct bool) (string, []any) {
	if sp.empty() {
		return "", nil
	}
	for _, g := range group {
		if !groupable[g] {
			panic("costs: cannot group spend by " + g)
		}
	}
	args := []any{companyID}
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	filter := ""
	if f.AgentID != "" {
		filter += " AND agent_id = " + arg(f.AgentID) + "::uuid"
	}
	if f.ProjectID != "" {
		filter += " AND project_id = " + arg(f.ProjectID) + "::uuid"
	}
	bounds := func(col string, s span) string {
		var c []string
		if s.From != nil {
			c = append(c, col+" >= "+arg(*s.From))
		}
		if s.To != nil {
			c = append(c, col+" < "+arg(*s.To))
		}
		if len(c) == 0 {
			return "true"
		}
		return strings.Join(c, " AND ")
	}
	// One branch per grain, so that each reads one partition by its own index range.
	var parts []string
	for _, g := range []struct {
		grain string
		list  []span
	}{{"m", sp.monthly}, {"d", sp.daily}, {"h", sp.hourly}} {
		if len(g.list) == 0 {
			continue
		}
		var conds []string
		for _, s := range g.list {
			conds = append(conds, "("+bounds("bucket", s)+")")
		}
		parts = append(parts, `SELECT agent_id, project_id, provider, biller, billing_type, model, cost_cents, input_tokens,
			cached_input_tokens, output_tokens, run_count, event_count
			FROM cost_rollups WHERE company_id = $1 AND grain = '`+g.grain+`'`+filter+` AND (`+strings.Join(conds, " OR ")+`)`)
	}
	var raw []string
	for _, s := range sp.raw {
		raw = append(raw, "("+bounds("occurred_at", s)+")")
	}
	if len(raw) > 0 {
		parts = append(parts, `SELECT agent_id, project_id, provider, biller, billing_type, model, cost_cents, input_tokens,
			cached_input_tokens, output_tokens, counts_run::int::bigint AS run_count, 1::bigint AS event_count
			FROM cost_events WHERE company_id = $1`+filter+` AND (`+strings.Join(raw, " OR ")+`)`)
	}
	sel := make([]string, 0, len(group)+12)
	for _, g := range group {
		sel = append(sel, g+"::text")
	}
	sel = append(sel,
		"coalesce(sum(cost_cents), 0)::bigint", "coalesce(sum(input_tokens), 0)::bigint",
		"coalesce(sum(cached_input_tokens), 0)::bigint", "coalesce(sum(output_tokens), 0)::bigint",
		"coalesce(sum(run_count) FILTER (WHERE billing_type NOT IN "+subscriptionTypes+"), 0)::bigint",
		"coalesce(sum(run_count) FILTER (WHERE billing_type IN "+subscriptionTypes+"), 0)::bigint",
		"coalesce(sum(input_tokens) FILTER (WHERE billing_type IN "+subscriptionTypes+"), 0)::bigint",
		"coalesce(sum(cached_input_tokens) FILTER (WHERE billing_type IN "+subscriptionTypes+"), 0)::bigint",
		"coalesce(sum(output_tokens) FILTER (WHERE billing_type IN "+subscriptionTypes+"), 0)::bigint",
		"coalesce(sum(event_count), 0)::bigint")
	if distinct {
		sel = append(sel, "count(DISTINCT provider)", "count(DISTINCT model)")
	} else {
		sel = append(sel, "0::bigint", "0::bigint")
	}
	q := "SELECT " + strings.Join(sel, ", ") + " FROM (" + strings.Join(parts, " UNION ALL ") + ") s"
	if len(group) > 0 {
		q += " GROUP BY " + strings.Join(group, ", ")
	}
	return q, args
}

// spendRows runs a spend read; an empty range gives no rows (a total read gives one zero row).
func (c *Costs) spendRows(ctx context.Context, companyID string, sp spans, group []string, f spendFilter, distinct bool) ([]*spendRow, error) {
	q, args := spendSQL(companyID, sp, group, f, distinct)
	if q == "" {
		if len(group) == 0 {
			return []*spendRow{{}}, nil
		}
		return nil, nil
	}
	rows, err := c.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("error reading spend of company %s: %w", companyID, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*spendRow, error) {
		r := &spendRow{Keys: make([]*string, len(group))}
		dst := make([]any, 0, len(group)+12)
		for i := range r.Keys {
			dst = append(dst, &r.Keys[i])
		}
		dst = append(dst, &r.CostCents, &r.InputTokens, &r.CachedInputTokens, &r.OutputTokens, &r.APIRunCount,
			&r.SubscriptionRunCount, &r.SubInputTokens, &r.SubCachedInputTokens, &r.SubOutputTokens, &r.EventCount,
			&r.ProviderCount, &r.ModelCount)
		return r, row.Scan(dst...)
	})
	if err != nil {
		return nil, fmt.Errorf("error reading spend of company %s: %w", companyID, err)
	}
	return out, nil
}

// spendTotal is a company's (or one agent's or project's) billed cents over sp.
func (c *Costs) spendTotal(ctx context.Context, companyID string, sp spans, f spendFilter) (int64, error) {
	rows, err := c.spendRows(ctx, companyID, sp, nil, f, false)
	if err != nil || len(rows) == 0 {
		return 0, err
	}
	return rows[0].CostCents, nil
}

// scopeSums are billed cents of a company in one window, in total and per agent and project.
type scopeSums struct {
	Company  int64
	Agents   map[string]int64
	Projects map[string]int64
}

// sumScopesSQL sums a company's billed cents per agent and project over whole UTC months
// [$2, $3) (null ends open) from the monthly rollups.
const sumScopesSQL = `SELECT agent_id::text, project_id::text, sum(cost_cents)::bigint FROM cost_rollups
	WHERE company_id = $1 AND grain = 'm' AND ($2::timestamptz IS NULL OR bucket >= $2) AND ($3::timestamptz IS NULL OR bucket < $3)
	GROUP BY agent_id, project_id`

// sumScopes reads scopeSums over whole UTC months [from, to) (nil ends open) from the
// monthly rollups: the windows of budget policies are calendar months or all time.
func (c *Costs) sumScopes(ctx context.Context, db querier, companyID string, from, to *time.Time) (*scopeSums, error) {
	rows, err := db.Query(ctx, sumScopesSQL, companyID, from, to)
	if err != nil {
		return nil, fmt.Errorf("error summing spend of company %s: %w", companyID, err)
	}
	return scanScopeSums(companyID, rows)
}

// scanScopeSums reads the rows of sumScopesSQL and closes them.
func scanScopeSums(companyID string, rows pgx.Rows) (*scopeSums, error) {
	defer rows.Close()
	s := &scopeSums{Agents: map[string]int64{}, Projects: map[string]int64{}}
	for rows.Next() {
		var agentID string
		var projectID *string
		var cents int64
		if err := rows.Scan(&agentID, &projectID, &cents); err != nil {
			return nil, fmt.Errorf("error summing spend of company %s: %w", companyID, err)
		}
		s.Company += cents
		s.Agents[agentID] += cents
		if projectID != nil {
			s.Projects[*projectID] += cents
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error summing spend of company %s: %w", companyID, err)
	}
	return s, nil
}

// sum returns the billed cents of a scope.
func (s *scopeSums) sum(scopeType, scopeID string) int64 {
	switch scopeType {
	case scopeCompany:
		return s.Company
	case scopeAgent:
		return s.Agents[scopeID]
	case scopeProject:
		return s.Projects[scopeID]
	}
	return 0
}
