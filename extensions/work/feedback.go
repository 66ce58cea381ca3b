package work

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"github.com/keelhq/keel/sdk"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

// Feedback target types, votes, trace statuses and texts.
const (
	FeedbackTargetComment  = "issue_comment"
	FeedbackTargetRevision = "issue_document_revision"

	FeedbackVoteUp   = "up"
	FeedbackVoteDown = "down"

	// FeedbackStatusLocalOnly is a trace recorded while the company did not share feedback
	// data; FeedbackStatusShared one recorded with the company's consent to share.
	FeedbackStatusLocalOnly = "local_only"
	FeedbackStatusShared    = "shared"

	FeedbackReasonMaxLen = 2000

	msgFeedbackCommentOnly  = "Feedback voting is only available on agent-authored issue comments"
	msgFeedbackRevisionOnly = "Feedback voting is only available on agent-authored issue document revisions"
)

var (
	feedbackTargetTypes = []string{FeedbackTargetComment, FeedbackTargetRevision}
	feedbackVotes       = []string{FeedbackVoteUp, FeedbackVoteDown}
	feedbackStatuses    = []string{FeedbackStatusLocalOnly, FeedbackStatusShared}
	feedbackFormats     = []string{"ndjson", "json"}
)

func init() {
	addRoutes(
		route{Method: http.MethodPost, Path: "/api/issues/{id}/feedback-votes", Status: http.StatusCreated, Response: new(FeedbackVote),
			Summary: "Vote up or down on an agent-authored comment or document revision of the issue (board users; a second vote by the same user replaces the first)",
			Body:    feedbackVoteBody{}, Handle: handleFeedbackVote},
		route{Method: http.MethodGet, Path: "/api/issues/{id}/feedback-votes", Response: new([]*FeedbackVote),
			Summary: "List the feedback votes cast on the issue's comments and document revisions, newest first", Handle: handleFeedbackVoteList},
		route{Method: http.MethodGet, Path: "/api/issues/{id}/feedback-traces", Query: feedbackTraceQuery{}, Response: new([]*FeedbackTrace),
			Summary: "List the issue's feedback traces, newest first (board; filters as the company list)", Handle: handleIssueFeedbackTraces},
		route{Method: http.MethodGet, Path: "/api/companies/{companyId}/feedback-traces", Query: feedbackTraceQuery{}, Response: new([]*FeedbackTrace),
			CompanyFromPath: true, Access: sdk.AccessBoard,
			Summary: "List the company's feedback traces, newest first (filters targetType, vote, status, projectId, issueId, from, to, sharedOnly, includePayload)",
			Handle:  handleCompanyFeedbackTraces},
		route{Method: http.MethodGet, Path: "/api/companies/{companyId}/feedback-traces/export", Query: feedbackExportQuery{}, Response: new([]*FeedbackTrace),
			CompanyFromPath: true, Access: sdk.AccessBoard,
			Summary: "Export the company's feedback traces as ndjson (default) or json, with the list's filters; payloads only for traces shared with the company's consent while sharing is on",
			Handle:  handleCompanyFeedbackExport},
	)
}

// feedbackVoteBody is the body of POST /api/issues/{id}/feedback-votes.
type feedbackVoteBody struct {
	TargetType string  `json:"targetType"`
	TargetID   string  `json:"targetId"`
	Vote       string  `json:"vote"`
	Reason     *string `json:"reason,omitempty"`
}

// feedbackTraceQuery documents the trace list filters.
type feedbackTraceQuery struct {
	TargetType     string `query:"targetType" jsonschema:"enum=issue_comment,enum=issue_document_revision"`
	Vote           string `query:"vote" jsonschema:"enum=up,enum=down"`
	Status         string `query:"status" jsonschema:"enum=local_only,enum=shared"`
	ProjectID      string `query:"projectId" jsonschema:"format=uuid"`
	IssueID        string `query:"issueId" jsonschema:"format=uuid"`
	From           string `query:"from" doc:"ISO 8601 time or date: traces voted at or after it"`
	To             string `query:"to" doc:"ISO 8601 time or date (a date covers that whole day): traces voted at or before it"`
	SharedOnly     bool   `query:"sharedOnly" doc:"only traces recorded with the company's consent to share (status shared)"`
	IncludePayload bool   `query:"includePayload" doc:"add each trace's payload snapshot of its target"`
}

// feedbackExportQuery documents the export's query: the list's filters and the format.
type feedbackExportQuery struct {
	feedbackTraceQuery
	Format string `query:"format" jsonschema:"enum=ndjson,enum=json" doc:"ndjson (default) or json"`
}

// FeedbackVote is a row of ext_work.feedback_votes seen as a vote.
type FeedbackVote struct {
	bun.BaseModel `bun:"table:feedback_votes,alias:f"`

	ID            string          `bun:"id,pk,type:uuid" json:"id"`
	CompanyID     string          `bun:"company_id,type:uuid" json:"companyId"`
	IssueID       string          `bun:"issue_id,type:uuid" json:"issueId"`
	TargetType    string          `bun:"target_type" json:"targetType"`
	TargetID      string          `bun:"target_id,type:uuid" json:"targetId"`
	TargetLabel   string          `bun:"target_label" json:"targetLabel"`
	AuthorAgentID *string         `bun:"author_agent_id,type:uuid" json:"authorAgentId"`
	VoterUserID   string          `bun:"voter_user_id" json:"voterUserId"`
	Vote          string          `bun:"vote" json:"vote"`
	Reason        *string         `bun:"reason" json:"reason"`
	Status        string          `bun:"status" json:"status"`
	Payload       json.RawMessage `bun:"payload,type:jsonb" json:"-"`
	CreatedAt     time.Time       `bun:"created_at,nullzero,notnull,default:current_timestamp" json:"createdAt"`
	UpdatedAt     time.Time       `bun:"updated_at,nullzero,notnull,default:current_timestamp" json:"updatedAt"`
	// Inserted is true when the vote was new, false when it replaced an earlier one.
	Inserted bool `bun:"inserted,scanonly" json:"-"`
}

// FeedbackTrace is one feedback trace: a vote with its issue, project, label, sharing status
// and, when asked for, the payload snapshot taken when the vote was cast.
type FeedbackTrace struct {
	ID              string          `bun:"id" json:"id"`
	CompanyID       string          `bun:"company_id" json:"companyId"`
	IssueID         string          `bun:"issue_id" json:"issueId"`
	IssueIdentifier *string         `bun:"issue_identifier" json:"issueIdentifier"`
	ProjectID       *string         `bun:"project_id" json:"projectId"`
	Vote            string          `bun:"vote" json:"vote"`
	Status          string          `bun:"status" json:"status"`
	TargetType      string          `bun:"target_type" json:"targetType"`
	TargetID        string          `bun:"target_id" json:"targetId"`
	TargetLabel     string          `bun:"target_label" json:"targetLabel"`
	AuthorAgentID   *string         `bun:"author_agent_id" json:"authorAgentId"`
	VoterUserID     string          `bun:"voter_user_id" json:"voterUserId"`
	Reason          *string         `bun:"reason" json:"reason"`
	Payload         json.RawMessage `bun:"payload" json:"payload,omitempty"`
	CreatedAt       time.Time       `bun:"created_at" json:"createdAt"`
	UpdatedAt       time.Time       `bun:"updated_at" json:"updatedAt"`
}

// feedbackIssue resolves the issue of a feedback route; an issue of a company the caller
// cannot see answers 404 like an unknown one, so votes and traces do not reveal other
// companies' issues.
func (w *Work) feedbackIssue(ctx context.Context, ref string) (*Issue, error) {
	iss, err := w.issueGet(ctx, nil, ref)
	if err != nil {
		return nil, err
	}
	if iss == nil || !sdk.CanAccessCompany(sdk.ActorFrom(ctx), iss.CompanyID) {
		return nil, notFound("Issue not found")
	}
	if err := requireCompanyAccess(ctx, iss.CompanyID); err != nil {
		return nil, err // a viewer's write
	}
	return iss, nil
}

// requireBoard refuses callers that are not board users.
func requireBoard(ctx context.Context) error {
	if a := sdk.ActorFrom(ctx); a.Type != "board" || a.UserId == "" {
		return forbidden("Board access required")
	}
	return nil
}

// feedbackSharing reports whether the company shares feedback data: the instance's general
// setting feedbackDataSharingPreference not_allowed turns sharing off for every company;
// otherwise the company's feedbackDataSharingEnabled decides.
func (w *Work) feedbackSharing(ctx context.Context, companyID string) (bool, error) {
	st, err := w.host.Settings.Get(ctx, &hostv1.GetSettingsRequest{Section: "general"})
	if err != nil {
		return false, fmt.Errorf("error reading the general instance settings: %w", err)
	}
	var general struct {
		FeedbackDataSharingPreference string `json:"feedbackDataSharingPreference"`
	}
	if err := json.Unmarshal(st.GetSettingsJson(), &general); err != nil {
		return false, fmt.Errorf("error decoding the general instance settings: %w", err)
	}
	if general.FeedbackDataSharingPreference == "not_allowed" {
		return false, nil
	}
	res, err := w.host.Companies.Get(ctx, &hostv1.GetCompanyRequest{CompanyId: companyID})
	if err != nil {
		return false, fmt.Errorf("error reading company %s: %w", companyID, err)
	}
	var co struct {
		FeedbackDataSharingEnabled bool `json:"feedbackDataSharingEnabled"`
	}
	if err := json.Unmarshal(res.GetCompanyJson(), &co); err != nil {
		return false, fmt.Errorf("error decoding company %s: %w", companyID, err)
	}
	return co.FeedbackDataSharingEnabled, nil
}

// feedbackTarget is what a vote needs from its target.
type feedbackTarget struct {
	label         string
	authorAgentID *string
	payload       map[string]any
}

// feedbackTargetOf reads the vote's target on the issue: 404 when it is not there, 422 when
// no agent wrote it.
func (w *Work) feedbackTargetOf(ctx context.Context, iss *Issue, targetType, targetID string) (*feedbackTarget, error) {
	issue := map[string]any{"id": iss.ID, "identifier": iss.Identifier, "title": iss.Title}
	switch targetType {
	case FeedbackTargetComment:
		var c Comment
		err := w.db.NewSelect().Model(&c).Where("c.id = ? AND c.issue_id = ? AND c.deleted_at IS NULL", targetID, iss.ID).Scan(ctx)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, notFound("Comment not found")
		}
		if err != nil {
			return nil, fmt.Errorf("error reading comment %s: %w", targetID, err)
		}
		if c.AuthorType != AuthorTypeAgent || c.AuthorAgentID == nil {
			return nil, unprocessable(msgFeedbackCommentOnly)
		}
		return &feedbackTarget{
			label: "Comment on " + issueLabel(iss), authorAgentID: c.AuthorAgentID,
			payload: map[string]any{"issue": issue, "comment": map[string]any{
				"id": c.ID, "body": c.Body, "authorAgentId": c.AuthorAgentID, "createdByRunId": c.CreatedByRunID, "createdAt": c.CreatedAt}},
		}, nil
	default: // FeedbackTargetRevision
		var rev struct {
			ID               string    `bun:"id"`
			RevisionNumber   int       `bun:"revision_number"`
			Title            *string   `bun:"title"`
			Format           string    `bun:"format"`
			Body             string    `bun:"body"`
			CreatedByAgentID *string   `bun:"created_by_agent_id"`
			CreatedByRunID   *string   `bun:"created_by_run_id"`
			CreatedAt        time.Time `bun:"created_at"`
			Key              string    `bun:"key"`
		}
		err := w.db.NewSelect().TableExpr("document_revisions AS r").
			Join("JOIN issue_documents AS d ON d.document_id = r.document_id").
			ColumnExpr("r.id, r.revision_number, r.title, r.format, r.body, r.created_by_agent_id, r.created_by_run_id, r.created_at, d.key").
			Where("r.id = ? AND d.issue_id = ?", targetID, iss.ID).Scan(ctx, &rev)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, notFound("Document revision not found")
		}
		if err != nil {
			return nil, fmt.Errorf("error reading document revision %s: %w", targetID, err)
		}
		if rev.CreatedByAgentID == nil {
			return nil, unprocessable(msgFeedbackRevisionOnly)
		}
		return &feedbackTarget{
			label:         fmt.Sprintf("%s %s revision %d", issueLabel(iss), rev.Key, rev.RevisionNumber),
			authorAgentID: rev.CreatedByAgentID,
			payload: map[string]any{"issue": issue, "documentRevision": map[string]any{
				"id": rev.ID, "key": rev.Key, "revisionNumber": rev.RevisionNumber, "title": rev.Title, "format": rev.Format,
				"body": rev.Body, "createdByAgentId": rev.CreatedByAgentID, "createdByRunId": rev.CreatedByRunID, "createdAt": rev.CreatedAt}},
		}, nil
	}
}

// issueLabel names an issue in a trace label: its identifier, or its id when it has none.
func issueLabel(iss *Issue) string {
	if iss.Identifier == "" {
		return iss.ID
	}
	return iss.Identifier
}

func handleFeedbackVote(w *Work, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	iss, err := w.feedbackIssue(ctx, r.PathValue("id"))
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	if err := requireBoard(ctx); err != nil {
		w.writeErr(rw, err)
		return
	}
	var body feedbackVoteBody
	if err := decodeBody(r, &body); err != nil {
		w.writeErr(rw, err)
		return
	}
	var probs fieldProblems
	oneOf(&probs, "targetType", body.TargetType, feedbackTargetTypes)
	if !isUUID(body.TargetID) {
		probs.add("targetId", "must be a comment or document revision id")
	}
	oneOf(&probs, "vote", body.Vote, feedbackVotes)
	var reason *string
	if body.Reason != nil {
		if s := cleanText(&probs, "reason", *body.Reason, FeedbackReasonMaxLen); s != "" {
			reason = &s
		}
	}
	if err := probs.err(); err != nil {
		w.writeErr(rw, err)
		return
	}
	target, err := w.feedbackTargetOf(ctx, iss, body.TargetType, body.TargetID)
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	sharing, err := w.feedbackSharing(ctx, iss.CompanyID)
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	status := FeedbackStatusLocalOnly
	if sharing {
		status = FeedbackStatusShared
	}
	payload, err := json.Marshal(target.payload)
	if err != nil {
		w.writeErr(rw, fmt.Errorf("error encoding feedback payload: %w", err))
		return
	}
	v := &FeedbackVote{
		ID: uuid.NewString(), CompanyID: iss.CompanyID, IssueID: iss.ID, TargetType: body.TargetType, TargetID: body.TargetID,
		TargetLabel: target.label, AuthorAgentID: target.authorAgentID, VoterUserID: sdk.ActorFrom(ctx).UserId,
		Vote: body.Vote, Reason: reason, Status: status, Payload: payload,
	}
	_, err = w.db.NewInsert().Model(v).
		On("CONFLICT (target_type, target_id, voter_user_id) DO UPDATE").
		Set("vote = EXCLUDED.vote, reason = EXCLUDED.reason, status = EXCLUDED.status, payload = EXCLUDED.payload").
		Set("target_label = EXCLUDED.target_label, updated_at = now()").
		Returning("*, (xmax = 0) AS inserted").Exec(ctx)
	if err != nil {
		w.writeErr(rw, fmt.Errorf("error recording feedback vote on %s %s: %w", body.TargetType, body.TargetID, err))
		return
	}
	if err := w.activity(ctx, iss.CompanyID, "issue.feedback_vote.recorded", "issue", iss.ID,
		map[string]any{"voteId": v.ID, "targetType": v.TargetType, "targetId": v.TargetID, "vote": v.Vote}); err != nil {
		w.log.Warn("could not record feedback vote activity", "issue", iss.ID, "error", err)
	}
	code := http.StatusCreated
	if !v.Inserted {
		code = http.StatusOK
	}
	sdk.WriteJSON(rw, code, v)
}

func handleFeedbackVoteList(w *Work, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	iss, err := w.feedbackIssue(ctx, r.PathValue("id"))
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	votes := []*FeedbackVote{}
	if err := w.db.NewSelect().Model(&votes).Where("f.issue_id = ?", iss.ID).Order("f.created_at DESC", "f.id DESC").Scan(ctx); err != nil {
		w.writeErr(rw, fmt.Errorf("error listing feedback votes of issue %s: %w", iss.ID, err))
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, votes)
}

// traceFilter is a parsed feedback trace query.
type traceFilter struct {
	targetType, vote, status, projectID, issueID string
	from, to                                     *time.Time
	includePayload                               bool
}

// parseTraceFilter reads and checks the trace filters; a bad value is a 400 naming it.
func parseTraceFilter(r *http.Request) (*traceFilter, error) {
	qs := r.URL.Query()
	var probs fieldProblems
	f := &traceFilter{targetType: qs.Get("targetType"), vote: qs.Get("vote"), status: qs.Get("status"),
		projectID: qs.Get("projectId"), issueID: qs.Get("issueId")}
	if f.targetType != "" {
		oneOf(&probs, "targetType", f.targetType, feedbackTargetTypes)
	}
	if f.vote != "" {
		oneOf(&probs, "vote", f.vote, feedbackVotes)
	}
	if f.status != "" {
		oneOf(&probs, "status", f.status, feedbackStatuses)
	}
	if f.projectID != "" && !isUUID(f.projectID) {
		probs.add("projectId", "must be a project id")
	}
	if f.issueID != "" && !isUUID(f.issueID) {
		probs.add("issueId", "must be an issue id")
	}
	for _, t := range []struct {
		name string
		dst  **time.Time
	}{{"from", &f.from}, {"to", &f.to}} {
		if s := qs.Get(t.name); s != "" {
			v, dateOnly, err := parseISOTime(s)
			if err != nil {
				probs.add(t.name, "must be an ISO 8601 date or time")
				continue
			}
			if dateOnly && t.name == "to" {
				v = v.Add(24*time.Hour - time.Nanosecond) // a date as the end covers that whole day
			}
			*t.dst = &v
		}
	}
	sharedOnly, err := queryBool(qs.Get("sharedOnly"))
	if err != nil {
		probs.add("sharedOnly", err.Error())
	}
	if f.includePayload, err = queryBool(qs.Get("includePayload")); err != nil {
		probs.add("includePayload", err.Error())
	}
	if sharedOnly {
		if f.status == FeedbackStatusLocalOnly {
			probs.add("status", "local_only traces are not shared; drop sharedOnly or the status")
		}
		f.status = FeedbackStatusShared
	}
	return f, probs.err()
}

// parseISOTime parses an ISO 8601 time, or a plain date (midnight UTC, dateOnly true).
func parseISOTime(s string) (t time.Time, dateOnly bool, err error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, false, nil
	}
	t, err = time.Parse(time.DateOnly, s)
	return t, true, err
}

// queryBool parses an optional boolean query parameter (true/false/1/0; empty is false).
func queryBool(s string) (bool, error) {
	if s == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, errors.New("must be true or false")
	}
	return b, nil
}

func handleIssueFeedbackTraces(w *Work, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	iss, err := w.feedbackIssue(ctx, r.PathValue("id"))
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	if err := requireBoard(ctx); err != nil {
		w.writeErr(rw, err)
		return
	}
	f, err := parseTraceFilter(r)
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	if f.issueID != "" && f.issueID != iss.ID {
		w.writeErr(rw, invalid("issueId", "must be this issue's id"))
		return
	}
	f.issueID = iss.ID
	w.streamTraces(rw, r, iss.CompanyID, f, "json", payloadAll)
}

func handleCompanyFeedbackTraces(w *Work, rw http.ResponseWriter, r *http.Request) {
	f, err := parseTraceFilter(r)
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	w.streamTraces(rw, r, r.PathValue("companyId"), f, "json", payloadAll)
}

func handleCompanyFeedbackExport(w *Work, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	f, err := parseTraceFilter(r)
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	format := r.URL.Query().Get("format")
	if format == "" {
		format = "ndjson"
	}
	var probs fieldProblems
	if oneOf(&probs, "format", format, feedbackFormats); probs.err() != nil {
		w.writeErr(rw, probs.err())
		return
	}
	companyID := r.PathValue("companyId")
	sharing, err := w.feedbackSharing(ctx, companyID)
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	// An export leaves the instance: payload snapshots go only while the company shares
	// feedback data, and only those recorded with its consent.
	policy := payloadNone
	if sharing {
		policy = payloadSharedOnly
	}
	rw.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="feedback-traces-%s.%s"`, time.Now().UTC().Format("20060102T150405Z"), format))
	w.streamTraces(rw, r, companyID, f, format, policy)
}

// payloadPolicy says which traces' payloads a response may carry when includePayload asks.
type payloadPolicy int

const (
	payloadAll        payloadPolicy = iota // the company's own reads: every payload
	payloadSharedOnly                      // an export while sharing is on: shared traces only
	payloadNone                            // an export while sharing is off: none
)

// streamTraces writes the traces matching f, newest first, as a JSON array or as ndjson,
// one row at a time from a database cursor, so no result is held whole in memory.
func (w *Work) streamTraces(rw http.ResponseWriter, r *http.Request, companyID string, f *traceFilter, format string, policy payloadPolicy) {
	ctx := r.Context()
	q := w.db.NewSelect().TableExpr("feedback_votes AS f").
		Join("JOIN issues AS i ON i.id = f.issue_id").
		ColumnExpr("f.id, f.company_id, f.issue_id, i.identifier AS issue_identifier, i.project_id, f.vote, f.status").
		ColumnExpr("f.target_type, f.target_id, f.target_label, f.author_agent_id, f.voter_user_id, f.reason, f.created_at, f.updated_at").
		Where("f.company_id = ?", companyID).
		Order("f.created_at DESC", "f.id DESC")
	if f.includePayload {
		switch policy {
		case payloadAll:
			q = q.ColumnExpr("f.payload")
		case payloadSharedOnly:
			q = q.ColumnExpr("CASE WHEN f.status = ? THEN f.payload END AS payload", FeedbackStatusShared)
		}
	}
	for col, v := range map[string]string{"f.target_type": f.targetType, "f.vote": f.vote, "f.status": f.status,
		"i.project_id": f.projectID, "f.issue_id": f.issueID} {
		if v != "" {
			q = q.Where("? = ?", bun.Ident(col), v)
		}
	}
	if f.from != nil {
		q = q.Where("f.created_at >= ?", *f.from)
	}
	if f.to != nil {
		q = q.Where("f.created_at <= ?", *f.to)
	}
	rows, err := q.Rows(ctx)
	if err != nil {
		w.writeErr(rw, fmt.Errorf("error listing feedback traces of company %s: %w", companyID, err))
		return
	}
	defer rows.Close()

	if format == "ndjson" {
		rw.Header().Set("Content-Type", "application/x-ndjson; charset=utf-8")
	} else {
		rw.Header().Set("Content-Type", "application/json; charset=utf-8")
	}
	rw.WriteHeader(http.StatusOK)
	out := bufio.NewWriterSize(rw, 32<<10)
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	n := 0
	if format == "json" {
		_ = out.WriteByte('[')
	}
	for rows.Next() {
		var t FeedbackTrace
		if err := w.db.ScanRow(ctx, rows, &t); err != nil {
			w.log.Error("feedback trace stream failed", "company", companyID, "error", err)
			return // the status is sent: a truncated body is all that is left to signal
		}
		if format == "json" && n > 0 {
			_ = out.WriteByte(',')
		}
		if err := enc.Encode(&t); err != nil {
			w.log.Warn("feedback trace stream stopped", "company", companyID, "error", err)
			return
		}
		n++
	}
	if err := rows.Err(); err != nil {
		w.log.Error("feedback trace stream failed", "company", companyID, "error", err)
		return
	}
	if format == "json" {
		_ = out.WriteByte(']')
	}
	_ = out.Flush()
}
