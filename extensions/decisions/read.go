package decisions

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelhq/keel/sdk"
)

func init() {
	addRoutes(
		route{Method: "GET", Path: "/api/companies/{companyId}/decisions", Query: decisionListQuery{}, Response: new([]*Decision), CompanyFromPath: true, Access: sdk.AccessBoard,
			Summary: "List decisions newest first with targetChanged (filters status, bundleId, targetIssueId, originAgentId, limit 1-100)",
			Handle:  (*Decisions).listRoute},
		route{Method: "GET", Path: "/api/companies/{companyId}/decisions/stats", Query: decisionStatsQuery{}, Response: new(map[string]any), CompanyFromPath: true, Access: sdk.AccessEither,
			Summary: "Decision counters grouped by ruleKey (an agent sees only itself)", Handle: (*Decisions).statsRoute},
		route{Method: "GET", Path: "/api/decisions/{id}", Response: new(Decision), Access: sdk.AccessEither,
			Summary: "Read a decision with its executions (the board, or the origin agent)", Handle: (*Decisions).getRoute},
	)
}

func (x *Decisions) getRoute(rw http.ResponseWriter, r *http.Request) {
	d, err := x.loadDecision(r)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	if a := sdk.ActorFrom(r.Context()); a.Type == "agent" && a.AgentId != d.OriginAgentID {
		x.writeErr(rw, forbidden(msgReadOwnOnly))
		return
	}
	if err := withExecutions(r.Context(), x.pool, d); err != nil {
		x.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, d)
}

func (x *Decisions) listRoute(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := sdk.CompanyIDFrom(ctx)
	q := r.URL.Query()
	var det []detail
	where := []string{"company_id = $1"}
	args := []any{companyID}
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if s := q.Get("status"); s != "" {
		if !slices.Contains([]string{statusOpen, statusDecided, statusExpired, statusCancelled}, s) {
			det = append(det, detail{Path: "status", Message: "must be one of open, decided, expired, cancelled"})
		}
		add("status = $%d", s)
	}
	for param, cond := range map[string]string{"bundleId": "bundle_id = $%d", "originAgentId": "origin_agent_id = $%d"} {
		if s := q.Get(param); s != "" {
			if !isUUID(strings.ToLower(s)) {
				det = append(det, detail{Path: param, Message: "must be a UUID"})
				continue
			}
			add(cond, strings.ToLower(s))
		}
	}
	from := "decisions"
	if s := q.Get("targetIssueId"); s != "" {
		if !isUUID(strings.ToLower(s)) {
			det = append(det, detail{Path: "targetIssueId", Message: "must be a UUID"})
		}
		// An issue is the target of few decisions: find them through the snapshot index
		// first (OFFSET 0 keeps the planner from scanning the company's rows by time).
		args = append(args, strings.ToLower(s))
		from = fmt.Sprintf(`(SELECT id FROM decisions WHERE company_id = $1 AND target_snapshots ? $%d OFFSET 0) t
			JOIN decisions USING (id)`, len(args))
	}
	limit := 50
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 100 {
			det = append(det, detail{Path: "limit", Message: "must be an integer from 1 to 100"})
		}
		limit = n
	}
	if len(det) > 0 {
		x.writeErr(rw, &sdk.Error{Status: http.StatusBadRequest, Message: msgInvalidFilters, Details: det})
		return
	}
	rows, err := x.pool.Query(ctx, `SELECT `+decisionCols+` FROM `+from+` WHERE `+strings.Join(where, " AND ")+
		fmt.Sprintf(` ORDER BY created_at DESC, id DESC LIMIT %d`, limit), args...)
	if err != nil {
		x.writeErr(rw, fmt.Errorf("error listing decisions: %w", err))
		return
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*Decision, error) { return scanDecision(r) })
	if err != nil {
		x.writeErr(rw, fmt.Errorf("error reading decisions: %w", err))
		return
	}
	var ids, closed []string
	for _, d := range list {
		for id := range d.TargetSnapshots {
			ids = append(ids, id)
		}
		if d.Status != statusOpen {
			closed = append(closed, d.ID)
		}
	}
	current, err := x.currentTargets(ctx, companyID, ids)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	execs, err := executionsList(ctx, x.pool, closed)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	for _, d := range list {
		changed := map[string]bool{}
		trees := treeTargets(d)
		for id, s := range d.TargetSnapshots {
			if targetMoved(s, current[id], trees[id]) {
				changed[id] = true
			}
		}
		d.TargetChanged = &changed
		if d.Status != statusOpen {
			ex := execs[d.ID]
			if ex == nil {
				ex = []Execution{}
			}
			d.Executions = &ex
		}
	}
	if list == nil {
		list = []*Decision{}
	}
	sdk.WriteJSON(rw, http.StatusOK, list)
}

// statsGroup is one ruleKey's counters.
type statsGroup struct {
	RuleKey       *string       `json:"ruleKey"`
	Proposed      int           `json:"proposed"`
	Accepted      int           `json:"accepted"`
	Rejected      int           `json:"rejected"`
	Expired       int           `json:"expired"`
	ChosenOptions []optionCount `json:"chosenOptions"`
}

type optionCount struct {
	OptionID string `json:"optionId"`
	Count    int    `json:"count"`
}

func (x *Decisions) statsRoute(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := sdk.CompanyIDFrom(ctx)
	q := r.URL.Query()
	var det []detail
	for k := range q {
		if !slices.Contains([]string{"groupBy", "originAgentId", "since"}, k) {
			det = append(det, detail{Path: k, Message: "unknown parameter"})
		}
	}
	if q.Get("groupBy") != "ruleKey" {
		det = append(det, detail{Path: "groupBy", Message: "must be ruleKey"})
	}
	originAgentID := strings.ToLower(q.Get("originAgentId"))
	if originAgentID != "" && !isUUID(originAgentID) {
		det = append(det, detail{Path: "originAgentId", Message: "must be a UUID"})
	}
	var since *time.Time
	if s := q.Get("since"); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			det = append(det, detail{Path: "since", Message: "must be an ISO 8601 date-time"})
		} else {
			since = &t
		}
	}
	if len(det) > 0 {
		slices.SortFunc(det, func(a, b detail) int { return strings.Compare(a.Path, b.Path) })
		x.writeErr(rw, &sdk.Error{Status: http.StatusBadRequest, Message: msgInvalidStats, Details: det})
		return
	}
	if a := sdk.ActorFrom(ctx); a.Type == "agent" {
		if originAgentID != "" && originAgentID != a.AgentId {
			x.writeErr(rw, forbidden(msgStatsOwnOnly))
			return
		}
		originAgentID = a.AgentId
	}
	rows, err := x.pool.Query(ctx, `SELECT rule_key, status, dismissed, chosen_option_id, count(*) FROM decisions
		WHERE company_id = $1 AND ($2 = '' OR origin_agent_id::text = $2) AND ($3::timestamptz IS NULL OR created_at >= $3)
		GROUP BY 1, 2, 3, 4 ORDER BY 1 NULLS FIRST, 4`, companyID, originAgentID, since)
	if err != nil {
		x.writeErr(rw, fmt.Errorf("error counting decisions: %w", err))
		return
	}
	defer rows.Close()
	totals := map[string]int{"proposed": 0, "accepted": 0, "rejected": 0, "expired": 0}
	groups := []*statsGroup{}
	byKey := map[string]*statsGroup{}
	for rows.Next() {
		var ruleKey, chosen *string
		var status string
		var dismissed bool
		var n int
		if err := rows.Scan(&ruleKey, &status, &dismissed, &chosen, &n); err != nil {
			x.writeErr(rw, fmt.Errorf("error reading decision counts: %w", err))
			return
		}
		k := "\x00"
		if ruleKey != nil {
			k = *ruleKey
		}
		g := byKey[k]
		if g == nil {
			g = &statsGroup{RuleKey: ruleKey, ChosenOptions: []optionCount{}}
			byKey[k] = g
			groups = append(groups, g)
		}
		g.Proposed += n
		totals["proposed"] += n
		switch {
		case status == statusDecided && dismissed:
			g.Rejected += n
			totals["rejected"] += n
		case status == statusDecided:
			g.Accepted += n
			totals["accepted"] += n
			g.ChosenOptions = append(g.ChosenOptions, optionCount{OptionID: deref(chosen), Count: n})
		case status == statusExpired:
			g.Expired += n
			totals["expired"] += n
		}
	}
	if err := rows.Err(); err != nil {
		x.writeErr(rw, fmt.Errorf("error reading decision counts: %w", err))
		return
	}
	filters := map[string]any{"originAgentId": nilIfEmpty(originAgentID), "since": since}
	sdk.WriteJSON(rw, http.StatusOK, map[string]any{"groupBy": "ruleKey", "filters": filters, "totals": totals, "groups": groups})
}

// decisionListQuery documents the query parameters of the decision list.
type decisionListQuery struct {
	Status        string `query:"status"`
	OriginAgentID string `query:"originAgentId" jsonschema:"format=uuid"`
	TargetIssueID string `query:"targetIssueId"`
	Limit         int    `query:"limit" jsonschema:"minimum=1,maximum=100"`
}

// decisionStatsQuery documents the query parameters of the decision statistics.
type decisionStatsQuery struct {
	GroupBy       string `query:"groupBy" jsonschema:"required,enum=ruleKey"`
	OriginAgentID string `query:"originAgentId" jsonschema:"format=uuid"`
	Since         string `query:"since" jsonschema:"format=date-time"`
}
