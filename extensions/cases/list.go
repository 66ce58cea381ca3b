package cases

import (
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
	// Term is q when it is long enough for the trigram index (3 characters or more).
	Term string
}

// trigramProbeMax is how many cases may hold every trigram of q for the list to go through
// the trigram index: fewer are fetched and sorted; with more, the term is common and the
// newest-activity scan fills a page sooner.
const trigramProbeMax = 1000

// buildListQuery validates a list request's query parameters (a 400 naming every bad one)
// and builds its select; with trigrams, q also goes through the trigram index.
func buildListQuery(r *http.Request, companyID string, trigrams bool) (*listQuery, error) {
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
	if q := strings.TrimSpace(r.URL.Query().Get("q")); q != "" {
		where = append(where, "c.search_text LIKE lower("+arg("%"+likeEscape(q)+"%")+")")
		if utf8.RuneCountInString(q) >= 3 {
			term = q
			if trigrams {
				// Every trigram of the term must be among the case's: the GIN index finds rare terms.
				where = append(where, "c.search_trigrams @> (case_trigrams(lower("+arg(q)+")) || ('co:' || $1::text))")
			}
		}
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
	return &listQuery{SQL: `SELECT ` + prefixCols("c.") + ` FROM cases c WHERE ` + strings.Join(where, " AND ") +
		` ORDER BY c.last_activity_at DESC, c.id DESC LIMIT ` + arg(limit), Args: args, IncludeAncestors: includeAncestors, Term: term}, nil
}

func (x *Cases) handleList(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := sdk.CompanyIDFrom(ctx)
	lq, err := buildListQuery(r, companyID, false)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	if lq.Term != "" {
		// A substring search: when few cases hold every trigram of the term, fetch those
		// through the trigram index; a common term is found faster in activity order.
		var n int
		if err := x.pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM cases WHERE company_id = $1
			AND search_trigrams @> (case_trigrams(lower($2)) || ('co:' || $1::text)) LIMIT $3) x`, companyID, lq.Term, trigramProbeMax+1).Scan(&n); err != nil {
			x.writeErr(rw, fmt.Errorf("error probing case search: %w", err))
			return
		}
		if n <= trigramProbeMax {
			if lq, err = buildListQuery(r, companyID, true); err != nil {
				x.writeErr(rw, err)
				return
			}
		}
	}
	rows, err := x.pool.Query(ctx, lq.SQL, lq.Args...)
	if err != nil {
		x.writeErr(rw, fmt.Errorf("error listing cases: %w", err))
		return
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*Case, error) { return scanCase(row) })
	if err != nil {
		x.writeErr(rw, fmt.Errorf("error listing cases: %w", err))
		return
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
	rows, err = x.pool.Query(ctx, `WITH RECURSIVE up(id, depth) AS (
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
