package work

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/keelhq/keel/sdk"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

// Search scopes, sorts and windows (REFERENCE 2.2 "Search").
var (
	searchScopes   = []string{"all", "issues", "comments", "documents", "artifacts", "agents", "projects"}
	searchSorts    = []string{"relevance", "updated", "created", "priority"}
	searchWindows  = []string{"24h", "7d", "4w", "3m"}
	searchStatuses = []string{StatusBacklog, StatusTodo, StatusInProgress, StatusInReview, StatusBlocked, StatusDone, StatusCancelled}
	// searchPriorities are the issue priorities, most urgent first.
	searchPriorities = []string{"critical", "high", "medium", "low"}
)

// Search limits.
const (
	SearchQueryMaxChars = 200
	SearchLimitDefault  = 20
	SearchLimitMax      = 50
	SearchOffsetMax     = 200
)

// SearchQuery is the company search query object: the query string of
// GET /api/companies/{companyId}/search, the input of the "search" method and the shape a
// status card's compiled query takes. Call Normalize (ParseSearchQuery does) before use.
type SearchQuery struct {
	// Q is the search text (at most 200 characters); web-search syntax: "quoted phrase",
	// or, -excluded. Empty matches everything (with scope all, issues only).
	Q string `json:"q"`
	// Scope is all, issues, comments, documents, artifacts, agents or projects (default all).
	Scope string `json:"scope"`
	// Limit is 1–50 (default 20; 0 in JSON means the default).
	Limit int `json:"limit"`
	// Offset is 0–200.
	Offset int `json:"offset"`
	// Status filters issues by status (any of).
	Status SearchList `json:"status,omitempty"`
	// Priority filters issues by priority (any of).
	Priority SearchList `json:"priority,omitempty"`
	// AssigneeAgentID filters issues by assignee agent; "null" means unassigned to agents.
	AssigneeAgentID string `json:"assigneeAgentId,omitempty"`
	// AssigneeUserID filters issues by assignee user; "null" means unassigned to users.
	AssigneeUserID string `json:"assigneeUserId,omitempty"`
	// ProjectID filters issues by project.
	ProjectID string `json:"projectId,omitempty"`
	// LabelID filters issues carrying the label.
	LabelID string `json:"labelId,omitempty"`
	// UpdatedWithin is 24h, 7d, 4w or 3m: issues updated within that window before now.
	UpdatedWithin string `json:"updatedWithin,omitempty"`
	// UpdatedAfter is an RFC 3339 time or a date (YYYY-MM-DD, midnight UTC); normalized to
	// RFC 3339 UTC.
	UpdatedAfter string `json:"updatedAfter,omitempty"`
	// Sort is relevance, updated, created or priority (default relevance; relevance without
	// a q sorts by updated).
	Sort string `json:"sort"`

	updatedAfter time.Time
}

// SearchList is a list filter: a JSON array of strings or one comma-separated string.
type SearchList []string

// UnmarshalJSON accepts ["a","b"], "a,b" and null.
func (l *SearchList) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*l = splitSearchList(s)
		return nil
	}
	var list []string
	if err := json.Unmarshal(b, &list); err != nil {
		return fmt.Errorf("expected a string or an array of strings")
	}
	*l = list
	return nil
}

func splitSearchList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		out = append(out, strings.TrimSpace(v))
	}
	return out
}

var searchIdentifierPattern = regexp.MustCompile(`^[A-Za-z]{1,20}-[0-9]{1,18}$`)

// Normalize validates the query and puts it in canonical form: trimmed text, defaults
// filled in, list filters deduplicated in canonical order, ids lowercased, updatedAfter in
// RFC 3339 UTC. A bad field is a 400 Validation error naming every bad field. Normalizing
// a normalized query changes nothing.
func (q *SearchQuery) Normalize() error {
	var probs fieldProblems
	q.normalize(&probs)
	return probs.err()
}

func (q *SearchQuery) normalize(probs *fieldProblems) {
	q.Q = strings.TrimSpace(q.Q)
	switch {
	case !utf8.ValidString(q.Q) || strings.ContainsRune(q.Q, 0):
		probs.add("q", "must be valid UTF-8 text without NUL characters")
	case utf8.RuneCountInString(q.Q) > SearchQueryMaxChars:
		probs.add("q", fmt.Sprintf("must be at most %d characters", SearchQueryMaxChars))
	}
	if q.Scope == "" {
		q.Scope = "all"
	}
	oneOf(probs, "scope", q.Scope, searchScopes)
	if q.Limit == 0 {
		q.Limit = SearchLimitDefault
	}
	if q.Limit < 1 || q.Limit > SearchLimitMax {
		probs.add("limit", fmt.Sprintf("must be an integer from 1 to %d", SearchLimitMax))
	}
	if q.Offset < 0 || q.Offset > SearchOffsetMax {
		probs.add("offset", fmt.Sprintf("must be an integer from 0 to %d", SearchOffsetMax))
	}
	q.Status = normalizeSearchList(probs, "status", q.Status, searchStatuses)
	q.Priority = normalizeSearchList(probs, "priority", q.Priority, searchPriorities)
	q.AssigneeAgentID = normalizeSearchID(probs, "assigneeAgentId", q.AssigneeAgentID, true)
	q.ProjectID = normalizeSearchID(probs, "projectId", q.ProjectID, false)
	q.LabelID = normalizeSearchID(probs, "labelId", q.LabelID, false)
	q.AssigneeUserID = strings.TrimSpace(q.AssigneeUserID)
	switch {
	case !utf8.ValidString(q.AssigneeUserID) || strings.ContainsRune(q.AssigneeUserID, 0):
		probs.add("assigneeUserId", "must be valid UTF-8 text without NUL characters")
	case utf8.RuneCountInString(q.AssigneeUserID) > 200:
		probs.add("assigneeUserId", "must be at most 200 characters")
	}
	if q.UpdatedWithin != "" {
		oneOf(probs, "updatedWithin", q.UpdatedWithin, searchWindows)
	}
	q.updatedAfter = time.Time{}
	if s := strings.TrimSpace(q.UpdatedAfter); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t, err = time.Parse(time.DateOnly, s)
		}
		if err == nil {
			t = t.UTC()
		}
		if err != nil || t.Year() < 1 || t.Year() > 9999 {
			probs.add("updatedAfter", "must be an RFC 3339 time or a date YYYY-MM-DD")
		} else {
			q.updatedAfter = t
			q.UpdatedAfter = q.updatedAfter.Format(time.RFC3339Nano)
		}
	}
	if q.Sort == "" {
		q.Sort = "relevance"
	}
	oneOf(probs, "sort", q.Sort, searchSorts)
}

// normalizeSearchList checks a list filter against the allowed values and returns it
// deduplicated in the allowed values' order (nil when empty).
func normalizeSearchList(probs *fieldProblems, path string, in SearchList, allowed []string) SearchList {
	var out SearchList
	bad := false
	for _, v := range in {
		v = strings.TrimSpace(v)
		if v == "" {
			continue
		}
		if !slices.Contains(allowed, v) {
			bad = true
		}
	}
	if bad {
		probs.add(path, "must be a comma-separated list of "+strings.Join(allowed, ", "))
		return in
	}
	for _, v := range allowed {
		if slices.ContainsFunc(in, func(s string) bool { return strings.TrimSpace(s) == v }) {
			out = append(out, v)
		}
	}
	return out
}

// normalizeSearchID checks an id filter: a UUID (lowercased), or "null" when allowed.
func normalizeSearchID(probs *fieldProblems, path, v string, nullOK bool) string {
	v = strings.TrimSpace(v)
	switch {
	case v == "":
	case nullOK && v == "null":
	case isUUID(strings.ToLower(v)):
		v = strings.ToLower(v)
	default:
		if nullOK {
			probs.add(path, "must be a UUID or null")
		} else {
			probs.add(path, "must be a UUID")
		}
	}
	return v
}

// searchParamKeys are the query parameters ParseSearchQuery reads; others are ignored.
var searchParamKeys = []string{"q", "scope", "limit", "offset", "status", "priority", "assigneeAgentId",
	"assigneeUserId", "projectId", "labelId", "updatedWithin", "updatedAfter", "sort"}

// ParseSearchQuery reads a search query from URL query parameters and normalizes it. Each
// parameter but status and priority may appear once; status and priority take comma lists
// and may repeat. Unknown parameters are ignored. Every bad field is named in one 400
// Validation error.
func ParseSearchQuery(v url.Values) (*SearchQuery, error) {
	var probs fieldProblems
	q := &SearchQuery{}
	one := func(key string) string {
		vals := v[key]
		if len(vals) > 1 {
			probs.add(key, "must be given once")
		}
		if len(vals) == 0 {
			return ""
		}
		return vals[0]
	}
	integer := func(key string, lo, hi int, dst *int) {
		s := one(key)
		if s == "" {
			return
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < lo || n > hi {
			probs.add(key, fmt.Sprintf("must be an integer from %d to %d", lo, hi))
			*dst = 0
			return
		}
		*dst = n
	}
	q.Q = one("q")
	q.Scope = one("scope")
	integer("limit", 1, SearchLimitMax, &q.Limit)
	integer("offset", 0, SearchOffsetMax, &q.Offset)
	for _, s := range v["status"] {
		q.Status = append(q.Status, splitSearchList(s)...)
	}
	for _, s := range v["priority"] {
		q.Priority = append(q.Priority, splitSearchList(s)...)
	}
	q.AssigneeAgentID = one("assigneeAgentId")
	q.AssigneeUserID = one("assigneeUserId")
	q.ProjectID = one("projectId")
	q.LabelID = one("labelId")
	q.UpdatedWithin = one("updatedWithin")
	q.UpdatedAfter = one("updatedAfter")
	q.Sort = one("sort")
	q.normalize(&probs)
	if err := probs.err(); err != nil {
		return nil, err
	}
	return q, nil
}

// Values encodes a normalized query as URL query parameters; ParseSearchQuery of the
// result gives the query back.
func (q *SearchQuery) Values() url.Values {
	v := url.Values{}
	set := func(k, s string) {
		if s != "" {
			v.Set(k, s)
		}
	}
	set("q", q.Q)
	set("scope", q.Scope)
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Offset != 0 {
		v.Set("offset", strconv.Itoa(q.Offset))
	}
	set("status", strings.Join(q.Status, ","))
	set("priority", strings.Join(q.Priority, ","))
	set("assigneeAgentId", q.AssigneeAgentID)
	set("assigneeUserId", q.AssigneeUserID)
	set("projectId", q.ProjectID)
	set("labelId", q.LabelID)
	set("updatedWithin", q.UpdatedWithin)
	set("updatedAfter", q.UpdatedAfter)
	set("sort", q.Sort)
	return v
}

// updatedSince is the earliest updatedAt the issue filters allow (zero when unbounded).
func (q *SearchQuery) updatedSince(now time.Time) time.Time {
	var since time.Time
	switch q.UpdatedWithin {
	case "24h":
		since = now.Add(-24 * time.Hour)
	case "7d":
		since = now.AddDate(0, 0, -7)
	case "4w":
		since = now.AddDate(0, 0, -28)
	case "3m":
		since = now.AddDate(0, -3, 0)
	}
	if q.updatedAfter.After(since) {
		since = q.updatedAfter
	}
	return since
}

// SearchResult is one hit.
type SearchResult struct {
	// Type is issue, comment, document, artifact, agent or project.
	Type string `json:"type"`
	ID   string `json:"id"`
	// IssueID and Identifier name the issue a comment, document or artifact belongs to (and
	// the issue itself for an issue hit).
	IssueID    string `json:"issueId,omitempty"`
	Identifier string `json:"identifier,omitempty"`
	Title      string `json:"title"`
	// Snippet is plain text around the match.
	Snippet string `json:"snippet"`
	Status  string `json:"status,omitempty"`
	// Priority is set on issue hits.
	Priority  string    `json:"priority,omitempty"`
	Score     float64   `json:"score"`
	UpdatedAt time.Time `json:"updatedAt"`

	createdAt time.Time
}

// SearchResponse is the answer of a search.
type SearchResponse struct {
	// Query is the normalized query object.
	Query   *SearchQuery   `json:"query"`
	Results []SearchResult `json:"results"`
	// HasMore says that a next page (offset+limit) has results.
	HasMore bool `json:"hasMore"`
	Limit   int  `json:"limit"`
	Offset  int  `json:"offset"`
}

func init() {
	addRoutes(route{Method: "GET", Path: "/api/companies/{companyId}/search", Query: searchQuery{}, Response: new(SearchResponse), CompanyFromPath: true,
		Summary: "Search issues, comments, documents, artifacts, agents and projects (q ≤200, scope, limit 1–50, offset ≤200, " +
			"issue filters status, priority, assigneeAgentId, assigneeUserId, projectId, labelId, updatedWithin, updatedAfter; " +
			"sort relevance|updated|created|priority)",
		Handle: handleSearch})
	addMethods(map[string]method{
		"search": {
			Description: "Company search: input is the search query object (q, scope, limit, offset, status, priority, " +
				"assigneeAgentId, assigneeUserId, projectId, labelId, updatedWithin, updatedAfter, sort) plus companyId when " +
				"the call has no company. Returns {query, results, hasMore, limit, offset}.",
			Call: callSearch,
		},
	})
}

func handleSearch(w *Work, rw http.ResponseWriter, r *http.Request) {
	q, err := ParseSearchQuery(r.URL.Query())
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	res, err := w.search(r.Context(), r.PathValue("companyId"), q)
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, res)
}

func callSearch(w *Work, ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in struct {
		SearchQuery
		CompanyID string `json:"companyId"`
	}
	if err := bindStrict(call, &in); err != nil {
		return nil, err
	}
	companyID := call.CompanyID
	if companyID == "" {
		companyID = in.CompanyID
	}
	if !isUUID(companyID) {
		return nil, invalid("companyId", "is required")
	}
	if actor := call.Actor; actor != nil && actor.Type != "system" && !sdk.CanAccessCompany(actor, companyID) {
		return nil, forbidden("You do not have access to this company")
	}
	q := in.SearchQuery
	if err := q.Normalize(); err != nil {
		return nil, err
	}
	return w.search(methodContext(ctx, call, companyID), companyID, &q)
}

// search runs a normalized query. Each scope fetches its best offset+limit+1 hits with
// LIMIT (at most 251 rows), the hits are merged by the sort order and the page is cut.
// Issue filters restrict issue hits only.
func (w *Work) search(ctx context.Context, companyID string, q *SearchQuery) (*SearchResponse, error) {
	scopes := []string{q.Scope}
	if q.Scope == "all" {
		scopes = []string{"issues"}
		if q.Q != "" {
			scopes = []string{"issues", "comments", "documents", "artifacts", "agents", "projects"}
		}
	}
	k := q.Offset + q.Limit + 1
	parts := make([][]SearchResult, len(scopes))
	errs := make([]error, len(scopes))
	var wg sync.WaitGroup
	for i, scope := range scopes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch scope {
			case "issues":
				parts[i], errs[i] = w.searchIssues(ctx, companyID, q, k)
			case "comments":
				parts[i], errs[i] = w.searchComments(ctx, companyID, q, k)
			case "documents":
				parts[i], errs[i] = w.searchDocuments(ctx, companyID, q, k)
			case "artifacts":
				parts[i], errs[i] = w.searchArtifacts(ctx, companyID, q, k)
			case "agents":
				parts[i], errs[i] = w.searchAgents(ctx, companyID, q, k)
			case "projects":
				parts[i], errs[i] = w.searchProjects(ctx, companyID, q, k)
			}
		}()
	}
	wg.Wait()
	var all []SearchResult
	for i := range scopes {
		if errs[i] != nil {
			return nil, errs[i]
		}
		all = append(all, parts[i]...)
	}
	slices.SortStableFunc(all, searchCompare(q))
	res := &SearchResponse{Query: q, Results: []SearchResult{}, Limit: q.Limit, Offset: q.Offset}
	if q.Offset < len(all) {
		end := min(q.Offset+q.Limit, len(all))
		res.Results = all[q.Offset:end]
		res.HasMore = len(all) > end
	}
	return res, nil
}

var searchTypeOrder = map[string]int{"issue": 0, "comment": 1, "document": 2, "artifact": 3, "project": 4, "agent": 5}

func searchPriorityRank(p string) int {
	switch p {
	case "critical":
		return 4
	case "high":
		return 3
	case "medium":
		return 2
	case "low":
		return 1
	}
	return 0
}

// searchCompare orders merged hits by the query's sort.
func searchCompare(q *SearchQuery) func(a, b SearchResult) int {
	sortKey := q.Sort
	if sortKey == "relevance" && q.Q == "" {
		sortKey = "updated"
	}
	return func(a, b SearchResult) int {
		var c int
		switch sortKey {
		case "relevance":
			c = -cmpFloat(a.Score, b.Score)
		case "created":
			c = -a.createdAt.Compare(b.createdAt)
		case "priority":
			c = searchPriorityRank(b.Priority) - searchPriorityRank(a.Priority)
		}
		if c != 0 {
			return c
		}
		if c = -a.UpdatedAt.Compare(b.UpdatedAt); c != 0 {
			return c
		}
		if c = searchTypeOrder[a.Type] - searchTypeOrder[b.Type]; c != 0 {
			return c
		}
		return -strings.Compare(a.ID, b.ID)
	}
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// searchSQL builds a parameterized query. Search queries run as unnamed statements
// (pgx.QueryExecModeExec) so that each is planned for its own parameters: whether a term is
// rare (gin bitmap) or common (walk the recency index) decides the plan, and a cached
// generic plan would pick one for all.
type searchSQL struct {
	args []any
}

func (s *searchSQL) arg(v any) string {
	s.args = append(s.args, v)
	return "$" + strconv.Itoa(len(s.args))
}

// searchCandidateCap bounds the rows a relevance sort ranks: the most recently updated
// matches (newest first through the company's recency index, or all of them from the gin
// index when there are few), of which the best offset+limit+1 by rank are kept. A term that
// matches most of a large company so costs at most this many ts_rank calls.
const searchCandidateCap = 1000

// searchRanked reports whether the query sorts by text rank.
func searchRanked(q *SearchQuery) bool { return q.Sort == "relevance" && q.Q != "" }

// searchOrder is the ORDER BY of a scope's query over alias t; score is an output column.
// Types without a priority sort by recency; recency is the column their company index
// orders by (comments: created_at). The issue priority expression repeats the one of
// index issues_company_priority_idx.
func searchOrder(q *SearchQuery, t, recency string) string {
	switch {
	case searchRanked(q):
		return "score DESC, " + t + "." + recency + " DESC, " + t + ".id DESC"
	case q.Sort == "created":
		return t + ".created_at DESC, " + t + ".id DESC"
	case q.Sort == "priority" && t == "i":
		return "(CASE i.priority WHEN 'critical' THEN 4 WHEN 'high' THEN 3 WHEN 'medium' THEN 2 ELSE 1 END) DESC, i.updated_at DESC, i.id DESC"
	default:
		return t + "." + recency + " DESC, " + t + ".id DESC"
	}
}

// searchCandidates is the ORDER BY and LIMIT of a scope's candidate query: for a relevance
// sort the newest searchCandidateCap matches, otherwise the page itself. Only issues break
// ties by id here: the other tables' company indexes end with the recency column, and an
// extra sort key would keep the planner from walking them.
func searchCandidates(s *searchSQL, q *SearchQuery, t, recency string, k int) string {
	tie := ""
	if t == "i" {
		tie = ", i.id DESC"
	}
	switch {
	case searchRanked(q):
		return " ORDER BY " + t + "." + recency + " DESC" + tie + " LIMIT " + s.arg(max(k, searchCandidateCap))
	case q.Sort == "created":
		return " ORDER BY " + t + ".created_at DESC" + tie + " LIMIT " + s.arg(k)
	case q.Sort == "priority" && t == "i":
		return " ORDER BY " + searchOrder(q, t, recency) + " LIMIT " + s.arg(k)
	default:
		return " ORDER BY " + t + "." + recency + " DESC" + tie + " LIMIT " + s.arg(k)
	}
}

// searchHeadline is the snippet expression for a text column: the passage around the
// match, or the start of the text without q.
func searchHeadline(s *searchSQL, q *SearchQuery, col string) string {
	if q.Q == "" {
		return "left(coalesce(" + col + ", ''), 200)"
	}
	return "ts_headline('simple', left(coalesce(" + col + ", ''), 20000), websearch_to_tsquery('simple', " + s.arg(q.Q) +
		"), 'StartSel=\"\", StopSel=\"\", MaxWords=30, MinWords=10, MaxFragments=1, FragmentDelimiter=\" … \"')"
}

// scanSearch reads rows of (id, issue_id, identifier, title, status, priority, updated_at,
// created_at, score, snippet).
func scanSearch(rows pgx.Rows, typ string) ([]SearchResult, error) {
	defer rows.Close()
	var out []SearchResult
	for rows.Next() {
		var r SearchResult
		var issueID, identifier, status, priority, snippet *string
		if err := rows.Scan(&r.ID, &issueID, &identifier, &r.Title, &status, &priority, &r.UpdatedAt, &r.createdAt, &r.Score, &snippet); err != nil {
			return nil, fmt.Errorf("error reading %s search results: %w", typ, err)
		}
		r.Type = typ
		for _, f := range []struct {
			dst *string
			src *string
		}{{&r.IssueID, issueID}, {&r.Identifier, identifier}, {&r.Status, status}, {&r.Priority, priority}, {&r.Snippet, snippet}} {
			if f.src != nil {
				*f.dst = *f.src
			}
		}
		r.Snippet = searchTrimSnippet(r.Snippet)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error reading %s search results: %w", typ, err)
	}
	return out, nil
}

func searchTrimSnippet(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) > 300 {
		r := []rune(s)
		s = string(r[:300]) + "…"
	}
	return s
}

// searchIssues finds issues: full-text match on search_vector (gin index issues_search_idx)
// or, when q looks like an identifier, a prefix match on it (issues_identifier_key, whose
// text_pattern_ops serve LIKE), with the issue filters. Three layers keep the work bounded: candidate ids (ordered and
// LIMITed, so that the planner walks an index or takes a gin bitmap), the page ranked and
// cut, and snippets for the page only.
func (w *Work) searchIssues(ctx context.Context, companyID string, q *SearchQuery, k int) ([]SearchResult, error) {
	s := &searchSQL{}
	where := []string{"i.company_id = " + s.arg(companyID) + "::uuid", "i.hidden_at IS NULL"}
	score := "0::float8"
	if q.Q != "" {
		tsq := "websearch_to_tsquery('simple', " + s.arg(q.Q) + ")"
		if searchIdentifierPattern.MatchString(q.Q) {
			exact := s.arg(strings.ToUpper(q.Q))
			prefix := s.arg(strings.ToUpper(q.Q) + "%")
			where = append(where, "(i.search_vector @@ "+tsq+" OR upper(i.identifier) LIKE "+prefix+")")
			score = "ts_rank(i.search_vector, " + tsq + ")::float8 + CASE WHEN upper(i.identifier) = " + exact +
				" THEN 1.0 WHEN upper(i.identifier) LIKE " + prefix + " THEN 0.5 ELSE 0 END"
		} else {
			where = append(where, "i.search_vector @@ "+tsq)
			score = "ts_rank(i.search_vector, " + tsq + ")::float8"
		}
	}
	if len(q.Status) > 0 {
		where = append(where, "i.status = ANY("+s.arg([]string(q.Status))+"::text[])")
	}
	if len(q.Priority) > 0 {
		where = append(where, "i.priority = ANY("+s.arg([]string(q.Priority))+"::text[])")
	}
	switch q.AssigneeAgentID {
	case "":
	case "null":
		where = append(where, "i.assignee_agent_id IS NULL")
	default:
		where = append(where, "i.assignee_agent_id = "+s.arg(q.AssigneeAgentID)+"::uuid")
	}
	switch q.AssigneeUserID {
	case "":
	case "null":
		where = append(where, "i.assignee_user_id IS NULL")
	default:
		where = append(where, "i.assignee_user_id = "+s.arg(q.AssigneeUserID))
	}
	if q.ProjectID != "" {
		where = append(where, "i.project_id = "+s.arg(q.ProjectID)+"::uuid")
	}
	if q.LabelID != "" {
		where = append(where, "EXISTS (SELECT 1 FROM issue_labels l WHERE l.issue_id = i.id AND l.label_id = "+s.arg(q.LabelID)+"::uuid)")
	}
	if since := q.updatedSince(time.Now().UTC()); !since.IsZero() {
		where = append(where, "i.updated_at >= "+s.arg(since))
	}
	order := searchOrder(q, "i", "updated_at")
	cand := `SELECT i.id FROM issues i WHERE ` + strings.Join(where, " AND ") + searchCandidates(s, q, "i", "updated_at", k)
	ranked := `SELECT i.id, i.identifier, i.title, i.status, i.priority, i.updated_at, i.created_at, i.description, ` + score +
		` AS score FROM (` + cand + `) c JOIN issues i ON i.id = c.id ORDER BY ` + order + ` LIMIT ` + s.arg(k)
	sql := `SELECT i.id::text, i.id::text, i.identifier, i.title, i.status, i.priority, i.updated_at, i.created_at, i.score, ` +
		searchHeadline(s, q, "i.description") + ` FROM (` + ranked + `) i ORDER BY ` + order
	rows, err := w.pool.Query(ctx, sql, append([]any{pgx.QueryExecModeExec}, s.args...)...)
	if err != nil {
		return nil, fmt.Errorf("error searching issues: %w", err)
	}
	return scanSearch(rows, "issue")
}

// searchComments finds comments of visible issues (gin index issue_comments_search_idx;
// recency is creation, the order of issue_comments_company_idx).
func (w *Work) searchComments(ctx context.Context, companyID string, q *SearchQuery, k int) ([]SearchResult, error) {
	s := &searchSQL{}
	where := []string{"c.company_id = " + s.arg(companyID) + "::uuid", "c.deleted_at IS NULL", "i.hidden_at IS NULL"}
	score := "0::float8"
	if q.Q != "" {
		tsq := "websearch_to_tsquery('simple', " + s.arg(q.Q) + ")"
		where = append(where, "c.search_vector @@ "+tsq)
		score = "ts_rank(c.search_vector, " + tsq + ")::float8"
	}
	order := searchOrder(q, "c", "created_at")
	cand := `SELECT c.id FROM issue_comments c JOIN issues i ON i.id = c.issue_id WHERE ` + strings.Join(where, " AND ") +
		searchCandidates(s, q, "c", "created_at", k)
	ranked := `SELECT c.id, c.issue_id, i.identifier, i.title, c.updated_at, c.created_at, c.body, ` + score +
		` AS score FROM (` + cand + `) x JOIN issue_comments c ON c.id = x.id JOIN issues i ON i.id = c.issue_id ORDER BY ` + order +
		` LIMIT ` + s.arg(k)
	sql := `SELECT c.id::text, c.issue_id::text, c.identifier, c.title, NULL::text, NULL::text, c.updated_at, c.created_at, c.score, ` +
		searchHeadline(s, q, "c.body") + ` FROM (` + ranked + `) c ORDER BY ` + order
	rows, err := w.pool.Query(ctx, sql, append([]any{pgx.QueryExecModeExec}, s.args...)...)
	if err != nil {
		return nil, fmt.Errorf("error searching comments: %w", err)
	}
	return scanSearch(rows, "comment")
}

// searchDocuments finds documents (gin index documents_search_idx) with the issue each is
// attached to; documents of hidden issues are skipped.
func (w *Work) searchDocuments(ctx context.Context, companyID string, q *SearchQuery, k int) ([]SearchResult, error) {
	s := &searchSQL{}
	where := []string{"d.company_id = " + s.arg(companyID) + "::uuid",
		"NOT EXISTS (SELECT 1 FROM issue_documents hd JOIN issues hi ON hi.id = hd.issue_id WHERE hd.document_id = d.id AND hi.hidden_at IS NOT NULL)"}
	score := "0::float8"
	if q.Q != "" {
		tsq := "websearch_to_tsquery('simple', " + s.arg(q.Q) + ")"
		where = append(where, "d.search_vector @@ "+tsq)
		score = "ts_rank(d.search_vector, " + tsq + ")::float8"
	}
	order := searchOrder(q, "d", "updated_at")
	cand := `SELECT d.id FROM documents d WHERE ` + strings.Join(where, " AND ") + searchCandidates(s, q, "d", "updated_at", k)
	ranked := `SELECT d.id, idoc.issue_id, i.identifier, coalesce(nullif(d.title, ''), idoc.key, 'Untitled document') AS title,
			d.updated_at, d.created_at, d.body, ` + score + ` AS score
		FROM (` + cand + `) x JOIN documents d ON d.id = x.id
		LEFT JOIN issue_documents idoc ON idoc.document_id = d.id LEFT JOIN issues i ON i.id = idoc.issue_id
		ORDER BY ` + order + ` LIMIT ` + s.arg(k)
	sql := `SELECT d.id::text, d.issue_id::text, d.identifier, d.title, NULL::text, NULL::text, d.updated_at, d.created_at, d.score, ` +
		searchHeadline(s, q, "d.body") + ` FROM (` + ranked + `) d ORDER BY ` + order
	rows, err := w.pool.Query(ctx, sql, append([]any{pgx.QueryExecModeExec}, s.args...)...)
	if err != nil {
		return nil, fmt.Errorf("error searching documents: %w", err)
	}
	return scanSearch(rows, "document")
}

// searchArtifactVector repeats the expression of index issue_work_products_search_idx.
const searchArtifactVector = `to_tsvector('simple', coalesce(wp.title, '') || ' ' || coalesce(wp.summary, '') || ' ' || coalesce(wp.url, ''))`

// searchArtifacts finds work products by title, summary and URL (gin index
// issue_work_products_search_idx).
func (w *Work) searchArtifacts(ctx context.Context, companyID string, q *SearchQuery, k int) ([]SearchResult, error) {
	s := &searchSQL{}
	where := []string{"wp.company_id = " + s.arg(companyID) + "::uuid", "i.hidden_at IS NULL"}
	score := "0::float8"
	if q.Q != "" {
		tsq := "websearch_to_tsquery('simple', " + s.arg(q.Q) + ")"
		where = append(where, searchArtifactVector+" @@ "+tsq)
		score = "ts_rank(" + searchArtifactVector + ", " + tsq + ")::float8"
	}
	order := searchOrder(q, "wp", "updated_at")
	cand := `SELECT wp.id FROM issue_work_products wp JOIN issues i ON i.id = wp.issue_id WHERE ` + strings.Join(where, " AND ") +
		searchCandidates(s, q, "wp", "updated_at", k)
	ranked := `SELECT wp.id, wp.issue_id, i.identifier, wp.title, wp.status, wp.updated_at, wp.created_at,
			coalesce(nullif(wp.summary, ''), wp.url, '') AS body, ` + score + ` AS score
		FROM (` + cand + `) x JOIN issue_work_products wp ON wp.id = x.id JOIN issues i ON i.id = wp.issue_id
		ORDER BY ` + order + ` LIMIT ` + s.arg(k)
	sql := `SELECT wp.id::text, wp.issue_id::text, wp.identifier, wp.title, wp.status, NULL::text, wp.updated_at, wp.created_at, wp.score, ` +
		searchHeadline(s, q, "wp.body") + ` FROM (` + ranked + `) wp ORDER BY ` + order
	rows, err := w.pool.Query(ctx, sql, append([]any{pgx.QueryExecModeExec}, s.args...)...)
	if err != nil {
		return nil, fmt.Errorf("error searching artifacts: %w", err)
	}
	return scanSearch(rows, "artifact")
}

// searchLikePattern escapes q for LIKE and wraps it in the given affixes.
func searchLikePattern(pre, q, post string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return pre + r.Replace(q) + post
}

// searchProjects finds projects by name (a company has few; no index needed).
func (w *Work) searchProjects(ctx context.Context, companyID string, q *SearchQuery, k int) ([]SearchResult, error) {
	s := &searchSQL{}
	where := []string{"p.company_id = " + s.arg(companyID) + "::uuid"}
	score := "0::float8"
	if q.Q != "" {
		where = append(where, "p.name ILIKE "+s.arg(searchLikePattern("%", q.Q, "%")))
		score = "CASE WHEN lower(p.name) = lower(" + s.arg(q.Q) + ") THEN 1.0 WHEN p.name ILIKE " +
			s.arg(searchLikePattern("", q.Q, "%")) + " THEN 0.75 ELSE 0.5 END"
	}
	order := searchOrder(q, "p", "updated_at")
	sql := `SELECT p.id::text, NULL::text, NULL::text, p.name, p.status, NULL::text, p.updated_at, p.created_at, ` + score +
		` AS score, left(coalesce(p.description, ''), 300) FROM projects p WHERE ` + strings.Join(where, " AND ") +
		` ORDER BY ` + order + ` LIMIT ` + s.arg(k)
	rows, err := w.pool.Query(ctx, sql, append([]any{pgx.QueryExecModeExec}, s.args...)...)
	if err != nil {
		return nil, fmt.Errorf("error searching projects: %w", err)
	}
	return scanSearch(rows, "project")
}

// searchAgents matches the company's agents (from the kernel) by name and URL key.
func (w *Work) searchAgents(ctx context.Context, companyID string, q *SearchQuery, k int) ([]SearchResult, error) {
	res, err := w.host.Principals.ListAgents(ctx, &hostv1.ListAgentsRequest{CompanyId: companyID})
	if err != nil {
		return nil, fmt.Errorf("error listing agents: %w", err)
	}
	needle := strings.ToLower(q.Q)
	var out []SearchResult
	for _, a := range res.Agents {
		name, key := strings.ToLower(a.Name), strings.ToLower(a.UrlKey)
		score := 0.0
		switch {
		case needle == "":
		case name == needle || key == needle:
			score = 1.0
		case strings.HasPrefix(name, needle) || strings.HasPrefix(key, needle):
			score = 0.75
		case strings.Contains(name, needle) || strings.Contains(key, needle):
			score = 0.5
		default:
			continue
		}
		r := SearchResult{Type: "agent", ID: a.Id, Title: a.Name, Snippet: a.Role, Status: a.Status, Score: score}
		r.UpdatedAt, _ = time.Parse(time.RFC3339Nano, a.UpdatedAt)
		r.createdAt, _ = time.Parse(time.RFC3339Nano, a.CreatedAt)
		out = append(out, r)
	}
	slices.SortStableFunc(out, searchCompare(q))
	if len(out) > k {
		out = out[:k]
	}
	return out, nil
}

// searchQuery documents the query parameters of company search.
type searchQuery struct {
	Q      string `query:"q" doc:"The text to find"`
	Scope  string `query:"scope"`
	Status string `query:"status" doc:"Comma-separated issue statuses"`
	Limit  int    `query:"limit" jsonschema:"minimum=1"`
	Offset int    `query:"offset" jsonschema:"minimum=0"`
}
