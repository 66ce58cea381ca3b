package work

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelhq/keel/sdk"
)

// Provided method of the documents area: another extension (the wiki's event ingestion)
// reads an issue document's text through the work owner, clipped to the size it can take,
// so a large body never crosses the wire whole.
func init() {
	addMethods(map[string]method{
		"documents.get": {
			Description: "Read an issue document of the call's company. Input: {issueId, key, revisionId (optional: that revision's " +
				"body instead of the latest), maxCharacters (optional, 1-1000000: the body is clipped to that many characters)}. " +
				"Output: {id, companyId, issueId, key, title, format, body, bodyLength (characters before clipping), clipped, " +
				"revisionId, revisionNumber, latestRevisionId, latestRevisionNumber, updatedAt}; 404 \"Document not found\" " +
				"(or \"Document revision not found\") otherwise.",
			Call: callDocumentsGet,
		},
	})
}

// documentsGetMaxCharacters bounds maxCharacters (and the body of a call without it).
const documentsGetMaxCharacters = 1_000_000

// DocumentText is the output of work.documents.get.
type DocumentText struct {
	ID        string  `json:"id"`
	CompanyID string  `json:"companyId"`
	IssueID   string  `json:"issueId"`
	Key       string  `json:"key"`
	Title     *string `json:"title"`
	Format    string  `json:"format"`
	// Body is the revision's text, clipped to maxCharacters.
	Body string `json:"body"`
	// BodyLength is the body's length in characters before clipping.
	BodyLength int  `json:"bodyLength"`
	Clipped    bool `json:"clipped"`
	// RevisionID and RevisionNumber name the revision read (the latest unless asked).
	RevisionID           *string   `json:"revisionId"`
	RevisionNumber       int       `json:"revisionNumber"`
	LatestRevisionID     *string   `json:"latestRevisionId"`
	LatestRevisionNumber int       `json:"latestRevisionNumber"`
	UpdatedAt            time.Time `json:"updatedAt"`
}

// documentTextSQL reads one issue document of a company ($3) by issue ($1) and key ($2),
// the body of revision $4 (NULL: the latest) clipped to $5 characters, with its length.
const documentTextSQL = `SELECT d.id::text, d.company_id::text, d.title, d.format,
	left(COALESCE(rev.body, d.body), $5), length(COALESCE(rev.body, d.body)),
	COALESCE(rev.id, d.latest_revision_id)::text, COALESCE(rev.revision_number, d.revision_number),
	d.latest_revision_id::text, d.revision_number, d.updated_at, $4::uuid IS NOT NULL AND rev.id IS NULL
FROM issue_documents idoc JOIN documents d ON d.id = idoc.document_id
	LEFT JOIN document_revisions rev ON rev.id = $4::uuid AND rev.document_id = d.id
WHERE idoc.issue_id = $1 AND idoc.key = $2 AND d.company_id = $3`

func callDocumentsGet(w *Work, ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in struct {
		IssueID       string `json:"issueId"`
		Key           string `json:"key"`
		RevisionID    string `json:"revisionId"`
		MaxCharacters *int   `json:"maxCharacters"`
	}
	if err := bindStrict(call, &in); err != nil {
		return nil, err
	}
	if call.CompanyID == "" {
		return nil, invalid("companyId", "the call names no company")
	}
	actor := call.Actor
	if actor == nil || actor.Type == "" || actor.Type == "none" {
		actor = &sdk.Actor{Type: "system"}
	}
	ctx = sdk.WithRequestInfo(ctx, actor, call.CompanyID, "", nil)
	if err := requireCompanyAccess(ctx, call.CompanyID); err != nil {
		return nil, err
	}
	limit := documentsGetMaxCharacters
	if m := in.MaxCharacters; m != nil {
		if *m < 1 || *m > documentsGetMaxCharacters {
			return nil, invalid("maxCharacters", fmt.Sprintf("must be between 1 and %d", documentsGetMaxCharacters))
		}
		limit = *m
	}
	if !isUUID(in.IssueID) || !validDocumentKey(in.Key) {
		return nil, notFound(msgDocumentNotFound)
	}
	var rev *string
	if in.RevisionID != "" {
		if !isUUID(in.RevisionID) {
			return nil, notFound("Document revision not found")
		}
		rev = &in.RevisionID
	}
	out := &DocumentText{IssueID: in.IssueID, Key: in.Key}
	var missingRev bool
	err := w.pool.QueryRow(ctx, documentTextSQL, in.IssueID, in.Key, call.CompanyID, rev, limit).Scan(&out.ID, &out.CompanyID,
		&out.Title, &out.Format, &out.Body, &out.BodyLength, &out.RevisionID, &out.RevisionNumber, &out.LatestRevisionID,
		&out.LatestRevisionNumber, &out.UpdatedAt, &missingRev)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound(msgDocumentNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("error reading document %s of issue %s: %w", in.Key, in.IssueID, err)
	}
	if missingRev {
		return nil, notFound("Document revision not found")
	}
	out.Clipped = out.BodyLength > limit
	return out, nil
}
