package costs

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/keelhq/keel/sdk"
)

// usageIssuesMax is the most issues one issueUsage call sums.
const usageIssuesMax = 5000

func init() {
	addMethods(map[string]method{
		"issueUsage": {
			ReadOnly: true,
			Description: "Sum the cost events of a set of issues (status cards: a card's generation tasks). Input {companyId, " +
				"issueIds (at most 5000), since? (RFC 3339; events that occurred at or after it)}. The call's company wins. " +
				"Output: {inputTokens, outputTokens, costCents, byRun: {heartbeatRunId: {inputTokens, outputTokens, " +
				"costCents, model}}}; tokens count input, cached input and output.",
			Call: callIssueUsage,
		},
	})
}

// Usage is a sum of cost events.
type Usage struct {
	InputTokens  int64  `json:"inputTokens"`
	OutputTokens int64  `json:"outputTokens"`
	CostCents    int64  `json:"costCents"`
	Model        string `json:"model,omitempty"`
}

// IssueUsage is the answer of issueUsage.
type IssueUsage struct {
	Usage
	ByRun map[string]*Usage `json:"byRun"`
}

func callIssueUsage(c *Costs, ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in struct {
		CompanyID string   `json:"companyId"`
		IssueIDs  []string `json:"issueIds"`
		Since     string   `json:"since"`
	}
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	companyID, err := callCompany(call, in.CompanyID)
	if err != nil {
		return nil, err
	}
	if len(in.IssueIDs) > usageIssuesMax {
		return nil, invalid("issueIds", fmt.Sprintf("at most %d issues", usageIssuesMax))
	}
	ids := make([]string, 0, len(in.IssueIDs))
	for _, id := range in.IssueIDs {
		if id = strings.ToLower(strings.TrimSpace(id)); isUUID(id) {
			ids = append(ids, id)
		}
	}
	var since time.Time
	if s := strings.TrimSpace(in.Since); s != "" {
		if since, err = time.Parse(time.RFC3339Nano, s); err != nil {
			return nil, invalid("since", "must be an RFC 3339 time")
		}
	}
	out := &IssueUsage{ByRun: map[string]*Usage{}}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := c.pool.Query(ctx, `SELECT coalesce(heartbeat_run_id::text, ''), sum(input_tokens + cached_input_tokens),
			sum(output_tokens), sum(cost_cents), max(model)
		FROM cost_events WHERE company_id = $1 AND issue_id = ANY($2::uuid[]) AND occurred_at >= $3
		GROUP BY 1`, companyID, ids, since)
	if err != nil {
		return nil, fmt.Errorf("error summing the usage of issues: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var run string
		u := new(Usage)
		if err := rows.Scan(&run, &u.InputTokens, &u.OutputTokens, &u.CostCents, &u.Model); err != nil {
			return nil, fmt.Errorf("error reading the usage of issues: %w", err)
		}
		out.InputTokens += u.InputTokens
		out.OutputTokens += u.OutputTokens
		out.CostCents += u.CostCents
		if run != "" {
			out.ByRun[run] = u
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error reading the usage of issues: %w", err)
	}
	return out, nil
}
