package work

import (
	"context"
	"fmt"

	"github.com/keelhq/keel/sdk"
)

// Provided method of the sidebar badges (spec part 2 "… sidebar-badges"): the kernel asks
// the work graph once per badge read for its actionable approvals.
func init() {
	addMethods(map[string]method{
		"inboxCounts": {
			ReadOnly: true,
			Description: "Count a company's items for the board's inbox badge. Input: {companyId (defaults to the call's company), " +
				"excludeIds (approval ids the reader dismissed)}. Output: {approvals: approvals in status pending or revision_requested, " +
				"less the excluded ones}.",
			Call: (*Work).methodInboxCounts,
		},
	})
}

// inboxApprovalsSQL counts a company's actionable approvals from its company index, less
// those the reader dismissed.
const inboxApprovalsSQL = `SELECT count(*) FROM approvals
WHERE company_id = $1 AND status IN ('pending', 'revision_requested') AND NOT (id::text = ANY($2::text[]))`

func (w *Work) methodInboxCounts(ctx context.Context, call *sdk.MethodCall) (any, error) {
	ctx = issuesMethodContext(ctx, call)
	var in struct {
		CompanyID  string   `json:"companyId"`
		ExcludeIDs []string `json:"excludeIds"`
	}
	if err := issuesMethodDecode(call, &in); err != nil {
		return nil, err
	}
	companyID, err := issuesMethodCompany(ctx, call, in.CompanyID)
	if err != nil {
		return nil, err
	}
	if in.ExcludeIDs == nil {
		in.ExcludeIDs = []string{}
	}
	var n int64
	if err := w.pool.QueryRow(ctx, inboxApprovalsSQL, companyID, in.ExcludeIDs).Scan(&n); err != nil {
		return nil, fmt.Errorf("error counting actionable approvals of company %s: %w", companyID, err)
	}
	return map[string]int64{"approvals": n}, nil
}
