package kernel

import (
	"context"
	"fmt"
	"strings"

	"golang.org/x/sync/errgroup"
)

// SidebarBadges are the counts the board's sidebar shows for a company. Items the caller
// dismissed, or snoozed until a time still to come, are not counted.
type SidebarBadges struct {
	// Inbox is the sum of the other three.
	Inbox int64 `json:"inbox"`
	// Approvals counts actionable approvals (pending or revision_requested), from the work owner.
	Approvals int64 `json:"approvals"`
	// FailedRuns counts agents (not terminated) whose latest heartbeat run failed or timed
	// out, from the agents owner.
	FailedRuns int64 `json:"failedRuns"`
	// JoinRequests counts pending join requests, for callers who may approve them (joins:approve).
	JoinRequests int64 `json:"joinRequests"`
}

// InboxCountsInput is the input of the owners' inboxCounts methods (work.inboxCounts,
// agents.inboxCounts): the company and the ids of the items the caller dismissed.
type InboxCountsInput struct {
	CompanyID string `json:"companyId"`
	// ExcludeIDs are ids of the owner's items (approvals, runs) left out of the count.
	ExcludeIDs []string `json:"excludeIds"`
}

// InboxCountsOutput is the answer of work.inboxCounts ({approvals}) and
// agents.inboxCounts ({failedRuns}).
type InboxCountsOutput struct {
	Approvals  int64 `json:"approvals"`
	FailedRuns int64 `json:"failedRuns"`
}

type sidebarBadgesRequest struct {
	CompanyID string `path:"companyId"`
}

type sidebarBadgesEndpoint struct{ k *Kernel }

func (e *sidebarBadgesEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "GET /api/companies/{companyId}/sidebar-badges", CompanyFrom: CompanyFromPath,
		Summary: "Counts the sidebar shows: inbox (the sum), actionable approvals, agents whose latest run failed, and pending join " +
			"requests (for callers with joins:approve); items you dismissed or snoozed are not counted"}
}

func (e *sidebarBadgesEndpoint) Execute(ctx context.Context, req *sidebarBadgesRequest) (*SidebarBadges, error) {
	return e.k.sidebarBadges(ctx, req.CompanyID)
}

// sidebarBadges gathers the badge counts: the join requests from the kernel's own table,
// the approvals and failed runs from their owners, one call each, concurrently. An owner
// that is not loaded counts nothing.
func (k *Kernel) sidebarBadges(ctx context.Context, companyID string) (*SidebarBadges, error) {
	a := ActorFrom(ctx)
	excluded := map[string][]string{}
	if a.IsBoard() && a.UserID != "" {
		ds, err := k.activeInboxDismissals(ctx, companyID, a.UserID)
		if err != nil {
			return nil, err
		}
		for _, d := range ds {
			prefix, id, _ := strings.Cut(d.ItemKey, ":")
			if isUUID(id) {
				excluded[prefix] = append(excluded[prefix], strings.ToLower(id))
			}
		}
	}
	var b SidebarBadges
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		canApprove, err := k.HasPermission(gctx, a, companyID, "joins:approve")
		if err != nil || !canApprove {
			return err
		}
		if err := k.Pool.QueryRow(gctx, `SELECT count(*) FROM kernel.join_requests
			WHERE company_id = $1 AND status = $2 AND NOT (id::text = ANY($3::text[]))`,
			companyID, JoinPendingApproval, nonNil(excluded["join"])).Scan(&b.JoinRequests); err != nil {
			return fmt.Errorf("error counting pending join requests: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		out, err := k.inboxCounts(gctx, "work.inboxCounts", companyID, a, excluded["approval"])
		b.Approvals = out.Approvals
		return err
	})
	g.Go(func() error {
		out, err := k.inboxCounts(gctx, "agents.inboxCounts", companyID, a, excluded["run"])
		b.FailedRuns = out.FailedRuns
		return err
	})
	if err := g.Wait(); err != nil {
		return nil, err
	}
	b.Inbox = b.Approvals + b.FailedRuns + b.JoinRequests
	return &b, nil
}

// inboxCounts asks an owner for its inbox counts; an owner that is not loaded (or a bare
// kernel with no host) counts nothing.
func (k *Kernel) inboxCounts(ctx context.Context, method, companyID string, a *Actor, exclude []string) (InboxCountsOutput, error) {
	var out InboxCountsOutput
	err := k.callMethod(ctx, method, companyID, a, &InboxCountsInput{CompanyID: companyID, ExcludeIDs: nonNil(exclude)}, &out)
	if err != nil && (isMethodNotProvided(err) || err == errNoMethodCaller) {
		return InboxCountsOutput{}, nil
	}
	return out, err
}
