package statuscards

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/keelhq/keel/sdk"
)

// The watched set of a card is the union of the issues its compiled queries find through
// the work owner's company search and the issues its latest summary mentions. Its
// fingerprint is read from the work owner in one call (work.issues.fingerprints).

// searchHit is the part of a work.search result the extension reads.
type searchHit struct {
	Type       string    `json:"type"`
	ID         string    `json:"id"`
	IssueID    string    `json:"issueId,omitempty"`
	Identifier string    `json:"identifier,omitempty"`
	Title      string    `json:"title"`
	Snippet    string    `json:"snippet"`
	Status     string    `json:"status,omitempty"`
	Priority   string    `json:"priority,omitempty"`
	Score      float64   `json:"score"`
	UpdatedAt  time.Time `json:"updatedAt"`
}

// searchAnswer is a work.search answer.
type searchAnswer struct {
	Query   json.RawMessage `json:"query"`
	Results []searchHit     `json:"results"`
	HasMore bool            `json:"hasMore"`
}

// queryResult is one compiled query and what it found.
type queryResult struct {
	Query  json.RawMessage `json:"query"`
	Result []searchHit     `json:"result"`
}

// runQueries runs each compiled query through the work owner's search and returns the
// results per query and the issue ids they found, in first-seen order.
func (x *StatusCards) runQueries(ctx context.Context, companyID string, queries json.RawMessage) ([]queryResult, []string, error) {
	var qs []json.RawMessage
	if err := json.Unmarshal(queries, &qs); err != nil {
		return nil, nil, fmt.Errorf("error decoding compiled queries: %w", err)
	}
	out := make([]queryResult, 0, len(qs))
	seen := map[string]bool{}
	var ids []string
	for _, q := range qs {
		var ans searchAnswer
		if err := x.host.Call(ctx, "work.search", sdk.SystemActor(), companyID, q, &ans); err != nil {
			return nil, nil, fmt.Errorf("error running a compiled query: %w", err)
		}
		if ans.Results == nil {
			ans.Results = []searchHit{}
		}
		out = append(out, queryResult{Query: q, Result: ans.Results})
		for _, h := range ans.Results {
			id := h.IssueID
			if id == "" && h.Type == "issue" {
				id = h.ID
			}
			if id != "" && !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}
	return out, ids, nil
}

// fpRow is a work.issues.fingerprints row.
type fpRow struct {
	ID         string `json:"id"`
	Identifier string `json:"identifier"`
	FPEntry
}

// fingerprints reads the fingerprints of issues by id and identifier.
func (x *StatusCards) fingerprints(ctx context.Context, companyID string, ids, identifiers []string) ([]fpRow, error) {
	var rows []fpRow
	if len(ids) == 0 && len(identifiers) == 0 {
		return rows, nil
	}
	if ids == nil {
		ids = []string{}
	}
	if identifiers == nil {
		identifiers = []string{}
	}
	if err := x.host.Call(ctx, "work.issues.fingerprints", sdk.SystemActor(), companyID,
		map[string]any{"issueIds": ids, "identifiers": identifiers, "excludeOriginKind": "status_card"}, &rows); err != nil {
		return nil, fmt.Errorf("error reading issue fingerprints: %w", err)
	}
	return rows, nil
}

// watch computes the current fingerprint of a card's watched set.
func (x *StatusCards) watch(ctx context.Context, c *Card) (Fingerprint, error) {
	_, ids, err := x.runQueries(ctx, c.CompanyID, c.Queries)
	if err != nil {
		return nil, err
	}
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		seen[id] = true
	}
	for _, id := range c.MentionedIssueIDs {
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	rows, err := x.fingerprints(ctx, c.CompanyID, ids, nil)
	if err != nil {
		return nil, err
	}
	return toFingerprint(rows), nil
}

// toFingerprint indexes fingerprint rows by issue id.
func toFingerprint(rows []fpRow) Fingerprint {
	fp := make(Fingerprint, len(rows))
	for i := range rows {
		e := rows[i].FPEntry
		e.Identifier = rows[i].Identifier
		fp[rows[i].ID] = &e
	}
	return fp
}

var (
	identifierRE = regexp.MustCompile(`\b[A-Z]{1,20}-[0-9]{1,18}\b`)
	uuidRE       = regexp.MustCompile(`\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b`)
)

// mentionedIssues resolves the issues a summary mentions (identifiers such as ABC-12 and
// issue UUIDs) to the company's issues, at most mentionedMax.
func (x *StatusCards) mentionedIssues(ctx context.Context, companyID, markdown string) ([]fpRow, error) {
	idents := uniq(identifierRE.FindAllString(markdown, mentionedMax))
	ids := uniq(uuidRE.FindAllString(strings.ToLower(markdown), mentionedMax))
	rows, err := x.fingerprints(ctx, companyID, ids, idents)
	if err != nil {
		return nil, err
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].ID < rows[j].ID })
	return rows, nil
}

// uniq returns the distinct strings of in, in first-seen order.
func uniq(in []string) []string {
	seen := map[string]bool{}
	out := []string{}
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
