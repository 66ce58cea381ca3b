package work

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/uptrace/bun/dialect/pgdialect"

	"github.com/keelhq/keel/sdk"
)

// FingerprintsMax is the most issues one issues.fingerprints call reads.
const FingerprintsMax = 10000

func init() {
	addMethods(map[string]method{
		"issues.fingerprints": {
			Description: "Change-detection fingerprints of issues of the call's company (status cards). Input: {issueIds, " +
				"identifiers} (together at most 10000), excludeOriginKind? (leave out issues of that origin kind). Output: [{id, identifier, title, status, assigneeAgentId, " +
				"assigneeUserId, updatedAt, latestHumanCommentAt}] ordered by id; unknown ids and identifiers, hidden issues " +
				"and issues of other companies are left out.",
			Call: (*Work).methodIssuesFingerprints,
		},
	})
}

// IssueFingerprint is what change detection compares of an issue (REFERENCE.md 5
// "Fingerprint entry").
type IssueFingerprint struct {
	ID                   string     `bun:"id" json:"id"`
	Identifier           string     `bun:"identifier" json:"identifier"`
	Title                string     `bun:"title" json:"title"`
	Status               string     `bun:"status" json:"status"`
	AssigneeAgentID      *string    `bun:"assignee_agent_id" json:"assigneeAgentId"`
	AssigneeUserID       *string    `bun:"assignee_user_id" json:"assigneeUserId"`
	UpdatedAt            time.Time  `bun:"updated_at" json:"updatedAt"`
	LatestHumanCommentAt *time.Time `bun:"latest_human_comment_at" json:"latestHumanCommentAt"`
}

// IssueFingerprintsListParams names a company and the issues by id or identifier.
type IssueFingerprintsListParams struct {
	CompanyID   string
	IDs         []string
	Identifiers []string
	// ExcludeOriginKind leaves out issues of that origin kind ("" leaves none out).
	ExcludeOriginKind string
}

// IssueFingerprintsList returns the fingerprints of the visible issues of the company
// named by id or identifier, ordered by id.
func (s *issueStore) IssueFingerprintsList(ctx context.Context, p *IssueFingerprintsListParams) ([]IssueFingerprint, error) {
	out := []IssueFingerprint{}
	if len(p.IDs) == 0 && len(p.Identifiers) == 0 {
		return out, nil
	}
	ids, idents := p.IDs, p.Identifiers
	if ids == nil {
		ids = []string{}
	}
	if idents == nil {
		idents = []string{}
	}
	// Ids and identifiers each take their own index; the latest human comment is one index
	// probe per issue.
	err := s.db.NewRaw(`WITH wanted AS (
			SELECT id FROM issues WHERE company_id = ? AND id = ANY(?::uuid[])
			UNION
			SELECT id FROM issues WHERE upper(identifier) = ANY(?::text[]) AND company_id = ?)
		SELECT i.id, i.identifier, i.title, i.status, i.assignee_agent_id, i.assignee_user_id, i.updated_at,
			lc.at AS latest_human_comment_at
		FROM wanted w JOIN issues i ON i.id = w.id
		LEFT JOIN LATERAL (SELECT c.created_at AS at FROM issue_comments c WHERE c.issue_id = i.id AND c.author_type = 'user'
			AND c.deleted_at IS NULL ORDER BY c.created_at DESC LIMIT 1) lc ON true
		WHERE i.hidden_at IS NULL AND i.origin_kind <> ?
		ORDER BY i.id`, p.CompanyID, pgdialect.Array(ids), pgdialect.Array(idents), p.CompanyID, p.ExcludeOriginKind).Scan(ctx, &out)
	if err != nil {
		return nil, fmt.Errorf("error reading issue fingerprints: %w", err)
	}
	return out, nil
}

func (w *Work) methodIssuesFingerprints(ctx context.Context, call *sdk.MethodCall) (any, error) {
	ctx = issuesMethodContext(ctx, call)
	var in struct {
		IssueIDs          []string `json:"issueIds"`
		Identifiers       []string `json:"identifiers"`
		ExcludeOriginKind string   `json:"excludeOriginKind"`
	}
	if err := issuesMethodDecode(call, &in); err != nil {
		return nil, err
	}
	companyID, err := issuesMethodCompany(ctx, call, "")
	if err != nil {
		return nil, err
	}
	if len(in.IssueIDs)+len(in.Identifiers) > FingerprintsMax {
		return nil, invalid("issueIds", fmt.Sprintf("at most %d issues per call", FingerprintsMax))
	}
	ids := make([]string, 0, len(in.IssueIDs))
	for _, id := range in.IssueIDs {
		if id = strings.ToLower(strings.TrimSpace(id)); isUUID(id) {
			ids = append(ids, id)
		}
	}
	idents := make([]string, 0, len(in.Identifiers))
	for _, s := range in.Identifiers {
		if s = strings.ToUpper(strings.TrimSpace(s)); s != "" && searchIdentifierPattern.MatchString(s) {
			idents = append(idents, s)
		}
	}
	return newIssueStore(w.db).IssueFingerprintsList(ctx, &IssueFingerprintsListParams{CompanyID: companyID, IDs: ids, Identifiers: idents,
		ExcludeOriginKind: strings.TrimSpace(in.ExcludeOriginKind)})
}
