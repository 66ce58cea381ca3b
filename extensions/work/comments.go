package work

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/idem"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

// Comment limits and defaults.
const (
	CommentBodyMaxLen       = 100000
	CommentListDefaultLimit = 50
	CommentListMaxLimit     = 500
	commentJSONMaxBytes     = 64 << 10
	commentUserIDMaxLen     = 255
)

// Comment author types.
const (
	AuthorTypeUser   = "user"
	AuthorTypeAgent  = "agent"
	AuthorTypeSystem = "system"
)

// Wake reasons a comment causes.
const (
	WakeReasonCommentMentioned = "issue_comment_mentioned"
	WakeReasonCommented        = "issue_commented"
)

func init() {
	addRoutes(
		route{Method: http.MethodGet, Path: "/api/issues/{id}/comments", Query: commentListQuery{}, Response: new([]*Comment), Summary: "List an issue's comments, oldest first (after: comment id or ISO time; order asc|desc; limit ≤ 500)",
			Handle: handleCommentList},
		route{Method: http.MethodGet, Path: "/api/issues/{id}/comments/{commentId}", Response: new(Comment), Summary: "Get one comment of an issue",
			Handle: handleCommentGet},
		route{Method: http.MethodPost, Path: "/api/issues/{id}/comments", Status: http.StatusCreated, Response: new(Comment), Summary: "Add a comment; @mentions wake the agents named, and the assignee agent is woken",
			Body: commentCreateBody{}, Handle: handleCommentCreate},
		route{Method: http.MethodDelete, Path: "/api/issues/{id}/comments/{commentId}", Response: new(Comment), Summary: "Delete a comment (its author or the board)",
			Handle: handleCommentDelete},
	)
	addMethods(map[string]method{
		"comments.add": {Description: "Add a comment to an issue of the call's company as the call's actor ({issueId, body, authorType?}).", Call: callCommentsAdd},
		"comments.get": {Description: "Read a live comment of an issue of the call's company ({issueId, commentId}); 404 \"Comment not found\" otherwise.", Call: callCommentsGet},
	})
}

// CommentInsertParams describes one comment to add.
type CommentInsertParams struct {
	Issue *Issue
	Body  string
	// AuthorType is user, agent or system; empty derives it from the context's actor.
	AuthorType string
	// OnBehalfOfUserID is set when an agent writes for a user.
	OnBehalfOfUserID string
	// Presentation is an optional JSON object ({kind: message|system_notice, tone, title, …}).
	Presentation json.RawMessage
	// Metadata is an optional JSON object ({version: 1, sections: […]}).
	Metadata json.RawMessage
	// Idempotent records the request's Idempotency-Key with the comment as the answer, in
	// the insert's transaction (the comment create route).
	Idempotent bool
}

// Comment is a row of ext_work.issue_comments and its API shape.
type Comment struct {
	bun.BaseModel `bun:"table:issue_comments,alias:c"`

	ID               string          `bun:"id,pk,type:uuid" json:"id"`
	CompanyID        string          `bun:"company_id,type:uuid" json:"companyId"`
	IssueID          string          `bun:"issue_id,type:uuid" json:"issueId"`
	AuthorAgentID    *string         `bun:"author_agent_id,type:uuid" json:"authorAgentId"`
	AuthorUserID     *string         `bun:"author_user_id" json:"authorUserId"`
	OnBehalfOfUserID *string         `bun:"on_behalf_of_user_id" json:"onBehalfOfUserId"`
	AuthorType       string          `bun:"author_type" json:"authorType"`
	CreatedByRunID   *string         `bun:"created_by_run_id" json:"createdByRunId"`
	Body             string          `bun:"body" json:"body"`
	Presentation     json.RawMessage `bun:"presentation,type:jsonb,nullzero" json:"presentation"`
	Metadata         json.RawMessage `bun:"metadata,type:jsonb,nullzero" json:"metadata"`
	DeletedAt        *time.Time      `bun:"deleted_at" json:"deletedAt"`
	DeletedByType    *string         `bun:"deleted_by_type" json:"deletedByType"`
	DeletedByAgentID *string         `bun:"deleted_by_agent_id,type:uuid" json:"deletedByAgentId"`
	DeletedByUserID  *string         `bun:"deleted_by_user_id" json:"deletedByUserId"`
	DeletedByRunID   *string         `bun:"deleted_by_run_id" json:"deletedByRunId"`
	CreatedAt        time.Time       `bun:"created_at" json:"createdAt"`
	UpdatedAt        time.Time       `bun:"updated_at" json:"updatedAt"`
}

// commentCreateBody is the body of POST /api/issues/{id}/comments.
type commentCreateBody struct {
	Body             *string         `json:"body" jsonschema:"required,maxLength=100000"`
	OnBehalfOfUserID string          `json:"onBehalfOfUserId,omitempty"`
	AuthorType       string          `json:"authorType,omitempty" jsonschema:"enum=user,enum=agent,enum=system"`
	Presentation     json.RawMessage `json:"presentation,omitempty"`
	Metadata         json.RawMessage `json:"metadata,omitempty"`
}

// attribution is who a write is recorded against: the actor's agent, user and run.
type attribution struct {
	Type    string
	AgentID *string
	UserID  *string
	RunID   *string
}

// attributionOf reads the attribution of an actor (board → user, agent → agent and run).
func attributionOf(a *sdk.Actor) attribution {
	switch a.Type {
	case "agent":
		return attribution{Type: AuthorTypeAgent, AgentID: nonEmptyPtr(a.AgentId), RunID: nonEmptyPtr(a.RunId)}
	case "board":
		return attribution{Type: AuthorTypeUser, UserID: nonEmptyPtr(a.UserId)}
	}
	return attribution{Type: AuthorTypeSystem}
}

// nonEmptyPtr returns &s, or nil for "".
func nonEmptyPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// rawObjectField checks an optional JSON object field: absent or null is nil, anything but
// an object of at most maxBytes is a validation error naming path.
func rawObjectField(path string, raw json.RawMessage, maxBytes int) (json.RawMessage, error) {
	trimmed := strings.TrimSpace(string(raw))
	if trimmed == "" || trimmed == "null" {
		return nil, nil
	}
	if len(trimmed) > maxBytes {
		return nil, invalid(path, fmt.Sprintf("must be at most %d bytes", maxBytes))
	}
	var obj map[string]json.RawMessage
	if !strings.HasPrefix(trimmed, "{") || json.Unmarshal([]byte(trimmed), &obj) != nil {
		return nil, invalid(path, "must be an object")
	}
	return json.RawMessage(trimmed), nil
}

// commentInsert adds a comment, records activity and requests the wakes a comment causes.
// It is shared by POST /api/issues/{id}/comments, PATCH /api/issues/{id} with "comment"
// and the comments.add method. The author is the context's actor.
func (w *Work) commentInsert(ctx context.Context, p *CommentInsertParams) (*Comment, error) {
	if p.Issue == nil {
		return nil, notFound("Issue not found")
	}
	actor := sdk.ActorFrom(ctx)
	by := attributionOf(actor)
	if strings.TrimSpace(p.Body) == "" {
		return nil, invalid("body", "must not be empty")
	}
	if utf8.RuneCountInString(p.Body) > CommentBodyMaxLen {
		return nil, invalid("body", fmt.Sprintf("must be at most %d characters", CommentBodyMaxLen))
	}
	authorType := by.Type
	if p.AuthorType != "" {
		allowed := map[string][]string{
			AuthorTypeAgent:  {AuthorTypeAgent},
			AuthorTypeUser:   {AuthorTypeUser, AuthorTypeSystem},
			AuthorTypeSystem: {AuthorTypeSystem},
		}[by.Type]
		switch {
		case p.AuthorType != AuthorTypeUser && p.AuthorType != AuthorTypeAgent && p.AuthorType != AuthorTypeSystem:
			return nil, invalid("authorType", "must be one of user, agent, system")
		case by.Type == AuthorTypeAgent && p.AuthorType == AuthorTypeSystem:
			return nil, forbidden("Only the board can write system comments")
		case !containsString(allowed, p.AuthorType):
			return nil, invalid("authorType", fmt.Sprintf("a %s caller cannot write as %s", by.Type, p.AuthorType))
		}
		authorType = p.AuthorType
	}
	if p.OnBehalfOfUserID != "" && by.Type == AuthorTypeAgent {
		return nil, forbidden("Only the board can write a comment on behalf of a user")
	}
	if len(p.OnBehalfOfUserID) > commentUserIDMaxLen {
		return nil, invalid("onBehalfOfUserId", fmt.Sprintf("must be at most %d characters", commentUserIDMaxLen))
	}
	presentation, err := rawObjectField("presentation", p.Presentation, commentJSONMaxBytes)
	if err != nil {
		return nil, err
	}
	if presentation != nil {
		var pres struct {
			Kind *string `json:"kind"`
		}
		if json.Unmarshal(presentation, &pres) != nil || (pres.Kind != nil && *pres.Kind != "message" && *pres.Kind != "system_notice") {
			return nil, invalid("presentation.kind", "must be message or system_notice")
		}
	}
	metadata, err := rawObjectField("metadata", p.Metadata, commentJSONMaxBytes)
	if err != nil {
		return nil, err
	}

	now := time.Now().UTC().Truncate(time.Microsecond)
	c := &Comment{
		ID: uuid.Must(uuid.NewV7()).String(), CompanyID: p.Issue.CompanyID, IssueID: p.Issue.ID,
		AuthorAgentID: by.AgentID, AuthorUserID: by.UserID, OnBehalfOfUserID: nonEmptyPtr(p.OnBehalfOfUserID),
		AuthorType: authorType, CreatedByRunID: by.RunID, Body: p.Body, Presentation: presentation, Metadata: metadata,
		CreatedAt: now, UpdatedAt: now,
	}
	// The comment, its activity entry and the wakes it causes commit together (sdk/outbox).
	wakes := w.commentWakes(ctx, p.Issue, c)
	var fx effects
	err = w.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewInsert().Model(c).Exec(ctx); err != nil {
			return err
		}
		if err := w.activityTx(ctx, tx, &fx, c.CompanyID, "issue.comment.created", "issue", c.IssueID, map[string]any{"commentId": c.ID}); err != nil {
			return err
		}
		for _, wake := range wakes {
			if err := w.wakeTx(ctx, tx, &fx, wake); err != nil {
				return err
			}
		}
		if p.Idempotent && idem.Keyed(ctx) {
			return idem.RecordJSON(ctx, tx, http.StatusCreated, c)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("error inserting comment on issue %s: %w", p.Issue.ID, err)
	}
	w.deliver(ctx, &fx)
	return c, nil
}

// commentWakes are the wakes of every agent the comment mentions and of the issue's assignee
// agent; an agent's own comment never wakes that agent.
func (w *Work) commentWakes(ctx context.Context, iss *Issue, c *Comment) []*WakeRequest {
	var out []*WakeRequest
	author := ""
	if c.AuthorAgentID != nil {
		author = *c.AuthorAgentID
	}
	woken := map[string]bool{author: true}
	for _, agentID := range w.commentMentions(ctx, c) {
		if woken[agentID] {
			continue
		}
		woken[agentID] = true
		out = append(out, &WakeRequest{
			AgentID: agentID, CompanyID: c.CompanyID, Source: "automation", Reason: WakeReasonCommentMentioned,
			Payload:        map[string]any{"issueId": c.IssueID, "commentId": c.ID},
			IdempotencyKey: "mention:" + c.ID + ":" + agentID,
		})
	}
	if iss.AssigneeAgentID != nil && !woken[*iss.AssigneeAgentID] {
		agentID := *iss.AssigneeAgentID
		out = append(out, &WakeRequest{
			AgentID: agentID, CompanyID: c.CompanyID, Source: "automation", Reason: WakeReasonCommented,
			Payload:        map[string]any{"issueId": c.IssueID, "commentId": c.ID},
			IdempotencyKey: "comment:" + c.ID + ":" + agentID,
		})
	}
	return out
}

// commentMentions returns the ids of the company's live agents a comment mentions. A
// failure to list agents is logged: the comment stands without its mention wakes.
func (w *Work) commentMentions(ctx context.Context, c *Comment) []string {
	if !strings.Contains(c.Body, "@") {
		return nil
	}
	res, err := w.host.Principals.ListAgents(ctx, &hostv1.ListAgentsRequest{CompanyId: c.CompanyID})
	if err != nil {
		w.log.Warn("error listing agents for mentions", "comment", c.ID, "error", err)
		return nil
	}
	candidates := make([]MentionCandidate, 0, len(res.Agents))
	for _, a := range res.Agents {
		if a.Status == "terminated" {
			continue
		}
		candidates = append(candidates, MentionCandidate{ID: a.Id, Name: a.Name, URLKey: a.UrlKey})
	}
	return ParseMentions(c.Body, candidates)
}

// MentionCandidate is an agent a comment may mention, by name or by URL key.
type MentionCandidate struct {
	ID     string
	Name   string
	URLKey string
}

// mentionKeyMaxBytes bounds the names and URL keys ParseMentions looks for, which bounds its
// work to the body's length times the candidates' key lengths.
const mentionKeyMaxBytes = 256

// ParseMentions returns the IDs of the candidates that body mentions as @Name or @url-key,
// compared case-insensitively, in order of first mention and without duplicates. A mention
// starts at an "@" not preceded by a letter, digit, "_" or "-" (so e-mail addresses do not
// count) and must end where the text does or at a rune other than those; the longest
// matching name wins, and every candidate with that name is mentioned. Names and keys are
// trimmed; empty ones and ones longer than 256 bytes never match.
func ParseMentions(body string, candidates []MentionCandidate) []string {
	var out []string
	seen := map[string]bool{}
	for i := 0; i < len(body); i++ {
		if body[i] != '@' {
			continue
		}
		if i > 0 {
			if prev, _ := utf8.DecodeLastRuneInString(body[:i]); isMentionNameRune(prev) {
				continue
			}
		}
		rest := body[i+1:]
		bestLen := 0
		var best []string
		for _, c := range candidates {
			matched := 0
			for _, key := range [2]string{c.Name, c.URLKey} {
				key = strings.TrimSpace(key)
				if key == "" || len(key) > mentionKeyMaxBytes {
					continue
				}
				n, ok := hasPrefixFold(rest, key)
				if !ok || n <= matched {
					continue
				}
				if next, _ := utf8.DecodeRuneInString(rest[n:]); n < len(rest) && isMentionNameRune(next) {
					continue
				}
				matched = n
			}
			switch {
			case matched == 0:
			case matched > bestLen:
				bestLen, best = matched, []string{c.ID}
			case matched == bestLen:
				best = append(best, c.ID)
			}
		}
		for _, id := range best {
			if !seen[id] {
				seen[id] = true
				out = append(out, id)
			}
		}
	}
	return out
}

// isMentionNameRune reports whether r continues a name: a letter, a digit, "_" or "-".
func isMentionNameRune(r rune) bool {
	return r == '_' || r == '-' || unicode.IsLetter(r) || unicode.IsDigit(r)
}

// hasPrefixFold reports whether s starts with prefix under simple Unicode case folding and
// how many bytes of s the prefix covers.
func hasPrefixFold(s, prefix string) (int, bool) {
	n := 0
	for _, pr := range prefix {
		if n >= len(s) {
			return 0, false
		}
		if c := s[n]; c < utf8.RuneSelf && pr < utf8.RuneSelf {
			if lowerASCII(c) != lowerASCII(byte(pr)) {
				return 0, false
			}
			n++
			continue
		}
		sr, size := utf8.DecodeRuneInString(s[n:])
		if sr != pr && !equalFoldRune(sr, pr) {
			return 0, false
		}
		n += size
	}
	return n, true
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func equalFoldRune(a, b rune) bool {
	for r := unicode.SimpleFold(a); r != a; r = unicode.SimpleFold(r) {
		if r == b {
			return true
		}
	}
	return false
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// commentGet loads a live (not deleted) comment of an issue; missing is 404 "Comment not found".
func (w *Work) commentGet(ctx context.Context, db bun.IDB, issueID, commentID string) (*Comment, error) {
	if !isUUID(commentID) {
		return nil, notFound("Comment not found")
	}
	c := new(Comment)
	q := db.NewSelect().Model(c).Where("c.id = ? AND c.issue_id = ? AND c.deleted_at IS NULL", commentID, issueID)
	if _, ok := db.(bun.Tx); ok {
		q = q.For("UPDATE")
	}
	if err := q.Scan(ctx); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, notFound("Comment not found")
		}
		return nil, fmt.Errorf("error reading comment %s: %w", commentID, err)
	}
	return c, nil
}

func handleCommentList(w *Work, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	iss, err := w.issueByRef(ctx, r.PathValue("id"))
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	limit, offset, err := page(r, CommentListDefaultLimit, CommentListMaxLimit)
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	query := r.URL.Query()
	order := query.Get("order")
	if order == "" {
		order = "asc"
	}
	if order != "asc" && order != "desc" {
		w.writeErr(rw, invalid("order", "must be asc or desc"))
		return
	}
	comments := []*Comment{}
	q := w.db.NewSelect().Model(&comments).Where("c.issue_id = ? AND c.deleted_at IS NULL", iss.ID)
	if after := query.Get("after"); after != "" {
		if isUUID(after) {
			var cursor Comment
			err := w.db.NewSelect().Model(&cursor).Column("id", "created_at").Where("c.id = ? AND c.issue_id = ?", after, iss.ID).Scan(ctx)
			if errors.Is(err, sql.ErrNoRows) {
				w.writeErr(rw, invalid("after", "no such comment on this issue"))
				return
			}
			if err != nil {
				w.writeErr(rw, fmt.Errorf("error reading comment cursor %s: %w", after, err))
				return
			}
			q = q.Where("(c.created_at, c.id) > (?, ?)", cursor.CreatedAt, cursor.ID)
		} else {
			t, err := time.Parse(time.RFC3339Nano, after)
			if err != nil {
				w.writeErr(rw, invalid("after", "must be a comment id or an ISO 8601 time"))
				return
			}
			q = q.Where("c.created_at > ?", t)
		}
	}
	if order == "desc" {
		q = q.OrderExpr("c.created_at DESC, c.id DESC")
	} else {
		q = q.OrderExpr("c.created_at ASC, c.id ASC")
	}
	if err := q.Limit(int64(limit)).Offset(int64(offset)).Scan(ctx); err != nil {
		w.writeErr(rw, fmt.Errorf("error listing comments of issue %s: %w", iss.ID, err))
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, comments)
}

func handleCommentGet(w *Work, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	iss, err := w.issueByRef(ctx, r.PathValue("id"))
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	c, err := w.commentGet(ctx, w.db, iss.ID, r.PathValue("commentId"))
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, c)
}

func handleCommentCreate(w *Work, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	iss, err := w.issueByRef(ctx, r.PathValue("id"))
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	var body commentCreateBody
	if err := decodeBody(r, &body); err != nil {
		w.writeErr(rw, err)
		return
	}
	if body.Body == nil {
		w.writeErr(rw, invalid("body", "required"))
		return
	}
	c, err := w.commentInsert(ctx, &CommentInsertParams{
		Issue: iss, Body: *body.Body, AuthorType: body.AuthorType, OnBehalfOfUserID: body.OnBehalfOfUserID,
		Presentation: body.Presentation, Metadata: body.Metadata, Idempotent: true,
	})
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusCreated, c)
}

func handleCommentDelete(w *Work, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	iss, err := w.issueByRef(ctx, r.PathValue("id"))
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	actor := sdk.ActorFrom(ctx)
	by := attributionOf(actor)
	var c *Comment
	err = w.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var err error
		if c, err = w.commentGet(ctx, tx, iss.ID, r.PathValue("commentId")); err != nil {
			return err
		}
		isAuthor := actor.Type == "agent" && c.AuthorAgentID != nil && *c.AuthorAgentID == actor.AgentId
		if actor.Type != "board" && !isAuthor {
			return forbidden("Only the comment's author or the board can delete it")
		}
		now := time.Now().UTC().Truncate(time.Microsecond)
		c.DeletedAt, c.DeletedByType = &now, &by.Type
		c.DeletedByAgentID, c.DeletedByUserID, c.DeletedByRunID = by.AgentID, by.UserID, by.RunID
		c.UpdatedAt = now
		_, err = tx.NewUpdate().Model(c).
			Column("deleted_at", "deleted_by_type", "deleted_by_agent_id", "deleted_by_user_id", "deleted_by_run_id", "updated_at").
			WherePK().Exec(ctx)
		return err
	})
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	if err := w.activity(ctx, c.CompanyID, "issue.comment.deleted", "issue", c.IssueID, map[string]any{"commentId": c.ID}); err != nil {
		w.log.Warn("error recording comment activity", "comment", c.ID, "error", err)
	}
	sdk.WriteJSON(rw, http.StatusOK, c)
}

// commentsAddInput is the input of the comments.add method.
type commentsAddInput struct {
	IssueID    string `json:"issueId"`
	Body       string `json:"body"`
	AuthorType string `json:"authorType,omitempty"`
}

// callCommentsAdd serves comments.add: a comment by the call's actor on an issue of the
// call's company.
func callCommentsAdd(w *Work, ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in commentsAddInput
	if err := call.Bind(&in); err != nil {
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
	iss, err := w.issueGet(ctx, nil, in.IssueID)
	if err != nil {
		return nil, err
	}
	if iss == nil {
		return nil, notFound("Issue not found")
	}
	if iss.CompanyID != call.CompanyID {
		return nil, forbidden("Issue belongs to another company")
	}
	return w.commentInsert(ctx, &CommentInsertParams{Issue: iss, Body: in.Body, AuthorType: in.AuthorType})
}

// callCommentsGet serves comments.get: one live comment of an issue of the call's company.
func callCommentsGet(w *Work, ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in struct {
		IssueID   string `json:"issueId"`
		CommentID string `json:"commentId"`
	}
	if err := call.Bind(&in); err != nil {
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
	if !isUUID(in.IssueID) {
		return nil, notFound("Comment not found")
	}
	c, err := w.commentGet(ctx, w.db, in.IssueID, in.CommentID)
	if err != nil {
		return nil, err
	}
	if c.CompanyID != call.CompanyID {
		return nil, notFound("Comment not found")
	}
	return c, nil
}

// commentListQuery documents the query parameters of the comment list.
type commentListQuery struct {
	After  string `query:"after" doc:"A comment id or an ISO 8601 time: comments after it"`
	Order  string `query:"order" jsonschema:"enum=asc,enum=desc"`
	Limit  int    `query:"limit" jsonschema:"minimum=1,maximum=500"`
	Offset int    `query:"offset" jsonschema:"minimum=0"`
}
