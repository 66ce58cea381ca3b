package costs

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/keelhq/keel/sdk"
)

func init() {
	addRoutes(route{Method: "GET", Path: "/api/companies/{companyId}/costs/by-day", Query: byDayQuery{}, Response: new([]*daySpend),
		CompanyFromPath: true, Summary: "Billed spend and tokens per UTC day from..to (dates, both inclusive; default the last " +
			"30 days; at most 366 days), every day listed oldest first, days without spend as zeros; agentId or projectId narrows it",
		Handle: handleByDay})
}

// byDayDefault and byDayMax bound the days of a by-day read.
const (
	byDayDefault = 30
	byDayMax     = 366
)

// byDayQuery documents the query parameters of the by-day read.
type byDayQuery struct {
	From      string `query:"from" jsonschema:"format=date" doc:"First UTC day (YYYY-MM-DD, or a date-time whose UTC day is meant)"`
	To        string `query:"to" jsonschema:"format=date" doc:"Last UTC day, inclusive (default today)"`
	AgentID   string `query:"agentId" jsonschema:"format=uuid" doc:"Only this agent's spend"`
	ProjectID string `query:"projectId" jsonschema:"format=uuid" doc:"Only spend attributed to this project"`
}

// daySpend is one UTC day of a by-day read.
type daySpend struct {
	Date              string `json:"date"`
	CostCents         int64  `json:"costCents"`
	InputTokens       int64  `json:"inputTokens"`
	CachedInputTokens int64  `json:"cachedInputTokens"`
	OutputTokens      int64  `json:"outputTokens"`
	EventCount        int64  `json:"eventCount"`
}

// parseDays reads the from and to days of a by-day read: to defaults to today (UTC) and
// from to byDayDefault days ending at to; from after to, or more than byDayMax days, is a
// 400 Validation error.
func parseDays(q url.Values, now time.Time) (from, to time.Time, f spendFilter, err error) {
	var p problems
	to = now.UTC().Truncate(24 * time.Hour)
	if v := q.Get("to"); v != "" {
		t, ok := parseInstant(v)
		if !ok {
			p.add("to", "must be a date (YYYY-MM-DD) or an ISO 8601 date-time")
		}
		to = t.Truncate(24 * time.Hour)
	}
	from = to.AddDate(0, 0, -(byDayDefault - 1))
	if v := q.Get("from"); v != "" {
		t, ok := parseInstant(v)
		if !ok {
			p.add("from", "must be a date (YYYY-MM-DD) or an ISO 8601 date-time")
		}
		from = t.Truncate(24 * time.Hour)
	}
	if len(p) == 0 {
		switch {
		case from.After(to):
			p.add("from", "must not be after to")
		case to.Sub(from) >= byDayMax*24*time.Hour:
			p.add("from", fmt.Sprintf("the range must be at most %d days", byDayMax))
		}
	}
	f.AgentID = strings.ToLower(strings.TrimSpace(q.Get("agentId")))
	if f.AgentID != "" && !isUUID(f.AgentID) {
		p.add("agentId", "must be a UUID")
	}
	f.ProjectID = strings.ToLower(strings.TrimSpace(q.Get("projectId")))
	if f.ProjectID != "" && !isUUID(f.ProjectID) {
		p.add("projectId", "must be a UUID")
	}
	return from, to, f, p.err()
}

func handleByDay(c *Costs, rw http.ResponseWriter, r *http.Request) {
	from, to, f, err := parseDays(r.URL.Query(), time.Now())
	if err != nil {
		c.writeErr(rw, err)
		return
	}
	days, err := c.spendByDay(r.Context(), r.PathValue("companyId"), from, to, f)
	if err != nil {
		c.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, days)
}

// byDaySQL builds the read of a company's spend per UTC day from..to (midnights, both
// inclusive) from the daily rollups.
func byDaySQL(companyID string, from, to time.Time, f spendFilter) (string, []any) {
	args := []any{companyID, from, to.AddDate(0, 0, 1)}
	filter := ""
	if f.AgentID != "" {
		args = append(args, f.AgentID)
		filter += fmt.Sprintf(" AND agent_id = $%d::uuid", len(args))
	}
	if f.ProjectID != "" {
		args = append(args, f.ProjectID)
		filter += fmt.Sprintf(" AND project_id = $%d::uuid", len(args))
	}
	return `SELECT bucket, sum(cost_cents)::bigint, sum(input_tokens)::bigint, sum(cached_input_tokens)::bigint,
			sum(output_tokens)::bigint, sum(event_count)::bigint
		FROM cost_rollups WHERE company_id = $1 AND grain = 'd' AND bucket >= $2 AND bucket < $3` + filter + `
		GROUP BY bucket`, args
}

// spendByDay reads the spend of each UTC day from..to (both inclusive, midnights) from the
// daily rollups alone (one grouped query on the daily partition, which its (company, grain,
// bucket) key indexes), so its cost follows the days asked for, not the size of the ledger.
// Days without spend are zeros.
func (c *Costs) spendByDay(ctx context.Context, companyID string, from, to time.Time, f spendFilter) ([]*daySpend, error) {
	q, args := byDaySQL(companyID, from, to, f)
	rows, err := c.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("error reading daily spend of company %s: %w", companyID, err)
	}
	defer rows.Close()
	n := int(to.Sub(from)/(24*time.Hour)) + 1
	out := make([]*daySpend, n)
	for i := range out {
		out[i] = &daySpend{Date: from.AddDate(0, 0, i).Format(time.DateOnly)}
	}
	for rows.Next() {
		var bucket time.Time
		var d daySpend
		if err := rows.Scan(&bucket, &d.CostCents, &d.InputTokens, &d.CachedInputTokens, &d.OutputTokens, &d.EventCount); err != nil {
			return nil, fmt.Errorf("error reading daily spend of company %s: %w", companyID, err)
		}
		i := int(bucket.UTC().Sub(from) / (24 * time.Hour))
		if i < 0 || i >= n {
			continue
		}
		d.Date = out[i].Date
		out[i] = &d
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error reading daily spend of company %s: %w", companyID, err)
	}
	return out, nil
}
