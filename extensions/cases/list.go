package cases

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/keelhq/keel/sdk"
)

// ListedCase is one row of the case list; with includeAncestors it says whether the row
// matched the filters or is only an ancestor of one that did.
type ListedCase struct {
	*Case
	MatchesListFilters *bool `json:"matchesListFilters,omitempty"`
}

// multiParam collects a query parameter's values under several names, repeated or
// comma-separated, trimmed and without empties.
func multiParam(r *http.Request, names ...string) []string {
	var out []string
	q := r.URL.Query()
	for _, n := range names {
		for _, v := range q[n] {
			for _, p := range strings.Split(v, ",") {
				if p = strings.TrimSpace(p); p != "" {
					out = append(out, p)
				}
			}
		}
	}
	return out
}

// likeEscape escapes s for LIKE/ILIKE.
func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// listQuery is the select of one case list request.
type listQuery struct {
	SQL              string
	Args             []any
	IncludeAncestors bool
	Limit            int
	// Term is q when it is long enough for the trigram index (3 characters or more).
	Term string
}

// How the list runs q (a substring match): plain filters every case in activity order;
// window filters the searchWindow newest cases that match the other filters, which finds a
// common term at once; trigram goes through the GIN index of trigrams, which finds a rare
// term at once. A term of 3 characters or more tries window first and, when that does not
// fill the page, trigram.
const (
	listPlain = iota
	listWindow
	listTrigram
)

// searchWindow is how many of the newest otherwise-matching cases the window mode searches:
// enough for a common term to fill a page, small enough that a term in no case costs little
// more in a large company than in a small one (window, then the trigram index).
const searchWindow = 500

// buildListQuery validates a list request's query parameters (a 400 naming every bad one)
// and builds its select in a mode (listPlain, listWindow, listTrigram; see above).
func buildListQuery(r *http.Request, companyID string, mode int) (*listQuery, error) {
	var term string
	var d []detail
	bad := func(path, msg string) { d = append(d, detail{Path: path, Message: msg}) }
	where := []string{"c.company_id = $1"}
	args := []any{companyID}
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if types := multiParam(r, "type", "types"); len(types) > 0 {
		where = append(where, "c.case_type = ANY("+arg(types)+")")
	}
	if sts := multiParam(r, "status", "statuses"); len(sts) > 0 {
		var set []string
		active := false
		for _, s := range sts {
			switch {
			case s == "active":
				active = true
			case statuses[s]:
				set = append(set, s)
			default:
				bad("status", "must be draft, in_progress, in_review, approved, done, cancelled or active")
			}
		}
		var or []string
		if len(set) > 0 {
			or = append(or, "c.status = ANY("+arg(set)+")")
		}
		if active {
			or = append(or, "c.status NOT IN ('done', 'cancelled')")
		}
		if len(or) > 0 {
			where = append(where, "("+strings.Join(or, " OR ")+")")
		}
	}
	includeNoProject, err := boolParam(r, "includeNoProject")
	if err != nil {
		return nil, err
	}
	if projects := multiParam(r, "project", "projectId", "projectIds"); len(projects) > 0 {
		for i, p := range projects {
			projects[i] = strings.ToLower(p)
			if !isUUID(projects[i]) {
				bad("projectId", "must be a UUID")
			}
		}
		cond := "c.project_id = ANY(" + arg(projects) + "::uuid[])"
		if includeNoProject {
			cond = "(" + cond + " OR c.project_id IS NULL)"
		}
		where = append(where, cond)
	} else if includeNoProject {
		where = append(where, "c.project_id IS NULL")
	}
	if labels := multiParam(r, "label", "labelId"); len(labels) > 0 {
		for i, l := range labels {
			labels[i] = strings.ToLower(l)
			if !isUUID(labels[i]) {
				bad("labelId", "must be a UUID")
			}
		}
		where = append(where, "EXISTS (SELECT 1 FROM case_labels cl WHERE cl.case_id = c.id AND cl.label_id = ANY("+arg(labels)+"::uuid[]))")
	}
	if parent := strings.ToLower(strings.TrimSpace(r.URL.Query().Get("parent"))); parent != "" {
		if !isUUID(parent) {
			bad("parent", "must be a UUID")
		} else {
			where = append(where, "c.parent_case_id = "+arg(parent))
		}
	}
	var qWhere []string
	if q := strings.TrimSpace(r.URL.Query().Get("q")); q != "" {
		qWhere = append(qWhere, "c.search_text LIKE lower("+arg("%"+likeEscape(q)+"%")+")")
		if utf8.RuneCountInString(q) >= 3 {
			term = q
			if mode == listTrigram {
				// Every trigram of the term (and the company) must be among the case's.
				qWhere = append(qWhere, "c.search_trigrams @> (case_trigrams(lower("+arg(q)+")) || ('co:' || $1::text))")
			}
		}
	}
	if term == "" {
		mode = listPlain
	}
	includeAncestors, err := boolParam(r, "includeAncestors")
	if err != nil {
		return nil, err
	}
	limit, _, err := sdk.Page(r, caseListDefault, caseListMax)
	if err != nil {
		return nil, err
	}
	if err := validation(d); err != nil {
		return nil, err
	}
	const order = ` ORDER BY c.last_activity_at DESC, c.id DESC`
	var sql string
	if mode == listWindow {
		sql = `SELECT ` + prefixCols("c.") + ` FROM (SELECT * FROM cases c WHERE ` + strings.Join(where, " AND ") + order +
			` LIMIT ` + strconv.Itoa(searchWindow) + `) c WHERE ` + strings.Join(qWhere, " AND ") + order + ` LIMIT ` + arg(limit)
	} else {
		sql = `SELECT ` + prefixCols("c.") + ` FROM cases c WHERE ` + strings.Join(append(where, qWhere...), " AND ") + order +
			` LIMIT ` + arg(limit)
	}
	return &listQuery{SQL: sql, Args: args, IncludeAncestors: includeAncestors, Limit: limit, Term: term}, nil
}

func (x *Cases) handleList(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := sdk.CompanyIDFrom(ctx)
	lq, err := buildListQuery(r, companyID, listWindow)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	list, err := x.listCases(ctx, lq)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	if lq.Term != "" && len(list) < lq.Limit {
		// The newest cases did not fill the page: the term is rare, or absent.
		if lq, err = buildListQuery(r, companyID, listTrigram); err == nil {
			list, err = x.listCases(ctx, lq)
		}
		if err != nil {
			x.writeErr(rw, err)
			return
		}
	}
	out := make([]ListedCase, 0, len(list))
	if !lq.IncludeAncestors {
		for _, c := range list {
			out = append(out, ListedCase{Case: c})
		}
		sdk.WriteJSON(rw, http.StatusOK, out)
		return
	}
	matched := make([]string, 0, len(list))
	for _, c := range list {
		matched = append(matched, c.ID)
		out = append(out, ListedCase{Case: c, MatchesListFilters: ptr(true)})
	}
	rows, err := x.pool.Query(ctx, `WITH RECURSIVE up(id, depth) AS (
			SELECT parent_case_id, 1 FROM cases WHERE id = ANY($1::uuid[]) AND parent_case_id IS NOT NULL
			UNION SELECT c.parent_case_id, up.depth + 1 FROM cases c JOIN up ON c.id = up.id
			WHERE c.parent_case_id IS NOT NULL AND up.depth < 100)
		SELECT `+caseCols+` FROM cases WHERE id IN (SELECT id FROM up) AND NOT (id = ANY($1::uuid[])) AND company_id = $2`,
		matched, companyID)
	if err != nil {
		x.writeErr(rw, fmt.Errorf("error listing case ancestors: %w", err))
		return
	}
	ancestors, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*Case, error) { return scanCase(row) })
	if err != nil {
		x.writeErr(rw, fmt.Errorf("error listing case ancestors: %w", err))
		return
	}
	for _, c := range ancestors {
		out = append(out, ListedCase{Case: c, MatchesListFilters: ptr(false)})
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].LastActivityAt.Equal(out[j].LastActivityAt) {
			return out[i].LastActivityAt.After(out[j].LastActivityAt)
		}
		return out[i].ID > out[j].ID
	})
	sdk.WriteJSON(rw, http.StatusOK, out)
}

// listCases runs a list select.
func (x *Cases) listCases(ctx context.Context, lq *listQuery) ([]*Case, error) {
	rows, err := x.pool.Query(ctx, lq.SQL, lq.Args...)
	if err != nil {
		return nil, fmt.Errorf("error listing cases: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*Case, error) { return scanCase(row) })
	if err != nil {
		return nil, fmt.Errorf("error listing cases: %w", err)
	}
	return list, nil
}

// prefixCols qualifies caseCols with a table alias.
func prefixCols(alias string) string {
	parts := strings.Split(caseCols, ",")
	for i, p := range parts {
		parts[i] = alias + strings.TrimSpace(p)
	}
	return strings.Join(parts, ", ")
}

// caseListQuery documents the query parameters of the case list.
type caseListQuery struct {
	Parent string `query:"parent" doc:"A parent case id, or none for top-level cases"`
	Q      string `query:"q" doc:"Text search"`
}
